package consumer_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
	"gocloud.dev/blob/memblob"

	"github.com/hyperplane-ml/hyperplane/consumer"
	"github.com/hyperplane-ml/hyperplane/consumer/memory"
	"github.com/hyperplane-ml/hyperplane/epochlog"
	"github.com/hyperplane-ml/hyperplane/internal/wait"
	"github.com/hyperplane-ml/hyperplane/shardid"
	"github.com/hyperplane-ml/hyperplane/snapshot"
)

// TestEpochsBarrierNamesTheMissingShards: a worker that owns half the
// shards, whose other owner is gone, waits at the barrier for the other
// half alone: hyperplane_epoch_missing_shards counts those, not the
// results it holds itself. Once the barrier has waited 10 intervals it
// logs them by name, once; and when it stops waiting (here, stopped) the
// gauge is 0.
func TestEpochsBarrierNamesTheMissingShards(t *testing.T) {
	log := epochLog(300)
	store := snapshot.NewStore(memblob.OpenBucket(nil), "")
	cfg := epochConfig(log, store, memory.NewSink(), "half")
	var mine, others []shardid.ID
	for p := range 6 {
		if p < 3 {
			mine = append(mine, shardid.Memory("ex", p))
		} else {
			others = append(others, shardid.Memory("ex", p))
		}
	}
	cfg.Owned = func() []shardid.ID { return mine }
	m, e, prev, pos, err := consumer.Continue(nil, epochLearner(), cfg.ConfigDigest)
	if err != nil {
		t.Fatal(err)
	}
	cfg.BaseDigest = consumer.BaseDigestOf(nil, m)
	core, logs := observer.New(zapcore.WarnLevel)
	metrics := consumer.NewMetrics(nil)
	x := consumer.NewEpochs(cfg, m, e, prev, pos, metrics, zap.New(core))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- x.Run(ctx) }()

	warned := func() []observer.LoggedEntry { return logs.FilterMessageSnippet("barrier waits for the results").All() }
	wait.For(t, time.Minute, 5*time.Millisecond, "the barrier to name what it waits for", func() bool { return len(warned()) > 0 })
	if got := testutil.ToFloat64(metrics.MissingShards); got != float64(len(others)) {
		t.Errorf("hyperplane_epoch_missing_shards %v while this worker holds its own %d results, want the %d others'", got, len(mine), len(others))
	}
	var named []string
	for _, s := range others {
		named = append(named, s.String())
	}
	got := warned()[0].ContextMap()["missing"]
	if names, ok := got.([]any); !ok || !slices.EqualFunc(names, named, func(a any, b string) bool { return a == b }) {
		t.Errorf("the warning names %v as missing, want %v", got, named)
	}
	cancel()
	<-done
	if n := len(warned()); n != 1 {
		t.Errorf("%d warnings for one barrier, want 1", n)
	}
	if got := testutil.ToFloat64(metrics.MissingShards); got != 0 {
		t.Errorf("hyperplane_epoch_missing_shards %v once the worker stopped waiting, want 0", got)
	}
}

// lateLook is an epoch log whose first look for the result of shard at
// epoch e answers only once the boundary of e+1 is in the log: a look
// that missed the result just before its owner wrote it, and whose answer
// came after the owner cut the next boundary. It closes looked when the
// look has missed, and counts the results written of shard.
type lateLook struct {
	consumer.EpochLog
	e      uint64
	shard  shardid.ID
	once   sync.Once
	looked chan struct{}
	wrote  atomic.Int64
}

func (l *lateLook) ShardExists(ctx context.Context, model string, e uint64, shard shardid.ID) (bool, error) {
	ok, err := l.EpochLog.ShardExists(ctx, model, e, shard)
	if err != nil || ok || e != l.e || shard != l.shard {
		return ok, err
	}
	first := false
	l.once.Do(func() { first = true })
	if !first {
		return ok, err
	}
	close(l.looked)
	for {
		_, _, err := l.EpochLog.Boundary(ctx, model, e+1)
		if err == nil {
			return false, nil
		}
		if !errors.Is(err, snapshot.ErrNotFound) {
			return false, err
		}
		select {
		case <-ctx.Done():
			return false, ctx.Err()
		case <-time.After(time.Millisecond):
		}
	}
}

func (l *lateLook) WriteShard(ctx context.Context, r *epochlog.ShardResult, base *epochlog.Base) error {
	if r.Shard == l.shard {
		l.wrote.Add(1)
	}
	return l.EpochLog.WriteShard(ctx, r, base)
}

// writeAfter is an epoch log that writes the result of shard at epoch e
// only once after is closed.
type writeAfter struct {
	consumer.EpochLog
	e     uint64
	shard shardid.ID
	after <-chan struct{}
}

