package consumer_test

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"go.uber.org/zap/zaptest"
	"gocloud.dev/blob/memblob"

	"github.com/hyperplane-ml/hyperplane/consumer"
	"github.com/hyperplane-ml/hyperplane/consumer/memory"
	"github.com/hyperplane-ml/hyperplane/snapshot"
)

// TestWorkerSnapshotsPastAHungCommit: the commit that follows a snapshot
// is for lag monitoring only, so a broker that takes it and never answers
// holds the snapshots no longer than a commit's time limit: the next
// snapshot is written, and the one at shutdown holds every message.
func TestWorkerSnapshotsPastAHungCommit(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		log := memory.NewLog("in", 1)
		msgs, _ := messages(300)
		log.Append(0, msgs...)
		src := memory.NewSource(log, nil)
		src.HangCommits(true)
		defer src.HangCommits(false)
		store := snapshot.NewStore(memblob.OpenBucket(nil), "")
		defer store.Close()
		cfg := consumer.WorkerConfig{
			Model:         "m",
			Predictions:   consumer.Destination{Sink: memory.NewSink(), Topic: "pred"},
			Batch:         50,
			Snapshots:     snapshot.NewSnapshotter(store, "m", "test", 1, 100, zaptest.NewLogger(t)),
			SnapshotEvery: 100,
		}
		w := consumer.NewWorker(cfg, src, newModel(t), nil, nil, zaptest.NewLogger(t))
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- w.Run(ctx) }()
		key := log.Key(0)
		latest := func() int64 {
			s, err := store.Latest(context.Background(), "m", nil)
			if err != nil {
				return 0
			}
			return s.Positions[key]
		}
		// Every message is read at once; its snapshot is written once the
		// commits after the ones before give up, each after its 10 s. Time
		// in the bubble is the fake clock: the minute passes once every
		// goroutine of the worker is blocked, however busy the machine.
		time.Sleep(time.Minute)
		synctest.Wait()
		written := latest()
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
		if written != int64(len(msgs)) {
			t.Errorf("a minute after every message was read the newest snapshot is at %d, want %d: the commit after a snapshot holds the next", written, len(msgs))
		}
		if got := latest(); got != int64(len(msgs)) {
			t.Errorf("the last snapshot is at %d, want %d", got, len(msgs))
		}
	})
}
