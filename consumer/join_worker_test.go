package consumer_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"
	"gocloud.dev/blob/memblob"

	"github.com/hyperplane-ml/hyperplane/consumer"
	"github.com/hyperplane-ml/hyperplane/consumer/memory"
	"github.com/hyperplane-ml/hyperplane/internal/wait"
	"github.com/hyperplane-ml/hyperplane/learner"
	"github.com/hyperplane-ml/hyperplane/learner/synth"
	"github.com/hyperplane-ml/hyperplane/snapshot"
	"github.com/hyperplane-ml/hyperplane/wire"
)

const joinWindow = 2 * time.Second

// delayedLogs writes n generated examples without their labels to a log
// of examples, one every 10 ms of record time from a fixed day, and
// their labels to a log of labels in the order of their times: most
// within the window, some after it, some twice, some never, a few for ids
// no example has.
func delayedLogs(n int) (ex, labels *memory.Log) {
	ex, labels = memory.NewLog("examples", 1), memory.NewLog("labels", 1)
	appendDelayed(ex, labels, 0, n, 0)
	return ex, labels
}

// appendDelayed writes delayedLogs' examples and labels to partition p of
// ex and labels, drawn with seed (0 is delayedLogs' own).
func appendDelayed(ex, labels *memory.Log, p, n int, seed uint64) {
	o := synth.DefaultOptions()
	o.Vocab, o.Features = 500, 12
	if seed != 0 {
		o.Seed = seed
	}
	s := synth.New(o)
	rng := rand.New(rand.NewPCG(1+seed, 2))
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	type label struct {
		t    time.Time
		body []byte
	}
	var ls []label
	w := joinWindow.Milliseconds()
	for i := range n {
		rec := s.Next()
		y := rec.Label
		rec.Labeled = false
		t := base.Add(time.Duration(i) * 10 * time.Millisecond)
		b := synth.AppendJSON(nil, rec)
		ex.AppendAt(p, t, b[:len(b)-1])
		at := func(ms int64) time.Time { return t.Add(time.Duration(ms) * time.Millisecond) }
		body := func(id string, y int) []byte { return fmt.Appendf(nil, `{"id":%q,"label":%d}`, id, y) }
		id := strconv.FormatUint(rec.Seq, 10)
		switch r := rng.IntN(20); {
		case r < 14:
			ls = append(ls, label{at(rng.Int64N(w)), body(id, y)})
		case r < 16:
			ls = append(ls, label{at(w + 100 + rng.Int64N(w)), body(id, y)})
		case r < 17:
			ls = append(ls, label{at(rng.Int64N(w)), body(id, y)}, label{at(rng.Int64N(w)), body(id, -y)})
		case r < 18:
			ls = append(ls, label{at(rng.Int64N(w)), body("x"+id, y)})
		}
	}
	// In the order of their times, as a topic written as they come.
	for i := 1; i < len(ls); i++ {
		for k := i; k > 0 && ls[k].t.Before(ls[k-1].t); k-- {
			ls[k], ls[k-1] = ls[k-1], ls[k]
		}
	}
	for _, l := range ls {
		labels.AppendAt(p, l.t, l.body)
	}
}

// markSink appends the marks a worker writes to the labels' log, with
// the wall clock's time, as a broker would stamp them.
type markSink struct{ log *memory.Log }

func (s markSink) Publish(_ context.Context, batch []consumer.Output) error {
	for _, o := range batch {
		s.log.AppendAt(0, time.Now(), o.Value)
	}
	return nil
}

func (markSink) Close() error { return nil }

// joinedRun is one worker's run over the two logs, resumed from store.
type joinedRun struct {
	t      *testing.T
	ex     *memory.Log
	labels *memory.Log
	store  *snapshot.Store
	sink   *memory.Sink
	// cache is LabelsConfig.CacheBytes, maxPending JoinConfig.MaxPending;
	// tails counts the tail's readers opened.
	cache      int
	maxPending int
	tails      int
	// noMarks leaves marks out: windows close by the labels alone.
	noMarks bool
	// metrics are the runs' metrics, as of one process's (nil: each run
	// has its own).
	metrics *consumer.Metrics
}

