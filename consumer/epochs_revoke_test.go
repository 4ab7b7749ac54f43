package consumer_test

import (
	"bytes"
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/vmihailenco/msgpack/v5"
	"gocloud.dev/blob/memblob"

	"github.com/hyperplane-ml/hyperplane/consumer"
	"github.com/hyperplane-ml/hyperplane/consumer/memory"
	"github.com/hyperplane-ml/hyperplane/epochlog"
	"github.com/hyperplane-ml/hyperplane/internal/wait"
	"github.com/hyperplane-ml/hyperplane/shardid"
	"github.com/hyperplane-ml/hyperplane/snapshot"
)

// heldShards holds the reading of one shard after its first fetch until
// release is closed or the reader's context is done.
type heldShards struct {
	*memory.Log
	shard   string
	release <-chan struct{}
}

func (h *heldShards) Open(ctx context.Context, shard shardid.ID, from int64) (consumer.Source, error) {
	src, err := h.Log.Open(ctx, shard, from)
	if err != nil || shard.String() != h.shard {
		return src, err
	}
	return &heldSource{Source: src, release: h.release}, nil
}

type heldSource struct {
	consumer.Source
	release <-chan struct{}
	fetched bool
}

func (s *heldSource) Fetch(ctx context.Context, max int) ([]consumer.Message, error) {
	if s.fetched {
		select {
		case <-s.release:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	s.fetched = true
	return s.Source.Fetch(ctx, max)
}

// revokeLog is two partitions of n messages each, all written before any
// worker starts.
func revokeLog(n int) *memory.Log {
	log := memory.NewLog("ex", 2)
	for p := range 2 {
		msgs, _ := messages(n + 5*p)
		log.Append(p, msgs...)
	}
	return log
}

// revokeConfig learns the whole of each partition in one epoch.
func revokeConfig(data *memory.Log, store *snapshot.Store, sink *memory.Sink, writer string) consumer.EpochConfig {
	cfg := epochConfig(data, store, sink, writer)
	cfg.EpochExamples = 1 << 20
	return cfg
}

// countOf counts the outputs in topic of sink whose event id is in shard.
func countOf(sink *memory.Sink, topic, shard string) int {
	n := 0
	for _, o := range sink.Outputs(topic) {
		if bytes.HasPrefix(o.Key, []byte(shard+"/")) {
			n++
		}
	}
	return n
}

// TestEpochsRevokedRangeStops: worker a learns both shards of an epoch
// and worker b none; once a has published part of shard 1's range, the
// shard is given to b. a's range stops at once: its outputs for the shard
// stop growing and it does not write the shard's result, which b writes
// after learning the whole range from its start. Both end with the model
// one worker learns alone, and what a published b published again, with
// the same content.
func TestEpochsRevokedRangeStops(t *testing.T) {
	const n = 2000
	want := func() [32]byte {
		data := revokeLog(n)
		store := snapshot.NewStore(memblob.OpenBucket(nil), "")
		return runEpochs(t, data, revokeConfig(data, store, memory.NewSink(), "one"), store)
	}()
	synctest.Test(t, func(t *testing.T) {
		data := revokeLog(n)
		shard0, shard1 := data.Key(0), data.Key(1)
		store := snapshot.NewStore(memblob.OpenBucket(nil), "")
		own := newOwnership()
		own.set(map[string]string{shard0: "a", shard1: "a"})
		release := make(chan struct{})
		sinkA, sinkB := memory.NewSink(), memory.NewSink()

		cfgA := revokeConfig(data, store, sinkA, "a")
		cfgA.Shards = &heldShards{Log: data, shard: shard1, release: release}
		cfgA.Owned, cfgA.Changed = own.owned("a"), own.changes
		cfgB := revokeConfig(data, store, sinkB, "b")
		cfgB.Owned, cfgB.Changed = own.owned("b"), own.changes

		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		a, doneA := startEpochs(t, ctx, cfgA, store)
		b, doneB := startEpochs(t, ctx, cfgB, store)
		// a has learned shard 0, and published the first batch of shard
		// 1's range, which it is held in; b waits for both results.
		synctest.Wait()
		published := countOf(sinkA, "pred", shard1) + countOf(sinkA, "dead", shard1)
		if published == 0 || published >= n {
			t.Fatalf("a published %d outputs of shard 1 before it was revoked, want part of its %d", published, n)
		}

		own.set(map[string]string{shard0: "a", shard1: "b"})
		synctest.Wait()
		close(release)
		last := waitComplete(t, store, data)
		for _, w := range []*consumer.Epochs{a, b} {
			wait.For(t, time.Minute, 5*time.Millisecond, "the last epoch mixed", func() bool { return w.Mixed() >= last })
		}
		cancel()
		for _, done := range []<-chan error{doneA, doneB} {
			if err := <-done; err != nil {
				t.Fatal(err)
			}
		}

		if got := countOf(sinkA, "pred", shard1) + countOf(sinkA, "dead", shard1); got != published {
			t.Errorf("a published %d outputs of shard 1, %d of them after the shard was revoked", got, got-published)
		}
		for e := uint64(1); e <= last; e++ {
			// The writer is read from the stored body: reading the
			// result's state would need the epoch's base.
			key, err := epochlog.ShardKey(store.Prefix(), "mixed", e, data.Shard(1))
			if err != nil {
				t.Fatal(err)
			}
			data, err := store.ReadObject(context.Background(), key)
			if errors.Is(err, snapshot.ErrNotFound) {
				continue // an empty range has no result
			}
			var res struct {
				Writer string `msgpack:"writer"`
			}
			body, err := snapshot.Unseal(data)
			if err == nil {
				err = msgpack.Unmarshal(body, &res)
			}
			if err != nil {
				t.Fatalf("epoch %d's result of shard 1: %v", e, err)
			}
			if res.Writer != "b" {
				t.Errorf("epoch %d's result of shard 1 was written by %s, after it was revoked from it", e, res.Writer)
			}
		}
		if got := countOf(sinkB, "pred", shard1) + countOf(sinkB, "dead", shard1); got != data.Len(1) {
			t.Errorf("b published %d outputs of shard 1, want the whole range of %d", got, data.Len(1))
		}
		again := map[string]string{}
		for _, o := range sinkB.Outputs("pred") {
			again[string(o.Key)] = string(o.Value)
		}
		for _, o := range sinkA.Outputs("pred") {
			if v, ok := again[string(o.Key)]; bytes.HasPrefix(o.Key, []byte(shard1+"/")) && (!ok || v != string(o.Value)) {
				t.Fatalf("a's event %s is not b's:\n%s\n%s", o.Key, o.Value, v)
			}
		}
		for name, w := range map[string]*consumer.Epochs{"a": a, "b": b} {
			if got := w.Model().State().Digest(); got != want {
				t.Errorf("worker %s holds %x, one worker alone %x", name, got, want)
			}
		}
	})
}

// rebalancing is an ownership that can be between two assignments, as a
// consumer group is during a rebalance: nobody owns anything, and that
// is no assignment.
type rebalancing struct {
	*ownership
	assigned atomic.Bool
}

func (r *rebalancing) between() {
	r.assigned.Store(false)
	r.set(map[string]string{})
}

func (r *rebalancing) assign(owner map[string]string) {
	r.assigned.Store(true)
	r.set(owner)
}

// TestEpochsRangeGoesOnThroughARebalance: between two assignments a range
// goes on; when the next one gives its shard back, it was never stopped:
// its outputs are published once, its result is its learner's, and
// nothing is learned again.
func TestEpochsRangeGoesOnThroughARebalance(t *testing.T) {
	const n = 2000
	synctest.Test(t, func(t *testing.T) {
		data := revokeLog(n)
		shard0, shard1 := data.Key(0), data.Key(1)
		store := snapshot.NewStore(memblob.OpenBucket(nil), "")
		own := &rebalancing{ownership: newOwnership()}
		own.assign(map[string]string{shard0: "a", shard1: "a"})
		release := make(chan struct{})
		sink := memory.NewSink()
		cfg := revokeConfig(data, store, sink, "a")
		cfg.Shards = &heldShards{Log: data, shard: shard1, release: release}
		cfg.Owned, cfg.Changed, cfg.Settled = own.owned("a"), own.changes, own.assigned.Load

		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		a, done := startEpochs(t, ctx, cfg, store)
		synctest.Wait()
		own.between()
		synctest.Wait()
		own.assign(map[string]string{shard0: "a", shard1: "a"})
		synctest.Wait()
		close(release)
		last := waitComplete(t, store, data)
		wait.For(t, time.Minute, 5*time.Millisecond, "the last epoch mixed", func() bool { return a.Mixed() >= last })
		cancel()
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		if got := countOf(sink, "pred", shard1) + countOf(sink, "dead", shard1); got != data.Len(1) {
			t.Errorf("a published %d outputs of shard 1's %d messages: its range was stopped and learned again", got, data.Len(1))
		}
	})
}
