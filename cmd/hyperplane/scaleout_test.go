package main

import (
	"bytes"
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/hyperplane-ml/hyperplane/config"
	"github.com/hyperplane-ml/hyperplane/internal/testbroker"
	"github.com/hyperplane-ml/hyperplane/internal/wait"
	"github.com/hyperplane-ml/hyperplane/learner"
	"github.com/hyperplane-ml/hyperplane/snapshot"
	"github.com/hyperplane-ml/hyperplane/wire"
)

// onePartitionGolden is the state_sha256 of the model learned from
// "hyperplane gen -examples 3000 -seed 7 -unlabeled 0.1" by the perceptron
// at its defaults: the model of a one-partition topic before learning in
// epochs existed, with the change detector's and the calibrator's state
// since those are part of a model. The test's real assertion is that the
// worker's model equals the examples learned in order, one by one; this
// value catches a drift of that model (of gen, the decoder or the learner)
// that both would share.
const onePartitionGolden = "746a48d0597b4dbd8e1b74cac00d3c500561587ea9e208103d05178cf72e8c2b"

// TestOnePartitionIsTheSameModelForEveryEpochSize: a topic of one
// partition in global scope is learned as before epochs existed, whatever
// model.mixing.epoch_examples says (docs/scale-out.md, section 7): the
// final generation is the examples learned in order, one by one, the same
// state_sha256 for every epoch size and equal to the golden one, written
// as the generations of today (no epoch keys), and nothing of the epoch
// log (no epochs/, no probe) is written.
func TestOnePartitionIsTheSameModelForEveryEpochSize(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	const n = 3000
	data := genFile(t, dir, "examples.jsonl", "-examples", fmt.Sprint(n), "-seed", "7", "-unlabeled", "0.1")
	lines := strings.Split(strings.TrimSpace(readFile(t, data)), "\n")
	if len(lines) != n {
		t.Fatalf("gen wrote %d lines, want %d", len(lines), n)
	}
	c := testbroker.Kafka(t)
	c.CreateTopic(t, "single", 1)
	produce(t, c, "single", 1, lines)

	var want string // the digest of the first run, which every other must equal
	for _, e := range []int{1, 7, 1000, 100000} {
		storeDir := filepath.Join(dir, fmt.Sprintf("store-%d", e))
		// The golden digest is the perceptron's.
		args := []string{"run", "--model.name", "single", "--model.learner.algorithm", "perceptron",
			"--source.kind", "kafka", "--source.topics", "single", "--source.group", fmt.Sprintf("single-%d", e), "--source.batch", "100",
			"--kafka.brokers", c.ListenAddrs()[0], "--http.addr", "", "--log.format", "json",
			"--snapshot.url", "file://" + storeDir + "?create_dir=1", "--snapshot.every", "700", "--snapshot.interval", "100ms",
			"--model.mixing.epoch_examples", fmt.Sprint(e)}
		began := time.Now()
		w := startRun(t, args)
		store := openStore(t, storeDir)
		waitCovered(t, []*runner{w}, store, "single", map[string]int64{"kafka:single/0": n}, 5*time.Minute)
		w.stop(t)
		if !strings.Contains(w.log(), `"msg":"worker stopped","examples":3000`) {
			t.Errorf("epoch_examples %d: the worker did not stop having learned %d examples:\n%s", e, n, w.log())
		}
		if strings.Contains(w.log(), "learning in epochs") {
			t.Errorf("epoch_examples %d: a topic of one partition was learned in epochs:\n%s", e, w.log())
		}

		final, err := store.Latest(context.Background(), "single", nil)
		if err != nil {
			t.Fatal(err)
		}
		gens, err := store.Generations(context.Background(), "single")
		if err != nil {
			t.Fatal(err)
		}
		if len(gens) < 2 {
			t.Errorf("epoch_examples %d: only generations %v: the run did not snapshot along the way", e, gens)
		}
		if final.Positions["kafka:single/0"] != n || len(final.Positions) != 1 {
			t.Fatalf("epoch_examples %d: the final generation %d is at %v, want kafka:single/0 at %d", e, final.Generation, final.Positions, n)
		}
		// Today's generations: no epoch, no config digest, no boundary.
		if final.Epoch != 0 || final.ConfigDigest != ([32]byte{}) || final.Boundary != nil || final.Scope != "" {
			t.Errorf("epoch_examples %d: generation %d has epoch keys (epoch %d, config digest %x, boundary %v, scope %q), want none",
				e, final.Generation, final.Epoch, final.ConfigDigest, final.Boundary, final.Scope)
		}
		// Nothing of the epoch log, not even the probe's leftovers.
		for _, p := range storeFiles(t, storeDir) {
			if strings.Contains("/"+p, "/epochs/") || strings.HasSuffix(p, "/epochs") {
				t.Errorf("epoch_examples %d: the store holds %s", e, p)
			}
		}

		got := hex.EncodeToString(digest(final.State))
		cfg, err := config.Load(args[1:], func(string) string { return "" })
		if err != nil {
			t.Fatal(err)
		}
		if ref := hex.EncodeToString(digest(learnInOrder(t, cfg, lines))); got != ref {
			t.Errorf("epoch_examples %d: the worker's model has state_sha256 %s; the examples learned in order, %s", e, got, ref)
		}
		if want == "" {
			want = got
		} else if got != want {
			t.Errorf("epoch_examples %d: state_sha256 %s, epoch_examples 1 gave %s", e, got, want)
		}
		if got != onePartitionGolden {
			t.Errorf("epoch_examples %d: state_sha256 %s, the golden one is %s", e, got, onePartitionGolden)
		}
		t.Logf("epoch_examples %d: generation %d of %v, state_sha256 %s, in %v", e, final.Generation, gens, got, time.Since(began).Round(time.Millisecond))
	}
}

