package consumer

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/hyperplane-ml/hyperplane/epochlog"
	"github.com/hyperplane-ml/hyperplane/shardid"
	"github.com/hyperplane-ml/hyperplane/snapshot"
	"github.com/prometheus/client_golang/prometheus"
)

// learnOwned learns every range of b this worker owns whose result is not
// in the log yet, each on its own goroutine.
func (x *Epochs) learnOwned(ctx context.Context, b *epochlog.Boundary, sha [32]byte) error {
	owned := 0
	for _, r := range b.Shards {
		if x.owns(r.Shard) {
			owned++
		}
	}
	x.metrics.ShardsOwned.Set(float64(owned))
	x.dropLost()
	x.readers.drop(x.owns)
	x.labelReaders.drop(x.ownsLabelsOf(b))
	x.stopHeads(x.owns)
	em := x.startEarlyMix(b, sha)
	x.mu.Lock()
	x.early = em
	x.mu.Unlock()
	finished := make(chan struct{})
	if em != nil {
		go em.run(x, b, finished)
	}
	var ranges []epochlog.Range
	for _, r := range b.Shards {
		if !r.Empty() && x.owns(r.Shard) {
			ranges = append(ranges, r)
		}
	}
	err := x.learnRanges(ctx, b, sha, ranges)
	close(finished)
	if em != nil {
		<-em.done
	}
	return err
}

// learnRanges learns ranges, ranges of b, each beside the others. A range
// whose shard is revoked meanwhile is left to its new owner; the first
// failure of another stops them all and is what learnRanges returns.
func (x *Epochs) learnRanges(ctx context.Context, b *epochlog.Boundary, sha [32]byte, ranges []epochlog.Range) error {
	parent := ctx
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	errs := make([]error, len(ranges))
	// causes holds the failure that cancelled the other ranges, the
	// first: the ranges it cancels return whatever their broker client
	// makes of it ("context canceled", or worse), which says nothing of
	// why they stopped.
	var causesMu sync.Mutex
	var causes []error
	for i, r := range ranges {
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := x.learnRange(ctx, b, sha, r)
			if err != nil && !errors.Is(err, errRevoked) {
				errs[i] = err
				causesMu.Lock()
				if ctx.Err() == nil {
					causes = append(causes, err)
				}
				cancel()
				causesMu.Unlock()
			}
		}()
	}
	wg.Wait()
	if parent.Err() == nil && len(causes) > 0 {
		return errors.Join(causes...)
	}
	return errors.Join(errs...)
}

// shardExists reports whether epoch e's result of shard is in the log,
// retrying while the log fails.
func (x *Epochs) shardExists(ctx context.Context, e uint64, shard shardid.ID) (ok bool, err error) {
	err = x.retry(ctx, NotReadySnapshots, fmt.Sprintf("look for epoch %d's result of shard %s", e, shard), func(ctx context.Context) (err error) {
		ok, err = x.cfg.Log.ShardExists(ctx, x.cfg.Worker.Model, e, shard)
		return err
	})
	return ok, err
}

// owns reports whether this worker learns shard now.
func (x *Epochs) owns(shard shardid.ID) bool {
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
func (x *Epochs) whileOwned(ctx context.Context, shard shardid.ID) (context.Context, context.CancelFunc) {
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
func (x *Epochs) shardMetricsOf(shard shardid.ID) *Metrics {
	x.mu.Lock()
	defer x.mu.Unlock()
	m := x.shardMetrics[shard]
	if m == nil {
		if x.shardMetrics == nil {
			x.shardMetrics = map[shardid.ID]*Metrics{}
		}
		m = x.metrics.forShard(shard.String(), true)
		x.shardMetrics[shard] = m
	}
	return m
}

// headMetricsOf is the metrics of shard's head: its shard's counters and
// join measures, but none of what describes the shard's model. The
// positions are where the head predicts and reads labels, not how far
// the shard's range is learned (hyperplane_shard_position); and the head
// learns nothing, so its model (a copy of the mixed model it started
// from) and its challengers would hold the shard's model gauges and
// challenger series at that model's. Those go to gauges no registry
// exports.
func (x *Epochs) headMetricsOf(shard shardid.ID) *Metrics {
	m := *x.shardMetricsOf(shard)
	m.Position = prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "hyperplane_head_position"}, []string{"shard"})
	m.RollingAccuracy = prometheus.NewGauge(prometheus.GaugeOpts{Name: "hyperplane_head_rolling_accuracy"})
	m.ModelVersion = prometheus.NewGauge(prometheus.GaugeOpts{Name: "hyperplane_head_model_version"})
	m.Probability, _ = newProbabilityGauges()
	m.Challengers = newChallengerMetrics()
	return &m
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
			x.metrics.dropShard(shard.String())
		}
	}
}

