package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/micro"
	"go.uber.org/zap"
	"gocloud.dev/blob/memblob"

	"github.com/hyperplane-ml/hyperplane/config"
	"github.com/hyperplane-ml/hyperplane/consumer"
	kafkaio "github.com/hyperplane-ml/hyperplane/consumer/kafka"
	"github.com/hyperplane-ml/hyperplane/consumer/retry"
	"github.com/hyperplane-ml/hyperplane/epochlog"
	"github.com/hyperplane-ml/hyperplane/learner"
	"github.com/hyperplane-ml/hyperplane/serve"
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
// configuration over them. run and replay build their worker from it;
// close releases it all.
type pipeline struct {
	resumed snapshot.Resumed
	// source is what the worker reads; shards, instead, the partitions
	// of a Kafka source of several, learned in epochs.
	source  consumer.Source
	shards  shards
	config  consumer.WorkerConfig
	brokers *brokers
	store   *snapshot.Store // nil without snapshot.url
	// shardCount is the number of shards; memStore the epoch log's
	// store without snapshot.url.
	shardCount int
	memStore   *snapshot.Store
	group      *kafkaio.Group
	// partitionSubject, for a partitioned JetStream stream, is the
	// subject filter of its first partition: what the worker of a stream
	// of one partition reads.
	partitionSubject string
	// lag is closed when the lag reporter of the source of one stream
	// has stopped; nil when none runs.
	lag chan struct{}
	// labelsSource reads the labels that come later, when cfg.Labels
	// names them.
	labelsSource consumer.Source
}

// openPipeline builds the pipeline of cfg, which is valid. The model comes
// first: a store that cannot be read, or holds an incompatible model, is
// reported before any broker is dialled. With epochs, a source of
// partitions is opened as shards, for the engine (pipeline.engine) to
// learn as its partitions say, and the source of one stream is opened
// when the engine needs it; otherwise every partition is read by one
// source, opened now.
func openPipeline(ctx context.Context, cfg config.Config, log *zap.Logger, epochs bool) (_ *pipeline, err error) {
	p := &pipeline{brokers: newBrokers(cfg, "hyperplane "+cfg.Model.Name, log)}
	defer func() {
		if err != nil {
			p.close()
		}
	}()
	if cfg.Snapshot.URL != "" {
		if p.store, err = snapshot.OpenStore(ctx, cfg.Snapshot.URL); err != nil {
			return nil, fmt.Errorf("snapshot.url: %w (a file:// directory must exist, or add ?create_dir=1; an s3:// URL needs a bucket)", err)
		}
	}
	if err := p.resume(ctx, cfg, log); err != nil {
		return nil, err
	}
	switch {
	case epochs && cfg.Source.Kind == config.KindKafka:
		// The engine counts the partitions, and looks for more while
		// it learns a topic of one as it comes.
		var ks *kafkaio.Shards
		if ks, p.shardCount, err = p.brokers.kafkaShards(ctx, cfg.Source, 1); err != nil {
			return nil, err
		}
		if ks != nil {
			p.shards = ks
		}
	case cfg.Source.Kind == config.KindJetStream && cfg.Source.StreamPartitions > 0:
		// A partitioned stream is only ever read partition by partition.
		js, err := p.brokers.jetStreamShards(ctx, cfg.Source)
		if err != nil {
			return nil, err
		}
		p.shards = connShards{js}
		p.shardCount = cfg.Source.StreamPartitions
		p.partitionSubject = js.Filter(0)
	}
	if !epochs && p.shards == nil {
		head, err := p.headPositions(cfg)
		if err != nil {
			return nil, err
		}
		if p.source, err = p.brokers.source(ctx, cfg.Source, cfg.KafkaGroup(), head); err != nil {
			return nil, err
		}
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
	} {
		if *d.to, err = p.brokers.destination(d.key, d.dest); err != nil {
			return nil, err
		}
	}
	if p.resumed.Snapshotter != nil {
		p.config.Snapshots = workerSnapshots{p.resumed.Snapshotter}
	}
	return p, nil
}