// TestOtherHistoryStops: a model learned over three partitions in
// epochs, then on its store and under its name (docs/scale-out.md,
// section 5, "second writer"):
//   - a worker with another learner setting stops at start-up, naming
//     the setting, and writes nothing;
//   - a worker with another setting of the history only (the mixing
//     weights) stops at start-up with "another configuration writes this
//     model", naming both config digests, and writes nothing;
//   - a worker with a challenger the model does not have stops with
//     it too, naming model.challengers;
//   - a worker of another consumer group with the same settings stops
//     too: the group is part of the history digest, since a second group
//     would learn every partition again beside the first;
//   - worker A mixes by the mean, as every version before
//     model.mixing.rule did, so a worker at the default rule (auto, which
//     is touched for the perceptron) continues its log by the mean.
func TestOtherHistoryStops(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	const parts, perPhase = 3, 900 // examples per phase, over the partitions
	phase1 := strings.Split(strings.TrimSpace(readFile(t, genFile(t, dir, "one.jsonl", "-examples", fmt.Sprint(perPhase), "-seed", "11", "-unlabeled", "0.1"))), "\n")
	c := testbroker.Kafka(t)
	c.CreateTopic(t, "multi", parts)
	produce(t, c, "multi", parts, phase1)
	ends := func(topic string, n int) map[string]int64 {
		m := map[string]int64{}
		for p := range parts {
			m[fmt.Sprintf("kafka:%s/%d", topic, p)] = int64(n / parts)
		}
		return m
	}
	storeDir := filepath.Join(dir, "store")
	args := func(topic, storeDir, group, writer string, more ...string) []string {
		return append([]string{"run", "--model.name", "m",
			"--source.kind", "kafka", "--source.topics", topic, "--source.group", group,
			"--kafka.brokers", c.ListenAddrs()[0], "--http.addr", "", "--log.format", "json",
			"--snapshot.url", "file://" + storeDir + "?create_dir=1", "--snapshot.every", "1", "--snapshot.interval", "0s",
			"--snapshot.writer", writer, "--shutdown.timeout", "10s",
			"--model.learner.hash_bits", "14", "--model.mixing.epoch_examples", "120", "--model.mixing.interval", "100ms",
			"--model.mixing.rule", "mean"}, more...)
	}
	historyDigest := func(args []string) string {
		t.Helper()
		cfg, err := config.Load(args[1:], func(string) string { return "" })
		if err != nil {
			t.Fatal(err)
		}
		d := cfg.HistoryDigest()
		return hex.EncodeToString(d[:])
	}
	store := openStore(t, storeDir)
	ctx := context.Background()

	// Worker A learns the topic to its end.
	began := time.Now()
	aArgs := args("multi", storeDir, "gA", "wA")
	a := startRun(t, aArgs)
	waitCovered(t, []*runner{a}, store, "m", ends("multi", perPhase), 5*time.Minute)
	a.stop(t)
	t.Logf("worker A: the first phase in %v", time.Since(began).Round(time.Millisecond))
	newest := func() (uint64, string) {
		t.Helper()
		s, err := store.Latest(ctx, "m", nil)
		if err != nil {
			t.Fatal(err)
		}
		return s.Generation, hex.EncodeToString(digest(s.State))
	}
	before := storeFiles(t, storeDir)
	if !slices.ContainsFunc(before, func(p string) bool { return strings.HasPrefix(p, "m/epochs/") }) {
		t.Fatalf("worker A wrote no epoch log: the test is not about epochs\n%s", strings.Join(before, "\n"))
	}
	gen, sha := newest()
	if s, err := store.Load(ctx, "m", gen); err != nil {
		t.Fatal(err)
	} else if got, want := hex.EncodeToString(s.ConfigDigest[:]), historyDigest(aArgs); s.Epoch == 0 || got != want {
		t.Fatalf("generation %d: epoch %d, config digest %s; want an epoch and worker A's digest %s", gen, s.Epoch, got, want)
	}

	unchanged := func(what string) {
		t.Helper()
		if after := storeFiles(t, storeDir); !slices.Equal(after, before) {
			t.Errorf("%s changed the store:\nbefore:\n%s\nafter:\n%s", what, strings.Join(before, "\n"), strings.Join(after, "\n"))
		}
		if g, s := newest(); g != gen || s != sha {
			t.Errorf("%s: the newest generation is %d (%s), it was %d (%s)", what, g, s, gen, sha)
		}
	}
	stops := []struct {
		name string
		args []string
		want []string // in the error
	}{
		{
			// snapshot.Resume compares every learner setting with the
			// newest generation's before the epochs start, and names
			// the setting.
			name: "another learner setting",
			args: args("multi", storeDir, "gA", "wX", "--model.learner.arow_r", "0.5"),
			want: []string{"model m generation", "snapshot is incompatible with the configuration: arow_r is 10 in the snapshot but 0.5 in the configuration",
				"set model.learner.arow_r explicitly to its value in the snapshot, 10"},
		},
		{
			// Only the history digest holds the mixing weights.
			name: "another history setting",
			args: args("multi", storeDir, "gA", "wX", "--model.mixing.weights", "uniform"),
			want: []string{fmt.Sprintf("generation %d, written by wA, has config digest %s, this worker's is %s: another configuration writes this model",
				gen, historyDigest(aArgs), historyDigest(args("multi", storeDir, "gA", "wX", "--model.mixing.weights", "uniform"))),
				"set them explicitly, model.learner.algorithm first"},
		},
		{
			// The challengers are part of the history: the error names
			// them, the generation's and the worker's.
			name: "another challenger",
			args: args("multi", storeDir, "gA", "wX", "--model.challengers", "pa2:algorithm=pa2"),
			want: []string{fmt.Sprintf("generation %d, written by wA, has config digest %s, this worker's is %s: another configuration writes this model",
				gen, historyDigest(aArgs), historyDigest(args("multi", storeDir, "gA", "wX", "--model.challengers", "pa2:algorithm=pa2"))),
				fmt.Sprintf("its model.challengers differ from this worker's (generation %d has [], this worker [pa2]", gen)},
		},
		{
			// A second consumer group would learn every partition again
			// beside the first: the group is part of the history.
			name: "another consumer group",
			args: args("multi", storeDir, "other", "wB"),
			want: []string{fmt.Sprintf("generation %d, written by wA, has config digest %s, this worker's is %s: another configuration writes this model",
				gen, historyDigest(aArgs), historyDigest(args("multi", storeDir, "other", "wB"))),
				// The error names the group among the settings to agree on.
				"source.topics and source.group"},
		},
	}
	for _, s := range stops {
		began := time.Now()
		x := startRun(t, s.args)
		select {
		case <-x.done:
		case <-time.After(2 * time.Minute):
			x.stop(t)
			t.Fatalf("%s: the worker still runs after two minutes:\n%s", s.name, x.log())
		}
		took, err := time.Since(began), x.err
		var u *usageError
		if err == nil || errors.As(err, &u) {
			t.Errorf("%s: run returned %v, want an error that stops it", s.name, err)
		} else {
			for _, w := range s.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("%s: run's error does not say %q:\n%v", s.name, w, err)
				}
			}
		}
		t.Logf("%s: stopped in %v: %v", s.name, took.Round(time.Millisecond), err)
		unchanged(s.name)
	}

	// The default rule continues a log of the mean by the mean.
	phase2 := strings.Split(strings.TrimSpace(readFile(t, genFile(t, dir, "two.jsonl", "-examples", fmt.Sprint(perPhase), "-seed", "12", "-unlabeled", "0.1"))), "\n")
	produce(t, c, "multi", parts, phase2)
	d := startRun(t, args("multi", storeDir, "gA", "wD", "--model.mixing.rule", "auto"))
	waitCovered(t, []*runner{d}, store, "m", ends("multi", 2*perPhase), 5*time.Minute)
	d.stop(t)
	if !strings.Contains(d.log(), `the epoch log was written mixing by another rule: it continues so (a new model.name mixes by model.mixing.rule)","written":"mean"`) {
		t.Errorf("a worker at the default rule did not say it continues a log of the mean:\n%s", d.log())
	}
	final, err := store.Latest(ctx, "m", nil)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := hex.EncodeToString(final.ConfigDigest[:]), historyDigest(aArgs); got != want || final.Generation <= gen {
		t.Errorf("the continued log's generation %d has config digest %s, want a generation after %d with worker A's %s", final.Generation, got, gen, want)
	}

}

