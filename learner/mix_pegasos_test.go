package learner_test

import (
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/hyperplane-ml/hyperplane/learner"
)

func pegasosConfig() learner.Config {
	cfg := perceptronConfig()
	cfg.HashBits = 8
	cfg.Algorithm = learner.Pegasos
	return cfg
}

// wantPegasos is MixPegasos's documented formula for one vector, before
// the projection: w_0 + g·((P + N) − w_0), g = min(1/‖μ‖, 1.75), with
// whole[s] the shards that count by their effective weights.
func wantPegasos(base *learner.State, v0 []float64, parts []*learner.State, vs [][]float64, mu []float64, whole []bool) []float64 {
	want := make([]float64, len(v0))
	g := math.Min(1.75, 1/math.Sqrt(norm2(mu)))
	for i := range want {
		var past, d, m float64
		for s, st := range parts {
			if whole[s] {
				past += mu[s] * (st.Scale * vs[s][i])
				continue
			}
			past += mu[s] * (st.Scale * v0[i])
			if vs[s][i] != v0[i] {
				d += mu[s] * (st.Scale * (vs[s][i] - v0[i]))
				m += mu[s]
			}
		}
		if m > 0 {
			past += d / m
		}
		w0 := base.Scale * v0[i]
		want[i] = w0 + g*(past-w0)
	}
	return want
}

// TestMixPegasosValues: each effective weight is base's plus the step,
// stretched by 1/‖μ‖, to the shards' shrunk past plus their new learning averaged over
// the shards that learned there; a weight one shard alone learned keeps
// that shard's learning whole, and one no shard learned is the past,
// shrunk as the shards shrank it. The norm stays inside the ball.
func TestMixPegasosValues(t *testing.T) {
	base := trained(t, pegasosConfig(), 1, 200)
	states := shardsOf(t, base, []uint64{5, 6}, []int{8, 24})
	weights := []float64{1, 3}
	out := mustMixRule(t, learner.MixPegasos, base, states, weights)
	mu := mus(weights)
	whole := []bool{false, false}
	ww := wantPegasos(base, base.Weights, states, [][]float64{states[0].Weights, states[1].Weights}, mu, whole)
	wb := wantPegasos(base, base.Bias, states, [][]float64{states[0].Bias, states[1].Bias}, mu, whole)
	projected := projectWant(ww, wb, base.Config.Lambda)
	if out.Scale != 1 {
		t.Fatalf("scale %v, want 1", out.Scale)
	}
	checkNearScaled(t, "weights", out.Weights, ww)
	checkNearScaled(t, "bias", out.Bias, wb)
	if got, want := out.VNorm2, norm2(out.Weights)+norm2(out.Bias); math.Abs(got-want) > 1e-9*want {
		t.Fatalf("vnorm2 %v, want %v", got, want)
	}

	// The kinds of coordinate the rule tells apart must all occur.
	var alone, none int
	for i, v0 := range base.Weights {
		a, b := states[0].Weights[i] != v0, states[1].Weights[i] != v0
		switch {
		case a != b:
			alone++
			s := 0
			if b {
				s = 1
			}
			w0 := base.Scale * v0
			past := mu[0]*states[0].Scale*v0 + mu[1]*states[1].Scale*v0
			g := 1 / math.Hypot(mu[0], mu[1])
			want := (w0 + g*(past+states[s].Scale*(states[s].Weights[i]-v0)-w0)) * projected
			if math.Abs(out.Weights[i]-want) > 1e-12*math.Max(1, math.Abs(want)) {
				t.Fatalf("weight %d, learned by shard %d alone: %v, want its learning whole, %v", i, s, out.Weights[i], want)
			}
		case !a && v0 != 0:
			none++
		}
	}
	if alone == 0 || none == 0 {
		t.Fatalf("the shards must leave weights learned by one shard alone (%d) and by none (%d)", alone, none)
	}
}

// TestMixPegasosBall: a mix that leaves the ball of radius 1/√λ is
// projected onto it.
func TestMixPegasosBall(t *testing.T) {
	cfg := pegasosConfig()
	cfg.Lambda = 1
	base := trained(t, cfg, 1, 50)
	states := shardsOf(t, base, []uint64{5, 6, 7}, []int{40, 40, 40})
	out := mustMixRule(t, learner.MixPegasos, base, states, []float64{1, 1, 1})
	if n2 := norm2(out.Weights) + norm2(out.Bias); n2 > (1/cfg.Lambda)*(1+1e-12) {
		t.Fatalf("‖w‖² %v outside the ball of radius² %v", n2, 1/cfg.Lambda)
	}
}

// TestMixPegasosFolded: a shard that folded its scale into its weights
// (its v changed wherever base's is not 0) counts by its effective
// weights, not as a shard that learned everywhere.
func TestMixPegasosFolded(t *testing.T) {
	base := trained(t, pegasosConfig(), 1, 200)
	states := shardsOf(t, base, []uint64{5, 6}, []int{8, 24})
	folded := *states[1]
	folded.Weights, folded.Bias = slices.Clone(states[1].Weights), slices.Clone(states[1].Bias)
	const f = 1.0 / 1024 // exact: the effective weights keep their bits
	for i := range folded.Weights {
		folded.Weights[i] /= f
	}
	for i := range folded.Bias {
		folded.Bias[i] /= f
	}
	folded.Scale *= f
	folded.VNorm2 /= f * f
	parts := []*learner.State{states[0], &folded}
	weights := []float64{1, 3}
	out := mustMixRule(t, learner.MixPegasos, base, parts, weights)
	mu := mus(weights)
	whole := []bool{false, true}
	ww := wantPegasos(base, base.Weights, parts, [][]float64{parts[0].Weights, parts[1].Weights}, mu, whole)
	wb := wantPegasos(base, base.Bias, parts, [][]float64{parts[0].Bias, parts[1].Bias}, mu, whole)
	projectWant(ww, wb, base.Config.Lambda)
	checkNearScaled(t, "weights", out.Weights, ww)
	checkNearScaled(t, "bias", out.Bias, wb)
}

