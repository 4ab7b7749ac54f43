package main

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"strings"
	"testing"
	"time"

	"github.com/hyperplane-ml/hyperplane/consumer/nats"
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
	id := o.StreamID("jsonl")
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
	wantID := "gen-" + o.StreamID("msgpack") + "-0"
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

// TestGenPublishesToPartitionedJetStream: with a * token in -to's subject,
// example i goes to the subject with key i mod -keys in its place, so a
// stream partitioned by a subject transform spreads the examples over all
// its partitions, a key's in one; the same options fill the partitions of
// another such stream with the same examples in the same order. Without a
// * every example lands in one partition.
func TestGenPublishesToPartitionedJetStream(t *testing.T) {
	srv := testbroker.NATS(t)
	js := srv.JetStream(t)
	ctx := context.Background()
	for _, prefix := range []string{"a", "b", "c"} {
		cfg := nats.PartitionedStreamConfig(strings.ToUpper(prefix), prefix+".*", 4)
		cfg.Storage = jetstream.MemoryStorage
		testbroker.CreateStream(t, js, cfg)
	}
	const n, keys = 600, 50
	want := strings.Split(strings.TrimSuffix(mustRun(t, "", "gen", "-examples", fmt.Sprint(n), "-seed", "4"), "\n"), "\n")
	o := synth.DefaultOptions()
	o.Seed = 4
	id := o.StreamID("jsonl")

	type stored struct{ partition, key, data string }
	read := func(stream string) []stored {
		t.Helper()
		s, err := js.Stream(ctx, stream)
		if err != nil {
			t.Fatal(err)
		}
		var out []stored
		for seq := uint64(1); seq <= n; seq++ {
			m, err := s.GetMsg(ctx, seq)
			if err != nil {
				t.Fatalf("%s: sequence %d: %v", stream, seq, err)
			}
			toks := strings.Split(m.Subject, ".")
			if len(toks) != 3 {
				t.Fatalf("%s: sequence %d is stored on %s, want <prefix>.<partition>.<key>", stream, seq, m.Subject)
			}
			i := int(seq - 1)
			if got, wantID := m.Header.Get(jetstream.MsgIDHeader), fmt.Sprintf("gen-%s-%d", id, i); got != wantID {
				t.Fatalf("%s: sequence %d has id %q, want %q", stream, seq, got, wantID)
			}
			if toks[2] != fmt.Sprint(i%keys) || string(m.Data) != want[i] {
				t.Fatalf("%s: example %d is %q with key %s, want %q with key %d", stream, i, m.Data, toks[2], want[i], i%keys)
			}
			out = append(out, stored{toks[1], toks[2], string(m.Data)})
		}
		return out
	}

	var got [][]stored
	for _, prefix := range []string{"a", "b"} {
		_, stderr, err := runCmd(t, "", "gen", "-examples", fmt.Sprint(n), "-seed", "4", "-keys", fmt.Sprint(keys),
			"-to", "jetstream:"+prefix+".*", "-nats-url", srv.URL())
		if err != nil {
			t.Fatalf("gen: %v\n%s", err, stderr)
		}
		if !strings.Contains(stderr, fmt.Sprintf("published %d examples to jetstream:%s.* in", n, prefix)) {
			t.Errorf("gen did not say what it published: %q", stderr)
		}
		got = append(got, read(strings.ToUpper(prefix)))
	}
	count := map[string]int{}
	partOf := map[string]string{}
	for i, m := range got[0] {
		count[m.partition]++
		if p, ok := partOf[m.key]; ok && p != m.partition {
			t.Fatalf("key %s is in partitions %s and %s", m.key, p, m.partition)
		}
		partOf[m.key] = m.partition
		if got[1][i] != m {
			t.Fatalf("example %d is %+v in one stream, %+v in the other", i, m, got[1][i])
		}
	}
	if len(count) != 4 {
		t.Fatalf("the examples are in partitions %v, want all 4", count)
	}
	for p, c := range count {
		if c < n/10 {
			t.Errorf("partition %s holds %d of %d examples", p, c, n)
		}
	}

	// The shards of the stream see the same: four, each ending at its
	// partition's last example.
	nc := srv.Conn(t)
	shards, err := nats.NewJetStreamShards(ctx, nc, "A", 4, nil)
	if err != nil {
		t.Fatal(err)
	}
	ends, err := shards.Ends(ctx)
	if err != nil {
		t.Fatal(err)
	}
	last := map[string]int64{}
	for i, m := range got[0] {
		last["jetstream:A#"+m.partition] = int64(i + 1)
	}
	if fmt.Sprint(ends) != fmt.Sprint(last) {
		t.Fatalf("the shards end at %v, the partitions' last examples are at %v", ends, last)
	}

	// Without a key token: one subject, one partition.
	mustRun(t, "", "gen", "-examples", "100", "-to", "jetstream:c.one", "-nats-url", srv.URL())
	cshards, err := nats.NewJetStreamShards(ctx, nc, "C", 4, nil)
	if err != nil {
		t.Fatal(err)
	}
	if ends, err := cshards.Ends(ctx); err != nil || len(ends) != 1 {
		t.Fatalf("examples published on one subject are in the partitions %v (%v), want one", ends, err)
	}

	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"-to", "jetstream:a.*.*"}, "one * token at most"},
		{[]string{"-to", "nats:x.*.>"}, "has a wildcard"},
		{[]string{"-to", "kafka:*"}, "only a NATS subject takes a * token"},
		{[]string{"-keys", "0", "-to", "jetstream:a.*"}, "-keys: must be 1 or more"},
	} {
		_, _, err := runCmd(t, "", append([]string{"gen", "-examples", "1", "-nats-url", srv.URL()}, c.args...)...)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("gen %s: %v, want an error saying %q", strings.Join(c.args, " "), err, c.want)
		}
	}
	help := mustRun(t, "", "gen", "-h")
	for _, want := range []string{"-keys", "a * token in the subject", "example i's key is i mod keys", "ex.{{partition(N,1)}}.{{wildcard(1)}}"} {
		if !strings.Contains(help, want) {
			t.Errorf("gen -h does not explain the key token (%q):\n%s", want, help)
		}
	}
}