// engine is the engine that learns p's source as cfg says: one worker for
// a source of one shard, epochs for several, a chain per shard in
// partition scope (consumer.Engine).
func (p *pipeline) engine(cfg config.Config, metrics *consumer.Metrics, log *zap.Logger) *consumer.Engine {
	var shards consumer.Shards
	if p.shards != nil {
		shards = p.shards
	}
	return consumer.NewEngine(consumer.EngineConfig{
		PartitionScope: cfg.Model.Scope == config.ScopePartition,
		Shards:         shards,
		Epochs:         p.resumed.Snapshot != nil && p.resumed.Snapshot.Epoch > 0,
		GrowthCheck:    cfg.Model.Mixing.Interval,
		Single: func(ctx context.Context) (*consumer.Worker, error) {
			s := cfg.Source
			if p.partitionSubject != "" {
				// The stream stores its messages on the partition's
				// subjects, not on source.subject, which its transform
				// maps.
				s.Subject = p.partitionSubject
			}
			head, err := p.headPositions(cfg)
			if err != nil {
				return nil, err
			}
			src, err := p.brokers.source(ctx, s, cfg.KafkaGroup(), head)
			if err != nil {
				return nil, err
			}
			p.source = src
			if lr, ok := src.(consumer.LagReporter); ok {
				// It stops with the worker (ctx), and the pipeline waits
				// for it before the source closes.
				p.lag = make(chan struct{})
				go func() {
					defer close(p.lag)
					reportLag(ctx, lr, metrics)
				}()
			}
			return p.worker(ctx, cfg, src, metrics, log, true)
		},
		Mixed: func(ctx context.Context, after *consumer.Worker) (*consumer.Epochs, error) {
			if cfg.Labels.Enabled() {
				return nil, fmt.Errorf("labels.kind: labels are joined to a source of one partition; this one has %d (the join over several partitions, in epochs, is not built yet: docs/labels.md, section 8)", max(p.shardCount, 2))
			}
			if after != nil {
				if err := p.resumeAfter(ctx, cfg, after, log); err != nil {
					return nil, err
				}
			}
			x, err := p.epochs(ctx, cfg, metrics, log)
			if err != nil {
				return nil, err
			}
			log.Info("learning in epochs", zap.Int("partitions", p.shardCount), zap.Uint64("epoch", x.Mixed()+1),
				zap.Int("epoch_examples", cfg.Model.Mixing.EpochExamples), zap.Int("growth", cfg.Model.Mixing.Growth),
				zap.Stringer("weights", cfg.Model.Mixing.Weights))
			return x, nil
		},
		Partitioned: func(ctx context.Context) (*consumer.Partitions, error) {
			x, err := p.partitions(ctx, cfg, metrics, log)
			if err != nil {
				return nil, err
			}
			log.Info("one model per partition", zap.Int("partitions", p.shardCount))
			return x, nil
		},
	}, log)
}

// resumeAfter makes what the epochs continue the model that after, the
// worker of a source of one shard, stopped with: the store's newest
// generation, which it wrote last, or without a store its model, as
// epoch 0 at its positions.
func (p *pipeline) resumeAfter(ctx context.Context, cfg config.Config, after *consumer.Worker, log *zap.Logger) error {
	p.waitLag()
	if p.source != nil {
		p.source.Close() //nolint:errcheck // its worker has stopped
		p.source = nil
	}
	if p.store == nil {
		p.resumed = snapshot.Resumed{Model: after.Model(), Positions: after.Positions(),
			Snapshot: &snapshot.Snapshot{Model: cfg.Model.Name, Positions: after.Positions(), State: after.Model().State()}}
		return nil
	}
	return p.resume(ctx, cfg, log)
}

// worker is a worker over p that reads src: p's source, or one wrapped
// around it. metrics may be nil. With labels, it joins them to the
// examples, writing marks to their input if marks is set.
func (p *pipeline) worker(ctx context.Context, cfg config.Config, src consumer.Source, metrics *consumer.Metrics, log *zap.Logger, marks bool) (*consumer.Worker, error) {
	wcfg := p.config
	if cfg.Labels.Enabled() {
		var err error
		if wcfg.Labels, err = p.labels(ctx, cfg, marks); err != nil {
			return nil, err
		}
	}
	return consumer.NewWorker(wcfg, src, p.resumed.Model, p.resumed.Positions, metrics, log), nil
}

