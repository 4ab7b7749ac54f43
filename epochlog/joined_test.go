package epochlog_test

import (
	"bytes"
	"context"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/hyperplane-ml/hyperplane/epochlog"
	"github.com/hyperplane-ml/hyperplane/shardid"
)

// joinedBoundary is boundary(t, model, e, writer) of a model that joins
// labels that come later: each shard with its labels' range.
func joinedBoundary(t testing.TB, model string, e uint64, writer string) *epochlog.Boundary {
	b := boundary(t, model, e, writer)
	for i := range b.Shards {
		b.Shards[i].Labels = &epochlog.LabelsRange{From: int64(50 * (e - 1)), To: int64(50 * e)}
	}
	return b
}

// TestJoinedShardResultRoundTrip: a result of a model with labels keeps
// its labels' range, where it reached and its join, which a second
// writer must have the same; one without labels stores none of them.
func TestJoinedShardResultRoundTrip(t *testing.T) {
	eachBackend(t, func(t *testing.T, s fixture) {
		ctx := context.Background()
		b, sha, err := s.CreateBoundary(ctx, joinedBoundary(t, "clicks", 3, "worker-a"))
		if err != nil {
			t.Fatal(err)
		}
		if !b.Shards[0].Equal(joinedBoundary(t, "clicks", 3, "w").Shards[0]) {
			t.Fatalf("the stored boundary lost its labels: %+v", b.Shards[0])
		}
		want := shardResult(t, b, sha, shardid.Kafka("clicks", 2), "worker-a")
		want.Labels, want.Reached, want.Join = b.Shards[1].Labels, want.From+10, []byte{0x81, 0xa1, 'a', 0x01}
		if err := s.WriteShard(ctx, want, baseOf(t, b)); err != nil {
			t.Fatal(err)
		}
		got, err := s.Shard(ctx, "clicks", 3, want.Shard, baseOf(t, b))
		if err == nil {
			// Not stored: a result read has the coordinates its changes name.
			got.Changed = nil
		}
		if err != nil || !reflect.DeepEqual(got, want) {
			t.Fatalf("Shard: %v\n got %+v\nwant %+v", err, got, want)
		}
		if err := got.Verify(b, sha); err != nil {
			t.Fatal(err)
		}
		key, _ := epochlog.ShardKey(s.Prefix(), "clicks", 3, want.Shard)
		if body := storedBody(t, s, key); body["reached"] == nil || body["labels"] == nil || body["join"] == nil {
			t.Fatalf("body %v", body)
		}
		for name, spoil := range map[string]func(r *epochlog.ShardResult){
			"reached": func(r *epochlog.ShardResult) { r.Reached++ },
			"join":    func(r *epochlog.ShardResult) { r.Join = []byte{0x80} },
		} {
			other := shardResult(t, b, sha, shardid.Kafka("clicks", 2), "worker-b")
			other.Labels, other.Reached, other.Join = want.Labels, want.Reached, bytes.Clone(want.Join)
			spoil(other)
			err := s.WriteShard(ctx, other, baseOf(t, b))
			if !errors.Is(err, epochlog.ErrOtherHistory) || !strings.Contains(err.Error(), name) {
				t.Errorf("%s differs: WriteShard: %v, want ErrOtherHistory naming it", name, err)
			}
		}

		// Without labels: none of the keys.
		plain, psha := createBoundary(t, s.Log, "views", 3)
		r := shardResult(t, plain, psha, shardid.Kafka("clicks", 0), "worker-a")
		if err := s.WriteShard(ctx, r, baseOf(t, plain)); err != nil {
			t.Fatal(err)
		}
		pkey, _ := epochlog.ShardKey(s.Prefix(), "views", 3, r.Shard)
		body := storedBody(t, s, pkey)
		for _, k := range []string{"labels", "reached", "join"} {
			if _, ok := body[k]; ok {
				t.Errorf("a result without labels stores %q", k)
			}
		}
	})
}

