package learner

import (
	"math"
)

// mixTouched sets out's parameters to the mean of two or more
// participants parts with weights mu, coordinate by coordinate over those
// that changed it from base, as MixWithRule documents; Averaged's sums
// are left to averagedSums.
func mixTouched(out, base *State, parts []*State, mu []float64) {
	switch out.Config.Algorithm {
	case Pegasos:
		ws, bs := effective(parts)
		w0, b0 := base.Effective()
		out.Weights = touchedMean(w0, ws, mu)
		out.Bias = touchedMean(b0, bs, mu)
		out.Scale, out.VNorm2 = 1, squaredNorm(out.Weights, out.Bias)
	case AROW:
		vs := column(parts, varianceOf)
		out.Weights = touchedPrecisionMean(base.Weights, base.Variance, column(parts, weightsOf), vs, mu)
		out.Variance = precisionSum(base.Variance, vs)
		vb := column(parts, varianceBiasOf)
		out.Bias = touchedPrecisionMean(base.Bias, varianceBiasOf(base), column(parts, biasOf), vb, mu)
		out.setVarianceBias(precisionSum(varianceBiasOf(base), vb))
	default:
		out.Weights = touchedMean(base.Weights, column(parts, weightsOf), mu)
		out.Bias = touchedMean(base.Bias, column(parts, biasOf), mu)
	}
}

// touchedMean is, element by element, w0 + Σ μ_s·(vs[s] − w0) / Σ μ_s
// over the vectors whose element differs from w0's bits, summed in order;
// an element that none changed keeps w0's bits.
func touchedMean(w0 []float64, vs [][]float64, mu []float64) []float64 {
	out := make([]float64, len(w0))
	for i := range out {
		b := math.Float64bits(w0[i])
		var d, m float64
		for k, v := range vs {
			if math.Float64bits(v[i]) != b {
				d += float64(mu[k] * (v[i] - w0[i]))
				m += mu[k]
			}
		}
		out[i] = w0[i]
		if m > 0 {
			out[i] += d / m
		}
	}
	return out
}

// touchedPrecisionMean is AROW's weights for MixTouched, element by
// element: over the vectors whose weight or variance differs from base's
// bits, Σ p_s·w_s / Σ p_s with p_s = μ_s·(m/σ_s), m the smallest of their
// variances; when m is 0, the μ-weighted mean over those of variance 0.
// An element that none changed keeps w0's bits.
func touchedPrecisionMean(w0, v0 []float64, ws, vs [][]float64, mu []float64) []float64 {
	out := make([]float64, len(w0))
	for i := range out {
		bw, bv := math.Float64bits(w0[i]), math.Float64bits(v0[i])
		m := math.Inf(1)
		for k, v := range vs {
			if math.Float64bits(ws[k][i]) != bw || math.Float64bits(v[i]) != bv {
				m = min(m, v[i])
			}
		}
		if math.IsInf(m, 1) {
			out[i] = w0[i]
			continue
		}
		var p, pw float64
		for k, v := range vs {
			if math.Float64bits(ws[k][i]) == bw && math.Float64bits(v[i]) == bv {
				continue
			}
			var pk float64
			switch {
			case m > 0:
				pk = float64(mu[k] * (m / v[i]))
			case v[i] == 0:
				pk = mu[k] // infinite precision: only the certain count
			}
			p += pk
			pw += float64(pk * ws[k][i])
		}
		out[i] = pw / p
	}
	return out
}
