package kafka_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	kafkago "github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest"
	"go.uber.org/zap/zaptest/observer"

	"github.com/hyperplane-ml/hyperplane/consumer"
	"github.com/hyperplane-ml/hyperplane/consumer/consumertest"
	"github.com/hyperplane-ml/hyperplane/consumer/kafka"
	"github.com/hyperplane-ml/hyperplane/internal/testbroker"
	"github.com/hyperplane-ml/hyperplane/internal/wait"
	"github.com/hyperplane-ml/hyperplane/wire"
)

func config(c *testbroker.KafkaCluster) kafka.Config {
	return kafka.Config{Brokers: c.ListenAddrs(), ClientID: "hyperplane-test"}
}

// produce writes values to one partition. It may run on another goroutine,
// so it reports with Errorf.
func produce(t *testing.T, cl *kgo.Client, topic string, p int, values ...[]byte) {
	recs := make([]*kgo.Record, len(values))
	for i, v := range values {
		recs[i] = &kgo.Record{Topic: topic, Partition: int32(p), Value: v}
	}
	produceRecords(t, cl, recs...)
}

func produceRecords(t *testing.T, cl *kgo.Client, recs ...*kgo.Record) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Errorf("produce: %v", err)
	}
}

func openSource(t *testing.T, cfg kafka.Config, topics []string, group string, resume map[string]int64, start wire.Start, log *zap.Logger) *kafka.Source {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	src, err := kafka.NewSource(ctx, cfg, topics, group, resume, start, log)
	if err != nil {
		t.Fatalf("NewSource: %v", err)
	}
	t.Cleanup(func() { src.Close() })
	return src
}

func values(prefix string, from, to int) [][]byte {
	var out [][]byte
	for i := from; i < to; i++ {
		out = append(out, fmt.Appendf(nil, "%s%d", prefix, i))
	}
	return out
}

func TestSourceConformance(t *testing.T) {
	consumertest.TestSource(t, consumertest.Features{Partitions: 3, Replay: true}, consumertest.SourceHarness{
		Setup: func(t *testing.T, partitions int) (func(int, ...[]byte), func(map[string]int64) consumer.Source) {
			c := testbroker.Kafka(t)
			cl := c.Client(t)
			c.CreateTopic(t, "examples", partitions)
			log := zaptest.NewLogger(t)
			return func(p int, values ...[]byte) { produce(t, cl, "examples", p, values...) },
				func(resume map[string]int64) consumer.Source {
					return openSource(t, config(c), []string{"examples"}, "", resume, wire.Start{Kind: "earliest"}, log)
				}
		},
	})
}

func TestSinkConformance(t *testing.T) {
	// Kafka keeps every copy of an output published again: readers drop
	// the repeats by key.
	consumertest.TestSink(t, consumertest.Features{}, consumertest.SinkHarness{
		Setup: func(t *testing.T, topics []string) (consumer.Sink, func(string, int) []consumer.Output) {
			c := testbroker.Kafka(t)
			for _, topic := range topics {
				c.CreateTopic(t, topic, 3)
			}
			sink, err := kafka.NewSink(config(c), zaptest.NewLogger(t))
			if err != nil {
				t.Fatal(err)
			}
			return sink, func(topic string, n int) []consumer.Output {
				var out []consumer.Output
				for _, r := range readBack(t, c, topic, n) {
					out = append(out, consumer.Output{Topic: r.Topic, Key: r.Key, Value: r.Value})
				}
				return out
			}
		},
	})
}

// readBack reads a topic from the start with franz-go, for up to a minute or
// until it has n records.
func readBack(t *testing.T, c *testbroker.KafkaCluster, topic string, n int) []*kgo.Record {
	t.Helper()
	cl := c.Client(t, kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(100*time.Millisecond))
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var recs []*kgo.Record
	for len(recs) < n && ctx.Err() == nil {
		fs := cl.PollFetches(ctx)
		fs.EachError(func(topic string, p int32, err error) {
			if !errors.Is(err, context.DeadlineExceeded) {
				t.Errorf("read back %s/%d: %v", topic, p, err)
			}
		})
		recs = append(recs, fs.Records()...)
	}
	return recs
}

