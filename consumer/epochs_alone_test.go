package consumer_test

import (
	"context"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"go.uber.org/zap/zaptest"
	"gocloud.dev/blob/memblob"

	"github.com/hyperplane-ml/hyperplane/consumer"
	"github.com/hyperplane-ml/hyperplane/consumer/memory"
	"github.com/hyperplane-ml/hyperplane/epochlog"
	"github.com/hyperplane-ml/hyperplane/internal/wait"
	"github.com/hyperplane-ml/hyperplane/shardid"
	"github.com/hyperplane-ml/hyperplane/snapshot"
)

// heldOutputs holds the first batch of outputs published once the
// boundary of epoch at is in the log (or at once, armed by the test),
// whose first key begins with prefix ("" for any), until release is
// closed (nil: never), or fails it when its context is done first. Epoch at-1 is mixed then, which waits for
// every output of it: the batch held is one of epoch at. It counts the
// results of epoch at written.
type heldOutputs struct {
	consumer.EpochLog
	consumer.Sink
	at      uint64
	prefix  string
	armed   atomic.Bool
	held    chan struct{} // closed when the held batch is published
	release chan struct{}
	once    sync.Once
	written atomic.Int64
}

func (l *heldOutputs) CreateBoundary(ctx context.Context, b *epochlog.Boundary) (*epochlog.Boundary, [32]byte, error) {
	got, sha, err := l.EpochLog.CreateBoundary(ctx, b)
	if err == nil && got.Epoch >= l.at {
		l.armed.Store(true)
	}
	return got, sha, err
}

func (l *heldOutputs) WriteShard(ctx context.Context, r *epochlog.ShardResult, base *epochlog.Base) error {
	if r.Epoch == l.at {
		l.written.Add(1)
	}
	return l.EpochLog.WriteShard(ctx, r, base)
}

