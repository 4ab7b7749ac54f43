package nats_test

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	natsgo "github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/zap/zaptest"

	"github.com/hyperplane-ml/hyperplane/consumer"
	"github.com/hyperplane-ml/hyperplane/consumer/consumertest"
	"github.com/hyperplane-ml/hyperplane/consumer/nats"
	"github.com/hyperplane-ml/hyperplane/internal/testbroker"
	"github.com/hyperplane-ml/hyperplane/shardid"
	"github.com/hyperplane-ml/hyperplane/wire"
)

// partitionOf is the partition nats-server's {{partition(n,1)}} puts a
// message published with key in: the FNV-1a hash (32 bits) of the key,
// modulo n.
func partitionOf(key string, n int) int {
	h := fnv.New32a()
	h.Write([]byte(key))
	return int(h.Sum32() % uint32(n))
}

// keysIn returns count keys, "k<i>", that land in partition p of n.
func keysIn(p, n, count int) []string {
	var keys []string
	for i := 0; len(keys) < count; i++ {
		if k := fmt.Sprintf("k%d", i); partitionOf(k, n) == p {
			keys = append(keys, k)
		}
	}
	return keys
}

// sent is a message published to a partitioned stream.
type sent struct {
	seq   int64
	key   string
	value string
	part  int
}

// partitionedStream creates stream name, storing subject (such as ex.*)
// in n partitions.
func partitionedStream(t *testing.T, js jetstream.JetStream, name, subject string, n int) {
	t.Helper()
	cfg := nats.PartitionedStreamConfig(name, subject, n)
	cfg.Storage = jetstream.MemoryStorage
	testbroker.CreateStream(t, js, cfg)
}

// publishKeys publishes one message on <prefix>.<key> for each key, in
// order, and returns them with their sequences and the partitions of n
// their keys hash to.
func publishKeys(t *testing.T, js jetstream.JetStream, prefix string, n int, keys ...string) []sent {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var out []sent
	for i, key := range keys {
		value := fmt.Sprintf("%s-%d", key, i)
		ack, err := js.Publish(ctx, prefix+"."+key, []byte(value))
		if err != nil {
			t.Fatalf("publish %s.%s: %v", prefix, key, err)
		}
		out = append(out, sent{seq: int64(ack.Sequence), key: key, value: value, part: partitionOf(key, n)})
	}
	return out
}

// numberedKeys is "0", "1", ... up to count.
func numberedKeys(from, to int) []string {
	var keys []string
	for i := from; i < to; i++ {
		keys = append(keys, strconv.Itoa(i))
	}
	return keys
}

func newShards(t *testing.T, nc *natsgo.Conn, stream string, n int) *nats.JetStreamShards {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s, err := nats.NewJetStreamShards(ctx, nc, stream, n, zaptest.NewLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func openShard(t *testing.T, s *nats.JetStreamShards, shard shardid.ID, from int64) consumer.Source {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	src, err := s.Open(ctx, shard, from)
	if err != nil {
		t.Fatalf("open %s at %d: %v", shard, from, err)
	}
	t.Cleanup(func() { src.Close() })
	return src
}

// after is what a source of partition k opened at from delivers of msgs.
func after(msgs []sent, k int, from int64) []sent {
	var out []sent
	for _, m := range msgs {
		if m.part == k && m.seq > from {
			out = append(out, m)
		}
	}
	return out
}

// checkDelivered fails unless got are want, in order, each at
// {shard, its sequence} with its sequence as Resume.
func checkDelivered(t *testing.T, shard shardid.ID, got []consumer.Message, want []sent) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d messages, want %d", shard, len(got), len(want))
	}
	for i, m := range got {
		w := want[i]
		if string(m.Value) != w.value || m.Position != (wire.Position{Source: shard.String(), Offset: w.seq}) || m.Resume != w.seq {
			t.Fatalf("%s: message %d is %q at %+v (resume %d), want %q at sequence %d", shard, i, m.Value, m.Position, m.Resume, w.value, w.seq)
		}
		if m.Time.IsZero() {
			t.Fatalf("%s: message %d has no time", shard, i)
		}
	}
}

