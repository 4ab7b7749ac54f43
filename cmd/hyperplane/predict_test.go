package main

import (
	"bufio"
	"context"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hyperplane-ml/hyperplane/learner"
	"github.com/hyperplane-ml/hyperplane/snapshot"
	"github.com/hyperplane-ml/hyperplane/wire"
)

// TestPredictCarriesProbability: every line of predict carries the
// model's calibrated probability, in [0, 1], bit for bit the one the
// model file's model gives the example; a multiclass model's lines carry
// every class's too, summing to 1, the predicted class's being the
// probability.
func TestPredictCarriesProbability(t *testing.T) {
	dir := t.TempDir()
	for _, classes := range []string{"0", "3"} {
		train := genFile(t, dir, "train"+classes+".jsonl", "-examples", "3000", "-seed", "2", "-classes", classes)
		test := genFile(t, dir, "test"+classes+".jsonl", "-examples", "300", "-seed", "3", "-classes", classes, "-unlabeled", "0.5")
		modelPath := filepath.Join(dir, "m"+classes+".model")
		mustRun(t, "", "train", "-input", train, "-classes", classes, "-out", modelPath)
		out := mustRun(t, "", "predict", "-model", modelPath, "-input", test)

		s, err := snapshot.Load(context.Background(), modelPath)
		if err != nil {
			t.Fatal(err)
		}
		model, err := learner.Restore(s.State)
		if err != nil {
			t.Fatal(err)
		}
		raw, err := os.ReadFile(test)
		if err != nil {
			t.Fatal(err)
		}
		examples := strings.Split(strings.TrimSuffix(string(raw), "\n"), "\n")
		dec := wire.NewDecoder(model.Config(), wire.DecoderOptions{})
		var x learner.Example
		sc := bufio.NewScanner(strings.NewReader(out))
		n := 0
		for ; sc.Scan(); n++ {
			var ev struct {
				Predicted     any                `json:"predicted"`
				Probability   *float64           `json:"probability"`
				Probabilities map[string]float64 `json:"probabilities"`
			}
			if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
				t.Fatalf("line %d: %v: %s", n+1, err, sc.Text())
			}
			if _, err := dec.Decode([]byte(examples[n]), &x); err != nil {
				t.Fatal(err)
			}
			want := model.Predict(&x)
			if ev.Probability == nil || *ev.Probability != want.Probability || !(*ev.Probability >= 0 && *ev.Probability <= 1) {
				t.Fatalf("classes %s, line %d: probability %v, the model's %v: %s", classes, n+1, ev.Probability, want.Probability, sc.Text())
			}
			if classes == "0" {
				if ev.Probabilities != nil {
					t.Fatalf("line %d: a binary model's probabilities: %s", n+1, sc.Text())
				}
				continue
			}
			var sum float64
			for c, p := range ev.Probabilities {
				if p != want.Probabilities[int(c[0]-'0')] {
					t.Fatalf("line %d: class %s's probability %v, the model's %v", n+1, c, p, want.Probabilities)
				}
				sum += p
			}
			if predicted, _ := ev.Predicted.(string); len(ev.Probabilities) != 3 || math.Abs(sum-1) > 1e-9 || ev.Probabilities[predicted] != *ev.Probability {
				t.Fatalf("line %d: want 3 probabilities summing to 1, the predicted class's the probability: %s", n+1, sc.Text())
			}
		}
		if n != len(examples) {
			t.Fatalf("classes %s: %d lines for %d examples", classes, n, len(examples))
		}
	}
}
