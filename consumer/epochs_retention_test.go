package consumer_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap/zaptest"
	"gocloud.dev/blob/memblob"

	"github.com/hyperplane-ml/hyperplane/consumer"
	kafkaio "github.com/hyperplane-ml/hyperplane/consumer/kafka"
	"github.com/hyperplane-ml/hyperplane/consumer/memory"
	"github.com/hyperplane-ml/hyperplane/internal/testbroker"
	"github.com/hyperplane-ml/hyperplane/internal/wait"
	"github.com/hyperplane-ml/hyperplane/snapshot"
)

// TestEpochsRetentionGapIsTheError: a worker learning in epochs whose
// next range of one partition retention has deleted stops with that
// partition's error alone. The range of the other partition, which the
// failure cancelled (held here by an output outage), added what its
// client made of that ("context canceled", or a broker's "Unknown"), first
// when its partition came first.
func TestEpochsRetentionGapIsTheError(t *testing.T) {
	c := testbroker.Kafka(t)
	c.CreateTopic(t, "ex", 2)
	cl := c.Client(t)
	produce := func(n int) {
		t.Helper()
		msgs, _ := messages(n)
		for p := range int32(2) {
			for _, m := range msgs {
				if err := cl.ProduceSync(context.Background(), &kgo.Record{Topic: "ex", Partition: p, Value: m}).FirstErr(); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	produce(100)
	shards, err := kafkaio.NewShards(kafkaio.Config{Brokers: c.ListenAddrs()}, []string{"ex"}, zaptest.NewLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	defer shards.Close()
	store := snapshot.NewStore(memblob.OpenBucket(nil), "")
	cfg := epochConfig(nil, store, memory.NewSink(), "w1")
	cfg.Shards, cfg.SnapshotEvery = shards, 50
	ctx, cancel := context.WithCancel(context.Background())
	_, done := startEpochs(t, ctx, cfg, store)
	wait.For(t, time.Minute, 5*time.Millisecond, "a generation at both partitions' ends", func() bool {
		snap, err := store.Latest(context.Background(), "mixed", nil)
		return err == nil && snap.Positions["kafka:ex/0"] == 100 && snap.Positions["kafka:ex/1"] == 100
	})
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}

	produce(50)
	c.DeleteRecords(t, "ex", 0, 110)

	sink := memory.NewSink()
	sink.Fail(errors.New("outputs down"))
	cfg = epochConfig(nil, store, sink, "w2")
	cfg.Shards = shards
	snap, err := store.Latest(context.Background(), "mixed", nil)
	if err != nil {
		t.Fatal(err)
	}
	x := continueEpochs(t, snap, cfg, nil, zaptest.NewLogger(t))
	stopped := make(chan error, 1)
	go func() { stopped <- x.Run(context.Background()) }()
	select {
	case err = <-stopped:
	case <-time.After(time.Minute):
		t.Fatal("Run did not stop within a minute over a deleted range")
	}
	if !errors.Is(err, consumer.ErrFatal) || !strings.Contains(err.Error(), "kafka:ex/0") || !strings.Contains(err.Error(), "refusing to skip") ||
		strings.Contains(err.Error(), "kafka:ex/1") {
		t.Fatalf("Run: %v\nwant the deleted range of kafka:ex/0 alone", err)
	}
}
