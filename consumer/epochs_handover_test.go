package consumer_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"gocloud.dev/blob/memblob"

	"github.com/hyperplane-ml/hyperplane/consumer"
	"github.com/hyperplane-ml/hyperplane/consumer/memory"
	"github.com/hyperplane-ml/hyperplane/epochlog"
	"github.com/hyperplane-ml/hyperplane/internal/wait"
	"github.com/hyperplane-ml/hyperplane/shardid"
	"github.com/hyperplane-ml/hyperplane/snapshot"
)

// gatedShards holds each shard's first fetch until every shard of the log
// has begun one, or until gateLimit has passed, when it records that the
// shards were read one after another.
type gatedShards struct {
	*memory.Log
	shards  int
	mu      sync.Mutex
	started map[string]bool
	all     chan struct{}
	apart   atomic.Bool
}

// gateLimit is how long, in a synctest bubble's time, a first fetch waits
// for the other shards' before it goes on alone.
const gateLimit = 10 * time.Second

func newGatedShards(log *memory.Log, shards int) *gatedShards {
	return &gatedShards{Log: log, shards: shards, started: map[string]bool{}, all: make(chan struct{})}
}

func (g *gatedShards) Open(ctx context.Context, shard shardid.ID, from int64) (consumer.Source, error) {
	src, err := g.Log.Open(ctx, shard, from)
	if err != nil {
		return nil, err
	}
	return &gatedSource{Source: src, gate: g, shard: shard.String()}, nil
}

func (g *gatedShards) arrive(shard string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.started[shard] {
		return
	}
	g.started[shard] = true
	if len(g.started) == g.shards {
		close(g.all)
	}
}

type gatedSource struct {
	consumer.Source
	gate    *gatedShards
	shard   string
	fetched bool
}

func (s *gatedSource) Fetch(ctx context.Context, max int) ([]consumer.Message, error) {
	if !s.fetched {
		s.fetched = true
		s.gate.arrive(s.shard)
		select {
		case <-s.gate.all:
		case <-time.After(gateLimit):
			s.gate.apart.Store(true)
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	return s.Source.Fetch(ctx, max)
}

// TestEpochsLearnShardsHandedOverTogether: a worker whose group gives it
// its shards only once it waits at the barrier (it cut the epoch before
// it owned any, as a worker that has just started does) learns them
// beside one another, as it learns the shards it owns when the epoch
// begins, not one after the other as the barrier reaches each; every
// message is published once and the model is the one the epoch makes.
func TestEpochsLearnShardsHandedOverTogether(t *testing.T) {
	const n = 500
	handoverLog := func() *memory.Log {
		data := memory.NewLog("ex", 3)
		for p := range 3 {
			msgs, _ := messages(n + 5*p)
			data.Append(p, msgs...)
		}
		return data
	}
	want := func() [32]byte {
		data := handoverLog()
		store := snapshot.NewStore(memblob.OpenBucket(nil), "")
		return runEpochs(t, data, revokeConfig(data, store, memory.NewSink(), "one"), store)
	}()
	synctest.Test(t, func(t *testing.T) {
		data := handoverLog()
		store := snapshot.NewStore(memblob.OpenBucket(nil), "")
		own := &rebalancing{ownership: newOwnership()}
		sink := memory.NewSink()
		gate := newGatedShards(data, 3)
		cfg := revokeConfig(data, store, sink, "a")
		cfg.Shards = gate
		cfg.Owned, cfg.Changed, cfg.Settled = own.owned("a"), own.changes, own.assigned.Load

		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		a, done := startEpochs(t, ctx, cfg, store)
		synctest.Wait()
		if _, _, err := epochlog.New(store).Boundary(ctx, "mixed", 1); err != nil {
			t.Fatalf("the worker waits without having cut the first epoch: %v", err)
		}
		if got := len(sink.Outputs("pred")); got != 0 {
			t.Fatalf("%d predictions published before the worker owned a shard", got)
		}
		owner := map[string]string{}
		for p := range 3 {
			owner[data.Key(p)] = "a"
		}
		own.assign(owner)
		last := waitComplete(t, store, data)
		wait.For(t, time.Minute, 5*time.Millisecond, "the last epoch mixed", func() bool { return a.Mixed() >= last })
		cancel()
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		if got := a.Model().State().Digest(); got != want {
			t.Errorf("the worker holds %x, one that owned every shard from the start %x", got, want)
		}
		if gate.apart.Load() {
			t.Error("the shards handed over at the barrier were read one after another")
		}
		for p := range 3 {
			if got := countOf(sink, "pred", data.Key(p)) + countOf(sink, "dead", data.Key(p)); got != data.Len(p) {
				t.Errorf("shard %d: %d outputs of %d messages", p, got, data.Len(p))
			}
		}
	})
}
