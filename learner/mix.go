package learner

import (
	"errors"
	"fmt"
	"math"
	"math/bits"
	"reflect"
	"slices"
	"strings"
)

// Mix is one step of iterative parameter mixing (McDonald, Hall & Mann
// 2010): the model that averages states, learned by shards from a common
// model, with weights μ_s = weights[s]/Σ weights. It is pure and
// deterministic to the bit: every sum is taken in float64 in the order of
// states (the shard order), with no fused multiply-add. It is not
// order-independent: the same states in another order may round
// differently, so callers must always pass them in the same order.
//
// Every state must pass Validate and have the same Config (the error
// names the first field that differs). The weights are finite, at least
// 0 and not all 0; a state of weight 0 adds to the counters but not to
// the model. A state with a pending mini-batch (Config.Batch > 1 and
// updates not yet applied) cannot be mixed: end its range on a batch
// boundary. A kernel model cannot be mixed with another: its support set
// is not a vector of parameters, so a kernel model with more than one
// shard needs the partition scope.
//
// One state gives a deep copy of it, whatever its weight: bit for bit the
// same state, not μ·w with μ = 1. Otherwise, among the states of positive
// weight (the participants), a number on which every participant has the
// same bits keeps those bits; every other one mixes as follows.
//
//   - perceptron, margin, pa, pa1, pa2 and multiclass models: every weight
//     and bias (per class) is the weighted mean Σ μ_s·w_s.
//   - averaged: Weights and Bias are weighted means as above. The averaging
//     sums are set so that the mixed averaged model is the weighted mean
//     of the participants' averaged models: with T_s the participants'
//     labeled counts and T their sum (the mixed Labeled),
//     SumWeights = (T+1)·Σ μ_s·SumWeights_s/(T_s+1), likewise SumBias, so
//     Weights - SumWeights/(T+1) = Σ μ_s·(Weights_s - SumWeights_s/(T_s+1))
//     up to rounding. Learning on from it averages as if the mixed averaged
//     model had been held for the first T+1 steps.
//   - pegasos: the effective weights Scale·Weights and Scale·Bias are
//     mixed as weighted means into Weights and Bias, Scale is 1 and VNorm2
//     is recomputed as ‖Weights‖² + ‖Bias‖². The mean stays inside
//     Pegasos's ball, which is convex.
//   - arow: each coordinate (and the bias) mixes by precision: with
//     p_s = μ_s/σ_s, the weight is Σ p_s·w_s / Σ p_s and the variance
//     1/Σ p_s, the weighted harmonic mean of the variances (at most 1, and
//     capped at 1 against rounding). To avoid overflow it is computed with
//     every p_s multiplied by the smallest variance m: p'_s = μ_s·(m/σ_s),
//     weight Σ p'_s·w_s / Σ p'_s, variance m/Σ p'_s. A variance of 0 is an
//     infinite precision: when some participants have one, the weight is
//     the μ-weighted mean over them alone and the variance stays 0.
//
// The counters Examples, Labeled, Mistakes, Updates and the confusion
// counts are summed over all states (an error if one overflows), R2 is
// their maximum, and the rolling window (Window and WindowNext) is that of
// the state with the most labeled examples, the first one on a tie.
func Mix(states []*State, weights []float64) (*State, error) {
	if len(states) == 0 {
		return nil, errors.New("mix: no states")
	}
	if len(weights) != len(states) {
		return nil, fmt.Errorf("mix: %d states but %d weights", len(states), len(weights))
	}
	for i, st := range states {
		if st == nil {
			return nil, fmt.Errorf("mix: state %d is nil", i)
		}
		if err := st.Validate(); err != nil {
			return nil, fmt.Errorf("mix: state %d: %w", i, err)
		}
	}
	cfg := states[0].Config
	for i, st := range states[1:] {
		if field := configDiff(cfg, st.Config); field != "" {
			return nil, fmt.Errorf("mix: state %d: config %s differs from state 0's", i+1, field)
		}
	}
	mu, err := normalize(weights)
	if err != nil {
		return nil, err
	}
	if cfg.Algorithm == Kernel && len(states) > 1 {
		return nil, fmt.Errorf("mix: kernel models cannot be mixed in global scope with more than one shard (%d states): use the partition scope", len(states))
	}
	for i, st := range states {
		if len(st.PendingIndex) > 0 || slices.ContainsFunc(st.PendingBias, func(v float64) bool { return v != 0 }) {
			return nil, fmt.Errorf("mix: state %d has a pending mini-batch (%d weights): end the range on a batch boundary", i, len(st.PendingIndex))
		}
	}
	if len(states) == 1 {
		return states[0].clone(), nil
	}

	out := &State{Config: cloneConfig(cfg)}
	if err := mixCounters(out, states); err != nil {
		return nil, err
	}
	var parts []*State
	var pmu []float64
	for i, st := range states {
		if mu[i] > 0 {
			parts = append(parts, st)
			pmu = append(pmu, mu[i])
		}
	}
	vecs := func(f func(*State) []float64) [][]float64 {
		vs := make([][]float64, len(parts))
		for s, st := range parts {
			vs[s] = f(st)
		}
		return vs
	}
	switch cfg.Algorithm {
	case Pegasos:
		ws, bs := make([][]float64, len(parts)), make([][]float64, len(parts))
		for s, st := range parts {
			ws[s], bs[s] = st.Effective()
		}
		out.Weights = weightedMean(ws, pmu)
		out.Bias = weightedMean(bs, pmu)
		out.Scale = 1
		for _, v := range out.Weights {
			out.VNorm2 += float64(v * v)
		}
		for _, v := range out.Bias {
			out.VNorm2 += float64(v * v)
		}
	case AROW:
		out.Weights, out.Variance = precisionMean(vecs(func(st *State) []float64 { return st.Weights }), vecs(func(st *State) []float64 { return st.Variance }), pmu)
		b, vb := precisionMean(vecs(func(st *State) []float64 { return st.Bias }), vecs(func(st *State) []float64 { return []float64{st.VarianceBias} }), pmu)
		out.Bias, out.VarianceBias = b, vb[0]
	default:
		out.Weights = weightedMean(vecs(func(st *State) []float64 { return st.Weights }), pmu)
		out.Bias = weightedMean(vecs(func(st *State) []float64 { return st.Bias }), pmu)
	}
	if cfg.Algorithm == Averaged {
		out.SumWeights = averagedSums(parts, pmu, out.Labeled, func(st *State) []float64 { return st.SumWeights })
		out.SumBias = averagedSums(parts, pmu, out.Labeled, func(st *State) []float64 { return st.SumBias })
	}
	if cfg.Batch > 1 {
		out.PendingBias = make([]float64, cfg.outputs())
	}
	if err := out.Validate(); err != nil {
		// Not expected: the mix of valid states is valid.
		return nil, fmt.Errorf("mix: the mixed state: %w", err)
	}
	return out, nil
}