// run resumes the model from the store and learns until the tail has
// learned every example, or until stopAt examples are learned; it stops
// the worker (which writes a last snapshot) and returns it.
func (r *joinedRun) run(stopAt int64) *consumer.Worker {
	t := r.t
	t.Helper()
	ctx := context.Background()
	log := zaptest.NewLogger(t)
	lcfg := learner.DefaultConfig()
	lcfg.HashBits = 14
	res, err := snapshot.Resume(ctx, r.store, "joined", lcfg, snapshot.ResumeOptions{Writer: "w", Keep: 100, Log: log})
	if err != nil {
		t.Fatal(err)
	}
	var st *consumer.JoinState
	head := map[string]int64{}
	if res.Snapshot != nil && res.Snapshot.Join != nil {
		if st, err = consumer.DecodeJoinState(res.Snapshot.Join); err != nil {
			t.Fatal(err)
		}
		head[r.ex.Key(0)] = st.Head
	} else if res.Positions != nil {
		head[r.ex.Key(0)] = res.Positions[r.ex.Key(0)]
	}
	cfg := consumer.WorkerConfig{
		Model:              "joined",
		Predictions:        consumer.Destination{Sink: r.sink, Topic: "pred"},
		Misclassifications: consumer.Destination{Sink: r.sink, Topic: "mis"},
		Snapshots:          res.Snapshotter,
		SnapshotEvery:      500,
		Batch:              64,
		Labels: &consumer.LabelsConfig{
			Join:   consumer.JoinConfig{Window: joinWindow, Default: -1, HasDefault: true, MaxPending: r.maxPending},
			Source: memory.NewSource(r.labels, res.Positions),
			OpenTail: func(_ context.Context, resume map[string]int64) (consumer.Source, error) {
				r.tails++
				return memory.NewSource(r.ex, resume), nil
			},
			CacheBytes: r.cache,
			Format:     wire.FormatJSON,
			Marks:      consumer.Destination{Sink: markSink{r.labels}, Topic: "marks"},
			Writer:     "w",
			LateLabels: consumer.Destination{Sink: r.sink, Topic: "late"},
			State:      st,
		},
	}
	if r.noMarks {
		cfg.Labels.Marks = consumer.Destination{}
	}
	metrics := r.metrics
	if metrics == nil {
		metrics = consumer.NewMetrics(nil)
	}
	w := consumer.NewWorker(cfg, memory.NewSource(r.ex, head), res.Model, res.Positions, metrics, log)
	wctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- w.Run(wctx) }()
	end := int64(r.ex.Len(0))
	if stopAt <= 0 || stopAt > end {
		stopAt = end
	}
	wait.For(t, time.Minute, 5*time.Millisecond, fmt.Sprintf("the tail to learn %d examples", stopAt), func() bool {
		return w.Positions()[r.ex.Key(0)] >= stopAt
	})
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run: %v", err)
	}
	return w
}

// dropNewest deletes the newest generation, as if the worker had been
// killed before it wrote it. A run stopped just after its first periodic
// snapshot has nothing new to write when it stops: with one generation
// dropped, the next run starts from nothing.
func (r *joinedRun) dropNewest() {
	ctx := context.Background()
	gens, err := r.store.Generations(ctx, "joined")
	if err != nil || len(gens) == 0 {
		r.t.Fatalf("generations %v: %v", gens, err)
	}
	if err := r.store.Delete(ctx, snapshot.Key(r.store.Prefix(), "joined", gens[len(gens)-1])); err != nil {
		r.t.Fatal(err)
	}
}