func (l *heldOutputs) Publish(ctx context.Context, batch []consumer.Output) error {
	hold := false
	if l.armed.Load() && len(batch) > 0 && strings.HasPrefix(string(batch[0].Key), l.prefix) {
		l.once.Do(func() { hold = true })
	}
	if hold {
		close(l.held)
		select {
		case <-l.release:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return l.Sink.Publish(ctx, batch)
}

// writeCountingLog counts the shard results written to the log, and
// apart those of epoch at (0: none).
type writeCountingLog struct {
	consumer.EpochLog
	writes, atWrites atomic.Int64
	at               uint64
}

func (l *writeCountingLog) WriteShard(ctx context.Context, r *epochlog.ShardResult, base *epochlog.Base) error {
	l.writes.Add(1)
	if r.Epoch == l.at {
		l.atWrites.Add(1)
	}
	return l.EpochLog.WriteShard(ctx, r, base)
}

// TestEpochsAloneWriteNoResults: a worker alone writes no shard result
// and ends at the model of one that writes them all. A worker that
// starts beside it, over its log (which holds no generation) and owning
// half the shards, finds the results of the epochs it mixed missing below
// boundaries that are cut, learns those ranges itself (docs/scale-out.md,
// E5) and holds the same models: it checks each against the next
// boundary's base digest. Once the first is no longer alone, both go on
// to the same model over more examples.
func TestEpochsAloneWriteNoResults(t *testing.T) {
	data := epochLog(600)
	want := oneWorkerDigest(t, data)

	store := snapshot.NewStore(memblob.OpenBucket(nil), "")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var alone atomic.Bool
	alone.Store(true)
	first := &writeCountingLog{EpochLog: unwrittenLog{epochlog.New(store)}}
	cfg := epochConfig(data, store, memory.NewSink(), "first")
	cfg.Log = first
	cfg.Alone = alone.Load
	x, done := startEpochs(t, ctx, cfg, store)
	last := waitComplete(t, store, data)
	wait.For(t, time.Minute, 5*time.Millisecond, "the last epoch mixed", func() bool { return x.Mixed() >= last })
	if n := first.writes.Load(); n != 0 {
		t.Fatalf("the worker alone wrote %d shard results", n)
	}
	if got := x.Model().State().Digest(); got != want {
		t.Fatalf("the worker alone holds %x, one that writes its results %x", got, want)
	}

	alone.Store(false)
	second := &writeCountingLog{EpochLog: unwrittenLog{epochlog.New(store)}}
	bcfg := epochConfig(data, store, memory.NewSink(), "second")
	bcfg.Log = second
	bcfg.Owned = func() []shardid.ID { return shardIDs([]string{"memory:ex/1", "memory:ex/3", "memory:ex/5"}) }
	y, ydone := startEpochs(t, ctx, bcfg, store)
	wait.For(t, time.Minute, 5*time.Millisecond, "the epochs before the last mixed by the second", func() bool { return y.Mixed() >= last-1 })
	if second.writes.Load() == 0 {
		t.Fatal("the second worker wrote no result of the ranges it learned")
	}

	for p := range 6 {
		msgs, _ := messages(200)
		data.Append(p, msgs...)
	}
	more := waitComplete(t, store, data)
	if more <= last {
		t.Fatalf("more examples made no epoch after %d", last)
	}
	for _, w := range []*consumer.Epochs{x, y} {
		wait.For(t, time.Minute, 5*time.Millisecond, "the last epoch mixed", func() bool { return w.Mixed() >= more })
	}
	cancel()
	for _, d := range []<-chan error{done, ydone} {
		if err := <-d; err != nil {
			t.Fatal(err)
		}
	}
	if a, b := x.Model().State().Digest(), y.Model().State().Digest(); a != b {
		t.Fatalf("the first worker holds %x, the second %x", a, b)
	}
	if n := first.writes.Load(); n == 0 {
		t.Fatal("the first worker, no longer alone, wrote no result")
	}
}

// TestEpochsWriteWhatTheyHeldOnceNotAlone: a worker that held results
// of an epoch while alone, and loses a shard to a second worker before
// its barrier, writes them: the second worker's barrier needs them (or
// would learn their ranges again), and the epochs go on to the model of
// one worker.
func TestEpochsWriteWhatTheyHeldOnceNotAlone(t *testing.T) {
	data := epochLog(600)
	want := oneWorkerDigest(t, data)

	store := snapshot.NewStore(memblob.OpenBucket(nil), "")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var alone atomic.Bool
	alone.Store(true)
	all := []string{"memory:ex/0", "memory:ex/1", "memory:ex/2", "memory:ex/3", "memory:ex/4", "memory:ex/5"}
	var owned atomic.Pointer[[]string]
	owned.Store(&all)
	changed := make(chan struct{})
	cfg := epochConfig(data, store, memory.NewSink(), "first")
	held := &heldOutputs{EpochLog: cfg.Log, Sink: cfg.Worker.Predictions.Sink, at: 3, prefix: "memory:ex/5/", held: make(chan struct{})}
	cfg.Log = held
	cfg.Worker.Predictions.Sink, cfg.Worker.Misclassifications.Sink, cfg.Worker.DeadLetter.Sink = held, held, held
	cfg.Alone = alone.Load
	cfg.Owned = func() []shardid.ID { return shardIDs(*owned.Load()) }
	cfg.Changed = func() <-chan struct{} { return changed }
	cfg.SnapshotEvery = 1 << 40
	cfg.Worker.ShutdownTimeout = 2 * time.Second
	x, done := runUntilHeld(t, ctx, cfg, held.held, "an output of shard 5 in epoch 3 was published")
	// The other ranges of epoch 3 learned, and held.
	wait.For(t, time.Minute, time.Millisecond, "epoch 3's other ranges learned", func() bool { return x.HeldResults(3) == 5 })

	// A second worker takes shard 5.
	rest := all[:5]
	alone.Store(false)
	owned.Store(&rest)
	close(changed)
	cfg2 := epochConfig(data, store, memory.NewSink(), "second")
	cfg2.SnapshotEvery = 1 << 40
	cfg2.Owned = func() []shardid.ID { return shardIDs([]string{"memory:ex/5"}) }
	y, ydone := startEpochs(t, ctx, cfg2, store)
	last := waitComplete(t, store, data)
	for _, w := range []*consumer.Epochs{x, y} {
		wait.For(t, time.Minute, 5*time.Millisecond, "the last epoch mixed", func() bool { return w.Mixed() >= last })
	}
	cancel()
	for _, d := range []<-chan error{done, ydone} {
		if err := <-d; err != nil {
			t.Fatal(err)
		}
	}
	for i, w := range []*consumer.Epochs{x, y} {
		if got := w.Model().State().Digest(); got != want {
			t.Fatalf("worker %d holds %x, one worker %x", i, got, want)
		}
	}
	if n := held.written.Load(); n != 5 {
		t.Fatalf("the first worker wrote %d results of epoch 3, want the 5 it held", n)
	}
}

// TestEpochsAloneOnceAssigned: a worker whose assignment comes after its
// first epoch began learns the ranges at its barrier once it owns them
// and, alone, holds their results there too: it mixes them without
// writing one, and ends at the model of one that writes them.
func TestEpochsAloneOnceAssigned(t *testing.T) {
	data := epochLog(600)
	want := oneWorkerDigest(t, data)

	store := snapshot.NewStore(memblob.OpenBucket(nil), "")
	var assigned atomic.Bool
	changed := make(chan struct{})
	log := &writeCountingLog{EpochLog: epochlog.New(store)}
	cfg := epochConfig(data, store, memory.NewSink(), "late")
	cfg.Log = log
	cfg.Alone = assigned.Load
	cfg.Settled = assigned.Load
	cfg.Owned = func() []shardid.ID {
		if !assigned.Load() {
			return []shardid.ID{}
		}
		return shardIDs([]string{"memory:ex/0", "memory:ex/1", "memory:ex/2", "memory:ex/3", "memory:ex/4", "memory:ex/5"})
	}
	cfg.Changed = func() <-chan struct{} { return changed }
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	x, done := startEpochs(t, ctx, cfg, store)
	wait.For(t, time.Minute, 5*time.Millisecond, "the first boundary", func() bool {
		e, err := epochlog.New(store).Epochs(ctx, "mixed")
		return err == nil && len(e) > 0
	})
	assigned.Store(true)
	close(changed)
	if got := finalDigest(t, x, done, cancel, waitComplete(t, store, data)); got != want {
		t.Fatalf("the worker assigned late holds %x, one worker %x", got, want)
	}
	if n := log.writes.Load(); n != 0 {
		t.Fatalf("the worker alone wrote %d shard results", n)
	}
}

// TestEpochsAloneWriteAGenerationOnceNotAlone: a worker alone that mixed
// epochs from results it held, above its newest generation, writes a
// generation as soon as it is alone no longer, though none is due by the
// count or the clock (snapshot.interval 0) and the stream is idle. A
// worker that joins then starts from it: it neither learns those ranges
// again nor waits at their barrier for a boundary that will not come.
func TestEpochsAloneWriteAGenerationOnceNotAlone(t *testing.T) {
	data := epochLog(600)
	want := oneWorkerDigest(t, data)

	store := snapshot.NewStore(memblob.OpenBucket(nil), "")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var alone atomic.Bool
	alone.Store(true)
	cfg := epochConfig(data, store, memory.NewSink(), "first")
	cfg.Alone = alone.Load
	cfg.SnapshotEvery, cfg.SnapshotInterval = 1<<40, 0
	x, done := startEpochs(t, ctx, cfg, store)
	last := waitComplete(t, store, data)
	wait.For(t, time.Minute, 5*time.Millisecond, "the last epoch mixed", func() bool { return x.Mixed() >= last })
	if g := latestGeneration(store); g >= last {
		t.Fatalf("generation %d was written with none due: the test wants the epochs above the newest generation held", g)
	}

	alone.Store(false)
	wait.For(t, time.Minute, 5*time.Millisecond, "a generation of the last epoch", func() bool { return latestGeneration(store) >= last })

	second := &writeCountingLog{EpochLog: epochlog.New(store)}
	bcfg := epochConfig(data, store, memory.NewSink(), "second")
	bcfg.Log = second
	bcfg.Owned = func() []shardid.ID { return shardIDs([]string{"memory:ex/1", "memory:ex/3", "memory:ex/5"}) }
	y, ydone := startEpochs(t, ctx, bcfg, store)
	if y.Mixed() < last {
		t.Fatalf("the second worker starts at epoch %d, below the last, %d", y.Mixed(), last)
	}
	cancel()
	for _, d := range []<-chan error{done, ydone} {
		if err := <-d; err != nil {
			t.Fatal(err)
		}
	}
	if n := second.writes.Load(); n != 0 {
		t.Fatalf("the second worker wrote %d results: it learned ranges again", n)
	}
	for i, w := range []*consumer.Epochs{x, y} {
		if got := w.Model().State().Digest(); got != want {
			t.Fatalf("worker %d holds %x, one worker %x", i, got, want)
		}
	}
}

// TestEpochsAloneWriteAGenerationAtTheBarrierOnceNotAlone: a worker
// alone that mixed epochs from results it held, and loses a shard in the
// middle of the next epoch, writes a generation of its newest mixed model
// while its barrier waits for the other worker's result, though none is
// due by the count or the clock: the other worker needs that result to
// come from the newest generation, and would otherwise learn every range
// above it again first. The worker that joins starts from it and both end
// at the model of one worker.
func TestEpochsAloneWriteAGenerationAtTheBarrierOnceNotAlone(t *testing.T) {
	data := epochLog(600)
	want := oneWorkerDigest(t, data)

	store := snapshot.NewStore(memblob.OpenBucket(nil), "")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var alone atomic.Bool
	alone.Store(true)
	all := []string{"memory:ex/0", "memory:ex/1", "memory:ex/2", "memory:ex/3", "memory:ex/4", "memory:ex/5"}
	var owned atomic.Pointer[[]string]
	owned.Store(&all)
	changed := make(chan struct{})
	cfg := epochConfig(data, store, memory.NewSink(), "first")
	held := &heldOutputs{EpochLog: cfg.Log, Sink: cfg.Worker.Predictions.Sink, at: 3, prefix: "memory:ex/5/", held: make(chan struct{})}
	cfg.Log = held
	cfg.Worker.Predictions.Sink, cfg.Worker.Misclassifications.Sink, cfg.Worker.DeadLetter.Sink = held, held, held
	cfg.Alone = alone.Load
	cfg.Owned = func() []shardid.ID { return shardIDs(*owned.Load()) }
	cfg.Changed = func() <-chan struct{} { return changed }
	cfg.SnapshotEvery, cfg.SnapshotInterval = 1<<40, 0
	cfg.Worker.ShutdownTimeout = 2 * time.Second
	x, done := runUntilHeld(t, ctx, cfg, held.held, "an output of shard 5 in epoch 3 was published")
	mixed := x.Mixed()
	if mixed < 2 || latestGeneration(store) >= mixed {
		t.Fatalf("epoch %d mixed, generation %d: the test wants epochs mixed from held results above the newest generation", mixed, latestGeneration(store))
	}

	// Another worker takes shard 5: the first waits for its result.
	rest := all[:5]
	alone.Store(false)
	owned.Store(&rest)
	close(changed)
	wait.For(t, time.Minute, 5*time.Millisecond, "a generation of the newest mixed epoch", func() bool { return latestGeneration(store) >= mixed })

	cfg2 := epochConfig(data, store, memory.NewSink(), "second")
	cfg2.SnapshotEvery = 1 << 40
	cfg2.Owned = func() []shardid.ID { return shardIDs([]string{"memory:ex/5"}) }
	y, ydone := startEpochs(t, ctx, cfg2, store)
	if y.Mixed() < mixed {
		t.Fatalf("the second worker starts at epoch %d, below the first's newest mixed, %d", y.Mixed(), mixed)
	}
	last := waitComplete(t, store, data)
	for _, w := range []*consumer.Epochs{x, y} {
		wait.For(t, time.Minute, 5*time.Millisecond, "the last epoch mixed", func() bool { return w.Mixed() >= last })
	}
	cancel()
	for _, d := range []<-chan error{done, ydone} {
		if err := <-d; err != nil {
			t.Fatal(err)
		}
	}
	for i, w := range []*consumer.Epochs{x, y} {
		if got := w.Model().State().Digest(); got != want {
			t.Fatalf("worker %d holds %x, one worker %x", i, got, want)
		}
	}
}

// TestEpochsJumpDropsTheShardsGauges: a worker that learned a range of
// an epoch and then continues from a newer generation (overtaken) holds
// no range of the shard any more: its hyperplane_shard_position (and the
// shard's other gauges) must not go on saying how far that old range
// was learned, below the model it holds.
func TestEpochsJumpDropsTheShardsGauges(t *testing.T) {
	data := epochLog(600)
	store := snapshot.NewStore(memblob.OpenBucket(nil), "")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var alone atomic.Bool
	alone.Store(true)
	cfg := epochConfig(data, store, memory.NewSink(), "first")
	cfg.Alone = alone.Load
	cfg.SnapshotEvery, cfg.SnapshotInterval = 1<<40, 0
	x, done := startEpochs(t, ctx, cfg, store)
	last := waitComplete(t, store, data)
	wait.For(t, time.Minute, 5*time.Millisecond, "the last epoch mixed", func() bool { return x.Mixed() >= last })

	// A second worker learns the first epoch's ranges again, and is held
	// in shard 1's.
	sink := &heldOutputs{Sink: memory.NewSink(), prefix: data.Key(1) + "/", held: make(chan struct{}), release: make(chan struct{})}
	sink.armed.Store(true)
	cfg2 := epochConfig(data, store, memory.NewSink(), "second")
	cfg2.Worker.Predictions.Sink, cfg2.Worker.Misclassifications.Sink, cfg2.Worker.DeadLetter.Sink = sink, sink, sink
	cfg2.Owned = func() []shardid.ID { return shardIDs([]string{data.Key(1), data.Key(3), data.Key(5)}) }
	m, e, prev, pos, err := consumer.Continue(nil, epochLearner(), cfg2.ConfigDigest)
	if err != nil {
		t.Fatal(err)
	}
	metrics := consumer.NewMetrics(nil)
	y := consumer.NewEpochs(cfg2, m, e, prev, pos, metrics, zaptest.NewLogger(t))
	ydone := make(chan error, 1)
	go func() { ydone <- y.Run(ctx) }()
	select {
	case <-sink.held:
	case err := <-ydone:
		t.Fatalf("the second worker stopped (%v) before it learned shard 1's first range", err)
	}
	// The first is alone no longer: it writes a generation of the last
	// epoch, which the second continues from once its range is learned.
	alone.Store(false)
	wait.For(t, time.Minute, 5*time.Millisecond, "a generation of the last epoch", func() bool { return latestGeneration(store) >= last })
	close(sink.release)
	wait.For(t, time.Minute, 5*time.Millisecond, "the second worker at the last epoch", func() bool { return y.Mixed() >= last })

	ch := make(chan prometheus.Metric, 16)
	go func() {
		metrics.ShardPosition.Collect(ch)
		close(ch)
	}()
	for pm := range ch {
		var d dto.Metric
		if err := pm.Write(&d); err != nil {
			t.Fatal(err)
		}
		shard := d.GetLabel()[0].GetValue()
		p := slices.IndexFunc([]int{0, 1, 2, 3, 4, 5}, func(p int) bool { return data.Key(p) == shard })
		if got := d.GetGauge().GetValue(); p < 0 || got != float64(data.Len(p)) {
			t.Errorf("hyperplane_shard_position{shard=%q} is %v after the jump to generation %d, whose model holds the shard to %d", shard, got, last, data.Len(p))
		}
	}
	cancel()
	for _, d := range []<-chan error{done, ydone} {
		if err := <-d; err != nil {
			t.Fatal(err)
		}
	}
}
