package learner

import (
	"fmt"
	"reflect"
	"slices"
	"sync"
)

// ChallengerConfig names a challenger: a configuration learned beside a
// model, on the same examples, to be compared with it.
type ChallengerConfig struct {
	Name   string
	Config Config
}

// Challenger is one of a model's challengers: its own model, learned from
// the examples the model learns, and its comparison with the model, which
// package compare keeps (compare.Attach). Both are part of the model's
// State, so that they resume, and are replayed, with it.
type Challenger struct {
	Name  string
	Model *Model
	// Comparison is the running comparison of the challenger's losses
	// with the model's, as numbers; package compare reads and updates it.
	Comparison ComparisonState
}

// ComparisonState is a comparison's state as package compare keeps it:
// the two confidence sequences (log-loss and 0/1 loss, each the model's
// loss minus the challenger's) and the sums of each one's losses.
type ComparisonState struct {
	LogLoss, Errors                     SequenceState
	ModelLogLoss, ModelErrors           float64
	ChallengerLogLoss, ChallengerErrors float64
}

// SequenceState is a confidence sequence's state (compare.Sequence): the
// observations' count, their sum, the sum of the rescaled observations
// and the intrinsic time (the sum of squared prediction errors).
type SequenceState struct {
	Count             uint64
	Sum, SumScaled, V float64
}

// ChallengerState is a challenger's part of its model's State.
type ChallengerState struct {
	Name       string
	State      *State
	Comparison ComparisonState
}

// Challengers are the model's challengers in order, for the caller to
// learn and compare (see compare.Challenge). They belong to the model: a
// caller may update them but not keep them past the model's next State or
// SetChallengers.
func (m *Model) Challengers() []*Challenger { return m.challengers }

// SetChallengers makes cs the model's challengers, in that order. A
// challenger the model already has under the same name and configuration
// keeps its state and comparison; any other starts new. It returns the
// names of the challengers it started new and of those it dropped. Names
// must be distinct and not empty, every configuration valid and with the
// model's classes (an example's label is decoded once for all).
func (m *Model) SetChallengers(cs []ChallengerConfig) (started, dropped []string, err error) {
	if err := checkChallengers(m.cfg, cs); err != nil {
		return nil, nil, err
	}
	next := make([]*Challenger, 0, len(cs))
	for _, c := range cs {
		i := slices.IndexFunc(m.challengers, func(o *Challenger) bool { return o.Name == c.Name })
		if i >= 0 && reflect.DeepEqual(m.challengers[i].Model.cfg.Canonical(), c.Config.Canonical()) {
			next = append(next, m.challengers[i])
			continue
		}
		cm, err := New(c.Config)
		if err != nil {
			return nil, nil, fmt.Errorf("challenger %s: %w", c.Name, err)
		}
		next = append(next, &Challenger{Name: c.Name, Model: cm})
		started = append(started, c.Name)
	}
	for _, o := range m.challengers {
		if !slices.ContainsFunc(next, func(c *Challenger) bool { return c == o }) {
			dropped = append(dropped, o.Name)
		}
	}
	if len(next) == 0 {
		next = nil
	}
	m.challengers = next
	return started, dropped, nil
}

// checkChallengers checks the challengers of a model of cfg.
func checkChallengers(cfg Config, cs []ChallengerConfig) error {
	for i, c := range cs {
		if c.Name == "" {
			return fmt.Errorf("challenger %d has no name", i)
		}
		if slices.ContainsFunc(cs[:i], func(o ChallengerConfig) bool { return o.Name == c.Name }) {
			return fmt.Errorf("challenger %s: the name is taken by another", c.Name)
		}
		if !slices.Equal(c.Config.Classes, cfg.Classes) {
			return fmt.Errorf("challenger %s: classes %v are not the model's %v", c.Name, c.Config.Classes, cfg.Classes)
		}
		if err := c.Config.Validate(); err != nil {
			return fmt.Errorf("challenger %s: %w", c.Name, err)
		}
	}
	return nil
}

// exportChallengers is the challengers' part of a State: copied, or with
// their per-weight vectors shared (release), as the model's own are.
func (m *Model) exportChallengers(release bool) []ChallengerState {
	if len(m.challengers) == 0 {
		return nil
	}
	out := make([]ChallengerState, len(m.challengers))
	for i, c := range m.challengers {
		out[i] = ChallengerState{Name: c.Name, State: c.Model.state(release), Comparison: c.Comparison}
	}
	return out
}

