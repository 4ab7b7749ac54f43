package kafka_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/zap/zaptest"

	"github.com/hyperplane-ml/hyperplane/consumer"
	"github.com/hyperplane-ml/hyperplane/consumer/consumertest"
	"github.com/hyperplane-ml/hyperplane/consumer/kafka"
	"github.com/hyperplane-ml/hyperplane/internal/testbroker"
	"github.com/hyperplane-ml/hyperplane/internal/wait"
	"github.com/hyperplane-ml/hyperplane/shardid"
	"github.com/hyperplane-ml/hyperplane/wire"
)

func newShards(t *testing.T, c *testbroker.KafkaCluster, topics ...string) *kafka.Shards {
	t.Helper()
	shards, err := kafka.NewShards(config(c), topics, zaptest.NewLogger(t))
	if err != nil {
		t.Fatalf("NewShards: %v", err)
	}
	t.Cleanup(func() { shards.Close() })
	return shards
}

func openShard(t *testing.T, shards *kafka.Shards, shard shardid.ID, from int64) consumer.Source {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	src, err := shards.Open(ctx, shard, from)
	if err != nil {
		t.Fatalf("Open(%s, %d): %v", shard, from, err)
	}
	t.Cleanup(func() { src.Close() })
	return src
}

// idle checks that src delivers nothing more for a while.
func idle(t *testing.T, src consumer.Source) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	if batch, err := src.Fetch(ctx, 64); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Fetch on a source with nothing more to read = %d messages, %v; want the deadline", len(batch), err)
	}
}

// shardsTopic is a topic "t" of three partitions holding 5, 0 and 12
// messages, "p<partition>-m<i>" at offset i.
func shardsTopic(t *testing.T) (*testbroker.KafkaCluster, *kgo.Client) {
	c := testbroker.Kafka(t)
	cl := c.Client(t)
	c.CreateTopic(t, "t", 3)
	for p, n := range []int{5, 0, 12} {
		if n > 0 {
			produce(t, cl, "t", p, values(fmt.Sprintf("p%d-m", p), 0, n)...)
		}
	}
	return c, cl
}

func TestShardsConformance(t *testing.T) {
	consumertest.TestSource(t, consumertest.Features{Partitions: 1, Replay: true}, consumertest.SourceHarness{
		Setup: func(t *testing.T, partitions int) (func(int, ...[]byte), func(map[string]int64) consumer.Source) {
			c := testbroker.Kafka(t)
			cl := c.Client(t)
			c.CreateTopic(t, "examples", partitions)
			shards := newShards(t, c, "examples")
			return func(p int, values ...[]byte) { produce(t, cl, "examples", p, values...) },
				func(resume map[string]int64) consumer.Source {
					return openShard(t, shards, shardid.Kafka("examples", 0), resume["kafka:examples/0"])
				}
		},
	})
}

func TestShardsEnds(t *testing.T) {
	c, cl := shardsTopic(t)
	c.CreateTopic(t, "u", 1)
	produce(t, cl, "u", 0, values("m", 0, 2)...)
	shards := newShards(t, c, "t", "u", "t")
	ctx := context.Background()
	check := func(want map[string]int64) {
		t.Helper()
		ends, err := shards.Ends(ctx)
		if err != nil {
			t.Fatalf("Ends: %v", err)
		}
		named := map[string]int64{}
		for id, end := range ends {
			named[id.String()] = end
		}
		if !maps.Equal(named, want) {
			t.Fatalf("Ends() = %v, want %v", named, want)
		}
	}
	check(map[string]int64{"kafka:t/0": 5, "kafka:t/1": 0, "kafka:t/2": 12, "kafka:u/0": 2})
	produce(t, cl, "t", 1, values("p1-m", 0, 3)...)
	check(map[string]int64{"kafka:t/0": 5, "kafka:t/1": 3, "kafka:t/2": 12, "kafka:u/0": 2})
	// Retention moves the first offset, not the end.
	c.DeleteRecords(t, "t", 0, 3)
	check(map[string]int64{"kafka:t/0": 5, "kafka:t/1": 3, "kafka:t/2": 12, "kafka:u/0": 2})

	t.Run("missing topic", func(t *testing.T) {
		shards := newShards(t, c, "t", "nope")
		if ends, err := shards.Ends(ctx); err == nil || !strings.Contains(err.Error(), "topic nope") {
			t.Fatalf("Ends() = %v, %v; want an error naming topic nope", ends, err)
		}
	})
	t.Run("bad config", func(t *testing.T) {
		if _, err := kafka.NewShards(config(c), nil, nil); err == nil || !strings.Contains(err.Error(), "no topics") {
			t.Fatalf("NewShards without topics: %v", err)
		}
		if _, err := kafka.NewShards(kafka.Config{}, []string{"t"}, nil); err == nil || !strings.Contains(err.Error(), "no brokers") {
			t.Fatalf("NewShards without brokers: %v", err)
		}
	})
}

