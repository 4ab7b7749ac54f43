package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hyperplane-ml/hyperplane/learner"
)

// TestDemoDefaultOnBusyMachine runs the demo a user runs, at its default
// size, while goroutines spin on every core. It once failed most runs on a
// loaded machine: the feeder let more publishes await their
// acknowledgements than nats.go allows, and nats.go gave up on the stalled
// one ("stalled with too many outstanding async published messages"). The
// feeder now publishes through the JetStream sink, whose window stays
// within nats.go's limit by construction, so one run shows the demo
// finishes; it takes 20 to 40 seconds on two busy cores, two to three
// minutes with -race.
func TestDemoDefaultOnBusyMachine(t *testing.T) {
	if testing.Short() {
		t.Skip("streams 200,000 examples on a busy machine")
	}
	defer spinCores()()
	began := time.Now()
	var out, errOut bytes.Buffer
	err := run(context.Background(), []string{"demo", "-data", t.TempDir()}, func(string) string { return "" }, strings.NewReader(""), &out, &errOut)
	t.Logf("the demo took %v", time.Since(began).Round(time.Millisecond))
	if err != nil {
		t.Fatalf("demo: %v\nstdout:\n%s\nstderr:\n%s", err, out.String(), errOut.String())
	}
	checkDemoSummary(t, out.String(), 200000, 100)
	if !strings.Contains(errOut.String(), "200000/200000 examples") {
		t.Errorf("the progress never reached the end:\n%s", errOut.String())
	}
}

// spinCores keeps every core busy until the function it returns is
// called.
func spinCores() (stop func()) {
	var stopped atomic.Bool
	var wg sync.WaitGroup
	for range runtime.NumCPU() {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for x := uint64(1); !stopped.Load(); x = x*6364136223846793005 + 1 {
			}
		}()
	}
	return func() {
		stopped.Store(true)
		wg.Wait()
	}
}

var (
	demoDone       = regexp.MustCompile(`(?m)^done: (\d+) examples in [^,]+, (\d+) labeled, (\d+) mistakes, `)
	demoStreamLine = regexp.MustCompile(`(?m)^  (\d+) +(examples|prediction events|misclassification events|dead-letter events) +in JetStream stream `)
	demoNewest     = regexp.MustCompile(`\(newest: generation (\d+), at position (\d+)\)`)
)

// checkDemoSummary checks that the demo's summary accounts for all n
// examples it streamed, malformed of them malformed, and that the README
// shows the same summary for the default demo.
func checkDemoSummary(t *testing.T, out string, n, malformed int) {
	t.Helper()
	done := demoDone.FindStringSubmatch(out)
	if done == nil {
		t.Fatalf("no summary:\n%s", out)
	}
	examples, labeled, mistakes := atoi(t, done[1]), atoi(t, done[2]), atoi(t, done[3])
	streams := map[string]int{}
	for _, m := range demoStreamLine.FindAllStringSubmatch(out, -1) {
		streams[m[2]] = atoi(t, m[1])
	}
	want := map[string]int{
		"examples":                 n,
		"prediction events":        n - malformed,
		"misclassification events": mistakes,
		"dead-letter events":       malformed,
	}
	for what, count := range want {
		if got, ok := streams[what]; !ok || got != count {
			t.Errorf("%s: %d (found %v), want %d\n%s", what, got, ok, count, out)
		}
	}
	if examples != n-malformed || labeled != examples {
		t.Errorf("%d examples learned, %d labeled; want %d, all labeled\n%s", examples, labeled, n-malformed, out)
	}
	newest := demoNewest.FindStringSubmatch(out)
	if newest == nil || atoi(t, newest[2]) != n {
		t.Fatalf("the newest snapshot is not at position %d:\n%s", n, out)
	}
	// A snapshot every 50,000 labeled examples, and one at the end.
	if want := (labeled + 49999) / 50000; labeled%50000 != 0 && atoi(t, newest[1]) != want {
		t.Errorf("newest snapshot: generation %s, want %d", newest[1], want)
	}

	// The README shows this very summary: the same counts, generation
	// and position.
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	if n != 200000 {
		return
	}
	for _, re := range []*regexp.Regexp{demoStreamLine, demoNewest} {
		for _, m := range re.FindAllString(string(readme), -1) {
			if !strings.Contains(out, m) {
				t.Errorf("the README shows %q; the demo printed\n%s", m, out)
			}
		}
	}
	if m := demoDone.FindStringSubmatch(string(readme)); m == nil || m[1] != done[1] || m[2] != done[2] || m[3] != done[3] {
		t.Errorf("the README's summary %q differs from the demo's %q", m, done)
	}
}

