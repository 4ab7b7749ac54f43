package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/hyperplane-ml/hyperplane/config"
	"github.com/hyperplane-ml/hyperplane/consumer"
	"github.com/hyperplane-ml/hyperplane/epochlog"
	"github.com/hyperplane-ml/hyperplane/internal/redact"
	"github.com/hyperplane-ml/hyperplane/snapshot"
	"github.com/hyperplane-ml/hyperplane/wire"
)

// runReplay rebuilds a model from a range of the source: a new model,
// trained from --from up to --to, which it leaves out, written to --out if
// given (else kept in memory until the summary is printed). The live model's
// snapshots are never written, and events are published only with
// --publish. A model learned in epochs is rebuilt by following its epoch
// log in snapshot.url (see replayEpochs), which is read and never
// written.
// noCoreLog is why replay and backtest refuse a core NATS source.
const noCoreLog = "nats: core NATS keeps no messages, so there is no log to read (a Kafka topic or a JetStream stream has one)"

func runReplay(ctx context.Context, e *env, args []string) error {
	from := wire.Start{Kind: wire.StartEarliest}
	to := wire.Start{Kind: wire.StartLatest}
	var out string
	var publish bool
	var fromGeneration uint64
	fs := newFlagSet("replay", "--config FILE [--from START] [--to END] [--from-generation N] [--out URL] [--publish] [--key value ...]", e)
	fs.TextVar(&from, "from", from, "where to begin, `START`: earliest, offset:N or time:RFC3339")
	fs.TextVar(&to, "to", to, "where to end, `END`: latest (until the source has nothing more) or offset:N, exclusive: the replay stops before offset N (of each Kafka partition; a JetStream stream sequence) and leaves it out")
	fs.StringVar(&out, "out", "", "snapshot store URL for the rebuilt model (default: none, the model is kept in memory for the summary only)")
	fs.Uint64Var(&fromGeneration, "from-generation", 0, "a model learned in epochs only: begin from its live generation `N` rather than from the start of its epoch log (the first generation written by upgraded workers, say)")
	fs.BoolVar(&publish, "publish", false, "publish the events as the live worker would (the live events, byte for byte, only from the live model's start and with its settings: docs/commands.md, replay)")
	cfg, err := commandConfig(e, fs, args)
	if err != nil {
		return ignoreHelp(err)
	}
	if from.Kind == wire.StartLatest {
		return usagef("-from: latest would replay nothing (want earliest, offset:N or time:RFC3339)")
	}
	if cfg.Source.Kind == config.KindNATS {
		return usagef("source.kind: %s", noCoreLog)
	}
	end, err := endOffset(from, to)
	if err != nil {
		return err
	}
	live := cfg.Snapshot.URL
	cfg.Source.Start = from
	if !publish {
		cfg.Outputs = config.Outputs{Publish: wire.PublishNone, Format: cfg.Outputs.Format}
	}
	cfg.Snapshot = config.Default().Snapshot
	cfg.Snapshot.URL = out
	if out == "" {
		// The rebuilt model is meant to go when the replay ends: a store
		// in memory keeps the worker from warning that it will.
		cfg.Snapshot.URL = "mem://"
	}
	cfg.HTTP.Addr = ""
	if err := cfg.Validate(); err != nil {
		if err := configErr(err, map[string]string{"source.start": "-from", "snapshot.url": "-out"}); !strings.HasPrefix(err.Error(), "config: ") {
			return err
		}
		return invalidConfig(e, args, err)
	}
	log := newLogger(config.Log{Level: config.LevelWarn, Format: cfg.Log.Format}, e.stderr)
	if out != "" {
		if err := refuseHeldModel(ctx, out, cfg.Model.Name); err != nil {
			return err
		}
	}

	if log, err := epochLog(ctx, cfg, live); err != nil || log != nil {
		if err != nil {
			return err
		}
		defer log.Close()
		if from.Kind != wire.StartEarliest || to.Kind != wire.StartLatest {
			return usagef("-from, -to: the model is learned in epochs, and replay follows its epoch log in %s from its start: leave them out", live)
		}
		return replayEpochs(ctx, e, cfg, log, fromGeneration)
	}
	if fromGeneration != 0 {
		return usagef("-from-generation: model %s has no epoch log in %s: only a model learned in epochs replays from a generation (use -from with the generation's positions)", cfg.Model.Name, live)
	}
	if cfg.Model.Scope == config.ScopePartition && (cfg.Source.Kind == config.KindKafka || cfg.Source.StreamPartitions > 0) {
		return replayPartitions(ctx, e, cfg, end, live)
	}
	if err := notInEpochs(ctx, cfg, log); err != nil {
		return err
	}
	// Only the final snapshot: nothing periodic.
	once := cfg
	once.Snapshot.Every, once.Snapshot.Interval = 0, 0
	p, err := openPipeline(ctx, once, log, pipelineUse{})
	if err != nil {
		return err
	}
	defer p.close()
	closeLive, err := followPromotions(ctx, p, cfg, live)
	if err != nil {
		return err
	}
	defer closeLive()
	if p.source == nil {
		return fmt.Errorf("replay: stream %s is partitioned and learned in epochs: replay follows its epoch log, in snapshot.url, which holds none for model %s", cfg.Source.Stream, cfg.Model.Name)
	}
	// The worker joins labels after its examples' range is read: the
	// range idles rather than stop it.
	bounded := &consumer.Range{Source: p.source, End: rangeEnd(end), Idle: true, Drain: true}
	worker, err := p.Worker(ctx, bounded, nil)
	if err != nil {
		return err
	}

	bar := newProgress(e.stderr, 0, nil)
	start := time.Now()
	// p.labelsSource is nil without labels.
	if err := consumer.ReplayRange(ctx, worker, bounded, p.labelsSource, 200*time.Millisecond, func() {
		m := worker.Metrics()
		bar.show(fmt.Sprintf("%d examples  %.0f/s  mistakes %d  rolling accuracy %.4f", m.Examples, float64(m.Examples)/time.Since(start).Seconds(), m.Mistakes, m.RollingAccuracy))
	}); err != nil {
		bar.end()
		return fmt.Errorf("replay: %w", err)
	}
	bar.done()
	m := worker.Model().Metrics()
	toText := to.String()
	if end >= 0 {
		toText += " (exclusive)"
	}
	fmt.Fprintf(e.stdout, `{"examples":%d,"labeled":%d,"mistakes":%d,"accuracy":%v,"updates":%d,"seconds":%v,"positions":%s,"from":%q,"to":%q,"state_sha256":"%x"}`+"\n",
		m.Examples, m.Labeled, m.Mistakes, m.Accuracy, m.Updates, time.Since(start).Seconds(), positionsJSON(worker.Positions()), from.String(), toText,
		worker.Model().State().Digest())
	return nil
}

