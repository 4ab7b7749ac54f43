package main

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/hyperplane-ml/hyperplane/internal/testbroker"
	"github.com/hyperplane-ml/hyperplane/internal/wait"
	"github.com/hyperplane-ml/hyperplane/serve"
	"github.com/hyperplane-ml/hyperplane/snapshot"
	"github.com/hyperplane-ml/hyperplane/snapshot/s3test"
)

// TestEpochsStartDuringAStoreOutage: a worker of a topic of several
// partitions that starts while the store refuses writes waits for it at
// its start-up probe of create-if-absent, saying why, instead of exiting;
// stopped then, it stops cleanly; once the store takes writes again it
// learns the topic to its end.
func TestEpochsStartDuringAStoreOutage(t *testing.T) {
	dir := t.TempDir()
	const parts, n = 2, 600
	lines := strings.Split(strings.TrimSpace(readFile(t, genFile(t, dir, "ex.jsonl", "-examples", fmt.Sprint(n), "-seed", "5"))), "\n")
	c := testbroker.Kafka(t)
	c.CreateTopic(t, "outage", parts)
	produce(t, c, "outage", parts, lines)
	srv, heal := s3test.StartRefusingWrites(t)
	storeURL := srv.URL(t)
	args := func(writer string) []string {
		return []string{"run", "--model.name", "m",
			"--source.kind", "kafka", "--source.topics", "outage", "--source.group", "outage",
			"--kafka.brokers", c.ListenAddrs()[0], "--http.addr", "", "--log.format", "json",
			"--snapshot.url", storeURL, "--snapshot.interval", "100ms", "--snapshot.writer", writer}
	}
	waitProbe := func(w *runner) {
		t.Helper()
		waited := false
		defer func() {
			if !waited {
				t.Logf("the run's log:\n%s", w.log())
			}
		}()
		wait.For(t, time.Minute, 20*time.Millisecond, "a retried probe", func() bool {
			if strings.Contains(w.log(), "the store refused the start-up probe of create-if-absent; retrying") {
				return true
			}
			select {
			case <-w.done:
				t.Fatalf("run stopped during the outage: %v", w.err)
			default:
			}
			return false
		})
		waited = true
	}
	waitsThenLearns(t, args, waitProbe, heal, storeURL, "outage", parts, n)
}

