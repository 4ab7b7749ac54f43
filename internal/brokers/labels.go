package brokers

import (
	"context"
	"fmt"

	"github.com/hyperplane-ml/hyperplane/config"
	"github.com/hyperplane-ml/hyperplane/consumer"
	kafkaio "github.com/hyperplane-ml/hyperplane/consumer/kafka"
	natsio "github.com/hyperplane-ml/hyperplane/consumer/nats"
	"github.com/hyperplane-ml/hyperplane/shardid"
)

// JoinConfig is the join's configuration of cfg.Labels, without its
// inputs and outputs.
func JoinConfig(cfg config.Config) (*consumer.LabelsConfig, error) {
	l := cfg.Labels
	lc := &consumer.LabelsConfig{
		Join:   consumer.JoinConfig{Window: l.Window, MaxPending: l.MaxPending},
		Format: l.Format,
		Writer: cfg.SnapshotWriter(),
	}
	if l.Default != "" {
		label, err := cfg.DefaultLabel()
		if err != nil {
			return nil, fmt.Errorf("labels.default: %w", err)
		}
		lc.Join.Default, lc.Join.HasDefault = label, true
	}
	return lc, nil
}

// coPartitions are the labels' partitions, each joined to the source's
// partition of its number (docs/labels.md, sections 9 and 11): a Kafka
// topic's or a partitioned stream's.
type coPartitions struct {
	// key names the labels' input in errors: labels.topics or
	// labels.stream.
	key    string
	shards consumer.Shards
	// open opens the labels' partition co-partitioned with shard, a
	// source's partition, where positions say (from its start without).
	open func(ctx context.Context, shard shardid.ID, positions map[string]int64) (consumer.Source, int, error)
	// coShard names the labels' partition co-partitioned with shard.
	coShard func(shard shardid.ID) (shardid.ID, int, error)
	// marks is where the marks of partition k go; nil writes none.
	marks func(k int) (consumer.Destination, error)
}

// coPartitions opens the labels' partitions of cfg once it has checked
// them co-partitioned with the source's as far as counts tell; with marks
// false (a replay) they write no mark.
func (b *Clients) coPartitions(ctx context.Context, cfg config.Config, marks bool) (*coPartitions, error) {
	switch {
	case cfg.Source.Kind == config.KindKafka:
		topic := cfg.Labels.Topics[0]
		lb, err := b.CoPartitioned(ctx, cfg.Source, cfg.Labels.Source(cfg.Source))
		if err != nil {
			return nil, err
		}
		c := &coPartitions{key: "labels.topics", shards: lb,
			open: func(ctx context.Context, shard shardid.ID, positions map[string]int64) (consumer.Source, int, error) {
				return lb.OpenCoPartition(ctx, shard, topic, positions)
			},
			coShard: func(shard shardid.ID) (shardid.ID, int, error) {
				co, k, ok := kafkaio.CoPartition(shard, topic)
				if !ok {
					return shardid.ID{}, 0, fmt.Errorf("shard %s is no partition of source.topics %s", shard, cfg.Source.Topics[0])
				}
				return co, k, nil
			},
		}
		if marks {
			d, err := b.Destination("labels", config.Destination{Kind: config.KindKafka, Topic: topic})
			if err != nil {
				return nil, err
			}
			c.marks = func(k int) (consumer.Destination, error) {
				d := d
				d.Partition, d.HasPartition = int32(k), true
				return d, nil
			}
		}
		return c, nil
	case cfg.Source.Kind == config.KindJetStream && cfg.Source.StreamPartitions > 0:
		lb, err := b.CoPartitionedStream(ctx, cfg.Source, cfg.Labels.Source(cfg.Source))
		if err != nil {
			return nil, err
		}
		c := &coPartitions{key: "labels.stream", shards: labelPartitions{lb}, open: lb.OpenCoPartition, coShard: lb.CoShard}
		if marks {
			sink, err := b.Sink(config.KindJetStream)
			if err != nil {
				return nil, fmt.Errorf("labels: %w", err)
			}
			c.marks = func(k int) (consumer.Destination, error) {
				subject, err := lb.MarkSubject(k)
				return consumer.Destination{Sink: sink, Topic: subject}, err
			}
		}
		return c, nil
	}
	return nil, fmt.Errorf("source.kind: labels are joined partition by partition to a Kafka topic or a partitioned JetStream stream (source.stream_partitions), not to %s (docs/labels.md, sections 9 and 11)", cfg.Source.Kind)
}

// labelPartitions are a labels' stream's partitions as the epochs read
// them: every partition has an end, 0 (before the first sequence) for one
// that holds no message yet, since the epochs refuse a source's shard
// whose labels' partition has none, which for a Kafka topic means that
// the topics are not co-partitioned.
type labelPartitions struct{ *natsio.JetStreamShards }

// Ends are the partitions' ends, with 0 for those that hold no message.
func (l labelPartitions) Ends(ctx context.Context) (map[shardid.ID]int64, error) {
	ends, err := l.JetStreamShards.Ends(ctx)
	if err != nil {
		return nil, err
	}
	for k := range l.Partitions() {
		if _, ok := ends[l.Shard(k)]; !ok {
			ends[l.Shard(k)] = 0
		}
	}
	return ends, nil
}

// PartitionJoin is what partition scope joins each partition's labels
// with (docs/labels.md, sections 9 and 9.1): the partitions of the
// labels' topic or stream, co-partitioned with the source's, and the
// join's configuration with its outputs, made once at start-up; Labels
// completes it for one partition, from the goroutine of that partition's
// worker.
type PartitionJoin struct {
	parts *coPartitions
	base  consumer.LabelsConfig
}

