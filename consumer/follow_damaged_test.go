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
	"gocloud.dev/blob"
	"gocloud.dev/blob/memblob"

	"github.com/hyperplane-ml/hyperplane/consumer"
	kafkaio "github.com/hyperplane-ml/hyperplane/consumer/kafka"
	"github.com/hyperplane-ml/hyperplane/consumer/memory"
	"github.com/hyperplane-ml/hyperplane/epochlog"
	"github.com/hyperplane-ml/hyperplane/internal/testbroker"
	"github.com/hyperplane-ml/hyperplane/internal/wait"
	"github.com/hyperplane-ml/hyperplane/snapshot"
)

// learnedOverKafka is a store in which a worker learned 600 messages of
// a topic of two partitions on kfake in epochs of 50 examples a
// partition, each writing its generation: the store's bucket, the store,
// its generations, the model's digest and a function that opens the
// topic's shards again, for a replay.
func learnedOverKafka(t *testing.T) (*blob.Bucket, *snapshot.Store, []uint64, [32]byte, func() *kafkaio.Shards) {
	t.Helper()
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
	return bucket, store, gens, want, newShards
}

// TestFollowOverADamagedGenerationItOnlyChecks: a live generation in the
// middle of an intact epoch log that no longer reads is nothing the
// replay learns from, only what it checks its epoch against. The replay
// learns that epoch from its boundary as it learns the others, ends at
// the live model, and names the epoch it could not check and why, where
// it stopped at the damaged generation.
func TestFollowOverADamagedGenerationItOnlyChecks(t *testing.T) {
	bucket, store, gens, want, newShards := learnedOverKafka(t)
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

// TestFollowStartAtADamagedGeneration: where retention removed the log's
// start, a replay begins from the oldest generation; when that one does
// not read, the refusal says so and names the way on, the next
// generation as --from-generation, rather than the decode error alone.
func TestFollowStartAtADamagedGeneration(t *testing.T) {
	bucket, store, gens, _, _ := learnedOverKafka(t)
	ctx := context.Background()
	if err := store.Retain(ctx, "mixed", 3); err != nil {
		t.Fatal(err)
	}
	if gens, err := store.Generations(ctx, "mixed"); err != nil || len(gens) != 3 {
		t.Fatalf("generations after retention: %v, %v", gens, err)
	}
	oldest := gens[len(gens)-3]
	damage(t, bucket, oldest)
	_, err := consumer.FollowStart(ctx, epochlog.New(store), "mixed")
	want := fmt.Sprintf("generation %d, where the replay of the epoch log begins (the oldest the log goes on from), does not read", oldest)
	if err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), fmt.Sprintf("--from-generation %d", oldest+1)) {
		t.Fatalf("FollowStart over a damaged oldest generation: %v, want %q and --from-generation %d", err, want, oldest+1)
	}
}