// normalize turns weights into μ_s = weights[s]/Σ weights, summed in
// order.
func normalize(weights []float64) ([]float64, error) {
	var sum float64
	for i, w := range weights {
		if !(w >= 0) || math.IsInf(w, 0) {
			return nil, fmt.Errorf("mix: weight %d must be a finite number >= 0, got %v", i, w)
		}
		sum += w
	}
	if !(sum > 0) || math.IsInf(sum, 0) {
		return nil, fmt.Errorf("mix: the weights must have a positive, finite sum, got %v", sum)
	}
	mu := make([]float64, len(weights))
	for i, w := range weights {
		mu[i] = w / sum
	}
	return mu, nil
}

// mixCounters sums the counters of states into out, takes the largest R2
// and the window of the state with the most labeled examples.
func mixCounters(out *State, states []*State) error {
	best := states[0]
	for _, st := range states {
		for _, c := range []struct {
			name     string
			sum, add *uint64
		}{
			{"examples", &out.Examples, &st.Examples}, {"labeled", &out.Labeled, &st.Labeled},
			{"mistakes", &out.Mistakes, &st.Mistakes}, {"updates", &out.Updates, &st.Updates},
			{"true_positives", &out.TruePositives, &st.TruePositives}, {"false_positives", &out.FalsePositives, &st.FalsePositives},
			{"true_negatives", &out.TrueNegatives, &st.TrueNegatives}, {"false_negatives", &out.FalseNegatives, &st.FalseNegatives},
		} {
			s, carry := bits.Add64(*c.sum, *c.add, 0)
			if carry != 0 {
				return fmt.Errorf("mix: the sum of the %s counters overflows", c.name)
			}
			*c.sum = s
		}
		out.R2 = math.Max(out.R2, st.R2)
		if st.Labeled > best.Labeled {
			best = st
		}
	}
	out.Window = clone(best.Window)
	out.WindowNext = best.WindowNext
	return nil
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
			m = math.Min(m, v[i])
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
		weights[i], variances[i] = pw/p, math.Min(1, m/p)
	}
	return weights, variances
}

// averagedSums is the averaged perceptron's accumulator of the mix:
// (T+1)·Σ μ_s·sums_s/(T_s+1), labeled being T.
func averagedSums(parts []*State, mu []float64, labeled uint64, sums func(*State) []float64) []float64 {
	t := float64(labeled) + 1
	out := make([]float64, len(sums(parts[0])))
	for i := range out {
		var s float64
		for k, st := range parts {
			s += float64(mu[k] * (sums(st)[i] / (float64(st.Labeled) + 1)))
		}
		out[i] = float64(t * s)
	}
	return out
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

// configDiff is the configuration key of the first field in which a and
// b differ, or "".
func configDiff(a, b Config) string {
	va, vb := reflect.ValueOf(a), reflect.ValueOf(b)
	for i := range va.NumField() {
		fa, fb := va.Field(i), vb.Field(i)
		var equal bool
		if fa.Kind() == reflect.Slice {
			equal = fa.Len() == fb.Len()
			for j := 0; equal && j < fa.Len(); j++ {
				equal = fa.Index(j).Interface() == fb.Index(j).Interface()
			}
		} else {
			equal = fa.Interface() == fb.Interface()
		}
		if !equal {
			name, _, _ := strings.Cut(va.Type().Field(i).Tag.Get("json"), ",")
			return name
		}
	}
	return ""
}

func cloneConfig(c Config) Config {
	c.Classes = clone(c.Classes)
	return c
}

// clone is a deep copy of st.
func (st *State) clone() *State {
	c := *st
	c.Config = cloneConfig(st.Config)
	c.Window = clone(st.Window)
	c.Weights = clone(st.Weights)
	c.Bias = clone(st.Bias)
	c.SumWeights = clone(st.SumWeights)
	c.SumBias = clone(st.SumBias)
	c.Variance = clone(st.Variance)
	c.PendingIndex = clone(st.PendingIndex)
	c.PendingValue = clone(st.PendingValue)
	c.PendingBias = clone(st.PendingBias)
	c.Support = nil
	for _, sv := range st.Support {
		c.Support = append(c.Support, SupportVector{Index: clone(sv.Index), Value: clone(sv.Value), Coef: sv.Coef, Norm2: sv.Norm2})
	}
	return &c
}
