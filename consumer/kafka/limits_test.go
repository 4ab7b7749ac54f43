package kafka_test

import (
	"bytes"
	"context"
	"errors"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/hyperplane-ml/hyperplane/consumer"
	"github.com/hyperplane-ml/hyperplane/consumer/kafka"
	"github.com/hyperplane-ml/hyperplane/internal/testbroker"
	"github.com/hyperplane-ml/hyperplane/internal/wait"
)

// overhead is what a topic's max.message.bytes must hold besides one
// output's key and value: the record batch header (61 bytes) and
// kafka-go's accounting of a message (23 bytes).
const overhead = 61 + 23

// TestSinkMaxOutputBytes: the sink learns each topic's real limit (its
// own max.message.bytes, else the broker's message.max.bytes), publishes
// an output of exactly that size, batches smaller ones within it, and
// refuses one byte more at once.
func TestSinkMaxOutputBytes(t *testing.T) {
	const brokerMax = 3 << 20
	c := testbroker.Kafka(t, kfake.BrokerConfigs(map[string]string{"message.max.bytes": strconv.Itoa(brokerMax)}))
	c.CreateTopic(t, "big", 1, "max.message.bytes", strconv.Itoa(64<<20))
	c.CreateTopic(t, "small", 1, "max.message.bytes", "20000")
	c.CreateTopic(t, "plain", 1)
	log, logs := observed(t, zapcore.WarnLevel)
	sink, err := kafka.NewSink(config(c), log)
	if err != nil {
		t.Fatal(err)
	}
	defer sink.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	for _, tc := range []struct {
		topic string
		want  int // max.message.bytes
	}{
		{"big", 64 << 20},
		{"small", 20000},
		{"plain", brokerMax},
		{"not-yet", brokerMax}, // what a topic created by the first produce gets
	} {
		if got := sink.MaxOutputBytes(tc.topic); got != tc.want-overhead {
			t.Errorf("%s: MaxOutputBytes = %d, want %d (max.message.bytes %d)", tc.topic, got, tc.want-overhead, tc.want)
		}
	}

	// An output at the limit goes through; one byte more fails at once,
	// without a produce request.
	var produces atomic.Int64
	c.ControlKey(int16(kmsg.Produce), func(kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		produces.Add(1)
		return nil, nil, false
	})
	for _, topic := range []string{"small", "plain"} {
		limit := sink.MaxOutputBytes(topic)
		key := "kafka:in/0/7"
		fits := consumer.Output{Topic: topic, Key: []byte(key), Value: bytes.Repeat([]byte{'v'}, limit-len(key))}
		if err := sink.Publish(ctx, []consumer.Output{fits}); err != nil {
			t.Fatalf("%s: publishing an output of exactly MaxOutputBytes: %v", topic, err)
		}
		if recs := readBack(t, c, topic, 1); len(recs) != 1 || len(recs[0].Value) != len(fits.Value) {
			t.Fatalf("%s: read back %d records, want the one at the limit", topic, len(recs))
		}
		over := fits
		over.Value = append(over.Value, 'v')
		before := produces.Load()
		if before == 0 {
			t.Fatal("the output at the limit went through without a produce request counted")
		}
		if err := sink.Publish(ctx, []consumer.Output{over}); err == nil {
			t.Fatalf("%s: an output one byte over MaxOutputBytes was published", topic)
		}
		if n := produces.Load() - before; n != 0 {
			t.Fatalf("%s: refusing an output over the limit took %d produce requests, want none", topic, n)
		}
	}

	// Over kafka-go's default BatchBytes (1 MiB), within the topic's limit.
	large := consumer.Output{Topic: "big", Key: []byte("k"), Value: bytes.Repeat([]byte{'b'}, 2<<20)}
	if err := sink.Publish(ctx, []consumer.Output{large}); err != nil {
		t.Fatalf("publishing 2 MiB to a topic that takes 64 MiB: %v", err)
	}

	// Many outputs for one partition of the small topic, with one for
	// another topic: the small topic's batches stay within its limit.
	var batch []consumer.Output
	for i := range 12 {
		batch = append(batch, consumer.Output{Topic: "small", Key: []byte("same"), Value: bytes.Repeat([]byte{byte('a' + i)}, 6000)})
	}
	batch = append(batch, consumer.Output{Topic: "plain", Key: []byte("other"), Value: []byte("x")})
	if err := sink.Publish(ctx, batch); err != nil {
		t.Fatalf("publishing 12 outputs of 6000 bytes to a topic of 20000: %v", err)
	}
	recs := readBack(t, c, "small", 13)
	if len(recs) != 13 {
		t.Fatalf("read back %d records from small, want 13", len(recs))
	}
	for i, r := range recs[1:] {
		if r.Value[0] != byte('a'+i) {
			t.Fatalf("record %d is %q..., out of order", i+1, r.Value[:1])
		}
	}
	if n := logs.FilterMessageSnippet("cannot look up").Len(); n != 0 {
		t.Fatalf("%d lookup warnings with a cluster that answers", n)
	}
}

