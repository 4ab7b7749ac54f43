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
	Shard(ctx context.Context, model string, e uint64, shard string, base *epochlog.Base) (*epochlog.ShardResult, error)
	ShardExists(ctx context.Context, model string, e uint64, shard string) (bool, error)
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
	Owned func() []string
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
	// examples each shard learned before it, at least minEpochExamples
	// and at most EpochExamples: small epochs while the model learns
	// fast, when mixing costs most accuracy, and few barriers later.
	// Both count a shard's messages, not its positions, where the
	// shards share their positions (JetStream).
	Growth  int
	Weights learner.MixWeights
	// Rule is how the shards' models are combined (learner.MixWithRule);
	// empty is the mean.
	Rule learner.MixRule
	// Start is where a shard that no boundary has yet begins.
	Start wire.Start
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
	// Verify, if set, is given the digest of every epoch's mixed model;
	// an error stops Run.
	Verify func(ctx context.Context, epoch uint64, digest [32]byte) error
	// Damaged is the newest generation of the model when it and every
	// one after the model the epochs continue from are damaged, 0 when
	// none is: Run rebuilds them from the log, or begins a new history
	// above them (docs/scale-out.md, section 3.9).
	Damaged uint64
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
	written  uint64
	from     map[string]int64
	mixedAt  time.Time
	lastSnap struct {
		labeled uint64
		at      time.Time
	}

	view atomic.Pointer[learner.View]
	// mixed is the newest epoch whose mixed model the worker holds.
	mixed     atomic.Uint64
	readiness readiness

	mu        sync.Mutex
	positions map[string]int64 // the mixed model's, for Positions
	running   map[*Worker]bool // the ranges being learned, for NotReady
	// streaks go on from one range of a shard to the next, so that a
	// shard whose messages keep failing to decode is warned about once,
	// not once per epoch.
	streaks map[string]*deadStreak
	// failing counts the log operations retrying now, by readiness
	// reason: the reason is cleared when the last of them succeeds.
	failing map[string]int
	// logWarns paces the warnings of operations that keep failing.
	logWarns *retry.LogLimiter
	// shardMetrics are the metrics of the owned shards' ranges, whose
	// model gauges are the shard's (Metrics.forShard).
	shardMetrics map[string]*Metrics

	// grace ends shutdown.timeout after Run's context: what must finish
	// on shutdown (the results of complete ranges, the last mix and
	// generation) shares it, so that the whole stop takes no longer.
	grace context.Context

	// mixes sums the epochs mixed since they were last logged; only the
	// learning goroutine uses it.
	mixes mixReport
}

// NewEpochs returns the epochs that continue from model, the mixed model
// of epoch e−1 (a new model and e = 1 to begin), whose boundary is prev
// (nil for a new model or one from before epochs) and which includes
// positions (the boundary's ends, or an older snapshot's positions).
// metrics may be nil.
func NewEpochs(cfg EpochConfig, model *learner.Model, e uint64, prev *epochlog.Boundary, positions map[string]int64, metrics *Metrics, log *zap.Logger) *Epochs {
	if metrics == nil {
		metrics = NewMetrics(nil)
	}
	if cfg.EpochExamples <= 0 {
		cfg.EpochExamples = 1
	}
	x := &Epochs{cfg: cfg, metrics: metrics, log: log, epoch: e, prev: prev, from: maps.Clone(positions),
		logWarns: retry.NewLogLimiter(log, retryWarnEvery)}
	if x.from == nil {
		x.from = map[string]int64{}
	}
	x.setModel(model)
	x.mixed.Store(e - 1)
	x.written = e - 1
	x.readiness.fail(NotReadySource, "not consuming yet")
	x.lastSnap.labeled, x.lastSnap.at = model.Counts().Labeled, time.Now()
	return x
}

func (x *Epochs) setModel(m *learner.Model) {
	x.mu.Lock()
	x.positions = maps.Clone(x.from)
	x.mu.Unlock()
	x.model = m
	x.base = epochlog.NewBase(m.State())
	x.digest = x.base.Digest()
	x.mixedAt = time.Now()
	x.view.Store(m.View())
	// The gauges describe the model that serves: the mixed one.
	x.metrics.restored(m.Metrics(), x.from)
	x.metrics.ServedVersion.Set(float64(m.Version()))
}

// View is a read-only copy of the newest mixed model.
func (x *Epochs) View() *learner.View { return x.view.Load() }

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
	x.mu.Lock()
	defer x.mu.Unlock()
	for w := range x.running {
		for _, r := range w.NotReady() {
			if !slices.Contains(reasons, r) && !strings.HasPrefix(r, NotReadySource+":") {
				reasons = append(reasons, r)
			}
		}
	}
	slices.Sort(reasons)
	return reasons
}

