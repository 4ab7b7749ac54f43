package consumer

import (
	"context"
	"errors"
	"fmt"
	"math"
	"reflect"
	"slices"

	"go.uber.org/zap"

	"github.com/hyperplane-ml/hyperplane/epochlog"
	"github.com/hyperplane-ml/hyperplane/learner"
	"github.com/hyperplane-ml/hyperplane/shardid"
	"github.com/hyperplane-ml/hyperplane/snapshot"
)

// overDamaged decides where the epochs continue when the generations
// after the model they hold (cfg.Damaged) are damaged
// (docs/scale-out.md, section 3.9). If the log holds the next epoch's
// boundary it rebuilds them, and each is written again when its epoch is
// mixed. If it does not, the history above the model cannot be rebuilt,
// and a new one begins from the model at its positions: at the first
// epoch above the damaged ones whose boundary another worker began that
// way, or else above every epoch in the log. Damaged generations above
// every epoch in the log are not rebuilt (dropUnlogged).
func (x *Epochs) overDamaged(ctx context.Context) error {
	if len(x.cfg.Damaged) == 0 || x.cfg.Follow {
		return nil
	}
	if x.cfg.Damaged[len(x.cfg.Damaged)-1] < x.epoch {
		return nil
	}
	if err := x.dropUnlogged(ctx); err != nil || len(x.cfg.Damaged) == 0 {
		return err
	}
	damaged := x.cfg.Damaged[len(x.cfg.Damaged)-1]
	model := x.cfg.Worker.Model
	held := zap.Uint64("generation", x.epoch-1)
	if x.epoch == 1 {
		held = zap.String("generation", "none: a new model")
	}
	err := x.retry(ctx, NotReadySnapshots, fmt.Sprintf("read epoch %d's boundary", x.epoch), func(ctx context.Context) error {
		_, _, err := x.cfg.Log.Boundary(ctx, model, x.epoch)
		return err
	})
	if err == nil {
		x.log.Warn("damaged generations: learning their epochs again from the epoch log, and writing them again",
			zap.Uint64("from_epoch", x.epoch), zap.Uint64("to_epoch", damaged), zap.Uint64s("generations", x.cfg.Damaged), held)
		return nil
	}
	if !errors.Is(err, snapshot.ErrNotFound) && !errors.Is(err, epochlog.ErrDamagedLog) {
		return fatal(err)
	}
	// Another worker may have begun the new history already and written
	// a generation of it, after which retention deleted the boundaries
	// that tie its start to the model held: continue from that
	// generation, or this worker would begin a second history above the
	// first one's epochs.
	if jumped, err := x.jumpIfOvertaken(ctx, damaged+1); err != nil || jumped {
		if err == nil {
			x.cfg.Damaged = nil
			x.log.Warn("damaged generations, and another worker began a new history above them: continuing from its newest generation",
				zap.Uint64("damaged_up_to", damaged), zap.Uint64("generation", x.epoch-1))
		}
		return err
	}
	start, err := x.beginHistory(ctx, damaged)
	if err != nil {
		return err
	}
	x.log.Warn("damaged generations, and the epoch log no longer holds what they were learned from: a new history begins from the model held, at its positions; "+newHistoryRepeats,
		zap.Uint64("damaged_up_to", damaged), held, zap.Uint64("epoch", start), zap.Any("positions", byName(x.from)))
	return nil
}

// dropUnlogged takes out of cfg.Damaged the damaged generations above
// every epoch in the log. No worker wrote them (a generation is written
// after its epoch's boundary, which retention keeps while it is the
// newest), so nothing rebuilds them; the epochs only pass them if they
// reach them, writing over the one whose epoch's generation is due. Left
// in, they would hold retention until then, and the store would keep
// every generation and the whole log for as many epochs as they lie
// ahead: for ever, for a stray key far above.
func (x *Epochs) dropUnlogged(ctx context.Context) error {
	epochs, err := x.logEpochs(ctx)
	if err != nil {
		return err
	}
	var last uint64 // an empty log: every damaged generation is above it
	if n := len(epochs); n > 0 {
		last = epochs[n-1]
	}
	if last == math.MaxUint64 {
		return nil
	}
	i, _ := slices.BinarySearch(x.cfg.Damaged, last+1)
	if i == len(x.cfg.Damaged) {
		return nil
	}
	x.log.Warn("damaged generations above every epoch of the epoch log: no worker wrote them and nothing rebuilds them; "+
		"retention counts them among snapshot.keep until they are deleted or written over: delete them from the store",
		zap.String("model", x.cfg.Worker.Model), zap.Uint64("last_epoch", last), zap.Uint64s("generations", x.cfg.Damaged[i:]))
	x.cfg.Damaged = x.cfg.Damaged[:i:i]
	return nil
}

