package main

import (
	"context"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go/micro"
	"go.uber.org/zap"

	"github.com/hyperplane-ml/hyperplane/config"
	"github.com/hyperplane-ml/hyperplane/consumer"
	kafkaio "github.com/hyperplane-ml/hyperplane/consumer/kafka"
	natsio "github.com/hyperplane-ml/hyperplane/consumer/nats"
	"github.com/hyperplane-ml/hyperplane/internal/brokers"
	"github.com/hyperplane-ml/hyperplane/learner"
	"github.com/hyperplane-ml/hyperplane/serve"
	"github.com/hyperplane-ml/hyperplane/shardid"
	"github.com/hyperplane-ml/hyperplane/snapshot"
	"github.com/hyperplane-ml/hyperplane/wire"
)

// shards are the partitions of a source learned in epochs, which the
// pipeline closes.
type shards interface {
	consumer.Shards
	Close() error
}

// connShards are shards over a connection the brokers own: closing them
// closes nothing.
type connShards struct{ consumer.Shards }

func (connShards) Close() error { return nil }

// pipeline is what a worker runs on, built from a configuration in
// dependency order: the model resumed from snapshot.url, the source opened
// at the model's positions, the outputs' sinks, and the worker's
// configuration over them (consumer.Open). run and replay build their
// worker from it; close releases it all.
type pipeline struct {
	*consumer.Pipeline
	// source is what the worker of a replay reads; shards, instead, the
	// partitions of a Kafka source of several, learned in epochs.
	source  consumer.Source
	shards  shards
	config  consumer.WorkerConfig
	brokers *brokers.Clients
	store   *snapshot.Store // nil without snapshot.url
	// shardCount is the number of shards.
	shardCount int
	group      *kafkaio.Group
	// partitionSubject, for a partitioned JetStream stream, is the
	// subject filter of its first partition: what the worker of a stream
	// of one partition reads.
	partitionSubject string
	// labelsSource reads the labels that come later, when cfg.Labels
	// names them.
	labelsSource consumer.Source
	// partitionJoin joins each partition's labels in partition scope.
	partitionJoin *brokers.PartitionJoin
}

// storeHint says what a snapshot store URL that cannot be opened needs.
const storeHint = "a file:// directory must exist, or add ?create_dir=1; an s3:// URL needs a bucket"

// pipelineUse is what a command asks of its pipeline.
type pipelineUse struct {
	// Epochs opens a source of partitions as shards, for the engine
	// (consumer.Pipeline.Engine) to learn as its partitions say, and the
	// source of one stream when the engine needs it. Without it, every
	// partition is read by one source, opened with the pipeline.
	Epochs bool
	// Marks: with labels, the worker writes marks to their input. A
	// replay reads the logs and writes nothing to them.
	Marks bool
	// WaitForStore waits for a store that does not answer
	// (consumer.Options.WaitForStore), as a worker does at start-up,
	// rather than reporting it at once, as a command that reads it once
	// does.
	WaitForStore bool
}

// openPipeline builds the pipeline of cfg, which is valid, for use. The
// model comes first: a store that cannot be read, or holds an
// incompatible model, is reported before any broker is dialled.
func openPipeline(ctx context.Context, cfg config.Config, log *zap.Logger, use pipelineUse) (_ *pipeline, err error) {
	p := &pipeline{brokers: brokers.New(cfg, "hyperplane "+cfg.Model.Name, log)}
	defer func() {
		if err != nil {
			p.close()
		}
	}()
	if cfg.Snapshot.URL != "" {
		if p.store, err = snapshot.OpenStore(ctx, cfg.Snapshot.URL); err != nil {
			return nil, fmt.Errorf("snapshot.url: %w (%s)", err, storeHint)
		}
	}
	opts := consumer.Options{
		Model:        cfg.Model.Name,
		Learner:      cfg.Model.Learner,
		Store:        p.store,
		WaitForStore: use.WaitForStore,
		Resume: snapshot.ResumeOptions{
			Writer: cfg.SnapshotWriter(),
			Keep:   cfg.Snapshot.Keep,
			Reset:  cfg.Snapshot.Reset,
			Start:  cfg.Source.Start,
			Log:    log,
		},
		Connect: func(ctx context.Context) (consumer.Connection, error) {
			return p.connect(ctx, cfg, use.Epochs)
		},
		OpenSource: func(ctx context.Context, positions map[string]int64) (consumer.Source, error) {
			s := cfg.Source
			if p.partitionSubject != "" {
				// The stream stores its messages on the partition's
				// subjects, not on source.subject, which its transform
				// maps.
				s.Subject = p.partitionSubject
			}
			return p.brokers.Source(ctx, s, cfg.KafkaGroup(), positions)
		},
		PartitionScope: cfg.Model.Scope == config.ScopePartition,
		Mixing:         mixing(cfg),
		Written:        writtenMixings(cfg),
		Ownership:      func() (consumer.Ownership, error) { return p.ownership(cfg, log) },
		Challengers:    cfg.ChallengerConfigs(),
		Log:            log,
	}
	if cfg.Labels.Enabled() {
		opts.Recheck = func(ctx context.Context) error { return p.brokers.LabelsGrew(ctx, cfg) }
		opts.Labels = func(ctx context.Context, shard shardid.ID, positions map[string]int64) (*consumer.LabelsConfig, error) {
			return p.labels(ctx, cfg, shard, positions, use.Marks)
		}
		if (cfg.Source.Kind == config.KindKafka || cfg.Source.StreamPartitions > 0) && !opts.PartitionScope {
			opts.EpochLabels = func(ctx context.Context) (*consumer.EpochLabels, error) {
				return p.brokers.EpochLabels(ctx, cfg, use.Marks)
			}
		}
	}
	if p.Pipeline, err = consumer.Open(ctx, opts); err != nil {
		return nil, err
	}
	if cfg.Labels.Enabled() && opts.PartitionScope {
		if p.partitionJoin, err = p.brokers.OpenPartitionJoin(ctx, cfg, use.Marks); err != nil {
			return nil, err
		}
	}
	if !use.Epochs && p.shards == nil {
		head, err := p.HeadPositions()
		if err != nil {
			return nil, err
		}
		if p.source, err = p.brokers.Source(ctx, cfg.Source, cfg.KafkaGroup(), head); err != nil {
			return nil, err
		}
	}
	return p, nil
}

