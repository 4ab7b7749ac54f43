package consumer

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/hyperplane-ml/hyperplane/consumer/retry"
	"github.com/hyperplane-ml/hyperplane/epochlog"
	"github.com/hyperplane-ml/hyperplane/learner"
	"github.com/hyperplane-ml/hyperplane/shardid"
	"github.com/hyperplane-ml/hyperplane/snapshot"
	"github.com/hyperplane-ml/hyperplane/wire"
)

// EpochLog is where the epoch protocol keeps its artefacts: the
// boundaries, the shards' results and the generations of the mixed model
// (docs/scale-out.md, section 2). *epochlog.Log is one.
type EpochLog interface {
	CreateBoundary(ctx context.Context, b *epochlog.Boundary) (*epochlog.Boundary, [32]byte, error)
	Boundary(ctx context.Context, model string, e uint64) (*epochlog.Boundary, [32]byte, error)
	WriteShard(ctx context.Context, r *epochlog.ShardResult, base *epochlog.Base) error
	Shard(ctx context.Context, model string, e uint64, shard shardid.ID, base *epochlog.Base) (*epochlog.ShardResult, error)
	ShardExists(ctx context.Context, model string, e uint64, shard shardid.ID) (bool, error)
	Epochs(ctx context.Context, model string) ([]uint64, error)
	Write(ctx context.Context, snap *snapshot.Snapshot) error
	Retain(ctx context.Context, model string, keep int) error
	Generations(ctx context.Context, model string) ([]uint64, error)
	Load(ctx context.Context, model string, gen uint64) (*snapshot.Snapshot, error)
}

// EpochConfig configures an Epochs.
type EpochConfig struct {
	// Worker configures the worker that learns each shard's range: its
	// outputs, decoder and batches. Its snapshot and view settings are
	// not used: the epochs snapshot the mixed models themselves.
	Worker WorkerConfig
	Shards Shards
	// Owned lists the shards this worker learns; the others' results it
	// waits for. nil means every shard.
	Owned func() []shardid.ID
	// Changed returns a channel that is closed when what Owned returns
	// may have changed (kafka.Group.Changed); it is called before Owned.
	// A range whose shard Owned no longer lists is stopped at once (see
	// Run). nil means ownership is read at each range and never pushed.
	Changed func() <-chan struct{}
	// Settled, if set, reports whether Owned is an assignment: false
	// between two (a rebalance under way, kafka.Group.Settled), when an
	// empty Owned says nothing yet. A range is not stopped then, only
	// once an assignment leaves its shard out. nil means always.
	Settled func() bool
	// Alone, if set, reports whether no other worker learns or follows
	// the log now (kafka.Group.Alone): then a worker that learns every
	// range of an epoch keeps their results and writes none
	// (docs/scale-out.md, E4). nil means others may.
	Alone func() bool
	// Failure, if set, reports why this worker takes part in no
	// assignment (kafka.Group.Failure): the worker is not ready while it
	// is not nil.
	Failure func() error
	Log     EpochLog
	// Writer names this worker in what it writes.
	Writer string
	// ConfigDigest is the digest of the history configuration
	// (docs/scale-out.md, section 2.2).
	ConfigDigest [32]byte
	// EpochExamples is the most messages of a shard in one epoch;
	// Interval cuts an epoch at least this often when there is new data.
	EpochExamples int64
	Interval      time.Duration
	// Growth, when more than 0, makes an epoch hold 1/Growth of the
	// examples each shard learned before it, at least MinEpochExamples
	// and at most EpochExamples: small epochs while the model learns
	// fast, when mixing costs most accuracy, and few barriers later.
	// Both count a shard's messages, not its positions, where the
	// shards share their positions (JetStream). MinEpochExamples 0 is
	// DefaultMinEpochExamples.
	Growth           int
	MinEpochExamples int64
	Weights          learner.MixWeights
	// Rule is how the shards' models are combined (learner.MixWithRule);
	// empty is the mean.
	Rule learner.MixRule
	// ChallengerRule is the rule the model's challengers are mixed by,
	// for each one's algorithm (model.mixing.rule as configured: auto
	// chooses per algorithm); empty is Rule.
	ChallengerRule learner.MixRule
	// Start is where a shard that no boundary has yet begins.
	Start wire.Start
	// ReadyShards, when more than 0, is how many shards the worker may
	// learn ranges of in its first epoch (the source's, at start): as
	// many models' memory, and one for the early mix, is made ready as
	// Run begins, while the group forms, rather than faulted in while
	// the first examples are learned (makeReady).
	ReadyShards int
	// SnapshotEvery and SnapshotInterval say when the mixed model of an
	// epoch is written as a generation (either may be 0); Keep is how
	// many generations are kept.
	SnapshotEvery    int
	SnapshotInterval time.Duration
	Keep             int
	// Commit, if set, is told the positions of every generation written,
	// for the broker's lag monitoring; its errors are only logged.
	Commit func(ctx context.Context, positions map[string]int64) error
	// Follow makes the epochs follow a log that others cut, as replay
	// does: they never cut a boundary, and Run returns once the next one
	// is not in the log.
	Follow bool
	// Verify, if set, is given the learner.State.Digest of every epoch's
	// mixed model, computed for it; an error stops Run.
	Verify func(ctx context.Context, epoch uint64, digest [32]byte) error
	// Resume is where epochs that follow a log go on when epoch e's
	// boundary is damaged or missing and no history above it begins from
	// the model held: a generation of the followed log at or above e
	// that reads, nil when there is none (then they stop). Follow sets
	// it.
	Resume func(ctx context.Context, e uint64) (*snapshot.Snapshot, error)
	// Damaged is the generations of the model after the one the epochs
	// continue from, in order, when every one of them is damaged; empty
	// when there is none: Run rebuilds them from the log and writes each
	// again, or begins a new history above them (docs/scale-out.md,
	// section 3.9).
	Damaged []uint64
	// BaseDigest is the base digest of the model the epochs begin from
	// (snapshot.Snapshot.BaseDigest of its generation; docs/scale-out.md,
	// section 2.2): zero for its learner.State.Digest, as for a new model.
	BaseDigest [32]byte
	// Labels, if set, joins labels that come later to the shards'
	// examples (docs/labels.md, section 11); nil means no labels.
	Labels *EpochLabels
	// Requests, if set, reads the model's promotion request, which the
	// worker that cuts a boundary records in it (docs/scale-out.md,
	// section 3.11); nil means no requests are read. Worker.AutoPromote
	// promotes after each mix.
	Requests func(ctx context.Context) (*snapshot.PromotionRequest, error)
}

