package main

import (
	"context"

	"github.com/hyperplane-ml/hyperplane/config"
	"github.com/hyperplane-ml/hyperplane/consumer"
	"github.com/hyperplane-ml/hyperplane/internal/brokers"
	"github.com/hyperplane-ml/hyperplane/shardid"
)

// labels is the worker's configuration of the join of cfg.Labels, which is
// enabled: the labels' source and the examples' tail opened at the
// model's positions, and the marks' destination (none with marks false: a
// replay reads the logs and writes nothing to them). consumer.Open sets
// the join the model's generation recorded. shard is the zero ID for a source of
// one partition; in partition scope it is the partition whose examples
// the labels join, and the labels are those of its co-partition
// (brokers.PartitionJoin.Labels).
func (p *pipeline) labels(ctx context.Context, cfg config.Config, shard shardid.ID, positions map[string]int64, marks bool) (*consumer.LabelsConfig, error) {
	if !shard.IsZero() {
		return p.partitionJoin.Labels(ctx, shard, positions)
	}
	lc, err := brokers.JoinConfig(cfg)
	if err != nil {
		return nil, err
	}
	if err := p.brokers.OnePartition(ctx, cfg); err != nil {
		return nil, err
	}
	l := cfg.Labels
	if lc.Source, err = p.brokers.LabelsSource(ctx, l.Source(cfg.Source), cfg.KafkaGroup(), positions); err != nil {
		return nil, err
	}
	p.labelsSource = lc.Source
	lc.OpenTail = func(ctx context.Context, resume map[string]int64) (consumer.Source, error) {
		return p.brokers.OpenSource(ctx, cfg.Source, "", resume)
	}
	if marks {
		d := config.Destination{Kind: l.Kind, Topic: l.Subject}
		if l.Kind == config.KindKafka {
			d.Topic = l.Topics[0]
		}
		if lc.Marks, err = p.brokers.Destination("labels", d); err != nil {
			return nil, err
		}
	}
	if lc.LateLabels, err = p.brokers.Destination("outputs.late_labels", cfg.Outputs.LateLabels); err != nil {
		return nil, err
	}
	return lc, nil
}
