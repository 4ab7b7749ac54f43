package snapshot_test

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/hyperplane-ml/hyperplane/shardid"
	"github.com/hyperplane-ml/hyperplane/snapshot"
	"github.com/hyperplane-ml/hyperplane/snapshot/storetest"
)

// TestSubLayout: a shard's chain written through store.Sub lies under
// <prefix>/<model>/partition/<segment>/<model>/, where the Sub lists,
// loads and retains it as a model of its own and the parent's
// generations do not see it; nested Subs and a path with slashes at its
// ends name the same store.
func TestSubLayout(t *testing.T) {
	storetest.EachBackend(t, func(t *testing.T, s storetest.Fixture) {
		ctx := context.Background()
		seg, err := shardid.Kafka("clicks", 3).Segment()
		if err != nil {
			t.Fatal(err)
		}
		sub := s.Sub("clicks/partition/" + seg)
		storetest.Write(t, sub, "clicks", 1, 2, 3)
		storetest.Write(t, s.Store, "clicks", 1)

		tree := s.Prefix() + "/clicks/partition/kafka.clicks.3/clicks/"
		want := []string{tree + "00000000000000000001.msgpack", tree + "00000000000000000002.msgpack", tree + "00000000000000000003.msgpack"}
		if got := storetest.ListKeys(t, s.Raw, s.Prefix()+"/clicks/partition/"); !slices.Equal(got, want) {
			t.Fatalf("the bucket holds %q under the partition tree, want %q", got, want)
		}
		if gens, err := s.Generations(ctx, "clicks"); err != nil || !slices.Equal(gens, []uint64{1}) {
			t.Fatalf("the parent's generations: %v (%v), want its own [1]", gens, err)
		}
		for name, other := range map[string]*snapshot.Store{
			"nested":  s.Sub("clicks").Sub("partition").Sub(seg),
			"slashes": s.Sub("/clicks/partition/" + seg + "/"),
		} {
			if gens, err := other.Generations(ctx, "clicks"); err != nil || !slices.Equal(gens, []uint64{1, 2, 3}) {
				t.Fatalf("%s: generations %v (%v), want [1 2 3]", name, gens, err)
			}
		}
		latest, err := sub.Latest(ctx, "clicks", nil)
		if err != nil || latest.Generation != 3 || latest.Model != "clicks" {
			t.Fatalf("the chain's latest: %+v (%v), want generation 3 of clicks", latest, err)
		}
		if err := sub.Retain(ctx, "clicks", 1); err != nil {
			t.Fatal(err)
		}
		if got := storetest.ListKeys(t, s.Raw, s.Prefix()+"/clicks/partition/"); !slices.Equal(got, want[2:]) {
			t.Fatalf("after retaining 1 the tree holds %q, want %q", got, want[2:])
		}
		if gens, err := s.Generations(ctx, "clicks"); err != nil || !slices.Equal(gens, []uint64{1}) {
			t.Fatalf("retention in the chain touched the parent: %v (%v)", gens, err)
		}
	})
}

// TestPartitionShards: the shards that have a chain of the model, in
// shard order, and none of another model's or of a directory that names
// no shard.
func TestPartitionShards(t *testing.T) {
	storetest.EachBackend(t, func(t *testing.T, s storetest.Fixture) {
		ctx := context.Background()
		if shards, err := s.PartitionShards(ctx, "clicks"); err != nil || len(shards) != 0 {
			t.Fatalf("an empty store: shards %v (%v), want none", shards, err)
		}
		want := []shardid.ID{shardid.Kafka("clicks", 2), shardid.Kafka("clicks", 10), shardid.Kafka("clicks.v2", 0)}
		for _, shard := range slices.Backward(want) {
			chain, err := s.PartitionChain("clicks", shard)
			if err != nil {
				t.Fatal(err)
			}
			storetest.Write(t, chain, "clicks", 1)
		}
		other, err := s.PartitionChain("views", shardid.Kafka("views", 0))
		if err != nil {
			t.Fatal(err)
		}
		storetest.Write(t, other, "views", 1)
		storetest.Write(t, s.Sub("clicks/partition/no-shard"), "clicks", 1)
		storetest.Write(t, s.Store, "clicks", 1)
		if shards, err := s.PartitionShards(ctx, "clicks"); err != nil || !slices.Equal(shards, want) {
			t.Fatalf("shards %v (%v), want %v", shards, err, want)
		}
	})
}

