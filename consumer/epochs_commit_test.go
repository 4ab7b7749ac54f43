package consumer_test

import (
	"context"
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