// TestShardsEndsBrokerHangs: a broker that takes a request and never
// answers (a stopped process, a network that drops packets) fails Ends
// at the request's time limit, so that its caller retries and reports the
// source not ready, rather than waiting for as long as the connection
// stays open.
func TestShardsEndsBrokerHangs(t *testing.T) {
	c, _ := shardsTopic(t)
	shards := newShards(t, c, "t")
	if _, err := shards.Ends(context.Background()); err != nil {
		t.Fatalf("Ends: %v", err)
	}
	release := make(chan struct{})
	defer close(release)
	var hang atomic.Bool
	hang.Store(true)
	c.ControlKey(int16(kmsg.ListOffsets), func(kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		if hang.Load() {
			c.SleepControl(func() { <-release })
		}
		return nil, nil, false
	})
	kafka.ShortenRequestTimeout(shards, 100*time.Millisecond)
	done := make(chan error, 1)
	go func() {
		_, err := shards.Ends(context.Background())
		done <- err
	}()
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "list offsets") || !strings.Contains(err.Error(), "no answer within 100ms") {
			t.Fatalf("Ends over a broker that does not answer: %v, want an error saying the offsets were not listed within the time limit", err)
		}
	case <-time.After(time.Minute):
		t.Fatal("Ends waits for a broker that does not answer")
	}
	hang.Store(false)
}

func TestShardsOpen(t *testing.T) {
	c, cl := shardsTopic(t)
	shards := newShards(t, c, "t")
	for _, from := range []int{0, 1, 7, 11, 12} {
		t.Run(fmt.Sprint("from ", from), func(t *testing.T) {
			src := openShard(t, shards, shardid.Kafka("t", 2), int64(from))
			if from < 12 {
				for i, m := range consumertest.FetchN(t, src, 12-from) {
					off := int64(from + i)
					want := consumer.Message{Position: wire.Position{Source: "kafka:t/2", Offset: off}, Resume: off + 1}
					if string(m.Value) != fmt.Sprintf("p2-m%d", off) || m.Position != want.Position || m.Resume != want.Resume {
						t.Fatalf("message %d is %q at %+v resume %d, want p2-m%d at %+v resume %d",
							i, m.Value, m.Position, m.Resume, off, want.Position, want.Resume)
					}
				}
			}
			idle(t, src)
		})
	}

	t.Run("only its partition", func(t *testing.T) {
		src := openShard(t, shards, shardid.Kafka("t", 1), 0)
		idle(t, src)
		produce(t, cl, "t", 0, []byte("p0-m5"))
		produce(t, cl, "t", 2, []byte("p2-m12"))
		produce(t, cl, "t", 1, values("p1-m", 0, 2)...)
		got := consumertest.FetchN(t, src, 2)
		for i, m := range got {
			if m.Position.Source != "kafka:t/1" || m.Position.Offset != int64(i) || string(m.Value) != fmt.Sprintf("p1-m%d", i) {
				t.Fatalf("message %d is %q at %+v, want p1-m%d at kafka:t/1 offset %d", i, m.Value, m.Position, i, i)
			}
		}
		idle(t, src)
	})

	t.Run("two at once", func(t *testing.T) {
		// Sources of one Shards share its connections, and closing one
		// leaves the other reading.
		a := openShard(t, shards, shardid.Kafka("t", 0), 2)
		b := openShard(t, shards, shardid.Kafka("t", 0), 4)
		if m := consumertest.FetchN(t, b, 1)[0]; string(m.Value) != "p0-m4" {
			t.Fatalf("b's first message %q, want p0-m4", m.Value)
		}
		b.Close()
		if _, err := b.Fetch(context.Background(), 1); err == nil {
			t.Fatal("Fetch after Close succeeded")
		}
		if m := consumertest.FetchN(t, a, 1)[0]; string(m.Value) != "p0-m2" {
			t.Fatalf("a's first message %q, want p0-m2", m.Value)
		}
	})

	t.Run("a batch is let go at the next Fetch", func(t *testing.T) {
		// Fetch reuses its slice; the messages of the batch before are
		// cleared, not left holding their values.
		for try := 0; ; try++ {
			src := openShard(t, shards, shardid.Kafka("t", 2), 0)
			first, err := src.Fetch(context.Background(), 12)
			if err != nil {
				t.Fatal(err)
			}
			if len(first) < 2 {
				if try == 20 {
					t.Skip("every first Fetch returned one message")
				}
				src.Close()
				continue
			}
			if _, err := src.Fetch(context.Background(), 1); err != nil {
				t.Fatal(err)
			}
			for i, m := range first[1:] {
				if m.Value != nil {
					t.Fatalf("message %d of the batch before still holds %q", i+1, m.Value)
				}
			}
			return
		}
	})

	t.Run("commit does nothing", func(t *testing.T) {
		src := openShard(t, shards, shardid.Kafka("t", 2), 10)
		if err := src.Commit(context.Background(), map[string]int64{"kafka:t/2": 12}); err != nil {
			t.Fatalf("Commit: %v", err)
		}
		if m := consumertest.FetchN(t, src, 1)[0]; string(m.Value) != "p2-m10" {
			t.Fatalf("first message after Commit %q, want p2-m10", m.Value)
		}
	})
}

