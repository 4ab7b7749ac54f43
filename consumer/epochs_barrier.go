package consumer

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"go.uber.org/zap"

	"github.com/hyperplane-ml/hyperplane/consumer/retry"
	"github.com/hyperplane-ml/hyperplane/epochlog"
	"github.com/hyperplane-ml/hyperplane/learner"
	"github.com/hyperplane-ml/hyperplane/shardid"
	"github.com/hyperplane-ml/hyperplane/snapshot"
)

// barrier waits until every non-empty range of b has its result in the
// log, then reads them all, verified against b, in shard order. waited is
// how long that took.
func (x *Epochs) barrier(ctx context.Context, b *epochlog.Boundary, sha [32]byte) (states []*learner.State, waited time.Duration, err error) {
	start := time.Now()
	// The results this worker holds are not waited for; those of others
	// are, until found in the log. Once the barrier returns, overtaken or
	// stopped too, it waits for none.
	waiting := map[shardid.ID]bool{}
	for _, r := range b.Shards {
		if !r.Empty() && x.result(b.Epoch, sha, r.Shard) == nil {
			waiting[r.Shard] = true
		}
	}
	x.metrics.MissingShards.Set(float64(len(waiting)))
	defer x.metrics.MissingShards.Set(0)
	if len(waiting) > 0 {
		// Another worker's result is needed: that worker needs the
		// results held here too.
		if err := x.writeHeld(ctx, b, sha); err != nil {
			return nil, 0, err
		}
		if err := x.writeRegrouped(ctx); err != nil {
			return nil, 0, err
		}
	}
	found := func(shard shardid.ID) {
		delete(waiting, shard)
		x.metrics.MissingShards.Set(float64(len(waiting)))
	}
	logged := false
	for i, r := range b.Shards {
		if r.Empty() {
			continue
		}
		if st := x.result(b.Epoch, sha, r.Shard); st != nil {
			// Held from the start, or learned here while the barrier
			// waited for an owner that left.
			found(r.Shard)
			states = append(states, st)
			continue
		}
		bo := retry.Backoff{Min: 25 * time.Millisecond, Max: 2 * time.Second}
		var held *learner.State
		for polls := 0; ; polls++ {
			// Learned here meanwhile, and held (E4).
			if held = x.result(b.Epoch, sha, r.Shard); held != nil {
				break
			}
			changed := x.changed()
			ok, err := x.shardExists(ctx, b.Epoch, r.Shard)
			if err != nil {
				return nil, 0, err
			}
			if ok {
				break
			}
			// The results of shards later in shard order may be in the
			// log already: they are read once the barrier reaches them,
			// and are no longer counted as missing. Looked for once the
			// wait is a few polls long, so that a result that comes at
			// once is not seen later for the look-ups of the others.
			if polls >= 3 {
				if _, err := x.lookFor(ctx, b, sha, b.Shards[i+1:], waiting, found); err != nil {
					return nil, 0, err
				}
			}
			// A shard whose owner left is handed to another worker,
			// maybe this one, while it waits; so may others of the
			// epoch (a worker that joined before the group gave it
			// anything, or that takes over a departed worker's shards):
			// each is learned beside the others, not when the barrier
			// reaches it.
			if x.owns(r.Shard) {
				if err := x.learnRanges(ctx, b, sha, x.ownedMissing(b, sha, b.Shards[i:])); err != nil {
					return nil, 0, err
				}
				continue
			}
			// The next boundary is cut only from a model that mixed
			// every range of this epoch: a result missing below it was
			// held by a worker that learned them all, or is lost. Either
			// way no one writes it any more, and it is learned here.
			if polls == 0 || polls == 3 || polls >= 7 {
				if cut, err := x.nextCut(ctx, b.Epoch); err != nil {
					return nil, 0, err
				} else if cut {
					// The result may have been written, and the next
					// boundary cut from it, since the look above: only
					// a result missing once the cut is seen is missing
					// for good.
					if ok, err := x.shardExists(ctx, b.Epoch, r.Shard); err != nil {
						return nil, 0, err
					} else if ok {
						break
					}
					if by, err := x.overtaking(ctx, b.Epoch); err != nil || by != nil {
						return nil, 0, overtakenOr(by, err)
					}
					x.log.Info("a shard's result is not in the log, and the next epoch is cut: learning its range here",
						zap.Uint64("epoch", b.Epoch), zap.Stringer("shard", r.Shard), zap.Int64("from", r.From), zap.Int64("to", r.To))
					if err := x.learnAgain(ctx, b, sha, r, nil); err != nil {
						return nil, 0, err
					}
					continue
				}
			}
			// Retention deletes an epoch's results once a generation
			// holds it: a worker that finds one missing for long may
			// have been overtaken (section 3.3). It looks after the
			// fourth poll, then at every poll once the delay is at its
			// cap: every fourth poll there would be every 8 s, and the
			// others wait that long for this worker's next results.
			if polls == 3 || polls >= 7 {
				if by, err := x.overtaking(ctx, b.Epoch); err != nil || by != nil {
					return nil, 0, overtakenOr(by, err)
				}
			}
			if !logged && time.Since(start) > barrierWarnAfter*x.cfg.Interval {
				logged = x.logMissing(ctx, b, sha, b.Shards[i:], time.Since(start), waiting, found)
			}
			// Ranges learned here while alone, and held, are needed by
			// the worker this one waits for.
			if err := x.writeHeld(ctx, b, sha); err != nil {
				return nil, 0, err
			}
			if err := x.writeRegrouped(ctx); err != nil {
				return nil, 0, err
			}
			if err := pause(ctx, &bo, changed); err != nil {
				return nil, 0, err
			}
		}
		found(r.Shard)
		if held != nil {
			states = append(states, held)
			continue
		}
		res, err := x.readShard(ctx, b, sha, r)
		if err != nil {
			return nil, 0, err
		}
		if err := res.Verify(b, sha); err != nil {
			return nil, 0, fatal(err)
		}
		x.keepJoined(res)
		x.noteChanged(res)
		states = append(states, res.State)
	}
	waited = time.Since(start)
	x.metrics.Barrier.Observe(waited.Seconds())
	return states, waited, nil
}