func newJoinedRun(t *testing.T, n int) *joinedRun {
	ex, labels := delayedLogs(n)
	return &joinedRun{t: t, ex: ex, labels: labels, store: snapshot.NewStore(memblob.OpenBucket(nil), ""), sink: memory.NewSink()}
}

// TestJoinedWorkerIsAFunctionOfTheLogs: a worker that learns the two logs
// without a stop, and one stopped three times and resumed from a
// generation before its last (a kill), whose tail reads the examples'
// log again for want of a cache, learn the same model and count the same
// outcomes.
func TestJoinedWorkerIsAFunctionOfTheLogs(t *testing.T) {
	const n = 3000
	whole := newJoinedRun(t, n)
	whole.metrics = consumer.NewMetrics(nil)
	w := whole.run(0)
	checkJoinMetrics(t, "an uninterrupted run", w, whole.metrics)
	want := w.Model().State().StateSHA256()
	wantCounts := w.JoinCounts()
	if wantCounts.Labels[consumer.LabelJoined] < n/2 || wantCounts.Labels[consumer.LabelLate] == 0 ||
		wantCounts.Labels[consumer.LabelDuplicate] == 0 || wantCounts.Labels[consumer.LabelUnknown] == 0 || wantCounts.Expired == 0 {
		t.Fatalf("the logs do not exercise every outcome: %+v", wantCounts)
	}
	if got := w.Model().Counts().Labeled; got != n {
		t.Errorf("learned %d examples with a label, want all %d (joined or defaulted)", got, n)
	}
	if len(whole.sink.Outputs("pred")) < n {
		t.Errorf("%d predictions published, want one for each of %d examples", len(whole.sink.Outputs("pred")), n)
	}
	if late := len(whole.sink.Outputs("late")); uint64(late) != wantCounts.Labels[consumer.LabelLate]+wantCounts.Labels[consumer.LabelUnknown] {
		t.Errorf("%d late labels published, want %d", late, wantCounts.Labels[consumer.LabelLate]+wantCounts.Labels[consumer.LabelUnknown])
	}

	if whole.tails != 0 {
		t.Errorf("an uninterrupted run with the default cache read the examples again %d times", whole.tails)
	}

	// A cache of a few examples: the tail reads the log again, and its
	// reader is opened anew whenever the cache served it in between.
	killed := newJoinedRun(t, n)
	killed.cache = 4096
	// The runs share a process's metrics: each resumes a join that the
	// counters have partly counted already.
	killed.metrics = consumer.NewMetrics(nil)
	for _, at := range []int64{n / 5, n / 2, 4 * n / 5} {
		killed.run(at)
		killed.dropNewest()
	}
	w = killed.run(0)
	if got := w.Model().State().StateSHA256(); got != want {
		t.Errorf("state_sha256 after three kills %s, uninterrupted %s", got, want)
	}
	if got := w.JoinCounts(); got.Labels != wantCounts.Labels || got.Expired != wantCounts.Expired {
		t.Errorf("outcomes after three kills %+v, uninterrupted %+v", got, wantCounts)
	}
	if killed.tails < 4 {
		t.Errorf("with a cache of 4 KiB the tail opened the examples again %d times", killed.tails)
	}
	checkJoinMetrics(t, "three kills in one process", w, killed.metrics)
}

// checkJoinMetrics checks that m, the metrics of the process that ran w
// (and perhaps workers of the same join before it), count each outcome of
// w's join once, and report its served accuracy.
func checkJoinMetrics(t *testing.T, what string, w *consumer.Worker, m *consumer.Metrics) {
	t.Helper()
	c := w.JoinCounts()
	for o, name := range []string{"joined", "late", "unknown", "duplicate"} {
		if got := testutil.ToFloat64(m.Join.Labels.WithLabelValues(name)); got != float64(c.Labels[o]) {
			t.Errorf("%s: hyperplane_labels_total{outcome=%q} %v, the join counted %d", what, name, got, c.Labels[o])
		}
	}
	if got := testutil.ToFloat64(m.Join.Expired); got != float64(c.Expired) {
		t.Errorf("%s: hyperplane_examples_expired_total %v, the join counted %d", what, got, c.Expired)
	}
	want := float64(c.ServedCorrect) / float64(c.Served)
	if got := testutil.ToFloat64(m.Join.ServedAccuracy); c.Served == 0 || got != want {
		t.Errorf("%s: hyperplane_served_accuracy %v, want %v (%d served)", what, got, want, c.Served)
	}
}

