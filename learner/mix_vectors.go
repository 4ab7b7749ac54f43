package learner

import (
	"math"
)

// column is f of every state of parts, in order.
func column(parts []*State, f func(*State) []float64) [][]float64 {
	vs := make([][]float64, len(parts))
	for s, st := range parts {
		vs[s] = f(st)
	}
	return vs
}

func weightsOf(st *State) []float64  { return st.Weights }
func biasOf(st *State) []float64     { return st.Bias }
func varianceOf(st *State) []float64 { return st.Variance }

// varianceBiasOf is AROW's bias variances of st, one per output.
func varianceBiasOf(st *State) []float64 {
	if st.Config.Multiclass() {
		return st.VarianceBiases
	}
	return []float64{st.VarianceBias}
}

// setVarianceBias sets AROW's bias variances of out, one per output.
func (out *State) setVarianceBias(v []float64) {
	if out.Config.Multiclass() {
		out.VarianceBiases = v
		return
	}
	out.VarianceBias = v[0]
}

// effective is the effective weights and bias (State.Effective) of every
// state of parts, in order.
func effective(parts []*State) (ws, bs [][]float64) {
	ws, bs = make([][]float64, len(parts)), make([][]float64, len(parts))
	for s, st := range parts {
		ws[s], bs[s] = st.Effective()
	}
	return ws, bs
}

// squaredNorm is the sum of the squares of the elements of vs, in order.
func squaredNorm(vs ...[]float64) float64 {
	var n2 float64
	for _, v := range vs {
		for _, x := range v {
			n2 += float64(x * x)
		}
	}
	return n2
}

// precisionSum is AROW's variance of the shards' evidence added, element
// by element (see MixWithRule): with m the smallest variance of v0 and
// vs, m/(m/σ_0 + Σ_s max(0, m/σ_s − m/σ_0)), at most 1; 0 when m is 0.
// An element on which every vector has v0's bits keeps them.
func precisionSum(v0 []float64, vs [][]float64) []float64 {
	ones := make([]float64, len(vs))
	for s := range ones {
		ones[s] = 1
	}
	return dampedPrecision(v0, vs, ones)
}

// sameAs reports whether element i of every vector has the bits of x.
func sameAs(vs [][]float64, i int, x float64) bool {
	b := math.Float64bits(x)
	for _, v := range vs {
		if math.Float64bits(v[i]) != b {
			return false
		}
	}
	return true
}

// weightedMean is Σ μ_s·vs[s], element by element, summed in order; an
// element with the same bits in every vector keeps them.
func weightedMean(vs [][]float64, mu []float64) []float64 {
	out := make([]float64, len(vs[0]))
	for i := range out {
		if same(vs, i) {
			out[i] = vs[0][i]
			continue
		}
		var s float64
		for k, v := range vs {
			s += float64(mu[k] * v[i])
		}
		out[i] = s
	}
	return out
}

// precisionMean mixes AROW's weights ws and variances vs, element by
// element, as Mix documents.
func precisionMean(ws, vs [][]float64, mu []float64) (weights, variances []float64) {
	weights = make([]float64, len(ws[0]))
	variances = make([]float64, len(vs[0]))
	for i := range weights {
		if same(ws, i) && same(vs, i) {
			weights[i], variances[i] = ws[0][i], vs[0][i]
			continue
		}
		m := vs[0][i]
		for _, v := range vs[1:] {
			m = min(m, v[i])
		}
		var p, pw float64
		if m == 0 {
			// Infinite precision: only the certain participants count.
			for k, v := range vs {
				if v[i] == 0 {
					p += mu[k]
					pw += float64(mu[k] * ws[k][i])
				}
			}
			weights[i], variances[i] = pw/p, 0
			continue
		}
		for k, v := range vs {
			pk := float64(mu[k] * (m / v[i]))
			p += pk
			pw += float64(pk * ws[k][i])
		}
		weights[i], variances[i] = pw/p, min(1, m/p)
	}
	return weights, variances
}

// averagedSums is the averaged perceptron's accumulator of the mix, u or
// ub (see Mix): with w the mixed weights (or biases) and learners the
// states that learned a labeled example beyond base, in shard order,
//
//	u = u_0 + Σ_s (u_s − u_0) + (Σ_s n_s·(w − w_s) + (T_0+1)·((w − w_0) − Σ_s (w_s − w_0)))
//
// element by element, which is (T+1)·w − S with S = S_0 + Σ_s (S_s − S_0)
// and S_s = (T_s+1)·w_s − u_s: every vector held, once. An element on
// which the mix and every learner have base's bits of w, and every
// learner base's bits of u, keeps base's u. Every product is converted to
// float64 on its own, so that none is fused with a sum.
func averagedSums(base *State, learners []*State, w []float64, get func(*State) (w, u []float64)) []float64 {
	w0, u0 := get(base)
	t0 := float64(base.Labeled + 1)
	n := make([]float64, len(learners))
	ws, us := make([][]float64, len(learners)), make([][]float64, len(learners))
	for k, st := range learners {
		n[k] = float64(st.Labeled - base.Labeled)
		ws[k], us[k] = get(st)
	}
	out := make([]float64, len(w))
	for i := range out {
		if math.Float64bits(w[i]) == math.Float64bits(w0[i]) && unchanged(w0, u0, ws, us, i) {
			out[i] = u0[i]
			continue
		}
		u, corr, dw := u0[i], 0.0, w[i]-w0[i]
		for k := range learners {
			u += us[k][i] - u0[i]
			corr += float64(n[k] * (w[i] - ws[k][i]))
			dw -= ws[k][i] - w0[i]
		}
		out[i] = u + (corr + float64(t0*dw))
	}
	return out
}

// unchanged reports whether element i of every ws and us has the bits of
// w0's and u0's.
func unchanged(w0, u0 []float64, ws, us [][]float64, i int) bool {
	bw, bu := math.Float64bits(w0[i]), math.Float64bits(u0[i])
	for k := range ws {
		if math.Float64bits(ws[k][i]) != bw || math.Float64bits(us[k][i]) != bu {
			return false
		}
	}
	return true
}

// same reports whether element i has the same bits in every vector.
func same(vs [][]float64, i int) bool {
	b := math.Float64bits(vs[0][i])
	for _, v := range vs[1:] {
		if math.Float64bits(v[i]) != b {
			return false
		}
	}
	return true
}