// errLogEnd ends epochs that follow a log at its end.
var errLogEnd = errors.New("end of the epoch log")

// errRevoked ends a range whose shard this worker no longer owns.
var errRevoked = errors.New("shard revoked")

// Epochs learns one model over many shards by iterative parameter mixing
// in recorded epochs (docs/scale-out.md, section 3): for each epoch it
// gets or cuts the boundary, learns the ranges of the shards it owns,
// each from a copy of the mixed model W_{e-1} and with an ordinary
// Worker, writes their results once their outputs are durable, waits for
// every shard's result, mixes them into W_e, and writes W_e as a
// generation when a snapshot is due. Whatever number of workers run
// Epochs over the same log, and whenever they stop, W_e is the same to
// the bit.
type Epochs struct {
	cfg     EpochConfig
	metrics *Metrics
	log     *zap.Logger

	// The learning goroutine's state: the mixed model W_{e-1}, the
	// epoch e it learns next, the boundary before it and the positions
	// where e begins.
	model *learner.Model
	// base is the model's state, against which the epoch's results are
	// written and read, and digest its digest.
	base    *epochlog.Base
	digest  [32]byte
	epoch   uint64
	prev    *epochlog.Boundary
	prevSHA [32]byte
	// cur is the boundary of the epoch being learned.
	cur    *epochlog.Boundary
	curSHA [32]byte
	// written is the newest epoch a generation holds.
	written uint64
	// heldMixed is the newest epoch mixed from results this worker held
	// and did not write (docs/scale-out.md, section 3.12).
	heldMixed uint64
	// writing is the generation being written while the next epoch is
	// learned, nil when none is (awaitGeneration).
	writing *pendingGeneration
	// atLogEnd is set once this worker found no epoch of the log at or
	// above the one it was to cut: from there on it extends the log.
	atLogEnd bool
	// from is where the next epoch begins each shard.
	from     map[shardid.ID]int64
	mixedAt  time.Time
	lastSnap struct {
		labeled uint64
		at      time.Time
	}

	// view is the mixed model's read-only copy once View asked for it,
	// nil before; viewMu orders taking it after the model's vectors change
	// (install, and the mix, which writes W_e into W_{e-1}'s vectors).
	view   atomic.Pointer[learner.View]
	viewMu sync.Mutex
	// mixed is the newest epoch whose mixed model the worker holds.
	mixed     atomic.Uint64
	readiness readiness
	// outputs is the budget of batches the ranges' workers hold queued
	// or being published, together.
	outputs outputBudget

	mu        sync.Mutex
	positions map[string]int64       // the mixed model's, for Positions
	running   map[*Worker]shardid.ID // the ranges being learned, for NotReady and the lag
	reached   map[shardid.ID]int64   // how far each shard is learned here or mixed, for the lag
	// streaks go on from one range of a shard to the next, so that a
	// shard whose messages keep failing to decode is warned about once,
	// not once per epoch.
	streaks map[shardid.ID]*deadStreak
	// failing counts the log operations retrying now, by readiness
	// reason: the reason is cleared when the last of them succeeds.
	failing map[string]int
	// logWarns paces the warnings of operations that keep failing.
	logWarns *retry.LogLimiter
	// shardMetrics are the metrics of the owned shards' ranges, whose
	// model gauges are the shard's (Metrics.forShard).
	shardMetrics map[shardid.ID]*Metrics
	// readers are the owned shards' readers, kept from one range to
	// the next; labelReaders those of their labels' partitions.
	readers, labelReaders readers
	// results are the states of the ranges this worker learned and wrote
	// whose epoch is not mixed yet: the barrier takes them from here
	// rather than reading back what it wrote.
	results map[resultKey]*learner.State
	// held are the results among them that are not in the log: a worker
	// that learns every range of an epoch writes none (soleOwner), and
	// writes those it holds if the barrier finds it must wait for
	// another's (docs/scale-out.md, E4).
	held map[resultKey]heldResult
	// joins are the shards' joins the mixed model holds (J_{e-1,s}), and
	// joinedResults where the ranges of the epoch being learned reached,
	// with their joins, for its mix: with labels only.
	joins         map[shardid.ID]*JoinState
	joinedResults map[resultKey]joinedResult
	// labelsAt is where the mixed model's epoch ended each shard's
	// labels: where the next epoch reads them from.
	labelsAt map[shardid.ID]int64
	// runningHeads are the heads of the owned shards with labels, which
	// run on runCtx, Run's.
	runningHeads map[shardid.ID]*shardHead
	runCtx       context.Context
	// changedAt, spares and baseDiff keep an epoch's cost in proportion to
	// what it changed (epochs_changes.go).
	changedAt map[*learner.State]learner.Coords
	spares    []*learner.State
	baseDiff  learner.Coords
	// baseChallengersDiff are baseDiff for each of the model's challengers.
	baseChallengersDiff []learner.Coords
	// ready are spares of W_{e-1}'s shape made as the worker starts, for
	// the first epoch's ranges and early mix (makeReady); readyDone is set
	// once that epoch is mixed, and no more are made.
	ready     []*learner.State
	readyDone bool
	// mixSpare is the W_{e-1} that the last early mix installed left
	// whole (its vectors differ from the new one's at most at baseDiff),
	// for the next early mix to write into; nil when none is kept. The
	// loop and the early mix, which the loop waits for, use it in turn.
	mixSpare *learner.State
	// early is the early mix of the epoch being learned (epochs_early.go),
	// nil when this worker does not learn every range of it.
	early *earlyMix

	// grace ends shutdown.timeout after Run's context: what must finish
	// on shutdown (the results of complete ranges, the last mix and
	// generation) shares it, so that the whole stop takes no longer.
	grace context.Context

	// mixes sums the epochs mixed since they were last logged; only the
	// learning goroutine uses it.
	mixes mixReport
	// refused is the id of the promotion request last not recorded,
	// warned about once (epochs_promote.go). The learning goroutine's.
	refused string
	// announced is the epoch of the newest promotion this process has
	// counted (epochs_promote.go); under mu: the ranges' goroutines
	// count.
	announced uint64
}

