package nats_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/zap"

	"github.com/hyperplane-ml/hyperplane/consumer"
	"github.com/hyperplane-ml/hyperplane/consumer/nats"
	"github.com/hyperplane-ml/hyperplane/internal/testbroker"
	"github.com/hyperplane-ml/hyperplane/wire"
)

// TestRangeEndsOnABatchBeyondTheEnd: a range that stops before offset N
// (a replay's --to) is complete when a fetch returns only messages at or
// beyond N, with nothing to deliver: waiting for a batch to deliver, a
// replay whose messages before N had come in batches of their own never
// ended.
func TestRangeEndsOnABatchBeyondTheEnd(t *testing.T) {
	srv := testbroker.NATS(t)
	js := srv.JetStream(t)
	testbroker.CreateStream(t, js, jetstream.StreamConfig{Name: "EXAMPLES", Subjects: []string{"examples"}})
	publish := func(from, to int) {
		t.Helper()
		for i := from; i < to; i++ {
			if _, err := js.Publish(context.Background(), "examples", []byte(`{"label":1,"features":{"a":1}}`)); err != nil {
				t.Fatal(err)
			}
		}
	}
	publish(1, 11) // sequences 1 to 10
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	src, err := nats.NewJetStreamSource(ctx, srv.Conn(t), "EXAMPLES", "", nil, wire.Start{Kind: wire.StartEarliest}, zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	b := &consumer.Range{Source: src, End: consumer.OffsetBefore(11), Idle: true}
	got := 0
	for got < 10 {
		msgs, err := b.Fetch(ctx, 1024)
		if err != nil {
			t.Fatal(err)
		}
		got += len(msgs)
	}
	select {
	case <-b.Done():
		t.Fatal("the range was complete before it reached offset 11")
	default:
	}
	publish(11, 51) // sequences 11 to 50: every one at or beyond the end
	fetched := make(chan error, 1)
	go func() {
		msgs, err := b.Fetch(ctx, 1024)
		if err == nil && len(msgs) > 0 {
			err = fmt.Errorf("fetched %d messages beyond the end", len(msgs))
		}
		fetched <- err
	}()
	select {
	case <-b.Done():
	case err := <-fetched:
		t.Fatalf("Fetch returned before the range was complete: %v", err)
	case <-time.After(time.Minute):
		t.Fatal("the range was not complete after a batch beyond offset 11")
	}
	cancel()
	if err := <-fetched; !errors.Is(err, context.Canceled) {
		t.Fatalf("Fetch after the end: %v, want the context's cancellation", err)
	}
}
