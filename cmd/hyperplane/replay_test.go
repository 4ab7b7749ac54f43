package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/hyperplane-ml/hyperplane/internal/testbroker"
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

// TestReplayFlagErrors: a bad --from or --out is refused naming the flag,
// not source.start or snapshot.url, keys the configuration may not hold
// (the stream's first sequence is 1, so offset:0 names no message).
func TestReplayFlagErrors(t *testing.T) {
	srv := testbroker.NATS(t)
	testbroker.CreateStream(t, srv.JetStream(t), jetstream.StreamConfig{Name: "EXAMPLES", Subjects: []string{"examples"}})
	source := []string{"--nats.url", srv.URL(), "--source.kind", "jetstream", "--source.stream", "EXAMPLES"}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"replay", "--from", "offset:0"}, "-from: offset:0: stream sequences start at 1"},
		{[]string{"replay", "--out", "bogus://x"}, `-out: unknown scheme "bogus"`},
		{[]string{"backtest", "--from", "offset:0", "--model.challengers", "p:algorithm=perceptron"}, "-from: offset:0: stream sequences start at 1"},
	} {
		_, _, err := runCmd(t, "", append(c.args, source...)...)
		var u *usageError
		if !errors.As(err, &u) || !strings.HasPrefix(err.Error(), c.want) {
			t.Errorf("%q: %v, want a usage error beginning %q", c.args, err, c.want)
		}
	}
}

// TestReplayCoreNATS: core NATS keeps no messages, so replay and backtest
// over its log refuse it at once, naming source.kind, rather than wait for
// live messages for ever.
func TestReplayCoreNATS(t *testing.T) {
	srv := testbroker.NATS(t)
	base := []string{"--nats.url", srv.URL(), "--source.kind", "nats", "--source.subject", "examples"}
	for _, args := range [][]string{
		append([]string{"replay", "--from", "earliest"}, base...),
		append([]string{"backtest", "--from", "earliest", "--model.challengers", "p:algorithm=perceptron"}, base...),
	} {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		var out, errOut bytes.Buffer
		err := run(ctx, args, func(string) string { return "" }, strings.NewReader(""), &out, &errOut)
		cancel()
		var u *usageError
		if !errors.As(err, &u) || !strings.Contains(err.Error(), "source.kind: nats: core NATS keeps no messages") {
			t.Errorf("%s over core NATS: %v, want a usage error naming source.kind", args[0], err)
		}
	}
}

// TestReplayKafkaWithoutEpochLog: a Kafka topic of one partition is
// replayed from the log; one of several in global scope is learned in
// epochs, and without an epoch log in snapshot.url replay refuses it,
// saying so, rather than merge the partitions in an order of the moment
// (or, with labels, blame the topics' layout).
func TestReplayKafkaWithoutEpochLog(t *testing.T) {
	c := testbroker.Kafka(t)
	brokers := strings.Join(c.ListenAddrs(), ",")
	for _, topic := range []struct {
		name       string
		partitions int
	}{{"one", 1}, {"four", 4}} {
		c.CreateTopic(t, topic.name, topic.partitions)
		mustRun(t, "", "gen", "-examples", "200", "-seed", "2", "-to", "kafka:"+topic.name, "-kafka-brokers", brokers)
	}
	store := "file://" + t.TempDir()
	args := []string{"replay", "--kafka.brokers", brokers, "--source.kind", "kafka", "--snapshot.url", store, "--from", "earliest"}
	out, stderr, err := runCmd(t, "", append(args, "--source.topics", "one")...)
	var sum struct{ Examples int }
	if err != nil || json.Unmarshal([]byte(out), &sum) != nil || sum.Examples != 200 {
		t.Errorf("replay of topic one: %s (%v), want 200 examples\n%s", out, err, stderr)
	}
	_, _, err = runCmd(t, "", append(args, "--source.topics", "four")...)
	var u *usageError
	if !errors.As(err, &u) || !strings.Contains(err.Error(), "source.topics: four: 4 partitions, learned in epochs") || !strings.Contains(err.Error(), "holds none") {
		t.Errorf("replay of topic four: error %v, want a usage error saying its 4 partitions are learned in epochs and snapshot.url holds no epoch log", err)
	}
}

