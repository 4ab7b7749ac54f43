package consumer

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"go.uber.org/zap"
	"gocloud.dev/blob/memblob"

	"github.com/hyperplane-ml/hyperplane/consumer/retry"
	"github.com/hyperplane-ml/hyperplane/epochlog"
	"github.com/hyperplane-ml/hyperplane/learner"
	"github.com/hyperplane-ml/hyperplane/shardid"
	"github.com/hyperplane-ml/hyperplane/snapshot"
)

// Options are what Open builds a Pipeline from: the model, what it is
// learned from, and how the ways of learning it are configured. The
// caller translates its configuration into them; every func is called
// when the engine needs it.
type Options struct {
	// Model names the model; Learner is its configuration, which a
	// stored generation must match.
	Model   string
	Learner learner.Config
	// Store holds the model's generations; nil for none: the model
	// starts new each time, and epochs keep their log in memory.
	Store *snapshot.Store
	// Resume configures the resume of the model and of each chain of
	// partition scope, whose logger is Log with the shard's name.
	Resume snapshot.ResumeOptions
	// WaitForStore makes Open wait for a store that does not answer the
	// resume (snapshot.ErrUnavailable: down, throttling, cut off), trying
	// again with backoff and a warning each time, as a worker does at
	// start-up (docs/operations.md, Outages). A store that refuses the
	// request (snapshot.Refused: credentials, a bucket that does not
	// exist) and any other error still fail Open at once. Without it, a
	// store that does not answer fails Open too: a command that reads
	// the store once.
	WaitForStore bool

	// Recheck, if not nil, checks while a worker of one shard runs that
	// it can go on (EngineConfig.Recheck).
	Recheck func(ctx context.Context) error

	// Connect opens what the model is learned from, called once the
	// model is resumed, so that a store that cannot be read, or holds an
	// incompatible model, is reported before any broker is dialled.
	Connect func(ctx context.Context) (Connection, error)
	// OpenSource opens the source of one stream at positions (by shard):
	// what the worker of a source of one shard reads. What it opens the
	// caller closes, after the Pipeline.
	OpenSource func(ctx context.Context, positions map[string]int64) (Source, error)
	// PartitionScope learns one model per shard (docs/scale-out.md,
	// section 6).
	PartitionScope bool
	// Mixing is the epochs' configuration apart from what Open fills
	// (Worker, Shards, Log, Damaged and ownership): the settings of
	// mixing, their Writer and ConfigDigest, Start and the snapshots'
	// cadence. Its Interval is also how often a model learned from one
	// shard looks for more.
	Mixing EpochConfig
	// Written are Mixing as an older epoch log of the model may have been
	// written, each with its own ConfigDigest: by another rule than
	// Mixing's (a log written before the rule was configurable mixed by
	// the mean). A log whose boundaries name the ConfigDigest of one goes
	// on with it, whatever Mixing says, since its history is that rule's.
	// nil means every log is Mixing's.
	Written []EpochConfig
	// Ownership says which shards this worker learns, called once when
	// epochs or partition scope start.
	Ownership func() (Ownership, error)
	// Labels, if set, joins labels that come later to the examples of a
	// source of one shard, or of each shard in partition scope: it builds
	// the join's configuration, its labels' source opened at the model's
	// positions (by shard). shard is the zero ID for the source of one shard; in
	// partition scope it is the shard whose examples the labels join,
	// and the labels' source reads the labels' partition co-partitioned
	// with it, which the marks go to too (docs/labels.md, section 9).
	// Open sets its State to the join the model's generation recorded.
	// nil means no labels.
	Labels func(ctx context.Context, shard shardid.ID, positions map[string]int64) (*LabelsConfig, error)
	// EpochLabels, if set with Labels, joins the labels to the shards of
	// a source learned in epochs (docs/labels.md, section 11): it builds
	// the join's configuration, its labels' partitions and outputs. Open
	// sets its State to the joins the model's generation recorded. nil
	// refuses labels over several shards in global scope.
	EpochLabels func(ctx context.Context) (*EpochLabels, error)
	// Challengers are learned beside the model, by the worker of a
	// source of one shard and by each shard's in partition scope
	// (learner.Model.SetChallengers): one the resumed model has under the
	// same name and configuration goes on, any other starts new. Epochs
	// mix them with the model (docs/scale-out.md, section 3.10).
	Challengers []learner.ChallengerConfig
	Log         *zap.Logger
}

