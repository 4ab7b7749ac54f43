package learner_test

import (
	"errors"
	"fmt"
	"math"
	"math/big"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/hyperplane-ml/hyperplane/learner"
)

// tiny is a valid, empty state of cfg with 4 weights per class.
func tiny(t *testing.T, cfg learner.Config) *learner.State {
	t.Helper()
	cfg.HashBits = 2
	return mustNew(t, cfg).State()
}

// fresh is the state of a new model of cfg: the base of a first epoch.
func fresh(t testing.TB, cfg learner.Config) *learner.State {
	t.Helper()
	return mustNew(t, cfg).State()
}

func mustMix(t testing.TB, base *learner.State, states []*learner.State, weights []float64) *learner.State {
	t.Helper()
	out, err := learner.Mix(base, states, weights)
	if err != nil {
		t.Fatalf("Mix: %v", err)
	}
	if err := out.Validate(); err != nil {
		t.Fatalf("the mixed state does not validate: %v", err)
	}
	return out
}

// learnRange is a shard's work in an epoch: from a copy of base, learn xs
// in order and flush. It returns the state and the outcomes (true =
// correct) of the labeled examples learned.
func learnRange(t testing.TB, base *learner.State, xs []learner.Example) (*learner.State, []bool) {
	t.Helper()
	m, err := learner.Restore(base)
	if err != nil {
		t.Fatalf("Restore: %v", err)
	}
	var outcomes []bool
	for i := range xs {
		if o := m.Learn(&xs[i]); o.Labeled {
			outcomes = append(outcomes, o.Correct)
		}
	}
	m.Flush()
	return m.State(), outcomes
}

// shardsOf learns one range per seed and length from base.
func shardsOf(t testing.TB, base *learner.State, seeds []uint64, lengths []int) []*learner.State {
	t.Helper()
	states := make([]*learner.State, len(seeds))
	for s, seed := range seeds {
		states[s], _ = learnRange(t, base, streamFor(base.Config, seed, lengths[s]))
	}
	return states
}

// mus is weights divided by their sum, as Mix normalises them.
func mus(weights []float64) []float64 {
	var sum float64
	for _, w := range weights {
		sum += w
	}
	mu := make([]float64, len(weights))
	for i, w := range weights {
		mu[i] = w / sum
	}
	return mu
}

func sameBits(a, b []float64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if math.Float64bits(a[i]) != math.Float64bits(b[i]) {
			return false
		}
	}
	return true
}

// near reports whether got is want within 1e-12 relative.
func near(got, want float64) bool {
	return got == want || math.Abs(got-want) <= 1e-12*math.Abs(want)
}

// checkNearScaled fails unless every got[i] is want[i] within 1e-12 of
// the largest |want[j]|: for a reference summed in another order, where a
// small coordinate is a difference of large terms.
func checkNearScaled(t testing.TB, what string, got, want []float64) {
	t.Helper()
	var scale float64
	for _, v := range want {
		scale = math.Max(scale, math.Abs(v))
	}
	for i := range got {
		if math.Abs(got[i]-want[i]) > 1e-12*scale {
			t.Fatalf("%s[%d] = %v, want %v (error %.3g of the largest %v)", what, i, got[i], want[i], math.Abs(got[i]-want[i])/scale, scale)
		}
	}
}

// checkNear fails unless every got[i] is near want[i].
func checkNear(t testing.TB, what string, got, want []float64) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d values, want %d", what, len(got), len(want))
	}
	for i := range got {
		if !near(got[i], want[i]) {
			t.Fatalf("%s[%d] = %v, want %v (relative error %.3g)", what, i, got[i], want[i], math.Abs(got[i]-want[i])/math.Abs(want[i]))
		}
	}
}

// meanEffective is Σ μ_s·Effective(states[s]), the weights and biases.
func meanEffective(states []*learner.State, mu []float64) (weights, bias []float64) {
	for s, st := range states {
		w, b := st.Effective()
		if weights == nil {
			weights, bias = make([]float64, len(w)), make([]float64, len(b))
		}
		for i := range w {
			weights[i] += mu[s] * w[i]
		}
		for c := range b {
			bias[c] += mu[s] * b[c]
		}
	}
	return weights, bias
}

// averagedParts are the averaged perceptron's weights w and sums u, or
// its biases and their sums.
var averagedParts = []struct {
	name string
	get  func(*learner.State) (w, u []float64)
}{
	{"weights", func(st *learner.State) ([]float64, []float64) { return st.Weights, st.SumWeights }},
	{"bias", func(st *learner.State) ([]float64, []float64) { return st.Bias, st.SumBias }},
}

