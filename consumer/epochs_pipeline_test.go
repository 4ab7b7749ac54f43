package consumer_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"go.uber.org/zap/zaptest"
	"gocloud.dev/blob/memblob"

	"github.com/hyperplane-ml/hyperplane/consumer"
	"github.com/hyperplane-ml/hyperplane/consumer/memory"
	"github.com/hyperplane-ml/hyperplane/epochlog"
	"github.com/hyperplane-ml/hyperplane/internal/wait"
	"github.com/hyperplane-ml/hyperplane/snapshot"
)

// killed stands for a process killed with SIGKILL: from the moment trip
// says so, every write to its store and every publish of its outputs
// hangs until its context is done, and nothing more is recorded or
// published.
type killed struct {
	mu     sync.Mutex
	dead   bool
	counts map[string]int
	// outputsLive keeps the outputs publishing once the store hangs: a
	// store that stops answering, not a killed process.
	outputsLive bool
	logTrip     func(op string, epoch uint64, n int) bool
	sinkTrip    func(batch []consumer.Output) bool
	at          chan struct{}
}

func newKilled() *killed {
	return &killed{counts: map[string]int{}, at: make(chan struct{})}
}

// hang hangs once dead; trip, with the lock held, says whether this call
// kills.
func (k *killed) hang(ctx context.Context, trip func() bool) error {
	k.mu.Lock()
	if !k.dead && trip() {
		k.dead = true
		close(k.at)
	}
	dead := k.dead
	k.mu.Unlock()
	if !dead {
		return nil
	}
	<-ctx.Done()
	return ctx.Err()
}

func (k *killed) op(ctx context.Context, op string, epoch uint64) error {
	return k.hang(ctx, func() bool {
		k.counts[fmt.Sprint(op, epoch)]++
		return k.logTrip != nil && k.logTrip(op, epoch, k.counts[fmt.Sprint(op, epoch)])
	})
}

// killedLog is a store that dies with its process.
type killedLog struct {
	*epochlog.Log
	k *killed
}

func (l *killedLog) CreateBoundary(ctx context.Context, b *epochlog.Boundary) (*epochlog.Boundary, [32]byte, error) {
	if err := l.k.op(ctx, "CreateBoundary", b.Epoch); err != nil {
		return nil, [32]byte{}, err
	}
	return l.Log.CreateBoundary(ctx, b)
}

func (l *killedLog) WriteShard(ctx context.Context, r *epochlog.ShardResult, base *epochlog.Base) error {
	if err := l.k.op(ctx, "WriteShard", r.Epoch); err != nil {
		return err
	}
	return l.Log.WriteShard(ctx, r, base)
}

func (l *killedLog) Write(ctx context.Context, snap *snapshot.Snapshot) error {
	if err := l.k.op(ctx, "Write", snap.Epoch); err != nil {
		return err
	}
	return l.Log.Write(ctx, snap)
}

// killedSink is outputs that die with their process.
type killedSink struct {
	*memory.Sink
	k *killed
}

func (s *killedSink) Publish(ctx context.Context, batch []consumer.Output) error {
	if !s.k.outputsLive {
		if err := s.k.hang(ctx, func() bool { return s.k.sinkTrip != nil && s.k.sinkTrip(batch) }); err != nil {
			return err
		}
	}
	return s.Sink.Publish(ctx, batch)
}

// pipelineConfig is epochConfig publishing to sink, and writing to log
// when it is set.
func pipelineConfig(data *memory.Log, store *snapshot.Store, sink consumer.Sink, log consumer.EpochLog, writer string) consumer.EpochConfig {
	cfg := epochConfig(data, store, nil, writer)
	cfg.Worker.Predictions = consumer.Destination{Sink: sink, Topic: "pred"}
	cfg.Worker.Misclassifications = consumer.Destination{Sink: sink, Topic: "mis"}
	cfg.Worker.DeadLetter = consumer.Destination{Sink: sink, Topic: "dead"}
	cfg.Worker.ShutdownTimeout = 300 * time.Millisecond
	if log != nil {
		cfg.Log = log
	}
	return cfg
}