// runJoined runs a worker over ex and labels, resumed from store, until
// done says so, then stops it (a last snapshot is written).
func runJoined(t *testing.T, ex, labels *memory.Log, store *snapshot.Store, head map[string]int64, marks bool, done func(*consumer.Worker) bool) *consumer.Worker {
	t.Helper()
	return runJoinedLogged(t, ex, labels, store, head, marks, zaptest.NewLogger(t), nil, done)
}

// runJoinedLogged is runJoined with the worker's log and metrics (nil for
// none).
func runJoinedLogged(t *testing.T, ex, labels *memory.Log, store *snapshot.Store, head map[string]int64, marks bool, log *zap.Logger, metrics *consumer.Metrics, done func(*consumer.Worker) bool) *consumer.Worker {
	t.Helper()
	ctx := context.Background()
	lcfg := learner.DefaultConfig()
	lcfg.HashBits = 14
	res, err := snapshot.Resume(ctx, store, "joined", lcfg, snapshot.ResumeOptions{Writer: "w", Keep: 100, Log: log})
	if err != nil {
		t.Fatal(err)
	}
	var st *consumer.JoinState
	if res.Snapshot != nil && res.Snapshot.Join != nil {
		if st, err = consumer.DecodeJoinState(res.Snapshot.Join); err != nil {
			t.Fatal(err)
		}
		head = map[string]int64{st.Source: st.Head}
	}
	lc := &consumer.LabelsConfig{
		Join:   consumer.JoinConfig{Window: joinWindow, Default: -1, HasDefault: true},
		Source: memory.NewSource(labels, res.Positions),
		OpenTail: func(_ context.Context, resume map[string]int64) (consumer.Source, error) {
			return memory.NewSource(ex, resume), nil
		},
		CacheBytes: 4096,
		Format:     wire.FormatJSON, Writer: "w", State: st,
	}
	if marks {
		lc.Marks = consumer.Destination{Sink: markSink{labels}, Topic: "marks"}
	}
	cfg := consumer.WorkerConfig{Model: "joined", Snapshots: res.Snapshotter, SnapshotEvery: 50, Batch: 16, Labels: lc}
	w := consumer.NewWorker(cfg, memory.NewSource(ex, head), res.Model, res.Positions, metrics, log)
	wctx, cancel := context.WithCancel(ctx)
	errc := make(chan error, 1)
	go func() { errc <- w.Run(wctx) }()
	wait.For(t, time.Minute, 5*time.Millisecond, "the worker", func() bool {
		select {
		case err := <-errc:
			t.Fatalf("Run stopped: %v", err)
		default:
		}
		return done(w)
	})
	cancel()
	if err := <-errc; err != nil {
		t.Fatalf("Run: %v", err)
	}
	return w
}

// TestJoinedWorkerStartsAtItsHead: a new model whose head begins inside
// the examples' log (source.start at an offset, a replay from one) learns
// from there on, though its tail must read the log again (a cache of a
// few examples): never from the log's first offset.
func TestJoinedWorkerStartsAtItsHead(t *testing.T) {
	ex, labels := delayedLogs(1000)
	store := snapshot.NewStore(memblob.OpenBucket(nil), "")
	w := runJoined(t, ex, labels, store, map[string]int64{ex.Key(0): 500}, true, func(w *consumer.Worker) bool {
		return w.Positions()[ex.Key(0)] >= 1000
	})
	if got := w.Model().Counts().Examples; got != 500 {
		t.Errorf("learned %d examples from offset 500 of 1,000, want 500", got)
	}
}