// ownedMissing is the non-empty ranges among ranges, of b, whose shards
// this worker owns and whose results it does not hold.
func (x *Epochs) ownedMissing(b *epochlog.Boundary, sha [32]byte, ranges []epochlog.Range) []epochlog.Range {
	var out []epochlog.Range
	for _, r := range ranges {
		if !r.Empty() && x.owns(r.Shard) && x.result(b.Epoch, sha, r.Shard) == nil {
			out = append(out, r)
		}
	}
	return out
}

// barrierWarnAfter is how many times model.mixing.interval a barrier
// waits before the worker logs the shards it waits for (docs/scale-out.md,
// section 3.3).
const barrierWarnAfter = 10

// logMissing warns, naming them, of the shards among rest, the ranges of
// b from the one the barrier polls on, whose results are neither held
// here nor in the log: an owner that is slow, stuck or gone. It reports
// whether it warned: not when every result has come meanwhile, nor when
// a look-up failed (the next poll warns). The results it finds it passes
// to found (lookFor), so that the gauge agrees with the warning.
func (x *Epochs) logMissing(ctx context.Context, b *epochlog.Boundary, sha [32]byte, rest []epochlog.Range, waited time.Duration,
	waiting map[shardid.ID]bool, found func(shardid.ID)) bool {
	missing, err := x.lookFor(ctx, b, sha, rest, waiting, found)
	if err != nil || len(missing) == 0 {
		return false
	}
	x.log.Warn("the epoch's barrier waits for the results of shards that other workers own: a slow, stuck or lost owner holds the epoch for every worker",
		zap.Uint64("epoch", b.Epoch), zap.Strings("missing", missing), zap.Duration("waited", waited.Round(time.Second)))
	return true
}