// startQuiet is startEpochs for a worker whose Run may fail: it is
// killed.
func startQuiet(t *testing.T, ctx context.Context, cfg consumer.EpochConfig, store *snapshot.Store, metrics *consumer.Metrics) (*consumer.Epochs, <-chan error) {
	t.Helper()
	snap, err := store.Latest(ctx, "mixed", nil)
	if errors.Is(err, snapshot.ErrNotFound) {
		snap, err = nil, nil
	}
	if err != nil {
		t.Fatal(err)
	}
	m, e, prev, pos, err := consumer.Continue(snap, epochLearner(), cfg.ConfigDigest)
	if err != nil {
		t.Fatal(err)
	}
	x := consumer.NewEpochs(cfg, m, e, prev, pos, metrics, zaptest.NewLogger(t))
	done := make(chan error, 1)
	go func() { done <- x.Run(ctx) }()
	return x, done
}

// offsetOf is the shard and offset of an event id of the memory log.
func offsetOf(t *testing.T, key []byte) (string, int64) {
	t.Helper()
	i := strings.LastIndexByte(string(key), '/')
	var off int64
	if _, err := fmt.Sscan(string(key[i+1:]), &off); err != nil {
		t.Fatalf("event id %q: %v", key, err)
	}
	return string(key[:i]), off
}

// publishedWithinBoundaries fails unless every prediction in sink lies
// in a range of a boundary in the store: no output of an epoch is
// published before its boundary is durable.
func publishedWithinBoundaries(t *testing.T, store *snapshot.Store, sink *memory.Sink) {
	t.Helper()
	ctx := context.Background()
	lg := epochlog.New(store)
	epochs, err := lg.Epochs(ctx, "mixed")
	if err != nil {
		t.Fatal(err)
	}
	ends := map[string]int64{}
	for _, e := range epochs {
		b, _, err := lg.Boundary(ctx, "mixed", e)
		if err != nil {
			continue
		}
		for _, r := range b.Shards {
			ends[r.Shard] = max(ends[r.Shard], r.To)
		}
	}
	for _, o := range sink.Outputs("pred") {
		shard, off := offsetOf(t, o.Key)
		if off >= ends[shard] {
			t.Fatalf("a prediction of %s at %d was published, but the newest boundary in the store ends the shard at %d", shard, off, ends[shard])
		}
	}
}

// everyEventOnce fails unless every position of data has an event in
// one of sinks, and every repeat has the content of the first.
func everyEventOnce(t *testing.T, data *memory.Log, shards int, sinks ...*memory.Sink) {
	t.Helper()
	seen := map[string][]byte{}
	for _, sink := range sinks {
		for _, topic := range []string{"pred", "dead"} {
			for _, o := range sink.Outputs(topic) {
				if prev, ok := seen[string(o.Key)]; ok && string(prev) != string(o.Value) {
					t.Fatalf("event %s repeated with other content:\n%s\n%s", o.Key, prev, o.Value)
				}
				seen[string(o.Key)] = o.Value
			}
		}
	}
	for p := range shards {
		for off := range data.Len(p) {
			if _, ok := seen[fmt.Sprintf("memory:ex/%d/%d", p, off)]; !ok {
				t.Fatalf("position %d of partition %d has no event", off, p)
			}
		}
	}
}