// heldOf is S = (T+1)·w − u of st's weights or biases (get), the sum of
// the T+1 vectors that st's averaged model averages, as exact rationals.
func heldOf(st *learner.State, get func(*learner.State) (w, u []float64)) []*big.Rat {
	w, u := get(st)
	n := new(big.Rat).SetInt(new(big.Int).SetUint64(st.Labeled + 1))
	out := make([]*big.Rat, len(w))
	for i := range w {
		out[i] = new(big.Rat).Mul(n, new(big.Rat).SetFloat64(w[i]))
		out[i].Sub(out[i], new(big.Rat).SetFloat64(u[i]))
	}
	return out
}

// heldOnce is S_0 + Σ_s (S_s − S_0) over the states that learned a
// labeled example beyond base, whatever their weight: every vector that
// base or a state held, each once, the sum Mix's averaged model averages.
// It is exact, rounded once to float64.
func heldOnce(base *learner.State, states []*learner.State, get func(*learner.State) (w, u []float64)) []float64 {
	s0 := heldOf(base, get)
	sum := make([]*big.Rat, len(s0))
	for i := range sum {
		sum[i] = new(big.Rat).Set(s0[i])
	}
	for _, st := range states {
		if st.Labeled == base.Labeled {
			continue
		}
		for i, v := range heldOf(st, get) {
			sum[i].Add(sum[i], v.Sub(v, s0[i]))
		}
	}
	return rounded(sum)
}

func rounded(rs []*big.Rat) []float64 {
	out := make([]float64, len(rs))
	for i, r := range rs {
		out[i], _ = r.Float64()
	}
	return out
}

// checkHeldOnce fails unless the mixed averaged perceptron out counts
// every weight vector held once: its Labeled is base's plus every
// state's delta, and its S = (T+1)·w − u (exact) is heldOnce within
// 1e-13 of the largest |S|, for the weights and the biases. Mix's rounding
// is at most 4e-15 of it in these tests; a vector counted twice, or left
// out, is of the order of 1e-3.
func checkHeldOnce(t testing.TB, base *learner.State, states []*learner.State, out *learner.State) {
	t.Helper()
	labeled := base.Labeled
	for _, st := range states {
		labeled += st.Labeled - base.Labeled
	}
	if out.Labeled != labeled {
		t.Fatalf("labeled %d, want %d", out.Labeled, labeled)
	}
	for _, p := range averagedParts {
		want, got := heldOnce(base, states, p.get), rounded(heldOf(out, p.get))
		var scale float64
		for _, v := range want {
			scale = math.Max(scale, math.Abs(v))
		}
		for i := range got {
			if math.Abs(got[i]-want[i]) > 1e-13*scale {
				t.Fatalf("held %s: S[%d] = %v, want %v (error %.3g of the largest %v)", p.name, i, got[i], want[i], math.Abs(got[i]-want[i])/scale, scale)
			}
		}
	}
}

// meanWeights is Σ μ_s·Weights_s and Σ μ_s·Bias_s.
func meanWeights(states []*learner.State, mu []float64) (weights, bias []float64) {
	weights, bias = make([]float64, len(states[0].Weights)), make([]float64, len(states[0].Bias))
	for s, st := range states {
		for i, w := range st.Weights {
			weights[i] += mu[s] * w
		}
		for c, b := range st.Bias {
			bias[c] += mu[s] * b
		}
	}
	return weights, bias
}

// TestMixOneStateIsIdentity: one state mixes into a copy of itself, bit
// for bit, for every algorithm and whatever its positive weight.
func TestMixOneStateIsIdentity(t *testing.T) {
	for name, cfg := range configs() {
		t.Run(name, func(t *testing.T) {
			base := fresh(t, cfg)
			st := trained(t, cfg, 1, 300)
			want := st.Digest()
			out := mustMix(t, base, []*learner.State{st}, []float64{0.3})
			if out.Digest() != want {
				t.Fatal("Mix of one state changed it")
			}
			out.Bias[0]++
			out.Window[0] = !out.Window[0]
			if st.Digest() != want {
				t.Fatal("the mixed state shares memory with its input")
			}
		})
	}
}