// lookFor looks for the results of the shards of rest that the barrier
// still waits for: each held here or in the log is passed to found, and
// no longer counted as missing; it returns the others.
func (x *Epochs) lookFor(ctx context.Context, b *epochlog.Boundary, sha [32]byte, rest []epochlog.Range,
	waiting map[shardid.ID]bool, found func(shardid.ID)) (missing []string, err error) {
	for _, r := range rest {
		if !waiting[r.Shard] {
			continue
		}
		if x.result(b.Epoch, sha, r.Shard) == nil {
			ok, err := x.shardExists(ctx, b.Epoch, r.Shard)
			if err != nil {
				return nil, err
			}
			if !ok {
				missing = append(missing, r.Shard.String())
				continue
			}
		}
		found(r.Shard)
	}
	return missing, nil
}

// resultKey names a range's result: its epoch, the digest of its
// boundary and its shard.
type resultKey struct {
	epoch    uint64
	boundary [32]byte
	shard    shardid.ID
}

// keepResult records the state of a range this worker learned and whose
// result it wrote, or found written with the same content, for the
// barrier of its epoch; with labels, join is its join (res.Join decoded),
// nil if not at hand.
func (x *Epochs) keepResult(res *epochlog.ShardResult, join *JoinState) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.results == nil {
		x.results = map[resultKey]*learner.State{}
	}
	x.results[resultKey{res.Epoch, res.BoundarySHA256, res.Shard}] = res.State
	if res.Labels != nil {
		if x.joinedResults == nil {
			x.joinedResults = map[resultKey]joinedResult{}
		}
		x.joinedResults[resultKey{res.Epoch, res.BoundarySHA256, res.Shard}] = joinedResult{reached: res.Reached, join: res.Join, state: join}
	}
	x.noteChangedLocked(res)
}

// result is the state of the result of shard's range in epoch e, of the
// boundary whose digest is sha, if this worker wrote it; nil otherwise.
func (x *Epochs) result(e uint64, sha [32]byte, shard shardid.ID) *learner.State {
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.results[resultKey{e, sha, shard}]
}

// forgetResults drops the kept results of epochs up to e.
func (x *Epochs) forgetResults(e uint64) {
	x.mu.Lock()
	defer x.mu.Unlock()
	for k := range x.results {
		if k.epoch <= e {
			delete(x.results, k)
		}
	}
	for k := range x.joinedResults {
		if k.epoch <= e {
			delete(x.joinedResults, k)
		}
	}
	for k := range x.held {
		if k.epoch <= e {
			delete(x.held, k)
		}
	}
}

// heldResult is a result held, not written (docs/scale-out.md, section
// 3.12), and with labels its join, not yet encoded.
type heldResult struct {
	res  *epochlog.ShardResult
	join *JoinState
}

// hold keeps res, the result of a range this worker learned while it
// owned every range of its epoch, and with labels join, the shard's join
// where it reached, for the barrier, without writing it.
func (x *Epochs) hold(res *epochlog.ShardResult, join *JoinState) {
	x.keepResult(res, join)
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.held == nil {
		x.held = map[resultKey]heldResult{}
	}
	x.held[resultKey{res.Epoch, res.BoundarySHA256, res.Shard}] = heldResult{res, join}
}

// heldResults is how many results of epoch e this worker holds and has
// not written.
func (x *Epochs) heldResults(e uint64) int {
	x.mu.Lock()
	defer x.mu.Unlock()
	n := 0
	for k := range x.held {
		if k.epoch == e {
			n++
		}
	}
	return n
}

// writeHeld writes the results of b's epoch that this worker holds and
// has not written, in shard order: the barrier calls it when another
// worker's result is needed too, since that worker needs these.
func (x *Epochs) writeHeld(ctx context.Context, b *epochlog.Boundary, sha [32]byte) error {
	for _, r := range b.Shards {
		key := resultKey{b.Epoch, sha, r.Shard}
		x.mu.Lock()
		h, ok := x.held[key]
		x.mu.Unlock()
		if !ok {
			continue
		}
		if err := x.writeResult(ctx, b, r, h.res, h.join); err != nil {
			return err
		}
		x.mu.Lock()
		delete(x.held, key)
		x.mu.Unlock()
	}
	return nil
}