// waitLag waits for the lag reporter of the source of one stream, which
// ends with its worker, if one runs.
func (p *pipeline) waitLag() {
	if p.lag != nil {
		<-p.lag
		p.lag = nil
	}
}

func (p *pipeline) close() {
	p.waitLag()
	if p.group != nil {
		p.group.Close() //nolint:errcheck // leaving the group is best effort
	}
	if p.shards != nil {
		p.shards.Close() //nolint:errcheck // best effort at shutdown
	}
	if p.memStore != nil {
		p.memStore.Close() //nolint:errcheck // memory
	}
	p.brokers.close()
	if p.store != nil {
		p.store.Close() //nolint:errcheck // best effort at shutdown
	}
}

// workerSnapshots hands the worker its snapshotter, marking the errors no
// retry mends (snapshot.Fatal) with consumer.ErrFatal, the worker's word
// for an error that stops it.
type workerSnapshots struct{ *snapshot.Snapshotter }

func (s workerSnapshots) Snapshot(ctx context.Context, st *learner.State, positions map[string]int64, join []byte) error {
	err := s.Snapshotter.Snapshot(ctx, st, positions, join)
	if snapshot.Fatal(err) {
		return fmt.Errorf("%w: %w", consumer.ErrFatal, err)
	}
	return err
}

// epochs are the epochs that learn p's shards: the model continues from
// the store's newest generation (an older snapshot is epoch 0), with the
// log in the store, or in memory without snapshot.url.
func (p *pipeline) epochs(ctx context.Context, cfg config.Config, metrics *consumer.Metrics, log *zap.Logger) (*consumer.Epochs, error) {
	if cfg.Model.Learner.Algorithm == learner.Kernel {
		return nil, fmt.Errorf("model.learner.algorithm: a kernel model cannot be learned over %d partitions: its support set cannot be mixed; use a source of one partition", p.shardCount)
	}
	store := p.store
	if store == nil {
		store = snapshot.NewStore(memblob.OpenBucket(nil), "")
		p.memStore = store
	}
	var damaged uint64
	for tries := 0; ; tries++ {
		var newer bool
		var err error
		if damaged, newer, err = snapshot.DamagedAbove(ctx, store, cfg.Model.Name, cfg.Model.Learner, p.resumed.Generation); err != nil {
			return nil, err
		}
		if !newer || tries == 3 {
			break
		}
		// Another worker wrote a generation since this one resumed (a new
		// history's first, maybe): continue from it rather than cut
		// boundaries under it.
		if err := p.resume(ctx, cfg, log); err != nil {
			return nil, err
		}
	}
	elog := epochlog.New(store)
	snap := p.resumed.Snapshot
	cfg, err := mixingOfLog(ctx, elog, cfg, snap, log)
	if err != nil {
		return nil, err
	}
	digest := cfg.HistoryDigest()
	m := p.resumed.Model
	e, prev, positions, err := consumer.ContinueModel(snap, m, digest)
	if err != nil {
		return nil, err
	}
	writer := cfg.SnapshotWriter()
	// Two workers must never both create one boundary: a store that
	// ignores create-if-absent cannot hold the log. A store that refuses
	// writes for a while is waited for, as the epochs wait for it.
	if p.store != nil {
		bo := retry.Backoff{Min: 100 * time.Millisecond, Max: 5 * time.Second}
		err := retry.Do(ctx, &bo, func(ctx context.Context) error {
			err := elog.ProbeConditionalCreate(ctx, cfg.Model.Name, writer)
			if epochlog.Fatal(err) {
				return retry.Permanent(err)
			}
			return err
		}, func(err error) {
			log.Warn("the store refused the start-up probe of create-if-absent; retrying", zap.Error(err))
		})
		if err != nil {
			return nil, fmt.Errorf("snapshot.url: %w", err)
		}
	}
	ecfg := consumer.EpochConfig{
		Worker:           p.config,
		Shards:           p.shards,
		Log:              elog,
		Writer:           writer,
		ConfigDigest:     digest,
		EpochExamples:    int64(cfg.Model.Mixing.EpochExamples),
		Interval:         cfg.Model.Mixing.Interval,
		Growth:           cfg.Model.Mixing.Growth,
		Weights:          cfg.Model.Mixing.Weights,
		Rule:             cfg.MixRule(),
		Start:            cfg.Source.Start,
		SnapshotEvery:    cfg.Snapshot.Every,
		SnapshotInterval: cfg.Snapshot.Interval,
		Keep:             cfg.Snapshot.Keep,
		Damaged:          damaged,
	}
	if ecfg.Owned, err = p.ownership(cfg, log); err != nil {
		return nil, err
	}
	if p.group != nil {
		ecfg.Commit, ecfg.Changed, ecfg.Settled = p.group.Commit, p.group.Changed, p.group.Settled
	}
	return consumer.NewEpochs(ecfg, m, e, prev, positions, metrics, log), nil
}

