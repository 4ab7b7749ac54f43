package consumer_test

import (
	"context"
	"maps"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"gocloud.dev/blob/memblob"

	"github.com/hyperplane-ml/hyperplane/consumer/memory"
	"github.com/hyperplane-ml/hyperplane/snapshot"
)

// TestEpochsShutdownBoundsTheCommit: the commit of a generation's
// positions to the broker, for lag monitoring only, waits for a broker
// that does not answer no longer than the worker runs: once the worker
// stops, the commit ends with the rest of the shutdown, and Run writes
// the last mixed model and returns within shutdown.timeout
// (docs/operations.md, "Stopping").
func TestEpochsShutdownBoundsTheCommit(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := snapshot.NewStore(memblob.OpenBucket(nil), "")
		defer store.Close()
		cfg := epochConfig(epochLog(300), store, memory.NewSink(), "w")
		cfg.Worker.ShutdownTimeout = 3 * time.Second
		// A coordinator that never answers: each commit lasts as long as
		// the context it is given.
		var commits atomic.Int32
		cfg.Commit = func(ctx context.Context, _ map[string]int64) error {
			commits.Add(1)
			<-ctx.Done()
			return ctx.Err()
		}
		x := newEpochs(t, cfg)
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- x.Run(ctx) }()
		synctest.Wait()
		if commits.Load() == 0 {
			t.Fatal("no generation was committed")
		}
		start := time.Now()
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
		if took := time.Since(start); took > cfg.Worker.ShutdownTimeout {
			t.Errorf("the shutdown took %v, over its timeout of %v: the commit to a broker that does not answer held it", took, cfg.Worker.ShutdownTimeout)
		}
	})
}

// TestEpochsCommitAGenerationTheyContinueFrom: the group's offsets follow
// the newest durable generation whoever wrote it (docs/scale-out.md,
// 3.6). A worker overtaken by another's generation continues from it
// and commits its positions, though it writes no generation itself;
// before, its partitions' offsets stayed where its own last generation
// was, a lag of everything the other had learned, for good on an idle
// stream.
func TestEpochsCommitAGenerationTheyContinueFrom(t *testing.T) {
	data := epochLog(600)
	store := snapshot.NewStore(memblob.OpenBucket(nil), "")
	defer store.Close()
	cfg := epochConfig(data, store, memory.NewSink(), "ahead")
	cfg.Keep = 1
	runEpochs(t, data, cfg, store)
	ctx := context.Background()
	newest, err := store.Latest(ctx, "mixed", nil)
	if err != nil {
		t.Fatal(err)
	}

	var mu sync.Mutex
	var commits []map[string]int64
	late := epochConfig(data, store, memory.NewSink(), "late")
	late.Keep = 1
	late.Commit = func(_ context.Context, positions map[string]int64) error {
		mu.Lock()
		defer mu.Unlock()
		commits = append(commits, maps.Clone(positions))
		return nil
	}
	x := newEpochs(t, late)
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- x.Run(runCtx) }()
	finalDigest(t, x, done, cancel, newest.Generation)
	mu.Lock()
	defer mu.Unlock()
	if len(commits) == 0 || !maps.Equal(commits[len(commits)-1], newest.Positions) {
		t.Fatalf("commits %v, want the last at generation %d's positions %v", commits, newest.Generation, newest.Positions)
	}
}