// writeRegrouped starts writing the newest mixed model, W_{e-1}, as its
// generation if this worker mixed epochs from results it held, above its
// newest generation, and is alone no longer (regrouped): the barrier
// calls it while it waits for another worker's result, which that worker
// would otherwise learn only after the ranges of every epoch above the
// newest generation (docs/scale-out.md, section 3.12). The mix, which
// changes the vectors the generation holds, waits for it.
func (x *Epochs) writeRegrouped(ctx context.Context) error {
	if x.writing != nil || x.prev == nil || x.written >= x.prev.Epoch || !x.regrouped() {
		return nil
	}
	return x.startGeneration(ctx, x.prev, x.prevSHA)
}

// soleOwner reports whether this worker learns every non-empty range of
// b itself and is alone (EpochConfig.Alone): then no other worker waits
// for its results, and it keeps them rather than write them
// (docs/scale-out.md, E4).
func (x *Epochs) soleOwner(b *epochlog.Boundary) bool {
	if x.cfg.Alone == nil || !x.cfg.Alone() {
		return false
	}
	for _, r := range b.Shards {
		if !r.Empty() && !x.owns(r.Shard) {
			return false
		}
	}
	return true
}

// readShard reads the result of range r of b, verified against b. A
// result damaged at rest, while b reads, is learned again from the range b
// records, and the damaged object replaced: a range's result is a
// function of its boundary and the source (docs/scale-out.md, section
// 3.9).
func (x *Epochs) readShard(ctx context.Context, b *epochlog.Boundary, sha [32]byte, r epochlog.Range) (*epochlog.ShardResult, error) {
	model := x.cfg.Worker.Model
	for relearned := false; ; relearned = true {
		var res *epochlog.ShardResult
		err := x.retry(ctx, NotReadySnapshots, fmt.Sprintf("read epoch %d's result of shard %s", b.Epoch, r.Shard), func(ctx context.Context) (err error) {
			res, err = x.cfg.Log.Shard(ctx, model, b.Epoch, r.Shard, x.base)
			return err
		})
		if errors.Is(err, snapshot.ErrNotFound) {
			// Deleted since it was seen: the worker that wrote a
			// generation at or beyond this epoch retained the log.
			if by, gerr := x.overtaking(ctx, b.Epoch); gerr != nil || by != nil {
				return nil, overtakenOr(by, gerr)
			}
		}
		if errors.Is(err, epochlog.ErrDamagedLog) && !relearned {
			x.log.Warn("a shard's result is damaged: learning its range again from the boundary, and writing it again",
				zap.Uint64("epoch", b.Epoch), zap.Stringer("shard", r.Shard), zap.Int64("from", r.From), zap.Int64("to", r.To), zap.Error(err))
			if err := x.learnAgain(ctx, b, sha, r, nil); err != nil {
				return nil, err
			}
			continue
		}
		if err != nil {
			return nil, fatal(err)
		}
		if err := res.Verify(b, sha); err != nil {
			return nil, fatal(err)
		}
		return res, nil
	}
}

// nextCut reports whether the boundary of the epoch after e is in the
// log, damaged or not, retrying while the log fails.
func (x *Epochs) nextCut(ctx context.Context, e uint64) (cut bool, err error) {
	err = x.retry(ctx, NotReadySnapshots, fmt.Sprintf("look for epoch %d's boundary", e+1), func(ctx context.Context) error {
		_, _, err := x.cfg.Log.Boundary(ctx, x.cfg.Worker.Model, e+1)
		switch {
		case err == nil || errors.Is(err, epochlog.ErrDamagedLog):
			cut = true
		case errors.Is(err, snapshot.ErrNotFound):
			cut = false
		default:
			return err
		}
		return nil
	})
	return cut, err
}

