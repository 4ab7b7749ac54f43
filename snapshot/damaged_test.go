package snapshot_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"gocloud.dev/blob/memblob"

	"github.com/hyperplane-ml/hyperplane/shardid"
	"github.com/hyperplane-ml/hyperplane/snapshot"
	"github.com/hyperplane-ml/hyperplane/snapshot/storetest"
)

// TestDamagedAbove: above the generation a model resumed from, a store
// holds only damaged generations (the newest is named), a newer one that
// reads (resume again), or, for a new model, another model's (refused
// with the key named).
func TestDamagedAbove(t *testing.T) {
	ctx := context.Background()
	bucket := memblob.OpenBucket(nil)
	store := snapshot.NewStore(bucket, "")
	defer store.Close()
	cfg := storetest.GenerationConfig()
	storetest.Write(t, store, "clicks", 1, 2, 3)
	for _, g := range []uint64{2, 3} {
		key := fmt.Sprintf("clicks/%020d.msgpack", g)
		if err := bucket.WriteAll(ctx, key, []byte("damaged"), nil); err != nil {
			t.Fatal(err)
		}
	}

	damaged, newer, err := snapshot.DamagedAbove(ctx, store, "clicks", cfg, 1)
	if err != nil || !slices.Equal(damaged, []uint64{2, 3}) || newer {
		t.Errorf("above 1 of 1, 2*, 3*: damaged %v, newer %v, err %v; want [2 3], false, nil", damaged, newer, err)
	}
	damaged, newer, err = snapshot.DamagedAbove(ctx, store, "clicks", cfg, 3)
	if err != nil || len(damaged) != 0 || newer {
		t.Errorf("above the newest: damaged %v, newer %v, err %v; want none, false, nil", damaged, newer, err)
	}
	storetest.Write(t, store, "clicks", 4)
	damaged, newer, err = snapshot.DamagedAbove(ctx, store, "clicks", cfg, 1)
	if err != nil || !newer {
		t.Errorf("above 1 of 1, 2*, 3*, 4: damaged %v, newer %v, err %v; want newer", damaged, newer, err)
	}
	_, _, err = snapshot.DamagedAbove(ctx, store, "clicks", perceptronGenerationConfig(), 0)
	if err == nil || !strings.HasPrefix(err.Error(), "snapshot.url: ") || !strings.Contains(err.Error(), "model.name") {
		t.Errorf("a new model over another's generations: err = %v, want one naming snapshot.url and model.name", err)
	}
}

// TestPartitionChain: a shard's chain in partition scope lies under
// <model>/partition/<segment>/, and a shard that has no segment is
// refused.
func TestPartitionChain(t *testing.T) {
	ctx := context.Background()
	bucket := memblob.OpenBucket(nil)
	store := snapshot.NewStore(bucket, "")
	defer store.Close()
	chain, err := store.PartitionChain("clicks", shardid.Kafka("events", 3))
	if err != nil {
		t.Fatal(err)
	}
	storetest.Write(t, chain, "clicks", 1)
	keys := storetest.ListKeys(t, bucket, "")
	if want := "clicks/partition/kafka.events.3/clicks/00000000000000000001.msgpack"; len(keys) != 1 || keys[0] != want {
		t.Errorf("keys %v, want [%s]", keys, want)
	}
	for _, shard := range []shardid.ID{{}, shardid.Kafka("a/b", 0)} {
		if _, err := store.PartitionChain("clicks", shard); err == nil {
			t.Errorf("shard %#v, which has no segment, has a chain", shard)
		}
	}
	if _, err := chain.Load(ctx, "clicks", 1); err != nil {
		t.Errorf("the chain's generation does not load: %v", err)
	}
	if snap, err := store.LoadPartition(ctx, "clicks", shardid.Kafka("events", 3), 1); err != nil || snap.Generation != 1 {
		t.Errorf("LoadPartition of the chain's generation: %v, %v", snap, err)
	}
	for _, shard := range []shardid.ID{shardid.Kafka("events", 4), {}} {
		if _, err := store.LoadPartition(ctx, "clicks", shard, 1); !errors.Is(err, snapshot.ErrNotFound) {
			t.Errorf("LoadPartition of %q: %v, want ErrNotFound", shard, err)
		}
	}
}
