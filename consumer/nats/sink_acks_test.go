package nats_test

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/zap/zaptest"

	"github.com/hyperplane-ml/hyperplane/internal/testbroker"
)

// TestJetStreamSinkAcks: the sink counts what the stream did with each
// message, once Publish has returned: stored, or dropped as a duplicate of
// a message with the same id; a batch larger than the window of messages
// in flight counts in full.
func TestJetStreamSinkAcks(t *testing.T) {
	_, nc, js := startJetStream(t)
	testbroker.CreateStream(t, js, jetstream.StreamConfig{Name: "out", Subjects: []string{"out.>"}})
	sink := newSink(t, nc, true, zaptest.NewLogger(t))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
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