// OpenPartitionJoin checks that the labels' topic or stream is
// co-partitioned with the source's, as far as counts tell, and opens its
// partitions and the join's outputs; with marks false (a replay) it
// writes no mark.
func (b *Clients) OpenPartitionJoin(ctx context.Context, cfg config.Config, marks bool) (*PartitionJoin, error) {
	lc, err := JoinConfig(cfg)
	if err != nil {
		return nil, err
	}
	parts, err := b.coPartitions(ctx, cfg, marks)
	if err != nil {
		return nil, err
	}
	j := &PartitionJoin{parts: parts, base: *lc}
	if j.base.LateLabels, err = b.Destination("outputs.late_labels", cfg.Outputs.LateLabels); err != nil {
		return nil, err
	}
	return j, nil
}

// Labels is the join of shard, a partition of the source: the labels'
// partition with its number read from where positions say (from the
// earliest without), and its marks written to that partition. The tail
// is left to consumer.Partitions.
func (j *PartitionJoin) Labels(ctx context.Context, shard shardid.ID, positions map[string]int64) (*consumer.LabelsConfig, error) {
	if j == nil {
		return nil, fmt.Errorf("labels: no join of partitions opened for shard %s", shard)
	}
	lc := j.base
	src, k, err := j.parts.open(ctx, shard, positions)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", j.parts.key, err)
	}
	lc.Source = src
	if j.parts.marks != nil {
		if lc.Marks, err = j.parts.marks(k); err != nil {
			src.Close() //nolint:errcheck // not used
			return nil, fmt.Errorf("%s: %w", j.parts.key, err)
		}
	}
	return &lc, nil
}

// EpochLabels is the join of the labels of a source of several
// partitions learned in epochs (docs/labels.md, section 11): the
// partitions of the labels' topic or stream, checked co-partitioned with
// the source's as far as counts tell, partition p of one joined to
// partition p of the other; the marks of partition p's head go to
// partition p of the labels (none with marks false: a replay writes no
// mark).
func (b *Clients) EpochLabels(ctx context.Context, cfg config.Config, marks bool) (*consumer.EpochLabels, error) {
	lc, err := JoinConfig(cfg)
	if err != nil {
		return nil, err
	}
	parts, err := b.coPartitions(ctx, cfg, marks)
	if err != nil {
		return nil, err
	}
	el := &consumer.EpochLabels{
		Join:   lc.Join,
		Format: lc.Format,
		Shards: parts.shards,
		CoShard: func(shard shardid.ID) (shardid.ID, error) {
			co, _, err := parts.coShard(shard)
			if err != nil {
				return shardid.ID{}, fmt.Errorf("%s: %w", parts.key, err)
			}
			return co, nil
		},
	}
	if parts.marks != nil {
		el.Marks = func(shard shardid.ID) (consumer.Destination, error) {
			_, k, err := parts.coShard(shard)
			if err == nil {
				var d consumer.Destination
				if d, err = parts.marks(k); err == nil {
					return d, nil
				}
			}
			return consumer.Destination{}, fmt.Errorf("%s: %w", parts.key, err)
		}
	}
	if el.LateLabels, err = b.Destination("outputs.late_labels", cfg.Outputs.LateLabels); err != nil {
		return nil, err
	}
	return el, nil
}

// OnePartition refuses a Kafka labels' topic of several partitions for a
// source of one (the counts differ), and a source of several when it is
// read as one stream (a labels' topic read whole would have no one
// order): a source of several partitions joins its labels in epochs
// (EpochLabels) or in partition scope.
func (b *Clients) OnePartition(ctx context.Context, cfg config.Config) error {
	if cfg.Source.Kind != config.KindKafka {
		return nil
	}
	for _, c := range []struct {
		key, section string
		src          config.Source
	}{{"source.topics", "source", cfg.Source}, {"labels.topics", "labels", cfg.Labels.Source(cfg.Source)}} {
		n, err := b.kafkaPartitions(ctx, c.section, c.src)
		if err != nil {
			return fmt.Errorf("%s: %w", c.key, err)
		}
		if n > 1 {
			return fmt.Errorf("%s: topic %s has %d partitions; a source of one partition joins a labels' topic of one (a source of several joins a labels' topic co-partitioned with it, in epochs or in partition scope: docs/labels.md, sections 9 and 11)", c.key, c.src.Topics[0], n)
		}
	}
	return nil
}

// LabelsGrew is the start-up's refusal of a Kafka labels' topic of more
// partitions than the examples' (OnePartition, CoPartitioned), for a
// worker that is running: nil while the labels' topic has no more, and
// when either cannot be listed (the readers report an outage). The
// worker joins partition p of the labels to partition p of the examples
// alone, so the labels produced to a partition added meanwhile beyond
// the examples' would never be joined. (The examples' topic gaining a
// partition first is waited for: docs/labels.md, section 11.6.)
func (b *Clients) LabelsGrew(ctx context.Context, cfg config.Config) error {
	if cfg.Source.Kind != config.KindKafka || !cfg.Labels.Enabled() {
		return nil
	}
	src := cfg.Labels.Source(cfg.Source)
	n, err := b.kafkaPartitions(ctx, "labels", src)
	if err != nil || n <= 1 {
		return nil
	}
	nex, err := b.kafkaPartitions(ctx, "source", cfg.Source)
	if err != nil || n <= nex {
		return nil
	}
	return fmt.Errorf("labels.topics: topic %s has %d partitions now, and source.topics' topic %s has %d: partition p of the labels joins partition p of the examples, so the labels of the others would never be joined; add partitions to the examples' topic first, then to the labels' (docs/labels.md, sections 9 and 11)", src.Topics[0], n, cfg.Source.Topics[0], nex)
}