func TestStart(t *testing.T) {
	c := testbroker.Kafka(t)
	cl := c.Client(t)
	base := time.Now().Add(-time.Hour).Truncate(time.Millisecond)
	for i, tc := range []struct {
		name  string
		start wire.Start
		want  int // first message delivered, m10 being the one produced after opening
	}{
		{"default", wire.Start{}, 0},
		{"earliest", wire.Start{Kind: "earliest"}, 0},
		{"latest", wire.Start{Kind: "latest"}, 10},
		{"offset", wire.Start{Kind: "offset", Offset: 4}, 4},
		{"offset at end", wire.Start{Kind: "offset", Offset: 10}, 10},
		{"time before all", wire.Start{Kind: "time", Time: base.Add(-time.Minute)}, 0},
		{"time of a message", wire.Start{Kind: "time", Time: base.Add(6 * time.Second)}, 6},
		{"time between messages", wire.Start{Kind: "time", Time: base.Add(5500 * time.Millisecond)}, 6},
		{"time after all", wire.Start{Kind: "time", Time: base.Add(time.Minute)}, 10},
	} {
		topic := fmt.Sprintf("start-%d", i)
		c.CreateTopic(t, topic, 1)
		var recs []*kgo.Record
		for j := range 10 {
			recs = append(recs, &kgo.Record{Topic: topic, Value: fmt.Appendf(nil, "m%d", j), Timestamp: base.Add(time.Duration(j) * time.Second)})
		}
		produceRecords(t, cl, recs...)
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			src := openSource(t, config(c), []string{topic}, "", nil, tc.start, zaptest.NewLogger(t))
			produce(t, cl, topic, 0, []byte("m10"))
			m := consumertest.FetchN(t, src, 1)[0]
			want := consumer.Message{Position: wire.Position{Source: "kafka:" + topic + "/0", Offset: int64(tc.want)}, Resume: int64(tc.want) + 1}
			if string(m.Value) != fmt.Sprintf("m%d", tc.want) || m.Position != want.Position || m.Resume != want.Resume {
				t.Fatalf("first message %q at %+v resume %d, want m%d at %+v resume %d", m.Value, m.Position, m.Resume, tc.want, want.Position, want.Resume)
			}
			if tc.want < 10 {
				if wantTime := base.Add(time.Duration(tc.want) * time.Second); !m.Time.Equal(wantTime) {
					t.Fatalf("message time %v, want %v", m.Time, wantTime)
				}
			}
		})
	}
}

func TestOpenErrors(t *testing.T) {
	c := testbroker.Kafka(t)
	cl := c.Client(t)
	c.CreateTopic(t, "t", 2)
	produce(t, cl, "t", 0, values("m", 0, 10)...)
	produce(t, cl, "t", 1, values("m", 0, 3)...)
	// Retention, as far as the broker is concerned: offsets below 4 are gone.
	c.DeleteRecords(t, "t", 0, 4)

	for _, tc := range []struct {
		name   string
		topics []string
		resume map[string]int64
		start  wire.Start
		want   string // in the error
	}{
		{"below first offset", []string{"t"}, map[string]int64{"kafka:t/0": 2}, wire.Start{}, "kafka:t/0: resume offset 2 is below the partition's first offset 4: 2 messages were deleted"},
		{"start below first offset", []string{"t"}, nil, wire.Start{Kind: "offset", Offset: 2}, "kafka:t/0: start offset:2 offset 2 is below the partition's first offset 4"},
		{"beyond end", []string{"t"}, map[string]int64{"kafka:t/0": 10, "kafka:t/1": 4}, wire.Start{}, "kafka:t/1: resume offset 4 is beyond the partition's end 3: was the topic recreated"},
		{"start beyond end", []string{"t"}, map[string]int64{"kafka:t/0": 4}, wire.Start{Kind: "offset", Offset: 5}, "kafka:t/1: start offset:5 offset 5 is beyond the partition's end 3"},
		{"missing topic", []string{"t", "nope"}, nil, wire.Start{}, "topic nope"},
		{"no topics", nil, nil, wire.Start{}, "no topics"},
		{"bad start", []string{"t"}, nil, wire.Start{Kind: "newest"}, `unknown start "newest"`},
		{"negative start", []string{"t"}, nil, wire.Start{Kind: "offset", Offset: -1}, "negative"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			src, err := kafka.NewSource(ctx, config(c), tc.topics, "", tc.resume, tc.start, zaptest.NewLogger(t))
			if err == nil {
				src.Close()
				t.Fatalf("NewSource succeeded, want an error with %q", tc.want)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %q, want it to contain %q", err, tc.want)
			}
		})
	}

	t.Run("at the bounds", func(t *testing.T) {
		// The first offset and the end are both valid starts; keys of
		// other sources are ignored.
		resume := map[string]int64{"kafka:t/0": 4, "kafka:t/1": 3, "kafka:other/0": 99, "file:x": 7}
		src := openSource(t, config(c), []string{"t", "t"}, "", resume, wire.Start{}, zaptest.NewLogger(t)) // a repeated topic is read once
		produce(t, cl, "t", 1, []byte("m3"))
		got := consumertest.FetchN(t, src, 7)
		want := map[string][]string{"kafka:t/0": {"4=m4", "5=m5", "6=m6", "7=m7", "8=m8", "9=m9"}, "kafka:t/1": {"3=m3"}}
		by := map[string][]string{}
		for _, m := range got {
			by[m.Position.Source] = append(by[m.Position.Source], fmt.Sprintf("%d=%s", m.Position.Offset, m.Value))
		}
		if fmt.Sprint(by) != fmt.Sprint(want) {
			t.Fatalf("got %v, want %v", by, want)
		}
	})
	t.Run("earliest on a trimmed partition", func(t *testing.T) {
		src := openSource(t, config(c), []string{"t"}, "", map[string]int64{"kafka:t/1": 4}, wire.Start{Kind: "earliest"}, zaptest.NewLogger(t))
		for i, m := range consumertest.FetchN(t, src, 6) {
			if m.Position.Source != "kafka:t/0" || m.Position.Offset != int64(4+i) {
				t.Fatalf("message %d at %+v, want kafka:t/0 offset %d", i, m.Position, 4+i)
			}
		}
	})
}

