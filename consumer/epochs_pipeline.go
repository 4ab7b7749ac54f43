package consumer

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"

	"go.uber.org/zap"

	"github.com/hyperplane-ml/hyperplane/epochlog"
	"github.com/hyperplane-ml/hyperplane/learner"
)

// The pipeline of a worker that owns every shard (docs/scale-out.md,
// section 3.12): it mixes an epoch as soon as its ranges have learned
// their last messages, cuts the next boundary from the mix in memory and
// learns the next epoch while one recorder, in order, waits for the
// epoch's outputs, writes its results, creates the next boundary and
// only then lets the next epoch's outputs be published.

// aheadRange is how a range learned ahead of its boundary reports: its
// result as soon as its last message is learned (nil if it stopped
// before), then learnRange's error once its outputs are flushed.
type aheadRange struct {
	gate    *outputGate
	learned chan *epochlog.ShardResult
	done    chan error
	sent    bool // only the range's goroutine uses it
}

func newAheadRange(gate *outputGate) *aheadRange {
	return &aheadRange{gate: gate, learned: make(chan *epochlog.ShardResult, 1), done: make(chan error, 1)}
}

// learnedAll reports the range's result, nil if it is not complete.
func (a *aheadRange) learnedAll(res *epochlog.ShardResult) {
	if !a.sent {
		a.sent = true
		a.learned <- res
	}
}

// returned reports learnRange's end.
func (a *aheadRange) returned(err error) {
	a.learnedAll(nil)
	a.done <- err
}

// aheadEpoch is an epoch whose ranges are learned, or being learned,
// with its outputs held by gate until the boundary is durable.
type aheadEpoch struct {
	b      *epochlog.Boundary
	gate   *outputGate
	ranges []epochlog.Range // the non-empty ones, in shard order
	ahead  map[string]*aheadRange
	cancel context.CancelFunc
	wait   func() error
}

// learnAhead starts learning every non-empty range of b, whose digest is
// sha (zero while b is not in the log), with gate holding their outputs.
func (x *Epochs) learnAhead(ctx context.Context, b *epochlog.Boundary, sha [32]byte, gate *outputGate) *aheadEpoch {
	ctx, cancel := context.WithCancel(ctx)
	a := &aheadEpoch{b: b, gate: gate, ahead: map[string]*aheadRange{}, cancel: cancel}
	for _, r := range b.Shards {
		if !r.Empty() {
			a.ranges = append(a.ranges, r)
			a.ahead[r.Shard] = newAheadRange(gate)
		}
	}
	a.wait = x.startOwned(ctx, cancel, b, sha, a.ahead)
	return a
}

// results waits until every range has learned its last message, and
// returns their results in shard order; nil if one stopped before.
func (a *aheadEpoch) results() []*epochlog.ShardResult {
	out := make([]*epochlog.ShardResult, 0, len(a.ranges))
	for _, r := range a.ranges {
		res := <-a.ahead[r.Shard].learned
		if res == nil {
			return nil
		}
		out = append(out, res)
	}
	return out
}

// abandon stops the epoch learned ahead: its outputs are dropped unless
// its gate is open already, and the readers it parked are closed, so
// that the next range of each shard opens its reader where its boundary
// says.
func (x *Epochs) abandon(a *aheadEpoch) {
	a.gate.dropped()
	a.cancel()
	a.wait()
	x.readers.drop(func(string) bool { return false })
}

// pipelines reports whether the ranges of b may be learned by the
// pipeline: this worker owns every one that is not empty, it extends
// the log, and nothing in b or the model needs the steps of section 3.2
// (labels that come later, challengers, a promotion).
func (x *Epochs) pipelines(b *epochlog.Boundary) bool {
	if !x.atLogEnd || x.cfg.Follow || x.cfg.Verify != nil || x.cfg.Labels != nil || b.Promote != nil || len(x.model.Challengers()) > 0 {
		return false
	}
	for _, r := range b.Shards {
		if !r.Empty() && !x.owns(r.Shard) {
			return false
		}
	}
	return true
}