// NewEpochs returns the epochs that continue from model, the mixed model
// of epoch e−1 (a new model and e = 1 to begin), whose boundary is prev
// (nil for a new model or one from before epochs) and which includes
// positions (the boundary's ends, or an older snapshot's positions).
// metrics may be nil.
//
// The epochs take model over: its per-weight vectors are W_{e-1}'s, into
// which the first mix writes W_e, so that the model is not held twice.
// The caller must not learn or predict with model afterwards.
func NewEpochs(cfg EpochConfig, model *learner.Model, e uint64, prev *epochlog.Boundary, positions map[shardid.ID]int64, metrics *Metrics, log *zap.Logger) *Epochs {
	if metrics == nil {
		metrics = NewMetrics(nil)
	}
	if cfg.EpochExamples <= 0 {
		cfg.EpochExamples = 1
	}
	x := &Epochs{cfg: cfg, metrics: metrics, log: log, epoch: e, prev: prev, from: maps.Clone(positions), outputs: newOutputBudget(rangesBatches),
		logWarns: retry.NewLogLimiter(log, retryWarnEvery), readers: readers{shards: cfg.Shards}}
	if cfg.Labels != nil {
		x.labelReaders.shards = cfg.Labels.Shards
	}
	if x.from == nil {
		x.from = map[shardid.ID]int64{}
	}
	if cfg.Labels != nil {
		x.joins = maps.Clone(cfg.Labels.State)
		x.labelsAt = labelsEnds(prev)
	}
	x.setModel(model, cfg.BaseDigest)
	x.mixed.Store(e - 1)
	x.metrics.Epoch.Set(float64(e - 1))
	x.written = e - 1
	x.readiness.fail(NotReadySource, "not consuming yet")
	x.lastSnap.labeled, x.lastSnap.at = model.Counts().Labeled, time.Now()
	return x
}