func TestShardsOpenErrors(t *testing.T) {
	c, cl := shardsTopic(t)
	// Retention, as far as the broker is concerned: offsets below 2 are gone.
	c.DeleteRecords(t, "t", 0, 2)
	shards := newShards(t, c, "t")
	for _, tc := range []struct {
		name  string
		shard shardid.ID
		from  int64
		want  string // in the error
	}{
		{"below first offset", shardid.Kafka("t", 0), 1, "kafka:t/0: range start offset 1 is below the partition's first offset 2: 1 messages were deleted"},
		{"beyond end", shardid.Kafka("t", 0), 6, "kafka:t/0: range start offset 6 is beyond the partition's end 5"},
		{"beyond end of empty", shardid.Kafka("t", 1), 1, "kafka:t/1: range start offset 1 is beyond the partition's end 0"},
		{"no such partition", shardid.Kafka("t", 3), 0, "kafka:t/3: no such partition: topic t has 3"},
		{"other topic", shardid.Kafka("u", 0), 0, `"kafka:u/0" is not a shard of topics ["t"]`},
		{"not kafka", shardid.Memory("t", 0), 0, `"memory:t/0" is not a shard`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			src, err := shards.Open(ctx, tc.shard, tc.from)
			if err == nil {
				src.Close()
				t.Fatalf("Open succeeded, want an error with %q", tc.want)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %q, want it to contain %q", err, tc.want)
			}
			// Deleted messages never come back: a worker in epochs
			// stops rather than retry the open for ever.
			if fatal := tc.name == "below first offset"; errors.Is(err, consumer.ErrFatal) != fatal {
				t.Fatalf("error %q wraps consumer.ErrFatal: %v, want %v", err, !fatal, fatal)
			}
		})
	}

	t.Run("at the bounds", func(t *testing.T) {
		// The first offset and the end are both valid.
		src := openShard(t, shards, shardid.Kafka("t", 0), 2)
		for i, m := range consumertest.FetchN(t, src, 3) {
			if m.Position.Offset != int64(2+i) || string(m.Value) != fmt.Sprintf("p0-m%d", 2+i) {
				t.Fatalf("message %d is %q at %+v, want p0-m%d at offset %d", i, m.Value, m.Position, 2+i, 2+i)
			}
		}
		end := openShard(t, shards, shardid.Kafka("t", 0), 5)
		produce(t, cl, "t", 0, []byte("p0-m5"))
		if m := consumertest.FetchN(t, end, 1)[0]; m.Position.Offset != 5 || string(m.Value) != "p0-m5" {
			t.Fatalf("from the end: %q at %+v, want p0-m5 at offset 5", m.Value, m.Position)
		}
	})
}

