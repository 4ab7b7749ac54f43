package consumer

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/hyperplane-ml/hyperplane/consumer/retry"
	"github.com/hyperplane-ml/hyperplane/learner"
	"github.com/hyperplane-ml/hyperplane/shardid"
	"github.com/hyperplane-ml/hyperplane/snapshot"
	"github.com/hyperplane-ml/hyperplane/wire"
)

// PartitionsConfig configures a Partitions.
type PartitionsConfig struct {
	// Worker configures every shard's worker: its outputs, decoder,
	// batches, snapshot cadence, shutdown timeout and views. Its
	// Snapshots is replaced by the shard's own, from Open.
	Worker WorkerConfig
	Shards Shards
	// Owned lists the shards this worker learns now; nil means every
	// shard Shards has when Run starts.
	Owned func() []shardid.ID
	// Changed returns a channel that is closed when what Owned returns
	// may have changed (kafka.Group.Changed); Run calls it before Owned.
	// nil means ownership never changes.
	Changed func() <-chan struct{}
	// Settled, if set, reports whether Owned is an assignment: false
	// before the first (the consumer group not joined yet) and between
	// two (kafka.Group.Settled). nil means Owned always is one.
	Settled func() bool
	// Failure, if set, reports why this worker takes part in no
	// assignment (kafka.Group.Failure): the worker is not ready while it
	// is not nil.
	Failure func() error
	// Open opens the shard's chain (Chain). The caller builds it with
	// snapshot.Resume on store.Sub of the shard's tree
	// (docs/scale-out.md, section 6), marking the snapshotter's fatal
	// errors with ErrFatal. Open is where a chain written under another
	// configuration is refused: its error stops Run.
	Open func(ctx context.Context, shard shardid.ID) (Chain, error)
	// Labels, if set, joins labels that come later to each shard's
	// examples (docs/labels.md, section 9): it builds the join of shard,
	// with the source of the labels' partition co-partitioned with it,
	// opened at positions (the chain's), and the marks' destination, that
	// partition. Run sets its State to the chain's join and, when nil,
	// its OpenTail to Shards.Open of the shard, and closes its Source when
	// the shard's worker stops. Its error stops Run. nil means no labels.
	Labels func(ctx context.Context, shard shardid.ID, positions map[string]int64) (*LabelsConfig, error)
	// Start is where a shard whose chain has no position for it begins.
	Start wire.Start
	// RestartDelay is how long a shard whose chain another owner wrote
	// first waits before it reloads the chain; 0 means
	// DefaultRestartDelay.
	RestartDelay time.Duration
}

// Chain is a shard's chain of generations in partition scope, as
// PartitionsConfig.Open opens it.
type Chain struct {
	// Model is the model of the chain's newest generation, and Positions
	// the positions it includes: a new model and nil positions for a
	// chain with none.
	Model     *learner.Model
	Positions map[string]int64
	// Snapshots writes the chain's next generations; nil for no store.
	Snapshots Snapshotter
	// Join is the join of labels that come later the newest generation
	// recorded; nil for none.
	Join *JoinState
}

// DefaultRestartDelay is PartitionsConfig.RestartDelay's default: long
// enough for the other owner of a shard, after a rebalance, to let it go
// in the common case, short enough that the shard is not left behind.
const DefaultRestartDelay = 500 * time.Millisecond