// waitsThenLearns starts a worker of args(writer) during a store outage
// and stops it once waiting says it waits, which must stop it cleanly;
// then starts another, ends the outage with mend once it waits, and
// waits until the model covers every one of the n examples, split evenly
// over the topic's parts partitions.
func waitsThenLearns(t *testing.T, args func(writer string) []string, waiting func(*runner), mend func(), storeURL, topic string, parts, n int) {
	t.Helper()
	quit := startRun(t, args("quit"))
	waiting(quit)
	quit.stop(t)

	w := startRun(t, args("w"))
	waiting(w)
	mend()
	store, err := snapshot.OpenStore(context.Background(), storeURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	want := map[string]int64{}
	for p := range parts {
		want[fmt.Sprintf("kafka:%s/%d", topic, p)] = int64(n / parts)
	}
	waitCovered(t, []*runner{w}, store, "m", want, time.Minute)
	w.stop(t)
}

// TestStartWhileTheStoreIsDown: a worker that starts while nothing
// answers at the store's address (a stopped server: every connection
// refused) waits for it, warning at each attempt with snapshot.url and
// the store's error, instead of exiting; stopped then, it stops cleanly;
// once the store is up it resumes and learns its source to the end: of
// several partitions in epochs, and of one.
func TestStartWhileTheStoreIsDown(t *testing.T) {
	dir := t.TempDir()
	const n = 400
	lines := strings.Split(strings.TrimSpace(readFile(t, genFile(t, dir, "ex.jsonl", "-examples", fmt.Sprint(n), "-seed", "7"))), "\n")
	c := testbroker.Kafka(t)
	for _, parts := range []int{2, 1} {
		t.Run(fmt.Sprintf("%d partitions", parts), func(t *testing.T) {
			topic := fmt.Sprintf("down%d", parts)
			c.CreateTopic(t, topic, parts)
			produce(t, c, topic, parts, lines)
			srv, up := s3test.StartDown(t)
			storeURL := srv.URL(t)
			args := func(writer string) []string {
				return []string{"run", "--model.name", "m",
					"--source.kind", "kafka", "--source.topics", topic, "--source.group", topic,
					"--kafka.brokers", c.ListenAddrs()[0], "--http.addr", "", "--log.format", "json",
					"--snapshot.url", storeURL, "--snapshot.interval", "100ms", "--snapshot.writer", writer}
			}
			waiting := func(w *runner) {
				t.Helper()
				w.wait(t, time.Minute, "a warning that the worker waits for the store", func() bool {
					log := w.log()
					return strings.Contains(log, "snapshot.url: the store does not answer at start-up; waiting for it") &&
						strings.Contains(log, "connection refused")
				})
			}
			waitsThenLearns(t, args, waiting, up, storeURL, topic, parts, n)
		})
	}
}

// TestProbesAnswerWhileWaitingForTheStore: a worker that starts while the
// store is down answers on http.addr from the start: /healthz 200, as the
// process is alive, /readyz 503 saying it starts, /metrics, and a
// prediction request 503 with Retry-After; once the store is up it
// resumes and is ready.
func TestProbesAnswerWhileWaitingForTheStore(t *testing.T) {
	c := testbroker.Kafka(t)
	c.CreateTopic(t, "probed", 1)
	srv, up := s3test.StartDown(t)
	w := startRun(t, []string{"run", "--model.name", "m",
		"--source.kind", "kafka", "--source.topics", "probed", "--source.group", "probed",
		"--kafka.brokers", c.ListenAddrs()[0], "--http.addr", "127.0.0.1:0", "--log.format", "json",
		"--snapshot.url", srv.URL(t), "--snapshot.interval", "100ms"})
	w.wait(t, time.Minute, "a warning that the worker waits for the store", func() bool {
		return strings.Contains(w.log(), "snapshot.url: the store does not answer at start-up; waiting for it")
	})
	addr := listenedAddr(w.stderr)
	if addr == "" {
		t.Fatalf("no http listening line while the worker waits for the store:\n%s", w.log())
	}
	get := func(path string) (int, string) {
		t.Helper()
		resp, err := http.Get("http://" + addr + path)
		if err != nil {
			t.Fatalf("GET %s while the worker waits for the store: %v", path, err)
		}
		return resp.StatusCode, string(readReply(t, resp, resp.StatusCode))
	}
	if code, body := get("/healthz"); code != http.StatusOK {
		t.Errorf("/healthz while the worker waits for the store: %d %q, want 200", code, body)
	}
	if code, body := get("/readyz"); code != http.StatusServiceUnavailable || !strings.Contains(body, "starting: ") {
		t.Errorf("/readyz while the worker waits for the store: %d %q, want 503 saying it starts", code, body)
	}
	// The process's metrics; the worker's once it has resumed the model
	// they report on, not zeros before.
	if code, body := get("/metrics"); code != http.StatusOK || !strings.Contains(body, "process_start_time_seconds") || strings.Contains(body, "hyperplane_model_version") {
		t.Errorf("/metrics while the worker waits for the store: %d, want 200 with the process's metrics and not the model's:\n%s", code, body)
	}
	resp, err := http.Post("http://"+addr+serve.PredictPath, "application/json", strings.NewReader(`{"features":{"a":1}}`))
	if err != nil {
		t.Fatal(err)
	}
	if body := readReply(t, resp, http.StatusServiceUnavailable); resp.Header.Get("Retry-After") == "" {
		t.Errorf("a prediction request while the worker waits for the store: %q without Retry-After", body)
	}
	// A client slow to send its body hears the 503 at once too: the
	// server does not wait for the rest of the body before it replies.
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprintf(conn, "POST %s HTTP/1.1\r\nHost: test\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{", serve.PredictPath)
	conn.SetReadDeadline(time.Now().Add(5 * time.Second)) //nolint:errcheck // a failed read below says it
	if line, err := bufio.NewReader(conn).ReadString('\n'); err != nil || !strings.Contains(line, "503") {
		t.Errorf("a prediction request whose body is slow, while the worker waits for the store: %q, %v; want 503 at once", line, err)
	}

	up()
	w.wait(t, time.Minute, "/readyz ready once the store is up", func() bool {
		code, _ := get("/readyz")
		return code == http.StatusOK
	})
	w.stop(t)
}

// TestNoHTTPServerIsSaid: a worker whose http.addr is empty says at
// start-up that it runs without probes, metrics and HTTP predictions,
// rather than leaving an operator to find the port closed.
func TestNoHTTPServerIsSaid(t *testing.T) {
	t.Parallel()
	c := testbroker.Kafka(t)
	c.CreateTopic(t, "dark", 1)
	w := startRun(t, []string{"run", "--model.name", "m",
		"--source.kind", "kafka", "--source.topics", "dark", "--source.group", "dark",
		"--kafka.brokers", c.ListenAddrs()[0], "--http.addr", "", "--log.format", "json",
		"--snapshot.url", "mem://"})
	w.wait(t, time.Minute, "the worker starting", func() bool { return strings.Contains(w.log(), `"msg":"worker starting"`) })
	w.stop(t)
	if !strings.Contains(w.log(), "no http server: http.addr is empty") {
		t.Fatalf("a worker without an HTTP server did not say so:\n%s", w.log())
	}
	if strings.Contains(w.log(), "http listening") {
		t.Fatalf("a worker without an HTTP server logged a listening address:\n%s", w.log())
	}
}

// TestStartUpProbeNamesTheStore: a worker of several partitions waiting
// at its start-up probe of create-if-absent for a store that refuses
// writes says so where an operator looks: /readyz 503 `snapshots: ...`
// with the store's error, and hyperplane_snapshot_errors_total rising,
// not `source: not consuming yet` alone; ready once the store takes
// writes.
func TestStartUpProbeNamesTheStore(t *testing.T) {
	c := testbroker.Kafka(t)
	c.CreateTopic(t, "probing", 2)
	srv, heal := s3test.StartRefusingWrites(t)
	w := startRun(t, []string{"run", "--model.name", "m",
		"--source.kind", "kafka", "--source.topics", "probing", "--source.group", "probing",
		"--kafka.brokers", c.ListenAddrs()[0], "--http.addr", "127.0.0.1:0", "--log.format", "json",
		"--snapshot.url", srv.URL(t), "--snapshot.interval", "100ms"})
	w.wait(t, time.Minute, "a retried probe", func() bool {
		return strings.Contains(w.log(), "the store refused the start-up probe of create-if-absent; retrying")
	})
	addr := listenedAddr(w.stderr)
	if addr == "" {
		t.Fatalf("no http listening line:\n%s", w.log())
	}
	get := func(path string) (int, string) {
		t.Helper()
		resp, err := http.Get("http://" + addr + path)
		if err != nil {
			t.Fatalf("GET %s: %v", path, err)
		}
		return resp.StatusCode, string(readReply(t, resp, resp.StatusCode))
	}
	if code, body := get("/readyz"); code != http.StatusServiceUnavailable || !strings.Contains(body, "snapshots: ") {
		t.Errorf("/readyz while the store refuses the start-up probe: %d %q, want 503 naming the snapshots", code, body)
	}
	if _, body := get("/metrics"); !strings.Contains(body, "hyperplane_snapshot_errors_total") || strings.Contains(body, "hyperplane_snapshot_errors_total 0\n") {
		t.Errorf("hyperplane_snapshot_errors_total while the store refuses the start-up probe is not above 0:\n%s", body)
	}
	heal()
	w.wait(t, time.Minute, "/readyz ready once the store takes writes", func() bool {
		code, _ := get("/readyz")
		return code == http.StatusOK
	})
	w.stop(t)
}
