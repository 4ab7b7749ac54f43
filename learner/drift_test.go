package learner_test

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/hyperplane-ml/hyperplane/learner"
	"github.com/hyperplane-ml/hyperplane/learner/synth"
)

// TestPageHinkley: on losses of a constant rate it raises no alarm; when
// the rate rises by more than Delta it raises one soon after, and starts
// again; when the rate falls it raises none.
func TestPageHinkley(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	loss := func(p float64) float64 {
		if r.Float64() < p {
			return 1
		}
		return 0
	}
	d := learner.DefaultPageHinkley()
	for i := range 200000 {
		if d.Add(loss(0.3)) {
			t.Fatalf("an alarm at loss %d of a constant rate", i)
		}
	}
	for i := range 20000 {
		if d.Add(loss(0.5)) {
			if i > 2000 {
				t.Errorf("the rise from 0.3 to 0.5 found after %d losses, want within 2,000", i)
			}
			for j := range 100000 {
				if d.Add(loss(0.1)) {
					t.Fatalf("an alarm at loss %d after the rate fell", j)
				}
			}
			return
		}
	}
	t.Fatal("no alarm in 20,000 losses after the rate rose from 0.3 to 0.5")
}

// BenchmarkDriftDetection runs DefaultPageHinkley over the prequential
// mistakes of four learners on the synthetic stream of 1M examples
// (40 of 100,000 features, 5% noise, 2^18 weights), stationary and with
// its hidden hyperplane changed for an independent one at 500,000, and
// reports the false alarms and the detection delay.
func BenchmarkDriftDetection(b *testing.B) {
	const n, at = 1_000_000, 500_000
	for _, c := range []struct {
		alg   learner.Algorithm
		drift bool
	}{
		{learner.Perceptron, false}, {learner.Perceptron, true},
		{learner.AROW, false}, {learner.AROW, true},
		{learner.Averaged, false}, {learner.Averaged, true},
		{learner.PA1, false}, {learner.PA1, true},
	} {
		drift := c.drift
		b.Run(fmt.Sprintf("algorithm=%s/drift=%v", c.alg, drift), func(b *testing.B) {
			o := synth.DefaultOptions()
			o.Vocab, o.Seed = 100000, 1
			if drift {
				o.DriftAt = at
			}
			cfg := perceptronConfig()
			cfg.HashBits, cfg.Algorithm = 18, c.alg
			xs := genStream(o, n, cfg).xs
			b.ResetTimer()
			for range b.N {
				m, err := learner.New(cfg)
				if err != nil {
					b.Fatal(err)
				}
				d := learner.DefaultPageHinkley()
				falseAlarms, delay := 0, -1
				for i := range xs {
					o := m.Learn(&xs[i])
					if !o.Labeled {
						continue
					}
					mistake := 0.0
					if !o.Correct {
						mistake = 1
					}
					if d.Add(mistake) {
						if drift && i >= at && delay < 0 {
							delay = i - at
						} else {
							falseAlarms++
						}
					}
				}
				b.ReportMetric(float64(falseAlarms), "false-alarms")
				if drift {
					b.ReportMetric(float64(delay), "delay-examples")
				}
			}
		})
	}
}