func TestCommit(t *testing.T) {
	c := testbroker.Kafka(t)
	cl := c.Client(t)
	c.CreateTopic(t, "t", 2)
	produce(t, cl, "t", 0, values("m", 0, 5)...)
	src := openSource(t, config(c), []string{"t"}, "lag-monitor", nil, wire.Start{}, zaptest.NewLogger(t))
	ctx := context.Background()

	committed := func(group string) map[int32]int64 {
		t.Helper()
		req := kmsg.NewPtrOffsetFetchRequest()
		req.Group = group
		rt := kmsg.NewOffsetFetchRequestTopic()
		rt.Topic, rt.Partitions = "t", []int32{0, 1}
		req.Topics = append(req.Topics, rt)
		resp, err := req.RequestWith(ctx, cl)
		if err == nil {
			err = kerr.ErrorForCode(resp.ErrorCode)
		}
		if err != nil {
			t.Fatalf("offset fetch: %v", err)
		}
		out := map[int32]int64{}
		for _, t := range resp.Topics {
			for _, p := range t.Partitions {
				if p.Offset >= 0 {
					out[p.Partition] = p.Offset
				}
			}
		}
		return out
	}

	if err := src.Commit(ctx, map[string]int64{"kafka:t/0": 3, "kafka:t/1": 0, "kafka:other/0": 9}); err != nil {
		t.Fatalf("Commit: %v", err)
	}
	if got := committed("lag-monitor"); fmt.Sprint(got) != fmt.Sprint(map[int32]int64{0: 3, 1: 0}) {
		t.Fatalf("committed %v, want map[0:3 1:0]", got)
	}
	// A later commit overwrites, even downwards (a restored older snapshot).
	if err := src.Commit(ctx, map[string]int64{"kafka:t/0": 2}); err != nil {
		t.Fatalf("Commit: %v", err)
	}
	if got := committed("lag-monitor")[0]; got != 2 {
		t.Fatalf("committed %d for partition 0, want 2", got)
	}
	// Commit does not move the source.
	if m := consumertest.FetchN(t, src, 1)[0]; string(m.Value) != "m0" {
		t.Fatalf("first message after Commit %q, want m0", m.Value)
	}

	t.Run("no group", func(t *testing.T) {
		src := openSource(t, config(c), []string{"t"}, "", nil, wire.Start{}, zaptest.NewLogger(t))
		if err := src.Commit(ctx, map[string]int64{"kafka:t/0": 5}); err != nil {
			t.Fatalf("Commit without a group: %v", err)
		}
	})

	t.Run("group with live members", func(t *testing.T) {
		member := c.Client(t, kgo.ConsumerGroup("busy"), kgo.ConsumeTopics("t"))
		pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		member.PollFetches(pctx) // joins the group and reads m0..
		src := openSource(t, config(c), []string{"t"}, "busy", nil, wire.Start{}, zaptest.NewLogger(t))
		err := src.Commit(ctx, map[string]int64{"kafka:t/0": 5})
		if !errors.Is(err, kafkago.UnknownMemberId) && !errors.Is(err, kafkago.IllegalGeneration) {
			t.Fatalf("Commit to a group with a live member: %v, want UNKNOWN_MEMBER_ID or ILLEGAL_GENERATION", err)
		}
		if !strings.Contains(err.Error(), "kafka:t/0") {
			t.Fatalf("error %q does not name the partition", err)
		}
	})

	t.Run("closed", func(t *testing.T) {
		src.Close()
		if err := src.Commit(ctx, map[string]int64{"kafka:t/0": 5}); err == nil {
			t.Fatal("Commit after Close succeeded")
		}
		if _, err := src.Fetch(ctx, 1); err == nil {
			t.Fatal("Fetch after Close succeeded")
		}
		if err := src.Close(); err != nil {
			t.Fatalf("second Close: %v", err)
		}
	})
}

