package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/hyperplane-ml/hyperplane/config"
	"github.com/hyperplane-ml/hyperplane/consumer"
)

// replayPartitions rebuilds a model of partition scope: each partition of
// the source on its own, from cfg.Source.Start up to end (an offset of
// each partition, exclusive; -1 for the end of what the broker holds),
// into its own chain in cfg.Snapshot.URL, as the live worker learns it
// (docs/scale-out.md, section 6). With labels, partition p is joined with
// the labels' partition p and no mark is written (docs/labels.md,
// section 9). It prints one line of JSON with each partition's model.
func replayPartitions(ctx context.Context, e *env, cfg config.Config, end int64, live string) error {
	log := newLogger(config.Log{Level: config.LevelWarn, Format: cfg.Log.Format}, e.stderr)
	// Only the final snapshot of each chain: nothing periodic.
	cfg.Snapshot.Every, cfg.Snapshot.Interval = 0, 0
	p, err := openPipeline(ctx, cfg, log, pipelineUse{Epochs: true})
	if err != nil {
		return err
	}
	defer p.close()
	closeLive, err := followPromotions(ctx, p, cfg, live)
	if err != nil {
		return err
	}
	defer closeLive()
	if p.shards == nil {
		return fmt.Errorf("replay: source.topics have no partitions to replay")
	}
	shards, err := consumer.ShardIDs(ctx, p.shards)
	if err != nil {
		return fmt.Errorf("replay: the source's partitions: %w", err)
	}
	// Every partition's start first: -from applies to each alike, and a
	// partition it does not fit is refused before any chain is written
	// into -out, which a second replay would then be refused over.
	for _, shard := range shards {
		if _, err := p.shards.Start(ctx, shard, cfg.Source.Start); err != nil {
			return fmt.Errorf("replay: -from %s: %w", cfg.Source.Start, err)
		}
	}
	start := time.Now()
	var b strings.Builder
	b.WriteString(`{"partitions":{`)
	for i, shard := range shards {
		w, err := p.ReplayPartition(ctx, shard, rangeEnd(end))
		if errors.Is(err, consumer.ErrChainExists) {
			return fmt.Errorf("replay: partition %s: -out: %s already holds the chain of this partition; replay writes a new model, so give another store or model.name", shard, cfg.Snapshot.URL)
		}
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
