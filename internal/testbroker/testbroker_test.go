package testbroker_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/hyperplane-ml/hyperplane/internal/testbroker"
	"github.com/hyperplane-ml/hyperplane/internal/wait"
)

// TestNATSRestart: a stream and its messages survive Shutdown and Start,
// on the same URL, and a Conn reconnects by itself.
func TestNATSRestart(t *testing.T) {
	n := testbroker.NATS(t)
	url := n.URL()
	js := n.JetStream(t)
	testbroker.CreateStream(t, js, jetstream.StreamConfig{Name: "S", Subjects: []string{"s"}, Storage: jetstream.FileStorage})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
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
	// IsConnected alone says nothing here: it stays true until the Conn's
	// reader sees the old connection close, which on a busy machine can
	// come after Start. A reconnect counted and a Conn connected is the new
	// connection, its subscriptions sent again.
	nc := js.Conn()
	wait.For(t, time.Minute, 10*time.Millisecond, "a reconnect", func() bool { return nc.Stats().Reconnects > 0 && nc.IsConnected() })
	publishAcked(t, ctx, js, "s", []byte("after"), "after")
	got := testbroker.ReadStream(t, ctx, js, "S")
	if want := [][]byte{[]byte("before"), []byte("after")}; !slices.EqualFunc(got, want, slices.Equal) {
		t.Fatalf("stream holds %q, want %q", got, want)
	}
}

// publishAcked publishes data to subject until the stream acknowledges it.
// A request written while the Conn still holds a connection that has gone
// away is lost: whether the socket took it or it sat in the Conn's buffer,
// the reconnect drops it (nats.go keeps, and sends again, only what is
// written once it knows it is reconnecting), and the request waits for an
// answer that never comes. So each attempt has its own short timeout, and
// all have the same message id: the stream stores the message once however
// many attempts reach it.
func publishAcked(t *testing.T, ctx context.Context, js jetstream.JetStream, subject string, data []byte, id string) {
	t.Helper()
	wait.For(t, time.Minute, 50*time.Millisecond, fmt.Sprintf("%q acknowledged", data), func() bool {
		actx, cancel := context.WithTimeout(ctx, 2*time.Second)
		_, err := js.Publish(actx, subject, data, jetstream.WithMsgID(id))
		cancel()
		if err != nil {
			t.Logf("publish %q: %v; again", data, err)
		}
		return err == nil
	})
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
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
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
	if got, want := c.ReadTopic(t, ctx, "t"), [][]byte{[]byte("before"), []byte("after")}; !slices.EqualFunc(got, want, slices.Equal) {
		t.Fatalf("ReadTopic: %q, want %q", got, want)
	}
	c.CreateTopic(t, "empty", 3)
	if got := c.ReadTopic(t, ctx, "empty"); got != nil {
		t.Fatalf("an empty topic reads as %q", got)
	}
}
