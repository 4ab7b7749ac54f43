package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/hyperplane-ml/hyperplane/internal/testbroker"
	"github.com/hyperplane-ml/hyperplane/snapshot"
)

// TestServeAnswersAsPredict runs the worker over a JetStream stream until
// it has learned all of it and snapshotted the result, then asks it for
// predictions over HTTP and NATS: every reply equals, score to the bit,
// what "hyperplane predict" says with the snapshot of the same version,
// live or pinned to an older generation; and the requests change neither
// the model, nor its positions, nor its metrics.
func TestServeAnswersAsPredict(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	train := genFile(t, dir, "train.jsonl", "-examples", "3000", "-seed", "2", "-unlabeled", "0.1")
	test := genFile(t, dir, "test.jsonl", "-examples", "200", "-seed", "3", "-unlabeled", "0.5")
	ns := testbroker.NATS(t)
	js := ns.JetStream(t)
	testbroker.CreateStream(t, js, jetstream.StreamConfig{Name: "EXAMPLES", Subjects: []string{"ex"}})
	lines := strings.Split(strings.TrimSpace(readFile(t, train)), "\n")
	publish := func(lines []string) {
		t.Helper()
		for _, l := range lines {
			// A minute for each acknowledgement rather than the
			// client's default 5 s: the server shares the machine with
			// the worker, which learns as fast as it can.
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			_, err := js.Publish(ctx, "ex", []byte(l))
			cancel()
			if err != nil {
				t.Fatal(err)
			}
		}
	}
	// The first half now, the second once a generation holds the first:
	// the pinned check below needs an older generation than the newest,
	// which a worker that takes the whole stream in before its first
	// snapshot is written would not leave.
	half := len(lines) / 2
	publish(lines[:half])
	storeDir := filepath.Join(dir, "store")
	args := []string{"run", "--model.name", "served", "--model.learner.algorithm", "averaged",
		"--source.kind", "jetstream", "--source.stream", "EXAMPLES", "--nats.url", ns.URL(),
		"--http.addr", "127.0.0.1:0", "--serve.nats=true", "--serve.refresh", "0s",
		"--snapshot.url", "file://" + storeDir + "?create_dir=1", "--snapshot.every", "1000", "--snapshot.interval", "200ms",
		// Every generation kept: the pinned check asks for the first.
		"--snapshot.keep", "1000"}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	stderr := &lockedBuffer{}
	stopped := make(chan error, 1)
	go func() {
		stopped <- run(ctx, args, func(string) string { return "" }, strings.NewReader(""), io.Discard, stderr)
	}()
	var addr string
	waitRunning(t, time.Minute, "the http listening line", stopped, stderr, func() bool { addr = listenedAddr(stderr); return addr != "" })
	store, err := snapshot.OpenStore(context.Background(), "file://"+storeDir+"?create_dir=1")
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	waitRunning(t, time.Minute, "a snapshot of the first half", stopped, stderr, func() bool {
		first, _ := store.Latest(context.Background(), "served", nil)
		return first != nil && first.Positions["jetstream:EXAMPLES"] >= int64(half)
	})
	publish(lines[half:])
	// The model is idle once its newest snapshot covers the whole stream.
	var newest *snapshot.Snapshot
	waitRunning(t, time.Minute, "a snapshot of the whole stream", stopped, stderr, func() bool {
		newest, _ = store.Latest(context.Background(), "served", nil)
		return newest != nil && newest.Positions["jetstream:EXAMPLES"] == int64(len(lines))
	})
	if newest.Generation < 2 {
		t.Fatalf("only %d generations: the pinned check needs an older one", newest.Generation)
	}
	before := learningMetrics(t, addr)
	checkMetricsDocumented(t, addr)

	body := []byte(readFile(t, test))
	resp, err := http.Post("http://"+addr+"/v1/predict", "application/x-ndjson", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	live := readReply(t, resp, http.StatusOK)
	if v := resp.Header.Get("Hyperplane-Model-Version"); v != strconv.FormatUint(newest.State.Updates, 10) {
		t.Fatalf("live reply from version %s, the newest snapshot is of version %d", v, newest.State.Updates)
	}
	compareWithPredict(t, live, mustRun(t, "", "predict", "-model", filepath.Join(storeDir, snapshot.Key("", "served", newest.Generation)), "-input", test))

	// Pinned to the first generation.
	resp, err = http.Post("http://"+addr+"/v1/predict?generation=1", "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	pinned := readReply(t, resp, http.StatusOK)
	first, err := store.Load(context.Background(), "served", 1)
	if err != nil {
		t.Fatal(err)
	}
	if first.State.Updates == newest.State.Updates {
		t.Fatal("the first generation has the newest one's version: the pinned check says nothing")
	}
	compareWithPredict(t, pinned, mustRun(t, "", "predict", "-model", filepath.Join(storeDir, snapshot.Key("", "served", 1)), "-input", test))

	// The NATS service answers with the same bytes.
	nc := ns.Conn(t)
	msg, err := nc.Request("hyperplane.served.predict", body, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if code := msg.Header.Get("Nats-Service-Error-Code"); code != "" {
		t.Fatalf("nats error %s: %s", code, msg.Header.Get("Nats-Service-Error"))
	}
	if !bytes.Equal(msg.Data, live) {
		t.Fatalf("the NATS reply differs from the HTTP one:\n%s\n%s", msg.Data, live)
	}

	if after := learningMetrics(t, addr); after != before {
		t.Fatalf("requests changed the learning metrics:\nbefore %s\nafter  %s", before, after)
	}
	cancel()
	if err := <-stopped; err != nil {
		t.Fatalf("run: %v\n%s", err, stderr.String())
	}
	last, err := store.Latest(context.Background(), "served", nil)
	if err != nil {
		t.Fatal(err)
	}
	if last.Generation != newest.Generation || last.State.Digest() != newest.State.Digest() {
		t.Fatalf("the model changed while it only answered requests: generation %d → %d", newest.Generation, last.Generation)
	}
}

func idText(id *string) string {
	if id == nil {
		return "(none)"
	}
	return strconv.Quote(*id)
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func readReply(t *testing.T, resp *http.Response, status int) []byte {
	t.Helper()
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != status {
		t.Fatalf("status %d, want %d: %s", resp.StatusCode, status, b)
	}
	return b
}

// learningMetrics are the metrics of learning, as /metrics shows them:
// the examples counted, the updates, the model's version and positions.
func learningMetrics(t *testing.T, addr string) string {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	b := readReply(t, resp, http.StatusOK)
	var keep []string
	re := regexp.MustCompile(`^hyperplane_(examples_total|updates_total|model_version|position|rolling_accuracy)\b`)
	for l := range strings.SplitSeq(string(b), "\n") {
		if re.MatchString(l) {
			keep = append(keep, l)
		}
	}
	if len(keep) < 4 {
		t.Fatalf("the learning metrics are missing from /metrics:\n%s", b)
	}
	return strings.Join(keep, "; ")
}

// compareWithPredict checks replies, JSON lines, against predict's events
// for the same examples: the same predictions, ids and model, and scores
// and probabilities equal to the bit, each probability in [0, 1].
func compareWithPredict(t *testing.T, replies []byte, events string) {
	t.Helper()
	type line struct {
		ID          *string         `json:"id"`
		Predicted   int             `json:"predicted"`
		Score       json.RawMessage `json:"score"`
		Probability *float64        `json:"probability"`
		Model       struct {
			Name    string `json:"name"`
			Version uint64 `json:"version"`
		} `json:"model"`
	}
	parse := func(text string) []line {
		var out []line
		sc := bufio.NewScanner(strings.NewReader(text))
		for sc.Scan() {
			var l line
			if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
				t.Fatalf("%v: %s", err, sc.Text())
			}
			out = append(out, l)
		}
		return out
	}
	got, want := parse(string(replies)), parse(events)
	if len(got) != len(want) || len(got) == 0 {
		t.Fatalf("%d replies, predict printed %d events", len(got), len(want))
	}
	for i := range got {
		g, w := got[i], want[i]
		gs, err1 := strconv.ParseFloat(string(g.Score), 64)
		ws, err2 := strconv.ParseFloat(string(w.Score), 64)
		if err1 != nil || err2 != nil {
			t.Fatalf("example %d: scores %s and %s", i+1, g.Score, w.Score)
		}
		if math.Float64bits(gs) != math.Float64bits(ws) || g.Predicted != w.Predicted || g.Model != w.Model || idText(g.ID) != idText(w.ID) {
			t.Fatalf("example %d: reply %+v score %s, predict %+v score %s", i+1, g, g.Score, w, w.Score)
		}
		if g.Probability == nil || w.Probability == nil || *g.Probability != *w.Probability || !(*g.Probability >= 0 && *g.Probability <= 1) {
			t.Fatalf("example %d: reply's probability %v, predict's %v", i+1, g.Probability, w.Probability)
		}
	}
}