// mixingOfLog is cfg as the model's epoch log was written: a log written
// before model.mixing.rule mixed by the mean, and one written before auto
// chose a rule of the algorithm's own mixed by the rule auto chose then
// (config.Config.WrittenMixings); such a log continues so, whatever cfg
// says, since its history is that rule's. snap is the generation the
// epochs continue from (nil for none); without one that names its
// digest, the log's next boundary says.
func mixingOfLog(ctx context.Context, elog *epochlog.Log, cfg config.Config, snap *snapshot.Snapshot, log *zap.Logger) (config.Config, error) {
	written := cfg.WrittenMixings()
	if len(written) == 0 {
		return cfg, nil
	}
	var digest [32]byte
	if snap != nil && snap.Epoch > 0 {
		digest = snap.ConfigDigest
	} else {
		var next uint64 = 1
		if snap != nil {
			next = snap.Generation + 1
		}
		b, _, err := elog.Boundary(ctx, cfg.Model.Name, next)
		switch {
		case errors.Is(err, snapshot.ErrNotFound):
			return cfg, nil
		case err != nil:
			return cfg, err
		}
		digest = b.ConfigDigest
	}
	if digest == cfg.HistoryDigest() {
		return cfg, nil
	}
	for _, w := range written {
		if digest == w.HistoryDigest() {
			log.Info("the epoch log was written mixing by another rule: it continues so (a new model.name mixes by model.mixing.rule)",
				zap.Stringer("written", w.MixRule()), zap.Stringer("rule", cfg.MixRule()))
			return w, nil
		}
	}
	return cfg, nil
}

// resume resumes the model from the store's newest generation: at
// start-up, and again when the model goes on from a generation another
// worker, or this one's worker of one partition, wrote since.
func (p *pipeline) resume(ctx context.Context, cfg config.Config, log *zap.Logger) error {
	r, err := snapshot.Resume(ctx, p.store, cfg.Model.Name, cfg.Model.Learner, resumeOptions(cfg, log))
	if err != nil {
		return err
	}
	p.resumed = r
	return nil
}

// resumeOptions are the options a model of cfg, or a chain of one of its
// shards, is resumed with.
func resumeOptions(cfg config.Config, log *zap.Logger) snapshot.ResumeOptions {
	return snapshot.ResumeOptions{
		Writer: cfg.SnapshotWriter(),
		Keep:   cfg.Snapshot.Keep,
		Reset:  cfg.Snapshot.Reset,
		Start:  cfg.Source.Start,
		Log:    log,
	}
}

