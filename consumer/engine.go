package consumer

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/hyperplane-ml/hyperplane/consumer/retry"
	"github.com/hyperplane-ml/hyperplane/learner"
	"github.com/hyperplane-ml/hyperplane/shardid"
	"github.com/hyperplane-ml/hyperplane/snapshot"
)

// EngineConfig configures an Engine: the source and how each way of
// learning it is built. The builders are called when the engine needs
// them, each at most once per Run.
type EngineConfig struct {
	// PartitionScope learns one model per shard (docs/scale-out.md,
	// section 6); otherwise one model is learned from every shard.
	PartitionScope bool
	// Shards are the source's partitions when it has them (Kafka, a
	// partitioned JetStream stream); nil for a stream that is one shard
	// and stays one (core NATS, an unpartitioned JetStream stream).
	Shards Shards
	// Epochs says that the model continues an epoch log: its newest
	// generation was mixed in epochs. Such a model is learned in epochs
	// whatever the number of shards, since shards never leave a log.
	Epochs bool
	// GrowthCheck is how often a model learned from one shard looks for
	// more; 0 means DefaultGrowthCheck.
	GrowthCheck time.Duration
	// Recheck, if not nil, is called with every GrowthCheck while a
	// model is learned from one shard or in epochs: an error stops the
	// worker or the epochs, as at shutdown, and the engine with it (a
	// labels' topic that gained a partition the worker would never read).
	Recheck func(ctx context.Context) error
	// SetUp, if not nil, lists why what the engine builds is not ready
	// while it is built, as NotReady says them.
	SetUp func() []string

	// Single builds the worker that learns a source of one shard as it
	// comes, from the model's newest generation and with its snapshots
	// (docs/scale-out.md, section 7). ctx ends when that worker stops:
	// what serves it alone (a lag reporter) may run on it. fenced is the
	// worker built before, which stopped because another worker wrote
	// the model's next generation first (nil for the first): the model
	// is then resumed again from the store's newest generation, and if
	// that generation goes on in an epoch log Single returns errInEpochs
	// and the engine goes on in epochs (Mixed, with no worker before).
	Single func(ctx context.Context, fenced *Worker) (*Worker, error)
	// Mixed builds the epochs that learn several shards, continuing the
	// model's newest generation, whichever way it was written. after is
	// the worker of one shard that ran before, stopped when the source
	// gained a shard (nil if none ran): the store's newest generation is
	// then the one it wrote last.
	Mixed func(ctx context.Context, after *Worker) (*Epochs, error)
	// Partitioned builds the runner of partition scope.
	Partitioned func(ctx context.Context) (*Partitions, error)
	// RestartDelay is how long the worker of one shard whose next
	// generation another worker wrote waits before it is built again;
	// 0 means DefaultRestartDelay.
	RestartDelay time.Duration
}

// DefaultGrowthCheck is how often a model learned from one shard looks
// for a second by default: the source's partitions are listed as often
// as a Kafka consumer group looks for new ones.
const DefaultGrowthCheck = 5 * time.Second

// Engine learns from a source whatever its number of shards, with one
// kind of per-shard loop, the Worker, under one orchestration
// (docs/scale-out.md): a source of one shard in global scope is learned
// as it comes, each snapshot a generation (section 7); several shards
// in recorded epochs whose results are mixed (section 3); partition
// scope as independent chains, one per shard (section 6). A source of
// one shard that gains a second goes on in epochs from the generation
// its worker writes as it stops, where the new shard begins at
// source.start.
//
// Its readiness, positions and views are those of what runs now.
type Engine struct {
	cfg EngineConfig
	log *zap.Logger

	mu  sync.Mutex
	now learning
	// started, if set, is given the worker of one shard once it is built.
	started func(*Worker)
}

// learning is what an Engine runs: a Worker, Epochs or Partitions.
type learning interface {
	Run(ctx context.Context) error
	NotReady() []string
	Positions() map[string]int64
}

// NewEngine returns the engine of cfg.
func NewEngine(cfg EngineConfig, log *zap.Logger) *Engine {
	if cfg.GrowthCheck <= 0 {
		cfg.GrowthCheck = DefaultGrowthCheck
	}
	if cfg.RestartDelay <= 0 {
		cfg.RestartDelay = DefaultRestartDelay
	}
	return &Engine{cfg: cfg, log: log}
}

