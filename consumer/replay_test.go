package consumer_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"
	"gocloud.dev/blob/memblob"

	"github.com/hyperplane-ml/hyperplane/consumer"
	"github.com/hyperplane-ml/hyperplane/consumer/memory"
	"github.com/hyperplane-ml/hyperplane/internal/wait"
	"github.com/hyperplane-ml/hyperplane/shardid"
	"github.com/hyperplane-ml/hyperplane/snapshot"
)

func TestReplayRange(t *testing.T) {
	msgs, _ := messages(100)
	log := memory.NewLog("in", 1)
	log.Append(0, msgs...)
	src := memory.NewSource(log, nil)
	r := &consumer.Range{Source: src, End: consumer.OffsetBefore(60), Idle: true}
	w := consumer.NewWorker(consumer.WorkerConfig{Model: "m", Batch: 16}, r, newModel(t), nil, nil, zaptest.NewLogger(t))
	ticks := 0
	if err := consumer.ReplayRange(context.Background(), w, r, nil, time.Millisecond, func() { ticks++ }); err != nil {
		t.Fatal(err)
	}
	// Offsets 0 to 59, of which the 50th message is garbage (messages).
	if got := w.Metrics().Examples; got != 59 {
		t.Errorf("examples = %d, want the 59 valid ones before offset 60", got)
	}
	if got := w.Positions()[log.Key(0)]; got != 60 {
		t.Errorf("position = %d, want 60, the next offset after the range", got)
	}
	t.Logf("%d progress ticks", ticks)
}

func TestReplayRangeCancelled(t *testing.T) {
	msgs, _ := messages(30)
	log := memory.NewLog("in", 1)
	log.Append(0, msgs...)
	// The range ends past what the log holds: it is never complete.
	r := &consumer.Range{Source: memory.NewSource(log, nil), End: consumer.OffsetBefore(1000), Idle: true}
	w := consumer.NewWorker(consumer.WorkerConfig{Model: "m", Batch: 16}, r, newModel(t), nil, nil, zaptest.NewLogger(t))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- consumer.ReplayRange(ctx, w, r, nil, 0, nil) }()
	wait.For(t, time.Minute, 5*time.Millisecond, "the log's 30 messages read", func() bool { return r.Messages() == 30 })
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("ReplayRange = %v, want context.Canceled", err)
	}
	if r.Complete() {
		t.Error("the range is complete, though it ends past the log")
	}
}

// TestReplayPartition: each shard's range is learned into its own chain,
// up to the end given, and a second replay into the same store is
// refused (ErrChainExists).
func TestReplayPartition(t *testing.T) {
	data := memory.NewLog("ex", 2)
	first, _ := messages(120)
	second, _ := messages(80)
	data.Append(0, first...)
	data.Append(1, second...)
	store := snapshot.NewStore(memblob.OpenBucket(nil), "")
	logger := zaptest.NewLogger(t)
	p, err := consumer.Open(context.Background(), consumer.Options{
		Model:   "per",
		Learner: epochLearner(),
		Store:   store,
		Resume:  snapshot.ResumeOptions{Writer: "w", Keep: 10, Log: logger},
		Connect: func(context.Context) (consumer.Connection, error) {
			return consumer.Connection{Worker: consumer.WorkerConfig{Model: "per", Batch: 16}, Shards: data, ShardCount: 2}, nil
		},
		PartitionScope: true,
		Log:            logger,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	for _, c := range []struct {
		shard string
		id    shardid.ID
		end   func(m *consumer.Message) (in, last bool)
		want  int64
	}{
		{data.Key(0), shardid.Memory("ex", 0), consumer.OffsetBefore(100), 100},
		{data.Key(1), shardid.Memory("ex", 1), consumer.OffsetBefore(int64(len(second))), int64(len(second))},
	} {
		w, err := p.ReplayPartition(context.Background(), c.id, c.end)
		if err != nil {
			t.Fatalf("%s: %v", c.shard, err)
		}
		if got := w.Positions(); len(got) != 1 || got[c.shard] != c.want {
			t.Errorf("%s: positions %v, want %d of it alone", c.shard, got, c.want)
		}
		chain, err := store.PartitionChain("per", c.id)
		if err != nil {
			t.Fatal(err)
		}
		snap, err := chain.Latest(context.Background(), "per", logger)
		if err != nil {
			t.Fatalf("%s: the chain's generation: %v", c.shard, err)
		}
		if snap.Positions[c.shard] != c.want || snap.State.Digest() != w.Model().State().Digest() {
			t.Errorf("%s: the chain holds positions %v, want the worker's model at %d", c.shard, snap.Positions, c.want)
		}
	}
	if _, err := p.ReplayPartition(context.Background(), data.Shard(0), nil); !errors.Is(err, consumer.ErrChainExists) {
		t.Fatalf("a second replay into the chain: %v, want ErrChainExists", err)
	}
}

// TestAwaitJoinedCancelled: a worker that stopped cleanly because ctx
// was cancelled is no failure of the worker: AwaitJoined, which may take
// that stop before it sees ctx done (both ready at once), reports ctx's
// error, not "the worker stopped" with no cause, so that ReplayRange
// returns ctx's error as it says.
func TestAwaitJoinedCancelled(t *testing.T) {
	log := memory.NewLog("in", 1)
	labels := memory.NewSource(memory.NewLog("labels", 1), nil)
	w := consumer.NewWorker(consumer.WorkerConfig{Model: "m"}, memory.NewSource(log, nil), newModel(t), nil, nil, zaptest.NewLogger(t))
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	// Go's select takes either of two ready cases at random: 64 tries.
	for range 64 {
		stopped := make(chan error, 1)
		stopped <- nil
		if err := w.AwaitJoined(ctx, labels, func() int64 { return 0 }, stopped); err != nil && !errors.Is(err, context.Canceled) {
			t.Fatalf("AwaitJoined = %v, want nil or context.Canceled", err)
		}
	}
}
