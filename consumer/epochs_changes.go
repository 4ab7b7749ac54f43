package consumer

import (
	"context"
	"math"

	"github.com/hyperplane-ml/hyperplane/epochlog"
	"github.com/hyperplane-ml/hyperplane/learner"
)

// An epoch's fixed cost in proportion to what it changed, not to the
// model. Each range records the coordinates of the per-weight vectors it
// changes (learner.Model.TrackChanges); its result is encoded from those
// (epochlog.ShardResult.Changed), a result read from the log names its
// own; the mix works over their union alone and writes W_e into the
// vectors of W_{e-1} (learner.MixChanged), which the mixed model then
// shares (learner.Adopt); and the next epoch's ranges learn in the
// vectors of this epoch's results, set to W_e at that union alone
// (learner.RestoreInto), rather than in new copies of the whole model.
// What is learned is the same to the bit.

// rangeModel is a model of W_{e-1}, x.base, for a range to learn from,
// recording what it changes: in the vectors of a result of the epoch
// before when one is spare, a copy otherwise.
func (x *Epochs) rangeModel() (*learner.Model, error) {
	x.mu.Lock()
	var spare *learner.State
	if n := len(x.spares); n > 0 {
		spare, x.spares = x.spares[n-1], x.spares[:n-1]
	}
	diff, cdiffs := x.baseDiff, x.baseChallengersDiff
	if spare == nil {
		if spare = x.takeReady(); spare != nil {
			diff, cdiffs = learner.AllCoords, nil
		}
	}
	x.mu.Unlock()
	m, err := learner.RestoreInto(x.base.State(), spare, diff, cdiffs...)
	if err != nil {
		return nil, err
	}
	m.TrackChanges()
	return m, nil
}

// makeReady makes n spares of W_{e-1}'s shape (learner.SpareFor) for the
// first epoch's ranges and its early mix, which would otherwise learn in
// new memory and fault it in page by page while the examples wait: they
// are made as the worker starts, while its consumer group forms and its
// readers open, on a goroutine of their own. Each is handed over as it
// is made, none beyond what the worker's assignment can use once it is
// known, and none once the first epoch is mixed, whose results are the
// spares from then on. The returned function waits for the goroutine.
func (x *Epochs) makeReady(ctx context.Context, n int) (wait func()) {
	shape := shapeOf(x.base.State())
	done := make(chan struct{})
	go func() {
		defer close(done)
		for made := range n {
			if ctx.Err() != nil || made > x.knownOwned() {
				return
			}
			sp := learner.SpareFor(shape)
			x.mu.Lock()
			over := x.readyDone
			if !over {
				x.ready = append(x.ready, sp)
			}
			x.mu.Unlock()
			if over {
				return
			}
		}
	}()
	return func() { <-done }
}

// knownOwned is how many shards this worker owns once its group has
// assigned them, and every shard until then: makeReady makes no more
// spares than the first epoch's ranges and early mix can use.
func (x *Epochs) knownOwned() int {
	if x.cfg.Owned == nil || (x.cfg.Settled != nil && !x.cfg.Settled()) {
		return math.MaxInt
	}
	return len(x.cfg.Owned())
}

// takeReady is a spare that makeReady made, nil when none is left. x.mu
// must be held.
func (x *Epochs) takeReady() *learner.State {
	n := len(x.ready)
	if n == 0 {
		return nil
	}
	sp := x.ready[n-1]
	x.ready[n-1] = nil
	x.ready = x.ready[:n-1]
	return sp
}

// shapeOf is a copy of st's configuration and vectors' lengths, its
// challengers' too, for learner.SpareFor on another goroutine: the copy
// shares st's vectors but is not changed when st is.
func shapeOf(st *learner.State) *learner.State {
	c := &learner.State{Config: st.Config, Weights: st.Weights, SumWeights: st.SumWeights, Variance: st.Variance}
	for _, ch := range st.Challengers {
		c.Challengers = append(c.Challengers, learner.ChallengerState{Name: ch.Name, State: shapeOf(ch.State)})
	}
	return c
}

// noteChanged records the coordinates at which the state of res, a result
// of the epoch being learned, may differ from W_{e-1}, for the mix.
func (x *Epochs) noteChanged(res *epochlog.ShardResult) {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.noteChangedLocked(res)
}

// noteChangedLocked is noteChanged with x.mu held.
func (x *Epochs) noteChangedLocked(res *epochlog.ShardResult) {
	if res.Changed == nil {
		return
	}
	if x.changedAt == nil {
		x.changedAt = map[*learner.State]learner.Coords{}
	}
	x.changedAt[res.State] = *res.Changed
	// A challenger's state is known by its own pointer.
	for i, c := range res.ChallengersChanged {
		if c != nil && i < len(res.State.Challengers) {
			x.changedAt[res.State.Challengers[i].State] = *c
		}
	}
}

// challengersChangedOf is, for each challenger of base, the coordinates
// at which its mix over its states in states may change it
// (learner.MixChangesAt).
func (x *Epochs) challengersChangedOf(base *learner.State, states []*learner.State) []learner.Coords {
	if len(base.Challengers) == 0 {
		return nil
	}
	out := make([]learner.Coords, len(base.Challengers))
	for i := range base.Challengers {
		out[i] = learner.AllCoords
		cs := make([]*learner.State, 0, len(states))
		for _, st := range states {
			if i < len(st.Challengers) {
				cs = append(cs, st.Challengers[i].State)
			}
		}
		if len(cs) == len(states) {
			out[i] = learner.MixChangesAt(base.Challengers[i].State, cs, x.changedOf(cs))
		}
	}
	return out
}

// withoutChallengers are shallow copies of states without their
// challengers, for mixing the models alone: the copies share every
// vector with states.
func withoutChallengers(states ...*learner.State) []*learner.State {
	out := make([]*learner.State, len(states))
	for i, st := range states {
		c := *st
		c.Challengers = nil
		out[i] = &c
	}
	return out
}

// changedOf is the union of the coordinates at which states may differ
// from W_{e-1}: every coordinate when one of them is not known.
func (x *Epochs) changedOf(states []*learner.State) learner.Coords {
	x.mu.Lock()
	defer x.mu.Unlock()
	sets := make([]learner.Coords, 0, len(states))
	for _, st := range states {
		c, ok := x.changedAt[st]
		if !ok {
			return learner.AllCoords
		}
		sets = append(sets, c)
	}
	return learner.UnionCoords(sets...)
}

// spareStates keeps the states of a mixed epoch's results, which nothing
// uses once the mix is made, for the next epoch's ranges to learn in:
// they differ from the new W_{e-1} only where the mix may have changed it
// (x.baseDiff).
func (x *Epochs) spareStates(states []*learner.State) {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.spares = append(x.spares[:0], states...)
	clear(x.changedAt)
	x.ready, x.readyDone = nil, true
}
