package learner

import (
	"fmt"
)

// MixChanged is MixWithRule(rule, base, states, weights) for states that
// were learned from base and differ from it, in their per-weight vectors
// (weights, averaging sums, variances), at most at the coordinates
// changed: a range's Model.Changed, or the coordinates a stored result's
// changes name. It gives the same state to the bit, at a cost in
// proportion to changed rather than to the model, and writes it into
// base's per-weight vectors: the state returned holds them, and base
// must not be used afterwards.
//
// Every rule keeps base's bits of a coordinate on which every state has
// them, so the mix needs only the coordinates changed: it mixes and
// checks (State.Validate) those, with everything else of the states,
// and writes them into base. base must have passed Validate, as a mixed
// model or a restored one has: its coordinates outside changed are
// neither read nor checked again. Where that does not hold, or changed is
// every coordinate, it is MixWithRule: for Pegasos, whose steps rescale
// every weight, for a kernel model, and for an epoch in which a state
// found a drift (whose parameters started afresh).
func MixChanged(rule MixRule, base *State, states []*State, weights []float64, changed Coords) (*State, error) {
	if !rule.known() {
		return nil, fmt.Errorf("mix: %w", unknownMixRule(rule))
	}
	if base == nil || changed.All || !mixableAt(base, states, changed.Index) {
		return MixWithRule(rule, base, states, weights)
	}
	rule = rule.For(base.Config.Algorithm)
	idx := changed.Index
	sub := make([]*State, len(states))
	for i, st := range states {
		sub[i] = st.gather(idx)
	}
	out, err := mix(rule, base.gather(idx), sub, weights, len(idx))
	if err != nil {
		return nil, err
	}
	out.Weights = scatter(base.Weights, out.Weights, idx)
	out.SumWeights = scatter(base.SumWeights, out.SumWeights, idx)
	out.Variance = scatter(base.Variance, out.Variance, idx)
	return out, nil
}

// MixChangesAt is the coordinates of base's per-weight vectors that
// MixChanged(rule, base, states, weights, changed) may change: changed
// where it mixes over those alone, every coordinate where it mixes the
// whole state (Pegasos, whose mix rescales every weight, a kernel model,
// an epoch in which a state found a drift). base and states are as
// MixChanged is given them (with or without their challengers, which it
// does not look at), before it writes the mix over base.
func MixChangesAt(base *State, states []*State, changed Coords) Coords {
	if base == nil || changed.All || !mixableAt(base, states, changed.Index) {
		return AllCoords
	}
	return changed
}

// mixableAt reports whether MixChanged may mix states over base at idx
// alone: a linear model other than Pegasos, every per-weight vector of
// the configuration's length, idx within it, and no state that found a
// drift.
func mixableAt(base *State, states []*State, idx []uint32) bool {
	cfg := base.Config
	if cfg.Algorithm == Pegasos || cfg.Algorithm == Kernel || cfg.Validate() != nil {
		return false
	}
	n := cfg.Dimension() * cfg.outputs()
	if len(idx) > 0 && int(idx[len(idx)-1]) >= n {
		return false
	}
	for _, st := range append([]*State{base}, states...) {
		if st == nil || len(st.Weights) != n ||
			(cfg.Algorithm == Averaged && len(st.SumWeights) != n) ||
			(cfg.Algorithm == AROW && len(st.Variance) != n) {
			return false
		}
		if st != base && drifted(base, st) {
			return false
		}
	}
	return true
}

// gather is st with its per-weight vectors holding their values at idx
// alone, sharing everything else with st (which mix does not modify).
func (st *State) gather(idx []uint32) *State {
	c := *st
	c.Weights = gatherAt(st.Weights, idx)
	c.SumWeights = gatherAt(st.SumWeights, idx)
	c.Variance = gatherAt(st.Variance, idx)
	return &c
}

// gatherAt is v's values at idx; nil for an empty v.
func gatherAt(v []float64, idx []uint32) []float64 {
	if len(v) == 0 {
		return nil
	}
	out := make([]float64, len(idx))
	for n, i := range idx {
		out[n] = v[i]
	}
	return out
}

// scatter writes the values vals, at idx, into dst and returns it; nil
// when dst is empty (the state has no such vector).
func scatter(dst, vals []float64, idx []uint32) []float64 {
	if len(dst) == 0 {
		return nil
	}
	for n, i := range idx {
		dst[i] = vals[n]
	}
	return dst
}
