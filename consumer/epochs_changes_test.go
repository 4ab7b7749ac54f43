package consumer_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/vmihailenco/msgpack/v5"
	"gocloud.dev/blob/memblob"

	"github.com/hyperplane-ml/hyperplane/consumer/memory"
	"github.com/hyperplane-ml/hyperplane/epochlog"
	"github.com/hyperplane-ml/hyperplane/internal/wait"
	"github.com/hyperplane-ml/hyperplane/learner"
	"github.com/hyperplane-ml/hyperplane/shardid"
	"github.com/hyperplane-ml/hyperplane/snapshot"
)

// TestEpochsWriteChanges: every result the epochs write holds the
// weights and variances that changed from the epoch's base, not the
// whole state; the first epoch's results read against the new model
// they were learned from, and not against another.
func TestEpochsWriteChanges(t *testing.T) {
	log := epochLog(300)
	store := snapshot.NewStore(memblob.OpenBucket(nil), "")
	cfg := epochConfig(log, store, memory.NewSink(), "one")
	cfg.SnapshotEvery = 0 // no generation: retention keeps every result
	ctx, cancel := context.WithCancel(context.Background())
	x, done := startEpochs(t, ctx, cfg, store)
	last := waitComplete(t, store, log)
	wait.For(t, time.Minute, 5*time.Millisecond, "the last epoch mixed", func() bool { return x.Mixed() >= last })

	lg := epochlog.New(store)
	dimension := epochLearner().Dimension()
	results := 0
	for e := uint64(1); e <= last; e++ {
		b, _, err := lg.Boundary(ctx, "mixed", e)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range b.Shards {
			if r.From == r.To {
				continue
			}
			key, err := epochlog.ShardKey(store.Prefix(), "mixed", e, r.Shard)
			if err != nil {
				t.Fatal(err)
			}
			data, err := store.ReadObject(ctx, key)
			if err != nil {
				t.Fatal(err)
			}
			raw, err := snapshot.Unseal(data)
			if err != nil {
				t.Fatal(err)
			}
			var body struct {
				Form    string         `msgpack:"state_form"`
				State   map[string]any `msgpack:"state"`
				Changes map[string]struct {
					Index []byte `msgpack:"index"`
				} `msgpack:"changes"`
			}
			if err := msgpack.Unmarshal(raw, &body); err != nil {
				t.Fatal(err)
			}
			if body.Form != "changes" || body.State["weights"] != nil || len(body.Changes) != 2 {
				t.Fatalf("epoch %d, shard %s: state_form %q, changes of %d vectors", e, r.Shard, body.Form, len(body.Changes))
			}
			if n := len(body.Changes["weights"].Index) / 4; n == 0 || n >= dimension/2 {
				t.Fatalf("epoch %d, shard %s: %d of %d weights changed", e, r.Shard, n, dimension)
			}
			results++
		}
	}
	if results < 6 {
		t.Fatalf("%d results", results)
	}

	fresh, err := learner.New(epochLearner())
	if err != nil {
		t.Fatal(err)
	}
	base := epochlog.NewBase(fresh.State())
	res, err := lg.Shard(ctx, "mixed", 1, shardid.Memory("ex", 0), base)
	if err != nil {
		t.Fatal(err)
	}
	if res.State.Labeled == 0 || res.State.Digest() == base.Digest() {
		t.Fatalf("the first epoch's result learned nothing: %d labeled", res.State.Labeled)
	}
	other := epochlog.NewBase(res.State)
	if _, err := lg.Shard(ctx, "mixed", 1, shardid.Memory("ex", 0), other); !errors.Is(err, epochlog.ErrOtherHistory) {
		t.Fatalf("a result read against another base: %v, want ErrOtherHistory", err)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}