// TestJoinedWorkerClosesWindowsWhenQuiet: a worker restarted with examples
// whose windows closed while it was down, and neither input bringing
// anything new, writes the mark that closes them and learns them: no batch
// of input is needed for it.
func TestJoinedWorkerClosesWindowsWhenQuiet(t *testing.T) {
	ex := memory.NewLog("examples", 1)
	labels := memory.NewLog("labels", 1)
	waitingExamples(ex, 100, time.Now().Add(-time.Hour))
	store := snapshot.NewStore(memblob.OpenBucket(nil), "")
	// Without marks nothing closes: every example waits.
	runJoined(t, ex, labels, store, nil, false, func(w *consumer.Worker) bool {
		head, _, pending, _ := w.JoinProgress()
		return head == 100 && pending == 100
	})
	w := runJoined(t, ex, labels, store, nil, true, func(w *consumer.Worker) bool {
		return w.Positions()[ex.Key(0)] >= 100
	})
	if got := w.Model().Counts(); got.Labeled != 100 || w.JoinCounts().Expired != 100 {
		t.Errorf("after the restart %d examples learned with a label (%d expired), want the 100 with the default", got.Labeled, w.JoinCounts().Expired)
	}
	if labels.Len(0) == 0 {
		t.Error("no mark was written")
	}
}

// TestJoinedWorkerBackPressure: past labels.max_pending waiting examples
// the worker reads no more examples and is not ready, saying why; a mark
// then closes their windows, and it reads the rest: none is dropped.
func TestJoinedWorkerBackPressure(t *testing.T) {
	ex := memory.NewLog("examples", 1)
	labels := memory.NewLog("labels", 1)
	waitingExamples(ex, 100, time.Now().Add(-time.Hour))
	w, stop := startMemoryJoin(t, ex, labels, 10, 4, nil)
	wait.For(t, time.Minute, 5*time.Millisecond, "the join to fill", func() bool {
		_, _, pending, _ := w.JoinProgress()
		return pending >= 10 && !w.Ready()
	})
	if head, _, pending, _ := w.JoinProgress(); pending > 10+4 || head > 10+4 {
		t.Errorf("the head read on to %d with %d pending, past labels.max_pending 10 and a batch", head, pending)
	}
	if why := strings.Join(w.NotReady(), "; "); !strings.Contains(why, consumer.NotReadyJoin+":") {
		t.Errorf("not ready because %q, want %s", why, consumer.NotReadyJoin)
	}
	labels.AppendAt(0, time.Now(), []byte(`{"mark":"test"}`))
	wait.For(t, time.Minute, 5*time.Millisecond, "every example learned", func() bool {
		_, tail, _, _ := w.JoinProgress()
		return tail >= 100
	})
	stop()
	if got := w.Model().Counts().Examples; got != 100 {
		t.Errorf("%d examples learned, want all 100", got)
	}
}