// pause waits for bo's next delay, or less if changed is closed first: a
// shard this worker is given while it waits is learned at once.
func pause(ctx context.Context, bo *retry.Backoff, changed <-chan struct{}) error {
	t := time.NewTimer(bo.Next())
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
	case <-changed:
	}
	return nil
}

// overtaken is a barrier given up because a generation at or beyond its
// epoch exists and reads: the other workers mixed the epoch and moved
// on, and retention may have deleted its log.
type overtaken struct{ by *snapshot.Snapshot }

func (o *overtaken) Error() string {
	return fmt.Sprintf("overtaken by generation %d", o.by.Generation)
}

// overtakenOr is the barrier's error: err, or being overtaken by by.
func overtakenOr(by *snapshot.Snapshot, err error) error {
	if err != nil {
		return err
	}
	return &overtaken{by: by}
}

// overtaking returns the newest generation at or beyond epoch e that
// reads, nil if there is none. A generation there that does not read is
// no overtaking: it is a damaged one the epochs are rebuilding (section
// 3.9 of docs/scale-out.md).
func (x *Epochs) overtaking(ctx context.Context, e uint64) (*snapshot.Snapshot, error) {
	model := x.cfg.Worker.Model
	var gens []uint64
	err := x.retry(ctx, NotReadySnapshots, "list the generations", func(ctx context.Context) (err error) {
		gens, err = x.cfg.Log.Generations(ctx, model)
		return err
	})
	if err != nil {
		return nil, fatal(err)
	}
	for _, g := range slices.Backward(gens) {
		if g < e {
			break
		}
		var snap *snapshot.Snapshot
		err := x.retry(ctx, NotReadySnapshots, fmt.Sprintf("read generation %d", g), func(ctx context.Context) (err error) {
			snap, err = x.cfg.Log.Load(ctx, model, g)
			return err
		})
		switch {
		case err == nil:
			return snap, nil
		case errors.Is(err, snapshot.ErrCorrupt), errors.Is(err, snapshot.ErrNotFound):
		default:
			return nil, fatal(err)
		}
	}
	return nil, nil
}

// jump continues from snap, a newer generation the other workers wrote
// while this one waited.
func (x *Epochs) jump(snap *snapshot.Snapshot) error {
	// A generation of this worker's still being written is waited for
	// first: when it is done it counts as the newest written, which snap
	// is once jumped to.
	if err := x.awaitGeneration(); err != nil {
		return err
	}
	m, e, prev, positions, err := Continue(snap, x.model.Config(), x.cfg.ConfigDigest)
	if err != nil {
		return err
	}
	x.log.Info("overtaken: continuing from a newer generation", zap.Uint64("generation", snap.Generation), zap.Uint64("epoch", x.epoch))
	x.epoch, x.prev, x.prevSHA, x.from, x.cur = e, prev, snap.BoundarySHA256, maps.Clone(positions), nil
	if x.cfg.Labels != nil {
		joins, err := DecodeJoins(snap.Joins)
		for s, st := range joins {
			if err == nil {
				if err = st.check(m.Config()); err != nil {
					err = fmt.Errorf("shard %s: %w", s, err)
				}
			}
		}
		if err != nil {
			return fmt.Errorf("generation %d: %w", snap.Generation, err)
		}
		x.mu.Lock()
		x.joins, x.labelsAt = joins, labelsEnds(prev)
		x.mu.Unlock()
	}
	x.forgetResults(e - 1)
	x.atLogEnd = false
	x.dropRanges()
	x.setModel(m, snap.BaseDigest)
	x.mixed.Store(e - 1)
	x.metrics.Epoch.Set(float64(e - 1))
	x.written = e - 1
	// The generation is durable, whoever wrote it: its positions are
	// the group's offsets of this worker's partitions.
	x.commit(snap.Positions)
	return nil
}
