package learner

import (
	"fmt"
	"math/bits"
	"sync"
)

// MixChallengers mixes the challengers of states, learned from base, as
// the epochs mix the model (docs/scale-out.md, section 3.10): each
// challenger alone, its states in the order of states, by rule for its
// algorithm (MixRule.For), weighted by MixWeightsOf(kind) of its own
// states, over changed[i], the coordinates at which challenger i's states
// may differ from base's (MixChanged; AllCoords when not given). Like
// MixChanged it writes into base's challengers' per-weight vectors,
// which must not be used afterwards.
//
// Each challenger's comparison is combined from the states': with C the
// base's and C_s state s's, every count and sum is C_first + Σ (C_s − C)
// over the states after the first that learned a labeled example the
// challenger compared, in order; base's when none did. Each state's
// comparison is base's plus its own examples, so the result counts every
// example of every state once.
//
// Every state must have base's challengers, by name and in order.
func MixChallengers(rule MixRule, kind MixWeights, base *State, states []*State, changed []Coords) ([]ChallengerState, error) {
	if len(base.Challengers) == 0 {
		for i, st := range states {
			if len(st.Challengers) > 0 {
				return nil, fmt.Errorf("mix: state %d has %d challengers, the base none", i, len(st.Challengers))
			}
		}
		return nil, nil
	}
	for i := range base.Challengers {
		for k, st := range states {
			if len(st.Challengers) != len(base.Challengers) || st.Challengers[i].Name != base.Challengers[i].Name {
				return nil, fmt.Errorf("mix: state %d has not the base's challengers (%d, the base %d; challenger %d is not %s)", k, len(st.Challengers), len(base.Challengers), i, base.Challengers[i].Name)
			}
		}
	}
	// Each challenger is mixed from its own vectors alone: they are mixed
	// side by side, each into its own place of out.
	out := make([]ChallengerState, len(base.Challengers))
	errs := make([]error, len(base.Challengers))
	var wg sync.WaitGroup
	for i := range base.Challengers {
		wg.Go(func() { out[i], errs[i] = mixChallenger(rule, kind, base, states, changed, i) })
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}

// mixChallenger is MixChallengers of challenger i alone.
func mixChallenger(rule MixRule, kind MixWeights, base *State, states []*State, changed []Coords, i int) (ChallengerState, error) {
	bc := &base.Challengers[i]
	cstates := make([]*State, len(states))
	comps := make([]*ComparisonState, len(states))
	for k, st := range states {
		cstates[k], comps[k] = st.Challengers[i].State, &st.Challengers[i].Comparison
	}
	diff := AllCoords
	if i < len(changed) {
		diff = changed[i]
	}
	mixed, err := MixChanged(rule, bc.State, cstates, MixWeightsOf(kind, bc.State, cstates), diff)
	if err != nil {
		return ChallengerState{}, fmt.Errorf("challenger %s: %w", bc.Name, err)
	}
	c, err := combineComparisons(&bc.Comparison, comps)
	if err != nil {
		return ChallengerState{}, fmt.Errorf("challenger %s: %w", bc.Name, err)
	}
	return ChallengerState{Name: bc.Name, State: mixed, Comparison: c}, nil
}

// combineComparisons is base's comparison with each of cs's increase
// over it, in order (see MixChallengers).
func combineComparisons(base *ComparisonState, cs []*ComparisonState) (ComparisonState, error) {
	out := *base
	first := true
	for _, c := range cs {
		if c.LogLoss.Count < base.LogLoss.Count || c.Errors.Count < base.Errors.Count {
			return ComparisonState{}, fmt.Errorf("mix: a comparison counts %d examples, below the base's %d: a state must be learned from a copy of the base", c.LogLoss.Count, base.LogLoss.Count)
		}
		if c.LogLoss.Count == base.LogLoss.Count {
			continue // it compared no example: nothing to add
		}
		if first {
			out, first = *c, false
			continue
		}
		var carry uint64
		for _, s := range [][3]*SequenceState{{&out.LogLoss, &c.LogLoss, &base.LogLoss}, {&out.Errors, &c.Errors, &base.Errors}} {
			o, st, b := s[0], s[1], s[2]
			var cr uint64
			o.Count, cr = bits.Add64(o.Count, st.Count-b.Count, 0)
			carry |= cr
			o.Sum += st.Sum - b.Sum
			o.SumScaled += st.SumScaled - b.SumScaled
			o.V += st.V - b.V
		}
		if carry != 0 {
			return ComparisonState{}, fmt.Errorf("mix: a comparison's count overflows")
		}
		out.ModelLogLoss += c.ModelLogLoss - base.ModelLogLoss
		out.ModelErrors += c.ModelErrors - base.ModelErrors
		out.ChallengerLogLoss += c.ChallengerLogLoss - base.ChallengerLogLoss
		out.ChallengerErrors += c.ChallengerErrors - base.ChallengerErrors
	}
	return out, nil
}

// Mixes is nil when rule r mixes the models of algorithm a over several
// shards, and says why not otherwise: a kernel model cannot be mixed,
// and rules arow and pegasos mix their own algorithm alone.
func (r MixRule) Mixes(a Algorithm) error {
	switch {
	case a == Kernel:
		return fmt.Errorf("mix: a kernel model cannot be mixed: its support set is a list of examples, not a vector of parameters")
	case r.For(a) == MixAROW && a != AROW:
		return errAROWOnly(a)
	case r.For(a) == MixPegasos && a != Pegasos:
		return errPegasosOnly(a)
	}
	return nil
}