// TestReplayOutHeldWithQuery: --out names the store as snapshot.url does,
// with a query (create_dir=1) as the example configurations write it. A
// store that already holds the model is refused however its URL is
// written: a replay into it would resume the model stored there rather
// than learn the range, and write its generations after the stored ones.
func TestReplayOutHeldWithQuery(t *testing.T) {
	c := testbroker.Kafka(t)
	brokers := strings.Join(c.ListenAddrs(), ",")
	c.CreateTopic(t, "one", 1)
	mustRun(t, "", "gen", "-examples", "200", "-seed", "2", "-to", "kafka:one", "-kafka-brokers", brokers)
	dir := t.TempDir()
	out := "file://" + filepath.ToSlash(dir) + "?create_dir=1"
	args := []string{"replay", "--kafka.brokers", brokers, "--source.kind", "kafka", "--source.topics", "one", "--from", "earliest", "--out", out}
	if _, stderr, err := runCmd(t, "", args...); err != nil {
		t.Fatalf("first replay into %s: %v\n%s", out, err, stderr)
	}
	gens, err := filepath.Glob(filepath.Join(dir, "default", "*.msgpack"))
	if err != nil || len(gens) != 1 {
		t.Fatalf("first replay wrote %v (%v), want one generation", gens, err)
	}
	stdout, _, err := runCmd(t, "", args...)
	var u *usageError
	if !errors.As(err, &u) || !strings.Contains(err.Error(), "already holds model default") {
		t.Errorf("second replay into %s: %v, printed %q; want a usage error saying the store already holds the model", out, err, stdout)
	}
	if after, _ := filepath.Glob(filepath.Join(dir, "default", "*.msgpack")); len(after) != 1 {
		t.Errorf("second replay left %v in the store, want the first replay's one generation", after)
	}
}

// TestReplayOutMissingDirectory: a file:// --out whose directory does not
// exist is refused with what to do, as snapshot.url is: make the
// directory or add ?create_dir=1. It is checked before any broker is
// dialled.
func TestReplayOutMissingDirectory(t *testing.T) {
	out := "file://" + filepath.ToSlash(filepath.Join(t.TempDir(), "none"))
	_, _, err := runCmd(t, "", "replay", "--kafka.brokers", "127.0.0.1:1", "--source.kind", "kafka", "--source.topics", "one", "--from", "earliest", "--out", out)
	if err == nil || !strings.Contains(err.Error(), "-out: ") || !strings.Contains(err.Error(), "add ?create_dir=1") {
		t.Errorf("replay --out %s: %v, want an error naming -out and saying to add ?create_dir=1", out, err)
	}
}

// TestReplayEmptyRange: --to offset:N at or before --from offset:M names
// no record; replay and backtest refuse it as a usage error rather than
// print a summary of nothing learned, as if the log held nothing there.
func TestReplayEmptyRange(t *testing.T) {
	source := twoHundredExamples(t)
	for _, to := range []string{"offset:50", "offset:100"} {
		for _, cmd := range []string{"replay", "backtest"} {
			args := append([]string{cmd, "--from", "offset:100", "--to", to}, source...)
			out, _, err := runCmd(t, "", args...)
			var u *usageError
			if !errors.As(err, &u) || !strings.Contains(err.Error(), "the range is empty") {
				t.Errorf("%s: %v, printed %q; want a usage error saying the range is empty", strings.Join(args[:5], " "), err, out)
			}
		}
	}
	out := mustRun(t, "", append([]string{"replay", "--from", "offset:100", "--to", "offset:101"}, source...)...)
	if !strings.Contains(out, `"examples":1,`) {
		t.Errorf("replay of offset 100 alone printed %s, want 1 example", out)
	}
}

// twoHundredExamples generates 200 examples into topic one of a Kafka of
// its own and returns the flags of a source of them, with a challenger
// (backtest needs one).
func twoHundredExamples(t *testing.T) []string {
	t.Helper()
	c := testbroker.Kafka(t)
	brokers := strings.Join(c.ListenAddrs(), ",")
	c.CreateTopic(t, "one", 1)
	mustRun(t, "", "gen", "-examples", "200", "-seed", "2", "-to", "kafka:one", "-kafka-brokers", brokers)
	return []string{"--kafka.brokers", brokers, "--source.kind", "kafka", "--source.topics", "one", "--model.challengers", "p:algorithm=perceptron"}
}

// TestReplayToPastTheEnd: --to offset:N past the end of the log ends the
// replay, and the backtest, where the log ends, as --to latest does,
// rather than wait without a word for records that may never come.
func TestReplayToPastTheEnd(t *testing.T) {
	source := twoHundredExamples(t)
	for _, cmd := range []string{"replay", "backtest"} {
		args := append([]string{cmd, "--from", "earliest", "--to", "offset:500"}, source...)
		type result struct {
			out, stderr string
			err         error
		}
		done := make(chan result, 1)
		go func() {
			out, stderr, err := runCmd(t, "", args...)
			done <- result{out, stderr, err}
		}()
		select {
		case r := <-done:
			if r.err != nil {
				t.Errorf("%s --to offset:500 over 200 records: %v\n%s", cmd, r.err, r.stderr)
			} else if want := map[string]string{"replay": `"examples":200,`, "backtest": " 200 "}[cmd]; !strings.Contains(r.out, want) {
				t.Errorf("%s --to offset:500 over 200 records printed %s, want the 200 records learned", cmd, r.out)
			}
		case <-time.After(30 * time.Second):
			t.Errorf("%s --to offset:500 over 200 records has not ended after 30s", cmd)
		}
	}
}
