package consumer

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"time"

	"go.uber.org/zap"

	"github.com/hyperplane-ml/hyperplane/epochlog"
	"github.com/hyperplane-ml/hyperplane/learner"
	"github.com/hyperplane-ml/hyperplane/snapshot"
)

// mix makes W_e of the shards' states, and the positions of b's ends;
// waited is how long the barrier took, for the log. The early mix of the
// epoch, made while its results were written, is installed if it mixed
// the same states; otherwise W_e is mixed now, into W_{e-1}'s vectors.
func (x *Epochs) mix(b *epochlog.Boundary, states []*learner.State, waited time.Duration) error {
	// The shards' ends, and with labels their joins, are taken before the
	// mix writes W_e into W_{e-1}'s vectors: a result without its join
	// ends the epochs before the model held has changed.
	for _, r := range b.Shards {
		x.from[r.Shard] = r.To
	}
	if err := x.mixJoins(b, x.curSHA); err != nil {
		return err
	}
	// The mix writes W_e into the vectors of W_{e-1}, which the mixed
	// model shares: no view is taken of it meanwhile.
	x.viewMu.Lock()
	defer x.viewMu.Unlock()
	x.mu.Lock()
	em := x.early
	x.early = nil
	x.mu.Unlock()
	var out *mixOutcome
	if em.usable(b, x.curSHA, states) {
		out = em.mixed
		// W_{e-1} was left whole: its vectors are the next early mix's,
		// which brings them up to date where this mix changed them.
		x.mixSpare = x.base.State()
	} else {
		x.mixSpare = nil
		var err error
		if out, err = x.mixInto(b, x.base.State(), states); err != nil {
			return err
		}
	}
	m := out.model
	x.metrics.Mixing.Observe(out.took.Seconds())
	examples := m.Counts().Examples - x.model.Counts().Examples
	if x.promoteMixed(b, m) {
		// The promoted model shares nothing with W_{e-1}'s layout: the
		// next epoch's results are against all of it.
		x.install(m, m.Shared(), learner.AllCoords, nil)
	} else {
		x.installBase(m, out.base, out.diff, out.cdiffs)
	}
	x.spareStates(states)
	x.mixes.add(b.Epoch, examples, len(states), waited, out.took, m.Metrics().RollingAccuracy)
	x.mixes.flushDue(x.log)
	return nil
}

// mixOutcome is W_e as a mix made it: its state with its digest, the
// model that holds it, the coordinates at which it may differ from
// W_{e-1} (and each challenger's), and how long the mix took.
type mixOutcome struct {
	base   *epochlog.Base
	model  *learner.Model
	diff   learner.Coords
	cdiffs []learner.Coords
	took   time.Duration
}

// mixInto mixes W_e of states, the results of b's ranges learned from
// W_{e-1}, and writes it into the vectors of target, a state equal to
// W_{e-1}: W_{e-1}'s own, or a copy (mixTarget). target must not be used
// afterwards.
func (x *Epochs) mixInto(b *epochlog.Boundary, target *learner.State, states []*learner.State) (*mixOutcome, error) {
	start := time.Now()
	base := x.base.State()
	weights := learner.MixWeightsOf(x.cfg.Weights, base, states)
	rule := x.cfg.Rule
	if rule == "" {
		rule = learner.MixMean
	}
	if len(x.model.Promotions()) > 0 && x.cfg.ChallengerRule != "" {
		// A promoted model is mixed as it was as a challenger: by the
		// rule for its algorithm (docs/scale-out.md, section 3.11).
		rule = x.cfg.ChallengerRule
	}
	// The model is mixed without its challengers, each of which is mixed
	// by itself, over what it changed (docs/scale-out.md, section 3.10):
	// from vectors of their own, so beside the model, and what they
	// changed is found there too.
	crule := x.cfg.ChallengerRule
	if crule == "" {
		crule = rule
	}
	var (
		challengers []learner.ChallengerState
		cdiffs      []learner.Coords
		cerr        error
		cmixed      = make(chan struct{})
	)
	cdiffs = x.challengersChangedOf(base, states)
	diff := learner.MixChangesAt(base, states, x.changedOf(states))
	// W_e's base digest is a step from W_{e-1}'s over what the mix may
	// change (docs/scale-out.md, section 2.2), whose old values are taken
	// before the mix writes over them.
	since := learner.SinceOf(x.base.Digest(), base, diff, cdiffs)
	go func() {
		defer close(cmixed)
		challengers, cerr = learner.MixChallengers(crule, x.cfg.Weights, target, states, cdiffs)
	}()
	mixed, err := learner.MixChanged(rule, withoutChallengers(target)[0], withoutChallengers(states...), weights, diff)
	<-cmixed
	if err = cmp.Or(err, cerr); err != nil {
		return nil, fmt.Errorf("%w: epoch %d: %w", ErrFatal, b.Epoch, err)
	}
	// Promotions are made after a mix, never in a range: the history is
	// W_{e-1}'s.
	mixed.Promotions = slices.Clone(base.Promotions)
	mixed.Challengers = challengers
	m, err := learner.Adopt(mixed)
	if err != nil {
		return nil, fmt.Errorf("%w: epoch %d: %w", ErrFatal, b.Epoch, err)
	}
	// W_e's digest, which the next boundary records, is taken with the
	// mix: an early mix takes it while the results are written.
	return &mixOutcome{base: epochlog.BaseOf(mixed, mixed.DigestSince(since)), model: m, diff: diff, cdiffs: cdiffs, took: time.Since(start)}, nil
}

