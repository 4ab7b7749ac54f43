package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/hyperplane-ml/hyperplane/internal/testbroker"
	"github.com/hyperplane-ml/hyperplane/learner"
	"github.com/hyperplane-ml/hyperplane/shardid"
	"github.com/hyperplane-ml/hyperplane/snapshot"
)

// promoteStream is the generated stream of the promotion tests: small
// enough that AROW learns it clearly better than the perceptron within a
// few thousand examples.
func promoteStream(t *testing.T, url string, start, n int) {
	t.Helper()
	mustRun(t, "", "gen", "-examples", fmt.Sprint(n), "-start", fmt.Sprint(start), "-seed", "5", "-vocab", "50", "-features", "10",
		"-noise", "0", "-to", "jetstream:examples", "-nats-url", url)
}

// runWorker starts hyperplane run with args; stop cancels it and returns
// its error.
func startWorker(t *testing.T, args []string) (stop func() error, stopped <-chan error, log *bytes.Buffer) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	var stderr bytes.Buffer
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, args, func(string) string { return "" }, strings.NewReader(""), io.Discard, &stderr)
	}()
	var once bool
	var err error
	stop = func() error {
		if !once {
			once = true
			cancel()
			err = <-done
		}
		return err
	}
	t.Cleanup(func() { stop() }) //nolint:errcheck // the test checks the error where it matters
	return stop, done, &stderr
}

// replayDigest is the state_sha256 that replay of the whole log prints.
func replayDigest(t *testing.T, args []string) string {
	t.Helper()
	out := mustRun(t, "", append([]string{"replay", "--from", "earliest"}, args...)...)
	var sum struct {
		StateSHA256 string `json:"state_sha256"`
	}
	if err := json.Unmarshal([]byte(out), &sum); err != nil {
		t.Fatalf("replay printed %q: %v", out, err)
	}
	return sum.StateSHA256
}