// TestJoinedRefused: a result of a model with labels whose reached end
// lies outside its range, or that has no join, is refused before it is
// written; one whose labels' range is not its boundary's does not verify.
func TestJoinedRefused(t *testing.T) {
	eachBackend(t, func(t *testing.T, s fixture) {
		ctx := context.Background()
		b, sha, err := s.CreateBoundary(ctx, joinedBoundary(t, "clicks", 3, "worker-a"))
		if err != nil {
			t.Fatal(err)
		}
		for name, tc := range map[string]struct {
			spoil func(r *epochlog.ShardResult)
			named string
		}{
			"reached before": {func(r *epochlog.ShardResult) { r.Reached = r.From - 1 }, "reached"},
			"reached after":  {func(r *epochlog.ShardResult) { r.Reached = r.To + 1 }, "reached"},
			"no join":        {func(r *epochlog.ShardResult) { r.Join = nil }, "no join"},
			"empty, no label": {func(r *epochlog.ShardResult) {
				r.To, r.Reached, r.Labels, r.Messages, r.DeadLetters = r.From, r.From, &epochlog.LabelsRange{From: 3, To: 3}, 0, 0
			}, "empty range"},
		} {
			r := shardResult(t, b, sha, shardid.Kafka("clicks", 2), "worker-a")
			r.Labels, r.Reached, r.Join = b.Shards[1].Labels, r.From, []byte{0x80}
			tc.spoil(r)
			if err := s.WriteShard(ctx, r, baseOf(t, b)); err == nil || !strings.Contains(err.Error(), tc.named) {
				t.Errorf("%s: WriteShard: %v, want a refusal naming %q", name, err, tc.named)
			}
		}
		r := shardResult(t, b, sha, shardid.Kafka("clicks", 2), "worker-a")
		r.Labels, r.Reached, r.Join = &epochlog.LabelsRange{From: 0, To: 1}, r.From, []byte{0x80}
		if err := r.Verify(b, sha); !errors.Is(err, epochlog.ErrOtherHistory) {
			t.Errorf("another labels' range: Verify: %v, want ErrOtherHistory", err)
		}
		// Labels alone make a range that is not empty.
		r = shardResult(t, b, sha, shardid.Kafka("clicks", 10), "worker-a")
		r.Labels, r.Reached, r.Join = b.Shards[2].Labels, r.From, []byte{0x80}
		r.DeadLetters = 0
		if err := s.WriteShard(ctx, r, baseOf(t, b)); err != nil {
			t.Errorf("a range of labels alone: %v", err)
		}
	})
}

// TestJoinedBoundaryFollows: with labels a shard starts within the range
// before it (where that range reached), and reads its labels from where
// they ended.
func TestJoinedBoundaryFollows(t *testing.T) {
	prev := joinedBoundary(t, "clicks", 4, "worker-a")
	good := joinedBoundary(t, "clicks", 5, "worker-b")
	good.Shards[0].From = prev.Shards[0].From + 3
	if err := good.Follows(prev); err != nil {
		t.Fatal(err)
	}
	for name, spoil := range map[string]func(b *epochlog.Boundary){
		"before the range":   func(b *epochlog.Boundary) { b.Shards[0].From = prev.Shards[0].From - 1 },
		"after the range":    func(b *epochlog.Boundary) { b.Shards[0].From = prev.Shards[0].To + 1 },
		"labels gap":         func(b *epochlog.Boundary) { b.Shards[1].Labels.From++ },
		"labels turned off":  func(b *epochlog.Boundary) { b.Shards[2].Labels = nil },
		"labels overlapping": func(b *epochlog.Boundary) { b.Shards[1].Labels.From-- },
	} {
		b := joinedBoundary(t, "clicks", 5, "worker-b")
		spoil(b)
		if err := b.Follows(prev); !errors.Is(err, epochlog.ErrDamagedLog) {
			t.Errorf("%s: Follows: %v, want ErrDamagedLog", name, err)
		}
	}
}
