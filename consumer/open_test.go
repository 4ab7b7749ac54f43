package consumer_test

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"maps"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"
	"go.uber.org/zap/zaptest/observer"
	"gocloud.dev/blob"
	"gocloud.dev/blob/memblob"

	"github.com/hyperplane-ml/hyperplane/consumer"
	"github.com/hyperplane-ml/hyperplane/consumer/memory"
	"github.com/hyperplane-ml/hyperplane/epochlog"
	"github.com/hyperplane-ml/hyperplane/internal/wait"
	"github.com/hyperplane-ml/hyperplane/learner"
	"github.com/hyperplane-ml/hyperplane/snapshot"
	"github.com/hyperplane-ml/hyperplane/snapshot/s3test"
	"github.com/hyperplane-ml/hyperplane/wire"
)

// TestOpenGoesOnInEpochsWhenTheSourceGrows: the pipeline Open builds
// learns a source of one shard with one worker, goes on in epochs from
// that worker's last generation when a second shard appears (probing the
// store and asking Ownership once), and a pipeline opened again resumes
// the mixed model at the positions of both shards.
func TestOpenGoesOnInEpochsWhenTheSourceGrows(t *testing.T) {
	data := memory.NewLog("ex", 2)
	first, _ := messages(500)
	second, _ := messages(300)
	data.Append(0, first...)
	data.Append(1, second...)
	shards := &growingShards{Log: data}
	store := snapshot.NewStore(memblob.OpenBucket(nil), "")
	sink := memory.NewSink()
	logger := zaptest.NewLogger(t)
	mixing := epochConfig(data, store, sink, "w")
	wcfg := mixing.Worker
	wcfg.SnapshotEvery = 100
	mixing.Worker, mixing.Shards, mixing.Log = consumer.WorkerConfig{}, nil, nil
	var connected, owned, opened int
	opts := consumer.Options{
		Model:   "mixed",
		Learner: epochLearner(),
		Store:   store,
		Resume:  snapshot.ResumeOptions{Writer: "w", Keep: 1000, Log: logger},
		Connect: func(context.Context) (consumer.Connection, error) {
			connected++
			return consumer.Connection{Worker: wcfg, Shards: shards, ShardCount: 1}, nil
		},
		OpenSource: func(ctx context.Context, positions map[string]int64) (consumer.Source, error) {
			opened++
			return data.Open(ctx, data.Shard(0), positions[data.Key(0)])
		},
		Mixing: mixing,
		Ownership: func() (consumer.Ownership, error) {
			owned++
			return consumer.Ownership{}, nil
		},
		Log: logger,
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	p, err := consumer.Open(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if connected != 1 || p.Resumed().Snapshot != nil {
		t.Fatalf("Open connected %d times over a resumed generation %v, want once over none", connected, p.Resumed().Snapshot)
	}
	engine := p.Engine(nil)
	done := make(chan error, 1)
	go func() { done <- engine.Run(ctx) }()
	wait.For(t, time.Minute, 5*time.Millisecond, "the first shard learned", func() bool { return engine.Positions()[data.Key(0)] == int64(len(first)) })
	shards.grow()
	want := map[string]int64{data.Key(0): int64(len(first)), data.Key(1): int64(len(second))}
	wait.For(t, time.Minute, 5*time.Millisecond, "both shards learned in epochs", func() bool { return maps.Equal(engine.Positions(), want) })
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run: %v", err)
	}
	if opened != 1 || owned != 1 {
		t.Fatalf("the source of one shard opened %d times and Ownership asked %d times, want once each", opened, owned)
	}
	// Every example once: as many as decode from both shards.
	dec := wire.NewDecoder(epochLearner(), wire.DecoderOptions{})
	var x learner.Example
	var examples uint64
	for _, m := range append(first, second...) {
		if _, err := dec.Decode(m, &x); err == nil {
			examples++
		}
	}
	if got := engine.Model().Metrics().Examples; got != examples {
		t.Fatalf("the model learned %d examples, the shards hold %d", got, examples)
	}

	again, err := consumer.Open(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	defer again.Close()
	r := again.Resumed()
	if r.Snapshot == nil || r.Snapshot.Epoch == 0 || !maps.Equal(r.Positions, want) {
		t.Fatalf("opened again at %v (snapshot %v), want an epoch's generation at %v", r.Positions, r.Snapshot, want)
	}
}

// TestOpenResumesBeforeItConnects: a store holding a model of another
// learner configuration is refused before Connect is called, so no
// broker is dialled for a model that cannot run.
func TestOpenResumesBeforeItConnects(t *testing.T) {
	ctx := context.Background()
	store := snapshot.NewStore(memblob.OpenBucket(nil), "")
	logger := zaptest.NewLogger(t)
	r, err := snapshot.Resume(ctx, store, "mixed", epochLearner(), snapshot.ResumeOptions{Writer: "w", Keep: 10, Log: logger})
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Snapshotter.Snapshot(ctx, r.Model.State(), map[string]int64{"ex/0": 3}, nil); err != nil {
		t.Fatal(err)
	}
	other := epochLearner()
	other.HashBits++
	connected := false
	_, err = consumer.Open(ctx, consumer.Options{
		Model:   "mixed",
		Learner: other,
		Store:   store,
		Resume:  snapshot.ResumeOptions{Writer: "w", Keep: 10, Log: logger},
		Connect: func(context.Context) (consumer.Connection, error) {
			connected = true
			return consumer.Connection{}, errors.New("dialled")
		},
		Log: logger,
	})
	if err == nil || connected {
		t.Fatalf("Open over an incompatible model: %v, connected %v; want its error before any connection", err, connected)
	}
}

// TestOpenContinuesTheMixingOfTheLog: a model whose epoch log was written
// with one mixing goes on with it when the pipeline is opened with
// another, if Options.Written lists the one the log names: its next
// generations keep the log's digest. Without it, the engine refuses the
// log as another history.
func TestOpenContinuesTheMixingOfTheLog(t *testing.T) {
	data := memory.NewLog("ex", 2)
	store := snapshot.NewStore(memblob.OpenBucket(nil), "")
	logger := zaptest.NewLogger(t)
	written := epochConfig(data, store, memory.NewSink(), "w")
	wcfg := written.Worker
	written.Worker, written.Shards, written.Log = consumer.WorkerConfig{}, nil, nil
	now := written
	now.Rule, now.ConfigDigest = learner.MixDamped, sha256.Sum256([]byte("damped history"))
	options := func(mixing consumer.EpochConfig, old ...consumer.EpochConfig) consumer.Options {
		return consumer.Options{
			Model:   "mixed",
			Learner: epochLearner(),
			Store:   store,
			Resume:  snapshot.ResumeOptions{Writer: "w", Keep: 1000, Log: logger},
			Connect: func(context.Context) (consumer.Connection, error) {
				return consumer.Connection{Worker: wcfg, Shards: data, ShardCount: 2}, nil
			},
			Mixing:  mixing,
			Written: old,
			Log:     logger,
		}
	}
	// learn runs the engine of opts until it has read what data holds, and
	// returns the error Run returned.
	learn := func(opts consumer.Options) error {
		t.Helper()
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		p, err := consumer.Open(ctx, opts)
		if err != nil {
			t.Fatal(err)
		}
		defer p.Close()
		engine := p.Engine(nil)
		done := make(chan error, 1)
		go func() { done <- engine.Run(ctx) }()
		want := map[string]int64{data.Key(0): int64(data.Len(0)), data.Key(1): int64(data.Len(1))}
		tick := time.NewTicker(5 * time.Millisecond)
		defer tick.Stop()
		timeout := time.After(time.Minute)
		for !maps.Equal(engine.Positions(), want) {
			select {
			case err := <-done:
				return err
			case <-tick.C:
			case <-timeout:
				t.Fatalf("the engine did not read the shards: at %v, want %v", engine.Positions(), want)
			}
		}
		cancel()
		return <-done
	}
	first, _ := messages(400)
	second, _ := messages(300)
	data.Append(0, first...)
	data.Append(1, second...)
	if err := learn(options(written)); err != nil {
		t.Fatalf("the first epochs: %v", err)
	}
	before, err := store.Latest(context.Background(), "mixed", nil)
	if err != nil {
		t.Fatal(err)
	}
	if before.Epoch == 0 || before.ConfigDigest != written.ConfigDigest {
		t.Fatalf("the first epochs wrote epoch %d with digest %x, want an epoch of %x", before.Epoch, before.ConfigDigest, written.ConfigDigest)
	}

	more, _ := messages(200)
	data.Append(0, more...)
	if err := learn(options(now, written)); err != nil {
		t.Fatalf("the epochs over a log written mixing otherwise: %v", err)
	}
	after, err := store.Latest(context.Background(), "mixed", nil)
	if err != nil {
		t.Fatal(err)
	}
	if after.Generation <= before.Generation || after.ConfigDigest != written.ConfigDigest {
		t.Fatalf("generation %d with digest %x after %d, want a newer one with the log's digest %x",
			after.Generation, after.ConfigDigest, before.Generation, written.ConfigDigest)
	}

	data.Append(1, more...)
	if err := learn(options(now)); err == nil {
		t.Fatal("the epochs went on over a log of another history without Written")
	}
}

// TestOpenFencedByAModelInEpochsGoesOnInEpochs: two pipelines of one
// model over a source of one shard that gains a second. A sees the
// second shard and goes on in epochs; B does not see it yet (a Kafka
// client's metadata lags by seconds), and its worker of one shard finds
// its next generation written by A. The model B resumes then goes on in
// an epoch log: B goes on in epochs too, and never learns it as one
// worker again (which wrote a generation inside the log, and every
// worker started over it stopped at the next boundary).
func TestOpenFencedByAModelInEpochsGoesOnInEpochs(t *testing.T) {
	r := newGrownRig(t)
	data, first, second, store := r.data, r.first, r.second, r.store
	var openedByB atomic.Int32
	r.open = func(shards *growingShards) func(ctx context.Context, positions map[string]int64) (consumer.Source, error) {
		return func(ctx context.Context, positions map[string]int64) (consumer.Source, error) {
			if shards == r.seenByB && openedByB.Add(1) > 1 {
				t.Error("B learned the model of an epoch log as one worker again")
				return nil, errors.New("a source of one shard opened again over an epoch log")
			}
			return data.Open(ctx, data.Shard(0), positions[data.Key(0)])
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	a, err := consumer.Open(ctx, r.options("a", r.seenByA))
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b, err := consumer.Open(ctx, r.options("b", r.seenByB))
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	want := r.learnBoth(t, ctx, a, func(s *snapshot.Snapshot) bool { return s.Epoch > 0 && len(s.Positions) == 2 })

	// B resumed the empty store: its worker of one shard learns from the
	// start and finds generation 1 written by A.
	more, _ := messages(200)
	data.Append(0, more[:120]...)
	data.Append(1, more[120:]...)
	want = map[string]int64{data.Key(0): int64(len(first) + 120), data.Key(1): int64(len(second) + 80)}
	engineB := b.Engine(nil)
	doneB := make(chan error, 1)
	go func() { doneB <- engineB.Run(ctx) }()
	wait.For(t, time.Minute, 5*time.Millisecond, "B learned both shards in epochs", func() bool {
		select {
		case err := <-doneB:
			t.Fatalf("B stopped: %v", err)
		default:
		}
		return maps.Equal(engineB.Positions(), want)
	})
	cancel()
	if err := <-doneB; err != nil {
		t.Fatalf("B: %v", err)
	}
	if n := openedByB.Load(); n != 1 {
		t.Fatalf("B opened a source of one shard %d times, want once", n)
	}
	gens, err := store.Generations(context.Background(), "mixed")
	if err != nil {
		t.Fatal(err)
	}
	for _, g := range gens {
		s, err := store.Load(context.Background(), "mixed", g)
		if err != nil {
			t.Fatal(err)
		}
		if s.Epoch == 0 && len(s.Positions) > 1 {
			t.Fatalf("generation %d holds both shards but no epoch: written by one worker inside the epoch log", g)
		}
	}
}

// TestOpenKernelRefusedWhenTheSourceGrows: a kernel model learned over a
// source of one shard stops when the source gains a second, since its
// support set cannot be mixed, and the error counts the partitions the
// source has now, not the one it had when the pipeline connected.
func TestOpenKernelRefusedWhenTheSourceGrows(t *testing.T) {
	data := memory.NewLog("ex", 2)
	first, _ := messages(200)
	data.Append(0, first...)
	shards := &growingShards{Log: data}
	store := snapshot.NewStore(memblob.OpenBucket(nil), "")
	sink := memory.NewSink()
	logger := zaptest.NewLogger(t)
	lcfg := epochLearner()
	lcfg.Algorithm = learner.Kernel
	mixing := epochConfig(data, store, sink, "w")
	wcfg := mixing.Worker
	wcfg.SnapshotEvery = 100
	mixing.Worker, mixing.Shards, mixing.Log = consumer.WorkerConfig{}, nil, nil
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	p, err := consumer.Open(ctx, consumer.Options{
		Model:   "kernel",
		Learner: lcfg,
		Store:   store,
		Resume:  snapshot.ResumeOptions{Writer: "w", Keep: 1000, Log: logger},
		Connect: func(context.Context) (consumer.Connection, error) {
			return consumer.Connection{Worker: wcfg, Shards: shards, ShardCount: 1}, nil
		},
		OpenSource: func(ctx context.Context, positions map[string]int64) (consumer.Source, error) {
			return data.Open(ctx, data.Shard(0), positions[data.Key(0)])
		},
		Mixing:    mixing,
		Ownership: func() (consumer.Ownership, error) { return consumer.Ownership{}, nil },
		Log:       logger,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	engine := p.Engine(nil)
	done := make(chan error, 1)
	go func() { done <- engine.Run(ctx) }()
	wait.For(t, time.Minute, 5*time.Millisecond, "the first shard learned", func() bool { return engine.Positions()[data.Key(0)] == int64(len(first)) })
	shards.grow()
	err = <-done
	if err == nil || !strings.Contains(err.Error(), "cannot be learned over 2 partitions") {
		t.Fatalf("Run: %v, want the kernel model refused over the 2 partitions the source has now", err)
	}
}

// TestFollowAModelThatGrewFromOneShard: a model learned from one shard
// whose source gained a second went on in epochs from its worker's last
// generation, above generations of one worker that no epoch follows. A
// replay of its log begins at that last generation and reproduces the
// live model; begun at the oldest generation it found no epoch after it
// and replayed nothing.
func TestFollowAModelThatGrewFromOneShard(t *testing.T) {
	r := newGrownRig(t)
	store := r.store
	opts := r.options("w", r.seenByA)
	// Its shards grow when learnBoth says, not when the epochs begin.
	opts.Ownership = func() (consumer.Ownership, error) { return consumer.Ownership{}, nil }
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	p, err := consumer.Open(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	want := r.learnBoth(t, ctx, p, nil)
	live, err := store.Latest(context.Background(), "mixed", nil)
	if err != nil || live.Epoch == 0 || !maps.Equal(live.Positions, want) {
		t.Fatalf("the newest generation %v (%v), want one of an epoch at %v", live, err, want)
	}
	gens, err := store.Generations(context.Background(), "mixed")
	if err != nil || len(gens) < 2 {
		t.Fatalf("generations %v (%v), want the worker's of one shard and the epochs'", gens, err)
	}

	start, err := consumer.FollowStart(context.Background(), epochlog.New(store), "mixed")
	if err != nil {
		t.Fatal(err)
	}
	if start == nil {
		t.Fatal("the replay begins at the log's first boundary, which the log does not have")
	}
	if start.Epoch != 0 || start.Generation == gens[0] {
		t.Fatalf("the replay begins at generation %d (epoch %d), want the last generation of one worker, above generation %d", start.Generation, start.Epoch, gens[0])
	}
	replay, err := consumer.Open(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	defer replay.Close()
	out := snapshot.NewStore(memblob.OpenBucket(nil), "")
	f, err := replay.Follow(context.Background(), epochlog.New(store), epochlog.New(out), start)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := f.Model.State().Digest(), live.State.Digest(); got != want || f.Mixed != live.Epoch {
		t.Fatalf("the replay followed to epoch %d with state_sha256 %x, the live model is at epoch %d with %x", f.Mixed, got, live.Epoch, want)
	}
}

// TestOpenOneShardWritesNoGenerationInsideTheLog: pipeline B learns a
// source of one shard from a generation after which A, which saw the
// source gain a second shard, went on in epochs. B does not see the
// second shard yet, and the generation it would write next is free (A
// has cut the epochs above it and written no generation of them yet): B
// writes no generation there, inside the epoch log, but goes on in
// epochs.
func TestOpenOneShardWritesNoGenerationInsideTheLog(t *testing.T) {
	r := newGrownRig(t)
	data, first, store, bucket := r.data, r.first, r.store, r.bucket
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	a, err := consumer.Open(ctx, r.options("a", r.seenByA))
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	want := r.learnBoth(t, ctx, a, nil)
	// The store as it was before A wrote a generation of its epochs: A's
	// last generation of one shard, and the epoch log above it.
	gens, err := store.Generations(ctx, "mixed")
	if err != nil {
		t.Fatal(err)
	}
	for _, g := range gens {
		s, err := store.Load(ctx, "mixed", g)
		if err != nil {
			t.Fatal(err)
		}
		if s.Epoch > 0 {
			if err := bucket.Delete(ctx, fmt.Sprintf("mixed/%020d.msgpack", g)); err != nil {
				t.Fatal(err)
			}
		}
	}
	b, err := consumer.Open(ctx, r.options("b", r.seenByB))
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	resumed := b.Resumed().Generation
	if s := b.Resumed().Snapshot; s == nil || s.Epoch != 0 || s.Positions[data.Key(0)] != int64(len(first)) {
		t.Fatalf("B resumed %v, want A's last generation of one shard", s)
	}
	if _, err := store.Load(ctx, "mixed", resumed+1); !errors.Is(err, snapshot.ErrNotFound) {
		t.Fatalf("generation %d, the one B writes next: %v, want it absent", resumed+1, err)
	}

	more, _ := messages(150)
	data.Append(0, more...)
	want[data.Key(0)] += int64(len(more))
	engineB := b.Engine(nil)
	doneB := make(chan error, 1)
	go func() { doneB <- engineB.Run(ctx) }()
	wait.For(t, time.Minute, 5*time.Millisecond, "B learned the new examples in epochs", func() bool {
		select {
		case err := <-doneB:
			t.Fatalf("B stopped: %v", err)
		default:
		}
		if s, err := store.Load(ctx, "mixed", resumed+1); err == nil && s.Epoch == 0 {
			t.Fatalf("B wrote generation %d as one worker, inside the epoch log", resumed+1)
		}
		return maps.Equal(engineB.Positions(), want)
	})
	cancel()
	if err := <-doneB; err != nil {
		t.Fatalf("B: %v", err)
	}
}

// grownRig is a source of two shards that two pipelines of one model, A
// and B, each see as one shard until their growingShards grows: a model
// over a source of one shard that gains a second, on an in-memory store.
type grownRig struct {
	data             *memory.Log
	first, second    [][]byte // the shards' messages before A runs
	seenByA, seenByB *growingShards
	bucket           *blob.Bucket
	store            *snapshot.Store
	logger           *zap.Logger
	wcfg             consumer.WorkerConfig
	mixing           consumer.EpochConfig
	// open, if set, makes the OpenSource of a pipeline that sees shards;
	// else the source reads the first shard.
	open func(shards *growingShards) func(ctx context.Context, positions map[string]int64) (consumer.Source, error)
}

func newGrownRig(t *testing.T) *grownRig {
	data := memory.NewLog("ex", 2)
	first, _ := messages(500)
	second, _ := messages(300)
	data.Append(0, first...)
	data.Append(1, second...)
	bucket := memblob.OpenBucket(nil)
	store := snapshot.NewStore(bucket, "")
	mixing := epochConfig(data, store, memory.NewSink(), "w")
	wcfg := mixing.Worker
	wcfg.SnapshotEvery = 100
	mixing.Worker, mixing.Shards, mixing.Log = consumer.WorkerConfig{}, nil, nil
	return &grownRig{data: data, first: first, second: second,
		seenByA: &growingShards{Log: data}, seenByB: &growingShards{Log: data},
		bucket: bucket, store: store, logger: zaptest.NewLogger(t), wcfg: wcfg, mixing: mixing}
}

// options are the pipeline of writer that sees shards.
func (r *grownRig) options(writer string, shards *growingShards) consumer.Options {
	open := func(ctx context.Context, positions map[string]int64) (consumer.Source, error) {
		return r.data.Open(ctx, r.data.Shard(0), positions[r.data.Key(0)])
	}
	if r.open != nil {
		open = r.open(shards)
	}
	return consumer.Options{
		Model:   "mixed",
		Learner: epochLearner(),
		Store:   r.store,
		Resume:  snapshot.ResumeOptions{Writer: writer, Keep: 1000, Log: r.logger},
		Connect: func(context.Context) (consumer.Connection, error) {
			return consumer.Connection{Worker: r.wcfg, Shards: shards, ShardCount: 1}, nil
		},
		OpenSource: open,
		Mixing:     r.mixing,
		Ownership: func() (consumer.Ownership, error) {
			// A pipeline learns in epochs once it sees every shard.
			shards.grow()
			return consumer.Ownership{}, nil
		},
		Log: r.logger,
	}
}

// learnBoth runs A's engine until it has learned the first shard as one
// worker, and then, once A sees the second, both shards in epochs (and
// the store's newest generation passes stored, if set), and stops it. It
// returns the positions at both shards' ends.
func (r *grownRig) learnBoth(t *testing.T, ctx context.Context, a *consumer.Pipeline, stored func(*snapshot.Snapshot) bool) map[string]int64 {
	t.Helper()
	actx, stopA := context.WithCancel(ctx)
	engineA := a.Engine(nil)
	doneA := make(chan error, 1)
	go func() { doneA <- engineA.Run(actx) }()
	wait.For(t, time.Minute, 5*time.Millisecond, "A learned the first shard", func() bool {
		return engineA.Positions()[r.data.Key(0)] == int64(len(r.first))
	})
	r.seenByA.grow()
	want := map[string]int64{r.data.Key(0): int64(len(r.first)), r.data.Key(1): int64(len(r.second))}
	wait.For(t, time.Minute, 5*time.Millisecond, "A learned both shards in epochs", func() bool {
		if stored != nil {
			if s, err := r.store.Latest(ctx, "mixed", nil); err != nil || !stored(s) {
				return false
			}
		}
		return maps.Equal(engineA.Positions(), want)
	})
	stopA()
	if err := <-doneA; err != nil {
		t.Fatalf("A: %v", err)
	}
	return want
}

// TestOpenWaitsForAStoreThatDoesNotAnswer: with WaitForStore, Open over a
// store nothing answers at (every connection refused) waits for it,
// warning with snapshot.url, in either scope, and resumes once it is up;
// a ctx done meanwhile ends the wait with its error; a store that refuses
// the request (403) fails Open at once; and without WaitForStore a store
// that does not answer fails it at once too.
func TestOpenWaitsForAStoreThatDoesNotAnswer(t *testing.T) {
	const warning = "snapshot.url: the store does not answer at start-up; waiting for it"
	storeAt := func(t *testing.T, url string) *snapshot.Store {
		t.Helper()
		store, err := snapshot.OpenStore(context.Background(), url)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { store.Close() })
		return store
	}
	open := func(ctx context.Context, store *snapshot.Store, partitionScope, waitForStore bool, log *zap.Logger) (*consumer.Pipeline, error) {
		return consumer.Open(ctx, consumer.Options{
			Model:          "m",
			Learner:        epochLearner(),
			Store:          store,
			WaitForStore:   waitForStore,
			PartitionScope: partitionScope,
			Resume:         snapshot.ResumeOptions{Writer: "w", Keep: 10, Log: log},
			Connect: func(context.Context) (consumer.Connection, error) {
				return consumer.Connection{}, nil
			},
			Log: log,
		})
	}
	for _, scope := range []string{"global", "partition"} {
		t.Run(scope, func(t *testing.T) {
			core, logs := observer.New(zap.WarnLevel)
			srv, up := s3test.StartDown(t)
			store := storeAt(t, srv.URL(t))

			ctx, cancel := context.WithCancel(context.Background())
			stopped := make(chan error, 1)
			go func() {
				_, err := open(ctx, store, scope == "partition", true, zap.New(core))
				stopped <- err
			}()
			wait.For(t, time.Minute, 5*time.Millisecond, "a warning that Open waits", func() bool { return logs.FilterMessage(warning).Len() > 0 })
			cancel()
			if err := <-stopped; !errors.Is(err, context.Canceled) {
				t.Fatalf("Open stopped during the wait: %v, want context.Canceled", err)
			}

			opened := make(chan error, 1)
			go func() {
				p, err := open(context.Background(), store, scope == "partition", true, zap.New(core))
				if err == nil {
					p.Close()
				}
				opened <- err
			}()
			n := logs.FilterMessage(warning).Len()
			wait.For(t, time.Minute, 5*time.Millisecond, "another warning", func() bool { return logs.FilterMessage(warning).Len() > n })
			up()
			if err := <-opened; err != nil {
				t.Fatalf("Open once the store is up: %v", err)
			}
			for _, e := range logs.FilterMessage(warning).All() {
				if err := e.ContextMap()["error"]; !strings.Contains(fmt.Sprint(err), "snapshot.url: the store did not answer") {
					t.Errorf("the warning's error is %q, want one naming snapshot.url and the store's", err)
				}
			}
		})
	}
	t.Run("refused", func(t *testing.T) {
		core, logs := observer.New(zap.WarnLevel)
		_, err := open(context.Background(), storeAt(t, s3test.StartRefusing(t).URL(t)), false, true, zap.New(core))
		if err == nil || !strings.HasPrefix(err.Error(), "snapshot.url: the store refused") || strings.Contains(err.Error(), "did not answer") {
			t.Fatalf("Open over a store that refuses: %v, want an error naming snapshot.url and the refusal, not that the store did not answer", err)
		}
		if n := logs.FilterMessage(warning).Len(); n > 0 {
			t.Errorf("a store that refuses was waited for (%d warnings)", n)
		}
	})
	t.Run("without WaitForStore", func(t *testing.T) {
		srv, _ := s3test.StartDown(t)
		_, err := open(context.Background(), storeAt(t, srv.URL(t)), false, false, zaptest.NewLogger(t))
		if !errors.Is(err, snapshot.ErrUnavailable) {
			t.Fatalf("Open over a store that is down: %v, want snapshot.ErrUnavailable", err)
		}
	})
}

// TestEngineGaugesAreTheResumedModels: the engine of a resumed model
// sets the gauges to the model's version and positions as it is built,
// before any worker runs: a scrape of the worker's metrics never says
// version 0 of a model restored at another.
func TestEngineGaugesAreTheResumedModels(t *testing.T) {
	ctx := context.Background()
	store := snapshot.NewStore(memblob.OpenBucket(nil), "")
	logger := zaptest.NewLogger(t)
	r, err := snapshot.Resume(ctx, store, "m", epochLearner(), snapshot.ResumeOptions{Writer: "w", Keep: 10, Log: logger})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 50 {
		x := learner.Example{Label: 1 - 2*(i%2), Labeled: true}
		x.Add(uint32(i%7), 1)
		r.Model.Learn(&x)
	}
	if err := r.Snapshotter.Snapshot(ctx, r.Model.State(), map[string]int64{"memory:ex/0": 50}, nil); err != nil {
		t.Fatal(err)
	}
	p, err := consumer.Open(ctx, consumer.Options{
		Model:   "m",
		Learner: epochLearner(),
		Store:   store,
		Resume:  snapshot.ResumeOptions{Writer: "w2", Keep: 10, Log: logger},
		Connect: func(context.Context) (consumer.Connection, error) { return consumer.Connection{}, nil },
		Log:     logger,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	metrics := consumer.NewMetrics(nil)
	p.Engine(metrics)
	if got, want := testutil.ToFloat64(metrics.ModelVersion), float64(r.Model.Version()); got != want || want == 0 {
		t.Fatalf("hyperplane_model_version %v once the engine is built, want the resumed model's %v", got, want)
	}
	if got := testutil.ToFloat64(metrics.Position.WithLabelValues("memory:ex/0")); got != 50 {
		t.Fatalf("hyperplane_position %v once the engine is built, want the resumed model's 50", got)
	}
}