func atoi(t *testing.T, s string) int {
	t.Helper()
	n, err := strconv.Atoi(s)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// TestProgressEndsItsLine: what is printed after a live progress line, an
// error most of all, starts a line of its own.
func TestProgressEndsItsLine(t *testing.T) {
	const errLine = "hyperplane: feed: it broke\n"
	cases := []struct {
		name string
		draw func(p *progress)
		want string // before the error
	}{
		{"error while the line is live", func(p *progress) { p.show("42/100 examples"); p.end() }, "\r42/100 examples\x1b[K\n"},
		{"error while a bar is live", func(p *progress) { p.draw(4096, "mistakes 3"); p.end() }, "mistakes 3\x1b[K\n"},
		{"ended twice", func(p *progress) { p.show("42/100 examples"); p.end(); p.end() }, "\r42/100 examples\x1b[K\n"},
		{"error after the bar is done", func(p *progress) { p.show("42/100 examples"); p.done(); p.end() }, "\r42/100 examples\x1b[K\r\x1b[K"},
		{"error before anything is drawn", func(p *progress) { p.end() }, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var w bytes.Buffer
			p := &progress{w: &w, on: true, start: time.Now()}
			c.draw(p)
			w.WriteString(errLine)
			if got := w.String(); !strings.HasSuffix(got, c.want+errLine) || (c.want == "" && got != errLine) {
				t.Errorf("got %q, want the error line after %q", got, c.want)
			}
		})
	}

	// Off a terminal the bar draws nothing, and has nothing to end.
	var w bytes.Buffer
	p := newProgress(&w, 0, nil)
	p.show("42/100 examples")
	p.end()
	p.done()
	if w.Len() != 0 {
		t.Errorf("off a terminal the bar wrote %q", w.String())
	}
}

// batchedWorker is a worker's counters as a progress line reads them: the
// model's position and metrics, set together after each batch, and the
// position whose events are published, which lags behind. land, if set,
// lands a batch after the first read of the metrics.
type batchedWorker struct {
	pos, published int64
	m              learner.Metrics
	land           func(*batchedWorker)
}

func (w *batchedWorker) Positions() map[string]int64 { return map[string]int64{demoSource(): w.pos} }
func (w *batchedWorker) Published() map[string]int64 {
	return map[string]int64{demoSource(): w.published}
}
func (w *batchedWorker) Metrics() learner.Metrics {
	m := w.m
	if w.land != nil {
		w.land(w)
		w.land = nil
	}
	return m
}

// TestDemoProgressLineIsConsistent: a progress line shows the model's
// position with the mistakes of the model at that position, not the
// position of the events published so far (the first line once read
// "0/200000 examples  0/s  mistakes 746"), even when a batch lands
// between its reads.
func TestDemoProgressLineIsConsistent(t *testing.T) {
	lagging := &batchedWorker{pos: 7460, published: 0, m: learner.Metrics{Examples: 7460, Labeled: 7460, Mistakes: 746}}
	landing := &batchedWorker{pos: 500, published: 500, m: learner.Metrics{Examples: 500, Labeled: 500, Mistakes: 100},
		land: func(w *batchedWorker) {
			w.pos, w.m = 1000, learner.Metrics{Examples: 1000, Labeled: 1000, Mistakes: 150}
		}}
	for _, c := range []struct {
		name string
		w    *batchedWorker
		want string
	}{
		{"the events lag behind the model", lagging, "   7460/200000 examples  "},
		{"a batch lands between the reads", landing, "   1000/200000 examples  "},
	} {
		t.Run(c.name, func(t *testing.T) {
			line := demoProgressLine(c.w, 200000, time.Second)
			if !strings.HasPrefix(line, c.want) || !strings.Contains(line, fmt.Sprintf("mistakes %d ", c.w.m.Mistakes)) {
				t.Errorf("got %q, want %q and mistakes %d", line, c.want, c.w.m.Mistakes)
			}
		})
	}
}