func ends(t *testing.T, s *nats.JetStreamShards) map[shardid.ID]int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	e, err := s.Ends(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// TestPartitionedStreamConfig: the configuration puts the partition token
// before the first wildcard and hashes what the wildcards match, and the
// server stores a message published on a subject the stream takes where
// the transform says.
func TestPartitionedStreamConfig(t *testing.T) {
	_, _, js := startJetStream(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for i, c := range []struct {
		subject, source, dest string
		publish, stored       string
	}{
		{"ex.*", "ex.*", "ex.{{partition(4,1)}}.{{wildcard(1)}}", "ex.k7", fmt.Sprintf("ex.%d.k7", partitionOf("k7", 4))},
		{"px", "px.*", "px.{{partition(4,1)}}.{{wildcard(1)}}", "px.k8", fmt.Sprintf("px.%d.k8", partitionOf("k8", 4))},
		{"a.*.b.*", "a.*.b.*", "a.{{partition(4,1,2)}}.{{wildcard(1)}}.b.{{wildcard(2)}}", "a.x.b.yz", fmt.Sprintf("a.%d.x.b.yz", partitionOf("xyz", 4))},
		{"gt.>", "gt.>", "gt.{{partition(4)}}.>", "gt.x.y", fmt.Sprintf("gt.%d.x.y", partitionOf("gt.x.y", 4))},
		{"c.*.>", "c.*.>", "c.{{partition(4,1)}}.{{wildcard(1)}}.>", "c.k9.y.z", fmt.Sprintf("c.%d.k9.y.z", partitionOf("k9", 4))},
	} {
		name := fmt.Sprintf("CFG%d", i)
		cfg := nats.PartitionedStreamConfig(name, c.subject, 4)
		tr := cfg.SubjectTransform
		if cfg.Name != name || !slices.Equal(cfg.Subjects, []string{c.source}) || tr == nil || tr.Source != c.source || tr.Destination != c.dest {
			t.Fatalf("%s: config %+v (transform %+v), want subjects [%s] and transform %s → %s", c.subject, cfg, tr, c.source, c.source, c.dest)
		}
		cfg.Storage = jetstream.MemoryStorage
		s := testbroker.CreateStream(t, js, cfg)
		ack, err := js.Publish(ctx, c.publish, []byte("x"))
		if err != nil {
			t.Fatalf("%s: publish %s: %v", c.subject, c.publish, err)
		}
		m, err := s.GetMsg(ctx, ack.Sequence)
		if err != nil {
			t.Fatal(err)
		}
		if m.Subject != c.stored {
			t.Fatalf("%s: %s is stored on %s, want %s", c.subject, c.publish, m.Subject, c.stored)
		}
	}
}

// TestJetStreamShardsEachMessageOnce: in a four-partition stream, each of
// a few hundred messages published on ex.<id> is in exactly one shard, the
// one its id hashes to, stored on ex.<k>.<id>; reading every shard from
// the start to its end delivers every message once, in sequence order.
func TestJetStreamShardsEachMessageOnce(t *testing.T) {
	_, nc, js := startJetStream(t)
	partitionedStream(t, js, "ex", "ex.*", 4)
	msgs := publishKeys(t, js, "ex", 4, numberedKeys(0, 300)...)
	s := newShards(t, nc, "ex", 4)
	if s.Partitions() != 4 || s.Shard(3).String() != "jetstream:ex#3" || s.Filter(3) != "ex.3.*" {
		t.Fatalf("partitions %d, shard 3 %q filtered by %q", s.Partitions(), s.Shard(3), s.Filter(3))
	}
	ctx := context.Background()
	st, err := js.Stream(ctx, "ex")
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range msgs[:20] {
		raw, err := st.GetMsg(ctx, uint64(m.seq))
		if err != nil {
			t.Fatal(err)
		}
		if want := fmt.Sprintf("ex.%d.%s", m.part, m.key); raw.Subject != want {
			t.Fatalf("ex.%s is stored on %s, want %s", m.key, raw.Subject, want)
		}
	}
	seen := map[int64]shardid.ID{}
	e := ends(t, s)
	for k := range 4 {
		shard := s.Shard(k)
		want := after(msgs, k, 0)
		if len(want) < 50 {
			t.Fatalf("partition %d holds %d of 300 messages", k, len(want))
		}
		src := openShard(t, s, shard, 0)
		got := consumertest.FetchN(t, src, len(want))
		expectNothing(t, src)
		checkDelivered(t, shard, got, want)
		for _, m := range got {
			if other, ok := seen[m.Resume]; ok {
				t.Fatalf("sequence %d is in %s and %s", m.Resume, other, shard)
			}
			seen[m.Resume] = shard
		}
		if e[shard] != got[len(got)-1].Resume {
			t.Fatalf("%s ends at %d, its last message is at %d", shard, e[shard], got[len(got)-1].Resume)
		}
	}
	if len(seen) != len(msgs) {
		t.Fatalf("the shards hold %d messages, %d were published", len(seen), len(msgs))
	}
}

// TestJetStreamShardsEnds: Ends lists the partitions that hold a message,
// each with the sequence of its last one (a stream that allows direct
// gets, answered by any replica, too), and every range a cut makes of
// them, (from, min(from + E, end)], completes with the messages the
// stream holds: a message at its end, or one beyond it, arrives.
func TestJetStreamShardsEnds(t *testing.T) {
	_, nc, js := startJetStream(t)
	for _, direct := range []bool{false, true} {
		t.Run(fmt.Sprintf("direct=%v", direct), func(t *testing.T) {
			name := fmt.Sprintf("ends%v", direct)
			cfg := nats.PartitionedStreamConfig(name, name+".*", 4)
			cfg.Storage, cfg.AllowDirect = jetstream.MemoryStorage, direct
			testbroker.CreateStream(t, js, cfg)
			s := newShards(t, nc, name, 4)
			if e := ends(t, s); len(e) != 0 {
				t.Fatalf("an empty stream's ends: %v, want none", e)
			}
			// Partitions 0 and 2 only.
			msgs := publishKeys(t, js, name, 4, append(keysIn(0, 4, 5), keysIn(2, 4, 3)...)...)
			want := map[shardid.ID]int64{s.Shard(0): msgs[4].seq, s.Shard(2): msgs[7].seq}
			if e := ends(t, s); fmt.Sprint(e) != fmt.Sprint(want) {
				t.Fatalf("ends %v, want %v", e, want)
			}
			msgs = append(msgs, publishKeys(t, js, name, 4, numberedKeys(0, 200)...)...)
			last := map[shardid.ID]int64{}
			for _, m := range msgs {
				last[s.Shard(m.part)] = m.seq
			}
			e := ends(t, s)
			if fmt.Sprint(e) != fmt.Sprint(last) || len(e) != 4 {
				t.Fatalf("ends %v, want the partitions' last sequences %v", e, last)
			}
			for k := range 4 {
				shard := s.Shard(k)
				for _, from := range []int64{0, 3, after(msgs, k, 0)[6].seq, e[shard] - 5} {
					for _, size := range []int64{1, 4, 30, 1000} {
						to := min(from+size, e[shard])
						if to > from {
							checkRange(t, s, shard, from, to, after(msgs, k, from))
						}
					}
				}
			}
		})
	}
}

// checkRange reads shard from from as the epoch protocol does, until a
// message at to or beyond it, and checks that it came without waiting for
// new messages and that the range held what was published in it.
func checkRange(t *testing.T, s *nats.JetStreamShards, shard shardid.ID, from, to int64, rest []sent) {
	t.Helper()
	src, err := s.Open(context.Background(), shard, from)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var got []consumer.Message
	for done := false; !done; {
		batch, err := src.Fetch(ctx, 16)
		if err != nil {
			t.Fatalf("%s, range (%d, %d]: %v after %d messages: the range never completes", shard, from, to, err, len(got))
		}
		for _, m := range batch {
			if m.Resume >= to {
				done = true
			}
			if m.Resume > to {
				break
			}
			m.Value = slices.Clone(m.Value)
			got = append(got, m)
		}
	}
	var want []sent
	for _, m := range rest {
		if m.seq <= to {
			want = append(want, m)
		}
	}
	checkDelivered(t, shard, got, want)
}

// TestJetStreamShardsOpen: a shard opened at a position delivers exactly
// its messages after it, in order, whether the position is a sequence of
// the shard, of another, 0 or its end, then waits for more and delivers
// those; and Open refuses what is no shard or no position of the stream.
func TestJetStreamShardsOpen(t *testing.T) {
	_, nc, js := startJetStream(t)
	partitionedStream(t, js, "open", "open.*", 4)
	msgs := publishKeys(t, js, "open", 4, numberedKeys(0, 240)...)
	s := newShards(t, nc, "open", 4)
	e := ends(t, s)
	for k := range 4 {
		shard := s.Shard(k)
		mine := after(msgs, k, 0)
		var others int64
		for _, m := range msgs {
			if m.part != k && m.seq > mine[10].seq {
				others = m.seq
				break
			}
		}
		for _, from := range []int64{0, mine[0].seq, mine[10].seq, others, mine[len(mine)-2].seq, e[shard]} {
			t.Run(fmt.Sprintf("%d/from=%d", k, from), func(t *testing.T) {
				src := openShard(t, s, shard, from)
				want := after(msgs, k, from)
				if len(want) > 0 {
					checkDelivered(t, shard, consumertest.FetchN(t, src, len(want)), want)
				}
				expectNothing(t, src)
			})
		}
	}
	t.Run("then more", func(t *testing.T) {
		key := keysIn(1, 4, 1)[0]
		src := openShard(t, s, s.Shard(1), e[s.Shard(1)])
		more := publishKeys(t, js, "open", 4, numberedKeys(1000, 1040)...)
		more = append(more, publishKeys(t, js, "open", 4, key)...)
		want := after(more, 1, 0)
		checkDelivered(t, s.Shard(1), consumertest.FetchN(t, src, len(want)), want)
		expectNothing(t, src)
	})
	last := int64(msgs[len(msgs)-1].seq) + 41
	for _, c := range []struct {
		shard shardid.ID
		from  int64
		want  string
	}{
		{shardid.JetStream("open", 4), 0, "not a shard of stream open"},
		{shardid.Stream("open"), 0, "not a shard"},
		{shardid.JetStream("other", 1), 0, "not a shard"},
		{shardid.Kafka("open", 1), 0, "not a shard"},
		{shardid.JetStream("open", 1), -1, "negative"},
		{shardid.JetStream("open", 1), last + 1, fmt.Sprintf("beyond the stream's last sequence %d", last)},
	} {
		t.Run("error/"+c.shard.String()+"@"+strconv.FormatInt(c.from, 10), func(t *testing.T) {
			src, err := s.Open(context.Background(), c.shard, c.from)
			if err == nil {
				src.Close()
				t.Fatal("no error")
			}
			if !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), c.shard.String()) {
				t.Fatalf("error %q, want one naming %s that says %q", err, c.shard, c.want)
			}
		})
	}
}