// Connection is what Options.Connect opens.
type Connection struct {
	// Worker configures every worker; Open sets its Snapshots to the
	// resumed model's snapshotter.
	Worker WorkerConfig
	// Shards are the source's partitions, learned in epochs or in
	// partition scope; nil for a source read as one stream.
	Shards Shards
	// ShardCount is the number of Shards.
	ShardCount int
}

// Ownership is which shards this worker learns and how it hears of a
// change; the funcs are EpochConfig's (kafka.Group has them all). A nil
// Owned means every shard; a nil func, what EpochConfig says of it.
type Ownership struct {
	Owned   func() []shardid.ID
	Commit  func(ctx context.Context, positions map[string]int64) error
	Changed func() <-chan struct{}
	Settled func() bool
	Alone   func() bool
	Failure func() error
}

// Pipeline is a model resumed from its store, with what it is learned
// from: Engine learns it as the source's shards say, and Worker learns
// a source given. Close releases what it holds.
type Pipeline struct {
	opts    Options
	conn    Connection
	resumed snapshot.Resumed
	// memStore is the epoch log's store without Options.Store.
	memStore *snapshot.Store
	// source is what the worker of one shard reads, opened by Engine.
	source Source
	// lag is closed when the lag reporter of the source of one stream
	// has stopped; nil when none runs.
	lag chan struct{}
	// promotions, when set, are the promotions a replay makes again
	// (SetReplayed).
	promotions func(ctx context.Context, model string, shard shardid.ID) ([]learner.Promotion, error)
	// setUp is why what the engine builds is not ready yet, while it is
	// built: the store refusing the epochs' start-up probe.
	setUp readiness
}

// SetReplayed makes the workers of a replay make again the promotions
// that promotions returns for the model and their shard (the zero ID for
// a source of one shard): the history the live model records
// (WorkerConfig.Replayed), so that the replayed model is the live one
// (docs/compare.md, "Promotion"). The live store's
// snapshot.Store.Promotions is such a func.
func (p *Pipeline) SetReplayed(promotions func(ctx context.Context, model string, shard shardid.ID) ([]learner.Promotion, error)) {
	p.promotions = promotions
}

// replayed are the promotions shard's worker makes again; nil but in a
// replay.
func (p *Pipeline) replayed(ctx context.Context, shard shardid.ID) ([]learner.Promotion, error) {
	if p.promotions == nil {
		return nil, nil
	}
	ps, err := p.promotions(ctx, p.opts.Model, shard)
	if err != nil {
		return nil, fmt.Errorf("the live model's promotions: %w", err)
	}
	return ps, nil
}

// Open resumes the model of opts from its newest generation, then
// connects to what it is learned from (Options.Connect).
func Open(ctx context.Context, opts Options) (_ *Pipeline, err error) {
	p := &Pipeline{opts: opts}
	if err := p.start(ctx); err != nil {
		return nil, err
	}
	if p.conn, err = opts.Connect(ctx); err != nil {
		return nil, err
	}
	if p.resumed.Snapshotter != nil {
		p.conn.Worker.Snapshots = p.singleSnapshots()
	}
	return p, nil
}

// start resumes the model and checks the store's scope, again with
// backoff while the store does not answer when Options.WaitForStore is
// set. A ctx done meanwhile ends the wait at once with its error.
func (p *Pipeline) start(ctx context.Context) error {
	op := func(ctx context.Context) error {
		if err := p.resume(ctx); err != nil {
			return err
		}
		return p.checkScope(ctx)
	}
	if !p.opts.WaitForStore {
		return op(ctx)
	}
	bo := retry.Backoff{Min: time.Second, Max: retryMaxDelay}
	err := retry.Do(ctx, &bo, func(ctx context.Context) error {
		err := op(ctx)
		if err != nil && (!errors.Is(err, snapshot.ErrUnavailable) || snapshot.Refused(err)) {
			return retry.Permanent(err)
		}
		return err
	}, func(err error) {
		p.opts.Log.Warn("snapshot.url: the store does not answer at start-up; waiting for it", zap.Error(err))
	})
	if err != nil && ctx.Err() != nil {
		return fmt.Errorf("stopped while waiting for snapshot.url: %w", ctx.Err())
	}
	return err
}

