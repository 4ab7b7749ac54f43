package consumer_test

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"
	"gocloud.dev/blob/memblob"

	"github.com/hyperplane-ml/hyperplane/consumer"
	"github.com/hyperplane-ml/hyperplane/consumer/memory"
	"github.com/hyperplane-ml/hyperplane/epochlog"
	"github.com/hyperplane-ml/hyperplane/internal/wait"
	"github.com/hyperplane-ml/hyperplane/learner"
	"github.com/hyperplane-ml/hyperplane/shardid"
	"github.com/hyperplane-ml/hyperplane/snapshot"
	"github.com/hyperplane-ml/hyperplane/wire"
)

// epochLog is a six-partition memory log holding n messages per
// partition, all written before any worker starts, so that every cut is
// min(from + E, end) and the history is a function of the data and E.
func epochLog(n int) *memory.Log {
	log := memory.NewLog("ex", 6)
	for p := range 6 {
		msgs, _ := messages(n + 7*p)
		log.Append(p, msgs...)
	}
	return log
}

func epochConfig(log *memory.Log, store *snapshot.Store, sink *memory.Sink, writer string) consumer.EpochConfig {
	return consumer.EpochConfig{
		Worker: consumer.WorkerConfig{
			Model:              "mixed",
			Predictions:        consumer.Destination{Sink: sink, Topic: "pred"},
			Misclassifications: consumer.Destination{Sink: sink, Topic: "mis"},
			DeadLetter:         consumer.Destination{Sink: sink, Topic: "dead"},
			Batch:              64,
		},
		Shards:        log,
		Log:           epochlog.New(store),
		Writer:        writer,
		ConfigDigest:  sha256.Sum256([]byte("history")),
		EpochExamples: 150,
		Interval:      20 * time.Millisecond,
		Weights:       learner.MixExamples,
		Start:         wire.Start{Kind: wire.StartEarliest},
		SnapshotEvery: 400,
		Keep:          1000,
	}
}

func epochLearner() learner.Config {
	cfg := learner.DefaultConfig()
	cfg.HashBits = 12
	return cfg
}

// continueEpochs returns the epochs that go on from snap (nil: a new
// model) as a resuming worker's do: the model Continue restores, of
// epochLearner's configuration, its base digest, and, with labels in
// cfg, the joins snap recorded.
func continueEpochs(t *testing.T, snap *snapshot.Snapshot, cfg consumer.EpochConfig, metrics *consumer.Metrics, log *zap.Logger) *consumer.Epochs {
	t.Helper()
	m, e, prev, pos, err := consumer.Continue(snap, epochLearner(), cfg.ConfigDigest)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Labels != nil && snap != nil {
		l := *cfg.Labels
		if l.State, err = consumer.DecodeJoins(snap.Joins); err != nil {
			t.Fatal(err)
		}
		cfg.Labels = &l
	}
	cfg.BaseDigest = consumer.BaseDigestOf(snap, m)
	return consumer.NewEpochs(cfg, m, e, prev, pos, metrics, log)
}

// startEpochs starts a worker continuing from the store's newest
// generation, owning the shards owned returns.
func startEpochs(t *testing.T, ctx context.Context, cfg consumer.EpochConfig, store *snapshot.Store) (*consumer.Epochs, <-chan error) {
	t.Helper()
	return startEpochsOf(t, ctx, cfg, store, epochLearner(), nil)
}

// startEpochsOf is startEpochs for a model of lc; challengers, if set,
// gives the model its challengers, resumed saying whether it continues a
// generation.
func startEpochsOf(t *testing.T, ctx context.Context, cfg consumer.EpochConfig, store *snapshot.Store, lc learner.Config,
	challengers func(m *learner.Model, resumed bool) error) (*consumer.Epochs, <-chan error) {
	t.Helper()
	snap, err := store.Latest(ctx, "mixed", nil)
	if errors.Is(err, snapshot.ErrNotFound) {
		snap, err = nil, nil
	}
	if err != nil {
		t.Fatal(err)
	}
	m, e, prev, pos, err := consumer.Continue(snap, lc, cfg.ConfigDigest)
	if err != nil {
		t.Fatal(err)
	}
	if challengers != nil {
		if err := challengers(m, snap != nil); err != nil {
			t.Fatal(err)
		}
	}
	cfg.BaseDigest = consumer.BaseDigestOf(snap, m)
	x := consumer.NewEpochs(cfg, m, e, prev, pos, nil, zaptest.NewLogger(t))
	done := make(chan error, 1)
	go func() {
		err := x.Run(ctx)
		if err != nil {
			t.Errorf("worker %s stopped: %v", cfg.Writer, err)
		}
		done <- err
	}()
	return x, done
}

