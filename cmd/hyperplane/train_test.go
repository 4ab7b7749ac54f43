package main

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestTrainCountsInvalidAndFailsWhenNothingLearned: the JSON line counts
// the records skipped as invalid, and an input with no labeled example
// (none at all, none valid, none labeled) is an error, exit status 1,
// with the line still printed and no model file written.
func TestTrainCountsInvalidAndFailsWhenNothingLearned(t *testing.T) {
	cases := []struct {
		name, input       string
		examples, invalid float64
		why               string
	}{
		{"some invalid", "{\"label\":1,\"features\":{\"a\":1}}\nnot json\n{\"label\":7,\"features\":{\"a\":1}}\n{\"label\":-1,\"features\":{\"b\":1}}\n", 2, 2, ""},
		{"empty", "", 0, 0, "it holds no example"},
		{"none valid", "not json\n{\"label\":7,\"features\":{\"a\":1}}\n{\"label\":1,\"features\":{\"b\":[1]}}\n", 0, 3, "none of its 3 records is a valid example"},
		{"none labeled", "{\"features\":{\"a\":1}}\n{\"features\":{\"b\":1}}\n", 2, 0, "none of its 2 valid examples has a label"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			in := filepath.Join(t.TempDir(), "in.jsonl")
			if err := os.WriteFile(in, []byte(c.input), 0o644); err != nil {
				t.Fatal(err)
			}
			modelPath := filepath.Join(t.TempDir(), "m.model")
			out, stderr, err := runCmd(t, "", "train", "-input", in, "-out", modelPath)
			var got struct{ Examples, Invalid float64 }
			if jerr := json.Unmarshal([]byte(out), &got); jerr != nil || strings.Count(out, "\n") != 1 {
				t.Fatalf("want one JSON line, got %q (%v)\n%s", out, jerr, stderr)
			}
			if got.Examples != c.examples || got.Invalid != c.invalid {
				t.Errorf("examples %v, invalid %v; want %v, %v: %s", got.Examples, got.Invalid, c.examples, c.invalid, out)
			}
			_, statErr := os.Stat(modelPath)
			if c.why == "" {
				if err != nil || statErr != nil {
					t.Fatalf("train: %v; model file: %v", err, statErr)
				}
				return
			}
			var u *usageError
			if err == nil || errors.As(err, &u) {
				t.Fatalf("train learned nothing and returned %v, want an error (exit status 1)", err)
			}
			for _, want := range []string{"nothing learned from " + in, c.why, "no model written to " + modelPath} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q does not say %q", err, want)
				}
			}
			if !errors.Is(statErr, os.ErrNotExist) {
				t.Errorf("a model file was written for a model that learned nothing (%v)", statErr)
			}
		})
	}
}