// connect opens the shards of cfg's source, when the engine learns it in
// epochs or it is a partitioned stream, and the outputs' sinks.
func (p *pipeline) connect(ctx context.Context, cfg config.Config, epochs bool) (consumer.Connection, error) {
	switch {
	case epochs && cfg.Source.Kind == config.KindKafka:
		// The engine counts the partitions, and looks for more while
		// it learns a topic of one as it comes.
		ks, n, err := p.brokers.KafkaShards(ctx, cfg.Source, 1)
		if err != nil {
			return consumer.Connection{}, err
		}
		p.shardCount = n
		if ks != nil {
			p.shards = ks
		}
	case cfg.Source.Kind == config.KindJetStream && cfg.Source.StreamPartitions > 0:
		// A partitioned stream is only ever read partition by partition.
		js, err := p.brokers.JetStreamShards(ctx, cfg.Source)
		if err != nil {
			return consumer.Connection{}, err
		}
		p.shards = connShards{js}
		p.shardCount = cfg.Source.StreamPartitions
		p.partitionSubject = js.Filter(0)
	}
	p.config = consumer.WorkerConfig{
		Model:            cfg.Model.Name,
		Publish:          cfg.Outputs.Publish,
		Encoding:         cfg.Outputs.Format,
		Batch:            cfg.Source.Batch,
		Decoder:          wire.DecoderOptions{MaxFeatures: cfg.Source.MaxFeatures, MaxBytes: cfg.Source.MaxBytes},
		Format:           cfg.Source.Format,
		SnapshotEvery:    cfg.Snapshot.Every,
		SnapshotInterval: cfg.Snapshot.Interval,
		ShutdownTimeout:  cfg.Shutdown.Timeout,
		Views:            cfg.Serving(),
		ViewInterval:     cfg.Serve.Refresh,
		CompareAlpha:     cfg.Model.Compare.Alpha,
		AutoPromote:      cfg.Model.Compare.Promote == config.PromoteAuto,
	}
	for _, d := range []struct {
		key  string
		dest config.Destination
		to   *consumer.Destination
	}{
		{"outputs.predictions", cfg.Outputs.Predictions, &p.config.Predictions},
		{"outputs.misclassifications", cfg.Outputs.Misclassifications, &p.config.Misclassifications},
		{"outputs.dead_letter", cfg.Outputs.DeadLetter, &p.config.DeadLetter},
		{"outputs.drift", cfg.Outputs.Drift, &p.config.Drift},
		{"outputs.challenger_predictions", cfg.Outputs.ChallengerPredictions, &p.config.ChallengerPredictions},
		{"outputs.promotions", cfg.Outputs.Promotions, &p.config.Promotions},
	} {
		var err error
		if *d.to, err = p.brokers.Destination(d.key, d.dest); err != nil {
			return consumer.Connection{}, err
		}
	}
	// An output that cannot be written to stops the start, as a missing
	// source does.
	if err := p.brokers.CheckOutputs(ctx, cfg); err != nil {
		return consumer.Connection{}, err
	}
	conn := consumer.Connection{Worker: p.config, ShardCount: p.shardCount}
	if p.shards != nil {
		conn.Shards = p.shards
	}
	return conn, nil
}

