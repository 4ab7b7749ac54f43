package consumer_test

import (
	"context"
	"errors"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/hyperplane-ml/hyperplane/consumer"
	"github.com/hyperplane-ml/hyperplane/consumer/memory"
	"github.com/hyperplane-ml/hyperplane/internal/wait"
	"github.com/hyperplane-ml/hyperplane/learner"
	"github.com/hyperplane-ml/hyperplane/wire"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest"
	"go.uber.org/zap/zaptest/observer"
)

// These tests pin the worker's own promises on an in-memory source and
// sink that fail on command.

// snapshots records what a worker makes durable and fails on command.
type snapshots struct {
	mu        sync.Mutex
	fail      error
	positions []map[string]int64
	states    []*learner.State
	joins     [][]byte
}

func (c *snapshots) Snapshot(_ context.Context, st *learner.State, positions map[string]int64, join []byte) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.fail != nil {
		return c.fail
	}
	c.positions = append(c.positions, maps.Clone(positions))
	c.states = append(c.states, st)
	c.joins = append(c.joins, join)
	return nil
}

func (c *snapshots) setFail(err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.fail = err
}

// newest is the positions of the newest snapshot written, nil if none.
func (c *snapshots) newest() map[string]int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.positions) == 0 {
		return nil
	}
	return c.positions[len(c.positions)-1]
}

// memWorker is a worker over an in-memory log of msgs with one partition.
type memWorker struct {
	*consumer.Worker
	// logs holds what the worker logged at Info and above.
	logs *observer.ObservedLogs
	log  *memory.Log
	src  *memory.Source
	sink *memory.Sink
	done chan error
	stop context.CancelFunc
}

func startMemWorker(t *testing.T, cfg consumer.WorkerConfig, msgs [][]byte) *memWorker {
	t.Helper()
	m := &memWorker{log: memory.NewLog("in", 1), sink: memory.NewSink(), done: make(chan error, 1)}
	m.log.Append(0, msgs...)
	m.src = memory.NewSource(m.log, nil)
	cfg.Model = "m"
	cfg.Predictions = consumer.Destination{Sink: m.sink, Topic: "pred"}
	cfg.DeadLetter = consumer.Destination{Sink: m.sink, Topic: "dead"}
	if cfg.Batch == 0 {
		cfg.Batch = 16
	}
	core, logs := observer.New(zap.InfoLevel)
	m.logs = logs
	m.Worker = consumer.NewWorker(cfg, m.src, newModel(t), nil, nil, zap.New(zapcore.NewTee(zaptest.NewLogger(t).Core(), core)))
	ctx, cancel := context.WithCancel(context.Background())
	m.stop = cancel
	go func() { m.done <- m.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case <-m.done:
		case <-time.After(time.Minute):
			t.Error("worker did not stop")
		}
	})
	return m
}

func hasReason(reasons []string, reason string) bool {
	return slices.ContainsFunc(reasons, func(r string) bool { return strings.HasPrefix(r, reason+": ") })
}

