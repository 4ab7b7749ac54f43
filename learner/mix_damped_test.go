package learner_test

import (
	"math"
	"slices"
	"testing"

	"github.com/hyperplane-ml/hyperplane/learner"
)

func mustMixRule(t testing.TB, rule learner.MixRule, base *learner.State, states []*learner.State, weights []float64) *learner.State {
	t.Helper()
	out, err := learner.MixWithRule(rule, base, states, weights)
	if err != nil {
		t.Fatalf("MixWithRule(%s): %v", rule, err)
	}
	if err := out.Validate(); err != nil {
		t.Fatalf("the mixed state does not validate: %v", err)
	}
	return out
}

// TestMixWithRuleMeanIsMix: the mean rule is Mix, bit for bit.
func TestMixWithRuleMeanIsMix(t *testing.T) {
	for name, cfg := range configs() {
		if cfg.Algorithm == learner.Kernel {
			continue
		}
		t.Run(name, func(t *testing.T) {
			base := trained(t, cfg, 1, 200)
			states := shardsOf(t, base, []uint64{2, 3, 4}, []int{40, 70, 55})
			w := learner.MixWeightsOf(learner.MixExamples, base, states)
			if mustMixRule(t, learner.MixMean, base, states, w).Digest() != mustMix(t, base, states, w).Digest() {
				t.Fatal("MixWithRule(mean) differs from Mix")
			}
		})
	}
}

// TestMixRuleProperties: every rule is deterministic, leaves its
// inputs alone, mixes one shard into itself and one participant among
// idle shards into that participant, depends on the order of the states
// only by rounding, and counts every example once.
func TestMixRuleProperties(t *testing.T) {
	for _, rule := range []learner.MixRule{learner.MixDamped, learner.MixTouched} {
		for name, cfg := range configs() {
			t.Run(string(rule)+"/"+name, func(t *testing.T) {
				base := trained(t, cfg, 1, 200)
				p, _ := learnRange(t, base, streamFor(cfg, 2, 60))
				if got := mustMixRule(t, rule, base, []*learner.State{p}, []float64{3}); got.Digest() != p.Digest() {
					t.Fatal("one shard: the mix is not its state")
				}
				if cfg.Algorithm == learner.Kernel {
					return
				}
				idle, _ := learnRange(t, base, nil)
				if got := mustMixRule(t, rule, base, []*learner.State{idle, p, idle}, []float64{0, 2, 0}); got.Digest() != p.Digest() {
					t.Fatal("one participant among empty shards: the mix is not its state")
				}

				states := shardsOf(t, base, []uint64{2, 3, 4}, []int{40, 70, 55})
				digests := make([][32]byte, len(states))
				for i, st := range states {
					digests[i] = st.Digest()
				}
				baseDigest := base.Digest()
				w := learner.MixWeightsOf(learner.MixExamples, base, states)
				a := mustMixRule(t, rule, base, states, w)
				b := mustMixRule(t, rule, base, states, slices.Clone(w))
				if a.Digest() != b.Digest() {
					t.Fatal("the same inputs mixed into different bits")
				}
				if base.Digest() != baseDigest {
					t.Fatal("the base changed")
				}
				for i, st := range states {
					if st.Digest() != digests[i] {
						t.Fatalf("state %d changed", i)
					}
				}
				want := base.Labeled
				for _, st := range states {
					want += st.Labeled - base.Labeled
				}
				if a.Labeled != want {
					t.Fatalf("labeled %d, want %d", a.Labeled, want)
				}

				// Another order of the same shards: the same mix up to rounding.
				rev := []*learner.State{states[2], states[1], states[0]}
				r := mustMixRule(t, rule, base, rev, []float64{w[2], w[1], w[0]})
				aw, ab := a.Effective()
				rw, rb := r.Effective()
				checkNearScaled(t, "weights in another order", rw, aw)
				checkNearScaled(t, "bias in another order", rb, ab)
				if cfg.Algorithm == learner.AROW {
					checkNearScaled(t, "variances in another order", r.Variance, a.Variance)
				}
			})
		}
	}
}