// Resumed is the model as resumed: at Open, or later when epochs go on
// from a newer generation.
func (p *Pipeline) Resumed() snapshot.Resumed { return p.resumed }

// resume resumes the model from the store's newest generation: at
// start-up, and again when the model goes on from a generation another
// worker, or this one's worker of one partition, wrote since.
func (p *Pipeline) resume(ctx context.Context) error {
	ropts := p.opts.Resume
	ropts.Challengers = p.opts.Challengers
	if p.opts.PartitionScope && ropts.Log != nil {
		// The model's own generations are none in partition scope
		// (checkScope): each partition's chain says whether it resumes
		// or begins, and "a new model" here would say it of them all.
		ropts.Log = ropts.Log.WithOptions(zap.IncreaseLevel(zap.WarnLevel))
	}
	r, err := snapshot.Resume(ctx, p.opts.Store, p.opts.Model, p.opts.Learner, ropts)
	if err != nil {
		return err
	}
	if err := p.challenge(r, p.opts.Log); err != nil {
		return err
	}
	p.resumed = r
	return nil
}

// checkScope refuses a store that holds the model in the other scope
// than Options.PartitionScope: generations of the model itself (global
// scope) for a worker in partition scope, or, with none of those, chains
// of its partitions (partition scope, docs/scale-out.md, section 6) for
// one in global scope. Either worker would otherwise not see the stored model, learn
// every example again from source.start to another model, and publish
// its events again under the same event ids with other contents.
func (p *Pipeline) checkScope(ctx context.Context) error {
	store, model := p.opts.Store, p.opts.Model
	if store == nil {
		return nil
	}
	if p.opts.PartitionScope {
		gens, err := store.Generations(ctx, model)
		if err != nil {
			return unanswered(err)
		}
		if len(gens) > 0 {
			return fmt.Errorf("model.scope: the store holds generations %d to %d of model %s learned in global scope, and this worker learns it in partition scope, which would start a new model for each partition from source.start and publish every event again: set model.scope back to global, or give the model a new model.name",
				gens[0], gens[len(gens)-1], model)
		}
		return nil
	}
	if gens, err := store.Generations(ctx, model); err != nil || len(gens) > 0 {
		return unanswered(err)
	}
	shards, err := store.PartitionShards(ctx, model)
	if err != nil {
		return unanswered(err)
	}
	if len(shards) > 0 {
		names := make([]string, len(shards))
		for i, s := range shards {
			names[i] = s.String()
		}
		return fmt.Errorf("model.scope: the store holds model %s learned in partition scope, one model for each of %s (under %s/partition/), and this worker learns it in global scope, which would not continue them and would learn every example again: set model.scope: partition, or give the model a new model.name",
			model, strings.Join(names, ", "), model)
	}
	return nil
}

// unanswered marks err, a store's failure to read, as Resume marks its
// own (snapshot.ErrUnavailable); nil stays nil.
func unanswered(err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("snapshot.url: %w: %w", snapshot.ErrUnavailable, err)
}

// challenge gives the model r resumed its challengers: Options.Challengers,
// or those the model's history of promotions makes of them
// (snapshot.Resumed.Challengers).
func (p *Pipeline) challenge(r snapshot.Resumed, log *zap.Logger) error {
	model := r.Model
	if len(r.Challengers) == 0 && len(model.Challengers()) == 0 {
		return nil
	}
	started, dropped, err := model.SetChallengers(r.Challengers)
	if err != nil {
		return fmt.Errorf("model.challengers: %w", err)
	}
	if len(started) > 0 {
		log.Info("challengers start new", zap.Strings("challengers", started))
	}
	if len(dropped) > 0 {
		log.Info("challengers no longer configured are dropped", zap.Strings("challengers", dropped))
	}
	return nil
}