// TestPromoteManual: hyperplane promote refuses a challenger the model
// does not have, naming it; a request for one it has is applied by the
// running worker after a later example, recorded in the history of the
// next generation, published as a promotion event and shown by compare
// and inspect; replay of the log, following the live history, rebuilds
// the promoted model to the bit; and a restart with the configuration
// unchanged goes on with the promoted model, the request applied once.
func TestPromoteManual(t *testing.T) {
	t.Parallel()
	srv := testbroker.NATS(t)
	js := srv.JetStream(t)
	testbroker.CreateStream(t, js, jetstream.StreamConfig{Name: "EXAMPLES", Subjects: []string{"examples"}})
	testbroker.CreateStream(t, js, jetstream.StreamConfig{Name: "PROMOTIONS", Subjects: []string{"promotions"}})
	promoteStream(t, srv.URL(), 0, 500)
	storeDir := filepath.Join(t.TempDir(), "store")
	storeURL := "file://" + storeDir + "?create_dir=1"
	common := []string{"--model.name", "champ", "--nats.url", srv.URL(), "--source.kind", "jetstream", "--source.stream", "EXAMPLES",
		"--model.learner.hash_bits", "12", "--model.challengers", "perceptron:algorithm=perceptron;seed:hash_seed=7", "--snapshot.url", storeURL}
	args := append([]string{"run", "--snapshot.interval", "50ms", "--source.batch", "50", "--http.addr", "",
		"--outputs.promotions", "jetstream:promotions"}, common...)
	store := openStore(t, storeDir)
	newest := func() *snapshot.Snapshot {
		s, err := store.Latest(context.Background(), "champ", nil)
		if err != nil {
			return nil
		}
		return s
	}

	stop, stopped, log := startWorker(t, args)
	waitRunning(t, time.Minute, "the log learned", stopped, log, func() bool {
		s := newest()
		return s != nil && s.Positions["jetstream:EXAMPLES"] == 500
	})
	// An unknown name is a bad value of -challenger: a usage error, exit
	// status 2, as docs/commands.md says of every bad flag or value.
	_, _, err := runCmd(t, "", append([]string{"promote", "--challenger", "nope"}, common...)...)
	if u := (*usageError)(nil); !errors.As(err, &u) || !strings.Contains(err.Error(), "nope") {
		t.Fatalf("promote of an unknown challenger: %v, want a usage error naming it", err)
	}
	if out := mustRun(t, "", append([]string{"promote", "--challenger", "perceptron"}, common...)...); !strings.Contains(out, "after the next example the worker learns") {
		t.Errorf("promote says %q, want when the worker takes it", out)
	}
	// The worker reads the request after a generation and applies it
	// after the next example: more examples come until it has.
	end := 500
	waitRunning(t, time.Minute, "the promotion in a generation", stopped, log, func() bool {
		if s := newest(); s != nil && len(s.State.Promotions) > 0 {
			return true
		}
		if s := newest(); s != nil && s.Positions["jetstream:EXAMPLES"] == int64(end) {
			promoteStream(t, srv.URL(), end, 100)
			end += 100
		}
		return false
	})
	if err := stop(); err != nil {
		t.Fatalf("run: %v\n%s", err, log)
	}
	s := newest()
	ps := s.State.Promotions
	if len(ps) != 1 || ps[0].Challenger != "perceptron" || ps[0].Replaced != "champ" || ps[0].Auto || ps[0].Request == "" {
		t.Fatalf("history %+v", ps)
	}
	if s.State.Config.Algorithm != learner.Perceptron {
		t.Fatalf("the model is %s, want the promoted perceptron", s.State.Config.Algorithm)
	}
	var names []string
	for _, c := range s.State.Challengers {
		names = append(names, c.Name)
	}
	if !slices.Equal(names, []string{"champ", "seed"}) || s.State.Challengers[0].State.Config.Algorithm != learner.AROW {
		t.Fatalf("challengers %v, want the old model as champ and seed", names)
	}
	table := mustRun(t, "", append([]string{"compare"}, common...)...)
	for _, want := range []string{"promoted perceptron over champ", "perceptron", "(model)"} {
		if !strings.Contains(table, want) {
			t.Errorf("compare printed no %q:\n%s", want, table)
		}
	}
	if inspected := mustRun(t, "", "inspect", "file://"+storeDir+"/champ"); !strings.Contains(inspected, `"promotions"`) {
		t.Errorf("inspect shows no promotions:\n%s", inspected)
	}
	events := testbroker.ReadStream(t, context.Background(), js, "PROMOTIONS")
	if len(events) != 1 || !strings.Contains(string(events[0]), `"promoted":"perceptron"`) || !strings.Contains(string(events[0]), `"request":"`+ps[0].Request+`"`) {
		t.Fatalf("promotion events %q", events)
	}
	if got, want := replayDigest(t, common), s.State.StateSHA256(); got != want {
		t.Fatalf("replay: state_sha256 %s, the live model %s", got, want)
	}

	// A restart with the file unchanged: the history explains the
	// model's configuration, and the request, applied, is not again.
	stop, stopped, log = startWorker(t, args)
	promoteStream(t, srv.URL(), end, 100)
	waitRunning(t, time.Minute, "the restarted worker learning", stopped, log, func() bool {
		s := newest()
		return s != nil && s.Positions["jetstream:EXAMPLES"] == int64(end+100)
	})
	if err := stop(); err != nil {
		t.Fatalf("run after the promotion: %v\n%s", err, log)
	}
	if s := newest(); len(s.State.Promotions) != 1 || s.State.Config.Algorithm != learner.Perceptron {
		t.Fatalf("after the restart: history %+v, model %s", s.State.Promotions, s.State.Config.Algorithm)
	}
	if !strings.Contains(log.String(), "serves a promoted challenger") {
		t.Errorf("the restart did not log that the model serves a promoted challenger:\n%s", log)
	}
	if line := logLine(log.String(), "worker starting"); !strings.Contains(line, `"algorithm":"perceptron"`) {
		t.Errorf("the restart logged %q, want the promoted model's algorithm", line)
	}
}

