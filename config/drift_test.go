package config

import (
	"crypto/sha256"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hyperplane-ml/hyperplane/learner"
)

// TestDriftKeys: model.drift is a key of the file, the environment and
// the flags, Load copies it into the learner's settings, and a bad value
// is refused naming model.drift.<field>.
func TestDriftKeys(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "c.yaml")
	if err := os.WriteFile(file, []byte("model:\n  drift:\n    delta: 0.1\n    min_examples: 500\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"HYPERPLANE_MODEL_DRIFT_ENABLED": "false"}
	c, err := Load([]string{"--config", file, "--model.drift.threshold", "50"}, func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	want := learner.DriftConfig{Enabled: false, Delta: 0.1, Threshold: 50, MinExamples: 500}
	if c.Model.Drift != want || c.Model.Learner.Drift != want {
		t.Fatalf("model.drift %+v, learner's %+v, want %+v", c.Model.Drift, c.Model.Learner.Drift, want)
	}
	if d := Default(); d.Model.Drift != learner.DefaultDrift() || d.Model.Learner.Drift != learner.DefaultDrift() {
		t.Fatalf("default model.drift %+v, learner's %+v", d.Model.Drift, d.Model.Learner.Drift)
	}

	for _, tc := range []struct{ flag, value, field string }{
		{"--model.drift.threshold", "0", "model.drift.threshold"},
		{"--model.drift.delta", "-0.5", "model.drift.delta"},
		{"--model.drift.min_examples", "0", "model.drift.min_examples"},
	} {
		c, err := Load([]string{tc.flag, tc.value}, func(string) string { return "" })
		if err != nil {
			t.Fatal(err)
		}
		c.Source = validKafka().Source
		var fe *FieldError
		if err := c.Validate(); !errors.As(err, &fe) || fe.Field != tc.field {
			t.Errorf("%s %s: got %v, want an error naming %s", tc.flag, tc.value, err, tc.field)
		}
	}

	c = validKafka()
	c.Model.Drift.Enabled = false
	var fe *FieldError
	if err := c.Validate(); !errors.As(err, &fe) || fe.Field != "model.drift" {
		t.Errorf("model.drift set but not copied into the learner's: got %v, want an error naming model.drift", err)
	}
}

// TestHistoryDigestDrift: at its defaults the detector is left out of the
// history, so that an epoch log written before it existed keeps its
// digest; other settings are in it.
func TestHistoryDigestDrift(t *testing.T) {
	c := validKafka()
	h := history{Model: c.Model.Name, Learner: c.Model.Learner, Scope: string(c.Model.Scope), Weights: c.Model.Mixing.Weights,
		Rule: c.MixRule(), Kind: c.Source.Kind, Topics: c.Source.Topics, Group: c.KafkaGroup(), Format: string(c.Source.Format),
		MaxBytes: c.Source.MaxBytes, MaxFeatures: c.Source.MaxFeatures}
	h.Learner.Drift = learner.DriftConfig{}
	b, err := json.Marshal(h)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(b), "drift") || c.HistoryDigest() != sha256.Sum256(b) {
		t.Fatalf("the history at the default detector is %s, digest %x: want no drift in it", b, c.HistoryDigest())
	}
	off := validKafka()
	off.Model.Drift.Enabled = false
	off.Model.Learner.Drift = off.Model.Drift
	if off.HistoryDigest() == c.HistoryDigest() {
		t.Error("a disabled detector has the default's history digest")
	}
}
