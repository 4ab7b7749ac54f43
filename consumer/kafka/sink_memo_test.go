package kafka_test

import (
	"context"
	"net"
	"sync/atomic"
	"testing"

	kafkago "github.com/segmentio/kafka-go"
	metadataAPI "github.com/segmentio/kafka-go/protocol/metadata"

	"github.com/hyperplane-ml/hyperplane/consumer/kafka"
	"github.com/hyperplane-ml/hyperplane/internal/testbroker"
)

// countingTransport counts the metadata requests that reach kafka-go's
// transport.
type countingTransport struct {
	kafkago.RoundTripper
	metadata atomic.Int64
}

func (t *countingTransport) RoundTrip(ctx context.Context, addr net.Addr, req kafkago.Request) (kafkago.Response, error) {
	if _, ok := req.(*metadataAPI.Request); ok {
		t.metadata.Add(1)
	}
	return t.RoundTripper.RoundTrip(ctx, addr, req)
}

// TestSinkMemoTransport: within one write the writers' transport answers
// the metadata of a topic once, and the partitions every later message
// is balanced over are those; another write, or another topic, asks
// again.
func TestSinkMemoTransport(t *testing.T) {
	c := testbroker.Kafka(t)
	c.CreateTopic(t, "four", 4)
	c.CreateTopic(t, "one", 1)
	tr := &kafkago.Transport{}
	defer tr.CloseIdleConnections()
	counted := &countingTransport{RoundTripper: tr}
	memo := kafka.MemoTransport(counted)
	addr := kafkago.TCP(c.ListenAddrs()...)
	partitions := func(ctx context.Context, topic string) int {
		t.Helper()
		res, err := memo.RoundTrip(ctx, addr, &metadataAPI.Request{TopicNames: []string{topic}})
		if err != nil {
			t.Fatal(err)
		}
		for _, tm := range res.(*metadataAPI.Response).Topics {
			if tm.Name == topic {
				return len(tm.Partitions)
			}
		}
		t.Fatalf("topic %s not in the answer", topic)
		return 0
	}
	write := kafka.WithMetadataMemo(context.Background())
	for range 3 {
		if got := partitions(write, "four"); got != 4 {
			t.Fatalf("four has %d partitions, want 4", got)
		}
	}
	if n := counted.metadata.Load(); n != 1 {
		t.Fatalf("one write asked the transport %d times for one topic, want once", n)
	}
	if got := partitions(write, "one"); got != 1 {
		t.Fatalf("one has %d partitions, want 1", got)
	}
	if got := partitions(kafka.WithMetadataMemo(context.Background()), "four"); got != 4 {
		t.Fatalf("four has %d partitions, want 4", got)
	}
	partitions(context.Background(), "four")
	partitions(context.Background(), "four")
	if n := counted.metadata.Load(); n != 5 {
		t.Fatalf("the transport was asked %d times, want 5: once for the first write's topic, once for its second topic, once for the next write, twice without a write", n)
	}
}