// TestJetStreamShardsConformance runs the source conformance suite on a
// partition of a four-partition stream, whose other partitions receive
// messages in between, so that the suite also covers the filter.
func TestJetStreamShardsConformance(t *testing.T) {
	_, nc, js := startJetStream(t)
	var streams atomic.Int64
	mine, noise := keysIn(1, 4, 7), append(keysIn(0, 4, 3), keysIn(3, 4, 3)...)
	consumertest.TestSource(t, consumertest.Features{Partitions: 1, Replay: true}, consumertest.SourceHarness{
		Setup: func(t *testing.T, partitions int) (func(int, ...[]byte), func(map[string]int64) consumer.Source) {
			name := fmt.Sprintf("shconf%d", streams.Add(1))
			partitionedStream(t, js, name, name+".*", 4)
			s := newShards(t, nc, name, 4)
			shard := s.Shard(1)
			var n int
			produce := func(p int, values ...[]byte) {
				for _, v := range values {
					n++
					publish(t, js, name+"."+noise[n%len(noise)], "noise")
					publish(t, js, name+"."+mine[n%len(mine)], string(v))
				}
			}
			open := func(resume map[string]int64) consumer.Source {
				return openShard(t, s, shard, resume[shard.String()])
			}
			return produce, open
		},
	})
}