// TestAutoContinuesALogOfDamped: an AROW model's epoch log written under
// rule damped, what auto meant for AROW before the arow rule, goes on
// under damped when a worker at the default rule (auto, now arow)
// continues it: its generations keep the log's history digest, and the
// worker says so.
func TestAutoContinuesALogOfDamped(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	const parts, perPhase = 3, 600
	c := testbroker.Kafka(t)
	c.CreateTopic(t, "arow", parts)
	ends := func(n int) map[string]int64 {
		m := map[string]int64{}
		for p := range parts {
			m[fmt.Sprintf("kafka:arow/%d", p)] = int64(n / parts)
		}
		return m
	}
	storeDir := filepath.Join(dir, "store")
	args := func(writer, rule string) []string {
		return []string{"run", "--model.name", "m",
			"--source.kind", "kafka", "--source.topics", "arow", "--source.group", "g",
			"--kafka.brokers", c.ListenAddrs()[0], "--http.addr", "", "--log.format", "json",
			"--snapshot.url", "file://" + storeDir + "?create_dir=1", "--snapshot.every", "1", "--snapshot.interval", "0s",
			"--snapshot.writer", writer, "--shutdown.timeout", "10s",
			"--model.learner.hash_bits", "14", "--model.mixing.epoch_examples", "120", "--model.mixing.interval", "100ms",
			"--model.mixing.rule", rule}
	}
	historyDigest := func(args []string) [32]byte {
		t.Helper()
		cfg, err := config.Load(args[1:], func(string) string { return "" })
		if err != nil {
			t.Fatal(err)
		}
		if cfg.Model.Learner.Algorithm != learner.AROW {
			t.Fatalf("the default algorithm is %s: the test is about AROW", cfg.Model.Learner.Algorithm)
		}
		return cfg.HistoryDigest()
	}
	damped, auto := args("wA", "damped"), args("wB", "auto")
	if historyDigest(damped) == historyDigest(auto) {
		t.Fatal("damped and auto have one history digest: the test is about a change of rule")
	}
	store := openStore(t, storeDir)
	for i, phase := range [][]string{damped, auto} {
		lines := strings.Split(strings.TrimSpace(readFile(t, genFile(t, dir, fmt.Sprintf("%d.jsonl", i), "-examples", fmt.Sprint(perPhase), "-seed", fmt.Sprint(31+i)))), "\n")
		produce(t, c, "arow", parts, lines)
		w := startRun(t, phase)
		waitCovered(t, []*runner{w}, store, "m", ends((i+1)*perPhase), 5*time.Minute)
		w.stop(t)
		s, err := store.Latest(context.Background(), "m", nil)
		if err != nil {
			t.Fatal(err)
		}
		if s.Epoch == 0 || s.ConfigDigest != historyDigest(damped) {
			t.Fatalf("phase %d: generation %d (epoch %d) has config digest %x, want the log of damped's %x", i+1, s.Generation, s.Epoch, s.ConfigDigest, historyDigest(damped))
		}
		if i == 1 && !strings.Contains(w.log(), `"written":"damped","rule":"arow"`) {
			t.Errorf("the worker at auto did not say it continues a log of damped:\n%s", w.log())
		}
	}
}