func TestShardsStart(t *testing.T) {
	c := testbroker.Kafka(t)
	cl := c.Client(t)
	c.CreateTopic(t, "t", 2)
	base := time.Now().Add(-time.Hour).Truncate(time.Millisecond)
	var recs []*kgo.Record
	for j := range 10 {
		recs = append(recs, &kgo.Record{Topic: "t", Partition: 1, Value: fmt.Appendf(nil, "m%d", j), Timestamp: base.Add(time.Duration(j) * time.Second)})
	}
	produceRecords(t, cl, recs...)
	c.DeleteRecords(t, "t", 1, 3)
	shards := newShards(t, c, "t")
	for _, tc := range []struct {
		name  string
		shard shardid.ID
		start wire.Start
		want  int64
		err   string // in the error, instead of want
	}{
		{"default", shardid.Kafka("t", 1), wire.Start{}, 3, ""},
		{"earliest", shardid.Kafka("t", 1), wire.Start{Kind: "earliest"}, 3, ""},
		{"earliest of empty", shardid.Kafka("t", 0), wire.Start{Kind: "earliest"}, 0, ""},
		{"latest", shardid.Kafka("t", 1), wire.Start{Kind: "latest"}, 10, ""},
		{"latest of empty", shardid.Kafka("t", 0), wire.Start{Kind: "latest"}, 0, ""},
		{"offset", shardid.Kafka("t", 1), wire.Start{Kind: "offset", Offset: 4}, 4, ""},
		{"offset at first", shardid.Kafka("t", 1), wire.Start{Kind: "offset", Offset: 3}, 3, ""},
		{"offset at end", shardid.Kafka("t", 1), wire.Start{Kind: "offset", Offset: 10}, 10, ""},
		{"offset below first", shardid.Kafka("t", 1), wire.Start{Kind: "offset", Offset: 2}, 0,
			"kafka:t/1: start offset:2 offset 2 is below the partition's first offset 3: 1 messages were deleted"},
		{"offset beyond end", shardid.Kafka("t", 1), wire.Start{Kind: "offset", Offset: 11}, 0,
			"kafka:t/1: start offset:11 offset 11 is beyond the partition's end 10"},
		{"time before all", shardid.Kafka("t", 1), wire.Start{Kind: "time", Time: base.Add(-time.Minute)}, 3, ""},
		{"time of a message", shardid.Kafka("t", 1), wire.Start{Kind: "time", Time: base.Add(6 * time.Second)}, 6, ""},
		{"time between messages", shardid.Kafka("t", 1), wire.Start{Kind: "time", Time: base.Add(5500 * time.Millisecond)}, 6, ""},
		{"time after all", shardid.Kafka("t", 1), wire.Start{Kind: "time", Time: base.Add(time.Minute)}, 10, ""},
		{"time on empty", shardid.Kafka("t", 0), wire.Start{Kind: "time", Time: base}, 0, ""},
		{"bad start", shardid.Kafka("t", 1), wire.Start{Kind: "newest"}, 0, `kafka:t/1: unknown start "newest"`},
		{"negative offset", shardid.Kafka("t", 1), wire.Start{Kind: "offset", Offset: -1}, 0, "negative"},
		{"no such partition", shardid.Kafka("t", 2), wire.Start{}, 0, "kafka:t/2: no such partition"},
		{"other topic", shardid.Kafka("u", 0), wire.Start{}, 0, `"kafka:u/0" is not a shard`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			got, err := shards.Start(ctx, tc.shard, tc.start)
			switch {
			case tc.err == "" && err != nil:
				t.Fatalf("Start(%s, %s): %v, want %d", tc.shard, tc.start, err, tc.want)
			case tc.err == "" && got != tc.want:
				t.Fatalf("Start(%s, %s) = %d, want %d", tc.shard, tc.start, got, tc.want)
			case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
				t.Fatalf("Start(%s, %s) = %d, %v; want an error with %q", tc.shard, tc.start, got, err, tc.err)
			}
		})
	}
}

// TestShardsRetentionOvertakes deletes messages a shard's source has not
// read yet while it runs: Fetch must fail rather than skip them.
func TestShardsRetentionOvertakes(t *testing.T) {
	c, _ := shardsTopic(t)
	var failing atomic.Bool
	var failures atomic.Int64
	failing.Store(true)
	failWhile(c, kmsg.Fetch, &failing, &failures, func(kmsg.Request) (kmsg.Response, error) {
		return nil, errors.New("injected fetch failure")
	})
	shards := newShards(t, c, "t")
	src := openShard(t, shards, shardid.Kafka("t", 2), 1)
	wait.For(t, time.Minute, 10*time.Millisecond, "two failed fetches", func() bool { return failures.Load() >= 2 })
	c.DeleteRecords(t, "t", 2, 6)
	failing.Store(false)

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	msgs, err := src.Fetch(ctx, 10)
	want := "kafka:t/2: offsets 1 to 5 were deleted"
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("Fetch = %d messages, %v; want an error with %q", len(msgs), err, want)
	}
	if _, err2 := src.Fetch(ctx, 10); err2 == nil || err2.Error() != err.Error() {
		t.Fatalf("second Fetch: %v, want the same error", err2)
	}
}