// TestJetStreamShardsStart: each kind of start resolves to the position
// before the first message of the shard it selects, never beyond the
// shard's end, and a source opened there delivers exactly those messages.
func TestJetStreamShardsStart(t *testing.T) {
	_, nc, js := startJetStream(t)
	partitionedStream(t, js, "start", "start.*", 4)
	before := publishKeys(t, js, "start", 4, numberedKeys(0, 40)...)
	cut := cutAfter(t, js, "start")
	msgs := append(before, publishKeys(t, js, "start", 4, numberedKeys(40, 80)...)...)
	// Partition 3 alone gets nothing more; the stream's last sequence is
	// then beyond it.
	msgs = append(msgs, publishKeys(t, js, "start", 4, keysIn(0, 4, 5)...)...)
	s := newShards(t, nc, "start", 4)
	q := msgs[len(msgs)-1].seq
	shard := s.Shard(3)
	mine := after(msgs, 3, 0)
	lastBefore := after(before, 3, 0)
	firstAfter := after(msgs, 3, lastBefore[len(lastBefore)-1].seq)[0]
	end := mine[len(mine)-1].seq
	if end >= q-4 {
		t.Fatalf("partition 3's last sequence %d is not below the stream's %d", end, q)
	}
	for _, c := range []struct {
		name  string
		start wire.Start
		want  int64
	}{
		{"earliest", wire.Start{Kind: wire.StartEarliest}, 0},
		{"default", wire.Start{}, 0},
		{"latest", wire.Start{Kind: wire.StartLatest}, end},
		{"offset of the shard", wire.Start{Kind: wire.StartOffset, Offset: mine[5].seq}, mine[5].seq - 1},
		{"offset 1", wire.Start{Kind: wire.StartOffset, Offset: 1}, 0},
		{"offset beyond the shard", wire.Start{Kind: wire.StartOffset, Offset: q}, end},
		{"offset after the stream", wire.Start{Kind: wire.StartOffset, Offset: q + 1}, end},
		{"time", wire.Start{Kind: wire.StartTime, Time: cut}, firstAfter.seq - 1},
		{"time before", wire.Start{Kind: wire.StartTime, Time: cut.Add(-time.Hour)}, mine[0].seq - 1},
		{"time after", wire.Start{Kind: wire.StartTime, Time: cut.Add(time.Hour)}, end},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := s.Start(context.Background(), shard, c.start)
			if err != nil {
				t.Fatal(err)
			}
			if got != c.want {
				t.Fatalf("start %s resolves to %d, want %d", c.start, got, c.want)
			}
			src := openShard(t, s, shard, got)
			want := after(msgs, 3, got)
			if len(want) > 0 {
				checkDelivered(t, shard, consumertest.FetchN(t, src, len(want)), want)
			}
			expectNothing(t, src)
		})
	}
	t.Run("latest of an empty partition", func(t *testing.T) {
		partitionedStream(t, js, "sparse", "sparse.*", 4)
		publishKeys(t, js, "sparse", 4, keysIn(0, 4, 3)...)
		sp := newShards(t, nc, "sparse", 4)
		for _, start := range []wire.Start{{Kind: wire.StartLatest}, {Kind: wire.StartTime, Time: cut}, {Kind: wire.StartOffset, Offset: 3}} {
			if got, err := sp.Start(context.Background(), sp.Shard(2), start); err != nil || got != 0 {
				t.Fatalf("start %s of an empty partition: %d, %v, want 0", start, got, err)
			}
		}
	})
	for _, c := range []struct {
		name  string
		shard shardid.ID
		start wire.Start
		want  string
	}{
		{"offset zero", shard, wire.Start{Kind: wire.StartOffset}, "sequences start at 1"},
		{"offset beyond", shard, wire.Start{Kind: wire.StartOffset, Offset: q + 2}, fmt.Sprintf("beyond the stream's last sequence %d", q)},
		{"unknown kind", shard, wire.Start{Kind: "newest"}, "newest"},
		{"time zero", shard, wire.Start{Kind: wire.StartTime}, "no time"},
		{"no shard", shardid.JetStream("start", 9), wire.Start{}, "not a shard"},
	} {
		t.Run("error/"+c.name, func(t *testing.T) {
			_, err := s.Start(context.Background(), c.shard, c.start)
			if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), c.shard.String()) {
				t.Fatalf("error %v, want one naming %s that says %q", err, c.shard, c.want)
			}
		})
	}
}