// TestJoinedWorkerLearnsWhatTheExamplesCarry: with every label in its
// example's window, and written to the labels' log only once the head has
// read past it, so that the tail learns from the cache several slabs
// behind the head, the worker learns the model that learns the same
// examples carrying their labels, in order: the slabs the cache copies
// features into are taken again many times over, never while an example
// cut from them is cached. Its misclassifications and unknown labels
// carry the ids they are of.
func TestJoinedWorkerLearnsWhatTheExamplesCarry(t *testing.T) {
	// An example every 10 ms: a window is 200 examples.
	const n, lag = 1500, 50
	o := synth.DefaultOptions()
	o.Vocab, o.Features = 5000, 600 // about 50 examples a slab
	s := synth.New(o)
	lcfg := learner.DefaultConfig()
	lcfg.HashBits = 14
	ref, err := learner.New(lcfg)
	if err != nil {
		t.Fatal(err)
	}
	dec := wire.NewDecoder(ref.Config(), wire.DecoderOptions{})
	var x learner.Example
	ex, labels := memory.NewLog("examples", 1), memory.NewLog("labels", 1)
	rng := rand.New(rand.NewPCG(4, 9))
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	w := joinWindow.Milliseconds()
	type label struct {
		t    time.Time
		id   string
		body []byte
	}
	var ls []label
	exIDs := make([]string, n)
	for i := range n {
		rec := s.Next()
		b := synth.AppendJSON(nil, rec)
		if _, err := dec.DecodeJSON(b[:len(b)-1], &x); err != nil {
			t.Fatal(err)
		}
		ref.Learn(&x)
		rec.Labeled = false
		at := base.Add(time.Duration(i) * 10 * time.Millisecond)
		b = synth.AppendJSON(b[:0], rec)
		ex.AppendAt(0, at, b[:len(b)-1])
		id := strconv.FormatUint(rec.Seq, 10)
		exIDs[i] = id
		in := func() time.Time { return at.Add(time.Duration(rng.Int64N(w)) * time.Millisecond) }
		ls = append(ls, label{in(), id, fmt.Appendf(nil, `{"id":%q,"label":%d}`, id, rec.Label)})
		if rng.IntN(10) == 0 {
			// A label for no example, of an id that shares its prefix.
			ls = append(ls, label{in(), id + "x", fmt.Appendf(nil, `{"id":"%sx","label":%d}`, id, rec.Label)})
		}
	}
	slices.SortStableFunc(ls, func(a, b label) int { return a.t.Compare(b.t) })

	r := &joinedRun{t: t, ex: ex, labels: labels, store: snapshot.NewStore(memblob.OpenBucket(nil), ""), sink: memory.NewSink(),
		cache: 600 * (160 + 12*o.Features), maxPending: 400, noMarks: true}
	// A label comes once the head has predicted lag examples past its
	// time: the tail learns an example up to a window and lag examples
	// behind the head, which the join holds at most maxPending ahead.
	stop := make(chan struct{})
	dripped := make(chan struct{})
	go func() {
		defer close(dripped)
		for _, l := range ls {
			for len(r.sink.Outputs("pred")) < min(int(l.t.Sub(base)/(10*time.Millisecond))+lag, n) {
				select {
				case <-stop:
					return
				case <-time.After(time.Millisecond):
				}

			}
			labels.AppendAt(0, l.t, l.body)
		}
	}()
	defer func() { close(stop); <-dripped }()
	got := r.run(0)
	c := got.JoinCounts()
	if c.Labels[consumer.LabelJoined] != n || c.Expired != 0 {
		t.Fatalf("outcomes %+v: want every example joined", c)
	}
	if g, want := got.Model().State().StateSHA256(), ref.State().StateSHA256(); g != want {
		t.Errorf("state_sha256 %s, want %s: the model learned from the cache's examples not what they carry", g, want)
	}

	type event struct {
		ID       string `json:"id"`
		Reason   string `json:"reason"`
		Position struct {
			Offset int64 `json:"offset"`
		} `json:"position"`
	}
	mis := r.sink.Outputs("mis")
	for _, o := range mis {
		var e event
		if err := json.Unmarshal(o.Value, &e); err != nil {
			t.Fatal(err)
		}
		if e.Position.Offset < 0 || e.Position.Offset >= n || e.ID != exIDs[e.Position.Offset] {
			t.Fatalf("misclassification of the example at %d with id %q, want %q", e.Position.Offset, e.ID, exIDs[e.Position.Offset])
		}
	}
	late := r.sink.Outputs("late")
	for _, o := range late {
		var e event
		if err := json.Unmarshal(o.Value, &e); err != nil {
			t.Fatal(err)
		}
		if e.Position.Offset < 0 || e.Position.Offset >= int64(len(ls)) || e.ID != ls[e.Position.Offset].id || e.Reason != "unknown" {
			t.Fatalf("late label at %d with id %q (%s), want %q (unknown)", e.Position.Offset, e.ID, e.Reason, ls[e.Position.Offset].id)
		}
	}
	if len(mis) == 0 || len(late) == 0 || uint64(len(late)) != c.Labels[consumer.LabelUnknown] {
		t.Errorf("%d misclassifications, %d late labels of %d unknown: want some of each, and every unknown one", len(mis), len(late), c.Labels[consumer.LabelUnknown])
	}
	if r.tails != 0 {
		t.Errorf("the tail read the examples again %d times: the cache did not hold them", r.tails)
	}
}

