package learner_test

import (
	"slices"
	"testing"

	"github.com/hyperplane-ml/hyperplane/learner"
)

// TestMixRestartsAtADrift: when shards find a change of concept in an
// epoch, the mixed parameters are the mix of those shards alone from a
// new model, the others' learning on top of the old concept left out;
// the counters still count every shard, and a shard that found one
// among shards that learned nothing mixes into itself.
func TestMixRestartsAtADrift(t *testing.T) {
	for _, a := range []learner.Algorithm{learner.Perceptron, learner.Averaged, learner.AROW} {
		t.Run(string(a), func(t *testing.T) {
			cfg := learner.DefaultConfig()
			cfg.Algorithm, cfg.HashBits = a, 12
			xs := flipStream(3, 8000, 4000, cfg)
			base := mustNew(t, cfg)
			for i := range xs[:3000] {
				base.Learn(&xs[i])
			}
			b := base.State()
			shard := func(from, to int) *learner.State {
				s, _ := learnRange(t, b, xs[from:to])
				return s
			}
			// Shards 0 and 2 cross the change and find it; shard 1
			// learns the old concept only.
			s0, s1, s2 := shard(3000, 6000), shard(3000, 3900), shard(5000, 8000)
			if s0.Detector.Drifts != 1 || s1.Detector.Drifts != 0 || s2.Detector.Drifts != 1 {
				t.Fatalf("drifts %d, %d, %d, want 1, 0, 1", s0.Detector.Drifts, s1.Detector.Drifts, s2.Detector.Drifts)
			}
			rule := learner.MixAuto.For(a)
			states := []*learner.State{s0, s1, s2}
			out, err := learner.MixWithRule(rule, b, states, learner.MixWeightsOf(learner.MixExamples, b, states))
			if err != nil {
				t.Fatal(err)
			}
			if out.Labeled != b.Labeled+3000+900+3000 || out.Detector.Drifts != 2 {
				t.Fatalf("labeled %d, drifts %d: the counters must count every shard", out.Labeled, out.Detector.Drifts)
			}
			if out.Detector.Restarted != out.Labeled {
				t.Fatalf("restarted at %d, want the mixed model's %d labeled: its parameters start afresh there", out.Detector.Restarted, out.Labeled)
			}
			// The same mix of shards 0 and 2 alone from a base with a new
			// model's parameters.
			fresh := mustNew(t, cfg).State()
			copied := *b
			fb := &copied
			fb.Weights, fb.Bias, fb.SumWeights, fb.SumBias, fb.Variance, fb.VarianceBias = fresh.Weights, fresh.Bias, fresh.SumWeights, fresh.SumBias, fresh.Variance, fresh.VarianceBias
			two := []*learner.State{s0, s2}
			want, err := learner.MixWithRule(rule, fb, two, learner.MixWeightsOf(learner.MixExamples, fb, two))
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(out.Weights, want.Weights) || !slices.Equal(out.Variance, want.Variance) || out.Detector.Mean != want.Detector.Mean {
				t.Fatal("the mix is not that of the shards that found the drift, from a new model")
			}
			// Alone with a shard that learned nothing: itself.
			idle := shard(0, 0)
			one := []*learner.State{s0, idle}
			if got, err := learner.MixWithRule(rule, b, one, learner.MixWeightsOf(learner.MixExamples, b, one)); err != nil || got.Digest() != s0.Digest() {
				t.Fatalf("a shard that found a drift beside an idle one does not mix into itself (err %v)", err)
			}
		})
	}
}