// mixableChallengers refuses the challengers of m that epochs mixing by
// rule cannot learn (docs/scale-out.md, section 3.10): one the rule
// cannot mix, and, with labels that come later, one that hashes
// otherwise than the model (the join keeps an example as the model
// decoded it).
func (p *Pipeline) mixableChallengers(rule learner.MixRule, m *learner.Model) error {
	if rule == "" {
		rule = learner.MixMean
	}
	mc := m.Config()
	for i, c := range m.Challengers() {
		cc := c.Model.Config()
		if err := rule.Mixes(cc.Algorithm); err != nil {
			return fmt.Errorf("model.challengers[%d].algorithm: challenger %s is mixed in epochs like the model: %w", i, c.Name, err)
		}
		if p.opts.EpochLabels != nil && (cc.HashBits != mc.HashBits || cc.HashSeed != mc.HashSeed) {
			return fmt.Errorf("model.challengers[%d]: %s hashes otherwise than the model (hash_bits %d, hash_seed %d against %d, %d), and with labels that come later the join keeps each example as the model decoded it; give it the model's hashing, or compare it with hyperplane backtest",
				i, c.Name, cc.HashBits, cc.HashSeed, mc.HashBits, mc.HashSeed)
		}
	}
	return nil
}

// Close waits for the lag reporter of the source of one stream, if one
// runs, and releases the epoch log kept in memory. It closes none of
// the sources: their opener does.
func (p *Pipeline) Close() {
	p.waitLag()
	if p.memStore != nil {
		p.memStore.Close() //nolint:errcheck // memory
	}
}

// waitLag waits for the lag reporter of the source of one stream, which
// ends with its worker, if one runs.
func (p *Pipeline) waitLag() {
	if p.lag != nil {
		<-p.lag
		p.lag = nil
	}
}

// joinState is the state of the join of labels that come later that the
// resumed generation recorded; nil for none.
func (p *Pipeline) joinState() (*JoinState, error) {
	snap := p.resumed.Snapshot
	if snap == nil || snap.Join == nil {
		return nil, nil
	}
	st, err := DecodeJoinState(snap.Join)
	if err == nil {
		err = st.check(p.resumed.Model.Config())
	}
	if err != nil {
		return nil, fmt.Errorf("generation %d: %w", snap.Generation, err)
	}
	return st, nil
}

