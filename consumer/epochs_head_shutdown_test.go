package consumer_test

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"gocloud.dev/blob/memblob"

	"github.com/hyperplane-ml/hyperplane/consumer/memory"
	"github.com/hyperplane-ml/hyperplane/epochlog"
	"github.com/hyperplane-ml/hyperplane/snapshot"
)

// TestEpochsShutdownWritesTheResultsTheHeadsFlush: with labels that come
// later, a range whose examples are all learned waits for its shard's
// head to publish its predictions before its result is written. When the
// worker stops then, the heads flush their outputs within the shutdown
// timeout, and the results of the complete ranges are written, as
// docs/scale-out.md (3.6, SIGTERM) promises: the other workers wait for
// them, and the next start need not learn them again.
func TestEpochsShutdownWritesTheResultsTheHeadsFlush(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		j := newJoinedEpochs(t, 100)
		store := snapshot.NewStore(memblob.OpenBucket(nil), "")
		defer store.Close()
		sink := memory.NewSink()
		sink.Fail(errors.New("outputs unreachable"))
		cfg := j.config(store, sink, "w")
		// One epoch of every record; batches that hold a head's reads
		// in its queue while its outputs are refused.
		cfg.EpochExamples, cfg.Interval = 1<<20, time.Hour
		cfg.Worker.Batch = 1024
		cfg.Worker.ShutdownTimeout = 20 * time.Second
		ctx, cancel := context.WithCancel(context.Background())
		_, done := j.start(ctx, cfg, store)
		// Every range of epoch 1 learned, and waiting for its shard's
		// head, whose predictions the sink refuses.
		synctest.Wait()
		if sink.Attempts() == 0 {
			t.Fatal("no output was refused")
		}
		cancel()
		sink.Fail(nil)
		if err := <-done; err != nil {
			t.Fatalf("Run: %v", err)
		}
		if gens, _ := store.Generations(context.Background(), "mixed"); len(gens) > 0 && gens[len(gens)-1] >= 1 {
			return
		}
		lg := epochlog.New(store)
		for p := range joinPartitions {
			ok, err := lg.ShardExists(context.Background(), "mixed", 1, j.ex.Shard(p))
			if err != nil {
				t.Fatal(err)
			}
			if !ok {
				t.Errorf("the result of shard %s in epoch 1, whose range was complete and whose head flushed its outputs at shutdown, was not written", j.ex.Shard(p))
			}
		}
	})
}