// beginHistory begins a new history from the model held, at its
// positions, above epoch above: at the first epoch above it whose
// boundary another worker began the same way (from this model's digest
// and positions, with no boundary before it), or else above every epoch
// in the log. It returns that epoch.
func (x *Epochs) beginHistory(ctx context.Context, above uint64) (uint64, error) {
	model := x.cfg.Worker.Model
	epochs, err := x.logEpochs(ctx)
	if err != nil {
		return 0, err
	}
	// The new history has no boundary before it: only the model's digest
	// and positions tie its first one to it.
	x.prev = nil
	if above == math.MaxUint64 {
		// No epoch follows it: start would wrap to 0, which numbers no
		// epoch.
		return 0, fmt.Errorf("%w: a new history would begin above epoch %d, the last an epoch can number: "+
			"delete the generations and epochs that high from snapshot.url (no worker counts that far), or give the model a new model.name",
			ErrFatal, uint64(math.MaxUint64))
	}
	start := above + 1
	if n := len(epochs); n > 0 {
		if epochs[n-1] == math.MaxUint64 {
			// No epoch follows it: start would wrap to above + 1, whose
			// boundary is missing below it, and the next new history to
			// the epoch after, one at a time, for ever.
			return 0, fmt.Errorf("%w: the epoch log holds epoch %d (%s under snapshot.url), the last an epoch can number, so no new history can begin above it: "+
				"delete it (no worker counts that far), or give the model a new model.name",
				ErrFatal, uint64(math.MaxUint64), epochlog.BoundaryKey("", model, math.MaxUint64))
		}
		start = max(start, epochs[n-1]+1)
	}
	if e, err := x.historyAbove(ctx, epochs, above); err != nil {
		return 0, err
	} else if e > 0 {
		start = e
	}
	x.epoch, x.written = start, start-1
	x.mixed.Store(start - 1)
	x.metrics.Epoch.Set(float64(start - 1))
	x.atLogEnd = false
	// The damaged generations belong to the history abandoned: none of
	// the new one's is written again over them, nor holds retention.
	x.cfg.Damaged = nil
	return start, nil
}

// historyAbove is the first epoch of epochs above e whose boundary reads
// and begins a history from the model held (x.check, with x.prev nil:
// from its digest and positions), 0 if none does. A boundary missing or
// damaged is passed over.
func (x *Epochs) historyAbove(ctx context.Context, epochs []uint64, e uint64) (uint64, error) {
	model := x.cfg.Worker.Model
	for _, s := range epochs {
		if s <= e {
			continue
		}
		var b *epochlog.Boundary
		err := x.retry(ctx, NotReadySnapshots, fmt.Sprintf("read epoch %d's boundary", s), func(ctx context.Context) (err error) {
			b, _, err = x.cfg.Log.Boundary(ctx, model, s)
			return err
		})
		if errors.Is(err, snapshot.ErrNotFound) || errors.Is(err, epochlog.ErrDamagedLog) {
			continue
		}
		if err != nil {
			return 0, fatal(err)
		}
		if x.check(b) == nil {
			return s, nil
		}
	}
	return 0, nil
}

// followNewHistory is what epochs that follow a log (a replay) do when
// epoch x.epoch's boundary is damaged or missing (cause): at the log's
// end they end, with errLogEnd. Above a boundary damaged or deleted, the
// live workers began a new history from the model of the epoch before it
// (damagedBoundary): the epochs continue at its first boundary, which
// learns from the model they hold, with no boundary before it. When no
// boundary above does, the log cannot be followed to the live model, and
// they stop saying so, rather than end short of it.
func (x *Epochs) followNewHistory(ctx context.Context, cause error) error {
	model, e := x.cfg.Worker.Model, x.epoch
	epochs, err := x.logEpochs(ctx)
	if err != nil {
		return err
	}
	if n := len(epochs); n == 0 || epochs[n-1] < e {
		if errors.Is(cause, snapshot.ErrNotFound) {
			return errLogEnd
		}
		return fatal(cause)
	}
	// The live workers may have cut the boundary, and epochs beyond it,
	// since it was read: a boundary is created before any above it.
	if _, _, err := x.cfg.Log.Boundary(ctx, model, e); err == nil {
		return nil
	}
	return x.followAbove(ctx, epochs, cause, true)
}

// followHistoryAbove is followNewHistory for a boundary that reads but
// learns from another model than the one held (Epochs.ofAnotherMix):
// the live workers began a new history above it.
func (x *Epochs) followHistoryAbove(ctx context.Context, cause error) error {
	epochs, err := x.logEpochs(ctx)
	if err != nil {
		return err
	}
	// Not from a generation above it: a boundary that reads and learns
	// from a model the replay does not hold may be the replay's
	// divergence from the live workers, which it exists to show.
	return x.followAbove(ctx, epochs, cause, false)
}

