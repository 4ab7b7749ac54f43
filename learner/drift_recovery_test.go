package learner_test

import (
	"testing"

	"github.com/hyperplane-ml/hyperplane/learner"
	"github.com/hyperplane-ml/hyperplane/learner/synth"
)

// BenchmarkDriftRecovery measures how a model recovers from an abrupt
// change of concept: on the synthetic stream of 1M examples (40 of
// 100,000 features, 5% noise, 2^18 weights) whose hidden hyperplane is
// swapped for an independent one at 500,000, the prequential accuracy
// over the 500,000 examples after the change, in points, of
//
//   - fresh: a new model that learns those 500,000 alone, the target;
//   - none: the model without a detector (model.drift.enabled false);
//   - reset: the model as it is, whose detector starts its parameters
//     afresh at a drift;
//   - variance (arow): the model without a detector, whose variances
//     alone are reset to 1 when DefaultPageHinkley finds the change;
//
// reported as each one's gap to fresh (gap-none, gap-reset,
// gap-variance: fresh minus it, so that a gap within 1 meets the goal),
// with the drifts the detector found. On the same stream without the
// change it reports the detector's false alarms and the accuracy it
// costs (stationary-cost: the accuracy without a detector minus with it,
// 0 when it raises no alarm).
func BenchmarkDriftRecovery(b *testing.B) {
	const n, at = 1_000_000, 500_000
	for _, alg := range []learner.Algorithm{learner.AROW, learner.Perceptron, learner.PA1, learner.Averaged} {
		b.Run("algorithm="+string(alg), func(b *testing.B) {
			cfg := perceptronConfig()
			cfg.HashBits, cfg.Algorithm = 18, alg
			off := cfg
			off.Drift.Enabled = false
			o := synth.DefaultOptions()
			o.Vocab, o.Seed, o.DriftAt = 100000, 1, at
			xs := genStream(o, n, cfg).xs
			for range b.N {
				fresh := accuracyFrom(b, cfg, xs[at:], 0, nil)
				none := accuracyFrom(b, off, xs, at, nil)
				var drifts []int
				reset := accuracyFrom(b, cfg, xs, at, &drifts)
				b.ReportMetric(100*fresh, "fresh-%")
				b.ReportMetric(100*(fresh-none), "gap-none")
				b.ReportMetric(100*(fresh-reset), "gap-reset")
				b.ReportMetric(float64(len(drifts)), "drifts")
				if len(drifts) > 0 {
					b.ReportMetric(float64(drifts[0]-at), "delay-examples")
				}
				if alg == learner.AROW {
					b.ReportMetric(100*(fresh-varianceReset(b, off, xs, at)), "gap-variance")
				}
			}
			xs = nil
			o.DriftAt = 0
			ys := genStream(o, n, cfg).xs
			for range b.N {
				var alarms []int
				with := accuracyFrom(b, cfg, ys, 0, &alarms)
				without := accuracyFrom(b, off, ys, 0, nil)
				b.ReportMetric(float64(len(alarms)), "stationary-alarms")
				b.ReportMetric(100*(without-with), "stationary-cost")
			}
		})
	}
}

// accuracyFrom learns xs with a new model of cfg and returns its
// prequential accuracy over the labeled examples from index from on; the
// drifts it reports are appended to drifts, if not nil.
func accuracyFrom(b *testing.B, cfg learner.Config, xs []learner.Example, from int, drifts *[]int) float64 {
	m, err := learner.New(cfg)
	if err != nil {
		b.Fatal(err)
	}
	var labeled, correct int
	for i := range xs {
		o := m.Learn(&xs[i])
		if o.Drift != nil && drifts != nil {
			*drifts = append(*drifts, i)
		}
		if i >= from && o.Labeled {
			labeled++
			if o.Correct {
				correct++
			}
		}
	}
	return float64(correct) / float64(labeled)
}

// varianceReset is accuracyFrom for an AROW model without a detector
// whose variances are reset to 1 when DefaultPageHinkley, run beside it,
// finds a change.
func varianceReset(b *testing.B, cfg learner.Config, xs []learner.Example, from int) float64 {
	m, err := learner.New(cfg)
	if err != nil {
		b.Fatal(err)
	}
	d := learner.DefaultPageHinkley()
	var labeled, correct int
	for i := range xs {
		o := m.Learn(&xs[i])
		if !o.Labeled {
			continue
		}
		if i >= from {
			labeled++
			if o.Correct {
				correct++
			}
		}
		loss := 1.0
		if o.Correct {
			loss = 0
		}
		if d.Add(loss) {
			st := m.State()
			for j := range st.Variance {
				st.Variance[j] = 1
			}
			st.VarianceBias = 1
			if m, err = learner.Restore(st); err != nil {
				b.Fatal(err)
			}
		}
	}
	return float64(correct) / float64(labeled)
}
