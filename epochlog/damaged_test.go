package epochlog_test

import (
	"context"
	"errors"
	"testing"

	"gocloud.dev/blob/memblob"

	"github.com/hyperplane-ml/hyperplane/epochlog"
	"github.com/hyperplane-ml/hyperplane/shardid"
	"github.com/hyperplane-ml/hyperplane/snapshot"
)

// TestWriteShardReplacesADamagedResult: a result damaged at rest is
// written over by the same result learned again, and reads after.
func TestWriteShardReplacesADamagedResult(t *testing.T) {
	ctx := context.Background()
	bucket := memblob.OpenBucket(nil)
	s := epochlog.New(snapshot.NewStore(bucket, ""))
	b, sha := createBoundary(t, s, "clicks", 3)
	base := baseOf(t, b)
	shard := shardid.Kafka("clicks", 2)
	r := shardResult(t, b, sha, shard, "worker-a")
	if err := s.WriteShard(ctx, r, base); err != nil {
		t.Fatal(err)
	}
	key, err := epochlog.ShardKey("", "clicks", 3, shard)
	if err != nil {
		t.Fatal(err)
	}
	data, err := bucket.ReadAll(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	data[len(data)-1] ^= 0xff
	if err := bucket.WriteAll(ctx, key, data, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Shard(ctx, "clicks", 3, shard, base); !errors.Is(err, epochlog.ErrDamagedLog) {
		t.Fatalf("the damaged result reads: %v", err)
	}
	if err := s.WriteShard(ctx, shardResult(t, b, sha, shard, "worker-b"), base); err != nil {
		t.Fatalf("writing the result over the damaged one: %v", err)
	}
	got, err := s.Shard(ctx, "clicks", 3, shard, base)
	if err != nil || got.State.Digest() != r.State.Digest() {
		t.Fatalf("after the rewrite: %v", err)
	}
}