// produce writes line i of lines to partition i%partitions of topic.
func produce(t *testing.T, c *testbroker.KafkaCluster, topic string, partitions int, lines []string) {
	t.Helper()
	recs := make([]*kgo.Record, len(lines))
	for i, l := range lines {
		recs[i] = &kgo.Record{Topic: topic, Partition: int32(i % partitions), Value: []byte(l)}
	}
	if err := c.Client(t).ProduceSync(context.Background(), recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
}

// learnInOrder is the model of cfg that learned lines in order, one by
// one, decoded as the worker decodes them: what one worker learns from a
// partition.
func learnInOrder(t *testing.T, cfg config.Config, lines []string) *learner.State {
	t.Helper()
	m, err := learner.New(cfg.Model.Learner)
	if err != nil {
		t.Fatal(err)
	}
	d := wire.NewDecoder(cfg.Model.Learner, wire.DecoderOptions{MaxFeatures: cfg.Source.MaxFeatures, MaxBytes: cfg.Source.MaxBytes})
	var x learner.Example
	for i, l := range lines {
		if _, err := d.Decode([]byte(l), &x); err != nil {
			t.Fatalf("example %d: %v", i+1, err)
		}
		m.Learn(&x)
	}
	return m.State()
}

func digest(st *learner.State) []byte {
	d := st.Digest()
	return d[:]
}

func openStore(t *testing.T, dir string) *snapshot.Store {
	t.Helper()
	s, err := snapshot.OpenStore(context.Background(), "file://"+dir+"?create_dir=1")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// storeFiles lists every file under dir, relative and with slashes.
func storeFiles(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, err := filepath.Rel(dir, path)
		out = append(out, filepath.ToSlash(rel))
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(out)
	return out
}

// runner is "hyperplane run" in-process, until stop.
type runner struct {
	cancel context.CancelFunc
	done   chan struct{} // closed once run returned err
	err    error
	stderr *lockedBuffer
}

func startRun(t *testing.T, args []string) *runner {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	r := &runner{cancel: cancel, done: make(chan struct{}), stderr: &lockedBuffer{}}
	go func() {
		defer close(r.done)
		r.err = run(ctx, args, func(string) string { return "" }, strings.NewReader(""), io.Discard, r.stderr)
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case <-r.done:
		case <-time.After(30 * time.Second):
		}
	})
	return r
}