// complete reports whether the log holds a boundary at every shard's end:
// the last epoch the data makes. Its results may not be in the log (a
// worker that learns every range holds them): wait for a worker to have
// mixed it.
func complete(ctx context.Context, store *snapshot.Store, log *memory.Log) (uint64, bool) {
	lg := epochlog.New(store)
	epochs, err := lg.Epochs(ctx, "mixed")
	if err != nil || len(epochs) == 0 {
		return 0, false
	}
	e := epochs[len(epochs)-1]
	b, _, err := lg.Boundary(ctx, "mixed", e)
	if err != nil {
		return 0, false
	}
	for _, r := range b.Shards {
		p, _ := r.Shard.Partition()
		if r.To != int64(log.Len(p)) {
			return 0, false
		}
	}
	return e, true
}

func waitComplete(t *testing.T, store *snapshot.Store, log *memory.Log) uint64 {
	t.Helper()
	var e uint64
	wait.For(t, time.Minute, 5*time.Millisecond, "the last epoch", func() bool {
		var ok bool
		e, ok = complete(context.Background(), store, log)
		return ok
	})
	return e
}

// learnAll learns every message of log, written before it starts, with
// one worker configured as epochConfig as set changes it, on a store of
// its own. It returns the store, the last epoch and the worker, stopped
// once it has mixed that epoch.
func learnAll(t *testing.T, log *memory.Log, set func(*consumer.EpochConfig)) (*snapshot.Store, uint64, *consumer.Epochs) {
	t.Helper()
	store := snapshot.NewStore(memblob.OpenBucket(nil), "")
	cfg := epochConfig(log, store, memory.NewSink(), "w1")
	set(&cfg)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	x, done := startEpochs(t, ctx, cfg, store)
	last := waitComplete(t, store, log)
	finalDigest(t, x, done, cancel, last)
	return store, last, x
}

// finalDigest stops x once it has mixed epoch e and returns its model's
// state digest.
func finalDigest(t *testing.T, x *consumer.Epochs, done <-chan error, cancel context.CancelFunc, e uint64) [32]byte {
	t.Helper()
	wait.For(t, time.Minute, 5*time.Millisecond, fmt.Sprintf("epoch %d mixed", e), func() bool { return x.Mixed() >= e })
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run: %v", err)
	}
	return x.Model().State().Digest()
}

// oneAndThreeAgree learns log with one worker, then with three that
// threeWorkersAgree stops and starts again, each learning a model of lc
// under epochConfig changed by set, and requires that they end at the
// model of the one. It returns the three workers' sink.
func oneAndThreeAgree(t *testing.T, log *memory.Log, lc learner.Config, set func(*consumer.EpochConfig)) *memory.Sink {
	t.Helper()
	one := snapshot.NewStore(memblob.OpenBucket(nil), "")
	cfg := epochConfig(log, one, memory.NewSink(), "one")
	set(&cfg)
	ctx, cancel := context.WithCancel(context.Background())
	x, done := startEpochsOf(t, ctx, cfg, one, lc, nil)
	last := waitComplete(t, one, log)
	want := finalDigest(t, x, done, cancel, last)

	three := snapshot.NewStore(memblob.OpenBucket(nil), "")
	sink := memory.NewSink()
	threeWorkersAgree(t, three, log, last, want, 1, 4, func(ctx context.Context, i int, owned []string) (*consumer.Epochs, <-chan error) {
		cfg := epochConfig(log, three, sink, fmt.Sprintf("w%d", i))
		set(&cfg)
		cfg.Owned = func() []shardid.ID { return shardIDs(owned) }
		return startEpochsOf(t, ctx, cfg, three, lc, nil)
	})
	return sink
}