// TestSubFences: a Sub creates keys only if absent, as its parent does:
// a second writer of a chain's generation, through another store's Sub,
// is fenced; and of writers racing for one generation exactly one wins.
func TestSubFences(t *testing.T) {
	storetest.EachBackend(t, func(t *testing.T, s storetest.Fixture) {
		ctx := context.Background()
		const path = "clicks/partition/kafka.clicks.0"
		storetest.Write(t, s.Sub(path), "clicks", 1)
		second := storetest.Generation(t, "clicks", 1)
		second.Writer = "worker-b"
		if err := s.Another().Sub(path).Write(ctx, second); !errors.Is(err, snapshot.ErrFenced) {
			t.Fatalf("a second writer of generation 1: %v, want ErrFenced", err)
		}

		const writers = 8
		subs := make([]*snapshot.Store, writers)
		for i := range subs {
			subs[i] = s.Another().Sub(path)
		}
		for gen := uint64(2); gen <= 6; gen++ {
			errs := make([]error, writers)
			start := make(chan struct{})
			var wg sync.WaitGroup
			for i := range writers {
				snap := storetest.Generation(t, "clicks", gen)
				snap.Writer = fmt.Sprintf("worker-%d", i)
				wg.Go(func() {
					<-start
					errs[i] = subs[i].Write(ctx, snap)
				})
			}
			close(start)
			wg.Wait()
			won := 0
			for i, err := range errs {
				switch {
				case err == nil:
					won++
				case !errors.Is(err, snapshot.ErrFenced):
					t.Fatalf("generation %d, writer %d: %v, want ErrFenced", gen, i, err)
				}
			}
			if won != 1 {
				t.Fatalf("generation %d: %d writers won, want 1", gen, won)
			}
		}
	})
}

// TestSubFileCreatesByLink: on a file:// store a Sub creates its keys by
// link, as its parent does, not by fileblob's writer, which leaves an
// attribute file beside every object it writes.
func TestSubFileCreatesByLink(t *testing.T) {
	s := storetest.Backends()[1].Open(t, "models")
	if s.Dir == "" {
		t.Fatal("the second backend is not file://")
	}
	ctx := context.Background()
	storetest.Write(t, s.Sub("clicks/partition/kafka.clicks.0"), "clicks", 1, 2)
	if err := s.Raw.WriteAll(ctx, "models/by-fileblob", []byte("x"), nil); err != nil {
		t.Fatal(err)
	}
	var attrs []string
	err := filepath.WalkDir(s.Dir, func(path string, d fs.DirEntry, err error) error {
		if strings.HasSuffix(path, ".attrs") {
			attrs = append(attrs, strings.TrimPrefix(filepath.ToSlash(path), filepath.ToSlash(s.Dir)+"/"))
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"models/by-fileblob.attrs"}; !slices.Equal(attrs, want) {
		t.Fatalf("attribute files %q, want only fileblob's own %q", attrs, want)
	}
}

// TestSubCloseKeepsTheBucket: closing a Sub leaves its parent and the
// parent's other Subs working; closing the parent ends them all.
func TestSubCloseKeepsTheBucket(t *testing.T) {
	storetest.EachBackend(t, func(t *testing.T, s storetest.Fixture) {
		ctx := context.Background()
		a, b := s.Sub("clicks/partition/kafka.clicks.0"), s.Sub("clicks/partition/kafka.clicks.1")
		storetest.Write(t, a, "clicks", 1)
		if err := a.Close(); err != nil {
			t.Fatalf("closing a Sub: %v", err)
		}
		storetest.Write(t, s.Store, "clicks", 1)
		storetest.Write(t, b, "clicks", 1)
		if _, err := s.Sub("clicks/partition/kafka.clicks.0").Load(ctx, "clicks", 1); err != nil {
			t.Fatalf("the closed Sub's chain, through a new Sub: %v", err)
		}

		parent := s.Another()
		c := parent.Sub("clicks/partition/kafka.clicks.1")
		if err := parent.Close(); err != nil {
			t.Fatal(err)
		}
		if _, err := c.Generations(ctx, "clicks"); err == nil {
			t.Error("a Sub of a closed store still lists")
		}
	})
}