// TestMixIdenticalStates: states with the same bits mix into the same
// weights, whatever the weighting, and into a valid state; kernel models
// refuse.
func TestMixIdenticalStates(t *testing.T) {
	for name, cfg := range configs() {
		t.Run(name, func(t *testing.T) {
			base := fresh(t, cfg)
			a, b := trained(t, cfg, 1, 300), trained(t, cfg, 1, 300)
			out, err := learner.Mix(base, []*learner.State{a, b}, []float64{1, 3})
			if cfg.Algorithm == learner.Kernel {
				if err == nil || !strings.Contains(err.Error(), "model.scope: partition") {
					t.Fatalf("kernel: got %v, want an error naming model.scope: partition", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if err := out.Validate(); err != nil {
				t.Fatal(err)
			}
			w, bias := a.Effective()
			ow, obias := out.Effective()
			switch cfg.Algorithm {
			case learner.Averaged:
				// Weights keep their bits. Both states' vectors count, so
				// the averaged model is (S_0 + 2·(S_a − S_0))/(2·T_a + 1),
				// not a's own.
				if !sameBits(out.Weights, a.Weights) || !sameBits(out.Bias, a.Bias) {
					t.Fatal("identical states mixed into other weights")
				}
				checkHeldOnce(t, base, []*learner.State{a, b}, out)
			default:
				if !sameBits(ow, w) || !sameBits(obias, bias) {
					t.Fatal("identical states mixed into other weights")
				}
				if cfg.Algorithm == learner.AROW && !sameBits(out.Variance, a.Variance) {
					t.Fatal("identical states mixed into other variances")
				}
			}
			if out.Examples != 2*a.Examples || out.Labeled != 2*a.Labeled || out.Mistakes != 2*a.Mistakes || out.R2 != a.R2 {
				t.Fatalf("counters %d %d %d %v, want twice %d %d %d and %v", out.Examples, out.Labeled, out.Mistakes, out.R2, a.Examples, a.Labeled, a.Mistakes, a.R2)
			}
		})
	}
}

// TestMixPerceptronMean: a uniform and a weighted mix of two perceptrons,
// computed by hand.
func TestMixPerceptronMean(t *testing.T) {
	base := tiny(t, perceptronConfig())
	a, b := tiny(t, perceptronConfig()), tiny(t, perceptronConfig())
	a.Weights, a.Bias = []float64{1, 2, 0, 0}, []float64{0.5}
	b.Weights, b.Bias = []float64{3, -1, 0, 0.5}, []float64{1.5}
	a.Examples, a.Labeled, a.Mistakes, a.R2 = 10, 8, 3, 2
	b.Examples, b.Labeled, b.Mistakes, b.R2 = 5, 5, 1, 7
	out := mustMix(t, base, []*learner.State{a, b}, []float64{1, 1})
	if !sameBits(out.Weights, []float64{2, 0.5, 0, 0.25}) || !sameBits(out.Bias, []float64{1}) {
		t.Fatalf("uniform mix: weights %v bias %v, want [2 0.5 0 0.25] [1]", out.Weights, out.Bias)
	}
	if out.Examples != 15 || out.Labeled != 13 || out.Mistakes != 4 || out.R2 != 7 {
		t.Fatalf("counters %d %d %d %v, want 15 13 4 7", out.Examples, out.Labeled, out.Mistakes, out.R2)
	}
	out = mustMix(t, base, []*learner.State{a, b}, []float64{1, 3})
	if !sameBits(out.Weights, []float64{2.5, 0.25*2 + 0.75*-1, 0, 0.375}) || !sameBits(out.Bias, []float64{1.25}) {
		t.Fatalf("1:3 mix: weights %v bias %v", out.Weights, out.Bias)
	}
	// A weight of 0 leaves the model to the others, and still counts.
	out = mustMix(t, base, []*learner.State{a, b}, []float64{0, 2})
	if !sameBits(out.Weights, b.Weights) || !sameBits(out.Bias, b.Bias) || out.Examples != 15 {
		t.Fatalf("0:2 mix: weights %v bias %v examples %d", out.Weights, out.Bias, out.Examples)
	}
}

// TestMixLinearMean: learned perceptron-family, passive-aggressive and
// multiclass models mix into the μ-weighted mean of their weights, and a
// weight that no shard changed keeps the base's bits.
func TestMixLinearMean(t *testing.T) {
	for _, name := range []string{"perceptron", "margin", "pa", "pa1", "pa2", "perceptron/r2/inverse/normalize", "margin/batch=3", "multiclass/perceptron", "multiclass/pa1"} {
		t.Run(name, func(t *testing.T) {
			cfg := configs()[name]
			cfg.HashBits = 12 // wide enough for weights that no shard touches
			base := trained(t, cfg, 1, 300)
			states := shardsOf(t, base, []uint64{2, 3, 4}, []int{60, 25, 140})
			weights := []float64{2, 1, 4}
			out := mustMix(t, base, states, weights)
			want, wantBias := meanEffective(states, mus(weights))
			checkNear(t, "weights", out.Weights, want)
			checkNear(t, "bias", out.Bias, wantBias)
			untouched := 0
			for i := range base.Weights {
				if sameBits([]float64{states[0].Weights[i], states[1].Weights[i], states[2].Weights[i]}, []float64{base.Weights[i], base.Weights[i], base.Weights[i]}) {
					untouched++
					if math.Float64bits(out.Weights[i]) != math.Float64bits(base.Weights[i]) {
						t.Fatalf("weight %d, untouched by every shard, changed from %v to %v", i, base.Weights[i], out.Weights[i])
					}
				}
			}
			if untouched == 0 {
				t.Fatal("no untouched weight to check: use longer vectors or shorter ranges")
			}
		})
	}
}

// TestMixAROWPrecision: AROW mixes each coordinate by precision μ/σ.
// Coordinate 0: σ = (1, 0.25), w = (1, 2), μ = (½, ½): precisions 0.5 and
// 2, so w = (0.5·1 + 2·2)/2.5 = 1.8 and σ = 1/2.5 = 0.4. Coordinate 1:
// σ = (0.5, 0.5), w = (4, -2): the plain mean 1, σ = 0.5. Coordinate 2: a
// variance of 0 is certain: w = 3, σ = 0. The bias: σ = (1, 1), b = (1, 3):
// b = 2, σ = 1.
func TestMixAROWPrecision(t *testing.T) {
	cfg := perceptronConfig()
	cfg.Algorithm = learner.AROW
	base, a, b := tiny(t, cfg), tiny(t, cfg), tiny(t, cfg)
	a.Weights, a.Variance, a.Bias, a.VarianceBias = []float64{1, 4, 7, 0}, []float64{1, 0.5, 0.5, 1}, []float64{1}, 1
	b.Weights, b.Variance, b.Bias, b.VarianceBias = []float64{2, -2, 3, 0}, []float64{0.25, 0.5, 0, 1}, []float64{3}, 1
	out := mustMix(t, base, []*learner.State{a, b}, []float64{1, 1})
	if !sameBits(out.Weights, []float64{1.8, 1, 3, 0}) || !sameBits(out.Variance, []float64{0.4, 0.5, 0, 1}) {
		t.Fatalf("weights %v variances %v, want [1.8 1 3 0] [0.4 0.5 0 1]", out.Weights, out.Variance)
	}
	if !sameBits(out.Bias, []float64{2}) || out.VarianceBias != 1 {
		t.Fatalf("bias %v variance %v, want 2 and 1", out.Bias, out.VarianceBias)
	}
}

// TestMixAROWLearned: shards learned from a common AROW model mix, per
// coordinate, into Σ p_s·w_s/Σ p_s with variance 1/Σ p_s, p_s = μ_s/σ_s.
func TestMixAROWLearned(t *testing.T) {
	cfg := configs()["arow"]
	base := trained(t, cfg, 1, 300)
	states := shardsOf(t, base, []uint64{2, 3}, []int{50, 120})
	weights := []float64{1, 2}
	mu := mus(weights)
	out := mustMix(t, base, states, weights)
	mixed := 0
	for i := range out.Weights {
		var p, pw float64
		for s, st := range states {
			p += mu[s] / st.Variance[i]
			pw += mu[s] / st.Variance[i] * st.Weights[i]
		}
		if states[0].Weights[i] == states[1].Weights[i] && states[0].Variance[i] == states[1].Variance[i] {
			if out.Weights[i] != states[0].Weights[i] || out.Variance[i] != states[0].Variance[i] {
				t.Fatalf("coordinate %d, the same in both shards, changed", i)
			}
			continue
		}
		mixed++
		if !near(out.Weights[i], pw/p) || !near(out.Variance[i], 1/p) {
			t.Fatalf("coordinate %d: weight %v variance %v, want %v and %v", i, out.Weights[i], out.Variance[i], pw/p, 1/p)
		}
	}
	if mixed == 0 {
		t.Fatal("the shards changed no coordinate")
	}
	var p, pb float64
	for s, st := range states {
		p += mu[s] / st.VarianceBias
		pb += mu[s] / st.VarianceBias * st.Bias[0]
	}
	if !near(out.Bias[0], pb/p) || !near(out.VarianceBias, 1/p) {
		t.Fatalf("bias %v variance %v, want %v and %v", out.Bias[0], out.VarianceBias, pb/p, 1/p)
	}
}

// TestMixPegasosEffective: Pegasos mixes the weights it predicts with,
// scale·v, and returns scale 1 with ‖v‖² recomputed.
func TestMixPegasosEffective(t *testing.T) {
	cfg := perceptronConfig()
	cfg.Algorithm = learner.Pegasos
	base, a, b := tiny(t, cfg), tiny(t, cfg), tiny(t, cfg)
	a.Weights, a.Bias, a.Scale, a.VNorm2 = []float64{2, 0, 4, 0}, []float64{2}, 0.5, 24
	b.Weights, b.Bias, b.Scale, b.VNorm2 = []float64{3, 1, 0, 0}, []float64{0}, 1, 10
	out := mustMix(t, base, []*learner.State{a, b}, []float64{1, 1})
	if !sameBits(out.Weights, []float64{2, 0.5, 1, 0}) || !sameBits(out.Bias, []float64{0.5}) || out.Scale != 1 || out.VNorm2 != 4+0.25+1+0.25 {
		t.Fatalf("weights %v bias %v scale %v vnorm2 %v", out.Weights, out.Bias, out.Scale, out.VNorm2)
	}
}

// TestMixPegasosLearned: learned Pegasos shards mix into the weighted
// mean of their effective weights, inside Pegasos's ball, and learn on.
func TestMixPegasosLearned(t *testing.T) {
	for _, name := range []string{"pegasos", "pegasos/none"} {
		t.Run(name, func(t *testing.T) {
			cfg := configs()[name]
			base := trained(t, cfg, 1, 300)
			states := shardsOf(t, base, []uint64{2, 3, 4}, []int{40, 90, 10})
			weights := []float64{3, 1, 1}
			out := mustMix(t, base, states, weights)
			want, wantBias := meanEffective(states, mus(weights))
			w, bias := out.Effective()
			checkNear(t, "effective weights", w, want)
			checkNear(t, "effective bias", bias, wantBias)
			var n2 float64
			for _, v := range append(copyOf(out.Weights), out.Bias...) {
				n2 += v * v
			}
			if out.Scale != 1 || !near(out.VNorm2, n2) {
				t.Fatalf("scale %v vnorm2 %v, want 1 and %v", out.Scale, out.VNorm2, n2)
			}
			if n2 > 1/cfg.Lambda*(1+1e-12) {
				t.Fatalf("‖w‖² = %v is outside the ball of radius² %v", n2, 1/cfg.Lambda)
			}
			next, _ := learnRange(t, out, streamFor(cfg, 9, 50))
			if next.Labeled <= out.Labeled {
				t.Fatal("learning on from the mix learned nothing")
			}
		})
	}
}

// copyOf is a copy of s; nil stays nil.
func copyOf(s []float64) []float64 {
	if s == nil {
		return nil
	}
	return append([]float64(nil), s...)
}

// TestMixAveraged: the mixed averaged perceptron averages every weight
// vector that the base or a state held, each once: its S = (T+1)·w − u is
// S_0 + Σ_s (S_s − S_0) over the states that learned, whatever the
// weighting, a state of weight 0 included, while its weights are the
// μ-weighted mean. A state that learned unlabeled examples only adds no
// vector (at a positive weight it pulls the weights towards the base's),
// and a coordinate that no state changed keeps the base's sum, bit for
// bit.
func TestMixAveraged(t *testing.T) {
	for _, name := range []string{"averaged", "averaged/batch=5/inverse_sqrt", "multiclass/averaged"} {
		t.Run(name, func(t *testing.T) {
			cfg := configs()[name]
			cfg.HashBits = 12 // wide enough for coordinates that no shard touches
			base := trained(t, cfg, 1, 300)
			states := shardsOf(t, base, []uint64{2, 3, 4}, []int{80, 150, 33})
			quiet, _ := learnRange(t, base, unlabeled(streamFor(cfg, 5, 20)))
			states = append(states, quiet)
			for _, weights := range [][]float64{{1, 3, 2, 1}, learner.MixWeightsOf(learner.MixExamples, base, states), {0, 1, 1, 0}} {
				t.Run(fmt.Sprint(weights), func(t *testing.T) {
					out := mustMix(t, base, states, weights)
					want, wantBias := meanWeights(states, mus(weights))
					checkNear(t, "weights", out.Weights, want)
					checkNear(t, "bias", out.Bias, wantBias)
					checkHeldOnce(t, base, states, out)
					kept := 0
					for i := range base.Weights {
						if base.Weights[i] == 0 || base.SumWeights[i] == 0 {
							continue
						}
						if slices.ContainsFunc(states, func(st *learner.State) bool {
							return st.Weights[i] != base.Weights[i] || st.SumWeights[i] != base.SumWeights[i]
						}) {
							continue
						}
						kept++
						if math.Float64bits(out.SumWeights[i]) != math.Float64bits(base.SumWeights[i]) {
							t.Fatalf("sum %d, which no shard changed, went from %v to %v", i, base.SumWeights[i], out.SumWeights[i])
						}
					}
					if kept == 0 {
						t.Fatal("no coordinate that the base learned and no shard changed: use longer vectors or shorter ranges")
					}
				})
			}
		})
	}
}

// TestMixAveragedOneLearnerIsSequential: when in every epoch one shard
// learns and the others idle (an empty range, or unlabeled examples
// only), the epochs give, bit for bit, the model that learns the same
// examples sequentially: the one shard's vectors are all the vectors
// held.
func TestMixAveragedOneLearnerIsSequential(t *testing.T) {
	for _, name := range []string{"averaged", "averaged/batch=5/inverse_sqrt", "multiclass/averaged"} {
		t.Run(name, func(t *testing.T) {
			cfg := configs()[name]
			xs := streamFor(cfg, 31, 1000)
			seq := mustNew(t, cfg)
			w := seq.State()
			at := 0
			for e := range 6 {
				n := 50 + 40*e
				learned, _ := learnRange(t, w, xs[at:at+n])
				idle, _ := learnRange(t, w, nil)
				quiet, _ := learnRange(t, w, unlabeled(xs[at+n:at+n+7]))
				states := []*learner.State{idle, quiet, quiet, idle}
				states[e%len(states)] = learned // the learner takes each place in turn
				kind := []learner.MixWeights{learner.MixUniform, learner.MixExamples, learner.MixMistakes}[e%3]
				w = mustMix(t, w, states, learner.MixWeightsOf(kind, w, states))
				for i := range xs[at : at+n] {
					seq.Learn(&xs[at+i])
				}
				seq.Flush()
				for _, st := range states {
					if st == quiet {
						for _, x := range unlabeled(xs[at+n : at+n+7]) {
							seq.Learn(&x)
						}
					}
				}
				at += n + 7
				if w.Digest() != seq.State().Digest() {
					t.Fatalf("epoch %d: the mix differs from sequential learning", e)
				}
			}
		})
	}
}

// TestMixAveragedLearnsOn: learning on from a mixed averaged model goes
// on averaging every vector held once: with S the mix's sum of held
// vectors, S_0 + Σ_s (S_s − S_0), and T its Labeled, after T' labeled
// examples the averaged model is (S + w_{T+1} + … + w_{T'})/(T'+1). It
// fails if T is not the mixed Labeled, as when the base's history is
// counted once per shard.
func TestMixAveragedLearnsOn(t *testing.T) {
	for _, name := range []string{"averaged", "averaged/batch=5/inverse_sqrt", "multiclass/averaged"} {
		t.Run(name, func(t *testing.T) {
			cfg := configs()[name]
			base := trained(t, cfg, 1, 300)
			states := shardsOf(t, base, []uint64{2, 3}, []int{70, 120})
			out := mustMix(t, base, states, []float64{1, 3})
			// S and T from the shards, not from the mix.
			sum, sumBias := heldOnce(base, states, averagedParts[0].get), heldOnce(base, states, averagedParts[1].get)
			T := base.Labeled + (states[0].Labeled - base.Labeled) + (states[1].Labeled - base.Labeled)
			m, err := learner.Restore(out)
			if err != nil {
				t.Fatal(err)
			}
			xs := streamFor(cfg, 7, 120)
			for i := range xs {
				if o := m.Learn(&xs[i]); o.Labeled {
					st := m.State()
					for j, w := range st.Weights {
						sum[j] += w
					}
					for c, b := range st.Bias {
						sumBias[c] += b
					}
				}
			}
			final := m.State()
			if final.Labeled <= T {
				t.Fatal("learned no labeled example after the mix")
			}
			n := float64(T + final.Labeled - out.Labeled + 1)
			for i := range sum {
				sum[i] /= n
			}
			for c := range sumBias {
				sumBias[c] /= n
			}
			w, bias := final.Effective()
			checkNearScaled(t, "averaged weights", w, sum)
			checkNearScaled(t, "averaged bias", bias, sumBias)
		})
	}
}

// TestMixMulticlass: a multiclass model mixes each class's vector.
func TestMixMulticlass(t *testing.T) {
	cfg := perceptronConfig()
	cfg.Classes = []string{"a", "b", "c"}
	base, a, b := tiny(t, cfg), tiny(t, cfg), tiny(t, cfg)
	for i := range a.Weights {
		a.Weights[i], b.Weights[i] = float64(i), float64(3*i)
	}
	a.Bias, b.Bias = []float64{1, 2, 3}, []float64{3, 2, 1}
	out := mustMix(t, base, []*learner.State{a, b}, []float64{1, 1})
	for i, w := range out.Weights {
		if w != float64(2*i) {
			t.Fatalf("weight %d = %v, want %v", i, w, float64(2*i))
		}
	}
	if !sameBits(out.Bias, []float64{2, 2, 2}) {
		t.Fatalf("bias %v, want [2 2 2]", out.Bias)
	}
}

// TestMixSettingsNotRead: the results of an epoch learned by a release
// whose arow_r defaulted to 1 mix with a base of this release's default
// (a worker that continues an epoch log an earlier release began, whose
// first epoch's results are stored and its generation not yet) when the
// algorithm does not read the setting, to the bits of states that agree;
// where it reads the setting, they still do not mix.
func TestMixSettingsNotRead(t *testing.T) {
	old := perceptronConfig()
	old.AROWR = 1
	now := perceptronConfig()
	xs := streamFor(now, 7, 200)
	learned := func(cfg learner.Config, xs []learner.Example) *learner.State {
		m := mustNew(t, cfg)
		for i := range xs {
			m.Learn(&xs[i])
		}
		return m.State()
	}
	base := fresh(t, now)
	got, err := learner.Mix(base, []*learner.State{learned(old, xs[:100]), learned(old, xs[100:])}, []float64{1, 1})
	if err != nil {
		t.Fatalf("perceptron states of arow_r 1 over a base of arow_r 10: %v", err)
	}
	want := mustMix(t, base, []*learner.State{learned(now, xs[:100]), learned(now, xs[100:])}, []float64{1, 1})
	if got.Digest() != want.Digest() || !reflect.DeepEqual(got.Config, base.Config) {
		t.Fatal("the mix of states that differ only by a setting the perceptron does not read is not the mix of states that agree")
	}
	arow := now
	arow.Algorithm = learner.AROW
	arowOld := arow
	arowOld.AROWR = 1
	if _, err := learner.Mix(fresh(t, arow), []*learner.State{fresh(t, arowOld)}, []float64{1}); err == nil || !strings.Contains(err.Error(), "config arow_r differs from the base's") {
		t.Fatalf("AROW states of r 1 and 10: got %v, want arow_r named", err)
	}
}

func TestMixErrors(t *testing.T) {
	cfg := perceptronConfig()
	kernel := cfg
	kernel.Algorithm = learner.Kernel
	batch := cfg
	batch.Batch = 4
	other := func(change func(*learner.Config)) *learner.State {
		c := cfg
		change(&c)
		return tiny(t, c)
	}
	counted := func(change func(*learner.State)) *learner.State {
		st := tiny(t, cfg)
		st.Examples, st.Labeled, st.Mistakes, st.Updates = 10, 8, 3, 3
		st.TruePositives, st.TrueNegatives, st.R2 = 2, 3, 4
		change(st)
		return st
	}
	base := counted(func(*learner.State) {})
	pending := tiny(t, batch)
	pending.PendingIndex, pending.PendingValue = []uint32{1}, []float64{0.5}
	pendingBias := tiny(t, batch)
	pendingBias.PendingBias = []float64{-1}
	invalid := tiny(t, cfg)
	invalid.Bias = nil
	huge := tiny(t, cfg)
	huge.Examples = math.MaxUint64 - 1
	for _, c := range []struct {
		name    string
		base    *learner.State
		states  []*learner.State
		weights []float64
		want    string
	}{
		{"no base", nil, []*learner.State{tiny(t, cfg)}, []float64{1}, "no base state"},
		{"invalid base", invalid, []*learner.State{tiny(t, cfg)}, []float64{1}, "mix: base: state bias"},
		{"pending base", pending, []*learner.State{tiny(t, batch)}, []float64{1}, "the base has a pending mini-batch (1 weights)"},
		{"lengths", tiny(t, cfg), []*learner.State{tiny(t, cfg)}, []float64{1, 1}, "1 states but 2 weights"},
		{"nil", tiny(t, cfg), []*learner.State{nil}, []float64{1}, "state 0 is nil"},
		{"invalid", tiny(t, cfg), []*learner.State{tiny(t, cfg), invalid}, []float64{1, 1}, "state 1: state bias"},
		{"eta", tiny(t, cfg), []*learner.State{tiny(t, cfg), other(func(c *learner.Config) { c.Eta = 2 })}, []float64{1, 1}, "state 1: config eta differs from the base's"},
		{"classes", other(func(c *learner.Config) { c.Classes = []string{"a", "b"} }), []*learner.State{other(func(c *learner.Config) { c.Classes = []string{"b", "a"} })}, []float64{1}, "state 0: config classes differs"},
		{"behind: labeled", base, []*learner.State{counted(func(st *learner.State) { st.Examples, st.Labeled = 11, 7 })}, []float64{1}, "state 0: counter labeled is 7, below the base's 8"},
		{"behind: examples", base, []*learner.State{base, counted(func(st *learner.State) { st.Examples = 9 })}, []float64{1, 1}, "state 1: counter examples is 9, below the base's 10"},
		{"behind: confusion", base, []*learner.State{counted(func(st *learner.State) { st.TrueNegatives = 2 })}, []float64{1}, "state 0: counter true_negatives is 2, below the base's 3"},
		{"behind: r2", base, []*learner.State{counted(func(st *learner.State) { st.R2 = 1 })}, []float64{1}, "state 0: r2 is 1, below the base's 4"},
		{"negative", tiny(t, cfg), []*learner.State{tiny(t, cfg), tiny(t, cfg)}, []float64{1, -1}, "weight 1 must be a finite number >= 0"},
		{"nan", tiny(t, cfg), []*learner.State{tiny(t, cfg)}, []float64{math.NaN()}, "weight 0 must be"},
		{"inf", tiny(t, cfg), []*learner.State{tiny(t, cfg)}, []float64{math.Inf(1)}, "weight 0 must be"},
		{"zero weights, learned", base, []*learner.State{base, counted(func(st *learner.State) { st.Examples, st.Labeled = 11, 9 })}, []float64{0, 0}, "positive, finite sum, got 0 (state 1 learned"},
		{"overflowing sum", tiny(t, cfg), []*learner.State{tiny(t, cfg), tiny(t, cfg)}, []float64{math.MaxFloat64, math.MaxFloat64}, "positive, finite sum"},
		{"kernel", tiny(t, kernel), []*learner.State{tiny(t, kernel), tiny(t, kernel)}, []float64{1, 1}, "a kernel model cannot be mixed with another (2 states): its support set is a list of examples"},
		{"pending", tiny(t, batch), []*learner.State{tiny(t, batch), pending}, []float64{1, 1}, "state 1 has a pending mini-batch (1 weights): end its range with Model.Flush"},
		{"pending bias", tiny(t, batch), []*learner.State{pendingBias}, []float64{1}, "state 0 has a pending mini-batch (0 weights)"},
		{"counter overflow", tiny(t, cfg), []*learner.State{huge, huge}, []float64{1, 1}, "the examples counter overflows"},
	} {
		t.Run(c.name, func(t *testing.T) {
			out, err := learner.Mix(c.base, c.states, c.weights)
			if err == nil || out != nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("got %v, %v; want an error containing %q", out, err, c.want)
			}
		})
	}
	// The kernel's error says why and names the way out.
	_, err := learner.Mix(tiny(t, kernel), []*learner.State{tiny(t, kernel), tiny(t, kernel)}, []float64{1, 1})
	if err == nil || !strings.Contains(err.Error(), "not a vector of parameters that can be averaged") || !strings.Contains(err.Error(), "model.scope: partition") {
		t.Fatalf("kernel: %v", err)
	}
	// The configuration's own errors stay inspectable.
	bad := tiny(t, cfg)
	bad.Config.HashBits = 0
	var fe *learner.FieldError
	if _, err := learner.Mix(bad, nil, nil); !errors.As(err, &fe) || fe.Field != "hash_bits" {
		t.Fatalf("got %v, want a *FieldError naming hash_bits", err)
	}
}
