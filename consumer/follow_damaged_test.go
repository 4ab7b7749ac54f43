package consumer_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap/zaptest"
	"gocloud.dev/blob/memblob"

	"github.com/hyperplane-ml/hyperplane/consumer"
	kafkaio "github.com/hyperplane-ml/hyperplane/consumer/kafka"
	"github.com/hyperplane-ml/hyperplane/consumer/memory"
	"github.com/hyperplane-ml/hyperplane/epochlog"
	"github.com/hyperplane-ml/hyperplane/internal/testbroker"
	"github.com/hyperplane-ml/hyperplane/internal/wait"
	"github.com/hyperplane-ml/hyperplane/snapshot"
)

// TestFollowOverADamagedGenerationItOnlyChecks: a live generation in the
// middle of an intact epoch log that no longer reads is nothing the
// replay learns from, only what it checks its epoch against. The replay
// learns that epoch from its boundary as it learns the others, ends at
// the live model, and names the epoch it could not check and why, where
// it stopped at the damaged generation.
func TestFollowOverADamagedGenerationItOnlyChecks(t *testing.T) {
	c := testbroker.Kafka(t)
	c.CreateTopic(t, "ex", 2)
	cl := c.Client(t)
	msgs, _ := messages(600)
	for i, m := range msgs {
		if err := cl.ProduceSync(context.Background(), &kgo.Record{Topic: "ex", Partition: int32(i % 2), Value: m}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	newShards := func() *kafkaio.Shards {
		shards, err := kafkaio.NewShards(kafkaio.Config{Brokers: c.ListenAddrs()}, []string{"ex"}, zaptest.NewLogger(t))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { shards.Close() })
		return shards
	}
	bucket := memblob.OpenBucket(nil)
	store := snapshot.NewStore(bucket, "")
	cfg := epochConfig(nil, store, memory.NewSink(), "w")
	cfg.Shards, cfg.SnapshotEvery, cfg.EpochExamples = newShards(), 1, 50
	ctx, cancel := context.WithCancel(context.Background())
	x, done := startEpochs(t, ctx, cfg, store)
	wait.For(t, time.Minute, 5*time.Millisecond, "a generation at both partitions' ends", func() bool {
		snap, err := store.Latest(context.Background(), "mixed", nil)
		return err == nil && snap.Positions["kafka:ex/0"] == 300 && snap.Positions["kafka:ex/1"] == 300
	})
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	want := x.Model().State().Digest()
	gens, err := store.Generations(context.Background(), "mixed")
	if err != nil || len(gens) < 3 {
		t.Fatalf("generations %v (%v), want at least 3", gens, err)
	}
	damaged := gens[len(gens)/2]
	damage(t, bucket, damaged)

	lg := epochlog.New(store)
	begin, err := consumer.FollowStart(context.Background(), lg, "mixed")
	if err != nil {
		t.Fatal(err)
	}
	out := snapshot.NewStore(memblob.OpenBucket(nil), "")
	rcfg := epochConfig(nil, out, memory.NewSink(), "replay")
	rcfg.Shards, rcfg.EpochExamples = newShards(), 50
	f, err := consumer.Follow(context.Background(), rcfg, lg, epochlog.New(out), begin, epochLearner(), nil, zaptest.NewLogger(t))
	if err != nil {
		t.Fatalf("Follow over an intact log whose generation %d is damaged: %v", damaged, err)
	}
	if got := f.Model.State().Digest(); got != want {
		t.Fatalf("the replay ended at %x, the live model is %x", got, want)
	}
	if slices.Contains(f.Checked, damaged) || !slices.Contains(f.Damaged, damaged) {
		t.Fatalf("checked %v, damaged %v: want epoch %d among the damaged only", f.Checked, f.Damaged, damaged)
	}
	if got := f.NotChecked(gens); !strings.Contains(got, fmt.Sprintf("epochs %d: the live generation is damaged", damaged)) {
		t.Fatalf("NotChecked = %q, want epoch %d named with its damaged generation", got, damaged)
	}
}