// recording is the recorder's work on one epoch.
type recording struct {
	done chan struct{}
	// written is set once every result of the epoch is in the log;
	// next and nextSHA are the boundary stored for the next epoch, and
	// adopted whether it has the cut's ranges. err is the first failure.
	written bool
	// free are the states the recorder wrote and the W_{e-1} it wrote
	// them against, once written: they differ from W_e only where the
	// epoch's mix may have changed it, and are spares for the ranges.
	free    []*learner.State
	next    *epochlog.Boundary
	nextSHA [32]byte
	adopted bool
	err     error
}

// pipeline learns epochs by the steps of section 3.12, from b, the
// stored boundary of the epoch to learn, whose digest is sha, until one
// is due that cannot be: it then returns with the model, the epoch and
// the positions where the synchronous steps go on (the next boundary is
// in the log, or none is due).
func (x *Epochs) pipeline(ctx context.Context, b *epochlog.Boundary, sha [32]byte) error {
	gate := newOutputGate()
	gate.opened()
	cur := x.learnAhead(ctx, b, sha, gate)
	var rec *recording
	// free are the states of the epoch recorded last, which differ from
	// the model held at most at x.baseDiff.
	var free []*learner.State
	defer func() {
		if rec != nil {
			x.recorded(rec)
		}
	}()
	for {
		results := cur.results()
		if rec != nil {
			// One epoch is recorded at a time: the previous one's
			// boundary, this one's, is in the log now, or was cut
			// otherwise.
			r := x.recorded(rec)
			rec = nil
			if r.err != nil || !r.adopted {
				x.abandon(cur)
				if r.err != nil {
					return r.err
				}
				x.log.Info("the next boundary was cut by another writer: the epoch learned ahead is learned again over it",
					zap.Uint64("epoch", cur.b.Epoch))
				return nil
			}
			sha = r.nextSHA
			b = r.next
			x.cur, x.curSHA = b, sha
			free = r.free
		}
		if results == nil {
			// A range stopped before its end (revoked, shutdown, an
			// error): the synchronous steps take the epoch over, its
			// boundary in the log.
			x.abandon(cur)
			x.cur, x.curSHA = b, sha
			if err := cur.wait(); errors.Is(err, ErrFatal) {
				return err
			}
			return ctx.Err()
		}
		states := make([]*learner.State, len(results))
		for i, res := range results {
			res.BoundarySHA256 = sha
			x.noteChanged(res)
			states[i] = res.State
		}
		// The recorder writes the results against W_{e-1}, which the mix
		// overwrites: a copy, made in a free state where there is one,
		// whose digest is W_{e-1}'s, already known.
		copied, err := x.baseCopy(&free)
		if err != nil {
			x.abandon(cur)
			return err
		}
		base := x.base.Held(copied)
		x.unrecorded = b.Epoch
		prevDiff := x.baseDiff
		if err := x.mix(b, states, 0); err != nil {
			x.abandon(cur)
			return err
		}
		// The states left differ from W_e where either of the last two
		// mixes may have changed the model.
		x.mu.Lock()
		x.spares = append(x.spares[:0], free...)
		x.mu.Unlock()
		x.baseDiff = learner.UnionCoords(prevDiff, x.baseDiff)
		free = nil
		x.advance(b, sha)
		x.cur = nil
		// The epoch is recorded even when no boundary can be cut (the
		// worker stops, the source fails).
		next, cerr := x.cut(ctx)
		var nextGate *outputGate
		if cerr == nil && next != nil && x.pipelines(next) {
			nextGate = newOutputGate()
		}
		rec = x.record(ctx, cur, sha, results, base, next, nextGate)
		if nextGate == nil {
			// Nothing to learn ahead: once the epoch is recorded the
			// synchronous steps go on.
			r := x.recorded(rec)
			rec = nil
			return cmp.Or(cerr, r.err)
		}
		cur = x.learnAhead(ctx, next, [32]byte{}, nextGate)
	}
}