// Model is the newest mixed model. It is only safe to use once Run
// returned.
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
func (x *Epochs) Run(ctx context.Context) error {
	x.readiness.ok(NotReadySource)
	defer x.readiness.fail(NotReadySource, "stopped consuming")
	defer x.mixes.flush(x.log)
	grace, stop := graceAfter(ctx, x.shutdownTimeout())
	defer stop()
	x.grace = grace
	err := x.run(ctx)
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
// the log now.
func (x *Epochs) complete(ctx context.Context, b *epochlog.Boundary) bool {
	for _, r := range b.Shards {
		if r.From == r.To {
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
			if err := x.cfg.Verify(ctx, b.Epoch, x.digest); err != nil {
				return err
			}
		}
		if err := x.snapshot(ctx, b, sha); err != nil {
			return err
		}
	}
}

// retryWarnEvery is how often an epoch-log or shard operation that keeps
// failing is logged; the failures in between are counted in the next line.
const retryWarnEvery = 10 * time.Second

// retry runs op, the operation what, until its answer is final: nil,
// snapshot.ErrNotFound (an answer, not a failure), an error no retry mends
// (epochlog.Fatal, a damaged artefact, one of a newer format), or ctx
// done (then it returns op's last error). While
// op fails the epochs are not ready for reason (NotReadySnapshots for the
// store, NotReadySource for the broker), with the error, and the epoch
// waits: an outage is back-pressure, never an exit. Every failure of the
// store counts in SnapshotErrors.
func (x *Epochs) retry(ctx context.Context, reason, what string, op func(context.Context) error) error {
	bo := retry.Backoff{Min: retryMinDelay, Max: retryMaxDelay}
	failed := false
	defer func() {
		if failed {
			x.recovered(reason)
		}
	}()
	answered := false // op's answer is final, not cut short by ctx
	err := retry.Do(ctx, &bo, func(ctx context.Context) error {
		err := op(ctx)
		if err == nil || errors.Is(err, snapshot.ErrNotFound) || epochlog.Fatal(err) || errors.Is(err, ErrFatal) ||
			errors.Is(err, snapshot.ErrCorrupt) || errors.Is(err, snapshot.ErrNewerFormat) {
			answered = true
			return retry.Permanent(err)
		}
		return err
	}, func(err error) {
		if !failed {
			failed = true
			x.mu.Lock()
			if x.failing == nil {
				x.failing = map[string]int{}
			}
			x.failing[reason]++
			x.mu.Unlock()
		}
		if reason == NotReadySnapshots {
			x.metrics.SnapshotErrors.Inc()
		}
		x.readiness.fail(reason, what+": "+err.Error())
		x.logWarns.Warn("operation failed; retrying", zap.String("operation", what), zap.Error(err))
	})
	if answered && failed {
		x.log.Info("retried operation succeeded", zap.String("operation", what))
	}
	return err
}

// recovered ends one operation's failures for reason; the reason is
// cleared once no operation of it fails.
func (x *Epochs) recovered(reason string) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.failing[reason]--; x.failing[reason] <= 0 {
		delete(x.failing, reason)
		x.readiness.ok(reason)
	}
}

// fatal marks an error no retry mends.
func fatal(err error) error {
	if epochlog.Fatal(err) {
		return fmt.Errorf("%w: %w", ErrFatal, err)
	}
	return err
}

// boundary returns B_e: the stored one, verified, or one this worker cuts
// once an epoch is due.
func (x *Epochs) boundary(ctx context.Context) (*epochlog.Boundary, [32]byte, error) {
	model := x.cfg.Worker.Model
	bo := retry.Backoff{Min: 25 * time.Millisecond, Max: 500 * time.Millisecond}
	for {
		var b *epochlog.Boundary
		var sha [32]byte
		err := x.retry(ctx, NotReadySnapshots, fmt.Sprintf("read epoch %d's boundary", x.epoch), func(ctx context.Context) (err error) {
			b, sha, err = x.cfg.Log.Boundary(ctx, model, x.epoch)
			return err
		})
		if err == nil {
			return b, sha, x.check(b)
		}
		if !errors.Is(err, snapshot.ErrNotFound) {
			return nil, sha, fatal(err)
		}
		if x.cfg.Follow {
			return nil, sha, errLogEnd
		}
		cut, err := x.cut(ctx)
		if err != nil {
			return nil, sha, err
		}
		if cut != nil {
			err := x.retry(ctx, NotReadySnapshots, fmt.Sprintf("write epoch %d's boundary", cut.Epoch), func(ctx context.Context) (err error) {
				b, sha, err = x.cfg.Log.CreateBoundary(ctx, cut)
				return err
			})
			if err != nil {
				return nil, sha, fatal(err)
			}
			return b, sha, x.check(b)
		}
		// No epoch is due: an idle stream's newest mixed model is
		// written as soon as a snapshot is due, not when data comes, and
		// its last epochs are logged.
		x.mixes.flushDue(x.log)
		if x.prev != nil && x.written < x.prev.Epoch {
			if err := x.snapshot(ctx, x.prev, x.prevSHA); err != nil {
				return nil, sha, err
			}
		}
		if err := bo.Wait(ctx); err != nil {
			return nil, sha, err
		}
	}
}

