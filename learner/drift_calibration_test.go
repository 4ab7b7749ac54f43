package learner_test

import (
	"math"
	"testing"

	"github.com/hyperplane-ml/hyperplane/learner"
	"github.com/hyperplane-ml/hyperplane/learner/synth"
)

// TestDriftRestartsTheCalibration: a change of concept starts the model's
// parameters afresh, and the probabilities it publishes after it must not
// read the new model's scores by the old model's scale and outcomes. Over
// the 10,000 examples after the drift the restarted model is barely better
// than chance, and its probabilities' log-loss must be no worse than a
// constant 1/2's (ln 2): with the old calibration they were overconfident,
// 0.70 on this stream.
func TestDriftRestartsTheCalibration(t *testing.T) {
	cfg := learner.DefaultConfig()
	o := synth.DefaultOptions()
	o.Seed, o.Vocab, o.DriftAt = 7, 100000, 200000
	xs := genStream(o, 230000, cfg).xs
	m := mustNew(t, cfg)
	found := -1
	var loss float64
	var n int
	for i := range xs {
		out := m.Learn(&xs[i])
		if found >= 0 && i > found && n < 10000 {
			p := out.Probability
			if xs[i].Label < 0 {
				p = 1 - p
			}
			loss -= math.Log(max(p, 1e-15))
			n++
		}
		if out.Drift != nil && found < 0 {
			found = i
		}
	}
	if found < int(o.DriftAt) || n < 10000 {
		t.Fatalf("the drift at %d was found at %d, %d examples after it", o.DriftAt, found, n)
	}
	ll := loss / float64(n)
	t.Logf("drift at %d found at %d; log-loss %.4f over the next %d examples (a constant 1/2: %.4f)", o.DriftAt, found, ll, n, math.Ln2)
	if ll > math.Ln2 {
		t.Errorf("log-loss %.4f over the 10,000 examples after the drift at %d, worse than a constant 1/2's %.4f", ll, found, math.Ln2)
	}
}