// followAbove continues the epochs at the first boundary of epochs above
// x.epoch that begins a history from the model held, else, if resume
// (x.epoch's boundary is damaged or missing), from the generation at or
// above x.epoch that EpochConfig.Resume gives (the live workers went on
// from it, as from any generation at or beyond a damaged boundary), or
// stops saying that the log cannot be followed to the live model (cause,
// why epoch x.epoch's boundary cannot be).
func (x *Epochs) followAbove(ctx context.Context, epochs []uint64, cause error, resume bool) error {
	e := x.epoch
	prev := x.prev
	x.prev = nil
	s, err := x.historyAbove(ctx, epochs, e)
	if err != nil {
		return err
	}
	if s > 0 {
		x.log.Warn("a boundary of the epoch log is damaged or missing, and the live workers began a new history above it from the model of the epoch before it: following that history",
			zap.Uint64("damaged_epoch", e), zap.Uint64("held_epoch", e-1), zap.Uint64("epoch", s), zap.Error(cause))
		x.epoch, x.written = s, s-1
		x.mixed.Store(s - 1)
		x.metrics.Epoch.Set(float64(s - 1))
		return nil
	}
	x.prev = prev
	if resume && x.cfg.Resume != nil {
		snap, err := x.cfg.Resume(ctx, e)
		if err != nil {
			return err
		}
		if snap != nil {
			x.log.Warn("a boundary of the epoch log is damaged or missing, and no history above it begins from the model of the epoch before it: going on from the generation at or above it, as stored, without learning the epochs up to it",
				zap.Uint64("damaged_epoch", e), zap.Uint64("generation", snap.Generation), zap.Error(cause))
			return x.jump(snap)
		}
	}
	last := e
	if n := len(epochs); n > 0 {
		last = max(last, epochs[n-1])
	}
	if !resume {
		return fmt.Errorf("%w: epoch %d's boundary cannot be followed (%w), the log holds epochs up to %d, and none above it begins a new history from the model of epoch %d: "+
			"the log cannot be followed to the live model", ErrFatal, e, cause, last, e-1)
	}
	return fmt.Errorf("%w: epoch %d's boundary cannot be followed (%w), the log holds epochs up to %d, none above it begins a new history from the model of epoch %d, and no generation at or above epoch %d reads: "+
		"the log cannot be followed to the live model (a replay goes on from such a generation: replay again once the live workers have written one)", ErrFatal, e, cause, last, e-1, e)
}

// damagedBoundary begins a new history when epoch x.epoch's boundary,
// which the model held does not include, is damaged or was deleted, or
// learns from a model no worker holds (docs/scale-out.md, section 3.9):
// the history above the model held cannot be continued.
//
// A generation at or beyond the epoch that reads is no damage: the other
// workers went on, and retention deleted the log below it. The worker
// continues from that generation, as when it is overtaken at a barrier.
func (x *Epochs) damagedBoundary(ctx context.Context, cause error) error {
	e := x.epoch
	if jumped, err := x.jumpIfOvertaken(ctx, e); err != nil || jumped {
		return err
	}
	start, err := x.beginHistory(ctx, e)
	if err != nil {
		return err
	}
	x.log.Warn("a boundary of the epoch log is damaged or missing, or learns from another mix of the epoch before (a worker of another release cut it): a new history begins from the model held, at its positions; "+newHistoryRepeats,
		zap.Uint64("damaged_epoch", e), zap.Uint64("held_epoch", e-1), zap.Uint64("epoch", start), zap.Any("positions", byName(x.from)), zap.Error(cause))
	return nil
}

// jumpIfOvertaken continues from the newest generation at or beyond epoch
// e that reads, if one does, and reports whether it did: a history other
// workers went on with, which is never begun again beside it.
func (x *Epochs) jumpIfOvertaken(ctx context.Context, e uint64) (bool, error) {
	by, err := x.overtaking(ctx, e)
	if err != nil || by == nil {
		return false, err
	}
	return true, x.jump(by)
}

// newHistoryRepeats is what a new history means for the events
// (docs/events.md): the examples after the model held are learned
// again, and their events published again may differ from the first.
const newHistoryRepeats = "the events of the examples after them are published again, with the same event_id, and may differ from those published before (docs/events.md)"

// logBeyond reports whether the log holds an epoch at or above e: when
// e's boundary is absent, a boundary the log had there was deleted.
func (x *Epochs) logBeyond(ctx context.Context, e uint64) (bool, error) {
	epochs, err := x.logEpochs(ctx)
	return len(epochs) > 0 && epochs[len(epochs)-1] >= e, err
}

