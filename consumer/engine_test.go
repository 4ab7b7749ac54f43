package consumer_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"
	"gocloud.dev/blob/memblob"

	"github.com/hyperplane-ml/hyperplane/consumer"
	"github.com/hyperplane-ml/hyperplane/consumer/memory"
	"github.com/hyperplane-ml/hyperplane/internal/wait"
	"github.com/hyperplane-ml/hyperplane/learner"
	"github.com/hyperplane-ml/hyperplane/shardid"
	"github.com/hyperplane-ml/hyperplane/snapshot"
	"github.com/hyperplane-ml/hyperplane/snapshot/s3test"
	"github.com/hyperplane-ml/hyperplane/wire"
)

// growingShards are a memory log's shards that show only its first
// partition until grow is called, as a Kafka topic before and after a
// partition is added.
type growingShards struct {
	*memory.Log
	grown atomic.Bool
}

func (g *growingShards) grow() { g.grown.Store(true) }

func (g *growingShards) Ends(ctx context.Context) (map[shardid.ID]int64, error) {
	ends, err := g.Log.Ends(ctx)
	if err != nil || g.grown.Load() {
		return ends, err
	}
	return map[shardid.ID]int64{g.Shard(0): ends[g.Shard(0)]}, nil
}

// TestEngineGoesOnInEpochsWhenTheSourceGrows: a source of one shard is
// learned as it comes, each snapshot a generation of one worker's kind;
// when a second shard appears the worker stops at a generation and the
// same model goes on in epochs from its positions: every example of both
// shards is learned exactly once, and the epoch log begins above the
// worker's last generation.
func TestEngineGoesOnInEpochsWhenTheSourceGrows(t *testing.T) {
	data := memory.NewLog("ex", 2)
	first, _ := messages(500)
	second, _ := messages(300)
	data.Append(0, first...)
	data.Append(1, second...)
	shards := &growingShards{Log: data}
	store := snapshot.NewStore(memblob.OpenBucket(nil), "")
	sink := memory.NewSink()
	lcfg := epochLearner()
	logger := zaptest.NewLogger(t)
	wcfg := consumer.WorkerConfig{
		Model:       "mixed",
		Predictions: consumer.Destination{Sink: sink, Topic: "pred"},
		DeadLetter:  consumer.Destination{Sink: sink, Topic: "dead"},
		Batch:       64,
		Views:       true,
	}
	resume := func(ctx context.Context) (snapshot.Resumed, error) {
		return snapshot.Resume(ctx, store, "mixed", lcfg, snapshot.ResumeOptions{Writer: "w", Keep: 1000, Log: logger})
	}
	var workers, epochs atomic.Int32
	engine := consumer.NewEngine(consumer.EngineConfig{
		Shards:      shards,
		GrowthCheck: 10 * time.Millisecond,
		Single: func(ctx context.Context, _ *consumer.Worker) (*consumer.Worker, error) {
			workers.Add(1)
			r, err := resume(ctx)
			if err != nil {
				return nil, err
			}
			src, err := data.Open(ctx, data.Shard(0), 0)
			if err != nil {
				return nil, err
			}
			cfg := wcfg
			cfg.Snapshots, cfg.SnapshotEvery = chainSnapshots{r.Snapshotter}, 100
			return consumer.NewWorker(cfg, src, r.Model, r.Positions, nil, logger), nil
		},
		Mixed: func(ctx context.Context, after *consumer.Worker) (*consumer.Epochs, error) {
			epochs.Add(1)
			if after == nil {
				t.Error("the epochs began without the worker of one shard before them")
			}
			r, err := resume(ctx)
			if err != nil {
				return nil, err
			}
			ecfg := epochConfig(data, store, sink, "w")
			ecfg.Shards = shards
			e, prev, pos, err := consumer.ContinueModel(r.Snapshot, r.Model, ecfg.ConfigDigest)
			if err != nil {
				return nil, err
			}
			ecfg.BaseDigest = consumer.BaseDigestOf(r.Snapshot, r.Model)
			return consumer.NewEpochs(ecfg, r.Model, e, prev, pos, nil, logger), nil
		},
	}, logger)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- engine.Run(ctx) }()

	wait.For(t, time.Minute, 5*time.Millisecond, "the first shard learned", func() bool { return engine.Positions()[data.Key(0)] == int64(len(first)) })
	if engine.View() == nil {
		t.Fatal("no view of the model of one shard")
	}
	shards.grow()
	want := map[string]int64{data.Key(0): int64(len(first)), data.Key(1): int64(len(second))}
	wait.For(t, time.Minute, 5*time.Millisecond, "both shards learned in epochs", func() bool { return maps.Equal(engine.Positions(), want) })
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run: %v", err)
	}
	if workers.Load() != 1 || epochs.Load() != 1 {
		t.Fatalf("%d workers of one shard and %d epochs built, want one of each", workers.Load(), epochs.Load())
	}

	// Every example once: the counts of learning both shards in order.
	ref, err := learner.New(lcfg)
	if err != nil {
		t.Fatal(err)
	}
	dec := wire.NewDecoder(lcfg, wire.DecoderOptions{})
	var x learner.Example
	for _, msgs := range [][][]byte{first, second} {
		for _, m := range msgs {
			if _, err := dec.Decode(m, &x); err == nil {
				ref.Learn(&x)
			}
		}
	}
	got := engine.Model().Metrics()
	if got.Examples != ref.Metrics().Examples || got.Labeled != ref.Metrics().Labeled {
		t.Fatalf("the model learned %d examples (%d labeled), the two shards hold %d (%d)",
			got.Examples, got.Labeled, ref.Metrics().Examples, ref.Metrics().Labeled)
	}
	gens, err := store.Generations(ctx, "mixed")
	if err != nil {
		t.Fatal(err)
	}
	var single, mixed uint64
	for _, g := range gens {
		snap, err := store.Load(context.Background(), "mixed", g)
		if err != nil {
			t.Fatal(err)
		}
		if snap.Epoch == 0 {
			single = max(single, g)
		} else if mixed == 0 {
			mixed = g
		}
	}
	if single == 0 || mixed <= single {
		t.Fatalf("generations %v: the worker's last is %d, the first mixed %d; want the epochs above the worker's", gens, single, mixed)
	}
}

