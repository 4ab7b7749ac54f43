package main

import (
	"context"
	"fmt"
	"maps"

	"github.com/hyperplane-ml/hyperplane/config"
	"github.com/hyperplane-ml/hyperplane/consumer"
)

// joinState is the state of the join of labels that come later that the
// resumed generation recorded; nil for none.
func (p *pipeline) joinState() (*consumer.JoinState, error) {
	if p.resumed.Snapshot == nil || p.resumed.Snapshot.Join == nil {
		return nil, nil
	}
	return consumer.DecodeJoinState(p.resumed.Snapshot.Join)
}

// headPositions are where the worker reads the examples from: the model's
// positions, but with labels, the examples' from where the join's head
// had read them (docs/labels.md, section 6).
func (p *pipeline) headPositions(cfg config.Config) (map[string]int64, error) {
	if !cfg.Labels.Enabled() {
		// Labels off for a model that had them: the examples its join
		// held are read again from where the model is, and those without
		// a label are predicted and not learned.
		return p.resumed.Positions, nil
	}
	st, err := p.joinState()
	if err != nil || st == nil {
		return p.resumed.Positions, err
	}
	pos := maps.Clone(p.resumed.Positions)
	if pos == nil {
		pos = map[string]int64{}
	}
	pos[st.Source] = st.Head
	return pos, nil
}

// labels is the worker's configuration of the join of cfg.Labels, which is
// enabled: the labels' source and the examples' tail opened at the
// model's positions, the marks' destination (none with marks false: a
// replay reads the logs and writes nothing to them), and the join the
// model's generation recorded.
func (p *pipeline) labels(ctx context.Context, cfg config.Config, marks bool) (*consumer.LabelsConfig, error) {
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
	var err error
	if lc.State, err = p.joinState(); err != nil {
		return nil, err
	}
	if err := p.onePartition(ctx, cfg); err != nil {
		return nil, err
	}
	if lc.Source, err = p.brokers.source(ctx, l.Source(cfg.Source), cfg.KafkaGroup(), p.resumed.Positions); err != nil {
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