// OnWorker calls f with the worker of a source of one shard once it is
// built, before it runs; f is not called in epochs or partition scope.
func (e *Engine) OnWorker(f func(*Worker)) { e.started = f }

func (e *Engine) set(l learning) {
	e.mu.Lock()
	e.now = l
	e.mu.Unlock()
}

func (e *Engine) current() learning {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.now
}

// NotReady lists why the engine is not learning: what runs says, or that
// nothing runs yet, and what fails while the next is built (SetUp).
func (e *Engine) NotReady() []string {
	var setUp []string
	if e.cfg.SetUp != nil {
		setUp = e.cfg.SetUp()
	}
	if l := e.current(); l != nil {
		return append(l.NotReady(), setUp...)
	}
	return append([]string{NotReadySource + ": not consuming yet"}, setUp...)
}

// Positions are the positions of the model that runs, by shard.
func (e *Engine) Positions() map[string]int64 {
	if l := e.current(); l != nil {
		return l.Positions()
	}
	return nil
}

// View is the newest read-only copy of the model for prediction
// requests, nil in partition scope (see ShardView) or before one exists.
func (e *Engine) View() *learner.View {
	switch l := e.current().(type) {
	case *Worker:
		return l.View()
	case *Epochs:
		return l.View()
	}
	return nil
}

// ShardView is the newest read-only copy of shard's model in partition
// scope, nil otherwise.
func (e *Engine) ShardView(shard shardid.ID) *learner.View {
	if p, ok := e.current().(*Partitions); ok {
		return p.View(shard)
	}
	return nil
}

// LearnsShard reports whether, in partition scope, this worker learns
// shard or may once its first assignment comes (Partitions.Learns);
// false otherwise.
func (e *Engine) LearnsShard(shard shardid.ID) bool {
	if p, ok := e.current().(*Partitions); ok {
		return p.Learns(shard)
	}
	return false
}

// Model is the model learned, in global scope: only safe to use once Run
// returned; nil in partition scope.
func (e *Engine) Model() *learner.Model {
	switch l := e.current().(type) {
	case *Worker:
		return l.Model()
	case *Epochs:
		return l.Model()
	}
	return nil
}

// Run learns until ctx is done or something fails, as what it runs
// does: Worker.Run, Epochs.Run or Partitions.Run.
func (e *Engine) Run(ctx context.Context) error {
	if e.cfg.PartitionScope {
		p, err := e.cfg.Partitioned(ctx)
		if err != nil {
			return stopped(ctx, err)
		}
		e.set(p)
		return p.Run(ctx)
	}
	var after *Worker
	// reload paces the attempts to build the worker again after a fence
	// that fail for a while: the broker not answering the partitions'
	// listing, the store not answering the resume.
	reload := retry.Backoff{Min: e.cfg.RestartDelay, Max: retryMaxDelay}
	for !e.cfg.Epochs {
		n, err := e.shards(ctx)
		if err != nil {
			if after == nil {
				return stopped(ctx, err)
			}
			if e.waitReload(ctx, &reload, err) != nil {
				return nil
			}
			continue
		}
		if n > 1 {
			break
		}
		w, grew, err := e.runSingle(ctx, after)
		if w == nil && after != nil && errors.Is(err, snapshot.ErrUnavailable) {
			if e.waitReload(ctx, &reload, err) != nil {
				return nil
			}
			continue
		}
		reload.Reset()
		if errors.Is(err, errInEpochs) {
			// Fenced by a generation of a model learned in epochs: the
			// model is the store's, just resumed, and goes on in epochs.
			after = nil
			break
		}
		if fenced(err) {
			// Another worker of the model (a second replica, an owner
			// that has not yet heard of a rebalance) wrote the next
			// generation: one-shard learning is prefix-deterministic, so
			// its generation is what this one would have written, and
			// the worker goes on from the store's newest, as an
			// overlapping owner in partition scope does. At shutdown it
			// stops cleanly: what lies beyond the stored generation is
			// read again by whoever goes on.
			if ctx.Err() != nil {
				return nil
			}
			e.log.Warn("another worker wrote the model's next generation: reloading the newest", zap.Error(err),
				zap.Duration("after", e.cfg.RestartDelay))
			after = w
			select {
			case <-ctx.Done():
				return nil
			case <-time.After(e.cfg.RestartDelay):
			}
			continue
		}
		if err != nil || !grew || ctx.Err() != nil {
			return err
		}
		after = w
		break
	}
	x, err := e.cfg.Mixed(ctx, after)
	if err != nil {
		return stopped(ctx, err)
	}
	e.set(x)
	return e.runChecked(ctx, x.Run)
}