// TestMixDampedValues: the damped rule is base + Σ μ_s/‖μ‖·(w_s − base)
// (for pegasos on the effective weights, projected onto its ball), and
// AROW adds the shards' precision gains.
func TestMixDampedValues(t *testing.T) {
	for _, alg := range []learner.Algorithm{learner.Perceptron, learner.PA1, learner.Averaged, learner.Pegasos, learner.AROW} {
		t.Run(string(alg), func(t *testing.T) {
			cfg := perceptronConfig()
			cfg.HashBits = 8
			cfg.Algorithm = alg
			base := trained(t, cfg, 1, 200)
			states := shardsOf(t, base, []uint64{5, 6}, []int{30, 90})
			weights := []float64{1, 3}
			out := mustMixRule(t, learner.MixDamped, base, states, weights)
			mu := mus(weights)
			norm := math.Hypot(mu[0], mu[1])
			damped := func(w0 []float64, ws ...[]float64) []float64 {
				want := make([]float64, len(w0))
				for i := range want {
					want[i] = w0[i]
					for s, w := range ws {
						want[i] += mu[s] / norm * (w[i] - w0[i])
					}
				}
				return want
			}
			var w0, b0 []float64
			ws, bs := make([][]float64, 2), make([][]float64, 2)
			if alg == learner.Pegasos {
				w0, b0 = base.Effective()
				for s, st := range states {
					ws[s], bs[s] = st.Effective()
				}
			} else {
				w0, b0 = base.Weights, base.Bias
				for s, st := range states {
					ws[s], bs[s] = st.Weights, st.Bias
				}
			}
			wantW, wantB := damped(w0, ws...), damped(b0, bs...)
			if alg == learner.Pegasos {
				var n2 float64
				for _, v := range slices.Concat(wantW, wantB) {
					n2 += v * v
				}
				if f := math.Sqrt(1 / (cfg.Lambda * n2)); f < 1 {
					for i := range wantW {
						wantW[i] *= f
					}
					for i := range wantB {
						wantB[i] *= f
					}
				}
				if out.Scale != 1 {
					t.Fatalf("scale %v, want 1", out.Scale)
				}
			}
			checkNearScaled(t, "weights", out.Weights, wantW)
			checkNearScaled(t, "bias", out.Bias, wantB)
			switch alg {
			case learner.AROW:
				want := make([]float64, len(base.Variance))
				for i, v0 := range base.Variance {
					p := 1 / v0
					for _, st := range states {
						p += max(0, 1/st.Variance[i]-1/v0)
					}
					want[i] = min(1, 1/p)
				}
				checkNearScaled(t, "variances", out.Variance, want)
			case learner.Averaged:
				checkHeldOnce(t, base, states, out)
			}
		})
	}
}

// TestMixTouchedValues: the touched rule is, coordinate by coordinate,
// the μ-weighted mean over the shards that changed it (for AROW weighted
// by precision, with the precision gains added), and a feature one shard
// alone learned keeps that shard's value.
func TestMixTouchedValues(t *testing.T) {
	for _, alg := range []learner.Algorithm{learner.Perceptron, learner.PA1, learner.Averaged, learner.AROW} {
		t.Run(string(alg), func(t *testing.T) {
			cfg := perceptronConfig()
			cfg.HashBits = 8
			cfg.Algorithm = alg
			base := trained(t, cfg, 1, 200)
			states := shardsOf(t, base, []uint64{5, 6, 7}, []int{30, 90, 10})
			weights := []float64{1, 3, 2}
			out := mustMixRule(t, learner.MixTouched, base, states, weights)
			mu := mus(weights)
			mean := func(w0, v0 []float64, ws, vs func(*learner.State) []float64) []float64 {
				want := make([]float64, len(w0))
				for i := range want {
					var p, pw float64
					for s, st := range states {
						if ws(st)[i] == w0[i] && (vs == nil || vs(st)[i] == v0[i]) {
							continue
						}
						pk := mu[s]
						if vs != nil {
							pk /= vs(st)[i]
						}
						p += pk
						pw += pk * (ws(st)[i] - w0[i])
					}
					want[i] = w0[i]
					if p > 0 {
						want[i] += pw / p
					}
				}
				return want
			}
			var vw, vb func(*learner.State) []float64
			if alg == learner.AROW {
				vw = func(st *learner.State) []float64 { return st.Variance }
				vb = func(st *learner.State) []float64 { return []float64{st.VarianceBias} }
			}
			wantW := mean(base.Weights, base.Variance, func(st *learner.State) []float64 { return st.Weights }, vw)
			wantB := mean(base.Bias, []float64{base.VarianceBias}, func(st *learner.State) []float64 { return st.Bias }, vb)
			checkNearScaled(t, "weights", out.Weights, wantW)
			checkNearScaled(t, "bias", out.Bias, wantB)
			alone := 0
			for i, w0 := range base.Weights {
				var changed []int
				for s, st := range states {
					if st.Weights[i] != w0 {
						changed = append(changed, s)
					}
				}
				if len(changed) == 1 && alg != learner.AROW {
					alone++
					if s := changed[0]; !near(out.Weights[i], states[s].Weights[i]) {
						t.Fatalf("weight %d, learned by shard %d alone: %v, want its %v", i, s, out.Weights[i], states[s].Weights[i])
					}
				}
			}
			if alg != learner.AROW && alone == 0 {
				t.Fatal("no feature learned by one shard alone: the test checks nothing")
			}
			if alg == learner.Averaged {
				checkHeldOnce(t, base, states, out)
			}
		})
	}
}

// TestMixRuleNames: the rules read and write their names, and an unknown
// one is an error.
func TestMixRuleNames(t *testing.T) {
	for _, r := range []learner.MixRule{learner.MixMean, learner.MixDamped, learner.MixTouched} {
		text, _ := r.MarshalText()
		var got learner.MixRule
		if err := got.UnmarshalText(text); err != nil || got != r {
			t.Fatalf("%s: read back %q, %v", r, got, err)
		}
	}
	var r learner.MixRule
	if err := r.UnmarshalText([]byte("sum")); err == nil || r != "" {
		t.Fatalf("unknown rule: %q, %v", r, err)
	}
	cfg := perceptronConfig()
	cfg.HashBits = 4
	base := fresh(t, cfg)
	if _, err := learner.MixWithRule("sum", base, nil, nil); err == nil {
		t.Fatal("MixWithRule accepted an unknown rule")
	}
}
