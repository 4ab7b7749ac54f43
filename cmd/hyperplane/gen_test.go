package main

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/hyperplane-ml/hyperplane/internal/testbroker"
	"github.com/hyperplane-ml/hyperplane/learner/synth"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestGenPublishesToKafka: gen -to kafka:<topic> publishes the stream that
// gen writes to standard output, one example per message, keyed by seed
// and index.
func TestGenPublishesToKafka(t *testing.T) {
	c := testbroker.Kafka(t, kfake.SeedTopics(2, "examples"))
	const n = 1200
	want := strings.Split(strings.TrimSuffix(mustRun(t, "", "gen", "-examples", fmt.Sprint(n), "-seed", "9"), "\n"), "\n")
	_, stderr, err := runCmd(t, "", "gen", "-examples", fmt.Sprint(n), "-seed", "9",
		"-to", "kafka:examples", "-kafka-brokers", strings.Join(c.ListenAddrs(), ","))
	if err != nil {
		t.Fatalf("gen: %v\n%s", err, stderr)
	}
	if !strings.Contains(stderr, fmt.Sprintf("published %d examples to kafka:examples", n)) {
		t.Errorf("gen did not say what it published: %q", stderr)
	}

	cl := c.Client(t, kgo.ConsumeTopics("examples"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	got := map[string]string{}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for len(got) < n {
		fs := cl.PollFetches(ctx)
		if err := fs.Err(); err != nil {
			t.Fatalf("after %d messages: %v", len(got), err)
		}
		fs.EachRecord(func(r *kgo.Record) { got[string(r.Key)] = string(r.Value) })
	}
	o := synth.DefaultOptions()
	o.Seed = 9
	id := streamID(o, "jsonl")
	for i, line := range want {
		if v := got[fmt.Sprintf("gen-%s-%d", id, i)]; v != line {
			t.Fatalf("message %d is %q, want %q", i, v, line)
		}
	}
}

// TestGenPublishesToJetStream: the same over JetStream, where the key is
// the Nats-Msg-Id, so publishing the stream twice stores it once.
func TestGenPublishesToJetStream(t *testing.T) {
	srv := testbroker.NATS(t)
	ctx := context.Background()
	stream := testbroker.CreateStream(t, srv.JetStream(t), jetstream.StreamConfig{Name: "EXAMPLES", Subjects: []string{"examples"}})
	args := []string{"gen", "-examples", "700", "-seed", "2", "-format", "msgpack", "-to", "jetstream:examples", "-nats-url", srv.URL()}
	mustRun(t, "", args...)
	mustRun(t, "", args...)
	info, err := stream.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if info.State.Msgs != 700 {
		t.Fatalf("the stream holds %d messages after publishing 700 twice, want 700", info.State.Msgs)
	}
	m, err := stream.GetMsg(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	first := mustRun(t, "", "gen", "-examples", "1", "-seed", "2", "-format", "msgpack")
	o := synth.DefaultOptions()
	o.Seed = 2
	wantID := "gen-" + streamID(o, "msgpack") + "-0"
	if string(m.Data) != first || m.Header.Get(jetstream.MsgIDHeader) != wantID {
		t.Fatalf("first message %x (id %q), want %x (id %s)", m.Data, m.Header.Get(jetstream.MsgIDHeader), first, wantID)
	}

	// Another stream (other noise, same seed) is stored beside it.
	mustRun(t, "", "gen", "-examples", "700", "-seed", "2", "-noise", "0.2", "-format", "msgpack", "-to", "jetstream:examples", "-nats-url", srv.URL())
	if info, err = stream.Info(ctx); err != nil || info.State.Msgs != 1400 {
		t.Fatalf("the stream holds %d messages (%v) after another stream of 700, want 1400", info.State.Msgs, err)
	}

	// A subject no stream listens to: gen gives up with the reason.
	_, _, err = runCmd(t, "", "gen", "-examples", "10", "-to", "jetstream:nowhere", "-nats-url", srv.URL())
	if err == nil || !strings.Contains(err.Error(), "check that the topic or stream exists") {
		t.Fatalf("publishing to a subject without a stream: %v", err)
	}
}

// TestGenCountsDuplicates: JetStream drops a message whose id it already
// holds, so gen says how many examples the stream stored and how many it
// dropped, and gen -h says why.
func TestGenCountsDuplicates(t *testing.T) {
	srv := testbroker.NATS(t)
	ctx := context.Background()
	stream := testbroker.CreateStream(t, srv.JetStream(t), jetstream.StreamConfig{Name: "EXAMPLES", Subjects: []string{"examples"}})
	gen := func(n int) string {
		t.Helper()
		_, stderr, err := runCmd(t, "", "gen", "-examples", fmt.Sprint(n), "-seed", "5", "-to", "jetstream:examples", "-nats-url", srv.URL())
		if err != nil {
			t.Fatalf("gen: %v\n%s", err, stderr)
		}
		return stderr
	}
	for _, c := range []struct {
		n    int
		want string
	}{
		{1500, ": 1500 stored, 0 dropped as duplicates\n"},
		{1500, "0 stored, 1500 dropped as duplicates (the stream already held messages with their ids: see gen -h)\n"},
		{2000, "500 stored, 1500 dropped as duplicates"},
	} {
		if got := gen(c.n); !strings.Contains(got, c.want) {
			t.Errorf("gen -examples %d said %q, want %q", c.n, got, c.want)
		}
	}
	if out := gen(1); !strings.HasSuffix(out, ": 0 stored, 1 dropped as duplicates (the stream already held messages with their ids: see gen -h)\n") {
		t.Errorf("gen -examples 1 said %q", out)
	}
	if info, err := stream.Info(ctx); err != nil || info.State.Msgs != 2000 {
		t.Fatalf("the stream holds %d messages (%v), want 2000", info.State.Msgs, err)
	}

	help := mustRun(t, "", "gen", "-h")
	for _, want := range []string{"gen-<stream>-<index>", "Nats-Msg-Id", "same options sends the same ids", "duplicate window"} {
		if !strings.Contains(help, want) {
			t.Errorf("gen -h does not explain the message ids (%q):\n%s", want, help)
		}
	}
}