// refuseHeldModel is a usage error when the store at out already holds
// generations of model: a replay writes a new model, and a worker over
// that store would resume the newest of them instead of learning the
// range. The store is asked itself, so a URL with a query (create_dir=1,
// prefix, an S3 endpoint) is read as the worker reads it.
func refuseHeldModel(ctx context.Context, out, model string) error {
	store, err := snapshot.OpenStore(ctx, out)
	if err != nil {
		return fmt.Errorf("replay: -out: %w (%s)", err, storeHint)
	}
	defer store.Close()
	gens, err := store.Generations(ctx, model)
	if err != nil {
		return fmt.Errorf("replay: -out: %w", err)
	}
	if len(gens) > 0 {
		return usagef("-out: %s already holds model %s; replay writes a new model, so give another store or model.name", redact.URLs(out), model)
	}
	return nil
}

// followPromotions has the workers of replay p make again the promotions
// the live model's newest generation (of each shard's chain in partition
// scope) records in its history, so that the replayed model is the live
// one. Without challengers or a live store there are none. The caller
// calls close once p is done.
func followPromotions(ctx context.Context, p *pipeline, cfg config.Config, live string) (close func(), err error) {
	if live == "" || len(cfg.Model.Challengers) == 0 {
		return func() {}, nil
	}
	store, err := snapshot.OpenStore(ctx, live)
	if err != nil {
		return nil, fmt.Errorf("snapshot.url: %w", err)
	}
	p.SetReplayed(store.Promotions)
	return func() { store.Close() }, nil //nolint:errcheck // it only read
}

// configErr is the usage error of err, the configuration's, for a
// command that set some keys from flags of its own (replay's -from is
// source.start): an error about such a key names the flag typed, not a
// key the configuration may not hold.
func configErr(err error, flags map[string]string) error {
	var fe *config.FieldError
	if errors.As(err, &fe) {
		if flag, ok := flags[fe.Field]; ok {
			return usagef("%s: %s", flag, fe.Problem)
		}
	}
	return &usageError{msg: "config: " + err.Error()}
}

// endOffset is the offset -to ends before, exclusive: -1 for latest, the
// end of what the broker holds. A -to at or before an offset -from is a
// usage error: the range would be empty, and the command would report
// nothing learned as if the log held nothing there.
func endOffset(from, to wire.Start) (int64, error) {
	switch to.Kind {
	case wire.StartLatest:
		return -1, nil
	case wire.StartOffset:
		if from.Kind == wire.StartOffset && to.Offset <= from.Offset {
			return 0, usagef("-to: %s is not after -from's %s: the range is empty (-to is exclusive)", to, from)
		}
		return to.Offset, nil
	}
	return 0, usagef("-to: want latest or offset:N, got %q", to)
}

