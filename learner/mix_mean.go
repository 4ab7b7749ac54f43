package learner

// mixParameters sets out's parameters to the mix of two or more
// participants parts with weights mu, as Mix documents; Averaged's sums
// are left to averagedSums.
func mixParameters(out *State, parts []*State, mu []float64) {
	switch out.Config.Algorithm {
	case Pegasos:
		ws, bs := effective(parts)
		out.Weights = weightedMean(ws, mu)
		out.Bias = weightedMean(bs, mu)
		out.Scale, out.VNorm2 = 1, squaredNorm(out.Weights, out.Bias)
	case AROW:
		out.Weights, out.Variance = precisionMean(column(parts, weightsOf), column(parts, varianceOf), mu)
		b, vb := precisionMean(column(parts, biasOf), column(parts, varianceBiasOf), mu)
		out.Bias = b
		out.setVarianceBias(vb)
	default:
		out.Weights = weightedMean(column(parts, weightsOf), mu)
		out.Bias = weightedMean(column(parts, biasOf), mu)
	}
}