// TestPromoteStaleRequest: a request for a challenger that is then
// removed from the configuration is refused; configured again, the
// challenger starts new, and the request, which was for the one removed,
// is refused again rather than making a model of a few examples the
// live one, and still after a restart once the new one has learned as
// many examples as the one asked for had.
func TestPromoteStaleRequest(t *testing.T) {
	t.Parallel()
	srv := testbroker.NATS(t)
	js := srv.JetStream(t)
	testbroker.CreateStream(t, js, jetstream.StreamConfig{Name: "EXAMPLES", Subjects: []string{"examples"}})
	promoteStream(t, srv.URL(), 0, 500)
	storeDir := filepath.Join(t.TempDir(), "store")
	common := []string{"--model.name", "champ", "--nats.url", srv.URL(), "--source.kind", "jetstream", "--source.stream", "EXAMPLES",
		"--model.learner.hash_bits", "12", "--snapshot.url", "file://" + storeDir + "?create_dir=1"}
	both := append([]string{"--model.challengers", "perceptron:algorithm=perceptron;seed:hash_seed=7"}, common...)
	one := append([]string{"--model.challengers", "seed:hash_seed=7"}, common...)
	run := []string{"run", "--snapshot.interval", "50ms", "--source.batch", "50", "--http.addr", ""}
	store := openStore(t, storeDir)
	newest := func() *snapshot.Snapshot {
		s, err := store.Latest(context.Background(), "champ", nil)
		if err != nil {
			return nil
		}
		return s
	}
	end := 0
	learnN := func(what string, args []string, n int) string {
		t.Helper()
		stop, stopped, log := startWorker(t, append(slices.Clone(run), args...))
		if end > 0 {
			promoteStream(t, srv.URL(), end, n)
		}
		end = max(end+n, 500)
		waitRunning(t, time.Minute, what, stopped, log, func() bool {
			s := newest()
			return s != nil && s.Positions["jetstream:EXAMPLES"] == int64(end)
		})
		if err := stop(); err != nil {
			t.Fatalf("run: %v\n%s", err, log)
		}
		return log.String()
	}
	learn := func(what string, args []string) string { return learnN(what, args, 100) }

	learn("the log learned", both)
	mustRun(t, "", append([]string{"promote", "--challenger", "perceptron"}, both...)...)
	if log := learn("the log learned without the perceptron", one); !strings.Contains(log, "promotion refused") {
		t.Fatalf("the request for a challenger no longer configured was not refused:\n%s", log)
	}
	log := learn("the log learned with the perceptron again", both)
	s := newest()
	if len(s.State.Promotions) != 0 || s.State.Config.Algorithm != learner.AROW {
		t.Fatalf("history %+v, model %s: a request for the perceptron removed promoted the one started anew", s.State.Promotions, s.State.Config.Algorithm)
	}
	if !strings.Contains(log, "started anew after the request") {
		t.Errorf("the stale request's refusal was not logged:\n%s", log)
	}

	// The perceptron started anew learns past the 500 examples the one
	// asked for had; a restart reads the request again.
	learnN("the perceptron started anew past the request's examples", both, 500)
	if log := learn("the log learned after a restart", both); !strings.Contains(log, "started anew after the request") {
		t.Errorf("after a restart, the stale request's refusal was not logged:\n%s", log)
	}
	if s := newest(); len(s.State.Promotions) != 0 || s.State.Config.Algorithm != learner.AROW {
		t.Fatalf("history %+v, model %s: after a restart, a request for the perceptron removed promoted the one started anew", s.State.Promotions, s.State.Config.Algorithm)
	}
}

// logLine is the first line of log that holds msg, "" for none.
func logLine(log, msg string) string {
	for l := range strings.Lines(log) {
		if strings.Contains(l, msg) {
			return strings.TrimSpace(l)
		}
	}
	return ""
}