// TestGenStartGoesOn: -start N leaves out the stream's first N examples,
// so that a run goes on where another ended: the same hidden hyperplane,
// examples and ids not sent before, which JetStream stores as new; the
// default stream is unchanged by it.
func TestGenStartGoesOn(t *testing.T) {
	whole := strings.SplitAfter(mustRun(t, "", "gen", "-examples", "30", "-seed", "3"), "\n")
	if got := mustRun(t, "", "gen", "-examples", "20", "-start", "10", "-seed", "3"); got != strings.Join(whole[10:], "") {
		t.Fatalf("-start 10 -examples 20 wrote\n%s\nwant the whole stream's examples 10 to 29:\n%s", got, strings.Join(whole[10:], ""))
	}
	if got := mustRun(t, "", "gen", "-examples", "30", "-start", "0", "-seed", "3"); got != strings.Join(whole, "") {
		t.Fatalf("-start 0 changed the stream")
	}
	if _, _, err := runCmd(t, "", "gen", "-start", "-1"); err == nil || !strings.Contains(err.Error(), "-start: must be 0 or more") {
		t.Fatalf("-start -1: %v", err)
	}

	srv := testbroker.NATS(t)
	stream := testbroker.CreateStream(t, srv.JetStream(t), jetstream.StreamConfig{Name: "EXAMPLES", Subjects: []string{"examples"}})
	gen := func(args ...string) string {
		t.Helper()
		_, stderr, err := runCmd(t, "", append([]string{"gen", "-seed", "6", "-to", "jetstream:examples", "-nats-url", srv.URL()}, args...)...)
		if err != nil {
			t.Fatalf("gen %q: %v\n%s", args, err, stderr)
		}
		return stderr
	}
	gen("-examples", "700")
	if got := gen("-examples", "300", "-start", "700"); !strings.Contains(got, ": 300 stored, 0 dropped as duplicates\n") {
		t.Errorf("-start 700 after 700 examples: %q", got)
	}
	m, err := stream.GetMsg(context.Background(), 701)
	if err != nil {
		t.Fatal(err)
	}
	o := synth.DefaultOptions()
	o.Seed = 6
	if want := fmt.Sprintf("gen-%s-700", o.StreamID("jsonl")); m.Header.Get(jetstream.MsgIDHeader) != want {
		t.Errorf("message 701 has id %q, want %q", m.Header.Get(jetstream.MsgIDHeader), want)
	}
	if want := strings.TrimSuffix(strings.SplitAfter(mustRun(t, "", "gen", "-examples", "701", "-seed", "6"), "\n")[700], "\n"); string(m.Data) != want {
		t.Errorf("message 701 is %s, want example 700 of the stream, %s", m.Data, want)
	}

	help := mustRun(t, "", "gen", "-h")
	for _, want := range []string{"-start N", "same hidden hyperplane", "Another -seed is another hyperplane"} {
		if !strings.Contains(help, want) {
			t.Errorf("gen -h does not say %q:\n%s", want, help)
		}
	}
	if strings.Contains(help, "change -seed") {
		t.Errorf("gen -h still says to change -seed for new examples:\n%s", help)
	}
}

