package consumertest

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/hyperplane-ml/hyperplane/consumer"
	"github.com/hyperplane-ml/hyperplane/shardid"
	"github.com/hyperplane-ml/hyperplane/wire"
)

// ShardsHarness connects the Shards suite to one kind of Shards on a
// running broker. Every call of Setup gives a fresh, empty place (a new
// topic or stream).
type ShardsHarness struct {
	// Setup creates a topic or stream of the given number of partitions
	// and returns a function that produces values to partition p, in
	// order, and the Shards that read it.
	Setup func(t *testing.T, partitions int) (produce func(p int, values ...[]byte), shards consumer.Shards)
}

// TestShards runs the conformance suite of consumer.Shards on the shards h
// sets up: what the epoch protocol relies on. Every shard that holds a
// message is listed by Ends with its end (an empty one may be left out); Start resolves earliest to the position before a
// shard's first message and latest to its end; Open reads a shard from
// any position, in order, every message once, with Resume rising by
// Spread at most and the last at the end; a Range bounded at a position
// stops there; Commit does nothing. Every shard Ends lists is of one kind
// and has a name Position.Source carries (shardid.ID.String); Start and
// Open refuse the zero ID, no shard.
func TestShards(t *testing.T, h ShardsHarness) {
	const parts, per = 4, 6
	produce, s := h.Setup(t, parts)
	// The last partition stays empty.
	for p := range parts - 1 {
		produce(p, values(p, 0, per)...)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	ends, err := s.Ends(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// A shard that holds no message may be left out (a partition of a
	// JetStream stream has no end of its own until it holds one).
	if len(ends) != parts && len(ends) != parts-1 {
		t.Fatalf("Ends lists %d shards (%v), want %d, or %d without the empty one", len(ends), ends, parts, parts-1)
	}
	if _, err := s.Start(ctx, shardid.ID{}, wire.Start{Kind: wire.StartEarliest}); err == nil {
		t.Error("Start of the zero ID, no shard: no error")
	}
	if src, err := s.Open(ctx, shardid.ID{}, 0); err == nil {
		src.Close()
		t.Error("Open of the zero ID, no shard: no error")
	}
	var kind shardid.Kind
	for shard := range ends {
		if _, err := shard.Segment(); err != nil || (kind != "" && shard.Kind() != kind) {
			t.Fatalf("Ends lists %v: %v, or a kind other than %q", shard, err, kind)
		}
		kind = shard.Kind()
	}
	held := map[int]shardid.ID{} // partition: the shard that holds it
	for shard, end := range ends {
		t.Run(shard.String(), func(t *testing.T) {
			start, err := s.Start(ctx, shard, wire.Start{Kind: wire.StartEarliest})
			if err != nil {
				t.Fatal(err)
			}
			latest, err := s.Start(ctx, shard, wire.Start{Kind: wire.StartLatest})
			if err != nil || latest != end {
				t.Fatalf("Start(latest) = %d, %v; want the end %d", latest, err, end)
			}
			if start == end {
				return // the empty partition
			}
			msgs := readShard(t, s, shard, start, per)
			p := partitionOf(t, msgs[0].Value)
			if other, ok := held[p]; ok {
				t.Fatalf("shards %s and %s both hold partition %d", other, shard, p)
			}
			held[p] = shard
			last := start
			for i, m := range msgs {
				if want := fmt.Sprintf("p%d-m%d", p, i); string(m.Value) != want || m.Position.Source != shard.String() {
					t.Fatalf("message %d: %q of %s, want %q of %s", i, m.Value, m.Position.Source, want, shard)
				}
				if m.Resume <= last || (s.Spread() == 1 && m.Resume != last+1) {
					t.Fatalf("message %d: Resume %d after %d (Spread %d)", i, m.Resume, last, s.Spread())
				}
				last = m.Resume
			}
			if last != end {
				t.Fatalf("the last message's Resume is %d, the shard's end %d", last, end)
			}
			// From a position inside the shard: what follows it.
			rest := readShard(t, s, shard, msgs[2].Resume, per-3)
			if string(rest[0].Value) != string(msgs[3].Value) {
				t.Fatalf("opened after message 2: first %q, want %q", rest[0].Value, msgs[3].Value)
			}
			// A range that ends inside the shard stops there.
			src, err := s.Open(ctx, shard, start)
			if err != nil {
				t.Fatal(err)
			}
			defer src.Close()
			r := &consumer.Range{Source: src, End: consumer.ResumeTo(msgs[3].Resume), Sources: []string{shard.String()}, Last: start}
			var n int
			for {
				batch, err := r.Fetch(ctx, 64)
				if errors.Is(err, consumer.ErrRangeDone) {
					break
				}
				if err != nil {
					t.Fatal(err)
				}
				n += len(batch)
			}
			if n != 4 || r.Returned() != msgs[3].Resume {
				t.Fatalf("a range to message 3 delivered %d messages, the last at %d; want 4, at %d", n, r.Returned(), msgs[3].Resume)
			}
			if err := src.Commit(ctx, map[string]int64{shard.String(): end}); err != nil {
				t.Fatalf("Commit: %v, want nothing done", err)
			}
		})
	}
	if len(held) != parts-1 {
		t.Fatalf("the shards hold partitions %v, want %d of them", held, parts-1)
	}
}

// readShard opens shard at from and reads n messages from it.
func readShard(t *testing.T, s consumer.Shards, shard shardid.ID, from int64, n int) []consumer.Message {
	t.Helper()
	src, err := s.Open(context.Background(), shard, from)
	if err != nil {
		t.Fatalf("Open(%s, %d): %v", shard, from, err)
	}
	defer src.Close()
	return FetchN(t, src, n)
}

// partitionOf is the partition a value of values names.
func partitionOf(t *testing.T, v []byte) int {
	t.Helper()
	var p, i int
	if _, err := fmt.Sscanf(string(v), "p%d-m%d", &p, &i); err != nil {
		t.Fatalf("value %q: %v", v, err)
	}
	return p
}