// TestMixPegasosProperties: deterministic, inputs left alone, one shard
// mixes into itself, every example counted once, and another order of
// the shards the same mix up to rounding.
func TestMixPegasosProperties(t *testing.T) {
	base := trained(t, pegasosConfig(), 1, 200)
	p, _ := learnRange(t, base, streamFor(base.Config, 2, 60))
	if got := mustMixRule(t, learner.MixPegasos, base, []*learner.State{p}, []float64{3}); got.Digest() != p.Digest() {
		t.Fatal("one shard: the mix is not its state")
	}
	states := shardsOf(t, base, []uint64{2, 3, 4}, []int{40, 70, 55})
	baseDigest := base.Digest()
	w := learner.MixWeightsOf(learner.MixExamples, base, states)
	a := mustMixRule(t, learner.MixPegasos, base, states, w)
	b := mustMixRule(t, learner.MixPegasos, base, states, slices.Clone(w))
	if a.Digest() != b.Digest() {
		t.Fatal("the same inputs mixed into different bits")
	}
	if base.Digest() != baseDigest {
		t.Fatal("the base changed")
	}
	want := base.Labeled
	for _, st := range states {
		want += st.Labeled - base.Labeled
	}
	if a.Labeled != want {
		t.Fatalf("labeled %d, want %d", a.Labeled, want)
	}
	if m := mustMixRule(t, learner.MixMean, base, states, w); m.Digest() == a.Digest() {
		t.Fatal("the pegasos rule gave the mean's bits")
	}
	r := mustMixRule(t, learner.MixPegasos, base, []*learner.State{states[2], states[1], states[0]}, []float64{w[2], w[1], w[0]})
	checkNearScaled(t, "weights in another order", r.Weights, a.Weights)
	checkNearScaled(t, "bias in another order", r.Bias, a.Bias)
}

// TestMixPegasosRule: auto means pegasos for Pegasos only, and the rule
// refuses a model of another algorithm, naming itself.
func TestMixPegasosRule(t *testing.T) {
	if got := learner.MixAuto.For(learner.Pegasos); got != learner.MixPegasos {
		t.Fatalf("auto for pegasos is %s, want %s", got, learner.MixPegasos)
	}
	for a, want := range map[learner.Algorithm]learner.MixRule{learner.Perceptron: learner.MixTouched, learner.Averaged: learner.MixMean, learner.AROW: learner.MixAROW} {
		if got := learner.MixAuto.For(a); got != want {
			t.Fatalf("auto for %s is %s, want %s", a, got, want)
		}
	}
	var r learner.MixRule
	if err := r.UnmarshalText([]byte("pegasos")); err != nil || r != learner.MixPegasos {
		t.Fatalf("UnmarshalText(pegasos): %v, %v", r, err)
	}
	cfg := pegasosConfig()
	cfg.Algorithm = learner.Perceptron
	base := trained(t, cfg, 1, 50)
	states := shardsOf(t, base, []uint64{2, 3}, []int{20, 20})
	_, err := learner.MixWithRule(learner.MixPegasos, base, states, []float64{1, 1})
	if err == nil || !strings.Contains(err.Error(), "rule pegasos mixes pegasos models only") {
		t.Fatalf("MixWithRule(pegasos) of a perceptron: %v, want an error naming the rule", err)
	}
}

// projectWant projects w and b onto the ball of radius 1/√λ in place and
// returns the factor (1 inside the ball).
func projectWant(w, b []float64, lambda float64) float64 {
	n2 := norm2(w) + norm2(b)
	if n2 <= 1/lambda {
		return 1
	}
	f := math.Sqrt(1 / (lambda * n2))
	for i := range w {
		w[i] *= f
	}
	for i := range b {
		b[i] *= f
	}
	return f
}

func norm2(v []float64) float64 {
	var s float64
	for _, x := range v {
		s += x * x
	}
	return s
}

// TestMixPegasosCap: with four shards of equal weight the stretch is
// capped at 1.75, below 1/‖μ‖ = 2.
func TestMixPegasosCap(t *testing.T) {
	base := trained(t, pegasosConfig(), 1, 200)
	states := shardsOf(t, base, []uint64{5, 6, 7, 8}, []int{10, 10, 10, 10})
	weights := []float64{1, 1, 1, 1}
	out := mustMixRule(t, learner.MixPegasos, base, states, weights)
	mu := mus(weights)
	whole := make([]bool, len(states))
	vs, bs := make([][]float64, len(states)), make([][]float64, len(states))
	for s, st := range states {
		vs[s], bs[s] = st.Weights, st.Bias
	}
	ww := wantPegasos(base, base.Weights, states, vs, mu, whole)
	wb := wantPegasos(base, base.Bias, states, bs, mu, whole)
	projectWant(ww, wb, base.Config.Lambda)
	checkNearScaled(t, "weights", out.Weights, ww)
	checkNearScaled(t, "bias", out.Bias, wb)
}
