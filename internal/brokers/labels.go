package brokers

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/hyperplane-ml/hyperplane/config"
	"github.com/hyperplane-ml/hyperplane/consumer"
	kafkaio "github.com/hyperplane-ml/hyperplane/consumer/kafka"
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

// PartitionJoin is what partition scope joins each partition's labels
// with (docs/labels.md, section 9): the partitions of the labels' topic,
// co-partitioned with the source's, and the join's configuration with
// its outputs, made once at start-up; Labels completes it for one
// partition, from the goroutine of that partition's worker.
type PartitionJoin struct {
	topic  string
	shards *kafkaio.Shards
	base   consumer.LabelsConfig
}

// OpenPartitionJoin checks that the labels' topic is co-partitioned with
// the source's, as far as counts tell, and opens its partitions and the
// join's outputs; with marks false (a replay) it writes no mark.
func (b *Clients) OpenPartitionJoin(ctx context.Context, cfg config.Config, marks bool) (*PartitionJoin, error) {
	if cfg.Source.Kind != config.KindKafka {
		return nil, fmt.Errorf("source.stream_partitions: labels are joined in partition scope to Kafka topics only (docs/labels.md, section 9)")
	}
	lc, err := JoinConfig(cfg)
	if err != nil {
		return nil, err
	}
	topic := cfg.Labels.Topics[0]
	lb, err := b.CoPartitioned(ctx, cfg.Source, cfg.Labels.Source(cfg.Source))
	if err != nil {
		return nil, err
	}
	j := &PartitionJoin{topic: topic, shards: lb, base: *lc}
	if marks {
		if j.base.Marks, err = b.Destination("labels", config.Destination{Kind: config.KindKafka, Topic: topic}); err != nil {
			return nil, err
		}
	}
	if j.base.LateLabels, err = b.Destination("outputs.late_labels", cfg.Outputs.LateLabels); err != nil {
		return nil, err
	}
	return j, nil
}

// Labels is the join of shard, a partition of the source: the labels'
// partition with its number read from where positions say (from the
// earliest without), and its marks written to that partition. The tail
// is left to consumer.Partitions.
func (j *PartitionJoin) Labels(ctx context.Context, shard string, positions map[string]int64) (*consumer.LabelsConfig, error) {
	if j == nil {
		return nil, fmt.Errorf("labels: no join of partitions opened for shard %s", shard)
	}
	lc := j.base
	src, k, err := j.shards.OpenCoPartition(ctx, shard, j.topic, positions)
	if err != nil {
		return nil, fmt.Errorf("labels.topics: %w", err)
	}
	lc.Source = src
	if lc.Marks.Sink != nil {
		lc.Marks.Partition, lc.Marks.HasPartition = int32(k), true
	}
	return &lc, nil
}

// EpochLabels is the join of the labels of a Kafka source of several
// partitions learned in epochs (docs/labels.md, section 11): the
// partitions of the labels' topic, checked co-partitioned with the
// source's as far as counts tell, partition p of one joined to partition
// p of the other; the marks of partition p's head go to partition p of
// the labels' topic (none with marks false: a replay writes no mark).
func (b *Clients) EpochLabels(ctx context.Context, cfg config.Config, marks bool) (*consumer.EpochLabels, error) {
	if cfg.Source.Kind != config.KindKafka {
		return nil, fmt.Errorf("source.stream_partitions: labels are joined in epochs to Kafka topics only (docs/labels.md, section 11)")
	}
	lc, err := JoinConfig(cfg)
	if err != nil {
		return nil, err
	}
	lb, err := b.CoPartitioned(ctx, cfg.Source, cfg.Labels.Source(cfg.Source))
	if err != nil {
		return nil, err
	}
	source, topic := "kafka:"+cfg.Source.Topics[0]+"/", cfg.Labels.Topics[0]
	partition := func(shard string) (string, error) {
		n, ok := strings.CutPrefix(shard, source)
		if !ok {
			return "", fmt.Errorf("labels.topics: shard %s is no partition of source.topics %s", shard, cfg.Source.Topics[0])
		}
		return n, nil
	}
	el := &consumer.EpochLabels{
		Join:   lc.Join,
		Format: lc.Format,
		Shards: lb,
		CoShard: func(shard string) (string, error) {
			n, err := partition(shard)
			return "kafka:" + topic + "/" + n, err
		},
	}
	if marks {
		d, err := b.Destination("labels", config.Destination{Kind: config.KindKafka, Topic: topic})
		if err != nil {
			return nil, err
		}
		el.Marks = func(shard string) (consumer.Destination, error) {
			n, err := partition(shard)
			if err != nil {
				return consumer.Destination{}, err
			}
			k, err := strconv.ParseInt(n, 10, 32)
			if err != nil {
				return consumer.Destination{}, fmt.Errorf("labels.topics: shard %s: %w", shard, err)
			}
			d := d
			d.Partition, d.HasPartition = int32(k), true
			return d, nil
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
		key string
		src config.Source
	}{{"source.topics", cfg.Source}, {"labels.topics", cfg.Labels.Source(cfg.Source)}} {
		n, err := b.KafkaPartitions(ctx, c.src)
		if err != nil {
			return fmt.Errorf("%s: %w", c.key, err)
		}
		if n > 1 {
			return fmt.Errorf("%s: topic %s has %d partitions; a source of one partition joins a labels' topic of one (a source of several joins a labels' topic co-partitioned with it, in epochs or in partition scope: docs/labels.md, sections 9 and 11)", c.key, c.src.Topics[0], n)
		}
	}
	return nil
}