// Partitions runs partition scope (docs/scale-out.md, section 6): one
// independent model per shard, never mixed, each learned by an ordinary
// Worker from its shard alone and snapshotted to its own chain, so that
// the model of shard s is what a single worker learns from partition s.
// The shards it owns run concurrently, on as many cores.
//
// Ownership may move while it runs. A shard it loses is stopped as a
// Worker stops: it publishes what it learned and writes its last
// snapshot. A shard it gains is opened from its chain's newest
// generation, so a shard that comes back continues from whatever its
// other owner wrote in the meantime. Two owners of one shard at once
// (after a rebalance, before the old owner lets go) learn the same
// prefix-deterministic model: the one that finds its next generation
// taken (snapshot.ErrFenced) reloads the chain after RestartDelay and
// continues from there, instead of stopping.
type Partitions struct {
	cfg     PartitionsConfig
	metrics *Metrics
	log     *zap.Logger

	readiness readiness

	mu sync.Mutex
	// workers is the newest worker of each shard, kept after it stops
	// until the shard is lost, for View, Model and Positions.
	workers map[shardid.ID]*Worker
	// active are the workers whose Run has not returned, for NotReady.
	active map[*Worker]string
	// from is where each shard's newest worker began, kept as workers
	// is, for the lag before the worker has learned a batch.
	from map[shardid.ID]int64
	// owned is the last assignment Owned returned
	// (PartitionsConfig.Settled), and assigned whether there was one:
	// until the first, every shard may be this worker's.
	owned    []shardid.ID
	assigned bool
}

// NewPartitions returns the runner of cfg's shards. metrics may be nil.
// The shards' workers share its counters; each shard's model gauges are
// labeled with the shard (hyperplane_shard_rolling_accuracy{shard}, ...),
// as are its positions, and are removed when the shard is lost. The
// unlabeled model gauges, which describe one model, are left at 0.
func NewPartitions(cfg PartitionsConfig, metrics *Metrics, log *zap.Logger) *Partitions {
	if metrics == nil {
		metrics = NewMetrics(nil)
	}
	if cfg.RestartDelay <= 0 {
		cfg.RestartDelay = DefaultRestartDelay
	}
	p := &Partitions{cfg: cfg, metrics: metrics, log: log, workers: map[shardid.ID]*Worker{}, active: map[*Worker]string{}, from: map[shardid.ID]int64{}}
	p.readiness.fail(NotReadySource, "not consuming yet")
	return p
}

// View is the newest read-only copy of shard's model for prediction
// requests (WorkerConfig.Views), nil when the shard is not owned, not
// opened yet, or views are off.
func (p *Partitions) View(shard shardid.ID) *learner.View {
	p.mu.Lock()
	w := p.workers[shard]
	p.mu.Unlock()
	if w == nil {
		return nil
	}
	return w.View()
}

// Learns reports whether this worker learns shard, or may once its
// first assignment comes: a shard it learns whose View is nil is being
// opened, one it does not is another replica's.
func (p *Partitions) Learns(shard shardid.ID) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return !p.assigned || slices.Contains(p.owned, shard)
}

// Model is the model of shard's newest worker, nil when the shard is not
// owned. It is only safe to use once Run returned. A shard that was
// waiting to reload its chain then has the model its worker stopped
// with, which the chain's newest generation may be ahead of.
func (p *Partitions) Model(shard shardid.ID) *learner.Model {
	p.mu.Lock()
	defer p.mu.Unlock()
	if w := p.workers[shard]; w != nil {
		return w.Model()
	}
	return nil
}

// Positions returns the positions of the owned shards' models, by shard.
func (p *Partitions) Positions() map[string]int64 {
	p.mu.Lock()
	workers := slices.Collect(maps.Values(p.workers))
	p.mu.Unlock()
	positions := map[string]int64{}
	for _, w := range workers {
		maps.Copy(positions, w.Positions())
	}
	return positions
}

// learned is how far each owned shard's model has learned it, for the
// lag: its worker's position, or where the worker began before it has
// learned a batch.
func (p *Partitions) learned() map[shardid.ID]int64 {
	p.mu.Lock()
	workers := maps.Clone(p.workers)
	at := maps.Clone(p.from)
	p.mu.Unlock()
	for shard, w := range workers {
		if pos, ok := w.Positions()[shard.String()]; ok && pos > at[shard] {
			at[shard] = pos
		}
	}
	return at
}