// setModel makes m, which the epochs take over, the mixed model: W_{e-1}
// shares its per-weight vectors. digest is its base digest, as its
// generation records it; zero for its learner.State.Digest.
func (x *Epochs) setModel(m *learner.Model, digest [32]byte) {
	x.viewMu.Lock()
	defer x.viewMu.Unlock()
	if digest == ([32]byte{}) {
		x.install(m, m.Shared(), learner.AllCoords, nil)
		return
	}
	x.installBase(m, epochlog.BaseOf(m.Shared(), digest), learner.AllCoords, nil)
}

// install makes m the mixed model, with base, its state, as W_{e-1} for
// the next epoch: base may share m's per-weight vectors, and may differ
// from the previous W_{e-1} only at diff, and its challenger i at
// cdiffs[i] (every coordinate when not given; see rangeModel). x.viewMu
// must be held.
func (x *Epochs) install(m *learner.Model, base *learner.State, diff learner.Coords, cdiffs []learner.Coords) {
	x.installBase(m, epochlog.NewBase(base), diff, cdiffs)
}

// installBase is install with base's digest already taken.
func (x *Epochs) installBase(m *learner.Model, base *epochlog.Base, diff learner.Coords, cdiffs []learner.Coords) {
	positions := byName(x.from)
	x.mu.Lock()
	x.positions = positions
	x.mu.Unlock()
	for shard, at := range x.from {
		x.reach(shard, at)
	}
	x.model = m
	x.base = base
	x.baseDiff, x.baseChallengersDiff = diff, cdiffs
	x.digest = x.base.Digest()
	x.mixedAt = time.Now()
	x.view.Store(nil)
	// The gauges describe the model that serves: the mixed one.
	x.metrics.restored(m.Metrics(), positions)
	x.metrics.Challengers.observeMixed(m)
	x.metrics.ServedVersion.Set(float64(m.Version()))
}

// View is a read-only copy of the newest mixed model.
// It is taken when first asked for after each mix, not at every mix: an
// epoch that nothing serves from costs no copy of the model.
func (x *Epochs) View() *learner.View {
	if v := x.view.Load(); v != nil {
		return v
	}
	x.viewMu.Lock()
	defer x.viewMu.Unlock()
	if v := x.view.Load(); v != nil {
		return v
	}
	v := x.model.View()
	x.view.Store(v)
	return v
}

// Mixed is the newest epoch whose mixed model the worker holds (as View
// shows it): 0 before the first.
func (x *Epochs) Mixed() uint64 { return x.mixed.Load() }

// Positions are the positions the newest mixed model includes, by shard.
func (x *Epochs) Positions() map[string]int64 {
	x.mu.Lock()
	defer x.mu.Unlock()
	return maps.Clone(x.positions)
}

// NotReady lists why the epochs are not learning, as Worker.NotReady
// does: before Run and after it returns, and while a range being learned
// cannot publish its outputs.
func (x *Epochs) NotReady() []string {
	reasons := x.readiness.reasons()
	reasons = withFailure(reasons, x.cfg.Failure)
	x.mu.Lock()
	defer x.mu.Unlock()
	add := func(w *Worker) {
		for _, r := range w.NotReady() {
			if !slices.Contains(reasons, r) && !strings.HasPrefix(r, NotReadySource+":") {
				reasons = append(reasons, r)
			}
		}
	}
	for w := range x.running {
		add(w)
	}
	// A head whose join holds labels.max_pending examples reads no more
	// of its shard (docs/labels.md, section 11.3).
	for _, h := range x.runningHeads {
		add(h.w)
	}
	slices.Sort(reasons)
	return reasons
}

