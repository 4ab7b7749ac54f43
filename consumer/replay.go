package consumer

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.uber.org/zap"

	"github.com/hyperplane-ml/hyperplane/shardid"
	"github.com/hyperplane-ml/hyperplane/snapshot"
)

// ErrChainExists is what ReplayPartition reports when the store already
// holds a generation of the shard's chain: a replay writes a new model.
var ErrChainExists = errors.New("the store already holds the chain of this partition")

// ReplayRange runs w, which reads r, until r is complete and, when labels
// is not nil, the labels w joins have been joined through the range's
// last example (AwaitJoined); then it stops w and returns once w has
// stopped and written its final snapshot. This is a replay: a worker over
// a span of the log, which leaves when the span is learned rather than
// follow the log (r idles once complete, so that w goes on joining).
// progress, when not nil, is called every tick (which must then be
// positive) while the range is read, from ReplayRange's goroutine. A worker that stops before is an error
// that says so; a cancelled ctx stops w and returns ctx's error.
func ReplayRange(ctx context.Context, w *Worker, r *Range, labels Source, tick time.Duration, progress func()) error {
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- w.Run(runCtx) }()
	var ticks <-chan time.Time
	if progress != nil {
		t := time.NewTicker(tick)
		defer t.Stop()
		ticks = t.C
	}
loop:
	for {
		select {
		case err := <-done:
			if err == nil && ctx.Err() != nil {
				// The clean stop that cancelling ctx made.
				return ctx.Err()
			}
			return fmt.Errorf("the worker stopped: %w", err)
		case <-ctx.Done():
			cancel()
			<-done
			return ctx.Err()
		case <-r.Done():
			break loop
		case <-ticks:
			progress()
		}
	}
	if labels != nil {
		if err := w.AwaitJoined(ctx, labels, r.Returned, done); err != nil {
			return err
		}
	}
	cancel()
	return <-done
}

// ReplayPartition learns shard's range in partition scope
// (docs/scale-out.md, section 6) into the shard's own chain in
// Options.Store, as the live worker learns it (Partitions), but from
// Options.Mixing.Start up to end (a Range's End; nil for the end of what
// the broker holds, as the shard's Lag reports it), and returns the worker once it has stopped and
// written the chain's generation (ReplayRange). The chain must hold no
// generation yet (ErrChainExists). With Options.Labels, the shard is
// joined with its labels' partition, read from its start (positions
// nil), and the join's tail reads the shard. The worker's metrics are
// its own.
func (p *Pipeline) ReplayPartition(ctx context.Context, shard shardid.ID, end func(m *Message) (in, last bool)) (*Worker, error) {
	if p.conn.Shards == nil {
		return nil, errors.New("no shards to replay")
	}
	log := p.opts.Log.With(zap.Stringer("shard", shard))
	var chain *snapshot.Store
	var err error
	if p.opts.Store != nil {
		if chain, err = p.opts.Store.PartitionChain(p.opts.Model, shard); err != nil {
			return nil, err
		}
	}
	ropts := p.opts.Resume
	ropts.Log = log
	ropts.Challengers = p.opts.Challengers
	r, err := snapshot.Resume(ctx, chain, p.opts.Model, p.opts.Learner, ropts)
	if err != nil {
		return nil, err
	}
	if err := p.challenge(r, log); err != nil {
		return nil, err
	}
	if r.Snapshot != nil {
		return nil, ErrChainExists
	}
	from, err := p.conn.Shards.Start(ctx, shard, p.opts.Mixing.Start)
	if err != nil {
		return nil, fmt.Errorf("where the partition begins: %w", err)
	}
	src, err := p.conn.Shards.Open(ctx, shard, from)
	if err != nil {
		return nil, err
	}
	defer src.Close()
	// The worker joins labels after its examples' range is read: the
	// range idles rather than stop it.
	bounded := &Range{Source: src, End: end, Idle: true, Drain: true}
	cfg := p.conn.Worker
	cfg.Snapshots = nil
	if r.Snapshotter != nil {
		cfg.Snapshots = workerSnapshots{r.Snapshotter}
	}
	var labels Source
	if p.opts.Labels != nil {
		if cfg.Labels, err = p.opts.Labels(ctx, shard, nil); err != nil {
			return nil, err
		}
		if cfg.Labels == nil || cfg.Labels.Source == nil {
			return nil, errors.New("labels: no labels' source")
		}
		labels = cfg.Labels.Source
		defer labels.Close() //nolint:errcheck // it only read
		cfg.Labels.OpenTail = func(ctx context.Context, resume map[string]int64) (Source, error) {
			return p.conn.Shards.Open(ctx, shard, resume[shard.String()])
		}
	}
	if cfg.Replayed, err = p.replayed(ctx, shard); err != nil {
		return nil, err
	}
	w := NewWorker(cfg, bounded, r.Model, r.Positions, nil, log)
	if err := ReplayRange(ctx, w, bounded, labels, 0, nil); err != nil {
		return nil, err
	}
	return w, nil
}