// ownership says which shards this worker learns: those the Kafka
// consumer group gives it (kept in p.group), or the partitions of a
// stream that source.partitions names (nil: every one).
func (p *pipeline) ownership(cfg config.Config, log *zap.Logger) (func() []string, error) {
	if cfg.Source.Kind == config.KindKafka {
		// The group hands each worker its partitions; a partition no
		// member holds waits, and two holding one learn it twice to the
		// same bits.
		kc, err := p.brokers.kafkaConfig()
		if err != nil {
			return nil, err
		}
		group, err := kafkaio.NewGroupWith(kc, cfg.KafkaGroup(), cfg.Source.Topics, kafkaio.SessionOptions(cfg.Kafka.SessionTimeout), log)
		if err != nil {
			return nil, fmt.Errorf("source.group: %w", err)
		}
		p.group = group
		return group.Owned, nil
	}
	// A partitioned stream's partitions are assigned statically.
	owned, err := cfg.OwnedPartitions(config.Hostname())
	if err != nil || owned == nil {
		return nil, err
	}
	names := make([]string, len(owned))
	for i, k := range owned {
		names[i] = fmt.Sprintf("jetstream:%s#%d", cfg.Source.Stream, k)
	}
	return func() []string { return names }, nil
}

// partitions learn p's shards in partition scope: one model per shard,
// each continuing from its own chain of generations under
// <model>/partition/<segment>/ in the store (docs/scale-out.md,
// section 6).
func (p *pipeline) partitions(ctx context.Context, cfg config.Config, metrics *consumer.Metrics, log *zap.Logger) (*consumer.Partitions, error) {
	pcfg := consumer.PartitionsConfig{
		Worker: p.config,
		Shards: p.shards,
		Start:  cfg.Source.Start,
		Open: func(ctx context.Context, shard string) (*learner.Model, map[string]int64, consumer.Snapshotter, error) {
			var chain *snapshot.Store
			if p.store != nil {
				var err error
				if chain, err = p.store.PartitionChain(cfg.Model.Name, shard); err != nil {
					return nil, nil, nil, err
				}
			}
			r, err := snapshot.Resume(ctx, chain, cfg.Model.Name, cfg.Model.Learner, resumeOptions(cfg, log.With(zap.String("shard", shard))))
			if err != nil {
				return nil, nil, nil, fmt.Errorf("shard %s: %w", shard, err)
			}
			var snaps consumer.Snapshotter
			if r.Snapshotter != nil {
				snaps = workerSnapshots{r.Snapshotter}
			}
			return r.Model, r.Positions, snaps, nil
		},
	}
	var err error
	if pcfg.Owned, err = p.ownership(cfg, log); err != nil {
		return nil, err
	}
	if p.group != nil {
		pcfg.Changed = p.group.Changed
	}
	return consumer.NewPartitions(pcfg, metrics, log), nil
}

// loadShardGeneration reads the stored generations of the shards' chains
// for requests that name one; nil without a store.
func (p *pipeline) loadShardGeneration(model string) serve.LoadShardGeneration {
	if p.store == nil {
		return nil
	}
	return func(ctx context.Context, shard string, gen uint64) (*learner.State, error) {
		chain, err := p.store.PartitionChain(model, shard)
		if err != nil {
			return nil, fmt.Errorf("%w: %w", serve.ErrNotFound, err)
		}
		snap, err := chain.Load(ctx, model, gen)
		if errors.Is(err, snapshot.ErrNotFound) {
			return nil, fmt.Errorf("%w: %w", serve.ErrNotFound, err)
		}
		if err != nil {
			return nil, err
		}
		return snap.State, nil
	}
}

// loadGeneration reads stored generations of model for requests that name
// one; nil without a store.
func (p *pipeline) loadGeneration(model string) serve.LoadGeneration {
	if p.store == nil {
		return nil
	}
	return func(ctx context.Context, gen uint64) (*learner.State, error) {
		snap, err := p.store.Load(ctx, model, gen)
		if errors.Is(err, snapshot.ErrNotFound) {
			return nil, fmt.Errorf("%w: %w", serve.ErrNotFound, err)
		}
		if err != nil {
			return nil, err
		}
		return snap.State, nil
	}
}

// service starts the NATS micro service of srv on the pipeline's NATS
// connection.
func (p *pipeline) service(srv *serve.Server, cfg config.Config) (micro.Service, error) {
	nc, err := p.brokers.natsConn()
	if err != nil {
		return nil, fmt.Errorf("serve.nats: %w", err)
	}
	return srv.AddService(nc, serve.ServiceOptions{
		Subject:    cfg.ServeSubject(),
		QueueGroup: cfg.Serve.QueueGroup,
		Version:    semver(version),
	})
}