// TestJetStreamShardsRefuse: the shards of a stream whose transform makes
// another number of partitions than configured, or none, are refused with
// the reason; so is a shard opened after the stream was partitioned anew.
func TestJetStreamShardsRefuse(t *testing.T) {
	_, nc, js := startJetStream(t)
	partitionedStream(t, js, "four", "four.*", 4)
	testbroker.CreateStream(t, js, jetstream.StreamConfig{Name: "plain", Subjects: []string{"plain.*"}, Storage: jetstream.MemoryStorage})
	testbroker.CreateStream(t, js, jetstream.StreamConfig{Name: "renamed", Subjects: []string{"renamed.*"}, Storage: jetstream.MemoryStorage,
		SubjectTransform: &jetstream.SubjectTransformConfig{Source: "renamed.*", Destination: "new.{{wildcard(1)}}"}})
	for _, c := range []struct {
		stream string
		n      int
		want   []string
	}{
		{"four", 3, []string{"four.* → four.{{partition(4,1)}}.{{wildcard(1)}}", "makes 4 partitions, not the 3 configured"}},
		{"four", 8, []string{"makes 4 partitions, not the 8 configured"}},
		{"four", 0, []string{"0 partitions"}},
		{"plain", 1, []string{"no subject transform"}},
		{"renamed", 1, []string{"no {{partition(N, ...)}} token"}},
		{"missing", 4, []string{"not found"}},
		{"four#1", 4, []string{"name holds #"}},
	} {
		t.Run(fmt.Sprintf("%s/%d", c.stream, c.n), func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			_, err := nats.NewJetStreamShards(ctx, nc, c.stream, c.n, zaptest.NewLogger(t))
			if err == nil {
				t.Fatal("no error")
			}
			for _, want := range append(c.want, c.stream) {
				if !strings.Contains(err.Error(), want) {
					t.Fatalf("error %q lacks %q", err, want)
				}
			}
		})
	}

	t.Run("repartitioned", func(t *testing.T) {
		s := newShards(t, nc, "four", 4)
		publishKeys(t, js, "four", 4, numberedKeys(0, 20)...)
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := js.DeleteStream(ctx, "four"); err != nil {
			t.Fatal(err)
		}
		partitionedStream(t, js, "four", "four.*", 8)
		_, err := s.Open(ctx, s.Shard(1), 0)
		if err == nil || !strings.Contains(err.Error(), "8 partitions") {
			t.Fatalf("open after the stream was made with 8 partitions: %v", err)
		}
		if _, err := s.Start(ctx, s.Shard(1), wire.Start{Kind: wire.StartOffset, Offset: 1}); err == nil {
			t.Fatal("start after the stream was made with 8 partitions: no error")
		}
	})

	t.Run("recreated", func(t *testing.T) {
		partitionedStream(t, js, "again", "again.*", 2)
		s := newShards(t, nc, "again", 2)
		msgs := publishKeys(t, js, "again", 2, numberedKeys(0, 30)...)
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := js.DeleteStream(ctx, "again"); err != nil {
			t.Fatal(err)
		}
		partitionedStream(t, js, "again", "again.*", 2)
		_, err := s.Open(ctx, s.Shard(msgs[20].part), msgs[20].seq)
		if err == nil || !strings.Contains(err.Error(), "recreated") || !errors.Is(err, consumer.ErrFatal) {
			t.Fatalf("open at a sequence the new stream has not reached: %v, want an error naming it that wraps consumer.ErrFatal (no retry mends it)", err)
		}
	})
}

