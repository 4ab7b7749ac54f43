package learner_test

import (
	"fmt"
	"slices"
	"testing"

	"github.com/hyperplane-ml/hyperplane/learner"
	"github.com/hyperplane-ml/hyperplane/learner/synth"
)

// BenchmarkDriftRecoveryMixed is BenchmarkDriftRecovery for a model
// learned in epochs over a Kafka topic of 4 partitions at the defaults
// (growth 8, epoch_examples 100,000, rule auto, weights examples; the
// partitions as `hyperplane gen -to kafka:<topic>` fills them; cut as a
// backlog): the 1M synthetic examples whose concept changes at 500,000.
// It reports the delay from the change to the first drift a shard finds
// (delay-examples, in examples of the stream), the drifts found in all,
// and the prequential accuracy over the examples after the change of the
// mixed model without a detector and with it, each as its gap to the
// same epochs learning those examples alone (gap-none, gap-reset) and to
// one model learning them alone (seq-gap-reset).
func BenchmarkDriftRecoveryMixed(b *testing.B) {
	const n, at, shards = 1_000_000, 500_000, 4
	for _, alg := range []learner.Algorithm{learner.AROW, learner.Perceptron, learner.PA1, learner.Averaged} {
		b.Run(fmt.Sprintf("S=%d/algorithm=%s", shards, alg), func(b *testing.B) {
			cfg := learner.DefaultConfig()
			cfg.HashBits, cfg.Algorithm = 18, alg
			off := cfg
			off.Drift.Enabled = false
			o := synth.DefaultOptions()
			o.Vocab, o.Seed, o.DriftAt = 100000, 1, at
			s := genStream(o, n, cfg)
			split := s.kafkaShards(shards)
			// The same partitions from the change on.
			after := make([][]int32, shards)
			for p, idx := range split {
				for _, i := range idx {
					if i >= at {
						after[p] = append(after[p], i)
					}
				}
			}
			rule := learner.MixAuto.For(alg)
			for range b.N {
				fresh, _ := epochsFrom(b, cfg, rule, s.xs, after, at, false)
				none, _ := epochsFrom(b, off, rule, s.xs, split, at, false)
				reset, drifts := epochsFrom(b, cfg, rule, s.xs, split, at, false)
				regrow, _ := epochsFrom(b, cfg, rule, s.xs, split, at, true)
				b.ReportMetric(100*(fresh-regrow), "gap-reset-regrow")
				seq := accuracyFrom(b, cfg, s.xs[at:], 0, nil)
				b.ReportMetric(100*fresh, "fresh-%")
				b.ReportMetric(100*(fresh-none), "gap-none")
				b.ReportMetric(100*(fresh-reset), "gap-reset")
				b.ReportMetric(100*(seq-reset), "seq-gap-reset")
				b.ReportMetric(float64(len(drifts)), "drifts")
				if len(drifts) > 0 {
					b.ReportMetric(float64(slices.Min(drifts)-at), "delay-examples")
				}
			}
		})
	}
}

// epochsFrom learns shards (indices into xs) in epochs at the defaults,
// each shard's range from a copy of the last mixed model, in shard order,
// mixed by rule with the examples' weights, and returns the prequential
// accuracy over the labeled examples at positions from on and the
// positions of the drifts the shards found. With regrow, the epochs grow
// from the mixed model's last restart, as from a new model's start
// (defaultEpochs, the worker's schedule), rather than from the stream's.
func epochsFrom(b *testing.B, cfg learner.Config, rule learner.MixRule, xs []learner.Example, shards [][]int32, from int32, regrow bool) (float64, []int) {
	size := epochLimits(16, minEpochExamples, 100_000, 0, regrow)
	m0, err := learner.New(cfg)
	if err != nil {
		b.Fatal(err)
	}
	w := m0.State()
	pos := make([]int, len(shards))
	left := make([]int, len(shards))
	var labeled, correct int
	var drifts []int
	for e := 1; ; e++ {
		for s, idx := range shards {
			left[s] = len(idx) - pos[s]
		}
		limit := size(e, w, left)
		var states []*learner.State
		for s, idx := range shards {
			end := min(pos[s]+limit, len(idx))
			if end == pos[s] {
				continue
			}
			m, err := learner.Restore(w)
			if err != nil {
				b.Fatal(err)
			}
			for _, i := range idx[pos[s]:end] {
				o := m.Learn(&xs[i])
				if o.Drift != nil {
					drifts = append(drifts, int(i))
				}
				if i >= from && o.Labeled {
					labeled++
					if o.Correct {
						correct++
					}
				}
			}
			pos[s] = end
			states = append(states, m.State())
		}
		if len(states) == 0 {
			break
		}
		if w, err = learner.MixWithRule(rule, w, states, learner.MixWeightsOf(learner.MixExamples, w, states)); err != nil {
			b.Fatal(err)
		}
	}
	return float64(correct) / float64(labeled), drifts
}