func TestLag(t *testing.T) {
	c := testbroker.Kafka(t)
	cl := c.Client(t)
	c.CreateTopic(t, "t", 2)
	produce(t, cl, "t", 0, values("m", 0, 10)...)
	src := openSource(t, config(c), []string{"t"}, "", nil, wire.Start{}, zaptest.NewLogger(t))
	check := func(want0 int64) {
		t.Helper()
		if lag := src.Lag(); len(lag) != 2 || lag["kafka:t/0"] != want0 || lag["kafka:t/1"] != 0 {
			t.Fatalf("Lag() = %v, want kafka:t/0 %d, kafka:t/1 0", lag, want0)
		}
	}
	check(10) // from the offsets NewSource looked up
	consumertest.FetchN(t, src, 4)
	check(6)
	consumertest.FetchN(t, src, 6)
	check(0)
	produce(t, cl, "t", 0, values("m", 10, 15)...)
	// The reader fetches them ahead of Fetch, learning the new watermark.
	wait.For(t, time.Minute, 10*time.Millisecond, "the lag of kafka:t/0 at 5", func() bool { return src.Lag()["kafka:t/0"] == 5 })
	check(5)
	consumertest.FetchN(t, src, 5)
	check(0)
}

// failWhile makes the cluster fail requests of key while on is set, with
// fail's answer, and counts the failures.
func failWhile(c *testbroker.KafkaCluster, key kmsg.Key, on *atomic.Bool, failures *atomic.Int64, fail func(kmsg.Request) (kmsg.Response, error)) {
	c.ControlKey(int16(key), func(req kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		if !on.Load() {
			return nil, nil, false
		}
		failures.Add(1)
		resp, err := fail(req)
		return resp, err, true
	})
}