// TestEpochsPipelineKilled: a worker that owns every shard learns the
// next epoch while it records the last one (docs/scale-out.md, section
// 3.12). Killed between any two of the recorder's steps, it has published
// no output beyond the newest boundary in the store, and a restart ends
// with the model of a run without the kill, every example with an event,
// every repeat with the content of the first.
func TestEpochsPipelineKilled(t *testing.T) {
	const n = 900
	want := func() [32]byte {
		data := epochLog(n)
		store := snapshot.NewStore(memblob.OpenBucket(nil), "")
		return runEpochs(t, data, epochConfig(data, store, memory.NewSink(), "one"), store)
	}()
	for _, tc := range []struct {
		name string
		log  func(op string, epoch uint64, n int) bool
		sink func(batch []consumer.Output) bool
	}{
		// The outputs of an epoch being published, the next one learned
		// ahead with its outputs held.
		{name: "outputs unacknowledged", sink: func(batch []consumer.Output) bool {
			for _, o := range batch {
				if strings.HasPrefix(string(o.Key), "memory:ex/0/") {
					if _, off := offsetOf(t, o.Key); off >= 400 {
						return true
					}
				}
			}
			return false
		}},
		{name: "no result written", log: func(op string, e uint64, n int) bool { return op == "WriteShard" && e == 3 && n == 1 }},
		{name: "results partly written", log: func(op string, e uint64, n int) bool { return op == "WriteShard" && e == 3 && n == 3 }},
		{name: "next boundary not created", log: func(op string, e uint64, n int) bool { return op == "CreateBoundary" && e == 4 }},
		{name: "generation not written", log: func(op string, _ uint64, n int) bool { return op == "Write" && n == 1 }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			data := epochLog(n)
			store := snapshot.NewStore(memblob.OpenBucket(nil), "")
			k := newKilled()
			k.logTrip, k.sinkTrip = tc.log, tc.sink
			first := memory.NewSink()
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			cfg := pipelineConfig(data, store, &killedSink{Sink: first, k: k}, &killedLog{Log: epochlog.New(store), k: k}, "w")
			_, done := startQuiet(t, ctx, cfg, store, nil)
			select {
			case <-k.at:
			case err := <-done:
				t.Fatalf("Run returned %v before the kill", err)
			}
			publishedWithinBoundaries(t, store, first)
			cancel()
			<-done
			publishedWithinBoundaries(t, store, first)

			second := memory.NewSink()
			rctx, rcancel := context.WithCancel(context.Background())
			defer rcancel()
			x, rdone := startEpochs(t, rctx, pipelineConfig(data, store, second, nil, "w"), store)
			if got := finalDigest(t, x, rdone, rcancel, waitComplete(t, store, data)); got != want {
				t.Fatalf("after the kill the model is %x, without it %x", got, want)
			}
			everyEventOnce(t, data, 6, first, second)
		})
	}
}

// TestEpochsPipelineHoldsOutputs: while the store does not answer the
// creation of the next boundary, the epoch learned ahead of it publishes
// nothing, though its ranges have learned beyond the stored boundaries
// and the outputs are up. Stopped there and started again, the worker
// ends with the model of a run that was never held.
func TestEpochsPipelineHoldsOutputs(t *testing.T) {
	const n = 900
	want := func() [32]byte {
		data := epochLog(n)
		store := snapshot.NewStore(memblob.OpenBucket(nil), "")
		return runEpochs(t, data, epochConfig(data, store, memory.NewSink(), "one"), store)
	}()
	data := epochLog(n)
	store := snapshot.NewStore(memblob.OpenBucket(nil), "")
	k := newKilled()
	k.outputsLive = true
	k.logTrip = func(op string, e uint64, _ int) bool { return op == "CreateBoundary" && e == 4 }
	first := memory.NewSink()
	metrics := consumer.NewMetrics(prometheus.NewRegistry())
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cfg := pipelineConfig(data, store, &killedSink{Sink: first, k: k}, &killedLog{Log: epochlog.New(store), k: k}, "w")
	_, done := startQuiet(t, ctx, cfg, store, metrics)
	select {
	case <-k.at:
	case err := <-done:
		t.Fatalf("Run returned %v before the store hung", err)
	}
	b3, _, err := epochlog.New(store).Boundary(context.Background(), "mixed", 3)
	if err != nil {
		t.Fatal(err)
	}
	// Epoch 4 is learned ahead: some range is beyond epoch 3's end.
	wait.For(t, time.Minute, 5*time.Millisecond, "a range of epoch 4 learning", func() bool {
		for _, r := range b3.Shards {
			if testutil.ToFloat64(metrics.ShardPosition.WithLabelValues(r.Shard)) > float64(r.To) {
				return true
			}
		}
		return false
	})
	publishedWithinBoundaries(t, store, first)
	cancel()
	<-done
	publishedWithinBoundaries(t, store, first)

	second := memory.NewSink()
	rctx, rcancel := context.WithCancel(context.Background())
	defer rcancel()
	x, rdone := startEpochs(t, rctx, pipelineConfig(data, store, second, nil, "w"), store)
	if got := finalDigest(t, x, rdone, rcancel, waitComplete(t, store, data)); got != want {
		t.Fatalf("after the hang the model is %x, without it %x", got, want)
	}
	everyEventOnce(t, data, 6, first, second)
}