// mixing is the epochs' configuration of cfg, apart from what
// consumer.Open fills.
func mixing(cfg config.Config) consumer.EpochConfig {
	return consumer.EpochConfig{
		Writer:           cfg.SnapshotWriter(),
		ConfigDigest:     cfg.HistoryDigest(),
		EpochExamples:    int64(cfg.Model.Mixing.EpochExamples),
		Interval:         cfg.Model.Mixing.Interval,
		Growth:           cfg.EpochGrowth(),
		MinEpochExamples: int64(cfg.EpochMinExamples()),
		Weights:          cfg.Model.Mixing.Weights,
		Rule:             cfg.MixRule(),
		ChallengerRule:   cfg.Model.Mixing.Rule,
		Start:            cfg.Source.Start,
		SnapshotEvery:    cfg.Snapshot.Every,
		SnapshotInterval: cfg.Snapshot.Interval,
		Keep:             cfg.Snapshot.Keep,
	}
}

func (p *pipeline) close() {
	if p.Pipeline != nil {
		p.Pipeline.Close()
	}
	if p.group != nil {
		p.group.Close() //nolint:errcheck // leaving the group is best effort
	}
	if p.shards != nil {
		p.shards.Close() //nolint:errcheck // best effort at shutdown
	}
	p.brokers.Close()
	if p.store != nil {
		p.store.Close() //nolint:errcheck // best effort at shutdown
	}
}

// writtenMixings are the epochs' configurations of cfg mixing by each
// rule an older epoch log of its model may have been written with
// (config.Config.WrittenMixings).
func writtenMixings(cfg config.Config) []consumer.EpochConfig {
	var out []consumer.EpochConfig
	for _, w := range cfg.WrittenMixings() {
		out = append(out, mixing(w))
	}
	return out
}

// ownership says which shards this worker learns: those the Kafka
// consumer group gives it (kept in p.group), or the partitions of a
// stream that source.partitions names (nil: every one).
func (p *pipeline) ownership(cfg config.Config, log *zap.Logger) (consumer.Ownership, error) {
	if cfg.Source.Kind == config.KindKafka {
		// The group hands each worker its partitions; a partition no
		// member holds waits, and two holding one learn it twice to the
		// same bits.
		kc, err := p.brokers.KafkaConfig()
		if err != nil {
			return consumer.Ownership{}, err
		}
		group, err := kafkaio.NewGroupWith(kc, cfg.KafkaGroup(), cfg.Source.Topics, groupOptions(cfg), log)
		if err != nil {
			return consumer.Ownership{}, fmt.Errorf("source.group: %w", err)
		}
		p.group = group
		return consumer.Ownership{Owned: group.Owned, Commit: group.Commit, Changed: group.Changed, Settled: group.Settled, Alone: group.Alone, Failure: group.Failure}, nil
	}
	// A partitioned stream's partitions are assigned statically.
	owned, err := cfg.OwnedPartitions(config.Hostname())
	if err != nil || owned == nil {
		return consumer.Ownership{}, err
	}
	return natsio.StaticOwnership(cfg.Source.Stream, owned), nil
}

// groupOptions are the worker's membership of the consumer group: its
// session, and its static instance id (kafka.group_instance), under which
// a restart after a crash takes the worker's partitions back at once.
func groupOptions(cfg config.Config) kafkaio.GroupOptions {
	opts := kafkaio.SessionOptions(cfg.Kafka.SessionTimeout)
	opts.InstanceID = cfg.KafkaGroupInstance()
	return opts
}

// loadShardGeneration reads the stored generations of the shards' chains
// for requests that name one; nil without a store.
func (p *pipeline) loadShardGeneration(model string) serve.LoadShardGeneration {
	if p.store == nil {
		return nil
	}
	return func(ctx context.Context, shard shardid.ID, gen uint64) (*learner.State, error) {
		return servedState(p.store.LoadPartition(ctx, model, shard, gen))
	}
}

// loadGeneration reads stored generations of model for requests that name
// one; nil without a store.
func (p *pipeline) loadGeneration(model string) serve.LoadGeneration {
	if p.store == nil {
		return nil
	}
	return func(ctx context.Context, gen uint64) (*learner.State, error) {
		return servedState(p.store.Load(ctx, model, gen))
	}
}

// servedState is the state of snap, read for a request: a generation
// that is not found is serve's ErrNotFound.
func servedState(snap *snapshot.Snapshot, err error) (*learner.State, error) {
	if errors.Is(err, snapshot.ErrNotFound) {
		return nil, fmt.Errorf("%w: %w", serve.ErrNotFound, err)
	}
	if err != nil {
		return nil, err
	}
	return snap.State, nil
}

// service starts the NATS micro service of srv on the pipeline's NATS
// connection.
func (p *pipeline) service(srv *serve.Server, cfg config.Config) (micro.Service, error) {
	nc, err := p.brokers.NATSConn()
	if err != nil {
		return nil, fmt.Errorf("serve.nats: %w", err)
	}
	return srv.AddService(nc, serve.ServiceOptions{
		Subject:    cfg.ServeSubject(),
		QueueGroup: cfg.Serve.QueueGroup,
		Version:    binaryVersion(),
	})
}
