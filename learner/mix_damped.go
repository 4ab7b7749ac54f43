package learner

import (
	"math"
)

// mixDamped sets out's parameters to the damped sum of two or more
// participants parts with weights mu over base, as MixWithRule documents;
// Averaged's sums are left to averagedSums.
func mixDamped(out, base *State, parts []*State, mu []float64) {
	a := dampedCoefficients(mu)
	switch out.Config.Algorithm {
	case Pegasos:
		ws, bs := effective(parts)
		w0, b0 := base.Effective()
		out.Weights = dampedSum(w0, ws, a)
		out.Bias = dampedSum(b0, bs, a)
		v2 := squaredNorm(out.Weights, out.Bias)
		if v2 > 1/out.Config.Lambda {
			f := math.Sqrt(1 / (out.Config.Lambda * v2))
			v2 = 0
			for i, v := range out.Weights {
				out.Weights[i] = v * f
				v2 += float64(out.Weights[i] * out.Weights[i])
			}
			for i, v := range out.Bias {
				out.Bias[i] = v * f
				v2 += float64(out.Bias[i] * out.Bias[i])
			}
		}
		out.Scale, out.VNorm2 = 1, v2
	case AROW:
		out.Weights = dampedSum(base.Weights, column(parts, weightsOf), a)
		out.Variance = precisionSum(base.Variance, column(parts, varianceOf))
		out.Bias = dampedSum(base.Bias, column(parts, biasOf), a)
		out.setVarianceBias(precisionSum(varianceBiasOf(base), column(parts, varianceBiasOf)))
	default:
		out.Weights = dampedSum(base.Weights, column(parts, weightsOf), a)
		out.Bias = dampedSum(base.Bias, column(parts, biasOf), a)
	}
}

// dampedSum is w0 + Σ a_s·(vs[s] − w0), element by element, summed in
// order; an element on which every vector has w0's bits keeps them.
func dampedSum(w0 []float64, vs [][]float64, a []float64) []float64 {
	out := make([]float64, len(w0))
	for i := range out {
		if sameAs(vs, i, w0[i]) {
			out[i] = w0[i]
			continue
		}
		var d float64
		for k, v := range vs {
			d += float64(a[k] * (v[i] - w0[i]))
		}
		out[i] = w0[i] + d
	}
	return out
}
