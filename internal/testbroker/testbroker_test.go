package testbroker_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/hyperplane-ml/hyperplane/internal/testbroker"
)

// TestNATSRestart: a stream and its messages survive Shutdown and Start,
// on the same URL, and a Conn reconnects by itself.
func TestNATSRestart(t *testing.T) {
	n := testbroker.NATS(t)
	url := n.URL()
	js := n.JetStream(t)
	testbroker.CreateStream(t, js, jetstream.StreamConfig{Name: "S", Subjects: []string{"s"}, Storage: jetstream.FileStorage})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := js.Publish(ctx, "s", []byte("before")); err != nil {
		t.Fatal(err)
	}
	n.Shutdown()
	n.Shutdown() // a second time does nothing
	n.Start()
	if n.URL() != url {
		t.Fatalf("URL %s after Start, was %s", n.URL(), url)
	}
	for !js.Conn().IsConnected() {
		if ctx.Err() != nil {
			t.Fatal("no reconnect")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if _, err := js.Publish(ctx, "s", []byte("after")); err != nil {
		t.Fatal(err)
	}
	got := testbroker.ReadStream(t, ctx, js, "S")
	if want := [][]byte{[]byte("before"), []byte("after")}; !slices.EqualFunc(got, want, slices.Equal) {
		t.Fatalf("stream holds %q, want %q", got, want)
	}
}

func TestNATSOptions(t *testing.T) {
	n := testbroker.NATS(t, testbroker.MaxPayload(4096))
	if got := n.Conn(t).MaxPayload(); got != 4096 {
		t.Fatalf("max_payload %d, want 4096", got)
	}
	// Standalone: another test's server stands in for one that runs
	// outside the test.
	s := testbroker.NATS(t, testbroker.Standalone(n.URL()))
	if s.URL() != n.URL() {
		t.Fatalf("standalone URL %s, want %s", s.URL(), n.URL())
	}
	if got := s.Conn(t).MaxPayload(); got != 4096 {
		t.Fatalf("the standalone connection reached another server (max_payload %d)", got)
	}
	js := s.JetStream(t)
	testbroker.CreateStream(t, js, jetstream.StreamConfig{Name: "EMPTY", Subjects: []string{"empty"}})
	if got := testbroker.ReadStream(t, context.Background(), js, "EMPTY"); got != nil {
		t.Fatalf("an empty stream reads as %q", got)
	}
}

// TestKafkaRestart: with a data directory, topics and records survive
// Shutdown and Start, on the same addresses.
func TestKafkaRestart(t *testing.T) {
	c := testbroker.Kafka(t, kfake.DataDir(t.TempDir()))
	addrs := c.ListenAddrs()
	c.CreateTopic(t, "t", 2, "retention.ms", "3600000")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	produce := func(v string) {
		t.Helper()
		cl := c.Client(t)
		defer cl.Close()
		if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "t", Partition: 1, Value: []byte(v)}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	produce("before")
	c.Shutdown()
	c.Shutdown()
	c.Start()
	if !slices.Equal(c.ListenAddrs(), addrs) {
		t.Fatalf("listening on %v after Start, was %v", c.ListenAddrs(), addrs)
	}
	produce("after")
	cl := c.Client(t, kgo.ConsumeTopics("t"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	var got []string
	for len(got) < 2 && ctx.Err() == nil {
		fs := cl.PollFetches(ctx)
		fs.EachRecord(func(r *kgo.Record) {
			if r.Partition != 1 {
				t.Errorf("record %q on partition %d, want the one it named", r.Value, r.Partition)
			}
			got = append(got, string(r.Value))
		})
	}
	if !slices.Equal(got, []string{"before", "after"}) {
		t.Fatalf("read %q, want before and after", got)
	}
}