// otherCutLog is a store in which another writer creates the boundary
// of epoch at just before this worker does, with every range half as
// long.
type otherCutLog struct {
	*epochlog.Log
	at    uint64
	mu    sync.Mutex
	other *epochlog.Boundary
}

func (l *otherCutLog) CreateBoundary(ctx context.Context, b *epochlog.Boundary) (*epochlog.Boundary, [32]byte, error) {
	l.mu.Lock()
	if b.Epoch == l.at && l.other == nil {
		o := *b
		o.Shards = append([]epochlog.Range(nil), b.Shards...)
		for i, r := range o.Shards {
			o.Shards[i].To = r.From + (r.To-r.From)/2
		}
		o.Cut.Writer = "other"
		l.other = &o
		l.mu.Unlock()
		if _, _, err := l.Log.CreateBoundary(ctx, &o); err != nil {
			return nil, [32]byte{}, err
		}
	} else {
		l.mu.Unlock()
	}
	return l.Log.CreateBoundary(ctx, b)
}

// TestEpochsPipelineAnotherCut: another writer creates the boundary of
// the epoch this worker is learning ahead, with other ranges. The epoch
// learned ahead is abandoned and its held outputs dropped: the worker
// learns the stored boundary, every example once, and no event it
// published differs from another with its id.
func TestEpochsPipelineAnotherCut(t *testing.T) {
	const n = 900
	data := epochLog(n)
	store := snapshot.NewStore(memblob.OpenBucket(nil), "")
	sink := memory.NewSink()
	lg := &otherCutLog{Log: epochlog.New(store), at: 3}
	ctx, cancel := context.WithCancel(context.Background())
	x, done := startEpochs(t, ctx, pipelineConfig(data, store, sink, lg, "w"), store)
	last := waitComplete(t, store, data)
	wait.For(t, time.Minute, 5*time.Millisecond, fmt.Sprintf("epoch %d mixed", last), func() bool { return x.Mixed() >= last })
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run: %v", err)
	}
	lg.mu.Lock()
	other := lg.other
	lg.mu.Unlock()
	if other == nil {
		t.Fatal("no boundary was cut by another writer")
	}
	b, _, err := lg.Boundary(context.Background(), "mixed", other.Epoch)
	if err != nil {
		t.Fatal(err)
	}
	if b.Cut.Writer != "other" {
		t.Fatalf("epoch %d's boundary was cut by %s, want the other writer", b.Epoch, b.Cut.Writer)
	}
	// Every message that is not a dead letter is learned once.
	total := uint64(0)
	for p := range 6 {
		_, garbage := messages(n + 7*p)
		total += uint64(data.Len(p) - garbage)
	}
	if got := x.Model().Counts().Examples; got != total {
		t.Fatalf("the model learned %d examples, the log holds %d", got, total)
	}
	everyEventOnce(t, data, 6, sink)
	publishedWithinBoundaries(t, store, sink)
}

// hookedLog runs hook before creating the boundary of epoch at.
type hookedLog struct {
	*epochlog.Log
	at   uint64
	once sync.Once
	hook func()
}

func (l *hookedLog) CreateBoundary(ctx context.Context, b *epochlog.Boundary) (*epochlog.Boundary, [32]byte, error) {
	if b.Epoch == l.at {
		l.once.Do(l.hook)
	}
	return l.Log.CreateBoundary(ctx, b)
}

