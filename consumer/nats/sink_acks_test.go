package nats_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	natsgo "github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/zap/zaptest"

	"github.com/hyperplane-ml/hyperplane/consumer"
	"github.com/hyperplane-ml/hyperplane/consumer/nats"
	"github.com/hyperplane-ml/hyperplane/internal/testbroker"
)

// outStream starts a JetStream server with a stream "out" of the subjects
// out.>, and returns a connection, the JetStream API, a JetStream sink on
// the connection and a context for the test.
func outStream(t *testing.T) (*natsgo.Conn, jetstream.JetStream, *nats.Sink, context.Context) {
	t.Helper()
	_, nc, js := startJetStream(t)
	testbroker.CreateStream(t, js, jetstream.StreamConfig{Name: "out", Subjects: []string{"out.>"}})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return nc, js, newSink(t, nc, true, zaptest.NewLogger(t)), ctx
}

// TestJetStreamSinkAcks: the sink counts what the stream did with each
// message, once Publish has returned: stored, or dropped as a duplicate of
// a message with the same id; a batch larger than the window of messages
// in flight counts in full.
func TestJetStreamSinkAcks(t *testing.T) {
	nc, js, sink, ctx := outStream(t)
	for _, step := range []struct {
		from, to           int
		stored, duplicates int64 // in all, after the step
	}{
		{0, 50, 50, 0},
		{0, 50, 50, 50},
		{40, 3000, 3000, 60},
	} {
		if err := sink.Publish(ctx, outputs(step.from, step.to)); err != nil {
			t.Fatal(err)
		}
		if stored, duplicates := sink.Acks(); stored != step.stored || duplicates != step.duplicates {
			t.Fatalf("after publishing %d to %d: %d stored, %d duplicates; want %d, %d", step.from, step.to, stored, duplicates, step.stored, step.duplicates)
		}
	}
	if n := streamMsgs(t, js, "out"); n != 3000 {
		t.Fatalf("the stream holds %d messages, want 3000", n)
	}

	core := newSink(t, nc, false, zaptest.NewLogger(t))
	if err := core.Publish(ctx, outputs(0, 10)); err != nil {
		t.Fatal(err)
	}
	if stored, duplicates := core.Acks(); stored != 0 || duplicates != 0 {
		t.Errorf("core NATS: %d stored, %d duplicates; want none", stored, duplicates)
	}
}

// TestJetStreamSinkSend: batches sent one behind the other, before either
// is waited for, are each held when their wait returns, in the order they
// were sent; a batch to a subject no stream captures fails its wait,
// naming the subject, and not the wait of the batch beside it.
func TestJetStreamSinkSend(t *testing.T) {
	_, js, sink, ctx := outStream(t)
	var ss consumer.SendSink = sink
	// Larger than the messages in flight at once: the second batch is
	// sent while the first is being stored.
	first := ss.Send(ctx, outputs(0, 3000))
	lost := outputs(0, 1)
	lost[0].Topic = "nowhere.events"
	stray := ss.Send(ctx, lost)
	second := ss.Send(ctx, outputs(3000, 3100))
	if err := first(ctx); err != nil {
		t.Fatal(err)
	}
	if err := stray(ctx); err == nil || !strings.Contains(err.Error(), "nowhere.events") {
		t.Fatalf("the batch no stream captures: %v, want an error naming its subject", err)
	}
	if err := second(ctx); err != nil {
		t.Fatal(err)
	}
	if n := streamMsgs(t, js, "out"); n != 3100 {
		t.Fatalf("the stream holds %d messages, want 3100", n)
	}
	cons, err := js.OrderedConsumer(ctx, "out", jetstream.OrderedConsumerConfig{})
	if err != nil {
		t.Fatal(err)
	}
	batch, err := cons.Fetch(3100, jetstream.FetchMaxWait(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	i := 0
	for m := range batch.Messages() {
		if want := fmt.Sprintf("m%d", i); string(m.Data()) != want {
			t.Fatalf("message %d of the stream is %q, want %q", i, m.Data(), want)
		}
		i++
	}
	if i != 3100 {
		t.Fatalf("read %d messages back, want 3100", i)
	}
}

// TestJetStreamSinkConcurrentPublishes: each of two Publishes in flight
// at once waits for its own messages: one to a subject no stream captures
// fails, whatever the other does meanwhile, and the other succeeds.
func TestJetStreamSinkConcurrentPublishes(t *testing.T) {
	_, _, sink, ctx := outStream(t)
	lost := outputs(0, 10)
	lost[0].Topic = "nowhere.events"
	errs := make(chan error, 1)
	go func() { errs <- sink.Publish(ctx, lost) }()
	for i := range 20 {
		if err := sink.Publish(ctx, outputs(100+10*i, 110+10*i)); err != nil {
			t.Fatal(err)
		}
	}
	if err := <-errs; err == nil || !strings.Contains(err.Error(), "nowhere.events") {
		t.Fatalf("the batch with a message no stream captures: %v, want an error naming its subject", err)
	}
}

// TestJetStreamSinkLateWait: a wait called after its batch's
// acknowledgements are in succeeds, though its context is done.
func TestJetStreamSinkLateWait(t *testing.T) {
	_, _, sink, ctx := outStream(t)
	wait := sink.Send(ctx, outputs(0, 50))
	// One stream acknowledges a connection's messages in order: once a
	// later batch is held, so is the first.
	if err := sink.Publish(ctx, outputs(50, 51)); err != nil {
		t.Fatal(err)
	}
	done, stop := context.WithCancel(ctx)
	stop()
	if err := wait(done); err != nil {
		t.Fatalf("a late wait with every acknowledgement in: %v", err)
	}
	if stored, _ := sink.Acks(); stored != 51 {
		t.Fatalf("%d stored, want 51", stored)
	}
}

// TestJetStreamSinkRecoversFromAbandonedBatches: messages in flight whose
// acknowledgements never come, and whose wait nobody calls, fill the
// messages the client keeps in flight; the next publish stalls, fails
// and abandons them, and the one after succeeds.
func TestJetStreamSinkRecoversFromAbandonedBatches(t *testing.T) {
	nc, js, sink, ctx := outStream(t)
	// A subscriber that never replies: the publishes to it are neither
	// acknowledged nor refused.
	silent, err := nc.SubscribeSync("silent.>")
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Unsubscribe()
	lost := outputs(0, 1100)
	for i := range lost {
		lost[i].Topic = "silent.events"
	}
	_ = sink.Send(ctx, lost) // its wait is never called
	var errs []error
	for range 2 {
		err := sink.Publish(ctx, outputs(0, 10))
		if err == nil {
			break
		}
		errs = append(errs, err)
	}
	if len(errs) == 2 {
		t.Fatalf("two publishes after the abandoned batch failed: %v", errs)
	}
	if n := streamMsgs(t, js, "out"); n != 10 {
		t.Fatalf("the stream holds %d messages, want 10", n)
	}
}