// TestJetStreamShardsRepartitionedWhileOpen: a partition's source open
// when the stream's subject transform changes to another number of
// partitions ends, its Fetch naming the stream and both transforms, where
// it waited for ever on a filter the stream no longer stores on
// (docs/labels.md, section 9.1).
func TestJetStreamShardsRepartitionedWhileOpen(t *testing.T) {
	_, nc, js := startJetStream(t)
	partitionedStream(t, js, "moved", "moved.*", 3)
	s := newShards(t, nc, "moved", 3)
	s.PartitioningCheck = 10 * time.Millisecond
	msgs := publishKeys(t, js, "moved", 3, keysIn(2, 3, 2)...)
	src := openShard(t, s, s.Shard(2), 0)
	checkDelivered(t, s.Shard(2), consumertest.FetchN(t, src, len(msgs)), msgs)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	cfg := nats.PartitionedStreamConfig("moved", "moved.*", 2)
	cfg.Storage = jetstream.MemoryStorage
	if _, err := js.UpdateStream(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	_, err := src.Fetch(ctx, 10)
	for _, want := range []string{"jetstream moved", "moved.{{partition(2,1)}}", "no longer 3 partitions", "a new model.name with source.stream_partitions: 2"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Fatalf("Fetch after the stream was partitioned in 2: %v, want an error saying %q", err, want)
		}
	}
}

