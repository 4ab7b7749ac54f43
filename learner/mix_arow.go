package learner

import (
	"fmt"
	"math"
)

// mixAROW sets out's parameters to MixAROW's mix of two or more
// participants parts with weights mu: the weights as MixDamped takes
// them, and the precision gains damped alike.
func mixAROW(out, base *State, parts []*State, mu []float64) {
	a := dampedCoefficients(mu)
	out.Weights = dampedSum(base.Weights, column(parts, weightsOf), a)
	out.Variance = dampedPrecision(base.Variance, column(parts, varianceOf), a)
	out.Bias = dampedSum(base.Bias, column(parts, biasOf), a)
	out.setVarianceBias(dampedPrecision(varianceBiasOf(base), column(parts, varianceBiasOf), a))
}

// dampedCoefficients are MixDamped's coefficients μ_s/‖μ‖ of the
// participants' deltas, ‖μ‖ = √(Σ μ_s²).
func dampedCoefficients(mu []float64) []float64 {
	var n2 float64
	for _, m := range mu {
		n2 += float64(m * m)
	}
	norm := math.Sqrt(n2)
	a := make([]float64, len(mu))
	for s, m := range mu {
		a[s] = m / norm
	}
	return a
}

// dampedPrecision is AROW's variance with the shards' precision gains
// combined as MixDamped combines their weights' deltas, element by
// element: with m the smallest variance of v0 and vs,
// m/(m/σ_0 + Σ_s a_s·max(0, m/σ_s − m/σ_0)), at most 1; 0 when m is 0.
// An element on which every vector has v0's bits keeps them.
func dampedPrecision(v0 []float64, vs [][]float64, a []float64) []float64 {
	out := make([]float64, len(v0))
	for i := range out {
		if sameAs(vs, i, v0[i]) {
			out[i] = v0[i]
			continue
		}
		m := v0[i]
		for _, v := range vs {
			m = min(m, v[i])
		}
		if m == 0 {
			continue // infinite precision
		}
		p0 := m / v0[i]
		p := p0
		for k, v := range vs {
			p += float64(a[k] * max(0, m/v[i]-p0))
		}
		out[i] = min(1, m/p)
	}
	return out
}

// errAROWOnly is MixAROW asked to mix a model of another algorithm.
func errAROWOnly(a Algorithm) error {
	return fmt.Errorf("mix: rule %s mixes arow models only, not %s (model.mixing.rule: auto chooses a rule for every algorithm)", MixAROW, a)
}
