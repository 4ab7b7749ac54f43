package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/vmihailenco/msgpack/v5"

	"github.com/hyperplane-ml/hyperplane/consumer"
	"github.com/hyperplane-ml/hyperplane/internal/testbroker"
	"github.com/hyperplane-ml/hyperplane/snapshot"
)

// TestReplayFollowsTheEpochLog learns a four-partition topic in epochs,
// then replays it: the replay follows the recorded epochs, checks every
// live generation it passes, and ends with the live model's
// state_sha256.
func TestReplayFollowsTheEpochLog(t *testing.T) { replayFollowsTheEpochLog(t) }

// TestChallengersInEpochs: the model learned in epochs has two
// challengers (one of another hashing, decoded again in every range):
// its generations hold them mixed, compare and inspect show them, and
// replay of the log rebuilds them to the bit; promote writes its request.
func TestChallengersInEpochs(t *testing.T) {
	args, store := replayFollowsTheEpochLog(t, "--model.challengers", "perceptron:algorithm=perceptron;seed:hash_seed=7")
	newest, err := store.Latest(context.Background(), "mixed", nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(newest.State.Challengers) != 2 {
		t.Fatalf("the generation holds %d challengers, want 2", len(newest.State.Challengers))
	}
	lines := mustRun(t, "", append([]string{"compare", "--json"}, args...)...)
	for i, l := range strings.Split(strings.TrimSpace(lines), "\n") {
		var line struct {
			Name      string
			Examples  int
			Low, High float64
		}
		if err := json.Unmarshal([]byte(l), &line); err != nil || line.Name != newest.State.Challengers[i].Name ||
			line.Examples != int(newest.State.Labeled) || !(line.Low <= line.High) {
			t.Errorf("compare --json line %d: %s (%v), want every one of the %d labeled examples compared once", i, l, err, newest.State.Labeled)
		}
	}
	var storeURL string
	for i, a := range args {
		if a == "--snapshot.url" {
			storeURL = args[i+1]
		}
	}
	inspected := mustRun(t, "", "inspect", strings.TrimSuffix(storeURL, "?create_dir=1")+"/mixed")
	if !strings.Contains(inspected, `"challengers"`) || !strings.Contains(inspected, `"comparisons"`) {
		t.Errorf("inspect shows no challengers:\n%s", inspected)
	}

	// Epochs promote as they agree on an epoch: promote writes the
	// request the next boundary records; automatic promotion is part of
	// the history configuration, so a worker with it does not continue
	// a log written without it.
	var stdout, stderr strings.Builder
	err = run(context.Background(), append([]string{"promote", "--challenger", "perceptron"}, args...), func(string) string { return "" }, strings.NewReader(""), &stdout, &stderr)
	if err != nil {
		t.Fatalf("promote of a model learned in epochs: %v", err)
	}
	if !strings.Contains(stdout.String(), "epoch whose boundary records the request") {
		t.Errorf("promote of a model learned in epochs says %q, want when an epoch takes it", stdout.String())
	}
	if r, err := store.PromotionRequest(context.Background(), "mixed"); err != nil || r == nil || r.Challenger != "perceptron" {
		t.Fatalf("the request in the store: %+v, %v", r, err)
	}
	err = run(context.Background(), append([]string{"run", "--http.addr", "", "--model.compare.promote", "auto"}, args...), func(string) string { return "" }, strings.NewReader(""), io.Discard, &stderr)
	if err == nil || !strings.Contains(err.Error(), "model.compare.promote") {
		t.Errorf("run with automatic promotion over a log written without: %v, want a refusal naming model.compare.promote", err)
	}
}

// replayFollowsTheEpochLog is TestReplayFollowsTheEpochLog with the
// flags extra; it returns the flags of the model and its store.
func replayFollowsTheEpochLog(t *testing.T, extra ...string) ([]string, *snapshot.Store) {
	return replayFollowsTheEpochLogOf(t, nil, extra...)
}

// replaySummary is what replay prints for a model learned in epochs.
type replaySummary struct {
	Examples            int
	Epoch               uint64
	BeganFromGeneration uint64   `json:"began_from_generation"`
	EpochsReplayed      int      `json:"epochs_replayed"`
	GenerationsChecked  int      `json:"generations_checked"`
	EpochsChecked       []uint64 `json:"epochs_checked"`
	NotChecked          *string  `json:"not_checked"`
	StateSHA256         string   `json:"state_sha256"`
}

// replayFollowsTheEpochLogOf is replayFollowsTheEpochLog over examples
// that gen's flags add to those of hyperplane gen.
func replayFollowsTheEpochLogOf(t *testing.T, gen []string, extra ...string) ([]string, *snapshot.Store) {
	dir := t.TempDir()
	data := genFile(t, dir, "ex.jsonl", append([]string{"-examples", "6000", "-seed", "8", "-unlabeled", "0.1"}, gen...)...)
	c := testbroker.Kafka(t)
	c.CreateTopic(t, "examples", 4)
	cl := c.Client(t)
	var recs []*kgo.Record
	for i, l := range strings.Split(strings.TrimSpace(readFile(t, data)), "\n") {
		recs = append(recs, &kgo.Record{Topic: "examples", Partition: int32(i % 4), Value: []byte(l)})
	}
	if err := cl.ProduceSync(context.Background(), recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	storeURL := "file://" + filepath.Join(dir, "live") + "?create_dir=1"
	args := []string{"--model.name", "mixed", "--kafka.brokers", strings.Join(c.ListenAddrs(), ","),
		"--source.kind", "kafka", "--source.topics", "examples", "--snapshot.url", storeURL,
		"--model.mixing.epoch_examples", "200", "--model.mixing.interval", "50ms", "--snapshot.every", "1"}
	args = append(args, extra...)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var stderr bytes.Buffer
	stopped := make(chan error, 1)
	go func() {
		stopped <- run(ctx, append([]string{"run", "--http.addr", ""}, args...), func(string) string { return "" }, strings.NewReader(""), io.Discard, &stderr)
	}()
	store, err := snapshot.OpenStore(context.Background(), storeURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	// The model holds every example once the newest generation's
	// positions are every partition's end (each epoch writes one).
	waitLearned := func() bool {
		newest, err := store.Latest(context.Background(), "mixed", nil)
		if err != nil {
			return false
		}
		total := int64(0)
		for _, v := range newest.Positions {
			total += v
		}
		return total == int64(len(recs))
	}
	waitRunning(t, 5*time.Minute, "every record learned", stopped, &stderr, waitLearned)
	cancel()
	if err := <-stopped; err != nil {
		t.Fatalf("run: %v\n%s", err, stderr.String())
	}
	if !strings.Contains(stderr.String(), "learning in epochs") {
		t.Fatalf("the worker did not learn in epochs:\n%s", stderr.String())
	}
	newest, err := store.Latest(context.Background(), "mixed", nil)
	if err != nil {
		t.Fatal(err)
	}
	if newest.Epoch == 0 {
		t.Fatalf("the newest generation %d has no epoch", newest.Generation)
	}
	var total int64
	for _, v := range newest.Positions {
		total += v
	}
	if total != int64(len(recs)) {
		t.Fatalf("the newest generation holds %d positions of %d", total, len(recs))
	}

	replay := func(args ...string) replaySummary {
		t.Helper()
		out, stderr, err := runCmd(t, "", append([]string{"replay"}, args...)...)
		if err != nil {
			t.Fatalf("replay: %v\n%s", err, stderr)
		}
		if strings.Contains(stderr, "lost when the worker stops") {
			t.Errorf("replay warns as the worker does: %s", stderr)
		}
		var sum replaySummary
		if err := json.Unmarshal([]byte(out), &sum); err != nil {
			t.Fatalf("%v: %s", err, out)
		}
		if want := fmt.Sprintf("%x", newest.State.Digest()); sum.StateSHA256 != want || sum.Epoch != newest.Epoch {
			t.Fatalf("replay: epoch %d, state_sha256 %s; the live model: epoch %d, %s", sum.Epoch, sum.StateSHA256, newest.Epoch, want)
		}
		if sum.NotChecked == nil || len(sum.EpochsChecked) != sum.GenerationsChecked {
			t.Fatalf("the summary does not say what was checked: %s", out)
		}
		return sum
	}

	// Every epoch wrote its generation (snapshot.every 1): each the
	// replay learns is checked.
	sum := replay(append([]string{"--out", "file://" + filepath.Join(dir, "replayed") + "?create_dir=1"}, args...)...)
	if sum.GenerationsChecked < 2 || sum.EpochsReplayed != sum.GenerationsChecked || *sum.NotChecked != "" {
		t.Fatalf("replay from the log's start checked %d live generations of %d epochs (%q)", sum.GenerationsChecked, sum.EpochsReplayed, *sum.NotChecked)
	}

	replayFromAnUpgrade(t, dir, store, args, newest, replay)

	// Retention keeps the newest generation alone, and the log from it
	// on: the replay begins there, has nothing to learn or check, and
	// says so. Without --out it keeps the model in memory, unannounced.
	if err := store.Retain(context.Background(), "mixed", 1); err != nil {
		t.Fatal(err)
	}
	sum = replay(args...)
	if sum.BeganFromGeneration != newest.Generation || sum.EpochsReplayed != 0 || sum.GenerationsChecked != 0 ||
		!strings.Contains(*sum.NotChecked, fmt.Sprintf("no epoch after generation %d", newest.Generation)) {
		t.Fatalf("replay after retention: began from %d, %d epochs replayed, %d checked, %q", sum.BeganFromGeneration, sum.EpochsReplayed, sum.GenerationsChecked, *sum.NotChecked)
	}
	return args, store
}

// TestPromoteInEpochs: a perceptron learned in epochs with an AROW
// challenger and automatic promotion promotes it after an epoch; the
// generations, compare and replay of the log agree on it.
func TestPromoteInEpochs(t *testing.T) {
	args, store := replayFollowsTheEpochLogOf(t, []string{"-vocab", "200"}, "--model.learner.algorithm", "perceptron",
		"--model.challengers", "arow:algorithm=arow", "--model.compare.promote", "auto", "--model.compare.alpha", "0.2")
	newest, err := store.Latest(context.Background(), "mixed", nil)
	if err != nil {
		t.Fatal(err)
	}
	ps := newest.State.Promotions
	if len(ps) == 0 || ps[0].Challenger != "arow" || !ps[0].Auto || ps[0].Epoch == 0 {
		t.Fatalf("generation %d holds promotions %+v, want arow promoted after an epoch\n%s", newest.Generation, ps, mustRun(t, "", append([]string{"compare"}, args...)...))
	}
	out := mustRun(t, "", append([]string{"compare"}, args...)...)
	if want := fmt.Sprintf("promoted arow over mixed after epoch %d", ps[0].Epoch); !strings.Contains(out, want) {
		t.Errorf("compare shows\n%s\nwant %q", out, want)
	}

	// A worker started again goes on with the promoted model, the file's
	// model.learner as the challenger named mixed.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var stderr lockedBuffer
	stopped := make(chan error, 1)
	go func() {
		stopped <- run(ctx, append([]string{"run", "--http.addr", ""}, args...), func(string) string { return "" }, strings.NewReader(""), io.Discard, &stderr)
	}()
	waitRunning(t, time.Minute, "learning in epochs again", stopped, &stderr, func() bool {
		return strings.Contains(stderr.String(), "learning in epochs")
	})
	cancel()
	if err := <-stopped; err != nil {
		t.Fatalf("run again: %v\n%s", err, stderr.String())
	}
	promoted := logLine(stderr.String(), "the model serves a promoted challenger's configuration")
	if !strings.Contains(promoted, fmt.Sprintf(`"epoch":%d`, ps[len(ps)-1].Epoch)) || strings.Contains(promoted, `"source"`) {
		t.Errorf("the worker did not go on with the promoted model, after its epoch:\n%s", stderr.String())
	}
	if line := logLine(stderr.String(), "worker starting"); !strings.Contains(line, `"algorithm":"arow"`) {
		t.Errorf("the worker started again logged %q, want the promoted model's algorithm", line)
	}
}

// replayFromAnUpgrade: a live log whose generation G was written in
// snapshot format 2 (an upgraded model's last one before the upgrade),
// and whose generation G+1 differs from what this binary learns from it
// (workers of the earlier format learned that epoch): a replay from the
// log's start stops at epoch G+1, naming generation G's format and the
// way out, and one with --from-generation G+2 begins there and ends at
// the live model. A generation the store does not hold is refused.
func replayFromAnUpgrade(t *testing.T, dir string, store *snapshot.Store, args []string, newest *snapshot.Snapshot, replay func(args ...string) replaySummary) {
	t.Helper()
	ctx := context.Background()
	gens, err := store.Generations(ctx, "mixed")
	if err != nil {
		t.Fatal(err)
	}
	if len(gens) < 6 {
		t.Fatalf("generations %v: too few for a replay from an upgrade", gens)
	}
	g := gens[len(gens)/2]
	path := func(gen uint64) string {
		return filepath.Join(dir, "live", "mixed", fmt.Sprintf("%020d.msgpack", gen))
	}
	// Generation G, as a hyperplane of format 2 wrote it: the same body.
	var env map[string]any
	if err := msgpack.Unmarshal([]byte(readFile(t, path(g))), &env); err != nil {
		t.Fatal(err)
	}
	env["format"] = 2
	older, err := msgpack.Marshal(env)
	if err != nil {
		t.Fatal(err)
	}
	// Generation G+1, as the earlier workers learned it: other bits.
	next, err := store.Load(ctx, "mixed", g+1)
	if err != nil {
		t.Fatal(err)
	}
	next.State.Mistakes++
	other, err := snapshot.Marshal(next)
	if err != nil {
		t.Fatal(err)
	}
	for gen, data := range map[uint64][]byte{g: older, g + 1: other} {
		if err := os.WriteFile(path(gen), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if s, err := store.Load(ctx, "mixed", g); err != nil || s.Format != 2 {
		t.Fatalf("generation %d rewritten in format 2 reads as %v, %v", g, s, err)
	}

	_, stderr, err := runCmd(t, "", append([]string{"replay"}, args...)...)
	if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("epoch %d gives state_sha256", g+1)) ||
		!strings.Contains(err.Error(), fmt.Sprintf("generation %d, which epoch %d goes on from, was written in snapshot format 2", g, g+1)) ||
		!strings.Contains(err.Error(), "--from-generation") {
		t.Fatalf("replay over a generation of format 2: %v, want the mismatch at epoch %d naming generation %d's format and --from-generation\n%s", err, g+1, g, stderr)
	}
	sum := replay(append([]string{"--from-generation", fmt.Sprint(g + 2)}, args...)...)
	if sum.BeganFromGeneration != g+2 || sum.Epoch != newest.Epoch || sum.GenerationsChecked != int(newest.Epoch-(g+2)) {
		t.Fatalf("replay --from-generation %d: began from %d, ended at epoch %d, %d generations checked; want the live model's epoch %d and %d checked",
			g+2, sum.BeganFromGeneration, sum.Epoch, sum.GenerationsChecked, newest.Epoch, newest.Epoch-(g+2))
	}
	_, _, err = runCmd(t, "", append([]string{"replay", "--from-generation", "999999"}, args...)...)
	held := fmt.Sprintf("the store holds no generation 999999 of mixed: it holds generations %s", consumer.JoinEpochs(gens, ", "))
	if err == nil || !strings.Contains(err.Error(), "-from-generation: "+held) {
		t.Fatalf("replay --from-generation 999999: %v, want a refusal naming the generation and those the store holds (%q)", err, held)
	}
	// The generations as they were, for what follows.
	for _, gen := range []uint64{g, g + 1} {
		s, err := store.Load(ctx, "mixed", gen)
		if err != nil {
			t.Fatal(err)
		}
		if gen == g+1 {
			s.State.Mistakes--
		}
		s.Format = 0
		data, err := snapshot.Marshal(s)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path(gen), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