// TestEpochsPipelineRebalance: worker a owns every shard and learns
// epoch 4 ahead while it records epoch 3, when a rebalance gives shard 1
// to worker b. a abandons the epoch learned ahead and goes on by the
// synchronous steps; both end with the model one worker learns alone,
// every example with an event, every repeat with the content of the
// first.
func TestEpochsPipelineRebalance(t *testing.T) {
	const n = 900
	want := func() [32]byte {
		data := epochLog(n)
		store := snapshot.NewStore(memblob.OpenBucket(nil), "")
		return runEpochs(t, data, epochConfig(data, store, memory.NewSink(), "one"), store)
	}()
	data := epochLog(n)
	store := snapshot.NewStore(memblob.OpenBucket(nil), "")
	own := newOwnership()
	all := map[string]string{}
	for p := range 6 {
		all[data.Key(p)] = "a"
	}
	own.set(all)
	moved := make(chan struct{})
	lg := &hookedLog{Log: epochlog.New(store), at: 4, hook: func() {
		next := map[string]string{}
		for shard, w := range all {
			next[shard] = w
		}
		next[data.Key(1)] = "b"
		own.set(next)
		close(moved)
	}}
	sinkA, sinkB := memory.NewSink(), memory.NewSink()
	cfgA := pipelineConfig(data, store, sinkA, lg, "a")
	cfgA.Owned, cfgA.Changed = own.owned("a"), own.changes
	cfgB := pipelineConfig(data, store, sinkB, nil, "b")
	cfgB.Owned, cfgB.Changed = own.owned("b"), own.changes
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	a, doneA := startEpochs(t, ctx, cfgA, store)
	b, doneB := startEpochs(t, ctx, cfgB, store)
	last := waitComplete(t, store, data)
	select {
	case <-moved:
	default:
		t.Fatal("the shard never moved")
	}
	for _, w := range []*consumer.Epochs{a, b} {
		wait.For(t, time.Minute, 5*time.Millisecond, "the last epoch mixed", func() bool { return w.Mixed() >= last })
	}
	cancel()
	for _, done := range []<-chan error{doneA, doneB} {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
	for i, w := range []*consumer.Epochs{a, b} {
		if got := w.Model().State().Digest(); got != want {
			t.Errorf("worker %d holds %x, one worker alone %x", i, got, want)
		}
	}
	everyEventOnce(t, data, 6, sinkA, sinkB)
	publishedWithinBoundaries(t, store, sinkA)
	if countOf(sinkB, "pred", data.Key(1)) == 0 {
		t.Error("b published nothing of the shard it was given")
	}
}

// TestEpochsPipelineStopped: a worker stopped while it records an epoch
// and learns the next one ahead returns nil, having written the newest
// model it recorded as a generation, and published nothing beyond the
// stored boundaries; a restart ends with the model of a run that was
// never stopped.
func TestEpochsPipelineStopped(t *testing.T) {
	const n = 900
	want := func() [32]byte {
		data := epochLog(n)
		store := snapshot.NewStore(memblob.OpenBucket(nil), "")
		return runEpochs(t, data, epochConfig(data, store, memory.NewSink(), "one"), store)
	}()
	data := epochLog(n)
	store := snapshot.NewStore(memblob.OpenBucket(nil), "")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	lg := &hookedLog{Log: epochlog.New(store), at: 4, hook: cancel}
	first := memory.NewSink()
	cfg := pipelineConfig(data, store, first, lg, "w")
	cfg.SnapshotEvery = 1 << 30
	x, done := startEpochs(t, ctx, cfg, store)
	if err := <-done; err != nil {
		t.Fatalf("Run: %v", err)
	}
	if g := newestGeneration(t, store); g != x.Mixed() || g < 3 {
		t.Fatalf("the newest generation is %d, the worker mixed epoch %d", g, x.Mixed())
	}
	publishedWithinBoundaries(t, store, first)

	second := memory.NewSink()
	rctx, rcancel := context.WithCancel(context.Background())
	defer rcancel()
	y, rdone := startEpochs(t, rctx, pipelineConfig(data, store, second, nil, "w"), store)
	if got := finalDigest(t, y, rdone, rcancel, waitComplete(t, store, data)); got != want {
		t.Fatalf("after the stop the model is %x, without it %x", got, want)
	}
	everyEventOnce(t, data, 6, first, second)
}