// A successful publish must not mark the worker ready while its snapshots
// fail: readiness is the conjunction of its reasons.
func TestReadinessIsEveryReason(t *testing.T) {
	msgs, _ := messages(200)
	snaps := &snapshots{}
	snaps.setFail(errors.New("store unreachable"))
	cfg := consumer.WorkerConfig{Snapshots: snaps, SnapshotEvery: 10}
	m := startMemWorker(t, cfg, msgs)
	key := m.log.Key(0)

	// The snapshots are written on a goroutine of their own, after the
	// outputs they include are published: the first failure may come
	// after every output is.
	wait.For(t, time.Minute, 5*time.Millisecond, "outputs of every message, and a snapshot that failed", func() bool {
		return m.Published()[key] == int64(len(msgs)) && hasReason(m.NotReady(), consumer.NotReadySnapshots)
	})
	reasons := m.NotReady()
	if m.Ready() || !hasReason(reasons, consumer.NotReadySnapshots) || hasReason(reasons, consumer.NotReadyOutputs) {
		t.Fatalf("snapshots failing, outputs fine: ready %v, reasons %q", m.Ready(), reasons)
	}
	if !strings.Contains(strings.Join(reasons, "\n"), "store unreachable") {
		t.Fatalf("reasons %q do not say why the snapshots fail", reasons)
	}
	// Traffic goes on and every publish succeeds; the snapshots still
	// fail, so no publish may make the worker ready. The worker marks
	// its outputs fine before it counts them published: once they are,
	// a publish that made it ready would show.
	for i := range 100 {
		m.log.Append(0, msgs[i])
		wait.For(t, time.Minute, 5*time.Millisecond, "the outputs of one more message", func() bool { return m.Published()[key] == int64(len(msgs)+i+1) })
		if m.Ready() {
			t.Fatalf("ready after %d more messages published while every snapshot fails", i+1)
		}
	}
	if n := m.src.Commits(); n != 0 {
		t.Fatalf("%d commits while no snapshot was written", n)
	}

	// Now the outputs fail as well: both are named.
	m.sink.Fail(errors.New("broker down"))
	m.log.Append(0, msgs...)
	wait.For(t, time.Minute, 5*time.Millisecond, "both reasons", func() bool {
		r := m.NotReady()
		return hasReason(r, consumer.NotReadyOutputs) && hasReason(r, consumer.NotReadySnapshots)
	})
	const again = "outputs are published again; consumption resumed"
	said := m.logs.FilterMessage(again).Len()
	m.sink.Fail(nil)
	snaps.setFail(nil)
	total := 2*len(msgs) + 100
	wait.For(t, time.Minute, 5*time.Millisecond, "outputs of every message after the outage", func() bool { return m.Published()[key] == int64(total) })
	wait.For(t, time.Minute, 5*time.Millisecond, "ready after the outage", m.Ready)
	if n := len(m.sink.Outputs("pred")) + len(m.sink.Outputs("dead")); n != total {
		t.Fatalf("%d outputs for %d messages", n, total)
	}
	if m.logs.FilterMessage(again).Len() == said {
		t.Fatalf("the outputs published again after the outage, and the log does not say so (%q)", again)
	}
}