// TestPromoteAutoKilled: model.compare.promote auto replaces a perceptron
// model by its AROW challenger on a stream AROW learns better. A worker
// killed before it wrote the generations from the promotion on, resumed
// from the generation before, and a replay of the log end with the
// state_sha256 of the run not killed.
func TestPromoteAutoKilled(t *testing.T) {
	t.Parallel()
	const n = 5000
	srv := testbroker.NATS(t)
	testbroker.CreateStream(t, srv.JetStream(t), jetstream.StreamConfig{Name: "EXAMPLES", Subjects: []string{"examples"}})
	promoteStream(t, srv.URL(), 0, n)
	dir := t.TempDir()
	storeDir := filepath.Join(dir, "store")
	common := []string{"--model.name", "champ", "--nats.url", srv.URL(), "--source.kind", "jetstream", "--source.stream", "EXAMPLES",
		"--model.learner.hash_bits", "12", "--model.learner.algorithm", "perceptron", "--model.challengers", "arow:algorithm=arow",
		"--model.compare.promote", "auto"}
	runArgs := func(dir string) []string {
		return append([]string{"run", "--snapshot.url", "file://" + dir + "?create_dir=1", "--snapshot.every", "250", "--snapshot.interval", "50ms",
			"--snapshot.keep", "1000", "--source.batch", "100", "--http.addr", ""}, common...)
	}
	learned := func(store *snapshot.Store) func() bool {
		return func() bool {
			s, err := store.Latest(context.Background(), "champ", nil)
			return err == nil && s.Positions["jetstream:EXAMPLES"] == n
		}
	}
	stop, stopped, log := startWorker(t, runArgs(storeDir))
	store := openStore(t, storeDir)
	waitRunning(t, time.Minute, "the log learned", stopped, log, learned(store))
	if err := stop(); err != nil {
		t.Fatalf("run: %v\n%s", err, log)
	}
	whole, err := store.Latest(context.Background(), "champ", nil)
	if err != nil {
		t.Fatal(err)
	}
	ps := whole.State.Promotions
	if len(ps) != 1 || ps[0].Challenger != "arow" || !ps[0].Auto || whole.State.Config.Algorithm != learner.AROW {
		t.Fatalf("history %+v, model %s: want arow promoted automatically", ps, whole.State.Config.Algorithm)
	}

	// The kill: a copy of the store without the generations from the
	// first that holds the promotion on, as a worker killed before it
	// wrote them leaves it.
	killedDir := filepath.Join(dir, "killed")
	gens, err := store.Generations(context.Background(), "champ")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(killedDir, "champ"), 0o755); err != nil {
		t.Fatal(err)
	}
	kept := 0
	for _, g := range gens {
		s, err := store.Load(context.Background(), "champ", g)
		if err != nil {
			t.Fatal(err)
		}
		if len(s.State.Promotions) > 0 {
			break
		}
		key := strings.TrimPrefix(snapshot.Key("", "champ", g), "")
		data, err := os.ReadFile(filepath.Join(storeDir, key))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(killedDir, key), data, 0o644); err != nil {
			t.Fatal(err)
		}
		kept++
	}
	if kept == 0 {
		t.Fatalf("no generation before the promotion (generations %v)", gens)
	}
	stop, stopped, log = startWorker(t, runArgs(killedDir))
	killed := openStore(t, killedDir)
	waitRunning(t, time.Minute, "the log learned after the kill", stopped, log, learned(killed))
	if err := stop(); err != nil {
		t.Fatalf("run after the kill: %v\n%s", err, log)
	}
	resumed, err := killed.Latest(context.Background(), "champ", nil)
	if err != nil {
		t.Fatal(err)
	}
	want := whole.State.StateSHA256()
	if got := resumed.State.StateSHA256(); got != want {
		t.Fatalf("resumed from generation %d before the promotion: state_sha256 %s, the run not killed %s", kept, got, want)
	}
	if got := replayDigest(t, append([]string{"--snapshot.url", "file://" + storeDir}, common...)); got != want {
		t.Fatalf("replay: state_sha256 %s, the live model %s", got, want)
	}
}