// TestSinkNamesTheFailingTopic: a publish that fails because an output
// topic was deleted names that topic, and says what to do, in its error
// (the worker's /readyz reason and log): the broker's answer alone
// ("Unknown Topic Or Partition") does not say which output is missing.
func TestSinkNamesTheFailingTopic(t *testing.T) {
	c := testbroker.Kafka(t)
	c.CreateTopic(t, "out", 1)
	c.CreateTopic(t, "kept", 1)
	sink, err := kafka.NewSink(config(c), zaptest.NewLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	defer sink.Close()
	outputs := []consumer.Output{
		{Topic: "kept", Key: []byte("k0"), Value: []byte("v0")},
		{Topic: "out", Key: []byte("k1"), Value: []byte("v1")},
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := sink.Publish(ctx, outputs); err != nil {
		t.Fatal(err)
	}
	c.DeleteTopic(t, "out")
	err = sink.Publish(ctx, outputs)
	if err == nil {
		t.Fatal("Publish succeeded to a deleted topic")
	}
	if ctx.Err() != nil {
		t.Fatalf("Publish failed only at its deadline: %v", err)
	}
	msg := err.Error()
	if !strings.Contains(msg, `topic "out"`) || strings.Contains(msg, `"kept"`) || !strings.Contains(msg, "1 of 2 outputs failed") {
		t.Fatalf("Publish error %q, want the deleted topic named, alone, and a count", msg)
	}
	if !strings.Contains(msg, "hyperplane setup") {
		t.Fatalf("Publish error %q, want what to do about a missing topic", msg)
	}
}

func TestSinkProduceOutage(t *testing.T) {
	c := testbroker.Kafka(t)
	c.CreateTopic(t, "out", 2)
	sink, err := kafka.NewSink(config(c), zaptest.NewLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	defer sink.Close()
	var outputs []consumer.Output
	for i := range 20 {
		outputs = append(outputs, consumer.Output{Topic: "out", Key: fmt.Appendf(nil, "kafka:in/0/%d", i), Value: fmt.Appendf(nil, "v%d", i)})
	}

	var failing atomic.Bool
	var failures atomic.Int64
	failing.Store(true)
	failWhile(c, kmsg.Produce, &failing, &failures, func(req kmsg.Request) (kmsg.Response, error) {
		preq := req.(*kmsg.ProduceRequest)
		resp := preq.ResponseKind().(*kmsg.ProduceResponse)
		for _, rt := range preq.Topics {
			st := kmsg.NewProduceResponseTopic()
			st.Topic, st.TopicID = rt.Topic, rt.TopicID
			for _, rp := range rt.Partitions {
				sp := kmsg.NewProduceResponseTopicPartition()
				sp.Partition, sp.ErrorCode = rp.Partition, kerr.NotEnoughReplicas.Code
				st.Partitions = append(st.Partitions, sp)
			}
			resp.Topics = append(resp.Topics, st)
		}
		return resp, nil
	})

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	began := time.Now()
	err = sink.Publish(ctx, outputs)
	if err == nil {
		t.Fatal("Publish succeeded while the broker failed every produce request")
	}
	// It gives up after its few attempts, not at the caller's deadline.
	if ctx.Err() != nil {
		t.Fatalf("Publish took %v to fail: until its context ended", time.Since(began))
	}
	if !errors.Is(err, kafkago.NotEnoughReplicas) || !strings.Contains(err.Error(), "of 20 outputs failed") {
		t.Fatalf("Publish error %q, want NOT_ENOUGH_REPLICAS and a count", err)
	}
	if n := failures.Load(); n < 2 {
		t.Fatalf("%d produce requests failed, want retries", n)
	}

	failing.Store(false)
	if err := sink.Publish(ctx, outputs); err != nil {
		t.Fatalf("Publish after the outage: %v", err)
	}
	recs := readBack(t, c, "out", 20)
	if len(recs) != 20 {
		t.Fatalf("read back %d records, want 20 (failed attempts must not have written)", len(recs))
	}
}

func TestSinkKeysPartition(t *testing.T) {
	c := testbroker.Kafka(t)
	c.CreateTopic(t, "out", 4)
	sink, err := kafka.NewSink(config(c), zaptest.NewLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	defer sink.Close()
	var batch []consumer.Output
	for round := range 4 {
		for k := range 10 {
			batch = append(batch, consumer.Output{Topic: "out", Key: fmt.Appendf(nil, "key-%d", k), Value: fmt.Appendf(nil, "%d", round)})
		}
	}
	if err := sink.Publish(context.Background(), batch); err != nil {
		t.Fatal(err)
	}
	// kafka-go's default BatchTimeout (a zero Writer.BatchTimeout) would
	// hold every small synchronous write for a second. The setting is
	// checked rather than the time a Publish takes, which on a busy
	// machine says little.
	if d := kafka.BatchTimeout(sink, "out"); d <= 0 || d >= 100*time.Millisecond {
		t.Fatalf("the writer waits %v for a batch to fill, want a moment", d)
	}
	recs := readBack(t, c, "out", len(batch))
	if len(recs) != len(batch) {
		t.Fatalf("read back %d records, want %d", len(recs), len(batch))
	}
	partitionOf := map[string]int32{}
	rounds := map[string]string{}
	used := map[int32]bool{}
	for _, r := range recs {
		k := string(r.Key)
		if p, ok := partitionOf[k]; ok && p != r.Partition {
			t.Fatalf("key %s on partitions %d and %d", k, p, r.Partition)
		}
		partitionOf[k] = r.Partition
		used[r.Partition] = true
		rounds[k] += string(r.Value)
	}
	for k, r := range rounds {
		if r != "0123" {
			t.Fatalf("key %s: values in order %q, want 0123", k, r)
		}
	}
	if len(used) < 2 {
		t.Fatalf("10 keys all hashed to %v", used)
	}
}

// TestSinkChosenPartition: an output that chooses its partition is
// written there whatever its key hashes to, beside outputs that do not.
func TestSinkChosenPartition(t *testing.T) {
	c := testbroker.Kafka(t)
	c.CreateTopic(t, "out", 4)
	sink, err := kafka.NewSink(config(c), zaptest.NewLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	defer sink.Close()
	var batch []consumer.Output
	for p := range 4 {
		batch = append(batch,
			consumer.Output{Topic: "out", Key: []byte("mark/w"), Value: fmt.Appendf(nil, "%d", p), Partition: int32(p), HasPartition: true},
			consumer.Output{Topic: "out", Key: []byte("mark/w"), Value: []byte("hashed")})
	}
	if err := sink.Publish(context.Background(), batch); err != nil {
		t.Fatal(err)
	}
	recs := readBack(t, c, "out", len(batch))
	if len(recs) != len(batch) {
		t.Fatalf("read back %d records, want %d", len(recs), len(batch))
	}
	hashed := map[int32]bool{}
	for _, r := range recs {
		if string(r.Value) == "hashed" {
			hashed[r.Partition] = true
			continue
		}
		if want := string(r.Value); fmt.Sprint(r.Partition) != want {
			t.Errorf("an output that chose partition %s is on %d", want, r.Partition)
		}
	}
	if len(hashed) != 1 {
		t.Errorf("one key hashed to partitions %v", hashed)
	}
}

func TestSinkUnreachable(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nothing listens there now
	sink, err := kafka.NewSink(kafka.Config{Brokers: []string{addr}}, zaptest.NewLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	defer sink.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := sink.Publish(ctx, []consumer.Output{{Topic: "out", Key: []byte("k"), Value: []byte("v")}}); err == nil {
		t.Fatal("Publish to an unreachable broker succeeded")
	}
	if _, err := kafka.NewSink(kafka.Config{}, nil); err == nil {
		t.Fatal("NewSink without brokers succeeded")
	}
}

// observed is a test logger that also records the lines at level and
// above.
func observed(t *testing.T, level zapcore.Level) (*zap.Logger, *observer.ObservedLogs) {
	core, logs := observer.New(level)
	return zaptest.NewLogger(t, zaptest.WrapOptions(zap.WrapCore(func(c zapcore.Core) zapcore.Core { return zapcore.NewTee(c, core) }))), logs
}

func TestSourceFetchOutage(t *testing.T) {
	c := testbroker.Kafka(t)
	cl := c.Client(t)
	c.CreateTopic(t, "t", 2)
	for p := range 2 {
		produce(t, cl, "t", p, values(fmt.Sprintf("p%d-m", p), 0, 5)...)
	}
	log, logs := observed(t, zapcore.WarnLevel)
	src := openSource(t, config(c), []string{"t"}, "", nil, wire.Start{}, log)
	got := consumertest.FetchN(t, src, 10)

	var failing atomic.Bool
	var failures atomic.Int64
	failing.Store(true)
	failWhile(c, kmsg.Fetch, &failing, &failures, func(kmsg.Request) (kmsg.Response, error) {
		return nil, errors.New("injected fetch failure") // kfake drops the connection
	})
	// Let the readers' fetches in flight end and their retries fail.
	wait.For(t, time.Minute, 10*time.Millisecond, "six failed fetches", func() bool { return failures.Load() >= 6 })
	for p := range 2 {
		produce(t, cl, "t", p, values(fmt.Sprintf("p%d-m", p), 5, 10)...)
	}
	// The fetches go on failing until the outage ends: the warning comes.
	wait.For(t, time.Minute, 10*time.Millisecond, "a warning about the failing fetches", func() bool {
		return logs.FilterMessage("kafka client error").Len() > 0
	})
	failing.Store(false)
	got = append(got, consumertest.FetchN(t, src, 10)...)
	next := map[string]int{}
	for _, m := range got {
		p := m.Position.Source[len(m.Position.Source)-1:]
		if want := fmt.Sprintf("p%s-m%d", p, next[p]); string(m.Value) != want || m.Position.Offset != int64(next[p]) {
			t.Fatalf("%s: got %q at %d, want %q", m.Position.Source, m.Value, m.Position.Offset, want)
		}
		next[p]++
	}
	if n := logs.FilterMessage("kafka client error").Len(); n > 4 {
		t.Fatalf("%d warnings for one outage: not rate-limited", n)
	}
}

// TestSourceRetentionOvertakes deletes messages the source has not read
// yet while it runs: Fetch must fail rather than skip them.
func TestSourceRetentionOvertakes(t *testing.T) {
	c := testbroker.Kafka(t)
	cl := c.Client(t)
	c.CreateTopic(t, "t", 2)
	produce(t, cl, "t", 0, values("m", 0, 10)...)
	var failing atomic.Bool
	var failures atomic.Int64
	failing.Store(true)
	failWhile(c, kmsg.Fetch, &failing, &failures, func(kmsg.Request) (kmsg.Response, error) {
		return nil, errors.New("injected fetch failure")
	})
	src := openSource(t, config(c), []string{"t"}, "", nil, wire.Start{}, zaptest.NewLogger(t))
	wait.For(t, time.Minute, 10*time.Millisecond, "two failed fetches", func() bool { return failures.Load() >= 2 })
	c.DeleteRecords(t, "t", 0, 4)
	failing.Store(false)

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	msgs, err := src.Fetch(ctx, 10)
	want := "kafka:t/0: offsets 0 to 3 were deleted"
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("Fetch = %d messages, %v; want an error with %q", len(msgs), err, want)
	}
	if _, err2 := src.Fetch(ctx, 10); err2 == nil || err2.Error() != err.Error() {
		t.Fatalf("second Fetch: %v, want the same error", err2)
	}
}

// TestSourceRecordsOverOneFetch: a record larger than what one fetch asks
// for per partition (1 MiB) still arrives whole and in its place, before
// and after records that share fetches.
func TestSourceRecordsOverOneFetch(t *testing.T) {
	c := testbroker.Kafka(t, kfake.BrokerConfigs(map[string]string{"message.max.bytes": strconv.Itoa(8 << 20)}))
	cl := c.Client(t, kgo.ProducerBatchMaxBytes(8<<20))
	c.CreateTopic(t, "examples", 1)
	big := bytes.Repeat([]byte{'b'}, 3<<20)
	want := [][]byte{[]byte("before"), big, []byte("after")}
	for _, v := range want {
		produce(t, cl, "examples", 0, v)
	}
	src := openSource(t, config(c), []string{"examples"}, "", nil, wire.Start{Kind: "earliest"}, zaptest.NewLogger(t))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var got [][]byte
	for len(got) < len(want) {
		msgs, err := src.Fetch(ctx, 10)
		if err != nil {
			t.Fatalf("fetch after %d records: %v", len(got), err)
		}
		for _, m := range msgs {
			got = append(got, bytes.Clone(m.Value))
		}
	}
	for i := range want {
		if !bytes.Equal(got[i], want[i]) {
			t.Fatalf("record %d: %d bytes %.10q, want %d bytes %.10q", i, len(got[i]), got[i], len(want[i]), want[i])
		}
	}
}

// TestSourceCompactionGaps reads a compacted partition, whose offsets have
// holes that are not data loss.
func TestSourceCompactionGaps(t *testing.T) {
	c := testbroker.Kafka(t)
	cl := c.Client(t)
	c.CreateTopic(t, "t", 1, "cleanup.policy", "compact")
	for i, k := range []string{"k0", "k1", "k1", "k2", "k3"} {
		// One batch each: compaction keeps the last batch whole.
		produceRecords(t, cl, &kgo.Record{Topic: "t", Key: []byte(k), Value: fmt.Appendf(nil, "m%d", i)})
	}
	c.Compact()
	src := openSource(t, config(c), []string{"t"}, "", nil, wire.Start{}, zaptest.NewLogger(t))
	var got []string
	for _, m := range consumertest.FetchN(t, src, 4) {
		got = append(got, fmt.Sprintf("%d=%s", m.Position.Offset, m.Value))
	}
	if fmt.Sprint(got) != "[0=m0 2=m2 3=m3 4=m4]" {
		t.Fatalf("got %v, want [0=m0 2=m2 3=m3 4=m4] (offset 1 compacted away)", got)
	}
}

// TestSourceTransactionMarkers pins down a kafka-go limitation the Source
// documents: transaction markers (control records) reach Fetch as
// messages. If this fails, kafka-go learned to hide them: update the doc.
func TestSourceTransactionMarkers(t *testing.T) {
	c := testbroker.Kafka(t)
	c.CreateTopic(t, "t", 1)
	txn := c.Client(t, kgo.TransactionalID("producer"))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := txn.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	produce(t, txn, "t", 0, values("m", 0, 2)...)
	if err := txn.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatal(err)
	}
	src := openSource(t, config(c), []string{"t"}, "", nil, wire.Start{}, zaptest.NewLogger(t))
	got := consumertest.FetchN(t, src, 3)
	if string(got[0].Value) != "m0" || string(got[1].Value) != "m1" || got[2].Position.Offset != 2 || len(got[2].Value) != 6 {
		t.Fatalf("got %q, %q, %q at offset %d; want m0, m1 and the 6-byte commit marker at 2",
			got[0].Value, got[1].Value, got[2].Value, got[2].Position.Offset)
	}
}

func TestSourceBrokerRestart(t *testing.T) {
	c := testbroker.Kafka(t, kfake.DataDir(t.TempDir()))
	cl := c.Client(t)
	c.CreateTopic(t, "t", 1)
	produce(t, cl, "t", 0, values("m", 0, 5)...)
	src := openSource(t, config(c), []string{"t"}, "", nil, wire.Start{}, zaptest.NewLogger(t))
	got := consumertest.FetchN(t, src, 5)
	cl.Close()
	c.Shutdown()

	// Down until kafka-go has given up its first attempts and handed the
	// error to the source, which must keep reading.
	wait.For(t, time.Minute, 10*time.Millisecond, "an error handed to the source", func() bool {
		return kafka.FetchErrors(src, "kafka:t/0") > 0
	})
	c.Start()
	produce(t, c.Client(t), "t", 0, values("m", 5, 10)...)
	got = append(got, consumertest.FetchN(t, src, 5)...)
	for i, m := range got {
		if string(m.Value) != fmt.Sprintf("m%d", i) || m.Position.Offset != int64(i) {
			t.Fatalf("message %d is %q at %d across the restart", i, m.Value, m.Position.Offset)
		}
	}
	began := time.Now()
	src.Close()
	// Close waits for the fetches in flight, which the broker holds up to
	// maxWait (500 ms); kafka-go's default would hold them 10 s.
	if took := time.Since(began); took > 8*time.Second {
		t.Fatalf("Close took %v", took)
	}
}

func TestParseSASL(t *testing.T) {
	for _, tc := range []struct {
		mechanism, user string
		name            string // of the mechanism; "" for none
		err             bool
	}{
		{"", "", "", false},
		{"none", "u", "", false},
		{"plain", "u", "PLAIN", false},
		{"PLAIN", "u", "PLAIN", false},
		{"scram-sha-256", "u", "SCRAM-SHA-256", false},
		{"scram-sha-512", "u", "SCRAM-SHA-512", false},
		{"plain", "", "", true},
		{"gssapi", "u", "", true},
	} {
		m, err := kafka.ParseSASL(tc.mechanism, tc.user, "pw")
		if (err != nil) != tc.err {
			t.Fatalf("ParseSASL(%q, %q): error %v, want error %v", tc.mechanism, tc.user, err, tc.err)
		}
		switch {
		case tc.name == "" && m != nil:
			t.Fatalf("ParseSASL(%q) = %s, want none", tc.mechanism, m.Name())
		case tc.name != "" && (m == nil || m.Name() != tc.name):
			t.Fatalf("ParseSASL(%q) = %v, want %s", tc.mechanism, m, tc.name)
		}
	}
}

// selfSigned returns a server certificate for 127.0.0.1 and a pool that
// trusts it.
func selfSigned(t *testing.T) (tls.Certificate, *x509.CertPool) {
	t.Helper()
	cert, pemBytes := testbroker.Certificate(t, "kfake")
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pemBytes) {
		t.Fatal("the certificate's PEM does not parse")
	}
	return cert, pool
}

func TestTLSAndSASL(t *testing.T) {
	cert, pool := selfSigned(t)
	c := testbroker.Kafka(t,
		kfake.TLS(&tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}),
		kfake.EnableSASL(),
		kfake.Superuser("PLAIN", "plain-user", "secret"),
		kfake.Superuser("SCRAM-SHA-256", "scram256-user", "secret"),
		kfake.Superuser("SCRAM-SHA-512", "scram512-user", "secret"),
		kfake.SeedTopics(1, "secure"),
	)
	for i, tc := range []struct{ mech, user string }{
		{"plain", "plain-user"},
		{"scram-sha-256", "scram256-user"},
		{"scram-sha-512", "scram512-user"},
	} {
		mech := tc.mech
		t.Run(mech, func(t *testing.T) {
			m, err := kafka.ParseSASL(mech, tc.user, "secret")
			if err != nil {
				t.Fatal(err)
			}
			cfg := kafka.Config{Brokers: c.ListenAddrs(), TLS: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}, SASL: m}
			sink, err := kafka.NewSink(cfg, zaptest.NewLogger(t))
			if err != nil {
				t.Fatal(err)
			}
			defer sink.Close()
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			value := fmt.Appendf(nil, "via %s", mech)
			if err := sink.Publish(ctx, []consumer.Output{{Topic: "secure", Key: []byte(mech), Value: value}}); err != nil {
				t.Fatalf("Publish: %v", err)
			}
			src := openSource(t, cfg, []string{"secure"}, "g", map[string]int64{"kafka:secure/0": int64(i)}, wire.Start{}, zaptest.NewLogger(t))
			if got := consumertest.FetchN(t, src, 1)[0]; string(got.Value) != string(value) {
				t.Fatalf("read back %q, want %q", got.Value, value)
			}
			if err := src.Commit(ctx, map[string]int64{"kafka:secure/0": int64(i + 1)}); err != nil {
				t.Fatalf("Commit: %v", err)
			}

			wrong, _ := kafka.ParseSASL(mech, tc.user, "wrong")
			bad := cfg
			bad.SASL = wrong
			ctx, cancel = context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			if src, err := kafka.NewSource(ctx, bad, []string{"secure"}, "", nil, wire.Start{}, zaptest.NewLogger(t)); err == nil {
				src.Close()
				t.Fatal("NewSource with a wrong password succeeded")
			}
		})
	}
	t.Run("plaintext client", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		defer cancel()
		if src, err := kafka.NewSource(ctx, kafka.Config{Brokers: c.ListenAddrs()}, []string{"secure"}, "", nil, wire.Start{}, zaptest.NewLogger(t)); err == nil {
			src.Close()
			t.Fatal("NewSource without TLS on a TLS listener succeeded")
		}
	})
}