func TestNotReadyBeforeAndAfterRun(t *testing.T) {
	log := memory.NewLog("in", 1)
	w := consumer.NewWorker(consumer.WorkerConfig{}, memory.NewSource(log, nil), newModel(t), nil, nil, zaptest.NewLogger(t))
	if w.Ready() || !hasReason(w.NotReady(), consumer.NotReadySource) {
		t.Fatalf("before Run: ready %v, reasons %q", w.Ready(), w.NotReady())
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	wait.For(t, time.Minute, 5*time.Millisecond, "ready while running", w.Ready)
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if w.Ready() || !hasReason(w.NotReady(), consumer.NotReadySource) {
		t.Fatalf("after Run: ready %v, reasons %q", w.Ready(), w.NotReady())
	}
}

// Shutdown during an output outage returns within the limit and names
// what it could not flush, without committing any of it. On synctest's
// clock the limit is exact: a busy machine does not stretch it.
func TestShutdownIsBoundedDuringAnOutputOutage(t *testing.T) {
	synctest.Test(t, testShutdownIsBoundedDuringAnOutputOutage)
}

func testShutdownIsBoundedDuringAnOutputOutage(t *testing.T) {
	msgs, _ := messages(500)
	snaps := &snapshots{}
	const limit = 300 * time.Millisecond
	cfg := consumer.WorkerConfig{Snapshots: snaps, SnapshotEvery: 10, ShutdownTimeout: limit, Batch: 10}
	log := memory.NewLog("in", 1)
	sink := memory.NewSink()
	sink.Fail(errors.New("broker down"))
	src := memory.NewSource(log, nil)
	cfg.Predictions = consumer.Destination{Sink: sink, Topic: "pred"}
	w := consumer.NewWorker(cfg, src, newModel(t), nil, nil, zaptest.NewLogger(t))
	log.Append(0, msgs...)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	// Consuming has stopped on back-pressure: the queue is full.
	wait.For(t, time.Minute, 5*time.Millisecond, "back-pressure", func() bool {
		return sink.Attempts() >= 3 && hasReason(w.NotReady(), consumer.NotReadyOutputs)
	})
	signalled := time.Now()
	cancel()
	var err error
	select {
	case err = <-done:
	case <-time.After(time.Hour):
		t.Fatalf("Run did not return an hour after the signal with a shutdown limit of %s", limit)
	}
	took := time.Since(signalled)
	if took > limit {
		t.Errorf("Run returned %s after the signal, over the shutdown limit of %s", took, limit)
	}
	var shut *consumer.ShutdownError
	if !errors.As(err, &shut) {
		t.Fatalf("Run returned %v after %s, want a *ShutdownError", err, took)
	}
	processed := int(w.Positions()[log.Key(0)])
	if shut.Messages != processed || shut.Outputs == 0 || !shut.Snapshot {
		t.Fatalf("shutdown error %+v; the worker processed %d messages, none published", shut, processed)
	}
	for _, want := range []string{"not published", "snapshot was not written", "reads them again", "broker down"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
	if src.Commits() != 0 || len(snaps.positions) != 0 {
		t.Fatalf("%d commits and %d snapshots of outputs never published", src.Commits(), len(snaps.positions))
	}
	t.Logf("returned %s after the signal (limit %s): %v", took, limit, err)
}

// A snapshot is due when the interval has passed and the model holds
// examples the newest snapshot does not, on an idle stream too.
//
// The clock is synctest's: the worker learns the log in one batch at
// once, and after any number of intervals the test sees every goroutine
// done with what fell due.
func TestIdleStreamIsSnapshottedByInterval(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		msgs, _ := messages(300)
		snaps := &snapshots{}
		const interval = 100 * time.Millisecond
		cfg := consumer.WorkerConfig{Snapshots: snaps, SnapshotEvery: 1 << 30, SnapshotInterval: interval, Batch: 1024}
		m := startMemWorker(t, cfg, msgs)
		key := m.log.Key(0)
		count := func() int {
			snaps.mu.Lock()
			defer snaps.mu.Unlock()
			return len(snaps.positions)
		}
		synctest.Wait()
		if m.Positions()[key] != int64(len(msgs)) || count() != 0 {
			t.Fatalf("before the interval: position %d, %d snapshots; want every message learned and none", m.Positions()[key], count())
		}
		time.Sleep(interval)
		synctest.Wait()
		if got := snaps.newest()[key]; got != int64(len(msgs)) || count() != 1 {
			t.Fatalf("an interval later on an idle stream: %d snapshots, the newest at %d; want one of every message", count(), got)
		}
		// Nothing new: no more snapshots however long the stream stays idle.
		time.Sleep(100 * interval)
		synctest.Wait()
		if n := count(); n != 1 {
			t.Fatalf("%d snapshots of an unchanged model on an idle stream", n-1)
		}
	})
}

// The gauges of a restored model read its values before any new example.
func TestGaugesStartFromTheRestoredModel(t *testing.T) {
	model := newModel(t)
	msgs, _ := messages(400)
	d := wire.NewDecoder(model.Config(), wire.DecoderOptions{})
	var x learner.Example
	for _, m := range msgs {
		if _, err := d.Decode(m, &x); err == nil {
			model.Learn(&x)
		}
	}
	mt := model.Metrics()
	if mt.Updates == 0 || mt.RollingAccuracy == 0 {
		t.Fatalf("the model learned nothing: %+v", mt)
	}
	metrics := consumer.NewMetrics(nil)
	consumer.NewWorker(consumer.WorkerConfig{}, memory.NewSource(memory.NewLog("in", 1), nil), model, map[string]int64{"memory:in/0": 400}, metrics, zaptest.NewLogger(t))
	if got := testutil.ToFloat64(metrics.ModelVersion); got != float64(mt.Updates) {
		t.Errorf("hyperplane_model_version %v, the model has %d updates", got, mt.Updates)
	}
	if got := testutil.ToFloat64(metrics.RollingAccuracy); got != mt.RollingAccuracy {
		t.Errorf("hyperplane_rolling_accuracy %v, the model's is %v", got, mt.RollingAccuracy)
	}
	if got := testutil.ToFloat64(metrics.Position.WithLabelValues("memory:in/0")); got != 400 {
		t.Errorf("hyperplane_position %v, want 400", got)
	}
}