// mixLogEvery is how often the epochs mixed are logged at most: small
// epochs are summed into one line.
const mixLogEvery = 5 * time.Second

// mixReport sums the epochs mixed since the last line about them.
type mixReport struct {
	logged   time.Time // when the last line was logged; zero before the first
	epochs   int
	epoch    uint64 // the newest
	examples uint64
	shards   int // with a non-empty range in the newest
	barrier  time.Duration
	mixing   time.Duration
	accuracy float64 // the newest mixed model's rolling accuracy
}

func (r *mixReport) add(epoch, examples uint64, shards int, barrier, mixing time.Duration, accuracy float64) {
	r.epochs++
	r.epoch, r.shards, r.accuracy = epoch, shards, accuracy
	r.examples += examples
	r.barrier += barrier
	r.mixing += mixing
}

// flushDue logs the epochs summed if none was logged yet, or none for
// mixLogEvery.
func (r *mixReport) flushDue(log *zap.Logger) {
	if r.epochs > 0 && (r.logged.IsZero() || time.Since(r.logged) >= mixLogEvery) {
		r.flush(log)
	}
}

// flush logs the epochs summed, if any.
func (r *mixReport) flush(log *zap.Logger) {
	if r.epochs == 0 {
		return
	}
	log.Info("epochs mixed", zap.Uint64("epoch", r.epoch), zap.Int("epochs", r.epochs), zap.Uint64("examples", r.examples),
		zap.Int("shards", r.shards), zap.Duration("barrier_wait", r.barrier), zap.Duration("mix_time", r.mixing),
		zap.Float64("rolling_accuracy", r.accuracy))
	*r = mixReport{logged: time.Now()}
}

// snapshot writes W_e as generation e if a snapshot is due, after the
// generation being written, if any, is. A due generation is written
// while the next epoch is learned (awaitGeneration); one that rewrites a
// damaged generation, or holds a promotion, is written before snapshot
// returns.
func (x *Epochs) snapshot(ctx context.Context, b *epochlog.Boundary, sha [32]byte) error {
	if err := x.awaitGeneration(); err != nil {
		return err
	}
	labeled := x.model.Counts().Labeled
	every := uint64(x.cfg.SnapshotEvery)
	// A damaged generation the epochs rebuild is written again whether
	// or not one is due (docs/scale-out.md, section 3.9); an epoch
	// between two generations gets none.
	damaged := slices.Contains(x.cfg.Damaged, b.Epoch)
	due := (every > 0 && labeled/every > x.lastSnap.labeled/every) || x.snapshotOverdue() || damaged || x.regrouped()
	// A promotion is written at once, for compare, inspect and the next
	// cutter to see (docs/scale-out.md, section 3.11).
	promoted := false
	if ps := x.model.Promotions(); len(ps) > 0 && ps[len(ps)-1].Epoch == b.Epoch {
		due, promoted = true, true
	}
	if !due {
		return nil
	}
	if err := x.startGeneration(ctx, b, sha); err != nil {
		return err
	}
	if damaged || promoted {
		return x.awaitGeneration()
	}
	return nil
}

// regrouped reports whether this worker mixed epochs from results it
// held, above its newest generation, and is alone no longer: a worker
// that joined would learn those epochs' ranges again, or wait for the
// next boundary to tell it the results will not come (docs/scale-out.md,
// section 3.12). A generation of the newest mixed model spares it both.
func (x *Epochs) regrouped() bool {
	return x.heldMixed > x.written && x.cfg.Alone != nil && !x.cfg.Alone()
}

// writeGeneration writes the mixed model of b's epoch as its generation,
// after the generation being written, if any, is.
func (x *Epochs) writeGeneration(ctx context.Context, b *epochlog.Boundary, sha [32]byte) error {
	if err := x.awaitGeneration(); err != nil {
		return err
	}
	if err := x.startGeneration(ctx, b, sha); err != nil {
		return err
	}
	return x.awaitGeneration()
}