// restoreChallengers restores the challengers of st, which Validate
// checked; restore, when set, builds each one's model (RestoreInto)
// rather than Restore.
func (m *Model) restoreChallengers(st *State, restore func(i int, st *State) (*Model, error)) error {
	for i, c := range st.Challengers {
		var cm *Model
		var err error
		if restore != nil {
			cm, err = restore(i, c.State)
		} else {
			cm, err = Restore(c.State)
		}
		if err != nil {
			return fmt.Errorf("challenger %s: %w", c.Name, err)
		}
		m.challengers = append(m.challengers, &Challenger{Name: c.Name, Model: cm, Comparison: c.Comparison})
	}
	return nil
}

// validateChallengers checks the challengers of st: named once each, with
// the model's classes, no challengers of their own, every state valid and
// every number of the comparisons finite and in range.
func (st *State) validateChallengers(lean bool) error {
	names := make([]ChallengerConfig, len(st.Challengers))
	for i, c := range st.Challengers {
		if c.State == nil {
			return stateErr("challengers", "challenger %s has no state", c.Name)
		}
		names[i] = ChallengerConfig{Name: c.Name, Config: c.State.Config}
	}
	if err := checkChallengers(st.Config, names); err != nil {
		return stateErr("challengers", "%v", err)
	}
	for _, c := range st.Challengers {
		if len(c.State.Challengers) > 0 {
			return stateErr("challengers", "challenger %s has challengers of its own", c.Name)
		}
		check := c.State.Validate
		if lean {
			check = c.State.ValidateLean
		}
		if err := check(); err != nil {
			return fmt.Errorf("challenger %s: %w", c.Name, err)
		}
		cs := &c.Comparison
		for _, v := range []float64{cs.ModelLogLoss, cs.ModelErrors, cs.ChallengerLogLoss, cs.ChallengerErrors,
			cs.LogLoss.Sum, cs.LogLoss.SumScaled, cs.LogLoss.V, cs.Errors.Sum, cs.Errors.SumScaled, cs.Errors.V} {
			if !finite(v) {
				return stateErr("challengers", "challenger %s: the comparison holds %v", c.Name, v)
			}
		}
		if cs.LogLoss.Count != cs.Errors.Count {
			return stateErr("challengers", "challenger %s: the comparison counts %d log-losses and %d errors", c.Name, cs.LogLoss.Count, cs.Errors.Count)
		}
	}
	return nil
}

// challengerDigests starts computing the Digest of each challenger's
// state (with since, its step digest where it can), each on a goroutine
// of its own, and returns the function that waits for them: they are the
// challengers' digests, in order.
func (st *State) challengerDigests(since *Since) func() [][32]byte {
	if len(st.Challengers) == 0 {
		return func() [][32]byte { return nil }
	}
	out := make([][32]byte, len(st.Challengers))
	var wg sync.WaitGroup
	for i, c := range st.Challengers {
		// With since, a challenger that was one of the state stepped
		// from, at the same place, digests as its own step.
		var cs *Since
		if since != nil && i < len(since.challengers) && since.challengers[i].name == c.Name {
			cs = since.challengers[i].since
		}
		wg.Go(func() { out[i] = c.State.digest(cs) })
	}
	return func() [][32]byte {
		wg.Wait()
		return out
	}
}

// digestChallengers adds the challengers to the digest, when there are
// any, digests being what challengerDigests returned: a model without
// challengers keeps the digest it had before they existed.
func (st *State) digestChallengers(e *digestEncoder, digests func() [][32]byte) {
	ds := digests()
	if len(st.Challengers) == 0 {
		return
	}
	e.str("challengers")
	e.uint(uint64(len(st.Challengers)))
	for i, c := range st.Challengers {
		e.str(c.Name)
		d := ds[i]
		e.grow(len(d))
		e.buf = append(e.buf, d[:]...)
		cs := &c.Comparison
		for _, s := range []SequenceState{cs.LogLoss, cs.Errors} {
			e.uint(s.Count)
			e.float(s.Sum)
			e.float(s.SumScaled)
			e.float(s.V)
		}
		e.float(cs.ModelLogLoss)
		e.float(cs.ModelErrors)
		e.float(cs.ChallengerLogLoss)
		e.float(cs.ChallengerErrors)
	}
}
