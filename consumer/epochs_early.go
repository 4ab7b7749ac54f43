package consumer

import (
	"sync"

	"github.com/hyperplane-ml/hyperplane/epochlog"
	"github.com/hyperplane-ml/hyperplane/learner"
	"github.com/hyperplane-ml/hyperplane/shardid"
)

// learnedRange is what a range's result holds of its model once every
// message of the range is learned.
type learnedRange struct {
	state       *learner.State
	changed     learner.Coords
	challengers []*learner.Coords
	examples    uint64
}

// takeLearned flushes m, a range's model, and hands its state over: m
// must not be used afterwards.
func takeLearned(m *learner.Model) *learnedRange {
	m.Flush()
	lr := &learnedRange{changed: m.Changed(), examples: m.Counts().Examples}
	for _, c := range m.Challengers() {
		cc := c.Model.Changed()
		lr.challengers = append(lr.challengers, &cc)
	}
	lr.state = m.Release()
	return lr
}

// earlyMix is the mix of an epoch whose every range this worker learns,
// made from the ranges' states as soon as each has learned its last
// message, while their outputs are published and their results written
// (docs/scale-out.md, E6): into a state of its own, not W_{e-1}'s
// vectors, so that W_{e-1} holds until the mix is installed, once every
// result is in the log. A range that fails leaves it unused.
type earlyMix struct {
	epoch uint64
	sha   [32]byte
	// shards are the non-empty ranges' shards, in the boundary's order.
	shards []shardid.ID

	mu      sync.Mutex
	learned map[shardid.ID]*learner.State
	all     chan struct{} // closed once every range has learned
	done    chan struct{} // closed once the mix is made, or given up

	// Set before done is closed: the states mixed, in shard order, and
	// the mix; or err.
	states []*learner.State
	mixed  *mixOutcome
	err    error
}

// startEarlyMix prepares the early mix of b if this worker learns every
// non-empty range of it, and the model joins no labels (whose joins are
// taken from the results): nil otherwise.
func (x *Epochs) startEarlyMix(b *epochlog.Boundary, sha [32]byte) *earlyMix {
	if x.cfg.Labels != nil {
		return nil
	}
	em := &earlyMix{epoch: b.Epoch, sha: sha, learned: map[shardid.ID]*learner.State{},
		all: make(chan struct{}), done: make(chan struct{})}
	for _, r := range b.Shards {
		if r.Empty() {
			continue
		}
		if !x.owns(r.Shard) {
			return nil
		}
		em.shards = append(em.shards, r.Shard)
	}
	if len(em.shards) == 0 {
		return nil
	}
	return em
}

// noteLearned records lr, the learned state of shard's range of epoch
// b.Epoch, for the epoch's mix.
func (x *Epochs) noteLearned(b *epochlog.Boundary, sha [32]byte, shard shardid.ID, lr *learnedRange) {
	x.noteChanged(&epochlog.ShardResult{State: lr.state, Changed: &lr.changed, ChallengersChanged: lr.challengers})
	x.mu.Lock()
	em := x.early
	x.mu.Unlock()
	if em == nil || em.epoch != b.Epoch || em.sha != sha {
		return
	}
	em.mu.Lock()
	defer em.mu.Unlock()
	if _, ok := em.learned[shard]; ok {
		return
	}
	em.learned[shard] = lr.state
	if len(em.learned) == len(em.shards) {
		close(em.all)
	}
}

// run makes the early mix once every range has learned, unless finished
// is closed first (a range that failed). It closes em.done.
func (em *earlyMix) run(x *Epochs, b *epochlog.Boundary, finished <-chan struct{}) {
	defer close(em.done)
	select {
	case <-em.all:
	case <-finished:
		select {
		case <-em.all:
		default:
			return
		}
	}
	em.mu.Lock()
	for _, shard := range em.shards {
		em.states = append(em.states, em.learned[shard])
	}
	em.mu.Unlock()
	target, err := x.mixTarget()
	if err != nil {
		em.err = err
		return
	}
	em.mixed, em.err = x.mixInto(b, target, em.states)
}

// usable reports whether em mixed exactly states, the results of b (whose
// digest is sha) that the barrier gathered.
func (em *earlyMix) usable(b *epochlog.Boundary, sha [32]byte, states []*learner.State) bool {
	if em == nil || em.epoch != b.Epoch || em.sha != sha || em.err != nil || em.mixed == nil || len(states) != len(em.states) {
		return false
	}
	for i, st := range states {
		if st != em.states[i] {
			return false
		}
	}
	return true
}

// mixTarget is a state equal to W_{e-1} in vectors of its own, for a mix
// that must leave W_{e-1} whole: the previous W_{e-1}, kept by the last
// early mix installed, brought up to date where the last mix changed it,
// or a spare made ready at the start, or else a copy.
func (x *Epochs) mixTarget() (*learner.State, error) {
	base := x.base.State()
	spare := x.mixSpare
	x.mixSpare = nil
	diff, cdiffs := x.baseDiff, x.baseChallengersDiff
	if spare == nil {
		x.mu.Lock()
		spare = x.takeReady()
		x.mu.Unlock()
		diff, cdiffs = learner.AllCoords, nil
	}
	var m *learner.Model
	var err error
	if spare != nil {
		m, err = learner.RestoreInto(base, spare, diff, cdiffs...)
	} else {
		m, err = learner.Restore(base)
	}
	if err != nil {
		return nil, err
	}
	return m.Release(), nil
}