// pendingGeneration is a generation being written on a goroutine of its
// own (docs/scale-out.md, E7): the epoch loop goes on to learn the next
// epoch meanwhile, and waits for it (awaitGeneration) before anything
// changes what it holds.
type pendingGeneration struct {
	snap    *snapshot.Snapshot
	labeled uint64 // the model's labeled examples when it was taken
	done    chan struct{}
	err     error     // set before done is closed
	stored  time.Time // when the store held it; set before done is closed
}

// startGeneration starts writing the mixed model of b's epoch as its
// generation, with the store's retention after it: x.writing. None may
// be being written.
func (x *Epochs) startGeneration(ctx context.Context, b *epochlog.Boundary, sha [32]byte) error {
	// The state holds the mixed model's vectors, not a copy: they change
	// only at the next mix, which waits for the write.
	snap := &snapshot.Snapshot{
		Model:          x.cfg.Worker.Model,
		Generation:     b.Epoch,
		Created:        time.Now().UTC(),
		Writer:         x.cfg.Writer,
		Positions:      byName(x.from),
		State:          x.model.Shared(),
		Epoch:          b.Epoch,
		ConfigDigest:   x.cfg.ConfigDigest,
		Boundary:       b.Shards,
		BoundarySHA256: sha,
		BaseDigest:     x.digest,
		Scope:          "global",
	}
	if x.cfg.Labels != nil {
		var err error
		if snap.Joins, err = x.encodedJoins(); err != nil {
			return fatal(fmt.Errorf("epoch %d: write generation: %w", b.Epoch, err))
		}
	}
	g := &pendingGeneration{snap: snap, labeled: x.model.Counts().Labeled, done: make(chan struct{})}
	// While generations above this one are still damaged, retention
	// would count them among those it keeps, and delete the generations
	// and the log the rebuild still needs.
	retain := x.cfg.Keep > 0 && !x.damagedAbove(b.Epoch)
	go func() {
		defer close(g.done)
		if err := x.retry(ctx, NotReadySnapshots, fmt.Sprintf("write generation %d", b.Epoch), func(ctx context.Context) error {
			return x.cfg.Log.Write(ctx, snap)
		}); err != nil {
			g.err = fatal(fmt.Errorf("epoch %d: write generation: %w", b.Epoch, err))
			return
		}
		g.stored = time.Now()
		if retain {
			if err := x.cfg.Log.Retain(ctx, x.cfg.Worker.Model, x.cfg.Keep); err != nil {
				x.log.Warn("retention failed", zap.Error(err))
			}
		}
	}()
	x.writing = g
	return nil
}

// commit tells EpochConfig.Commit, if set, the positions of a durable
// generation: one this worker wrote, or one another wrote that it
// continues from (docs/scale-out.md, 3.6: the owners commit for their
// own partitions, whoever wrote the generation).
func (x *Epochs) commit(positions map[string]int64) {
	if x.cfg.Commit == nil {
		return
	}
	// For lag monitoring only: a commit the broker does not answer
	// holds the epochs no longer than they run, and one at shutdown
	// no longer than its limit.
	parent := x.grace
	if parent == nil {
		parent = context.Background()
	}
	ctx, cancel := context.WithTimeout(parent, x.shutdownTimeout())
	defer cancel()
	x.mu.Lock()
	run := x.runCtx
	x.mu.Unlock()
	if run != nil && run.Err() == nil {
		defer context.AfterFunc(run, cancel)()
	}
	if err := x.cfg.Commit(ctx, positions); err != nil {
		x.log.Debug("commit to the broker failed (lag monitoring only)", zap.Error(err))
	}
}

// damagedAbove reports whether a generation above epoch e is among the
// damaged ones the epochs write again (EpochConfig.Damaged).
func (x *Epochs) damagedAbove(e uint64) bool {
	d := x.cfg.Damaged
	return len(d) > 0 && d[len(d)-1] > e
}

// awaitGeneration waits for the generation being written, if any, and
// records it as written; an error is the write's. After it returns no
// generation is being written.
func (x *Epochs) awaitGeneration() error {
	g := x.writing
	if g == nil {
		return nil
	}
	<-g.done
	x.writing = nil
	if g.err != nil {
		return g.err
	}
	snap := g.snap
	// snapshot.interval runs from when the store held the generation,
	// not from when this loop came to look.
	x.lastSnap.labeled, x.lastSnap.at = g.labeled, g.stored
	x.written = max(x.written, snap.Generation)
	x.log.Info("snapshot written", zap.String("model", snap.Model), zap.Uint64("generation", snap.Generation), zap.Any("positions", snap.Positions))
	if slices.Contains(x.cfg.Damaged, snap.Generation) {
		x.log.Warn("a damaged generation is written again", zap.Uint64("generation", snap.Generation))
	}
	x.commit(snap.Positions)
	x.metrics.Snapshots.Inc()
	x.metrics.LastSnapshot.Set(float64(g.stored.UnixNano()) / 1e9)
	return nil
}