// runChecked runs run, calling Recheck with every GrowthCheck: an error
// of Recheck stops run, as at shutdown, and is what runChecked returns.
func (e *Engine) runChecked(ctx context.Context, run func(context.Context) error) error {
	if e.cfg.Recheck == nil {
		return run(ctx)
	}
	rctx, stop := context.WithCancelCause(ctx)
	defer stop(nil)
	checked := make(chan struct{})
	go func() {
		defer close(checked)
		t := time.NewTicker(e.cfg.GrowthCheck)
		defer t.Stop()
		for {
			select {
			case <-rctx.Done():
				return
			case <-t.C:
				if err := e.cfg.Recheck(rctx); err != nil {
					stop(err)
					return
				}
			}
		}
	}()
	err := run(rctx)
	stop(nil)
	<-checked
	if cause := context.Cause(rctx); ctx.Err() == nil && cause != nil && !errors.Is(cause, context.Canceled) {
		if err != nil {
			return fmt.Errorf("%w (and the worker did not stop cleanly: %w)", cause, err)
		}
		return cause
	}
	return err
}

// waitReload logs err, the failure of an attempt to build the worker of
// one shard again after a fence that another attempt may mend, and waits
// for the next; the error is ctx's once it ends.
func (e *Engine) waitReload(ctx context.Context, bo *retry.Backoff, err error) error {
	e.log.Warn("the worker fenced off could not be built again: retrying", zap.Error(err))
	return bo.Wait(ctx)
}

// stopped is err, the failure to build what runs, unless ctx ended
// meanwhile: then the engine stops as it stops at any other moment,
// cleanly, having learned nothing it must write.
func stopped(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return nil
	}
	return err
}

// shards counts the source's shards now.
func (e *Engine) shards(ctx context.Context) (int, error) {
	if e.cfg.Shards == nil {
		return 1, nil
	}
	ends, err := e.cfg.Shards.Ends(ctx)
	if err != nil {
		return 0, fmt.Errorf("the source's partitions: %w", err)
	}
	return len(ends), nil
}

// errInEpochs is what EngineConfig.Single returns when the model it
// resumed after it was fenced goes on in an epoch log.
var errInEpochs = errors.New("the model goes on in epochs")

// errGrew stops the worker of one shard when the source gains another.
var errGrew = errors.New("the source gained a partition")

// runSingle runs the worker of a source of one shard until ctx is done,
// or until the source has more shards (grew): the worker then stops as
// at shutdown, publishing its outputs and writing its last generation,
// from which the epochs continue. fenced is the worker that ran before
// and lost a generation to another worker, nil for the first.
func (e *Engine) runSingle(ctx context.Context, fenced *Worker) (w *Worker, grew bool, err error) {
	wctx, stop := context.WithCancelCause(ctx)
	defer stop(nil)
	w, err = e.cfg.Single(wctx, fenced)
	if err != nil {
		return nil, false, stopped(ctx, err)
	}
	if e.started != nil {
		e.started(w)
	}
	e.set(w)
	if e.cfg.Shards == nil {
		return w, false, e.runChecked(wctx, w.Run)
	}
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		t := time.NewTicker(e.cfg.GrowthCheck)
		defer t.Stop()
		for {
			select {
			case <-wctx.Done():
				return
			case <-t.C:
			}
			ends, err := e.cfg.Shards.Ends(wctx)
			if err != nil {
				// The source's own reads report an outage; growth is
				// looked for again at the next tick.
				e.log.Debug("listing the source's partitions failed", zap.Error(err))
				continue
			}
			if len(ends) > 1 {
				e.log.Info("the source has more than one partition now: the model goes on in epochs from the generation written as the worker stops",
					zap.Int("partitions", len(ends)))
				stop(errGrew)
				return
			}
		}
	}()
	err = e.runChecked(wctx, w.Run)
	stop(nil)
	<-watched
	if ctx.Err() != nil || !errors.Is(context.Cause(wctx), errGrew) {
		return w, false, err
	}
	if err != nil {
		// Its outputs or its last snapshot were not all written: the
		// engine stops, and a restart goes on in epochs from the
		// store's newest generation, publishing again what it lacks.
		return w, false, fmt.Errorf("the source gained a partition, and the worker of one did not stop cleanly: %w", err)
	}
	return w, true, nil
}
