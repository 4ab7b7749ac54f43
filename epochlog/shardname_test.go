package epochlog_test

import (
	"bytes"
	"context"
	"errors"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/hyperplane-ml/hyperplane/epochlog"
	"github.com/hyperplane-ml/hyperplane/shardid"
	"github.com/hyperplane-ml/hyperplane/snapshot/storetest"
	"github.com/vmihailenco/msgpack/v5"
)

// TestShardNamesStored: a boundary and a shard result hold their shards
// by name, a shardid.ID's String. Read back, each names the same shard,
// and written again it gives the same bytes; an object whose shard is a
// name no shard has is damaged, and the error quotes the name.
func TestShardNamesStored(t *testing.T) {
	ctx := context.Background()
	shards := []shardid.ID{
		shardid.Kafka("clicks", 10), shardid.Kafka("clicks", 2), shardid.JetStream("clicks", 3),
		shardid.Stream("views"), shardid.Memory("log", 1),
	}
	slices.SortFunc(shards, shardid.Compare)
	b := boundary(t, "clicks", 3, "worker-a")
	b.Shards = nil
	for i, id := range shards {
		b.Shards = append(b.Shards, epochlog.Range{Shard: id, From: int64(10 * i), To: int64(10*i + 5)})
	}
	s := newFixture(storetest.Backends()[0].Open(t, "models"))
	if _, _, err := s.CreateBoundary(ctx, b); err != nil {
		t.Fatal(err)
	}
	bkey := epochlog.BoundaryKey(s.Prefix(), "clicks", 3)
	for i, r := range storedBody(t, s, bkey)["shards"].([]any) {
		if got, want := r.(map[string]any)["shard"], shards[i].String(); got != want {
			t.Errorf("the boundary stores range %d's shard as %v, want %q", i, got, want)
		}
	}
	got, sha, err := s.Boundary(ctx, "clicks", 3)
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range got.Shards {
		if r.Shard != shards[i] {
			t.Errorf("range %d reads as shard %v, want %v", i, r.Shard, shards[i])
		}
	}

	shard := shardid.JetStream("clicks", 3)
	rkey, err := epochlog.ShardKey(s.Prefix(), "clicks", 3, shard)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.WriteShard(ctx, shardResult(t, got, sha, shard, "worker-a"), baseOf(t, got)); err != nil {
		t.Fatal(err)
	}
	if name := storedBody(t, s, rkey)["shard"]; name != "jetstream:clicks#3" {
		t.Errorf("the result stores its shard as %v, want %q", name, "jetstream:clicks#3")
	}
	res, err := s.Shard(ctx, "clicks", 3, shard, baseOf(t, got))
	if err != nil {
		t.Fatal(err)
	}
	if res.Shard != shard {
		t.Errorf("the result reads as shard %v, want %v", res.Shard, shard)
	}

	// What was read, written to another store, is the same bytes.
	again := newFixture(storetest.Backends()[0].Open(t, "models"))
	if _, againSHA, err := again.CreateBoundary(ctx, got); err != nil || againSHA != sha {
		t.Fatalf("the boundary read and written again: SHA-256 %x, %v; want %x", againSHA, err, sha)
	}
	res.Changed = nil
	if err := again.WriteShard(ctx, res, baseOf(t, got)); err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{bkey, rkey} {
		want, err := s.raw.ReadAll(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		if data, err := again.raw.ReadAll(ctx, key); err != nil || !bytes.Equal(data, want) {
			t.Errorf("%s read and written again differs (%v)", key, err)
		}
	}

	// A name that no shard has does not decode.
	rewrite := func(key string, spoil func(body map[string]any)) {
		t.Helper()
		body := storedBody(t, s, key)
		spoil(body)
		raw, err := msgpack.Marshal(body)
		if err != nil {
			t.Fatal(err)
		}
		if !resealed(t, s.raw, key, raw) {
			t.Fatal("the body does not seal")
		}
	}
	for _, name := range []string{"kafka:clicks/02", "kafka:clicks", "clicks", "jetstream:a.b#1"} {
		rewrite(bkey, func(body map[string]any) { body["shards"].([]any)[1].(map[string]any)["shard"] = name })
		_, _, err := s.Boundary(ctx, "clicks", 3)
		if !errors.Is(err, epochlog.ErrDamagedLog) || !strings.Contains(err.Error(), strconv.Quote(name)) {
			t.Errorf("a boundary with a range of shard %q: %v, want ErrDamagedLog quoting the name", name, err)
		}
		rewrite(rkey, func(body map[string]any) { body["shard"] = name })
		_, err = s.Shard(ctx, "clicks", 3, shard, baseOf(t, got))
		if !errors.Is(err, epochlog.ErrDamagedLog) || !strings.Contains(err.Error(), strconv.Quote(name)) {
			t.Errorf("a result of shard %q: %v, want ErrDamagedLog quoting the name", name, err)
		}
	}
}