// TestJetStreamShardsRecreatedWhileOpen: a partition's source open when
// the stream is deleted and created again with fewer messages than were
// read ends, its Fetch naming the stream and both sequences, where it
// waited without a word for the new stream to pass the sequence read and
// skipped every new message before it (docs/operations.md).
func TestJetStreamShardsRecreatedWhileOpen(t *testing.T) {
	_, nc, js := startJetStream(t)
	partitionedStream(t, js, "anew", "anew.*", 3)
	s := newShards(t, nc, "anew", 3)
	s.PartitioningCheck = 10 * time.Millisecond
	msgs := publishKeys(t, js, "anew", 3, numberedKeys(0, 30)...)
	want := after(msgs, 1, 0)
	src := openShard(t, s, s.Shard(1), 0)
	checkDelivered(t, s.Shard(1), consumertest.FetchN(t, src, len(want)), want)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	if err := js.DeleteStream(ctx, "anew"); err != nil {
		t.Fatal(err)
	}
	partitionedStream(t, js, "anew", "anew.*", 3)
	publishKeys(t, js, "anew", 3, keysIn(1, 3, 2)...)
	msgs2, err := src.Fetch(ctx, 10)
	read := want[len(want)-1].seq
	for _, w := range []string{"jetstream anew", "recreated"} {
		if err == nil || !strings.Contains(err.Error(), w) {
			t.Fatalf("Fetch after the stream was recreated with 2 messages, %d read: %d messages, %v, want an error saying %q", read, len(msgs2), err, w)
		}
	}
	// The check takes the sequence read before it looks at the stream,
	// which may be before the last was read: any sequence of the shard's.
	m := regexp.MustCompile(`sequence (\d+) was read`).FindStringSubmatch(err.Error())
	if m == nil || !slices.ContainsFunc(want, func(w sent) bool { return strconv.FormatInt(w.seq, 10) == m[1] }) {
		t.Fatalf("Fetch after the stream was recreated with 2 messages: %v, want an error naming a sequence the shard read, up to %d", err, read)
	}
	// The source's check may look before the new messages are published,
	// between them or after: the stream's last sequence is 0 to 2.
	if !regexp.MustCompile(`last sequence is now [0-2]:`).MatchString(err.Error()) {
		t.Fatalf("Fetch after the stream was recreated with 2 messages: %v, want an error naming its last sequence, 0 to 2", err)
	}
}

