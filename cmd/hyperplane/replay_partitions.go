package main

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/hyperplane-ml/hyperplane/config"
	"github.com/hyperplane-ml/hyperplane/consumer"
	"github.com/hyperplane-ml/hyperplane/snapshot"
)

// replayPartitions rebuilds a model of partition scope: each partition of
// the source on its own, from cfg.Source.Start up to end (an offset of
// each partition, exclusive; -1 for the end of what the broker holds),
// into its own chain in cfg.Snapshot.URL, as the live worker learns it
// (docs/scale-out.md, section 6). With labels, partition p is joined with
// the labels' partition p and no mark is written (docs/labels.md,
// section 9). It prints one line of JSON with each partition's model.
func replayPartitions(ctx context.Context, e *env, cfg config.Config, end int64) error {
	log := newLogger(config.Log{Level: config.LevelWarn, Format: cfg.Log.Format}, e.stderr)
	// Only the final snapshot of each chain: nothing periodic.
	cfg.Snapshot.Every, cfg.Snapshot.Interval = 0, 0
	p, err := openPipeline(ctx, cfg, log, true, false)
	if err != nil {
		return err
	}
	defer p.close()
	if p.shards == nil {
		return fmt.Errorf("replay: source.topics have no partitions to replay")
	}
	ends, err := p.shards.Ends(ctx)
	if err != nil {
		return fmt.Errorf("replay: the source's partitions: %w", err)
	}
	start := time.Now()
	var b strings.Builder
	b.WriteString(`{"partitions":{`)
	for i, shard := range slices.SortedFunc(maps.Keys(ends), snapshot.CompareShards) {
		w, err := replayPartition(ctx, p, cfg, shard, end, log)
		if err != nil {
			return fmt.Errorf("replay: partition %s: %w", shard, err)
		}
		if i > 0 {
			b.WriteByte(',')
		}
		m := w.Model().Metrics()
		fmt.Fprintf(&b, `%q:{"examples":%d,"labeled":%d,"mistakes":%d,"accuracy":%v,"updates":%d,"positions":%s,"state_sha256":"%x"}`,
			shard, m.Examples, m.Labeled, m.Mistakes, m.Accuracy, m.Updates, positionsJSON(w.Positions()), w.Model().State().Digest())
	}
	fmt.Fprintf(&b, `},"seconds":%v}`+"\n", time.Since(start).Seconds())
	_, err = fmt.Fprint(e.stdout, b.String())
	return err
}

// replayPartition learns shard's range into its chain, and returns the
// worker once it has stopped and written the chain's generation.
func replayPartition(ctx context.Context, p *pipeline, cfg config.Config, shard string, end int64, log *zap.Logger) (*consumer.Worker, error) {
	chain, err := p.store.PartitionChain(cfg.Model.Name, shard)
	if err != nil {
		return nil, err
	}
	r, err := snapshot.Resume(ctx, chain, cfg.Model.Name, cfg.Model.Learner, snapshot.ResumeOptions{
		Writer: cfg.SnapshotWriter(), Keep: cfg.Snapshot.Keep, Start: cfg.Source.Start, Log: log.With(zap.String("shard", shard)),
	})
	if err != nil {
		return nil, err
	}
	if r.Snapshot != nil {
		return nil, fmt.Errorf("-out: %s already holds the chain of this partition; replay writes a new model, so give another store or model.name", cfg.Snapshot.URL)
	}
	from, err := p.shards.Start(ctx, shard, cfg.Source.Start)
	if err != nil {
		return nil, fmt.Errorf("where the partition begins: %w", err)
	}
	src, err := p.shards.Open(ctx, shard, from)
	if err != nil {
		return nil, err
	}
	defer src.Close()
	// The worker joins labels after its examples' range is read: the
	// range idles rather than stop it.
	bounded := &consumer.Range{Source: src, Idle: true}
	if end >= 0 {
		bounded.End = consumer.OffsetBefore(end)
	}
	wcfg := p.config
	if r.Snapshotter != nil {
		wcfg.Snapshots = r.Snapshotter
	}
	var labels consumer.Source
	if cfg.Labels.Enabled() {
		if wcfg.Labels, err = p.labels(ctx, cfg, shard, nil, false); err != nil {
			return nil, err
		}
		labels = wcfg.Labels.Source
		defer labels.Close()
		wcfg.Labels.OpenTail = func(ctx context.Context, resume map[string]int64) (consumer.Source, error) {
			return p.shards.Open(ctx, shard, resume[shard])
		}
	}
	w := consumer.NewWorker(wcfg, bounded, r.Model, r.Positions, nil, log.With(zap.String("shard", shard)))
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- w.Run(runCtx) }()
	select {
	case err := <-done:
		return nil, fmt.Errorf("the worker stopped: %w", err)
	case <-ctx.Done():
		cancel()
		<-done
		return nil, ctx.Err()
	case <-bounded.Done():
	}
	if labels != nil {
		if err := w.AwaitJoined(ctx, labels, bounded.Returned, done); err != nil {
			return nil, err
		}
	}
	cancel()
	if err := <-done; err != nil {
		return nil, err
	}
	return w, nil
}