// reach records that shard is learned up to at, here or in the mixed
// model, unless it was further already.
func (x *Epochs) reach(shard shardid.ID, at int64) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.reached == nil {
		x.reached = map[shardid.ID]int64{}
	}
	if have, ok := x.reached[shard]; !ok || at > have {
		x.reached[shard] = at
	}
}

// learned is how far this worker has learned each shard it owns, for
// the lag: the furthest of the mixed model's position, the end of the
// shard's last range complete here, and where its range being learned
// is. A shard with none of them yet is left out.
func (x *Epochs) learned() map[shardid.ID]int64 {
	x.mu.Lock()
	at := maps.Clone(x.reached)
	running := maps.Clone(x.running)
	x.mu.Unlock()
	if at == nil {
		at = map[shardid.ID]int64{}
	}
	for w, shard := range running {
		if p, ok := w.Positions()[shard.String()]; ok {
			if have, ok := at[shard]; !ok || p > have {
				at[shard] = p
			}
		}
	}
	maps.DeleteFunc(at, func(shard shardid.ID, _ int64) bool { return !x.owns(shard) })
	return at
}

// Model is the newest mixed model. It is only safe to use once Run
// returned, and until Run is called again.
func (x *Epochs) Model() *learner.Model { return x.model }

// Run learns epoch after epoch until ctx is done or something fails. An
// error that wraps ErrFatal (another history in the log) must stop the
// worker; on others it may be run again.
//
// When ctx is done it stops: each range being learned publishes the
// outputs of what it learned, and writes its result if it was complete;
// an incomplete one is dropped (the next start learns it again from its
// beginning, with the same outputs). If every result of the epoch is
// then in the log, the epoch is mixed; and the newest mixed model is
// written as a generation if none holds it yet. All within the worker's
// shutdown timeout. Then it returns nil.
//
// Ownership may move while it runs. When Changed fires and Owned no
// longer lists a shard whose range is being learned, that range stops at
// once, as at shutdown but alone: the outputs of the messages it learned
// are published, and its result is written only if the range was
// complete. Whatever it published, the new owner publishes again, with
// the same content (outputs are at-least-once); the new owner learns the
// whole range from its start, from the same W_{e-1}, so the model learns
// the range once. The epoch then waits for the new owner's result. A
// shard gained while the epoch waits is learned at once.
func (x *Epochs) Run(ctx context.Context) (rerr error) {
	x.readiness.ok(NotReadySource)
	defer x.readiness.fail(NotReadySource, "stopped consuming")
	if !x.cfg.Follow {
		// The lag of the shards this worker learns, as a worker of one
		// shard reports its source's; epochs that follow a log others
		// cut learn no live source.
		defer startShardLag(ctx, x.cfg.Shards, x.learned, x.metrics, x.log)()
	}
	// The readers are closed last, within the shutdown's grace: it ends
	// one shutdown.timeout after ctx, as the grace below does.
	rgrace, rstop := graceAfter(ctx, x.shutdownTimeout())
	defer rstop()
	defer x.readers.close(rgrace)
	defer x.labelReaders.close(rgrace)
	if !x.cfg.Follow && x.cfg.ReadyShards > 0 {
		defer x.makeReady(ctx, x.cfg.ReadyShards+1)()
	}
	x.mu.Lock()
	x.runCtx = ctx
	x.mu.Unlock()
	defer x.stopHeads(nil)
	defer x.mixes.flush(x.log)
	grace, stop := graceAfter(ctx, x.shutdownTimeout())
	defer stop()
	x.grace = grace
	err := x.run(ctx)
	var shut *ShutdownError
	if ctx.Err() != nil && errors.As(err, &shut) {
		// A range stopped with outputs it could not publish within the
		// shutdown's limit: say so, as a worker of one partition does,
		// whatever the rest of the stop writes (docs/operations.md,
		// "Stopping").
		unpublished := err
		defer func() {
			if rerr == nil {
				rerr = unpublished
			}
		}()
	}
	// A generation being written is waited for: its vectors are the
	// mixed model's, and what follows may mix into them or write it.
	// One that failed for the stop is written again below.
	if gerr := x.awaitGeneration(); gerr != nil && (ctx.Err() == nil || errors.Is(gerr, ErrFatal)) && !errors.Is(err, ErrFatal) {
		err = gerr
	}
	if !errors.Is(err, errLogEnd) && (ctx.Err() == nil || errors.Is(err, ErrFatal)) {
		return err
	}
	// One shutdown.timeout from ctx's end bounds all that follows, and
	// the results the ranges write meanwhile; at the end of a followed
	// log, one from now.
	fctx := grace
	if ctx.Err() == nil {
		var cancel context.CancelFunc
		fctx, cancel = context.WithTimeout(grace, x.shutdownTimeout())
		defer cancel()
	}
	// The epoch being learned may be complete: every result written (a
	// worker that owns every shard writes them all before it stops).
	if b := x.cur; b != nil && b.Epoch == x.epoch && x.complete(fctx, b) {
		states, waited, err := x.barrier(fctx, b, x.curSHA)
		if err == nil {
			err = x.mix(b, states, waited)
		}
		if err != nil {
			return fmt.Errorf("the last epoch (%d) was not mixed: %w", b.Epoch, err)
		}
		x.advance(b, x.curSHA)
	}
	if x.prev == nil || x.written >= x.prev.Epoch {
		return nil
	}
	// Other workers may have gone on while this one stopped: a generation
	// of a later epoch holds more than its last mixed model, which would
	// only stand below it until retention.
	var gens []uint64
	if err := x.retry(fctx, NotReadySnapshots, "list the generations", func(ctx context.Context) (err error) {
		gens, err = x.cfg.Log.Generations(ctx, x.cfg.Worker.Model)
		return err
	}); err == nil && len(gens) > 0 && gens[len(gens)-1] > x.prev.Epoch {
		return nil
	}
	if err := x.writeGeneration(fctx, x.prev, x.prevSHA); err != nil {
		return fmt.Errorf("the last mixed model (epoch %d) was not written: %w", x.prev.Epoch, err)
	}
	return nil
}