// NotReady lists why the partitions are not learning, as Worker.NotReady
// does: before Run and after it returns, and while a shard's worker
// cannot publish its outputs or write its snapshots, or a shard cannot
// be started because its chain's store does not answer or the source
// does not list it yet (the reason then names the shard). A shard between
// two workers, while ownership moves or its chain is reloaded, does not
// make it not ready.
func (p *Partitions) NotReady() []string {
	reasons := withFailure(p.readiness.reasons(), p.cfg.Failure)
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.assigned && len(reasons) == 0 {
		reasons = append(reasons, NotReadySource+": waiting for the first assignment of the source's partitions")
	}
	for w, shard := range p.active {
		for _, r := range w.NotReady() {
			reason, why, _ := strings.Cut(r, ": ")
			if reason != NotReadySource {
				reasons = append(reasons, reason+": "+shard+": "+why)
			}
		}
	}
	slices.Sort(reasons)
	return reasons
}

// shardRun is one worker's run over a shard.
type shardRun struct {
	shard  shardid.ID
	cancel context.CancelFunc
	// stopping is set when the run was asked to stop: the shard was lost
	// (lost is set too), or Run is returning.
	stopping, lost bool
}

// shardExit is how a shard's run ended.
type shardExit struct {
	run *shardRun
	err error
}

// Run learns the owned shards until ctx is done, following ownership as
// it changes. It returns nil once every shard's worker has stopped
// cleanly (each flushes and writes its last snapshot, as Worker.Run
// does); a shard whose shutdown ran out of time is in the error, as
// Worker.Run reports it, and loses nothing. A shard whose next
// generation another owner wrote (snapshot.ErrFenced) is reloaded, and a
// shard whose chain cannot be opened while the store does not answer
// (snapshot.ErrUnavailable), or that the source does not list yet
// (ErrNoShard), is started again with backoff, not ready meanwhile; any
// other error of a shard, or of Open, stops every shard and is returned.
func (p *Partitions) Run(ctx context.Context) error {
	p.readiness.ok(NotReadySource)
	defer p.readiness.fail(NotReadySource, "stopped consuming")
	// The lag of the shards this worker learns, as a worker of one
	// shard reports its source's.
	defer startShardLag(ctx, p.cfg.Shards, p.learned, p.metrics, p.log)()
	var all []shardid.ID
	if p.cfg.Owned == nil {
		var err error
		if all, err = ShardIDs(ctx, p.cfg.Shards); err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("the shards: %w", err)
		}
	}
	exits := make(chan shardExit)
	running := map[shardid.ID]*shardRun{}
	restarts := map[shardid.ID]time.Time{} // fenced shards, and when they reload
	var failure error
	for failure == nil && ctx.Err() == nil {
		var changed <-chan struct{}
		if p.cfg.Changed != nil {
			changed = p.cfg.Changed()
		}
		owned := all
		if p.cfg.Owned != nil {
			owned = p.cfg.Owned()
		}
		if p.cfg.Settled == nil || p.cfg.Settled() {
			// Between two assignments Owned is empty: the shards of the
			// last are kept, for Learns, until the next.
			p.mu.Lock()
			p.owned, p.assigned = owned, true
			p.mu.Unlock()
		}
		p.follow(ctx, owned, running, restarts, exits)

		var wake <-chan time.Time
		if len(restarts) > 0 {
			next := slices.MinFunc(slices.Collect(maps.Values(restarts)), time.Time.Compare)
			wake = time.After(time.Until(next))
		}
		select {
		case <-ctx.Done():
		case <-changed:
		case <-wake:
		case e := <-exits:
			failure = p.exited(ctx, e, running, restarts)
		}
	}

	for _, r := range running {
		r.stopping = true
		r.cancel()
	}
	errs := []error{failure}
	for len(running) > 0 {
		e := <-exits
		delete(running, e.run.shard)
		if e.run.lost {
			p.forget(e.run.shard)
		}
		errs = append(errs, stopError(e))
	}
	return errors.Join(errs...)
}

// stopError is what a shard's run that was asked to stop reports: nil
// when it stopped cleanly, or lost a generation to another owner (whose
// chain then holds what it learned), or was stopped while it opened.
func stopError(e shardExit) error {
	if err := e.err; err != nil && !fenced(err) && !errors.Is(err, context.Canceled) {
		return fmt.Errorf("shard %s: %w", e.run.shard, err)
	}
	return nil
}