// record starts the recorder of epoch a.b (docs/scale-out.md, section
// 3.12): it waits for each range's outputs, writes its result against
// base (W_{e-1}), creates next, the boundary cut from W_e, if any, and
// opens nextGate if the stored one has its ranges, drops it otherwise;
// then it writes W_e as a generation if one is due.
func (x *Epochs) record(ctx context.Context, a *aheadEpoch, sha [32]byte, results []*epochlog.ShardResult, base *epochlog.Base, next *epochlog.Boundary, nextGate *outputGate) *recording {
	rec := &recording{done: make(chan struct{})}
	b := a.b
	go func() {
		defer close(rec.done)
		defer func() {
			if nextGate != nil && !rec.adopted {
				nextGate.dropped()
			}
		}()
		for i, r := range a.ranges {
			if err := <-a.ahead[r.Shard].done; err != nil {
				rec.err = fmt.Errorf("epoch %d: %w", b.Epoch, err)
				return
			}
			if err := x.writeResult(ctx, b, r, results[i], nil, r.To, base); err != nil {
				rec.err = err
				return
			}
		}
		rec.written = true
		for _, res := range results {
			rec.free = append(rec.free, res.State)
		}
		rec.free = append(rec.free, base.State())
		if next != nil {
			var stored *epochlog.Boundary
			var ssha [32]byte
			err := x.retry(ctx, NotReadySnapshots, fmt.Sprintf("write epoch %d's boundary", next.Epoch), func(ctx context.Context) (err error) {
				stored, ssha, err = x.cfg.Log.CreateBoundary(ctx, next)
				return err
			})
			if err != nil {
				rec.err = fatal(err)
				return
			}
			rec.next, rec.nextSHA = stored, ssha
			if sameRanges(stored, next) {
				rec.adopted = true
				nextGate.opened()
			}
		}
		if err := x.snapshot(ctx, b, sha); err != nil {
			rec.err = err
		}
	}()
	return rec
}

// baseCopy is a copy of W_{e-1}, the model held, in one of free's
// states when there is one (taken from free), which differ from it at
// most at x.baseDiff.
func (x *Epochs) baseCopy(free *[]*learner.State) (*learner.State, error) {
	n := len(*free)
	if n == 0 {
		return x.model.State(), nil
	}
	spare := (*free)[n-1]
	*free = (*free)[:n-1]
	m, err := learner.RestoreInto(x.base.State(), spare, x.baseDiff)
	if err != nil {
		return nil, err
	}
	return m.Release(), nil
}

// recorded waits for rec to finish and returns it.
func (x *Epochs) recorded(rec *recording) *recording {
	<-rec.done
	if rec.written {
		x.unrecorded = 0
	} else {
		x.unrecordedErr = rec.err
	}
	return rec
}

// noResults reports whether no range of b has its result in the log: a
// worker that starts over a boundary others learned takes the steps of
// section 3.2.
func (x *Epochs) noResults(ctx context.Context, b *epochlog.Boundary) (bool, error) {
	for _, r := range b.Shards {
		if r.Empty() {
			continue
		}
		if ok, err := x.shardExists(ctx, b.Epoch, r.Shard); err != nil || ok {
			return false, err
		}
	}
	return true, nil
}

// sameRanges reports whether a and b learn the same: the same ranges and
// no promotion.
func sameRanges(a, b *epochlog.Boundary) bool {
	return a.Promote == nil && b.Promote == nil && a.ConfigDigest == b.ConfigDigest && a.BaseStateSHA256 == b.BaseStateSHA256 &&
		slices.EqualFunc(a.Shards, b.Shards, func(p, q epochlog.Range) bool {
			return p.Shard == q.Shard && p.From == q.From && p.To == q.To && p.Labels == nil && q.Labels == nil
		})
}