func (l writeAfter) WriteShard(ctx context.Context, r *epochlog.ShardResult, base *epochlog.Base) error {
	if r.Epoch == l.e && r.Shard == l.shard {
		select {
		case <-l.after:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return l.EpochLog.WriteShard(ctx, r, base)
}

// TestEpochsBarrierLooksAgainOnceCut: a barrier that misses another
// worker's result, and then finds the next boundary cut, looks for the
// result again before it takes it for lost: the owner may have written
// it and cut the boundary between the two looks (docs/scale-out.md,
// section 3.12). It reads that result rather than learn its range again.
func TestEpochsBarrierLooksAgainOnceCut(t *testing.T) {
	data := epochLog(600)
	want := oneWorkerDigest(t, data)
	store := snapshot.NewStore(memblob.OpenBucket(nil), "")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	last := shardid.Memory("ex", 5)
	var rest []shardid.ID
	for p := range 5 {
		rest = append(rest, shardid.Memory("ex", p))
	}
	cfg := epochConfig(data, store, memory.NewSink(), "first")
	looks := &lateLook{EpochLog: cfg.Log, e: 2, shard: last, looked: make(chan struct{})}
	cfg.Log = looks
	cfg.Owned = func() []shardid.ID { return rest }
	// No generation is written, which the barrier would jump to.
	cfg.SnapshotEvery = 1 << 40
	x, done := startEpochs(t, ctx, cfg, store)
	cfg2 := epochConfig(data, store, memory.NewSink(), "second")
	cfg2.Log = writeAfter{EpochLog: cfg2.Log, e: 2, shard: last, after: looks.looked}
	cfg2.Owned = func() []shardid.ID { return []shardid.ID{last} }
	cfg2.SnapshotEvery = 1 << 40
	y, ydone := startEpochs(t, ctx, cfg2, store)
	end := waitComplete(t, store, data)
	for _, w := range []*consumer.Epochs{x, y} {
		wait.For(t, time.Minute, 5*time.Millisecond, "the last epoch mixed", func() bool { return w.Mixed() >= end })
	}
	cancel()
	for _, d := range []<-chan error{done, ydone} {
		if err := <-d; err != nil {
			t.Fatal(err)
		}
	}
	if n := looks.wrote.Load(); n != 0 {
		t.Errorf("the first worker learned shard 5's range again and wrote %d results of it; its owner had written it", n)
	}
	for i, w := range []*consumer.Epochs{x, y} {
		if got := w.Model().State().Digest(); got != want {
			t.Errorf("worker %d holds %x, one worker %x", i, got, want)
		}
	}
}

// TestEpochsBarrierCountsOnlyMissingResults: a worker whose barrier waits
// for a lost owner's shards does not count as missing the results that
// another worker has already written of shards later in shard order:
// hyperplane_epoch_missing_shards is the lost owner's shards alone, as
// the warning names them.
func TestEpochsBarrierCountsOnlyMissingResults(t *testing.T) {
	data := epochLog(300)
	store, err := snapshot.OpenStore(context.Background(), "file://"+t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	shards := func(ps ...int) (ids []shardid.ID) {
		for _, p := range ps {
			ids = append(ids, shardid.Memory("ex", p))
		}
		return ids
	}
	// The last two shards' owner writes its results of epoch 1 first;
	// the owner of shards 2 and 3 is gone.
	later := epochConfig(data, store, memory.NewSink(), "later")
	later.Owned = func() []shardid.ID { return shards(4, 5) }
	_, laterDone := startEpochs(t, ctx, later, store)
	wait.For(t, time.Minute, 5*time.Millisecond, "the results of shards 4 and 5 of epoch 1", func() bool {
		for _, s := range shards(4, 5) {
			if ok, err := later.Log.ShardExists(ctx, "mixed", 1, s); err != nil || !ok {
				return false
			}
		}
		return true
	})

	first := epochConfig(data, store, memory.NewSink(), "first")
	first.Owned = func() []shardid.ID { return shards(0, 1) }
	snap, err := store.Latest(ctx, "mixed", nil)
	if errors.Is(err, snapshot.ErrNotFound) {
		snap, err = nil, nil
	}
	if err != nil {
		t.Fatal(err)
	}
	m, e, prev, pos, err := consumer.Continue(snap, epochLearner(), first.ConfigDigest)
	if err != nil {
		t.Fatal(err)
	}
	first.BaseDigest = consumer.BaseDigestOf(snap, m)
	core, logs := observer.New(zapcore.WarnLevel)
	metrics := consumer.NewMetrics(nil)
	x := consumer.NewEpochs(first, m, e, prev, pos, metrics, zap.New(core))
	done := make(chan error, 1)
	go func() { done <- x.Run(ctx) }()

	warned := func() []observer.LoggedEntry { return logs.FilterMessageSnippet("barrier waits for the results").All() }
	wait.For(t, time.Minute, 5*time.Millisecond, "the barrier to name what it waits for", func() bool { return len(warned()) > 0 })
	want := []string{shardid.Memory("ex", 2).String(), shardid.Memory("ex", 3).String()}
	got := warned()[0].ContextMap()["missing"]
	if names, ok := got.([]any); !ok || !slices.EqualFunc(names, want, func(a any, b string) bool { return a == b }) {
		t.Errorf("the warning names %v as missing, want %v", got, want)
	}
	// The barrier looks for the later shards' results once its wait is a
	// few polls long, which may come after the warning on a busy machine:
	// the gauge drops to the shards the warning names then, and stays.
	wait.For(t, time.Minute, 5*time.Millisecond, "hyperplane_epoch_missing_shards to count the results of shards 2 and 3 alone, not those of 4 and 5 in the log", func() bool {
		return testutil.ToFloat64(metrics.MissingShards) == float64(len(want))
	})
	cancel()
	<-done
	<-laterDone
}