// TestDemoWithClasses: -classes of three or more names makes the demo's
// stream multiclass, so that every example is a label of the model. The
// stream was binary whatever -classes said: label -1 named no class and
// half the examples went to the dead letters, the other half all class 1.
func TestDemoWithClasses(t *testing.T) {
	out, stderr, err := runCmd(t, "", "demo", "-examples", "3000", "-garbage", "0", "-classes", "red,green,blue", "-http", "", "-data", t.TempDir())
	if err != nil {
		t.Fatalf("demo: %v\n%s", err, stderr)
	}
	checkDemoSummary(t, out, 3000, 0)
}

// TestDemoPrintsHTTPAddress: the demo says where its HTTP server
// answers, and it answers there. Its default -http is any free port of
// 127.0.0.1, which the demo did not print: /metrics, the probes and
// POST /v1/predict could not be reached.
func TestDemoPrintsHTTPAddress(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var out, errOut lockedBuffer
	stopped := make(chan error, 1)
	go func() {
		stopped <- run(ctx, []string{"demo", "-examples", "1000000", "-rate", "2000", "-data", t.TempDir()},
			func(string) string { return "" }, strings.NewReader(""), &out, &errOut)
	}()
	address := regexp.MustCompile(`POST /v1/predict at (http://127\.0\.0\.1:[0-9]+)\n`)
	waitRunning(t, time.Minute, "the demo's first progress line", stopped, &errOut, func() bool {
		return strings.Contains(errOut.String(), "/1000000 examples")
	})
	m := address.FindStringSubmatch(out.String())
	if m == nil {
		t.Fatalf("the demo does not say where its HTTP server answers:\n%s", out.String())
	}
	resp, err := http.Get(m[1] + "/metrics")
	if err != nil {
		t.Fatalf("GET %s/metrics: %v", m[1], err)
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || resp.StatusCode != http.StatusOK || !strings.Contains(string(body), "hyperplane_examples_total") {
		t.Fatalf("GET %s/metrics: %d, %v:\n%.500s", m[1], resp.StatusCode, err, body)
	}
	cancel()
	if err := <-stopped; err != nil {
		t.Fatalf("the interrupted demo: %v\nstderr:\n%s", err, errOut.String())
	}
}

// TestDemoInterrupted: Ctrl-C stops the demo as it stops run, cleanly and
// saying so. It stopped with "feed: context canceled" and exit status 1.
func TestDemoInterrupted(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var out, errOut lockedBuffer
	stopped := make(chan error, 1)
	go func() {
		stopped <- run(ctx, []string{"demo", "-examples", "1000000", "-rate", "2000", "-http", "", "-data", t.TempDir()},
			func(string) string { return "" }, strings.NewReader(""), &out, &errOut)
	}()
	waitRunning(t, time.Minute, "the demo's first progress line", stopped, &errOut, func() bool {
		return strings.Contains(errOut.String(), "/1000000 examples")
	})
	cancel()
	if err := <-stopped; err != nil {
		t.Fatalf("the interrupted demo: %v\nstderr:\n%s", err, errOut.String())
	}
	if !strings.Contains(errOut.String(), "interrupted: ") {
		t.Errorf("the interrupted demo does not say so:\n%s", errOut.String())
	}
}
