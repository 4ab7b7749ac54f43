package consumer_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/zap/zaptest"
	"gocloud.dev/blob/memblob"

	"github.com/hyperplane-ml/hyperplane/consumer"
	natsio "github.com/hyperplane-ml/hyperplane/consumer/nats"
	"github.com/hyperplane-ml/hyperplane/internal/testbroker"
	"github.com/hyperplane-ml/hyperplane/internal/wait"
	"github.com/hyperplane-ml/hyperplane/snapshot"
)

// TestWorkerWritesWhatItLearnedWhenTheSourceFails: a worker whose source
// fails for good (here a partition of a stream whose subject transform
// changed) stops with the source's error, having published the outputs of
// what it learned and written a last snapshot of it, as it does at
// shutdown: a restart goes on from there, not from the last snapshot that
// fell due (none here).
func TestWorkerWritesWhatItLearnedWhenTheSourceFails(t *testing.T) {
	ts := testbroker.NATS(t)
	js := ts.JetStream(t)
	cfg := natsio.PartitionedStreamConfig("parted", "parted.*", 1)
	cfg.Storage = jetstream.MemoryStorage
	testbroker.CreateStream(t, js, cfg)
	testbroker.CreateStream(t, js, jetstream.StreamConfig{Name: "PRED", Subjects: []string{"t.PRED"}, Storage: jetstream.MemoryStorage})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	msgs, _ := messages(40)
	for i, m := range msgs {
		if _, err := js.Publish(ctx, fmt.Sprintf("parted.k%d", i), m); err != nil {
			t.Fatal(err)
		}
	}
	log := zaptest.NewLogger(t)
	shards, err := natsio.NewJetStreamShards(ctx, js.Conn(), "parted", 1, log)
	if err != nil {
		t.Fatal(err)
	}
	shards.PartitioningCheck = 10 * time.Millisecond
	shard := shards.Shard(0)
	src, err := shards.Open(ctx, shard, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	sink, err := natsio.NewSink(js.Conn(), true, log)
	if err != nil {
		t.Fatal(err)
	}
	defer sink.Close()
	store := snapshot.NewStore(memblob.OpenBucket(nil), "")
	defer store.Close()
	w := consumer.NewWorker(consumer.WorkerConfig{
		Model:            "m",
		Predictions:      consumer.Destination{Topic: "t.PRED", Sink: sink},
		Snapshots:        snapshot.NewSnapshotter(store, "m", "test", 1, 100, log),
		SnapshotEvery:    1 << 30,
		SnapshotInterval: time.Hour,
	}, src, newModel(t), nil, consumer.NewMetrics(nil), log)
	done := make(chan error, 1)
	go func() { done <- w.Run(context.Background()) }()
	key := shard.String()
	wait.For(t, time.Minute, 10*time.Millisecond, "the outputs of every message published", func() bool {
		return w.Published()[key] >= int64(len(msgs))
	})

	// Two partitions now: the partition's source fails for good.
	cfg = natsio.PartitionedStreamConfig("parted", "parted.*", 2)
	cfg.Storage = jetstream.MemoryStorage
	if _, err := js.UpdateStream(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	var runErr error
	select {
	case runErr = <-done:
	case <-time.After(time.Minute):
		t.Fatal("the worker still runs a minute after its source failed")
	}
	if runErr == nil || !strings.Contains(runErr.Error(), "no longer 1 partitions") {
		t.Fatalf("Run: %v, want the source's error", runErr)
	}
	latest, err := store.Latest(context.Background(), "m", nil)
	if err != nil {
		t.Fatalf("no snapshot after the source failed: %v", err)
	}
	if got := latest.Positions[key]; got != int64(len(msgs)) {
		t.Fatalf("the last snapshot is at %s %d, want %d: what the worker learned before its source failed", key, got, len(msgs))
	}
}
