package learner

import (
	"fmt"
	"math"
)

// pegasosGain caps MixPegasos's stretch of the step from the base, 1/‖μ‖
// (√k for k shards of equal weight). Measured at the defaults
// (BENCHMARKS.md, "Pegasos's rule"): uncapped, √6 at 6 partitions diverges
// (14 points on 1M examples), since the shards correct the same mistakes
// and a gain above 2 on a weight that every shard corrects overshoots it
// by more than it corrected; 2 is on that edge (1.52 on 1M at 6
// partitions, 1.68 with the cap). A fixed 1.5 costs 0.27 / 0.79 / 1.37
// points at 2 / 4 / 6 partitions of 400,000 examples and 2.31 at 6 of 1M,
// the cap 0.17 / 0.71 / 1.13 and 1.68.
const pegasosGain = 1.75

// mixPegasos sets out's parameters to MixPegasos's mix of two or more
// participants parts, of normalised weights mu, learned from base, as
// MixWithRule documents.
//
// A Pegasos state holds its weights as Scale·v: a step shrinks every
// weight through Scale and adds the example to v, so that over the epoch
// a shard's v changed exactly where it learned from an example. Its
// effective weights are therefore Scale_s·v_0 (base's v, shrunk as the
// shard shrank it) plus its new learning Scale_s·(v_s − v_0), which is 0
// where v_s has v_0's bits. A shard that folded its scale into v (when
// Scale falls below 1e-9), or restarted it at its first labeled example,
// changed v wherever v_0 was not 0 and cannot tell the two apart: it
// counts by its effective weights alone, as the mean does.
func mixPegasos(out, base *State, parts []*State, mu []float64) {
	whole := make([]bool, len(parts)) // a shard that counts by its effective weights
	for s, st := range parts {
		whole[s] = changedEverywhere(base.Weights, st.Weights) && changedEverywhere(base.Bias, st.Bias) &&
			(hasNonZero(base.Weights) || hasNonZero(base.Bias))
	}
	var n2 float64
	for _, m := range mu {
		n2 += float64(m * m)
	}
	g := min(pegasosGain, 1/math.Sqrt(n2))
	out.Weights = pegasosMix(g, base.Scale, base.Weights, column(parts, weightsOf), parts, whole, mu)
	out.Bias = pegasosMix(g, base.Scale, base.Bias, column(parts, biasOf), parts, whole, mu)
	out.Scale, out.VNorm2 = 1, projectBall(out.Weights, out.Bias, out.Config.Lambda)
}

// pegasosMix is MixPegasos for one vector, element by element: with w_0 =
// scale0·v0[i], the past P = Σ_s μ_s·Scale_s·v0[i] (μ_s·Scale_s·vs[s][i]
// for a shard that counts whole), the new learning N = Σ_{s∈C} μ_s·
// Scale_s·(vs[s][i] − v0[i]) / Σ_{s∈C} μ_s over the other shards whose
// element differs from v0's bits (0 when there are none), and the element
// w_0 + g·((P + N) − w_0), every sum in order.
func pegasosMix(g, scale0 float64, v0 []float64, vs [][]float64, parts []*State, whole []bool, mu []float64) []float64 {
	out := make([]float64, len(v0))
	for i := range out {
		b := math.Float64bits(v0[i])
		var past, d, m float64
		for s, v := range vs {
			sc := parts[s].Scale
			if whole[s] {
				past += float64(mu[s] * float64(sc*v[i]))
				continue
			}
			past += float64(mu[s] * float64(sc*v0[i]))
			if math.Float64bits(v[i]) != b {
				d += float64(mu[s] * float64(sc*(v[i]-v0[i])))
				m += mu[s]
			}
		}
		mixed := past
		if m > 0 {
			mixed += d / m
		}
		w0 := float64(scale0 * v0[i])
		out[i] = w0 + float64(g*(mixed-w0))
	}
	return out
}

// changedEverywhere reports whether v differs from v0's bits wherever v0
// is not 0.
func changedEverywhere(v0, v []float64) bool {
	for i, x := range v0 {
		if x != 0 && math.Float64bits(v[i]) == math.Float64bits(x) {
			return false
		}
	}
	return true
}

func hasNonZero(v []float64) bool {
	for _, x := range v {
		if x != 0 {
			return true
		}
	}
	return false
}

// projectBall projects w and b together onto Pegasos's ball of radius
// 1/√λ when they leave it, in place, and returns their squared norm.
func projectBall(w, b []float64, lambda float64) float64 {
	v2 := squaredNorm(w, b)
	if v2 <= 1/lambda {
		return v2
	}
	f := math.Sqrt(1 / (lambda * v2))
	v2 = 0
	for i, x := range w {
		w[i] = x * f
		v2 += float64(w[i] * w[i])
	}
	for i, x := range b {
		b[i] = x * f
		v2 += float64(b[i] * b[i])
	}
	return v2
}

// errPegasosOnly is MixPegasos asked to mix a model of another algorithm.
func errPegasosOnly(a Algorithm) error {
	return fmt.Errorf("mix: rule %s mixes pegasos models only, not %s (model.mixing.rule: auto chooses a rule for every algorithm)", MixPegasos, a)
}
