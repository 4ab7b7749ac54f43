package learner

import (
	"fmt"
	"slices"
)

// Promotion is one entry of a model's history of promotions: the point
// of the stream at which a challenger became the model.
type Promotion struct {
	// Challenger is the promoted challenger's name: the name of the
	// model's configuration from then on.
	Challenger string
	// Replaced is the name the old model's configuration goes by as a
	// challenger.
	Replaced string
	// Auto is true for a promotion the worker decided itself
	// (model.compare.promote auto), false for a requested one.
	Auto bool
	// Request is the id of the request a manual promotion applied; empty
	// for an automatic one.
	Request string
	// Examples is the old model's example count when the promotion took
	// effect: it took effect after the example that brought the model's
	// count to Examples.
	Examples uint64
	// Source and Offset are that example's position (wire.Position);
	// empty for a promotion between two epochs.
	Source string
	Offset int64
	// Epoch is the epoch after whose mix a model learned in epochs was
	// promoted (docs/scale-out.md, section 3.11); 0 for a model of one
	// shard or of a partition.
	Epoch uint64
}

// Promotions are the model's promotions, oldest first; nil for a model
// never promoted. The caller must not change them.
func (m *Model) Promotions() []Promotion { return m.promotions }

// Name is the name of the model's configuration: the last promoted
// challenger's, or base for a model never promoted.
func (m *Model) Name(base string) string { return NameOf(m.promotions, base) }

// NameOf is the name of the configuration of a model with history ps:
// the last promoted challenger's, or base when ps is empty.
func NameOf(ps []Promotion, base string) string {
	if len(ps) == 0 {
		return base
	}
	return ps[len(ps)-1].Challenger
}

// Promote makes the challenger p.Challenger the model: its state becomes
// m's, and m's old state a challenger named p.Replaced, in the promoted
// one's place among the challengers. The two's comparison carries on
// turned around (the model's losses are the old challenger's, the
// differences negated); every other challenger's comparison starts
// afresh, since it was against the old model. p is appended to the
// history. A name that is not one of m's challengers is an error, and m
// is unchanged; so is a Replaced that another challenger has.
//
// A caller that holds m's challengers (compare.Live) must take them
// again after Promote.
func (m *Model) Promote(p Promotion) error {
	i := slices.IndexFunc(m.challengers, func(c *Challenger) bool { return c.Name == p.Challenger })
	if i < 0 {
		names := make([]string, len(m.challengers))
		for j, c := range m.challengers {
			names[j] = c.Name
		}
		return fmt.Errorf("no challenger %s (the model's challengers: %v)", p.Challenger, names)
	}
	if p.Replaced == "" || p.Replaced == p.Challenger {
		return fmt.Errorf("promotion of %s: the old model's configuration needs a name of its own, not %q", p.Challenger, p.Replaced)
	}
	if slices.ContainsFunc(m.challengers, func(c *Challenger) bool { return c.Name == p.Replaced && c.Name != p.Challenger }) {
		return fmt.Errorf("promotion of %s: challenger %s already has the name the old model's configuration would take", p.Challenger, p.Replaced)
	}
	c := m.challengers[i]
	cs, history := m.challengers, append(slices.Clip(m.promotions), p)
	// The two models trade places: the challenger's model struct becomes
	// m, which the worker and the views hold, and m's old one the
	// challenger's.
	*m, *c.Model = *c.Model, *m
	c.Model.challengers, c.Model.promotions = nil, nil
	m.challengers, m.promotions = cs, history
	c.Name = p.Replaced
	c.Comparison = turned(c.Comparison)
	for _, o := range cs {
		if o != c {
			o.Comparison = ComparisonState{}
		}
	}
	return nil
}

// turned is the comparison s with the model and the challenger swapped:
// each sequence's observations negated. On the rescaled observations,
// x becomes 1−x and the predictable estimate 1−x̂, so the intrinsic time
// is unchanged.
func turned(s ComparisonState) ComparisonState {
	neg := func(q SequenceState) SequenceState {
		return SequenceState{Count: q.Count, Sum: -q.Sum, SumScaled: float64(q.Count) - q.SumScaled, V: q.V}
	}
	return ComparisonState{
		LogLoss: neg(s.LogLoss), Errors: neg(s.Errors),
		ModelLogLoss: s.ChallengerLogLoss, ModelErrors: s.ChallengerErrors,
		ChallengerLogLoss: s.ModelLogLoss, ChallengerErrors: s.ModelErrors,
	}
}

// validatePromotions checks st's history: every promotion named, with a
// replaced configuration's name of its own.
func (st *State) validatePromotions() error {
	for i, p := range st.Promotions {
		if p.Challenger == "" || p.Replaced == "" || p.Challenger == p.Replaced {
			return stateErr("promotions", "promotion %d names challenger %q and replaced %q", i, p.Challenger, p.Replaced)
		}
	}
	return nil
}

// digestPromotions adds the history to the digest, when there is one: a
// model never promoted keeps the digest it had before promotions
// existed.
func (st *State) digestPromotions(e *digestEncoder) {
	if len(st.Promotions) == 0 {
		return
	}
	e.str("promotions")
	e.uint(uint64(len(st.Promotions)))
	for _, p := range st.Promotions {
		e.str(p.Challenger)
		e.str(p.Replaced)
		e.bool(p.Auto)
		e.str(p.Request)
		e.uint(p.Examples)
		e.str(p.Source)
		e.uint(uint64(p.Offset))
	}
	// The epochs, after the whole history and only when one was made
	// between two epochs: a history without them keeps its digest.
	if slices.ContainsFunc(st.Promotions, func(p Promotion) bool { return p.Epoch > 0 }) {
		e.str("promotion_epochs")
		for _, p := range st.Promotions {
			e.uint(p.Epoch)
		}
	}
}