// TestStreamIDWithoutDrift: a stream without drift keeps the id it had
// before -drift-at existed (the options printed as they were), so that a
// stream published again is deduplicated as before; a drifting one has
// another.
func TestStreamIDWithoutDrift(t *testing.T) {
	o := synth.DefaultOptions()
	h := fnv.New64a()
	fmt.Fprint(h, "{Features:40 Vocab:10000 Noise:0.05 Unlabeled:0 Classes:0 Seed:0} jsonl")
	if got, want := o.StreamID("jsonl"), fmt.Sprintf("%016x", h.Sum64()); got != want {
		t.Errorf("the default stream's id is %s, it was %s", got, want)
	}
	d := o
	d.DriftAt = 100
	if d.StreamID("jsonl") == o.StreamID("jsonl") {
		t.Error("a drifting stream has the id of the stream without drift")
	}
	d.DriftWidth = 10
	if a, b := d.StreamID("jsonl"), func() string { d.DriftWidth = 0; return d.StreamID("jsonl") }(); a == b {
		t.Error("a gradual drift has the id of an abrupt one")
	}
}

// TestGenRefusesFlagsItWouldIgnore: a flag of publishing without the
// destination it is for (-label-missing without -labels-to, -rate
// without -to) is refused, naming it and what it needs, with exit
// status 2 and nothing written: ignored, it left a stream other than the
// one asked for (every example labeled, when half were to lose theirs).
func TestGenRefusesFlagsItWouldIgnore(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"-label-missing", "0.5"}, "-label-missing: needs -labels-to"},
		{[]string{"-label-delay", "1s"}, "-label-delay: needs -labels-to"},
		{[]string{"-rate", "100"}, "-rate: is for publishing: add -to"},
		{[]string{"-keys", "8"}, "-keys: is for publishing: add -to"},
		{[]string{"-kafka-brokers", "b:9092"}, "-kafka-brokers: is for publishing: add -to"},
		{[]string{"-nats-url", "nats://h:4222"}, "-nats-url: is for publishing: add -to"},
	} {
		out, _, err := runCmd(t, "", append([]string{"gen", "-examples", "10"}, c.args...)...)
		var u *usageError
		if !errors.As(err, &u) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("gen %s: %v, want a usage error saying %q", strings.Join(c.args, " "), err, c.want)
		}
		if out != "" {
			t.Errorf("gen %s wrote %d bytes, want none", strings.Join(c.args, " "), len(out))
		}
	}
	// Unchanged: the same flags where they apply, and -unlabeled alone.
	if out := mustRun(t, "", "gen", "-examples", "10", "-unlabeled", "0.5"); strings.Count(out, "\n") != 10 {
		t.Errorf("gen -unlabeled 0.5 wrote %q, want 10 lines", out)
	}
}
