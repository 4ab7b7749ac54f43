package main

import (
	"context"
	"fmt"
	"strings"

	"go.uber.org/zap"

	"github.com/hyperplane-ml/hyperplane/backtest"
	"github.com/hyperplane-ml/hyperplane/config"
	"github.com/hyperplane-ml/hyperplane/consumer"
	"github.com/hyperplane-ml/hyperplane/internal/brokers"
	"github.com/hyperplane-ml/hyperplane/learner/compare"
	"github.com/hyperplane-ml/hyperplane/wire"
)

// backtestFile runs the backtest over the file of -input.
func backtestFile(ctx context.Context, e *env, in *inputFlags, from, to wire.Start, opts backtest.Options) (*compare.Contest, error) {
	if from.Kind != wire.StartEarliest || to.Kind != wire.StartLatest {
		return nil, usagef("-from, -to: they choose a range of the source's log; with -input the whole file is read")
	}
	ropts, err := in.check()
	if err != nil {
		return nil, err
	}
	opts.Read = ropts
	f, _, err := in.open(e)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	c, err := backtest.Run(ctx, f, opts)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", in.input, err)
	}
	return c, nil
}

// backtestLog runs the backtest over the source's log from from up to
// to, read as replay reads it (a source of one partition or stream),
// touching no store and publishing nothing.
func backtestLog(ctx context.Context, e *env, cfg config.Config, from, to wire.Start, opts backtest.Options) (*compare.Contest, error) {
	if from.Kind == wire.StartLatest {
		return nil, usagef("-from: latest would compare nothing (want earliest, offset:N or time:RFC3339)")
	}
	end, err := endOffset(from, to)
	if err != nil {
		return nil, err
	}
	if cfg.Source.Kind == "" {
		return nil, usagef("-input: required, or a source (source.kind and its settings) whose log to read")
	}
	if cfg.Source.Kind == config.KindNATS {
		return nil, usagef("source.kind: %s; give -input", noCoreLog)
	}
	if cfg.Labels.Enabled() {
		return nil, usagef("config: labels: backtest reads labeled examples; the join of labels that come later is not read from the log yet")
	}
	cfg.Source.Start = from
	cfg.Outputs = config.Outputs{Publish: wire.PublishNone, Format: cfg.Outputs.Format}
	// The model is meant to go when the backtest ends: a store in memory
	// keeps the worker from warning that it will.
	cfg.Snapshot = config.Default().Snapshot
	cfg.Snapshot.URL, cfg.HTTP.Addr = "mem://", ""
	// Learned here, not by a worker, and never promoted: without them the
	// worker's own validation would refuse model.compare.promote: auto.
	cfg.Model.Challengers, cfg.Model.Compare.Promote = nil, config.PromoteManual
	if err := cfg.Validate(); err != nil {
		return nil, configErr(err, map[string]string{"source.start": "-from"})
	}
	opts.Decoder = wire.DecoderOptions{MaxFeatures: cfg.Source.MaxFeatures, MaxBytes: cfg.Source.MaxBytes}
	log := newLogger(config.Log{Level: config.LevelWarn, Format: cfg.Log.Format}, e.stderr)
	if err := onePartition(ctx, cfg, log); err != nil {
		return nil, err
	}
	p, err := openPipeline(ctx, cfg, log, pipelineUse{})
	if err != nil {
		return nil, err
	}
	defer p.close()
	if p.source == nil {
		return nil, fmt.Errorf("backtest: the source is partitioned; backtest reads a source of one partition or stream from its log, or a file (-input)")
	}
	bounded := &consumer.Range{Source: p.source, End: rangeEnd(end), Drain: true}
	return backtest.RunSource(ctx, bounded, opts)
}

// onePartition refuses, before anything is read, a source of several
// partitions: the source of one reads them merged in an order that
// changes from run to run, and so would the verdicts.
func onePartition(ctx context.Context, cfg config.Config, log *zap.Logger) error {
	const why = "backtest reads the log of a source of one partition or stream, in its order, or a file (-input)"
	switch {
	case cfg.Source.Kind == config.KindJetStream && cfg.Source.StreamPartitions > 0:
		return usagef("source.stream_partitions: %d: %s", cfg.Source.StreamPartitions, why)
	case cfg.Source.Kind != config.KindKafka:
		return nil
	}
	n, err := kafkaPartitions(ctx, cfg, log)
	if err != nil {
		return err
	}
	if n > 1 {
		return usagef("source.topics: %s: %d partitions, merged in no fixed order; %s", strings.Join(cfg.Source.Topics, ", "), n, why)
	}
	return nil
}

// kafkaPartitions counts the partitions of cfg's Kafka source, before a
// command that reads it as one source opens it.
func kafkaPartitions(ctx context.Context, cfg config.Config, log *zap.Logger) (int, error) {
	b := brokers.New(cfg, "hyperplane "+cfg.Model.Name, log)
	defer b.Close()
	return b.KafkaPartitions(ctx, cfg.Source)
}