// TestJetStreamShardsClosedConnection: lookups on a closed connection
// fail rather than report no messages.
func TestJetStreamShardsClosedConnection(t *testing.T) {
	ts, _, js := startJetStream(t)
	partitionedStream(t, js, "gone", "gone.*", 2)
	publishKeys(t, js, "gone", 2, numberedKeys(0, 10)...)
	nc := connect(t, ts)
	s := newShards(t, nc, "gone", 2)
	nc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if e, err := s.Ends(ctx); !errors.Is(err, natsgo.ErrConnectionClosed) {
		t.Fatalf("Ends on a closed connection: %v, %v", e, err)
	}
	if p, err := s.Start(ctx, s.Shard(0), wire.Start{Kind: wire.StartLatest}); err == nil {
		t.Fatalf("Start on a closed connection: %d", p)
	}
}

func TestJetStreamShardsSuite(t *testing.T) {
	_, nc, js := startJetStream(t)
	consumertest.TestShards(t, consumertest.ShardsHarness{
		Setup: func(t *testing.T, partitions int) (func(int, ...[]byte), consumer.Shards) {
			partitionedStream(t, js, "suite", "suite.*", partitions)
			produce := func(p int, values ...[]byte) {
				for i, v := range values {
					// Keys of one partition, another for each message.
					publish(t, js, "suite."+keysIn(p, partitions, len(values))[i], string(v))
				}
			}
			return produce, newShards(t, nc, "suite", partitions)
		},
	})
}

// TestJetStreamShardsMarkSubject: a message published on the subject
// MarkSubject gives partition k is stored in partition k, by the server's
// own transform, for transforms that hash one wildcard, two, or the whole
// subject; CoShard joins partition k of another stream to partition k.
func TestJetStreamShardsMarkSubject(t *testing.T) {
	_, nc, js := startJetStream(t)
	ctx := context.Background()
	for _, c := range []struct {
		name, source, dest string
	}{
		{"one", "one.*", "one.{{partition(4,1)}}.{{wildcard(1)}}"},
		{"two", "two.*.x.*", "two.{{partition(4,1,2)}}.{{wildcard(1)}}.x.{{wildcard(2)}}"},
		{"whole", "whole.>", "whole.{{partition(4)}}.>"},
	} {
		t.Run(c.name, func(t *testing.T) {
			testbroker.CreateStream(t, js, jetstream.StreamConfig{Name: c.name, Subjects: []string{c.source}, Storage: jetstream.MemoryStorage,
				SubjectTransform: &jetstream.SubjectTransformConfig{Source: c.source, Destination: c.dest}})
			s := newShards(t, nc, c.name, 4)
			for k := range 4 {
				subject, err := s.MarkSubject(k)
				if err != nil {
					t.Fatal(err)
				}
				ack, err := js.Publish(ctx, subject, []byte(`{"mark":"w"}`))
				if err != nil {
					t.Fatalf("publish %s: %v", subject, err)
				}
				if e := ends(t, s); e[s.Shard(k)] != int64(ack.Sequence) {
					t.Fatalf("the mark of partition %d, published on %s at %d: ends %v", k, subject, ack.Sequence, e)
				}
				co, p, err := s.CoShard(shardid.JetStream("EX", k))
				if err != nil || co != s.Shard(k) || p != k {
					t.Fatalf("CoShard of partition %d: %s, %d, %v; want %s", k, co, p, err, s.Shard(k))
				}
			}
			if _, err := s.MarkSubject(4); err == nil {
				t.Error("MarkSubject(4) of 4 partitions: no error")
			}
			for _, shard := range []shardid.ID{shardid.JetStream("EX", 4), shardid.Kafka("ex", 1), shardid.Stream("EX")} {
				if _, _, err := s.CoShard(shard); err == nil {
					t.Errorf("CoShard(%s): no error", shard)
				}
			}
		})
	}
}
