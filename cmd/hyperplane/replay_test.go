package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/zap"

	natsio "github.com/hyperplane-ml/hyperplane/consumer/nats"
	"github.com/hyperplane-ml/hyperplane/internal/testbroker"
	"github.com/hyperplane-ml/hyperplane/wire"
)

// TestReplayRange: a replay without --out keeps its model in memory
// without the worker's warning that the model is lost when it stops,
// which is what a replay without --out is for, and its summary says that
// --to offset:N leaves offset N out.
func TestReplayRange(t *testing.T) {
	srv := testbroker.NATS(t)
	testbroker.CreateStream(t, srv.JetStream(t), jetstream.StreamConfig{Name: "EXAMPLES", Subjects: []string{"examples"}})
	mustRun(t, "", "gen", "-examples", "50", "-seed", "2", "-to", "jetstream:examples", "-nats-url", srv.URL())
	args := []string{"replay", "--nats.url", srv.URL(), "--source.kind", "jetstream", "--source.stream", "EXAMPLES", "--from", "earliest"}
	for _, c := range []struct {
		to       []string
		examples int
		summary  string
	}{
		{[]string{"--to", "offset:11"}, 10, `"from":"earliest","to":"offset:11 (exclusive)"`},
		{nil, 50, `"from":"earliest","to":"latest"`},
	} {
		out, stderr, err := runCmd(t, "", append(args, c.to...)...)
		if err != nil {
			t.Fatalf("replay %q: %v\n%s", c.to, err, stderr)
		}
		if strings.Contains(stderr, "lost when the worker stops") || strings.Contains(stderr, "snapshot.url") {
			t.Errorf("replay %q warns as the worker does: %s", c.to, stderr)
		}
		var sum struct{ Examples int }
		if err := json.Unmarshal([]byte(out), &sum); err != nil || sum.Examples != c.examples || !strings.Contains(out, c.summary) {
			t.Errorf("replay %q printed %s (%v), want %d examples and %s", c.to, out, err, c.examples, c.summary)
		}
	}
	if help := mustRun(t, "", "replay", "-h"); !strings.Contains(help, "stops before offset N") {
		t.Errorf("replay -h does not say that --to offset:N is exclusive:\n%s", help)
	}
}

// TestReplayEndsOnABatchBeyondTheEnd: a replay to offset N is over when a
// fetch returns only messages at or beyond N, with nothing to learn. It
// waited for a batch it could learn, and a replay whose messages before N
// had come in batches of their own never ended (TestReplayRange hung so
// under load).
func TestReplayEndsOnABatchBeyondTheEnd(t *testing.T) {
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
	src, err := natsio.NewJetStreamSource(ctx, srv.Conn(t), "EXAMPLES", "", nil, wire.Start{Kind: wire.StartEarliest}, zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	b := &boundedSource{Source: src, end: 11, done: make(chan struct{})}
	got := 0
	for got < 10 {
		msgs, err := b.Fetch(ctx, 1024)
		if err != nil {
			t.Fatal(err)
		}
		got += len(msgs)
	}
	select {
	case <-b.done:
		t.Fatal("the replay ended before it reached offset 11")
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
	case <-b.done:
	case err := <-fetched:
		t.Fatalf("Fetch returned before the replay ended: %v", err)
	case <-time.After(time.Minute):
		t.Fatal("the replay did not end after a batch beyond offset 11")
	}
	cancel()
	if err := <-fetched; !errors.Is(err, context.Canceled) {
		t.Fatalf("Fetch after the end: %v, want the context's cancellation", err)
	}
}
