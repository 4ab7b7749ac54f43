package main

import (
	"context"
	"fmt"

	"github.com/hyperplane-ml/hyperplane/config"
	"github.com/hyperplane-ml/hyperplane/consumer"
)

// labels is the worker's configuration of the join of cfg.Labels, which is
// enabled: the labels' source and the examples' tail opened at the
// model's positions, and the marks' destination (none with marks false: a
// replay reads the logs and writes nothing to them). consumer.Open sets
// the join the model's generation recorded.
func (p *pipeline) labels(ctx context.Context, cfg config.Config, positions map[string]int64, marks bool) (*consumer.LabelsConfig, error) {
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
	if err := p.onePartition(ctx, cfg); err != nil {
		return nil, err
	}
	var err error
	if lc.Source, err = p.brokers.source(ctx, l.Source(cfg.Source), cfg.KafkaGroup(), positions); err != nil {
		return nil, fmt.Errorf("labels: %w", err)
	}
	p.labelsSource = lc.Source
	lc.OpenTail = func(ctx context.Context, resume map[string]int64) (consumer.Source, error) {
		return p.brokers.openSource(ctx, cfg.Source, "", resume)
	}
	if marks {
		d := config.Destination{Kind: l.Kind, Topic: l.Subject}
		if l.Kind == config.KindKafka {
			d.Topic = l.Topics[0]
		}
		if lc.Marks, err = p.brokers.destination("labels", d); err != nil {
			return nil, err
		}
	}
	if lc.LateLabels, err = p.brokers.destination("outputs.late_labels", cfg.Outputs.LateLabels); err != nil {
		return nil, err
	}
	return lc, nil
}

// onePartition refuses a Kafka source or labels' topic of several
// partitions: the join takes one of each for now (docs/labels.md,
// section 8), and a labels' topic read whole would have no one order.
func (p *pipeline) onePartition(ctx context.Context, cfg config.Config) error {
	if cfg.Source.Kind != config.KindKafka {
		return nil
	}
	for _, c := range []struct {
		key string
		src config.Source
	}{{"source.topics", cfg.Source}, {"labels.topics", cfg.Labels.Source(cfg.Source)}} {
		sh, n, err := p.brokers.kafkaShards(ctx, c.src, 2)
		if err != nil {
			return fmt.Errorf("%s: %w", c.key, err)
		}
		if sh != nil {
			sh.Close() //nolint:errcheck // only counted
		}
		if n > 1 {
			return fmt.Errorf("%s: topic %s has %d partitions; labels are joined to a source of one partition, with a labels' topic of one (the join over several, in epochs, is not built yet: docs/labels.md, section 8)", c.key, c.src.Topics[0], n)
		}
	}
	return nil
}