// HeadPositions are where a worker reads the examples from: the model's
// positions, but with labels, the examples' from where the join's head
// had read them (docs/labels.md, section 6).
func (p *Pipeline) HeadPositions() (map[string]int64, error) {
	if p.opts.Labels == nil {
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

// Worker is a worker of the resumed model that reads src: a source
// opened at HeadPositions, or one wrapped around it. metrics may be nil.
// With labels, it joins them to the examples.
func (p *Pipeline) Worker(ctx context.Context, src Source, metrics *Metrics) (*Worker, error) {
	wcfg := p.conn.Worker
	if p.opts.Labels != nil {
		st, err := p.joinState()
		if err != nil {
			return nil, err
		}
		if wcfg.Labels, err = p.opts.Labels(ctx, shardid.ID{}, p.resumed.Positions); err != nil {
			return nil, err
		}
		wcfg.Labels.State = st
	}
	var err error
	if wcfg.Replayed, err = p.replayed(ctx, shardid.ID{}); err != nil {
		return nil, err
	}
	return NewWorker(wcfg, src, p.resumed.Model, p.resumed.Positions, metrics, p.opts.Log), nil
}

// Engine is the engine that learns the pipeline's source: one worker for
// a source of one shard, epochs for several, a chain per shard in
// partition scope. metrics may be nil.
func (p *Pipeline) Engine(metrics *Metrics) *Engine {
	log := p.opts.Log
	if metrics != nil && p.resumed.Model != nil && !p.opts.PartitionScope {
		// The gauges say the resumed model's version, accuracy and
		// positions from the moment they are served, not zeros until
		// its worker or epochs begin.
		metrics.restored(p.resumed.Model.Metrics(), p.resumed.Positions)
	}
	// A source known to have several shards (a partitioned stream counts
	// those that hold no message yet, which its Ends leaves out) is
	// learned in epochs from the start. A join over one partition does
	// not go on in epochs when the source gains partitions; and the
	// worker of one shard reads a partitioned stream's first partition
	// alone, under the stream's name, a position the epochs would not
	// carry over to that partition's shard, which they would learn
	// again from source.start.
	knownShards := p.conn.ShardCount > 1 && (p.opts.Labels == nil || p.opts.EpochLabels != nil)
	return NewEngine(EngineConfig{
		PartitionScope: p.opts.PartitionScope,
		Shards:         p.conn.Shards,
		Epochs:         (p.resumed.Snapshot != nil && p.resumed.Snapshot.Epoch > 0) || knownShards,
		GrowthCheck:    p.opts.Mixing.Interval,
		Recheck:        p.opts.Recheck,
		SetUp:          p.setUp.reasons,
		Single: func(ctx context.Context, fenced *Worker) (*Worker, error) {
			if fenced != nil {
				if p.opts.Labels != nil {
					return nil, fmt.Errorf("another worker wrote the next generation of model %s, whose labels are joined to a source of one partition: run one worker for it (docs/labels.md)", p.opts.Model)
				}
				if err := p.resumeAfter(ctx, fenced); err != nil {
					return nil, err
				}
				// The generation that fenced this worker may be of a model
				// that another worker took on in epochs (its source grew,
				// and this worker has not seen it yet): a model of an epoch
				// log is learned in epochs whatever the shards this worker
				// sees, never by one worker writing generations inside the
				// log.
				inLog, err := p.continuesLog(ctx)
				if err != nil {
					return nil, err
				}
				if inLog {
					return nil, errInEpochs
				}
				if p.resumed.Snapshotter != nil {
					p.conn.Worker.Snapshots = p.singleSnapshots()
				}
			}
			head, err := p.HeadPositions()
			if err != nil {
				return nil, err
			}
			src, err := p.opts.OpenSource(ctx, head)
			if err != nil {
				return nil, err
			}
			p.source = src
			if lr, ok := src.(LagReporter); ok {
				// It stops with the worker (ctx), and the pipeline waits
				// for it before the source closes.
				p.lag = make(chan struct{})
				go func() {
					defer close(p.lag)
					reportLag(ctx, lr, metrics)
				}()
			}
			return p.Worker(ctx, src, metrics)
		},
		Mixed: func(ctx context.Context, after *Worker) (*Epochs, error) {
			if p.opts.Labels != nil && p.opts.EpochLabels == nil {
				return nil, fmt.Errorf("labels.kind: labels are joined to a source of one partition; this one has %d (the join over several partitions, in epochs, is built for Kafka topics and partitioned JetStream streams: docs/labels.md, section 11; model.scope partition joins each partition with its co-partition of the labels' topic or stream, section 9)", max(p.conn.ShardCount, 2))
			}
			if p.opts.Labels != nil && after != nil {
				return nil, fmt.Errorf("labels.topics: the source of model %s gained partitions while labels were joined to its one: a join over one partition does not go on in epochs; give the model a new model.name to learn the partitions in epochs (docs/labels.md, section 11)", p.opts.Model)
			}
			if after != nil {
				if err := p.resumeAfter(ctx, after); err != nil {
					return nil, err
				}
			}
			if p.conn.Shards != nil {
				// The source may have gained partitions since it was
				// connected to: what is said of it counts them now.
				// Ends leaves out a JetStream partition that holds no
				// message yet: it counts, and partitions are only gained.
				if ends, err := p.conn.Shards.Ends(ctx); err == nil {
					p.conn.ShardCount = max(p.conn.ShardCount, len(ends))
				}
			}
			x, err := p.epochs(ctx, metrics)
			if err != nil {
				return nil, err
			}
			m := p.opts.Mixing
			log.Info("learning in epochs", zap.Int("partitions", p.conn.ShardCount), zap.Uint64("epoch", x.Mixed()+1),
				zap.Int("epoch_examples", int(m.EpochExamples)), zap.Int("growth", m.Growth),
				zap.Int("min_epoch_examples", int(x.minEpochExamples())),
				zap.Stringer("weights", m.Weights))
			return x, nil
		},
		Partitioned: func(ctx context.Context) (*Partitions, error) {
			x, err := p.partitions(metrics)
			if err != nil {
				return nil, err
			}
			log.Info("one model per partition", zap.Int("partitions", p.conn.ShardCount))
			return x, nil
		},
	}, log)
}

// continuesLog says whether the resumed model goes on in an epoch log:
// its generation was mixed in epochs, or the store's log holds epochs
// above it (a worker whose source grew went on in epochs from it).
func (p *Pipeline) continuesLog(ctx context.Context) (bool, error) {
	var generation uint64
	if s := p.resumed.Snapshot; s != nil {
		if s.Epoch > 0 {
			return true, nil
		}
		generation = s.Generation
	}
	if p.opts.Store == nil {
		return false, nil
	}
	_, above, err := epochAbove(ctx, epochlog.New(p.opts.Store), p.opts.Model, generation)
	return above, err
}

// epochAbove returns the newest epoch of model's log, and whether it is
// above generation g: a worker went on in epochs from g or a later one.
func epochAbove(ctx context.Context, log *epochlog.Log, model string, g uint64) (uint64, bool, error) {
	epochs, err := log.Epochs(ctx, model)
	if err != nil || len(epochs) == 0 {
		return 0, false, err
	}
	e := epochs[len(epochs)-1]
	return e, e > g, nil
}

// resumeAfter makes what the epochs continue the model that after, the
// worker of a source of one shard, stopped with: the store's newest
// generation, which it wrote last, or without a store its model, as
// epoch 0 at its positions.
func (p *Pipeline) resumeAfter(ctx context.Context, after *Worker) error {
	p.waitLag()
	if p.source != nil {
		p.source.Close() //nolint:errcheck // its worker has stopped
		p.source = nil
	}
	if p.opts.Store == nil {
		p.resumed = snapshot.Resumed{Model: after.Model(), Positions: after.Positions(),
			Snapshot: &snapshot.Snapshot{Model: p.opts.Model, Positions: after.Positions(), State: after.Model().State()}}
		return nil
	}
	return p.resume(ctx)
}

// singleSnapshots are the snapshots of the worker of a source of one
// shard in global scope: the resumed model's snapshotter, which writes
// no generation once the model's epoch log holds an epoch above the
// generation resumed.
func (p *Pipeline) singleSnapshots() Snapshotter {
	return singleSnapshots{workerSnapshots{p.resumed.Snapshotter}, epochlog.New(p.opts.Store), p.opts.Model, p.resumed.Generation}
}

// singleSnapshots refuse, as fenced, a generation of a model that another
// worker went on with in epochs (its source grew, and this worker has not
// seen it yet) from the generation the worker resumed or a later one:
// written, it would lie inside the epoch log, holding a model that no
// epoch mixed (docs/scale-out.md, section 7). The engine then reloads the
// store's newest generation and goes on in epochs.
type singleSnapshots struct {
	workerSnapshots
	log     *epochlog.Log
	model   string
	resumed uint64
}

func (s singleSnapshots) Snapshot(ctx context.Context, st *learner.State, positions map[string]int64, join []byte) error {
	e, above, err := epochAbove(ctx, s.log, s.model, s.resumed)
	if err != nil {
		return err
	}
	if above {
		return fmt.Errorf("%w: model %s goes on in epochs (the store's log holds epoch %d, above generation %d this worker resumed): %w",
			ErrFatal, s.model, e, s.resumed, snapshot.ErrFenced)
	}
	return s.workerSnapshots.Snapshot(ctx, st, positions, join)
}

// workerSnapshots hands the worker its snapshotter, marking the errors no
// retry mends (snapshot.Fatal) with ErrFatal, the worker's word for an
// error that stops it.
type workerSnapshots struct{ *snapshot.Snapshotter }

func (s workerSnapshots) Snapshot(ctx context.Context, st *learner.State, positions map[string]int64, join []byte) error {
	err := s.Snapshotter.Snapshot(ctx, st, positions, join)
	if snapshot.Fatal(err) {
		return fmt.Errorf("%w: %w", ErrFatal, err)
	}
	return err
}

// epochs are the epochs that learn the shards: the model continues from
// the store's newest generation (an older snapshot is epoch 0), with the
// log in the store, or in memory without one.
func (p *Pipeline) epochs(ctx context.Context, metrics *Metrics) (*Epochs, error) {
	log := p.opts.Log
	if p.opts.Learner.Algorithm == learner.Kernel {
		return nil, fmt.Errorf("model.learner.algorithm: a kernel model cannot be learned over %d partitions: its support set cannot be mixed; use a source of one partition", max(p.conn.ShardCount, 2))
	}
	store := p.opts.Store
	if store == nil {
		store = snapshot.NewStore(memblob.OpenBucket(nil), "")
		p.memStore = store
	}
	var damaged []uint64
	for tries := 0; ; tries++ {
		var newer bool
		var err error
		if damaged, newer, err = snapshot.DamagedAbove(ctx, store, p.opts.Model, p.opts.Learner, p.resumed.Generation); err != nil {
			return nil, err
		}
		if !newer || tries == 3 {
			break
		}
		// Another worker wrote a generation since this one resumed (a new
		// history's first, maybe): continue from it rather than cut
		// boundaries under it.
		if err := p.resume(ctx); err != nil {
			return nil, err
		}
	}
	elog := epochlog.New(store)
	snap := p.resumed.Snapshot
	ecfg, err := p.mixing(ctx, elog, snap)
	if err != nil {
		return nil, err
	}
	m := p.resumed.Model
	crule := ecfg.ChallengerRule
	if crule == "" {
		crule = ecfg.Rule
	}
	if err := p.mixableChallengers(crule, m); err != nil {
		return nil, err
	}
	var labels *EpochLabels
	if p.opts.Labels != nil && p.opts.EpochLabels != nil {
		if snap != nil && snap.Epoch == 0 && snap.Join != nil {
			return nil, fmt.Errorf("labels.topics: model %s joined its labels over one partition, and its source now has %d: a join over one partition does not go on in epochs; give the model a new model.name to learn the partitions in epochs (docs/labels.md, section 11)", p.opts.Model, p.conn.ShardCount)
		}
		l, err := p.opts.EpochLabels(ctx)
		if err != nil {
			return nil, err
		}
		if snap != nil {
			if l.State, err = DecodeJoins(snap.Joins); err != nil {
				return nil, fmt.Errorf("generation %d: %w", snap.Generation, err)
			}
		}
		// Another labels.window or labels.default changes the history
		// digest too: refuse it here, naming the field and both values,
		// before ContinueModel refuses the digest without naming them.
		shards := slices.SortedFunc(maps.Keys(l.State), shardid.Compare)
		for _, s := range shards {
			if err := l.State[s].checkSettings(l.Join, m.Config()); err != nil {
				return nil, fmt.Errorf("%w (generation %d, shard %s)", err, snap.Generation, s)
			}
			if err := l.State[s].check(m.Config()); err != nil {
				return nil, fmt.Errorf("generation %d, shard %s: %w", snap.Generation, s, err)
			}
		}
		labels = l
	}
	e, prev, positions, err := ContinueModel(snap, m, ecfg.ConfigDigest)
	if err != nil {
		return nil, err
	}
	// Two workers must never both create one boundary: a store that
	// ignores create-if-absent cannot hold the log. A store that refuses
	// writes for a while is waited for, as the epochs wait for it.
	if p.opts.Store != nil {
		bo := retry.Backoff{Min: 100 * time.Millisecond, Max: 5 * time.Second}
		err := retry.Do(ctx, &bo, func(ctx context.Context) error {
			err := elog.ProbeConditionalCreate(ctx, p.opts.Model, ecfg.Writer)
			if epochlog.Fatal(err) {
				return retry.Permanent(err)
			}
			return err
		}, func(err error) {
			log.Warn("the store refused the start-up probe of create-if-absent; retrying", zap.Error(err))
			p.setUp.fail(NotReadySnapshots, "the start-up probe of create-if-absent: "+err.Error())
			if metrics != nil {
				metrics.SnapshotErrors.Inc()
			}
		})
		p.setUp.ok(NotReadySnapshots)
		if err != nil {
			return nil, fmt.Errorf("snapshot.url: %w", err)
		}
	}
	ecfg.Worker = p.conn.Worker
	ecfg.Shards = p.conn.Shards
	ecfg.ReadyShards = p.conn.ShardCount
	ecfg.Log = elog
	ecfg.Labels = labels
	ecfg.Damaged = damaged
	ecfg.BaseDigest = BaseDigestOf(snap, m)
	ecfg.Requests = storeRequests(store, p.opts.Model)
	own, err := p.ownership()
	if err != nil {
		return nil, err
	}
	ecfg.Owned, ecfg.Commit, ecfg.Changed, ecfg.Settled, ecfg.Alone, ecfg.Failure = own.Owned, own.Commit, own.Changed, own.Settled, own.Alone, own.Failure
	return NewEpochs(ecfg, m, e, prev, positions, metrics, log), nil
}

// mixing is Options.Mixing as the model's epoch log elog was written:
// one of Options.Written when the log's boundaries name its digest.
// snap is the generation the epochs continue from (nil for none);
// without one that names its digest, the log's next boundary says
// (epochlog.Log.WrittenDigest), and without a boundary that says, the
// epochs begin the log, or a new history, by Mixing.
func (p *Pipeline) mixing(ctx context.Context, elog *epochlog.Log, snap *snapshot.Snapshot) (EpochConfig, error) {
	m := p.opts.Mixing
	if len(p.opts.Written) == 0 {
		return m, nil
	}
	digest, ok, err := elog.WrittenDigest(ctx, p.opts.Model, snap)
	if err != nil || !ok || digest == m.ConfigDigest {
		return m, err
	}
	for _, w := range p.opts.Written {
		if digest == w.ConfigDigest {
			p.opts.Log.Info("the epoch log was written mixing by another rule: it continues so (a new model.name mixes by model.mixing.rule)",
				zap.Stringer("written", w.Rule), zap.Stringer("rule", m.Rule))
			return w, nil
		}
	}
	return m, nil
}

// ownership is Options.Ownership's answer; every shard without one.
func (p *Pipeline) ownership() (Ownership, error) {
	if p.opts.Ownership == nil {
		return Ownership{}, nil
	}
	return p.opts.Ownership()
}

// partitions learn the shards in partition scope: one model per shard,
// each continuing from its own chain of generations under
// <model>/partition/<segment>/ in the store (docs/scale-out.md,
// section 6).
func (p *Pipeline) partitions(metrics *Metrics) (*Partitions, error) {
	log := p.opts.Log
	pcfg := PartitionsConfig{
		Worker: p.conn.Worker,
		Shards: p.conn.Shards,
		Start:  p.opts.Mixing.Start,
		Open: func(ctx context.Context, shard shardid.ID) (Chain, error) {
			var chain *snapshot.Store
			if p.opts.Store != nil {
				var err error
				if chain, err = p.opts.Store.PartitionChain(p.opts.Model, shard); err != nil {
					return Chain{}, err
				}
			}
			ropts := p.opts.Resume
			ropts.Log = log.With(zap.Stringer("shard", shard))
			ropts.Challengers = p.opts.Challengers
			r, err := snapshot.Resume(ctx, chain, p.opts.Model, p.opts.Learner, ropts)
			if err != nil {
				return Chain{}, fmt.Errorf("shard %s: %w", shard, err)
			}
			if err := p.challenge(r, ropts.Log); err != nil {
				return Chain{}, fmt.Errorf("shard %s: %w", shard, err)
			}
			c := Chain{Model: r.Model, Positions: r.Positions}
			if r.Snapshotter != nil {
				c.Snapshots = workerSnapshots{r.Snapshotter}
			}
			if p.opts.Labels != nil && r.Snapshot != nil && r.Snapshot.Join != nil {
				if c.Join, err = DecodeJoinState(r.Snapshot.Join); err == nil {
					err = c.Join.check(r.Model.Config())
				}
				if err != nil {
					return Chain{}, fmt.Errorf("shard %s: generation %d: %w", shard, r.Snapshot.Generation, err)
				}
			}
			return c, nil
		},
		Labels: p.opts.Labels,
	}
	own, err := p.ownership()
	if err != nil {
		return nil, err
	}
	pcfg.Owned, pcfg.Changed, pcfg.Settled, pcfg.Failure = own.Owned, own.Changed, own.Settled, own.Failure
	return NewPartitions(pcfg, metrics, log), nil
}