func TestShardsClose(t *testing.T) {
	c, _ := shardsTopic(t)
	shards, err := kafka.NewShards(config(c), []string{"t"}, zaptest.NewLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	closed := openShard(t, shards, shardid.Kafka("t", 0), 0)
	if err := closed.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	var open []consumer.Source
	for p := range 3 {
		open = append(open, openShard(t, shards, shardid.Kafka("t", p), 0))
	}
	consumertest.FetchN(t, open[0], 1)
	fetched := make(chan error, 1)
	go func() {
		_, err := open[1].Fetch(ctx, 1) // waits: the partition is empty
		fetched <- err
	}()

	began := time.Now()
	if err := shards.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	// Close waits for the fetches in flight, which the broker holds up to
	// maxWait (500 ms); kafka-go's default would hold them 10 s.
	if took := time.Since(began); took > 8*time.Second {
		t.Fatalf("Close took %v", took)
	}
	select {
	case err := <-fetched:
		if err == nil || errors.Is(err, context.Canceled) {
			t.Fatalf("a Fetch waiting when the Shards closed returned %v, want the source's closed error", err)
		}
	case <-time.After(time.Minute):
		t.Fatal("a Fetch waiting when the Shards closed did not return")
	}
	for p, src := range open {
		if _, err := src.Fetch(ctx, 1); err == nil {
			t.Fatalf("source of partition %d: Fetch after the Shards closed succeeded", p)
		}
		if err := src.Close(); err != nil {
			t.Fatalf("source of partition %d: Close after the Shards closed: %v", p, err)
		}
	}
	if src, err := shards.Open(ctx, shardid.Kafka("t", 0), 0); err == nil {
		src.Close()
		t.Fatal("Open after Close succeeded")
	}
	if err := shards.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
}

func TestShardsSuite(t *testing.T) {
	consumertest.TestShards(t, consumertest.ShardsHarness{
		Setup: func(t *testing.T, partitions int) (func(int, ...[]byte), consumer.Shards) {
			c := testbroker.Kafka(t)
			cl := c.Client(t)
			c.CreateTopic(t, "examples", partitions)
			return func(p int, values ...[]byte) { produce(t, cl, "examples", p, values...) }, newShards(t, c, "examples")
		},
	})
}

func TestCoPartition(t *testing.T) {
	for _, c := range []struct {
		shard     shardid.ID
		co        shardid.ID
		partition int
		ok        bool
	}{
		{shardid.Kafka("examples", 3), shardid.Kafka("labels", 3), 3, true},
		{shardid.JetStream("S", 1), shardid.ID{}, 0, false},
		{shardid.Memory("examples", 3), shardid.ID{}, 0, false},
	} {
		co, partition, ok := kafka.CoPartition(c.shard, "labels")
		if co != c.co || partition != c.partition || ok != c.ok {
			t.Errorf("CoPartition(%q): %q %d %v, want %q %d %v", c.shard, co, partition, ok, c.co, c.partition, c.ok)
		}
	}
}

// TestShardsOpenCoPartition: the labels' partition with the examples'
// partition's number is read from its earliest offset, or from where
// positions say; a shard that is no Kafka partition is refused.
func TestShardsOpenCoPartition(t *testing.T) {
	c := testbroker.Kafka(t)
	cl := c.Client(t)
	c.CreateTopic(t, "labels", 2)
	produce(t, cl, "labels", 1, values("l1-m", 0, 3)...)
	shards := newShards(t, c, "labels")
	for _, from := range []int64{0, 2} {
		var positions map[string]int64
		if from > 0 {
			positions = map[string]int64{"kafka:labels/1": from}
		}
		src, k, err := shards.OpenCoPartition(context.Background(), shardid.Kafka("examples", 1), "labels", positions)
		if err != nil {
			t.Fatal(err)
		}
		if k != 1 {
			t.Errorf("partition %d, want 1", k)
		}
		for i, m := range consumertest.FetchN(t, src, int(3-from)) {
			if off := from + int64(i); m.Position.Source != "kafka:labels/1" || m.Position.Offset != off {
				t.Fatalf("from %d: message %d at %+v, want kafka:labels/1 offset %d", from, i, m.Position, off)
			}
		}
		idle(t, src)
		src.Close()
	}
	if _, _, err := shards.OpenCoPartition(context.Background(), shardid.JetStream("S", 1), "labels", nil); err == nil {
		t.Error("a JetStream shard's co-partition opened, want an error")
	}
}