// fenced reports whether err stopped a shard's worker because another
// owner wrote the chain's next generation.
func fenced(err error) bool {
	return errors.Is(err, ErrFatal) && errors.Is(err, snapshot.ErrFenced)
}

// follow stops the shards no longer owned and starts the owned ones that
// are neither running nor waiting to reload.
func (p *Partitions) follow(ctx context.Context, owned []shardid.ID, running map[shardid.ID]*shardRun, restarts map[shardid.ID]time.Time, exits chan<- shardExit) {
	for shard, r := range running {
		if !r.stopping && !slices.Contains(owned, shard) {
			p.log.Info("shard lost: stopping its worker", zap.Stringer("shard", shard))
			r.stopping, r.lost = true, true
			r.cancel()
		}
	}
	for shard := range restarts {
		if !slices.Contains(owned, shard) {
			delete(restarts, shard)
			p.forget(shard)
		}
	}
	now := time.Now()
	for _, shard := range owned {
		if running[shard] != nil {
			continue
		}
		if at, ok := restarts[shard]; ok && now.Before(at) {
			continue
		}
		if _, ok := restarts[shard]; !ok {
			p.log.Info("shard owned: opening its chain", zap.Stringer("shard", shard))
		}
		delete(restarts, shard)
		shardCtx, cancel := context.WithCancel(ctx)
		r := &shardRun{shard: shard, cancel: cancel}
		running[shard] = r
		go func() {
			err := p.runShard(shardCtx, shard)
			cancel()
			exits <- shardExit{run: r, err: err}
		}()
	}
	p.metrics.ShardsOwned.Set(float64(len(owned)))
}

// exited handles the end of a shard's run while Run goes on, and returns
// the error that must stop Run, if any.
func (p *Partitions) exited(ctx context.Context, e shardExit, running map[shardid.ID]*shardRun, restarts map[shardid.ID]time.Time) error {
	shard, err := e.run.shard, e.err
	delete(running, shard)
	log := p.log.With(zap.Stringer("shard", shard))
	switch {
	case e.run.lost:
		// Whatever it did not flush, the next owner reads again.
		if err := stopError(e); err != nil {
			log.Warn("the worker of a lost shard stopped with an error", zap.Error(err))
		}
		p.forget(shard)
		return nil
	case ctx.Err() != nil:
		return stopError(e)
	case fenced(err):
		log.Warn("another owner wrote the shard's next generation: reloading its chain", zap.Error(err),
			zap.Duration("after", p.cfg.RestartDelay))
		restarts[shard] = time.Now().Add(p.cfg.RestartDelay)
		return nil
	case err == nil:
		return fmt.Errorf("shard %s: the worker stopped", shard)
	}
	return fmt.Errorf("shard %s: %w", shard, err)
}

// forget drops a shard that is no longer owned, with its gauges.
func (p *Partitions) forget(shard shardid.ID) {
	p.mu.Lock()
	delete(p.workers, shard)
	delete(p.from, shard)
	p.mu.Unlock()
	p.metrics.dropShard(shard.String())
	p.metrics.Position.DeleteLabelValues(shard.String())
}