// TestEngineOfOneShardReloadsAFencedGeneration: two workers of one model
// over a source of one shard, started together on a file store, both
// learn it; the one that finds its next generation written by the other
// goes on from the store's newest generation instead of stopping, and
// the model in the store learned every example once. When the store does
// not answer the first reloads (snapshot.ErrUnavailable, from a store
// whose server refuses every request), the worker tries again rather
// than stopping.
func TestEngineOfOneShardReloadsAFencedGeneration(t *testing.T) {
	for _, outages := range []int32{0, 2} {
		t.Run(fmt.Sprintf("reloads refused=%d", outages), func(t *testing.T) { testEngineReload(t, outages) })
	}
}

// testEngineReload is TestEngineOfOneShardReloadsAFencedGeneration with
// the first outages reloads refused by the store.
func testEngineReload(t *testing.T, outages int32) {
	down, err := snapshot.OpenStore(context.Background(), s3test.StartRefusing(t).URL(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { down.Close() })
	var refused atomic.Int32
	data := memory.NewLog("ex", 1)
	msgs, _ := messages(3000)
	lcfg := epochLearner()
	logger := zaptest.NewLogger(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	store, err := snapshot.OpenStore(ctx, "file://"+t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	sink := memory.NewSink()
	// built counts the workers built: once both first ones have resumed
	// the (then empty) store, each writes generation 1, at its own
	// position (every, each worker's snapshot.every), so one of them
	// finds it written by the other with another model. current is each
	// engine's worker now.
	var reloads, built atomic.Int32
	var mu sync.Mutex
	current := map[string]*consumer.Worker{}
	engine := func(writer string, every int) *consumer.Engine {
		return consumer.NewEngine(consumer.EngineConfig{
			Shards:       data,
			RestartDelay: 10 * time.Millisecond,
			Single: func(ctx context.Context, fenced *consumer.Worker) (*consumer.Worker, error) {
				if fenced != nil {
					reloads.Add(1)
					if refused.Add(1) <= outages {
						_, err := snapshot.Resume(ctx, down, "one", lcfg, snapshot.ResumeOptions{Writer: writer, Log: logger})
						if err == nil {
							err = errors.New("a store that refuses every request resumed the model")
						}
						return nil, err
					}
				}
				r, err := snapshot.Resume(ctx, store, "one", lcfg, snapshot.ResumeOptions{Writer: writer, Keep: 1000, Log: logger})
				if err != nil {
					return nil, err
				}
				built.Add(1)
				src, err := data.Open(ctx, data.Shard(0), r.Positions[data.Key(0)])
				if err != nil {
					return nil, err
				}
				cfg := consumer.WorkerConfig{
					Model:            "one",
					Predictions:      consumer.Destination{Sink: sink, Topic: "pred"},
					DeadLetter:       consumer.Destination{Sink: sink, Topic: "dead"},
					Batch:            16,
					Snapshots:        chainSnapshots{r.Snapshotter},
					SnapshotEvery:    every,
					SnapshotInterval: 20 * time.Millisecond,
				}
				w := consumer.NewWorker(cfg, src, r.Model, r.Positions, nil, logger)
				mu.Lock()
				current[writer] = w
				mu.Unlock()
				return w, nil
			},
			Mixed: func(context.Context, *consumer.Worker) (*consumer.Epochs, error) {
				t.Error("a source of one shard went on in epochs")
				return nil, context.Canceled
			},
		}, logger)
	}
	done := make(chan error, 2)
	for w, every := range map[string]int{"a": 50, "b": 70} {
		e := engine(w, every)
		go func() { done <- e.Run(ctx) }()
	}
	wait.For(t, time.Minute, time.Millisecond, "both workers resumed from the empty store", func() bool {
		select {
		case err := <-done:
			t.Fatalf("a worker stopped: %v", err)
		default:
		}
		return built.Load() >= 2
	})
	data.Append(0, msgs...)
	// A worker fenced in the background may have read the whole shard
	// before its write failed, and the one built again after it starts
	// from the newest generation: the wait is for the reload, for both
	// workers now at the end, and for a generation there (the idle tail,
	// within snapshot.interval), from which any later reload resumes.
	wait.For(t, time.Minute, 10*time.Millisecond, "both workers at the end of the shard, one of them built again after finding its next generation written by the other", func() bool {
		select {
		case err := <-done:
			t.Fatalf("a worker stopped: %v", err)
		default:
		}
		if reloads.Load() <= outages {
			return false
		}
		mu.Lock()
		defer mu.Unlock()
		for _, w := range current {
			if w.Positions()[data.Key(0)] != int64(len(msgs)) {
				return false
			}
		}
		s, err := store.Latest(ctx, "one", nil)
		return err == nil && s.Positions[data.Key(0)] == int64(len(msgs))
	})
	cancel()
	for range 2 {
		if err := <-done; err != nil {
			t.Fatalf("Run: %v", err)
		}
	}
	ref, err := learner.New(lcfg)
	if err != nil {
		t.Fatal(err)
	}
	dec := wire.NewDecoder(lcfg, wire.DecoderOptions{})
	var x learner.Example
	for _, m := range msgs {
		if _, err := dec.Decode(m, &x); err == nil {
			ref.Learn(&x)
		}
	}
	s, err := store.Latest(context.Background(), "one", nil)
	if err != nil {
		t.Fatal(err)
	}
	if s.Positions[data.Key(0)] != int64(len(msgs)) {
		t.Fatalf("the newest generation is at %v, the shard ends at %d", s.Positions, len(msgs))
	}
	if got, want := s.State.Examples, ref.Metrics().Examples; got != want {
		t.Fatalf("the newest generation learned %d examples, the shard holds %d", got, want)
	}
}

// listingShards are shards whose listing waits for its context, as a
// broker that does not answer yet: listing is closed once it is asked.
type listingShards struct {
	*memory.Log
	listing chan struct{}
}

func (l *listingShards) Ends(ctx context.Context) (map[shardid.ID]int64, error) {
	close(l.listing)
	<-ctx.Done()
	return nil, fmt.Errorf("list offsets: %w", ctx.Err())
}

// TestEngineStoppedWhileListingTheShards: a worker stopped while it first
// lists its source's partitions, before it built anything, stops cleanly,
// as it does at any other moment, not with the listing's error.
func TestEngineStoppedWhileListingTheShards(t *testing.T) {
	shards := &listingShards{Log: memory.NewLog("ex", 1), listing: make(chan struct{})}
	engine := consumer.NewEngine(consumer.EngineConfig{
		Shards: shards,
		Single: func(context.Context, *consumer.Worker) (*consumer.Worker, error) {
			return nil, errors.New("built after the listing failed")
		},
	}, zaptest.NewLogger(t))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- engine.Run(ctx) }()
	<-shards.listing
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run stopped while listing the shards: %v, want nil", err)
	}
}