// TestPromotePartition: in model.scope partition, a request names one
// partition's model, which alone is promoted; replay rebuilds every
// partition's model, the promoted one following its chain's history, to
// the bit.
func TestPromotePartition(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	lines := strings.Split(strings.TrimSpace(readFile(t, genFile(t, dir, "ex.jsonl", "-examples", "3000", "-seed", "5", "-vocab", "50",
		"-features", "10", "-noise", "0"))), "\n")
	c := testbroker.Kafka(t)
	c.CreateTopic(t, "keyed", 2)
	sent := 0
	produce := func(n int) {
		t.Helper()
		var recs []*kgo.Record
		for _, l := range lines[sent : sent+n] {
			recs = append(recs, &kgo.Record{Topic: "keyed", Partition: int32(sent % 2), Value: []byte(l)})
			sent++
		}
		if err := c.Client(t).ProduceSync(context.Background(), recs...).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	produce(600)
	storeDir := filepath.Join(dir, "store")
	common := []string{"--model.name", "per", "--model.scope", "partition", "--kafka.brokers", strings.Join(c.ListenAddrs(), ","),
		"--source.kind", "kafka", "--source.topics", "keyed", "--snapshot.url", "file://" + storeDir + "?create_dir=1",
		"--model.learner.hash_bits", "12", "--model.challengers", "perceptron:algorithm=perceptron"}
	store := openStore(t, storeDir)
	chain := func(p int) *snapshot.Snapshot {
		s, err := store.Sub(fmt.Sprintf("per/partition/kafka.keyed.%d", p)).Latest(context.Background(), "per", nil)
		if err != nil {
			return nil
		}
		return s
	}
	learnedTo := func(p int) int64 {
		if s := chain(p); s != nil {
			return s.Positions[fmt.Sprintf("kafka:keyed/%d", p)]
		}
		return -1
	}
	stop, stopped, log := startWorker(t, append([]string{"run", "--snapshot.interval", "50ms", "--source.batch", "50", "--http.addr", ""}, common...))
	waitRunning(t, time.Minute, "both partitions learned", stopped, log, func() bool { return learnedTo(0) == 300 && learnedTo(1) == 300 })
	if _, _, err := runCmd(t, "", append([]string{"promote", "--challenger", "nope", "--shard", "kafka:keyed/0"}, common...)...); err == nil || !strings.Contains(err.Error(), "nope") {
		t.Fatalf("promote of an unknown challenger: %v, want an error naming it", err)
	}
	mustRun(t, "", append([]string{"promote", "--challenger", "perceptron", "--shard", "kafka:keyed/0"}, common...)...)
	waitRunning(t, time.Minute, "partition 0 promoted", stopped, log, func() bool {
		if s := chain(0); s != nil && len(s.State.Promotions) > 0 {
			return true
		}
		if sent < len(lines)-100 && learnedTo(0) == int64(sent/2) && learnedTo(1) == int64(sent/2) {
			produce(100)
		}
		return false
	})
	waitRunning(t, time.Minute, "every example learned", stopped, log, func() bool { return learnedTo(0) == int64(sent/2) && learnedTo(1) == int64(sent/2) })
	if err := stop(); err != nil {
		t.Fatalf("run: %v\n%s", err, log)
	}
	if s := chain(0); len(s.State.Promotions) != 1 || s.State.Promotions[0].Challenger != "perceptron" || s.State.Config.Algorithm != learner.Perceptron {
		t.Fatalf("partition 0: history %+v, model %s", s.State.Promotions, s.State.Config.Algorithm)
	}
	if s := chain(1); len(s.State.Promotions) != 0 || s.State.Config.Algorithm != learner.AROW {
		t.Fatalf("partition 1 was promoted: history %+v, model %s", s.State.Promotions, s.State.Config.Algorithm)
	}
	table := mustRun(t, "", append([]string{"compare", "--shard", "kafka:keyed/0"}, common...)...)
	if !strings.Contains(table, "promoted perceptron over per") {
		t.Errorf("compare of partition 0:\n%s", table)
	}
	out := mustRun(t, "", append([]string{"replay", "--from", "earliest"}, common...)...)
	var sum struct {
		Partitions map[string]struct {
			StateSHA256 string `json:"state_sha256"`
		}
	}
	if err := json.Unmarshal([]byte(out), &sum); err != nil {
		t.Fatalf("replay printed %q: %v", out, err)
	}
	for p := range 2 {
		if got, want := sum.Partitions[fmt.Sprintf("kafka:keyed/%d", p)].StateSHA256, chain(p).State.StateSHA256(); got != want {
			t.Errorf("partition %d: replay state_sha256 %s, the live model %s", p, got, want)
		}
	}
}

// TestShardAndScope: in model.scope partition, compare and promote
// without --shard name the shards whose models the store holds; in global
// scope they refuse --shard.
func TestShardAndScope(t *testing.T) {
	dir := t.TempDir()
	store := openStore(t, dir)
	m, err := learner.New(learner.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	for p := range 2 {
		chain, err := store.PartitionChain("per", shardid.Kafka("keyed", p))
		if err != nil {
			t.Fatal(err)
		}
		if err := chain.Write(context.Background(), &snapshot.Snapshot{Model: "per", Generation: 1, Writer: "test", State: m.State()}); err != nil {
			t.Fatal(err)
		}
	}
	common := []string{"--model.name", "per", "--kafka.brokers", "127.0.0.1:1", "--source.kind", "kafka", "--source.topics", "keyed",
		"--snapshot.url", "file://" + dir}
	partition := append([]string{"--model.scope", "partition"}, common...)
	for _, c := range []struct {
		name string
		args []string
		want string
	}{
		{"compare without --shard", append([]string{"compare"}, partition...), "-shard: required in model.scope partition, where each partition has a model of its own; snapshot.url holds those of kafka:keyed/0, kafka:keyed/1"},
		{"promote without --shard", append([]string{"promote", "--challenger", "perceptron"}, partition...), "snapshot.url holds those of kafka:keyed/0, kafka:keyed/1"},
		{"a model without partitions", append(append([]string{"compare"}, partition...), "--model.name", "other"), "snapshot.url holds none of other yet"},
		{"compare --shard in global scope", append([]string{"compare", "--shard", "kafka:keyed/0"}, common...), "-shard: model.scope is global"},
		{"promote --shard in global scope", append([]string{"promote", "--challenger", "perceptron", "--shard", "kafka:keyed/0"}, common...), "-shard: model.scope is global"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, _, err := runCmd(t, "", c.args...)
			var u *usageError
			if !errors.As(err, &u) || !strings.Contains(err.Error(), c.want) {
				t.Errorf("error %v, want a usage error saying %q", err, c.want)
			}
		})
	}
	// With --shard, the partition's model is read.
	if _, _, err := runCmd(t, "", append([]string{"compare", "--shard", "kafka:keyed/1"}, partition...)...); err == nil || !strings.Contains(err.Error(), "generation 1 of per has no challengers") {
		t.Errorf("compare --shard kafka:keyed/1: %v, want the partition's generation read", err)
	}
}