// advance records that the model now holds epoch b, mixed.
func (x *Epochs) advance(b *epochlog.Boundary, sha [32]byte) {
	x.prev, x.prevSHA, x.epoch, x.cur = b, sha, b.Epoch+1, nil
	if x.heldResults(b.Epoch) > 0 {
		x.heldMixed = b.Epoch
	}
	x.forgetResults(b.Epoch)
	x.mixed.Store(b.Epoch)
	x.metrics.Epoch.Set(float64(b.Epoch))
}

func (x *Epochs) shutdownTimeout() time.Duration {
	if t := x.cfg.Worker.ShutdownTimeout; t > 0 {
		return t
	}
	return DefaultShutdownTimeout
}

// complete reports whether every non-empty range of b has its result in
// the log now, or held here.
func (x *Epochs) complete(ctx context.Context, b *epochlog.Boundary) bool {
	for _, r := range b.Shards {
		if r.Empty() || x.result(b.Epoch, x.curSHA, r.Shard) != nil {
			continue
		}
		if ok, err := x.cfg.Log.ShardExists(ctx, x.cfg.Worker.Model, b.Epoch, r.Shard); err != nil || !ok {
			return false
		}
	}
	return true
}

func (x *Epochs) run(ctx context.Context) error {
	if err := x.overDamaged(ctx); err != nil {
		return err
	}
	for {
		b, sha, err := x.boundary(ctx)
		if err != nil {
			return err
		}
		x.cur, x.curSHA = b, sha
		if err := x.learnOwned(ctx, b, sha); err != nil {
			return err
		}
		states, waited, err := x.barrier(ctx, b, sha)
		// The mix and a jump change the mixed model's vectors, which a
		// generation being written holds.
		if gerr := x.awaitGeneration(); gerr != nil {
			return gerr
		}
		var ahead *overtaken
		if errors.As(err, &ahead) {
			if err := x.jump(ahead.by); err != nil {
				return err
			}
			continue
		}
		if err != nil {
			return err
		}
		if err := x.mix(b, states, waited); err != nil {
			return err
		}
		x.advance(b, sha)
		if x.cfg.Verify != nil {
			if err := x.cfg.Verify(ctx, b.Epoch, x.base.State().Digest()); err != nil {
				return err
			}
		}
		if err := x.snapshot(ctx, b, sha); err != nil {
			return err
		}
	}
}