// dropRanges removes the gauges of every shard's range: after a jump to
// a newer generation none of them describes a range of the epochs the
// model goes on from. A shard's next range sets them again.
func (x *Epochs) dropRanges() {
	x.mu.Lock()
	shards := slices.Collect(maps.Keys(x.shardMetrics))
	clear(x.shardMetrics)
	x.mu.Unlock()
	for _, shard := range shards {
		x.metrics.dropShard(shard.String())
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
	if err := x.ensureHead(rctx, r); err != nil {
		return fmt.Errorf("epoch %d, shard %s: %w", b.Epoch, r.Shard, err)
	}
	err := x.learn(rctx, b, sha, r)
	if err != nil && ctx.Err() == nil && errors.Is(context.Cause(rctx), errRevoked) && !errors.Is(err, ErrFatal) {
		return fmt.Errorf("epoch %d, shard %s: %w", b.Epoch, r.Shard, errRevoked)
	}
	return err
}

// learn is learnRange without following ownership.
func (x *Epochs) learn(ctx context.Context, b *epochlog.Boundary, sha [32]byte, r epochlog.Range) error {
	exists, err := x.shardExists(ctx, b.Epoch, r.Shard)
	if err != nil || exists {
		return err
	}
	return x.learnAgain(ctx, b, sha, r, x.soleOwner)
}

// learnAgain is learn whether or not the range's result exists: a result
// found damaged is replaced by the one learned again (WriteShard). The
// result is held, not written, if hold (nil: never) says so of b once the
// range is learned.
func (x *Epochs) learnAgain(ctx context.Context, b *epochlog.Boundary, sha [32]byte, r epochlog.Range, hold func(*epochlog.Boundary) bool) error {
	model := x.cfg.Worker.Model
	m, err := x.rangeModel()
	if err != nil {
		return err
	}
	if err := x.announce(ctx, b, r, m); err != nil {
		return err
	}
	var rj *rangeJoin
	if r.Labels != nil {
		if rj, err = x.rangeJoinOf(ctx, r, m.Config()); err != nil {
			return fmt.Errorf("epoch %d, shard %s: %w", b.Epoch, r.Shard, err)
		}
		if r.From == r.To {
			// Labels alone: they move the shard's join, and nothing is
			// learned.
			return x.finishRange(ctx, b, r, &epochlog.ShardResult{
				Model: model, Epoch: b.Epoch, Shard: r.Shard, From: r.From, To: r.To,
				BoundarySHA256: sha, ConfigDigest: b.ConfigDigest, BaseStateSHA256: b.BaseStateSHA256,
				Last: r.From, State: m.Release(), Writer: x.cfg.Writer, Created: time.Now().UTC(),
			}, rj, r.From, hold)
		}
	}
	var src *rangeReader
	err = x.retry(ctx, NotReadySource, fmt.Sprintf("open shard %s at %d", r.Shard, r.From), func(ctx context.Context) (err error) {
		src, err = x.readers.open(ctx, r.Shard, r.From)
		return err
	})
	if err != nil {
		return fmt.Errorf("epoch %d: open shard %s at %d: %w", b.Epoch, r.Shard, r.From, err)
	}
	src.end = ResumeTo(r.To)
	if rj != nil {
		src.end = rj.end
	}
	parked := false
	defer func() {
		if !parked {
			src.Close()
		}
	}()
	name := r.Shard.String()
	rs := &rangeSource{Range{Source: src, End: src.end, Sources: []string{name}, Last: r.From}}
	wcfg := x.cfg.Worker
	// A range promotes nothing: promotions are made after the mix.
	wcfg.AutoPromote, wcfg.Replayed = false, nil
	wcfg.Snapshots, wcfg.Views = nil, false
	wcfg.rangeJoin = rj
	wcfg.budget = x.outputs
	log := x.log.With(zap.String("shard", name), zap.Uint64("epoch", b.Epoch))
	before := m.Counts().Examples
	// The range's state is taken as soon as its last message is learned,
	// for the epoch's mix to begin while its outputs are published
	// (docs/scale-out.md, E6).
	var done *learnedRange
	if rj == nil {
		wcfg.learned = func() {
			if rs.Complete() {
				done = takeLearned(m)
				x.noteLearned(b, sha, r.Shard, done)
			}
		}
	}
	w := NewWorker(wcfg, rs, m, map[string]int64{name: r.From}, x.shardMetricsOf(r.Shard), log)
	x.mu.Lock()
	if x.running == nil {
		x.running = map[*Worker]shardid.ID{}
	}
	x.running[w] = r.Shard
	if s := x.streaks[r.Shard]; s != nil {
		w.streak = s
	} else {
		if x.streaks == nil {
			x.streaks = map[shardid.ID]*deadStreak{}
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
				zap.Int64("from", r.From), zap.Int64("to", r.To), zap.Int64("published", w.Published()[name]))
		}
		return fmt.Errorf("epoch %d, shard %s: %w", b.Epoch, r.Shard, err)
	}
	if got := w.Published()[name]; got != rs.Returned() {
		return fmt.Errorf("epoch %d, shard %s: outputs durable up to %d, the range ends at %d", b.Epoch, r.Shard, got, rs.Returned())
	}
	// The range read every message up to its end (with labels, up to
	// where it reached): the shard's next range, which begins there,
	// reads on with the same reader.
	end := r.To
	if rj != nil {
		end = rj.reached(rs.Returned(), rs.Messages())
	}
	x.readers.park(src, end)
	parked = true
	x.reach(r.Shard, end)
	if done == nil {
		done = takeLearned(m)
	}
	res := &epochlog.ShardResult{
		Model: model, Epoch: b.Epoch, Shard: r.Shard, From: r.From, To: r.To,
		BoundarySHA256: sha, ConfigDigest: b.ConfigDigest, BaseStateSHA256: b.BaseStateSHA256,
		Messages: rs.Messages(), DeadLetters: rs.Messages() - (done.examples - before), Last: rs.Returned(),
		State: done.state, Changed: &done.changed, ChallengersChanged: done.challengers, Writer: x.cfg.Writer, Created: time.Now().UTC(),
	}
	return x.finishRange(ctx, b, r, res, rj, end, hold)
}

