package epochlog_test

import (
	"context"
	"errors"
	"testing"

	"github.com/vmihailenco/msgpack/v5"
	"gocloud.dev/blob"
	"gocloud.dev/blob/memblob"

	"github.com/hyperplane-ml/hyperplane/epochlog"
	"github.com/hyperplane-ml/hyperplane/shardid"
	"github.com/hyperplane-ml/hyperplane/snapshot"
)

// logBody is the body of the epoch log object stored at key in bucket:
// what the fuzz targets below vary, sealed again with its checksum
// (resealed) so that the reader gets past the envelope to the body.
func logBody(f *testing.F, bucket *blob.Bucket, key string) []byte {
	f.Helper()
	data, err := bucket.ReadAll(context.Background(), key)
	if err != nil {
		f.Fatal(err)
	}
	raw, err := snapshot.Unseal(data)
	if err != nil {
		f.Fatal(err)
	}
	return raw
}

// resealed writes raw as the object at key, in an envelope with a good
// checksum; false if raw cannot be sealed.
func resealed(t *testing.T, bucket *blob.Bucket, key string, raw []byte) bool {
	data, err := snapshot.Seal(msgpack.RawMessage(raw))
	if err != nil {
		return false
	}
	if err := bucket.WriteAll(context.Background(), key, data, nil); err != nil {
		t.Fatal(err)
	}
	return true
}

// FuzzBoundary: whatever body a boundary object holds, reading it gives
// the boundary or an error wrapping ErrDamagedLog, and a boundary read is
// one CreateBoundary takes and stores again to the same value.
//
// Run with -fuzzminimizetime 1s: minimizing each new input for a
// minute, the default, leaves little time to fuzz.
func FuzzBoundary(f *testing.F) {
	bucket := memblob.OpenBucket(nil)
	s := epochlog.New(snapshot.NewStore(bucket, ""))
	createBoundary(f, s, "clicks", 3)
	key := epochlog.BoundaryKey("", "clicks", 3)
	f.Add(logBody(f, bucket, key))
	f.Add([]byte{0x80})
	f.Add([]byte{0x81, 0xa4, 'k', 'i', 'n', 'd', 0xa8, 'b', 'o', 'u', 'n', 'd', 'a', 'r', 'y'})
	f.Fuzz(func(t *testing.T, raw []byte) {
		if !resealed(t, bucket, key, raw) {
			return
		}
		got, _, err := s.Boundary(context.Background(), "clicks", 3)
		if err != nil {
			if !errors.Is(err, epochlog.ErrDamagedLog) {
				t.Fatalf("an error that is not ErrDamagedLog: %v", err)
			}
			return
		}
		other := epochlog.New(snapshot.NewStore(memblob.OpenBucket(nil), ""))
		again, _, err := other.CreateBoundary(context.Background(), got)
		if err != nil {
			t.Fatalf("a boundary read is refused when stored again: %v\n%+v", err, got)
		}
		if again.Epoch != got.Epoch || again.ConfigDigest != got.ConfigDigest || len(again.Shards) != len(got.Shards) {
			t.Fatalf("stored again as %+v, read as %+v", again, got)
		}
	})
}

// FuzzShardResult: whatever body a shard result holds, reading it against
// its base gives the result, with a state that passes its check, or an
// error wrapping ErrDamagedLog.
func FuzzShardResult(f *testing.F) {
	bucket := memblob.OpenBucket(nil)
	s := epochlog.New(snapshot.NewStore(bucket, ""))
	b, sha := createBoundary(f, s, "clicks", 3)
	base := baseOf(f, b)
	shard := shardid.Kafka("clicks", 2)
	if err := s.WriteShard(context.Background(), shardResult(f, b, sha, shard, "worker-a"), base); err != nil {
		f.Fatal(err)
	}
	key, err := epochlog.ShardKey("", "clicks", 3, shard)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(logBody(f, bucket, key))
	f.Add([]byte{0x80})
	f.Fuzz(func(t *testing.T, raw []byte) {
		if !resealed(t, bucket, key, raw) {
			return
		}
		got, err := s.Shard(context.Background(), "clicks", 3, shard, base)
		if err != nil {
			if !errors.Is(err, epochlog.ErrDamagedLog) {
				t.Fatalf("an error that is not ErrDamagedLog: %v", err)
			}
			return
		}
		if err := got.State.Validate(); err != nil {
			t.Fatalf("a result read holds a state that fails its check: %v", err)
		}
	})
}