// logEpochs lists the epochs of the log, in order, retrying while the
// store fails.
func (x *Epochs) logEpochs(ctx context.Context) ([]uint64, error) {
	var epochs []uint64
	if err := x.retry(ctx, NotReadySnapshots, "list the epoch log", func(ctx context.Context) (err error) {
		epochs, err = x.cfg.Log.Epochs(ctx, x.cfg.Worker.Model)
		return err
	}); err != nil {
		return nil, fatal(err)
	}
	return epochs, nil
}

// Continue is what NewEpochs continues from, given snap, the newest
// generation of the model (nil when there is none): its model, the epoch
// after it, its boundary and positions, by shard. A generation from
// before epochs (no Epoch) is epoch 0 of the log: its positions, whose
// keys are the shards' names (shardid.Parse), begin the first boundary,
// and the log begins at its generation + 1. A generation of an epoch has
// a position for each shard of its boundary, and no other.
func Continue(snap *snapshot.Snapshot, cfg learner.Config, digest [32]byte) (m *learner.Model, e uint64, prev *epochlog.Boundary, positions map[shardid.ID]int64, err error) {
	if snap == nil {
		m, err = learner.New(cfg)
	} else {
		m, err = learner.Restore(snap.State)
	}
	if err != nil {
		return nil, 0, nil, nil, err
	}
	e, prev, positions, err = ContinueModel(snap, m, digest)
	return m, e, prev, positions, err
}

// BaseDigestOf is the base digest (EpochConfig.BaseDigest) of m, the
// model restored from snap: the one snap records while m holds snap's
// state; m's learner.State.Digest when m was changed since (challengers
// started or dropped), the digest computed to find that out; and zero,
// for NewEpochs to compute it, when snap is nil or records none.
func BaseDigestOf(snap *snapshot.Snapshot, m *learner.Model) [32]byte {
	if snap == nil || snap.BaseDigest == ([32]byte{}) {
		return [32]byte{}
	}
	if d := m.Shared().Digest(); d != snap.State.Digest() {
		return d
	}
	return snap.BaseDigest
}

// ContinueModel is Continue for m, the model already restored from snap
// (a new model when snap is nil).
func ContinueModel(snap *snapshot.Snapshot, m *learner.Model, digest [32]byte) (e uint64, prev *epochlog.Boundary, positions map[shardid.ID]int64, err error) {
	switch {
	case snap == nil:
		return 1, nil, nil, nil
	case snap.Epoch == 0:
		positions = make(map[shardid.ID]int64, len(snap.Positions))
		for name, p := range snap.Positions {
			id, err := shardid.Parse(name)
			if err != nil {
				return 0, nil, nil, fmt.Errorf("generation %d: positions: %w", snap.Generation, err)
			}
			positions[id] = p
		}
		return snap.Generation + 1, nil, positions, nil
	case snap.ConfigDigest != digest:
		return 0, nil, nil, fmt.Errorf("%w: generation %d, written by %s, has config digest %x, this worker's is %x: another configuration writes this model%s (%s)",
			ErrFatal, snap.Generation, snap.Writer, snap.ConfigDigest, digest, challengersDiffer(snap, m), sameSettings)
	}
	prev = &epochlog.Boundary{Model: snap.Model, Epoch: snap.Epoch, ConfigDigest: snap.ConfigDigest, Shards: snap.Boundary}
	positions = make(map[shardid.ID]int64, len(snap.Boundary))
	for _, r := range snap.Boundary {
		if p, ok := snap.Positions[r.Shard.String()]; ok {
			positions[r.Shard] = p
		}
	}
	if len(positions) != len(snap.Positions) {
		return 0, nil, nil, fmt.Errorf("generation %d: positions %v name shards its boundary does not list", snap.Generation, snap.Positions)
	}
	return snap.Epoch + 1, prev, positions, nil
}

// challengersDiffer says, for the error of a generation another
// configuration wrote, how the challengers snap holds differ from m's,
// which this worker's configuration gave it (names, order or
// configurations): "" when they do not.
func challengersDiffer(snap *snapshot.Snapshot, m *learner.Model) string {
	var had, has []string
	same := len(snap.State.Challengers) == len(m.Challengers())
	for i, c := range snap.State.Challengers {
		had = append(had, c.Name)
		if same {
			o := m.Challengers()[i]
			same = o.Name == c.Name && reflect.DeepEqual(o.Model.Config().Canonical(), c.State.Config.Canonical())
		}
	}
	if same {
		return ""
	}
	for _, c := range m.Challengers() {
		has = append(has, c.Name)
	}
	return fmt.Sprintf(": its model.challengers differ from this worker's (generation %d has %v, this worker %v, each with its configuration)", snap.Generation, had, has)
}