// overDamaged decides where the epochs continue when the generations
// after the model they hold, up to cfg.Damaged, are damaged
// (docs/scale-out.md, section 3.9). If the log holds the next epoch's
// boundary it rebuilds them, and each is written again when its epoch is
// mixed. If it does not, the history above the model cannot be rebuilt,
// and a new one begins from the model at its positions: at the first
// epoch above the damaged ones whose boundary another worker began that
// way, or else above every epoch in the log.
func (x *Epochs) overDamaged(ctx context.Context) error {
	damaged := x.cfg.Damaged
	if damaged < x.epoch || x.cfg.Follow {
		return nil
	}
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
			zap.Uint64("from_epoch", x.epoch), zap.Uint64("to_epoch", damaged), held)
		return nil
	}
	if !errors.Is(err, snapshot.ErrNotFound) {
		return fatal(err)
	}
	var epochs []uint64
	if err := x.retry(ctx, NotReadySnapshots, "list the epoch log", func(ctx context.Context) (err error) {
		epochs, err = x.cfg.Log.Epochs(ctx, model)
		return err
	}); err != nil {
		return fatal(err)
	}
	// The new history has no boundary before it: only the model's digest
	// and positions tie its first one to it.
	x.prev = nil
	start := damaged + 1
	if n := len(epochs); n > 0 {
		start = max(start, epochs[n-1]+1)
	}
	for _, e := range epochs {
		if e <= damaged {
			continue
		}
		var b *epochlog.Boundary
		err := x.retry(ctx, NotReadySnapshots, fmt.Sprintf("read epoch %d's boundary", e), func(ctx context.Context) (err error) {
			b, _, err = x.cfg.Log.Boundary(ctx, model, e)
			return err
		})
		if errors.Is(err, snapshot.ErrNotFound) {
			continue
		}
		if err != nil {
			return fatal(err)
		}
		if x.check(b) == nil {
			start = e
			break
		}
	}
	x.log.Warn("damaged generations, and the epoch log no longer holds what they were learned from: a new history begins from the model held, at its positions",
		zap.Uint64("damaged_up_to", damaged), held, zap.Uint64("epoch", start), zap.Any("positions", x.from))
	x.epoch, x.written = start, start-1
	x.mixed.Store(start - 1)
	return nil
}

// sameSettings is what an error about another configuration in a model's
// epoch log tells the operator: the workers of a model agree on every
// setting of the history digest (config.HistoryDigest), and a key left out
// takes its default, which a release may change.
const sameSettings = "every worker of a model needs the same model.learner, model.drift and model.mixing settings and the same source: " +
	"set them explicitly, model.learner.algorithm first (its default was perceptron before it was arow), or give this worker its own model.name"

// check verifies a boundary against what this worker holds.
func (x *Epochs) check(b *epochlog.Boundary) error {
	if b.ConfigDigest != x.cfg.ConfigDigest {
		return fmt.Errorf("%w: epoch %d's boundary, cut by %s, has config digest %x, this worker's is %x: another configuration writes this model (%s)",
			ErrFatal, b.Epoch, b.Cut.Writer, b.ConfigDigest, x.cfg.ConfigDigest, sameSettings)
	}
	if b.BaseStateSHA256 != x.digest {
		return fmt.Errorf("%w: epoch %d's boundary, cut by %s, learns from the model with state_sha256 %x, this worker holds %x",
			ErrFatal, b.Epoch, b.Cut.Writer, b.BaseStateSHA256, x.digest)
	}
	if x.prev != nil {
		if err := b.Follows(x.prev); err != nil {
			return fmt.Errorf("%w: %w", ErrFatal, err)
		}
	}
	for _, r := range b.Shards {
		if from, ok := x.from[r.Shard]; ok && r.From != from {
			return fmt.Errorf("%w: epoch %d's boundary starts shard %s at %d, the model includes it up to %d",
				ErrFatal, b.Epoch, r.Shard, r.From, from)
		}
	}
	return nil
}