func (r *runner) log() string { return r.stderr.String() }

// wait is waitRunning for the run.
func (r *runner) wait(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	stopped := make(chan error, 1)
	go func() {
		<-r.done
		stopped <- r.err
	}()
	waitRunning(t, timeout, what, stopped, r.stderr, cond)
}

// stop stops the worker and fails unless it stops cleanly in time.
func (r *runner) stop(t *testing.T) {
	t.Helper()
	r.cancel()
	select {
	case <-r.done:
		if r.err != nil {
			t.Fatalf("run: %v\n%s", r.err, r.log())
		}
	case <-time.After(2 * time.Minute):
		t.Fatalf("run did not stop in two minutes:\n%s", r.log())
	}
}

// waitCovered waits until the newest generation of model in store is at
// want, and fails if a worker stops meanwhile.
func waitCovered(t *testing.T, workers []*runner, store *snapshot.Store, model string, want map[string]int64, d time.Duration) {
	t.Helper()
	var have map[string]int64
	waited := false
	defer func() {
		if !waited {
			var logs []string
			for _, w := range workers {
				logs = append(logs, w.log())
			}
			t.Logf("the newest generation is at %v; the runs' logs:\n%s", have, strings.Join(logs, "\n----\n"))
		}
	}()
	wait.For(t, d, 50*time.Millisecond, fmt.Sprintf("a generation at %v", want), func() bool {
		snap, err := store.Latest(context.Background(), model, nil)
		if err != nil && !errors.Is(err, snapshot.ErrNotFound) {
			t.Fatal(err)
		}
		if err == nil {
			if maps.Equal(snap.Positions, want) {
				return true
			}
			have = snap.Positions
		}
		for _, w := range workers {
			select {
			case <-w.done:
				t.Fatalf("run stopped: %v", w.err)
			default:
			}
		}
		return false
	})
	waited = true
}

// lockedBuffer is a bytes.Buffer that a worker's logger writes while the
// test reads it.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}