// threeWorkersAgree learns log's six shards with three workers into
// store, each owning two shards, stops one at random moments (stops
// times, drawn from seed) and starts it again, and requires that every
// worker ends at epoch last holding state want, what one worker made.
// start starts worker i, owning owned, until ctx is done.
func threeWorkersAgree(t *testing.T, store *snapshot.Store, log *memory.Log, last uint64, want [32]byte, seed uint64, stops int,
	start func(ctx context.Context, i int, owned []string) (*consumer.Epochs, <-chan error)) {
	t.Helper()
	owners := [][]string{{"memory:ex/0", "memory:ex/3"}, {"memory:ex/1", "memory:ex/4"}, {"memory:ex/2", "memory:ex/5"}}
	type running struct {
		x      *consumer.Epochs
		done   <-chan error
		cancel context.CancelFunc
	}
	run := func(i int) running {
		ctx, cancel := context.WithCancel(context.Background())
		x, done := start(ctx, i, owners[i])
		return running{x, done, cancel}
	}
	workers := []running{run(0), run(1), run(2)}
	rng := rand.New(rand.NewPCG(seed, seed+1))
	for range stops {
		// A random moment, not a wait: a worker may stop anywhere.
		time.Sleep(time.Duration(20+rng.IntN(60)) * time.Millisecond)
		i := rng.IntN(3)
		workers[i].cancel()
		if err := <-workers[i].done; err != nil {
			t.Fatalf("worker %d: %v", i, err)
		}
		workers[i] = run(i)
	}
	if got := waitComplete(t, store, log); got != last {
		t.Fatalf("three workers made %d epochs, one worker %d", got, last)
	}
	var wg sync.WaitGroup
	for i, w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if got := finalDigest(t, w.x, w.done, w.cancel, last); got != want {
				t.Errorf("worker %d holds state %x, one worker %x", i, got, want)
			}
		}()
	}
	wg.Wait()
}

// TestEpochsDoNotDependOnTheWorkers learns six shards with one worker,
// then with three workers owning two shards each, some of them stopped
// and replaced at random moments: the mixed model is the same to the bit,
// every position has a prediction, and a repeated event has the content
// of the first.
func TestEpochsDoNotDependOnTheWorkers(t *testing.T) {
	log := epochLog(600)
	sink := oneAndThreeAgree(t, log, epochLearner(), func(*consumer.EpochConfig) {})

	// Every position has a prediction; repeats are identical.
	seen := map[string][]byte{}
	for _, o := range sink.Outputs("pred") {
		if prev, ok := seen[string(o.Key)]; ok && string(prev) != string(o.Value) {
			t.Fatalf("event %s repeated with other content:\n%s\n%s", o.Key, prev, o.Value)
		}
		seen[string(o.Key)] = o.Value
	}
	for _, o := range sink.Outputs("dead") {
		seen[string(o.Key)] = o.Value
	}
	for p := range 6 {
		for off := range log.Len(p) {
			if _, ok := seen[fmt.Sprintf("memory:ex/%d/%d", p, off)]; !ok {
				t.Fatalf("position %d of partition %d has no event", off, p)
			}
		}
	}
}

// TestEpochsSameGenerationTwice: two workers that each own every shard
// mix every epoch and both find its generation due, so one of them finds
// it written by the other each time (and at shutdown): that is no second
// writer, as the generation holds the model both mixed. Both run to the
// end and hold the model one worker learns alone.
func TestEpochsSameGenerationTwice(t *testing.T) {
	log := epochLog(300)

	one := snapshot.NewStore(memblob.OpenBucket(nil), "")
	ctx, cancel := context.WithCancel(context.Background())
	alone := epochConfig(log, one, memory.NewSink(), "one")
	alone.SnapshotEvery = 1
	x, done := startEpochs(t, ctx, alone, one)
	last := waitComplete(t, one, log)
	want := finalDigest(t, x, done, cancel, last)

	store := snapshot.NewStore(memblob.OpenBucket(nil), "")
	ctx, cancel = context.WithCancel(context.Background())
	defer cancel()
	type worker struct {
		x    *consumer.Epochs
		done <-chan error
	}
	var workers []worker
	for _, name := range []string{"a", "b"} {
		cfg := epochConfig(log, store, memory.NewSink(), name)
		cfg.SnapshotEvery = 1
		x, done := startEpochs(t, ctx, cfg, store)
		workers = append(workers, worker{x, done})
	}
	waitComplete(t, store, log)
	for _, w := range workers {
		wait.For(t, time.Minute, 5*time.Millisecond, fmt.Sprintf("epoch %d mixed", last), func() bool { return w.x.Mixed() >= last })
	}
	cancel()
	for i, w := range workers {
		if err := <-w.done; err != nil {
			t.Fatalf("worker %d: %v", i, err)
		}
		if got := w.x.Model().State().Digest(); got != want {
			t.Errorf("worker %d holds %x, one worker alone %x", i, got, want)
		}
	}
	gens, err := store.Generations(context.Background(), "mixed")
	if err != nil || len(gens) == 0 || gens[len(gens)-1] != last {
		t.Fatalf("generations %v (%v), want the last at epoch %d", gens, err, last)
	}
}