// cut returns the boundary of the next epoch if one is due now, nil if
// not (section 3.4): for each shard at most EpochExamples beyond where it
// begins and no further than the broker's end. One is due when a shard
// has EpochExamples waiting, when Interval passed since the mixed model
// and some shard has new data, when a shard joins, or for a new model's
// first epoch.
func (x *Epochs) cut(ctx context.Context) (*epochlog.Boundary, error) {
	var ends map[string]int64
	err := x.retry(ctx, NotReadySource, "read the shards' ends", func(ctx context.Context) (err error) {
		ends, err = x.cfg.Shards.Ends(ctx)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("epoch %d: the shards' ends: %w", x.epoch, err)
	}
	reason := ""
	if x.prev == nil && len(x.from) == 0 {
		reason = epochlog.CutStart
	}
	b := &epochlog.Boundary{
		Model:           x.cfg.Worker.Model,
		Epoch:           x.epoch,
		ConfigDigest:    x.cfg.ConfigDigest,
		BaseStateSHA256: x.digest,
	}
	spans := make([]waiting, 0, len(ends))
	for shard, end := range ends {
		from, ok := x.from[shard]
		if !ok {
			err := x.retry(ctx, NotReadySource, "find where shard "+shard+" begins", func(ctx context.Context) (err error) {
				from, err = x.cfg.Shards.Start(ctx, shard, x.cfg.Start)
				return err
			})
			if err != nil {
				return nil, fmt.Errorf("epoch %d: where shard %s begins: %w", x.epoch, shard, err)
			}
			// A message that arrived since the ends were read may put a
			// new shard's start beyond its end: it begins at the end.
			from = min(from, end)
			if reason == "" {
				reason = epochlog.CutShards
			}
		}
		if end < from {
			return nil, fmt.Errorf("%w: shard %s ends at %d, before %d, where the model is: was the topic recreated?", ErrFatal, shard, end, from)
		}
		spans = append(spans, waiting{shard, from, end})
	}
	shards := len(spans)
	for shard := range x.from {
		if _, ok := ends[shard]; !ok {
			shards++
		}
	}
	limit, limitReason := x.epochLimit(spans, shards)
	newData := false
	for _, sp := range spans {
		to := min(sp.from+limit, sp.to)
		if sp.to-sp.from >= limit && reason == "" {
			reason = limitReason
		}
		newData = newData || to > sp.from
		b.Shards = append(b.Shards, epochlog.Range{Shard: sp.shard, From: sp.from, To: to})
	}
	for shard, from := range x.from {
		if _, ok := ends[shard]; !ok {
			// A shard never leaves a boundary (I1).
			b.Shards = append(b.Shards, epochlog.Range{Shard: shard, From: from, To: from})
		}
	}
	if reason == "" && newData && (time.Since(x.mixedAt) >= x.cfg.Interval || x.snapshotOverdue()) {
		reason = epochlog.CutInterval
	}
	if reason == "" {
		return nil, nil
	}
	epochlog.SortRanges(b.Shards)
	b.Cut = epochlog.Cut{Writer: x.cfg.Writer, Created: time.Now().UTC(), Reason: reason, EpochExamples: int(limit), Interval: x.cfg.Interval}
	return b, nil
}

// minEpochExamples is the least examples of a shard in an epoch that
// grows (EpochConfig.Growth), unless EpochExamples is less: small, since
// mixing costs most accuracy while a model is new or has just started
// afresh at a drift, and only those first epochs are this small
// (docs/scale-out.md, section 12).
const minEpochExamples = 250

// minSnapshotShare is the least examples of a shard in an epoch that ends
// where a snapshot falls due, unless the epoch's limit is less: every
// epoch costs a barrier, and a cut at a snapshot shares what is left
// until it among the shards.
const minSnapshotShare = 1000

// waiting is a shard's data not learned yet: from where the model is to
// the shard's end.
type waiting struct {
	shard    string
	from, to int64
}

// epochLimit is the most positions of a shard in the next epoch, and the
// reason to record when a shard reaches it: EpochExamples, or less while
// the model is young (Growth: 1/Growth of W_{e-1}'s examples per shard of
// the boundary, shards of them; of its labeled examples since a drift
// last started it afresh, when one did), or where snapshot.every falls due
// sooner, since only a mixed model can be written as a generation
// (docs/scale-out.md, section 3.4). A snapshot falls due when the labeled
// examples reach a multiple of snapshot.every; those left until then are
// shared among the shards with new data (spans), each taking
// minSnapshotShare at least, since every epoch costs a barrier. Which
// shards have new data depends on when the cut is made; the cut records
// the limit it used. The limit counts a shard's messages, which are its
// positions except where shards share their positions (spread).
func (x *Epochs) epochLimit(spans []waiting, shards int) (int64, string) {
	limit, reason := x.cfg.EpochExamples, epochlog.CutExamples
	if k := int64(x.cfg.Growth); k > 0 && shards > 0 {
		grown := int64(x.model.Counts().Examples) / int64(shards) / k
		if since, ok := x.model.SinceRestart(); ok {
			// A change of concept started the model afresh: its epochs
			// grow again from there, as a new model's do.
			grown = int64(since) / int64(shards) / k
		}
		limit = min(limit, max(minEpochExamples, grown))
	}
	if every := int64(x.cfg.SnapshotEvery); every > 0 {
		n := int64(0)
		for _, sp := range spans {
			if sp.to > sp.from {
				n++
			}
		}
		// The next multiple of snapshot.every: a function of W_{e-1}, so
		// that every worker cuts alike.
		labeled := int64(x.model.Counts().Labeled)
		left := every - labeled%every
		if n == 0 {
			n = 1
		}
		if share := max((left+n-1)/n, minSnapshotShare); share < limit {
			limit, reason = share, epochlog.CutSnapshot
		}
	}
	return limit * spread(x.cfg.Shards), reason
}

// spread is the positions per message of a shard of s (Shards.Spread),
// 1 at least.
func spread(s Shards) int64 { return int64(max(s.Spread(), 1)) }

// snapshotOverdue reports whether snapshot.interval has passed since the
// newest generation.
func (x *Epochs) snapshotOverdue() bool {
	return x.cfg.SnapshotInterval > 0 && time.Since(x.lastSnap.at) >= x.cfg.SnapshotInterval
}

// learnOwned learns every range of b this worker owns whose result is not
// in the log yet, each on its own goroutine.
func (x *Epochs) learnOwned(ctx context.Context, b *epochlog.Boundary, sha [32]byte) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	errs := make([]error, len(b.Shards))
	owned := 0
	for _, r := range b.Shards {
		if x.owns(r.Shard) {
			owned++
		}
	}
	x.metrics.ShardsOwned.Set(float64(owned))
	x.dropLost()
	for i, r := range b.Shards {
		if r.From == r.To || !x.owns(r.Shard) {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := x.learnRange(ctx, b, sha, r)
			if err != nil && !errors.Is(err, errRevoked) {
				errs[i] = err
				cancel()
			}
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// shardExists reports whether epoch e's result of shard is in the log,
// retrying while the log fails.
func (x *Epochs) shardExists(ctx context.Context, e uint64, shard string) (ok bool, err error) {
	err = x.retry(ctx, NotReadySnapshots, fmt.Sprintf("look for epoch %d's result of shard %s", e, shard), func(ctx context.Context) (err error) {
		ok, err = x.cfg.Log.ShardExists(ctx, x.cfg.Worker.Model, e, shard)
		return err
	})
	return ok, err
}

// owns reports whether this worker learns shard now.
func (x *Epochs) owns(shard string) bool {
	return x.cfg.Owned == nil || slices.Contains(x.cfg.Owned(), shard)
}

// changed is the channel that Changed closes at the next change of
// ownership; nil (never) without Changed. Call it before owns.
func (x *Epochs) changed() <-chan struct{} {
	if x.cfg.Changed == nil {
		return nil
	}
	return x.cfg.Changed()
}

// whileOwned is a context for learning shard that is cancelled, with
// errRevoked as its cause, as soon as this worker no longer owns it.
func (x *Epochs) whileOwned(ctx context.Context, shard string) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancelCause(ctx)
	if x.cfg.Changed != nil {
		go func() {
			for {
				changed := x.changed()
				if !x.owns(shard) && (x.cfg.Settled == nil || x.cfg.Settled()) {
					cancel(errRevoked)
					return
				}
				select {
				case <-changed:
				case <-ctx.Done():
					return
				}
			}
		}()
	}
	return ctx, func() { cancel(nil) }
}

// shardMetricsOf is the metrics of shard's ranges, made once.
func (x *Epochs) shardMetricsOf(shard string) *Metrics {
	x.mu.Lock()
	defer x.mu.Unlock()
	m := x.shardMetrics[shard]
	if m == nil {
		if x.shardMetrics == nil {
			x.shardMetrics = map[string]*Metrics{}
		}
		m = x.metrics.forShard(shard, true)
		x.shardMetrics[shard] = m
	}
	return m
}

// dropLost removes the gauges of the shards this worker no longer owns.
func (x *Epochs) dropLost() {
	x.mu.Lock()
	shards := slices.Collect(maps.Keys(x.shardMetrics))
	x.mu.Unlock()
	for _, shard := range shards {
		if !x.owns(shard) {
			x.mu.Lock()
			delete(x.shardMetrics, shard)
			x.mu.Unlock()
			x.metrics.dropShard(shard)
		}
	}
}

// learnRange learns shard r.Shard's range of epoch b.Epoch from a copy of
// the mixed model with an ordinary Worker, which publishes every output
// of the range before it returns; then it writes the shard's result. If
// the shard is revoked before the range is complete, it stops at once
// and returns errRevoked, with the outputs of what it learned published.
func (x *Epochs) learnRange(ctx context.Context, b *epochlog.Boundary, sha [32]byte, r epochlog.Range) error {
	rctx, stop := x.whileOwned(ctx, r.Shard)
	defer stop()
	err := x.learn(rctx, b, sha, r)
	if err != nil && ctx.Err() == nil && errors.Is(context.Cause(rctx), errRevoked) && !errors.Is(err, ErrFatal) {
		return fmt.Errorf("epoch %d, shard %s: %w", b.Epoch, r.Shard, errRevoked)
	}
	return err
}

// learn is learnRange without following ownership.
func (x *Epochs) learn(ctx context.Context, b *epochlog.Boundary, sha [32]byte, r epochlog.Range) error {
	model := x.cfg.Worker.Model
	exists, err := x.shardExists(ctx, b.Epoch, r.Shard)
	if err != nil || exists {
		return err
	}
	m, err := learner.Restore(x.model.State())
	if err != nil {
		return err
	}
	var src Source
	err = x.retry(ctx, NotReadySource, fmt.Sprintf("open shard %s at %d", r.Shard, r.From), func(ctx context.Context) (err error) {
		src, err = x.cfg.Shards.Open(ctx, r.Shard, r.From)
		return err
	})
	if err != nil {
		return fmt.Errorf("epoch %d: open shard %s at %d: %w", b.Epoch, r.Shard, r.From, err)
	}
	defer src.Close()
	rs := &rangeSource{Range{Source: src, End: ResumeTo(r.To), Sources: []string{r.Shard}, Last: r.From}}
	wcfg := x.cfg.Worker
	wcfg.Snapshots, wcfg.Views = nil, false
	log := x.log.With(zap.String("shard", r.Shard), zap.Uint64("epoch", b.Epoch))
	w := NewWorker(wcfg, rs, m, map[string]int64{r.Shard: r.From}, x.shardMetricsOf(r.Shard), log)
	before := m.Counts().Examples
	x.mu.Lock()
	if x.running == nil {
		x.running = map[*Worker]bool{}
	}
	x.running[w] = true
	if s := x.streaks[r.Shard]; s != nil {
		w.streak = s
	} else {
		if x.streaks == nil {
			x.streaks = map[string]*deadStreak{}
		}
		x.streaks[r.Shard] = w.streak
	}
	x.mu.Unlock()
	err = w.Run(ctx)
	x.mu.Lock()
	delete(x.running, w)
	x.mu.Unlock()
	// The range is complete once its last message was fetched, and so
	// learned, whether the worker then stopped for the range's end or for
	// ctx: a stop flushes every output of what was learned.
	var shut *ShutdownError
	if (err != nil && !errors.Is(err, ErrRangeDone)) || errors.As(err, &shut) || !rs.Complete() {
		if err == nil {
			err = ctx.Err()
		}
		if errors.Is(context.Cause(ctx), errRevoked) {
			log.Info("shard revoked: its range stopped; the new owner learns it from its start",
				zap.Int64("from", r.From), zap.Int64("to", r.To), zap.Int64("published", w.Published()[r.Shard]))
		}
		return fmt.Errorf("epoch %d, shard %s: %w", b.Epoch, r.Shard, err)
	}
	if got := w.Published()[r.Shard]; got != rs.Returned() {
		return fmt.Errorf("epoch %d, shard %s: outputs durable up to %d, the range ends at %d", b.Epoch, r.Shard, got, rs.Returned())
	}
	m.Flush()
	res := &epochlog.ShardResult{
		Model: model, Epoch: b.Epoch, Shard: r.Shard, From: r.From, To: r.To,
		BoundarySHA256: sha, ConfigDigest: b.ConfigDigest, BaseStateSHA256: b.BaseStateSHA256,
		Messages: rs.Messages(), DeadLetters: rs.Messages() - (m.Counts().Examples - before), Last: rs.Returned(),
		State: m.State(), Writer: x.cfg.Writer, Created: time.Now().UTC(),
	}
	// The range is complete and its outputs durable: its result is
	// written even while the worker stops, within the shutdown limit,
	// so that the next start need not learn it again.
	wctx, cancel := graceAfter(ctx, x.shutdownTimeout())
	defer cancel()
	defer context.AfterFunc(x.grace, cancel)()
	err = x.retry(wctx, NotReadySnapshots, fmt.Sprintf("write epoch %d's result of shard %s", b.Epoch, r.Shard), func(ctx context.Context) error {
		return x.cfg.Log.WriteShard(ctx, res, x.base)
	})
	if errors.Is(err, snapshot.ErrNotFound) {
		// Another worker wrote the result first, and retention deleted
		// it before it could be compared: a generation holds the epoch,
		// which the barrier finds.
		return nil
	}
	if err != nil {
		return fatal(fmt.Errorf("epoch %d, shard %s: %w", b.Epoch, r.Shard, err))
	}
	return nil
}

// graceAfter is a context that outlives ctx by grace: it is done grace
// after ctx is, or when cancel is called. What must finish on shutdown
// (a result whose outputs are durable) runs on it, retrying while the
// store fails, and stops within the shutdown limit.
func graceAfter(ctx context.Context, grace time.Duration) (context.Context, context.CancelFunc) {
	g, cancel := context.WithCancel(context.WithoutCancel(ctx))
	stop := context.AfterFunc(ctx, func() {
		t := time.AfterFunc(grace, cancel)
		context.AfterFunc(g, func() { t.Stop() })
	})
	return g, func() {
		stop()
		cancel()
	}
}

// rangeSource is the Range of one shard in an epoch, whose positions are
// the log's: it commits nothing.
type rangeSource struct{ Range }

// Commit does nothing: a range's positions are the log's.
func (s *rangeSource) Commit(context.Context, map[string]int64) error { return nil }

// barrier waits until every non-empty range of b has its result in the
// log, then reads them all, verified against b, in shard order. waited is
// how long that took.
func (x *Epochs) barrier(ctx context.Context, b *epochlog.Boundary, sha [32]byte) (states []*learner.State, waited time.Duration, err error) {
	model := x.cfg.Worker.Model
	start := time.Now()
	missing := 0
	for _, r := range b.Shards {
		if r.From < r.To {
			missing++
		}
	}
	x.metrics.MissingShards.Set(float64(missing))
	for _, r := range b.Shards {
		if r.From == r.To {
			continue
		}
		bo := retry.Backoff{Min: 25 * time.Millisecond, Max: 2 * time.Second}
		for polls := 0; ; polls++ {
			changed := x.changed()
			ok, err := x.shardExists(ctx, b.Epoch, r.Shard)
			if err != nil {
				return nil, 0, err
			}
			if ok {
				break
			}
			// A shard whose owner left is handed to another worker,
			// maybe this one, while it waits.
			if x.owns(r.Shard) {
				if err := x.learnRange(ctx, b, sha, r); err != nil && !errors.Is(err, errRevoked) {
					return nil, 0, err
				}
				continue
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
			if err := pause(ctx, &bo, changed); err != nil {
				return nil, 0, err
			}
		}
		missing--
		x.metrics.MissingShards.Set(float64(missing))
		var res *epochlog.ShardResult
		err := x.retry(ctx, NotReadySnapshots, fmt.Sprintf("read epoch %d's result of shard %s", b.Epoch, r.Shard), func(ctx context.Context) (err error) {
			res, err = x.cfg.Log.Shard(ctx, model, b.Epoch, r.Shard, x.base)
			return err
		})
		if errors.Is(err, snapshot.ErrNotFound) {
			// Deleted since it was seen: the worker that wrote a
			// generation at or beyond this epoch retained the log.
			if by, gerr := x.overtaking(ctx, b.Epoch); gerr != nil || by != nil {
				return nil, 0, overtakenOr(by, gerr)
			}
		}
		if err != nil {
			return nil, 0, fatal(err)
		}
		if err := res.Verify(b, sha); err != nil {
			return nil, 0, fatal(err)
		}
		states = append(states, res.State)
	}
	waited = time.Since(start)
	x.metrics.Barrier.Observe(waited.Seconds())
	return states, waited, nil
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
	m, e, prev, positions, err := Continue(snap, x.model.Config(), x.cfg.ConfigDigest)
	if err != nil {
		return err
	}
	x.log.Info("overtaken: continuing from a newer generation", zap.Uint64("generation", snap.Generation), zap.Uint64("epoch", x.epoch))
	x.epoch, x.prev, x.from, x.cur = e, prev, maps.Clone(positions), nil
	x.setModel(m)
	x.mixed.Store(e - 1)
	x.written = e - 1
	return nil
}

// mix makes W_e of the shards' states, and the positions of b's ends;
// waited is how long the barrier took, for the log.
func (x *Epochs) mix(b *epochlog.Boundary, states []*learner.State, waited time.Duration) error {
	start := time.Now()
	base := x.model.State()
	weights := learner.MixWeightsOf(x.cfg.Weights, base, states)
	rule := x.cfg.Rule
	if rule == "" {
		rule = learner.MixMean
	}
	mixed, err := learner.MixWithRule(rule, base, states, weights)
	if err != nil {
		return fmt.Errorf("%w: epoch %d: %w", ErrFatal, b.Epoch, err)
	}
	m, err := learner.Restore(mixed)
	if err != nil {
		return fmt.Errorf("%w: epoch %d: %w", ErrFatal, b.Epoch, err)
	}
	took := time.Since(start)
	x.metrics.Mixing.Observe(took.Seconds())
	examples := m.Counts().Examples - x.model.Counts().Examples
	for _, r := range b.Shards {
		x.from[r.Shard] = r.To
	}
	x.setModel(m)
	x.mixes.add(b.Epoch, examples, len(states), waited, took, m.Metrics().RollingAccuracy)
	x.mixes.flushDue(x.log)
	return nil
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

// snapshot writes W_e as generation e if a snapshot is due.
func (x *Epochs) snapshot(ctx context.Context, b *epochlog.Boundary, sha [32]byte) error {
	labeled := x.model.Counts().Labeled
	every := uint64(x.cfg.SnapshotEvery)
	// A damaged generation the epochs rebuild is written again whether
	// or not one is due (docs/scale-out.md, section 3.9).
	due := (every > 0 && labeled/every > x.lastSnap.labeled/every) || x.snapshotOverdue() || b.Epoch <= x.cfg.Damaged
	if !due {
		return nil
	}
	return x.writeGeneration(ctx, b, sha)
}

// writeGeneration writes the mixed model of b's epoch as its generation.
func (x *Epochs) writeGeneration(ctx context.Context, b *epochlog.Boundary, sha [32]byte) error {
	snap := &snapshot.Snapshot{
		Model:          x.cfg.Worker.Model,
		Generation:     b.Epoch,
		Created:        time.Now().UTC(),
		Writer:         x.cfg.Writer,
		Positions:      maps.Clone(x.from),
		State:          x.model.State(),
		Epoch:          b.Epoch,
		ConfigDigest:   x.cfg.ConfigDigest,
		Boundary:       b.Shards,
		BoundarySHA256: sha,
		Scope:          "global",
	}
	if err := x.retry(ctx, NotReadySnapshots, fmt.Sprintf("write generation %d", b.Epoch), func(ctx context.Context) error {
		return x.cfg.Log.Write(ctx, snap)
	}); err != nil {
		return fatal(fmt.Errorf("epoch %d: write generation: %w", b.Epoch, err))
	}
	x.lastSnap.labeled, x.lastSnap.at = x.model.Counts().Labeled, time.Now()
	x.written = b.Epoch
	x.log.Info("snapshot written", zap.String("model", snap.Model), zap.Uint64("generation", snap.Generation), zap.Any("positions", snap.Positions))
	if b.Epoch <= x.cfg.Damaged {
		x.log.Warn("a damaged generation is written again", zap.Uint64("generation", b.Epoch))
	}
	if x.cfg.Commit != nil {
		if err := x.cfg.Commit(ctx, snap.Positions); err != nil {
			x.log.Debug("commit to the broker failed (lag monitoring only)", zap.Error(err))
		}
	}
	x.metrics.Snapshots.Inc()
	x.metrics.LastSnapshot.SetToCurrentTime()
	if x.cfg.Keep > 0 {
		if err := x.cfg.Log.Retain(ctx, x.cfg.Worker.Model, x.cfg.Keep); err != nil {
			x.log.Warn("retention failed", zap.Error(err))
		}
	}
	return nil
}

// Continue is what NewEpochs continues from, given snap, the newest
// generation of the model (nil when there is none): its model, the epoch
// after it, its boundary and positions. A generation from before epochs
// (no Epoch) is epoch 0 of the log: its positions begin the first
// boundary, and the log begins at its generation + 1.
func Continue(snap *snapshot.Snapshot, cfg learner.Config, digest [32]byte) (m *learner.Model, e uint64, prev *epochlog.Boundary, positions map[string]int64, err error) {
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

// ContinueModel is Continue for m, the model already restored from snap
// (a new model when snap is nil).
func ContinueModel(snap *snapshot.Snapshot, m *learner.Model, digest [32]byte) (e uint64, prev *epochlog.Boundary, positions map[string]int64, err error) {
	switch {
	case snap == nil:
		return 1, nil, nil, nil
	case snap.Epoch == 0:
		return snap.Generation + 1, nil, snap.Positions, nil
	case snap.ConfigDigest != digest:
		return 0, nil, nil, fmt.Errorf("%w: generation %d, written by %s, has config digest %x, this worker's is %x: another configuration writes this model (%s)",
			ErrFatal, snap.Generation, snap.Writer, snap.ConfigDigest, digest, sameSettings)
	}
	prev = &epochlog.Boundary{Model: snap.Model, Epoch: snap.Epoch, ConfigDigest: snap.ConfigDigest, Shards: snap.Boundary}
	return snap.Epoch + 1, prev, snap.Positions, nil
}
