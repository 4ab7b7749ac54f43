package learner_test

import (
	"math"
	"strings"
	"testing"

	"github.com/hyperplane-ml/hyperplane/learner"
)

// TestMixAROWValues: the arow rule takes the weights as the damped rule
// does, base + Σ a_s·(w_s − base) with a_s = μ_s/‖μ‖, and damps the
// shards' precision gains alike: 1/σ = 1/σ_0 + Σ a_s·max(0, 1/σ_s − 1/σ_0),
// for the weights' variances and the bias's.
func TestMixAROWValues(t *testing.T) {
	cfg := perceptronConfig()
	cfg.HashBits = 8
	cfg.Algorithm = learner.AROW
	base := trained(t, cfg, 1, 200)
	states := shardsOf(t, base, []uint64{5, 6, 7}, []int{30, 90, 60})
	weights := []float64{1, 3, 2}
	out := mustMixRule(t, learner.MixAROW, base, states, weights)
	damped := mustMixRule(t, learner.MixDamped, base, states, weights)
	mu := mus(weights)
	norm := math.Sqrt(mu[0]*mu[0] + mu[1]*mu[1] + mu[2]*mu[2])
	checkNearScaled(t, "weights", out.Weights, damped.Weights)
	checkNearScaled(t, "bias", out.Bias, damped.Bias)
	precision := func(v0 float64, vs ...float64) float64 {
		p := 1 / v0
		for s, v := range vs {
			p += mu[s] / norm * max(0, 1/v-1/v0)
		}
		return min(1, 1/p)
	}
	gained := 0
	for i, v0 := range base.Variance {
		want := precision(v0, states[0].Variance[i], states[1].Variance[i], states[2].Variance[i])
		if math.Abs(out.Variance[i]-want) > 1e-12*want {
			t.Fatalf("variance %d: %v, want %v", i, out.Variance[i], want)
		}
		if out.Variance[i] < v0 {
			gained++
			if out.Variance[i] <= damped.Variance[i] {
				t.Fatalf("variance %d: %v, not above the summed evidence's %v", i, out.Variance[i], damped.Variance[i])
			}
		}
	}
	if gained == 0 {
		t.Fatal("no variance shrank: the shards learned nothing")
	}
	wantB := precision(base.VarianceBias, states[0].VarianceBias, states[1].VarianceBias, states[2].VarianceBias)
	if math.Abs(out.VarianceBias-wantB) > 1e-12*wantB {
		t.Fatalf("bias variance %v, want %v", out.VarianceBias, wantB)
	}
	m, err := learner.Restore(out)
	if err != nil {
		t.Fatalf("Restore: %v", err)
	}
	if m.Counts().Labeled != out.Labeled {
		t.Fatalf("restored %d labeled, the state %d", m.Counts().Labeled, out.Labeled)
	}
}

// TestMixAROWRule: auto means arow for AROW, and the rule refuses a model
// of another algorithm, naming itself.
func TestMixAROWRule(t *testing.T) {
	if got := learner.MixAuto.For(learner.AROW); got != learner.MixAROW {
		t.Fatalf("auto for arow is %s, want %s", got, learner.MixAROW)
	}
	var r learner.MixRule
	if err := r.UnmarshalText([]byte("arow")); err != nil || r != learner.MixAROW {
		t.Fatalf("UnmarshalText(arow): %v, %v", r, err)
	}
	cfg := perceptronConfig()
	cfg.HashBits = 8
	base := trained(t, cfg, 1, 50)
	states := shardsOf(t, base, []uint64{2, 3}, []int{20, 20})
	_, err := learner.MixWithRule(learner.MixAROW, base, states, []float64{1, 1})
	if err == nil || !strings.Contains(err.Error(), "rule arow mixes arow models only") {
		t.Fatalf("MixWithRule(arow) of a perceptron: %v, want an error naming the rule", err)
	}
}