// finishRange records res, the result of range r of b, whose outputs
// are durable; with labels rj is the range's join, which reached
// reached. It holds res rather than write it if hold (nil: never) says
// so of b (docs/scale-out.md, section 3.12).
func (x *Epochs) finishRange(ctx context.Context, b *epochlog.Boundary, r epochlog.Range, res *epochlog.ShardResult, rj *rangeJoin, reached int64, hold func(*epochlog.Boundary) bool) error {
	// The range is complete and its outputs durable: its result is
	// written even while the worker stops, within the shutdown limit,
	// so that the next start need not learn it again. With labels that
	// includes the wait for the head, which flushes its outputs as it
	// stops.
	wctx, cancel := graceAfter(ctx, x.shutdownTimeout())
	defer cancel()
	defer context.AfterFunc(x.grace, cancel)()
	var join *JoinState
	if rj != nil {
		// Step E3 with labels: the head's outputs are durable too.
		if err := x.awaitHead(wctx, r, reached); err != nil {
			return fmt.Errorf("epoch %d, shard %s: %w", b.Epoch, r.Shard, err)
		}
		lshard, err := x.cfg.Labels.CoShard(r.Shard)
		if err != nil {
			return err
		}
		res.Labels, res.Reached = r.Labels, reached
		join = rj.state(r.Shard.String(), lshard.String(), reached)
	}
	if hold != nil && hold(b) {
		x.hold(res, join)
		return nil
	}
	return x.store(wctx, b, r, res, join)
}

// writeResult writes res, the result of range r of b, whose outputs are
// durable, within the shutdown limit once ctx is done; with labels join
// is the shard's join where the range reached.
func (x *Epochs) writeResult(ctx context.Context, b *epochlog.Boundary, r epochlog.Range, res *epochlog.ShardResult, join *JoinState) error {
	wctx, cancel := graceAfter(ctx, x.shutdownTimeout())
	defer cancel()
	defer context.AfterFunc(x.grace, cancel)()
	return x.store(wctx, b, r, res, join)
}

// store is writeResult on a context that already outlives the worker's.
// A result with labels records join, encoded.
func (x *Epochs) store(ctx context.Context, b *epochlog.Boundary, r epochlog.Range, res *epochlog.ShardResult, join *JoinState) error {
	if res.Labels != nil && res.Join == nil {
		var err error
		if res.Join, err = join.encode(); err != nil {
			return fmt.Errorf("%w: epoch %d, shard %s: %w", ErrFatal, b.Epoch, r.Shard, err)
		}
	}
	err := x.retry(ctx, NotReadySnapshots, fmt.Sprintf("write epoch %d's result of shard %s", b.Epoch, r.Shard), func(ctx context.Context) error {
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
	x.keepResult(res, join)
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