// runShard opens shard's chain and runs a worker over the shard from the
// chain's position until ctx is done or the worker fails. With labels,
// the worker joins the shard's labels' partition to it, its head reading
// from where the chain's join had read (docs/labels.md, section 6).
func (p *Partitions) runShard(ctx context.Context, id shardid.ID) error {
	shard := id.String()
	ch, err := p.openChain(ctx, id)
	if err != nil {
		return fmt.Errorf("open the chain: %w", err)
	}
	cfg := p.cfg.Worker
	cfg.Snapshots = ch.Snapshots
	metrics := p.metrics.forShard(shard, false)
	from, ok := ch.Positions[shard]
	if p.cfg.Labels != nil {
		lc, err := p.cfg.Labels(ctx, id, ch.Positions)
		if err != nil {
			return err
		}
		if lc == nil || lc.Source == nil {
			return errors.New("labels: no labels' source")
		}
		defer lc.Source.Close() //nolint:errcheck // it only read
		lc.State, lc.Shard = ch.Join, id
		if lc.OpenTail == nil {
			lc.OpenTail = func(ctx context.Context, resume map[string]int64) (Source, error) {
				return p.cfg.Shards.Open(ctx, id, resume[shard])
			}
		}
		if st := ch.Join; st != nil && st.Source == shard {
			from, ok = st.Head, true
		}
		cfg.Labels = lc
		// The join's gauges sum over the shards this worker joins: one it
		// no longer learns has nothing pending here.
		defer metrics.Join.stopped(shard)
	}
	if !ok {
		err := p.setUp(ctx, id, NotReadySource, "find where the shard begins", ErrNoShard, func(ctx context.Context) (err error) {
			from, err = p.cfg.Shards.Start(ctx, id, p.cfg.Start)
			return err
		})
		if err != nil {
			return fmt.Errorf("where the shard begins: %w", err)
		}
	}
	var src Source
	err = p.setUp(ctx, id, NotReadySource, "open the shard", ErrNoShard, func(ctx context.Context) (err error) {
		src, err = p.cfg.Shards.Open(ctx, id, from)
		return err
	})
	if err != nil {
		return fmt.Errorf("open the shard at %d: %w", from, err)
	}
	defer src.Close()
	w := NewWorker(cfg, src, ch.Model, ch.Positions, metrics, p.log.With(zap.String("shard", shard)))
	p.mu.Lock()
	p.workers[id] = w
	p.active[w] = shard
	p.from[id] = from
	p.mu.Unlock()
	defer func() {
		p.mu.Lock()
		delete(p.active, w)
		p.mu.Unlock()
	}()
	return w.Run(ctx)
}

// openChain opens shard's chain, again with backoff while the store does
// not answer (snapshot.ErrUnavailable): a store down when a shard is
// gained (at start, at a rebalance, at a reload) holds that shard, which
// is reported not ready meanwhile, and stops nothing (docs/operations.md,
// Outages). Any other error is returned at once: the chain refused.
func (p *Partitions) openChain(ctx context.Context, id shardid.ID) (ch Chain, err error) {
	err = p.setUp(ctx, id, NotReadySnapshots, "open the chain", snapshot.ErrUnavailable, func(ctx context.Context) (err error) {
		ch, err = p.cfg.Open(ctx, id)
		return err
	})
	return ch, err
}

// setUp runs op, a step of starting shard's worker, again with backoff
// while it fails with an error that is transient, reporting the shard not
// ready for reason meanwhile; any other error is returned at once. A
// shard the source does not list yet (ErrNoShard: a partition a
// rebalance assigned before this worker's metadata shows it) is retried
// so too, whatever the step. An error once ctx is done wraps ctx's, so
// that a shard stopped while it was set up stops cleanly.
func (p *Partitions) setUp(ctx context.Context, id shardid.ID, reason, what string, transient error, op func(ctx context.Context) error) error {
	key := reason + ": " + id.String()
	bo := retry.Backoff{Min: retryMinDelay, Max: retryMaxDelay}
	failed := false
	err := retry.Do(ctx, &bo, func(ctx context.Context) error {
		err := op(ctx)
		if err != nil && !errors.Is(err, transient) && !errors.Is(err, ErrNoShard) {
			return retry.Permanent(err)
		}
		return err
	}, func(err error) {
		if !failed {
			p.log.Warn("a shard could not be started: retrying", zap.Stringer("shard", id), zap.String("step", what), zap.Error(err))
		}
		failed = true
		p.readiness.fail(key, fmt.Sprintf("%s: %v", what, err))
	})
	if failed {
		p.readiness.ok(key)
		if err == nil {
			p.log.Info("the shard started after its retries", zap.Stringer("shard", id), zap.String("step", what))
		}
	}
	if err != nil && ctx.Err() != nil && !errors.Is(err, ctx.Err()) {
		// A broker's client whose request is given up may fail with an
		// error of its own: the shard was stopped while it was set up.
		return fmt.Errorf("%w: %w", ctx.Err(), err)
	}
	return err
}
