package consumer_test

import (
	"fmt"
	"sync"

	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hyperplane-ml/hyperplane/consumer"
	"github.com/hyperplane-ml/hyperplane/shardid"

	"gocloud.dev/blob/memblob"

	"github.com/hyperplane-ml/hyperplane/consumer/memory"
	"github.com/hyperplane-ml/hyperplane/epochlog"
	"github.com/hyperplane-ml/hyperplane/internal/wait"
	"github.com/hyperplane-ml/hyperplane/snapshot"
)

// readCountingLog counts the shard results read from the log.
type readCountingLog struct {
	*epochlog.Log
	reads atomic.Int64
}

func (l *readCountingLog) Shard(ctx context.Context, model string, e uint64, shard shardid.ID, base *epochlog.Base) (*epochlog.ShardResult, error) {
	l.reads.Add(1)
	return l.Log.Shard(ctx, model, e, shard, base)
}

// TestEpochsDoNotReadBackTheirOwnResults: a worker that owns every shard
// mixes the results it wrote from memory, without reading one back, and
// holds the model that a worker owning no shard mixes from the same
// results read from the log.
func TestEpochsDoNotReadBackTheirOwnResults(t *testing.T) {
	log := epochLog(300)
	store := snapshot.NewStore(memblob.OpenBucket(nil), "")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	start := func(name string, owned bool) (*readCountingLog, func() [32]byte, func() uint64) {
		lg := &readCountingLog{Log: epochlog.New(store)}
		cfg := epochConfig(log, store, memory.NewSink(), name)
		cfg.Log = lg
		// No generation until the end: retention would delete the
		// results the follower reads.
		cfg.SnapshotEvery = 1 << 40
		if !owned {
			cfg.Owned = func() []shardid.ID { return nil }
		}
		x, done := startEpochs(t, ctx, cfg, store)
		digest := func() [32]byte {
			if err := <-done; err != nil {
				t.Fatalf("worker %s: %v", name, err)
			}
			return x.Model().State().Digest()
		}
		return lg, digest, x.Mixed
	}
	own, ownDigest, ownMixed := start("owner", true)
	read, readDigest, readMixed := start("follower", false)
	last := waitComplete(t, store, log)
	if last < 3 {
		t.Fatalf("the log made %d epochs, want several", last)
	}
	wait.For(t, time.Minute, 5*time.Millisecond, "both workers at the last epoch", func() bool {
		return ownMixed() >= last && readMixed() >= last
	})
	cancel()
	got, want := ownDigest(), readDigest()
	if n := own.reads.Load(); n != 0 {
		t.Errorf("the owner of every shard read %d of its own results back", n)
	}
	if read.reads.Load() == 0 {
		t.Fatal("the follower read no result")
	}
	if got != want {
		t.Fatalf("the owner mixed %x from its results in memory, the follower %x from the log", got, want)
	}
}

// openCountingShards counts the readers opened, by shard.
type openCountingShards struct {
	consumer.Shards
	mu     sync.Mutex
	opened map[string]int
}

func (s *openCountingShards) Open(ctx context.Context, shard shardid.ID, from int64) (consumer.Source, error) {
	s.mu.Lock()
	if s.opened == nil {
		s.opened = map[string]int{}
	}
	s.opened[shard.String()]++
	s.mu.Unlock()
	return s.Shards.Open(ctx, shard, from)
}

// TestEpochsKeepTheirReaders: a worker that owns every shard opens each
// shard's reader once and reads it across every epoch, carrying the
// messages a fetch returns beyond a range's end over to the next range.
// With ranges of 7 messages and fetches of 64 nearly every range begins
// with carried messages; the model is the one learned with fetches of
// one message, which never read beyond an end, and every position has
// one prediction.
func TestEpochsKeepTheirReaders(t *testing.T) {
	log := epochLog(200)
	learn := func(batch int) ([32]byte, *openCountingShards, *memory.Sink) {
		store := snapshot.NewStore(memblob.OpenBucket(nil), "")
		sink := memory.NewSink()
		shards := &openCountingShards{Shards: log}
		cfg := epochConfig(log, store, sink, "alone")
		cfg.Shards = shards
		cfg.Worker.Batch = batch
		cfg.EpochExamples = 7
		cfg.SnapshotEvery = 1 << 40
		ctx, cancel := context.WithCancel(context.Background())
		x, done := startEpochs(t, ctx, cfg, store)
		last := waitComplete(t, store, log)
		return finalDigest(t, x, done, cancel, last), shards, sink
	}
	want, _, _ := learn(1)
	got, shards, sink := learn(64)
	if got != want {
		t.Errorf("fetches of 64 learned %x, fetches of 1 %x", got, want)
	}
	for p := range 6 {
		shard := fmt.Sprintf("memory:ex/%d", p)
		if n := shards.opened[shard]; n != 1 {
			t.Errorf("shard %s: %d readers opened, want 1", shard, n)
		}
	}
	seen := map[string]int{}
	for _, topic := range []string{"pred", "dead"} {
		for _, o := range sink.Outputs(topic) {
			seen[string(o.Key)]++
		}
	}
	for p := range 6 {
		for off := range log.Len(p) {
			if n := seen[fmt.Sprintf("memory:ex/%d/%d", p, off)]; n != 1 {
				t.Fatalf("position %d of partition %d has %d events, want 1", off, p, n)
			}
		}
	}
}
