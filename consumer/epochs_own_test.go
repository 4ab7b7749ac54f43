package consumer_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

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

func (l *readCountingLog) Shard(ctx context.Context, model string, e uint64, shard string, base *epochlog.Base) (*epochlog.ShardResult, error) {
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
			cfg.Owned = func() []string { return nil }
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