// rangeEnd is the end of a range that stops before offset end of each
// partition (nil for -1: the end of what the broker holds).
func rangeEnd(end int64) func(m *consumer.Message) (in, last bool) {
	if end < 0 {
		return nil
	}
	return consumer.OffsetBefore(end)
}

func positionsJSON(p map[string]int64) string {
	var b strings.Builder
	b.WriteByte('{')
	first := true
	for k, v := range p {
		if !first {
			b.WriteByte(',')
		}
		first = false
		fmt.Fprintf(&b, "%q:%d", k, v)
	}
	b.WriteByte('}')
	return b.String()
}

// epochLog opens the live epoch log of a Kafka source of several
// partitions whose model is learned in epochs; nil when there is no such
// log. Closing it closes its store.
func epochLog(ctx context.Context, cfg config.Config, live string) (*epochlog.Log, error) {
	partitioned := cfg.Source.Kind == config.KindJetStream && cfg.Source.StreamPartitions > 0
	if live == "" || (cfg.Source.Kind != config.KindKafka && !partitioned) {
		return nil, nil
	}
	store, err := snapshot.OpenStore(ctx, live)
	if err != nil {
		return nil, fmt.Errorf("snapshot.url: %w", err)
	}
	log := epochlog.New(store)
	epochs, err := log.Epochs(ctx, cfg.Model.Name)
	if err != nil || len(epochs) == 0 {
		store.Close() //nolint:errcheck // not used
		return nil, err
	}
	return log, nil
}

// replayEpochs learns the epochs the live log records into the store of
// --out (or memory), checking each mixed model against the live
// generation of its epoch where there is one (consumer.Follow). It begins
// from live generation from, or where the log begins when from is 0.
func replayEpochs(ctx context.Context, e *env, cfg config.Config, live *epochlog.Log, from uint64) error {
	log := newLogger(config.Log{Level: config.LevelWarn, Format: cfg.Log.Format}, e.stderr)
	model := cfg.Model.Name
	var start *snapshot.Snapshot
	var err error
	if from == 0 {
		start, err = consumer.FollowStart(ctx, live, model)
	} else if start, err = live.Load(ctx, model, from); errors.Is(err, snapshot.ErrNotFound) {
		gens, err := live.Generations(ctx, model)
		if err != nil {
			return err
		}
		held := "none"
		if len(gens) > 0 {
			held = "generations " + consumer.JoinEpochs(gens, ", ")
		}
		return usagef("-from-generation: the store holds no generation %d of %s: it holds %s", from, model, held)
	}
	if err != nil {
		return err
	}
	p, err := openPipeline(ctx, cfg, log, pipelineUse{Epochs: true})
	if err != nil {
		return err
	}
	defer p.close()
	if p.shards == nil || p.shardCount < 2 {
		return fmt.Errorf("replay: the source has one partition, but the store holds an epoch log for %s", model)
	}
	begin := time.Now()
	f, err := p.Follow(ctx, live, epochlog.New(p.store), start)
	if err != nil {
		return err
	}
	secs := time.Since(begin).Seconds()
	gens, err := live.Generations(ctx, model)
	if err != nil {
		return err
	}
	mt := f.Model.Metrics()
	var wentOn []uint64
	for _, g := range f.Gaps {
		wentOn = append(wentOn, g.To)
	}
	fmt.Fprintf(e.stdout, `{"examples":%d,"labeled":%d,"mistakes":%d,"accuracy":%v,"updates":%d,"seconds":%v,"positions":%s,"epoch":%d,"began_from_generation":%d,"went_on_from_generations":[%s],"epochs_replayed":%d,"generations_checked":%d,"epochs_checked":[%s],"not_checked":%q,"state_sha256":"%x"}`+"\n",
		mt.Examples, mt.Labeled, mt.Mistakes, mt.Accuracy, mt.Updates, secs, positionsJSON(f.Positions), f.Mixed,
		f.Began, consumer.JoinEpochs(wentOn, ","), len(f.Checked)+len(f.Unchecked)+len(f.Damaged), len(f.Checked), consumer.JoinEpochs(f.Checked, ","), f.NotChecked(gens), f.Model.State().Digest())
	return nil
}

// notInEpochs refuses a Kafka source of several partitions in global
// scope: the live worker learns it in epochs, which replay follows in the
// epoch log, and snapshot.url holds none. Read as one source, its
// partitions would merge in an order of the moment, not the model's.
func notInEpochs(ctx context.Context, cfg config.Config, log *zap.Logger) error {
	if cfg.Source.Kind != config.KindKafka {
		return nil
	}
	n, err := kafkaPartitions(ctx, cfg, log)
	if err != nil {
		return err
	}
	if n > 1 {
		return usagef("source.topics: %s: %d partitions, learned in epochs: replay follows their epoch log, in snapshot.url, which holds none for model %s", strings.Join(cfg.Source.Topics, ", "), n, cfg.Model.Name)
	}
	return nil
}