// TestJoinedWorkerCountsTheLabelsItHolds: labels for ids no example has,
// stamped within a window of the examples, are held while the examples
// stand still, whatever labels.max_pending says; hyperplane_join_held_labels
// counts them, and falls to 0 once examples a window later drop them as
// unknown.
func TestJoinedWorkerCountsTheLabelsItHolds(t *testing.T) {
	ex := memory.NewLog("examples", 1)
	labels := memory.NewLog("labels", 1)
	base := time.Now().Add(-time.Hour)
	waitingExamples(ex, 10, base)
	const unseen = 300
	for i := range unseen {
		labels.AppendAt(0, base.Add(joinWindow/2), fmt.Appendf(nil, `{"id":"nobody%d","label":1}`, i))
	}
	metrics := consumer.NewMetrics(nil)
	w, stop := startMemoryJoin(t, ex, labels, 100, 16, metrics)
	wait.For(t, time.Minute, 5*time.Millisecond, "every label read and held", func() bool {
		return testutil.ToFloat64(metrics.Join.Held) == unseen
	})
	// Examples a window later move the examples' watermark past them.
	ex.AppendAt(0, base.Add(2*joinWindow), []byte(`{"id":"later","features":{"a":1}}`))
	wait.For(t, time.Minute, 5*time.Millisecond, "the held labels dropped as unknown", func() bool {
		return testutil.ToFloat64(metrics.Join.Held) == 0 && w.JoinCounts().Labels[consumer.LabelUnknown] == unseen
	})
	stop()
}

// waitingExamples appends n delayed examples to ex, 1 ms apart from base.
func waitingExamples(ex *memory.Log, n int, base time.Time) {
	for i := range n {
		ex.AppendAt(0, base.Add(time.Duration(i)*time.Millisecond), fmt.Appendf(nil, `{"id":"e%d","features":{"a":%d}}`, i, i%7))
	}
}

// startMemoryJoin runs a new model's worker over ex, joining labels with
// labels.window joinWindow, no default and maxPending, reading batch
// messages at a time, with metrics (nil: its own). stop stops it and
// fails the test if it stopped with an error.
func startMemoryJoin(t *testing.T, ex, labels *memory.Log, maxPending, batch int, metrics *consumer.Metrics) (w *consumer.Worker, stop func()) {
	t.Helper()
	lcfg := learner.DefaultConfig()
	lcfg.HashBits = 10
	model, err := learner.New(lcfg)
	if err != nil {
		t.Fatal(err)
	}
	lc := &consumer.LabelsConfig{
		Join:   consumer.JoinConfig{Window: joinWindow, MaxPending: maxPending},
		Source: memory.NewSource(labels, nil),
		OpenTail: func(_ context.Context, resume map[string]int64) (consumer.Source, error) {
			return memory.NewSource(ex, resume), nil
		},
		Format: wire.FormatJSON, Writer: "w",
	}
	w = consumer.NewWorker(consumer.WorkerConfig{Model: "joined", Batch: batch, Labels: lc}, memory.NewSource(ex, nil), model, nil, metrics, zaptest.NewLogger(t))
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- w.Run(ctx) }()
	return w, func() {
		t.Helper()
		cancel()
		if err := <-errc; err != nil {
			t.Fatal(err)
		}
	}
}