// TestSinkMaxOutputBytesFallback: a cluster that will not describe its
// configs gives the documented fallback, with one warning per topic, and
// publishing still works.
func TestSinkMaxOutputBytesFallback(t *testing.T) {
	c := testbroker.Kafka(t, kfake.BrokerConfigs(map[string]string{"message.max.bytes": strconv.Itoa(8 << 20)}))
	c.CreateTopic(t, "out", 1)
	denyDescribeConfigs(c)
	log, logs := observed(t, zapcore.WarnLevel)
	sink, err := kafka.NewSink(config(c), log)
	if err != nil {
		t.Fatal(err)
	}
	defer sink.Close()
	want := kafka.FallbackMaxMessageBytes - overhead
	for range 3 {
		if got := sink.MaxOutputBytes("out"); got != want {
			t.Fatalf("MaxOutputBytes = %d, want the fallback's %d", got, want)
		}
	}
	if n := logs.FilterMessageSnippet("cannot look up").Len(); n != 1 {
		t.Fatalf("%d warnings about the failed lookup, want 1", n)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	out := consumer.Output{Topic: "out", Key: []byte("k"), Value: bytes.Repeat([]byte{'v'}, want-1)}
	if err := sink.Publish(ctx, []consumer.Output{out}); err != nil {
		t.Fatalf("publishing at the fallback limit: %v", err)
	}
	if err := sink.Close(); err != nil {
		t.Fatal(err)
	}
	if err := sink.Publish(ctx, []consumer.Output{out}); err == nil {
		t.Fatal("Publish after Close succeeded")
	}
	if got := sink.MaxOutputBytes("other"); got != want {
		t.Fatalf("MaxOutputBytes after Close = %d, want the fallback's %d", got, want)
	}
}

// TestSinkLooksUpAFailedLimitAgain: a topic whose lookup failed goes by the
// fallback only until a lookup succeeds, not for the sink's life.
func TestSinkLooksUpAFailedLimitAgain(t *testing.T) {
	c := testbroker.Kafka(t, kfake.BrokerConfigs(map[string]string{"message.max.bytes": strconv.Itoa(8 << 20)}))
	c.CreateTopic(t, "out", 1)
	allow := denyDescribeConfigs(c)
	log, _ := observed(t, zapcore.WarnLevel)
	sink, err := kafka.NewSink(config(c), log)
	if err != nil {
		t.Fatal(err)
	}
	defer sink.Close()
	kafka.SetLookupRetry(sink, 50*time.Millisecond)
	if got, want := sink.MaxOutputBytes("out"), kafka.FallbackMaxMessageBytes-overhead; got != want {
		t.Fatalf("while the lookup fails: MaxOutputBytes = %d, want the fallback's %d", got, want)
	}
	allow()
	// Each call after the retry delay looks the limit up again, within
	// the lookup's timeout, which a busy machine may overrun: the limit
	// must be learned soon, not at the first call.
	want := 8<<20 - overhead
	wait.For(t, time.Minute, 10*time.Millisecond, "MaxOutputBytes at the broker's limit", func() bool {
		got := sink.MaxOutputBytes("out")
		if got != want && got != kafka.FallbackMaxMessageBytes-overhead {
			t.Fatalf("once the lookup works: MaxOutputBytes = %d, want the broker's %d", got, want)
		}
		return got == want
	})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	big := consumer.Output{Topic: "out", Key: []byte("k"), Value: bytes.Repeat([]byte{'v'}, 2<<20)}
	if err := sink.Publish(ctx, []consumer.Output{big}); err != nil {
		t.Fatalf("publishing 2 MiB under the learned 8 MiB limit: %v", err)
	}
}

// denyDescribeConfigs makes c refuse every DescribeConfigs request, as a
// cluster does to a client without the permission, until allow is called.
func denyDescribeConfigs(c *testbroker.KafkaCluster) (allow func()) {
	var allowed atomic.Bool
	c.ControlKey(int16(kmsg.DescribeConfigs), func(req kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		if allowed.Load() {
			return nil, nil, false
		}
		dreq := req.(*kmsg.DescribeConfigsRequest)
		resp := dreq.ResponseKind().(*kmsg.DescribeConfigsResponse)
		for _, r := range dreq.Resources {
			rr := kmsg.NewDescribeConfigsResponseResource()
			rr.ResourceType, rr.ResourceName = r.ResourceType, r.ResourceName
			rr.ErrorCode = kerr.TopicAuthorizationFailed.Code
			if r.ResourceType == kmsg.ConfigResourceTypeBroker {
				rr.ErrorCode = kerr.ClusterAuthorizationFailed.Code
			}
			resp.Resources = append(resp.Resources, rr)
		}
		return resp, nil, true
	})
	return func() { allowed.Store(true) }
}

// TestSinkTopicLimitLowered: a topic whose max.message.bytes is lowered
// below an output made to its old limit fails the publish with
// consumer.ErrOutputTooLarge, which stops the worker rather than retry
// for ever: its next start makes the outputs to the new limit.
func TestSinkTopicLimitLowered(t *testing.T) {
	c := testbroker.Kafka(t)
	c.CreateTopic(t, "shrinks", 1, "max.message.bytes", "20000")
	sink, err := kafka.NewSink(config(c), zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	defer sink.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	out := consumer.Output{Topic: "shrinks", Key: []byte("kafka:in/0/1"), Value: bytes.Repeat([]byte{'v'}, 10000)}
	if err := sink.Publish(ctx, []consumer.Output{out}); err != nil {
		t.Fatalf("publishing under the limit: %v", err)
	}
	req := kmsg.NewPtrIncrementalAlterConfigsRequest()
	res := kmsg.NewIncrementalAlterConfigsRequestResource()
	res.ResourceType, res.ResourceName = kmsg.ConfigResourceTypeTopic, "shrinks"
	cfg := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
	cfg.Name, cfg.Value = "max.message.bytes", kmsg.StringPtr("1000")
	res.Configs = append(res.Configs, cfg)
	req.Resources = append(req.Resources, res)
	resp, err := req.RequestWith(ctx, c.Client(t))
	if err != nil {
		t.Fatal(err)
	}
	if err := kerr.ErrorForCode(resp.Resources[0].ErrorCode); err != nil {
		t.Fatal(err)
	}
	err = sink.Publish(ctx, []consumer.Output{out})
	if !errors.Is(err, consumer.ErrOutputTooLarge) {
		t.Fatalf("publishing over the lowered limit: %v, want consumer.ErrOutputTooLarge", err)
	}
	if !strings.Contains(err.Error(), "max.message.bytes") {
		t.Errorf("the error does not name max.message.bytes: %v", err)
	}
}
