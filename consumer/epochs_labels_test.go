package consumer_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"
	"gocloud.dev/blob/memblob"

	"github.com/hyperplane-ml/hyperplane/consumer"
	"github.com/hyperplane-ml/hyperplane/consumer/memory"
	"github.com/hyperplane-ml/hyperplane/epochlog"
	"github.com/hyperplane-ml/hyperplane/internal/wait"
	"github.com/hyperplane-ml/hyperplane/learner/synth"
	"github.com/hyperplane-ml/hyperplane/shardid"
	"github.com/hyperplane-ml/hyperplane/snapshot"
	"github.com/hyperplane-ml/hyperplane/wire"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/vmihailenco/msgpack/v5"
)

// joinedEpochs are epochs over four co-partitioned in-process logs, the
// examples' and the labels', each partition of its own seed, every record
// written before any worker starts.
type joinedEpochs struct {
	t          *testing.T
	ex, labels *memory.Log
	metrics    *consumer.Metrics // nil: none
}

func newJoinedEpochs(t *testing.T, n int) *joinedEpochs {
	ex, labels := memory.NewLog("examples", joinPartitions), memory.NewLog("labels", joinPartitions)
	for p := range joinPartitions {
		k := n + 50*p
		appendDelayed(ex, labels, p, k, uint64(11+p))
		// A few examples after every label, whose windows no label
		// closes: the epochs reach them and stop before them.
		o := synth.DefaultOptions()
		o.Vocab, o.Features, o.Seed = 500, 12, uint64(31+p)
		s := synth.New(o)
		quiet := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).Add(time.Duration(k)*10*time.Millisecond + 3*joinWindow)
		for i := range 5 {
			rec := s.Next()
			rec.Labeled, rec.Seq = false, uint64(1e9+i)
			b := synth.AppendJSON(nil, rec)
			ex.AppendAt(p, quiet.Add(time.Duration(i)*time.Millisecond), b[:len(b)-1])
		}
	}
	return &joinedEpochs{t: t, ex: ex, labels: labels}
}

func (j *joinedEpochs) config(store *snapshot.Store, sink *memory.Sink, writer string) consumer.EpochConfig {
	cfg := epochConfig(j.ex, store, sink, writer)
	cfg.Worker.Model = "mixed"
	cfg.Labels = &consumer.EpochLabels{
		Join:   consumer.JoinConfig{Window: joinWindow, Default: -1, HasDefault: true},
		Format: wire.FormatJSON,
		Shards: j.labels,
		CoShard: func(shard shardid.ID) (shardid.ID, error) {
			p, ok := shard.Partition()
			if !ok || shard.Kind() != shardid.KindMemory || shard.Name() != "examples" {
				return shardid.ID{}, fmt.Errorf("no labels' partition for %s", shard)
			}
			return j.labels.Shard(p), nil
		},
	}
	return cfg
}

// awaitLearned waits until x has learned every example of every
// partition.
func (j *joinedEpochs) awaitLearned(t *testing.T, x *consumer.Epochs) {
	t.Helper()
	wait.For(t, time.Minute, 5*time.Millisecond, "every example learned", func() bool {
		pos := x.Positions()
		for p := range joinPartitions {
			if pos[j.ex.Key(p)] != int64(j.ex.Len(p)) {
				return false
			}
		}
		return true
	})
}

// start runs a worker of cfg that continues from the store's newest
// generation, with the joins it recorded.
func (j *joinedEpochs) start(ctx context.Context, cfg consumer.EpochConfig, store *snapshot.Store) (*consumer.Epochs, <-chan error) {
	t := j.t
	t.Helper()
	snap, err := store.Latest(ctx, "mixed", nil)
	if errors.Is(err, snapshot.ErrNotFound) {
		snap, err = nil, nil
	}
	if err != nil {
		t.Fatal(err)
	}
	x := continueEpochs(t, snap, cfg, j.metrics, zaptest.NewLogger(t))
	done := make(chan error, 1)
	go func() {
		err := x.Run(ctx)
		if err != nil {
			t.Errorf("worker %s stopped: %v", cfg.Writer, err)
		}
		done <- err
	}()
	return x, done
}

// last is the epoch after which no more is cut: its boundary ends every
// shard at the examples' end and the labels' end, and every result of it
// is in the log (or a generation holds it). 0 until there is one.
func (j *joinedEpochs) last(ctx context.Context, store *snapshot.Store) uint64 {
	lg := epochlog.New(store)
	epochs, err := lg.Epochs(ctx, "mixed")
	if err != nil || len(epochs) == 0 {
		return 0
	}
	e := epochs[len(epochs)-1]
	b, _, err := lg.Boundary(ctx, "mixed", e)
	if err != nil {
		return 0
	}
	for p := range joinPartitions {
		r, ok := b.ShardRange(j.ex.Shard(p))
		if !ok || r.Labels == nil || r.To != int64(j.ex.Len(p)) || r.Labels.To != int64(j.labels.Len(p)) {
			return 0
		}
	}
	if gens, _ := store.Generations(ctx, "mixed"); len(gens) > 0 && gens[len(gens)-1] >= e {
		return e
	}
	for _, r := range b.Shards {
		if !r.Empty() {
			if ok, _ := lg.ShardExists(ctx, "mixed", e, r.Shard); !ok {
				return 0
			}
		}
	}
	return e
}

func (j *joinedEpochs) waitLast(store *snapshot.Store) uint64 {
	j.t.Helper()
	var e uint64
	wait.For(j.t, time.Minute, 5*time.Millisecond, "the last epoch", func() bool {
		e = j.last(context.Background(), store)
		return e > 0
	})
	return e
}

// joinedOutcome is what a run learned: the mixed model's digest, the
// join's outcomes summed over the shards, and where each shard reached.
type joinedOutcome struct {
	digest    [32]byte
	counts    consumer.JoinCounts
	positions string
}

func outcomeOf(x *consumer.Epochs) joinedOutcome {
	return joinedOutcome{x.Model().State().Digest(), x.JoinCounts(), fmt.Sprint(x.Positions())}
}

// stopAt stops x once it has mixed epoch e.
func stopAt(t *testing.T, x *consumer.Epochs, done <-chan error, cancel context.CancelFunc, e uint64) joinedOutcome {
	t.Helper()
	wait.For(t, time.Minute, 5*time.Millisecond, fmt.Sprintf("epoch %d mixed", e), func() bool { return x.Mixed() >= e })
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run: %v", err)
	}
	return outcomeOf(x)
}

// TestEpochsJoinIsAFunctionOfTheLogs learns four co-partitioned shards
// with labels that come later (docs/labels.md, section 11) with one
// worker, with two workers owning two shards each, with one worker
// stopped and resumed at random epochs, and by replaying the first run's
// epoch log: each gives the same mixed model to the bit, the same
// outcomes of the join, and the same reached ends.
func TestEpochsJoinIsAFunctionOfTheLogs(t *testing.T) {
	j := newJoinedEpochs(t, 500)

	one := snapshot.NewStore(memblob.OpenBucket(nil), "")
	t.Cleanup(func() { one.Close() })
	ctx, cancel := context.WithCancel(context.Background())
	x, done := j.start(ctx, j.config(one, memory.NewSink(), "one"), one)
	last := j.waitLast(one)
	want := stopAt(t, x, done, cancel, last)
	c := want.counts
	if c.Labels[consumer.LabelJoined] == 0 || c.Labels[consumer.LabelLate] == 0 || c.Labels[consumer.LabelUnknown] == 0 ||
		c.Labels[consumer.LabelDuplicate] == 0 || c.Expired == 0 {
		t.Fatalf("outcomes %+v: every kind should occur", c)
	}
	if last < 3 {
		t.Fatalf("%d epochs: the test wants several", last)
	}
	t.Logf("%d epochs, outcomes %+v, positions %s", last, c, want.positions)
	// The quiet examples at the end wait: every shard reached the first
	// of them, its range's end being after them.
	for p := range joinPartitions {
		if got, end := x.Positions()[j.ex.Key(p)], int64(j.ex.Len(p)); got != end-5 {
			t.Fatalf("shard %d reached %d, want %d: before the five examples whose windows never close", p, got, end-5)
		}
	}
	// With labels a range's end bounds what is offered, not what is
	// learned: an epoch is cut for a backlog only after a range that read
	// as many labels as the pace allowed, or reached the end of a full
	// range (docs/scale-out.md, section 3.4, rule (e)).
	lg := epochlog.New(one)
	epochs, err := lg.Epochs(context.Background(), "mixed")
	if err != nil || len(epochs) == 0 {
		t.Fatalf("the epoch log lists %v: %v", epochs, err)
	}
	var prev *epochlog.Boundary
	for _, e := range epochs {
		b, _, err := lg.Boundary(context.Background(), "mixed", e)
		if err != nil {
			t.Fatalf("boundary %d: %v", e, err)
		}
		if b.Cut.Reason == epochlog.CutBacklog && prev != nil && prev.Epoch == e-1 {
			clipped := false
			for _, r := range prev.Shards {
				next, _ := b.ShardRange(r.Shard)
				limit := int64(prev.Cut.EpochExamples)
				clipped = clipped || r.Labels.To-r.Labels.From >= 2*limit || (r.To-r.From >= limit && next.From == r.To)
			}
			if !clipped {
				t.Errorf("epoch %d was cut for %q with labels after epoch %d, none of whose ranges was clipped: %+v", e, b.Cut.Reason, prev.Epoch, prev.Shards)
			}
		}
		prev = b
	}

	t.Run("two workers", func(t *testing.T) {
		store := snapshot.NewStore(memblob.OpenBucket(nil), "")
		t.Cleanup(func() { store.Close() })
		sink := memory.NewSink()
		owners := [][]string{{j.ex.Key(0), j.ex.Key(2)}, {j.ex.Key(1), j.ex.Key(3)}}
		var xs [2]*consumer.Epochs
		var dones [2]<-chan error
		var cancels [2]context.CancelFunc
		for i := range owners {
			cfg := j.config(store, sink, fmt.Sprint("w", i))
			owned := owners[i]
			cfg.Owned = func() []shardid.ID { return shardIDs(owned) }
			ctx, cancel := context.WithCancel(context.Background())
			xs[i], dones[i] = j.start(ctx, cfg, store)
			cancels[i] = cancel
		}
		if got := j.waitLast(store); got != last {
			t.Fatalf("two workers made %d epochs, one worker %d", got, last)
		}
		var wg sync.WaitGroup
		var got [2]joinedOutcome
		for i := range xs {
			wg.Add(1)
			go func() {
				defer wg.Done()
				got[i] = stopAt(t, xs[i], dones[i], cancels[i], last)
			}()
		}
		wg.Wait()
		for i, g := range got {
			if g != want {
				t.Fatalf("worker %d: %+v, one worker %+v", i, g, want)
			}
		}
	})

	t.Run("stopped and resumed", func(t *testing.T) {
		store := snapshot.NewStore(memblob.OpenBucket(nil), "")
		t.Cleanup(func() { store.Close() })
		sink := memory.NewSink()
		rng := rand.New(rand.NewPCG(5, 6))
		for i := range 3 {
			ctx, cancel := context.WithCancel(context.Background())
			x, done := j.start(ctx, j.config(store, sink, fmt.Sprint("r", i)), store)
			stop := x.Mixed() + 1 + uint64(rng.IntN(int(last)/3+1))
			if stop >= last {
				stop = last - 1
			}
			stopAt(t, x, done, cancel, stop)
		}
		ctx, cancel := context.WithCancel(context.Background())
		x, done := j.start(ctx, j.config(store, sink, "r"), store)
		if got := j.waitLast(store); got != last {
			t.Fatalf("the resumed worker made %d epochs, the uninterrupted one %d", got, last)
		}
		if got := stopAt(t, x, done, cancel, last); got != want {
			t.Fatalf("resumed: %+v, uninterrupted %+v", got, want)
		}
	})

	// A worker alone holds its results (docs/scale-out.md, section 3.12),
	// with labels too: a range's result, where it reached and its join,
	// is a function of its boundary and the two logs, so a worker that
	// finds it missing learns it again to the same bits. No generation
	// is written here either, so the log's boundaries alone hold the
	// model.
	t.Run("alone", func(t *testing.T) {
		store := snapshot.NewStore(memblob.OpenBucket(nil), "")
		t.Cleanup(func() { store.Close() })
		sink := memory.NewSink()
		cfg := j.config(store, sink, "alone")
		first := &writeCountingLog{EpochLog: unwrittenLog{epochlog.New(store)}}
		cfg.Log = first
		cfg.Alone = func() bool { return true }
		ctx, cancel := context.WithCancel(context.Background())
		x, done := j.start(ctx, cfg, store)
		if got := stopAt(t, x, done, cancel, last); got != want || x.Mixed() != last {
			t.Fatalf("alone: %+v after %d epochs, one worker that writes its results %+v after %d", got, x.Mixed(), want, last)
		}
		if n := first.writes.Load(); n != 0 {
			t.Fatalf("the worker alone wrote %d shard results", n)
		}

		// Stopped while alone, at random epochs: each start finds no
		// result and no generation, and learns every range again from
		// the boundaries, holding them.
		rng := rand.New(rand.NewPCG(7, 8))
		for i := range 2 {
			ctx, cancel := context.WithCancel(context.Background())
			cfg := j.config(store, sink, fmt.Sprint("again", i))
			cfg.Log, cfg.Alone = first, func() bool { return true }
			x, done := j.start(ctx, cfg, store)
			stop := 1 + uint64(rng.IntN(int(last)))
			if got := stopAt(t, x, done, cancel, stop); stop == last && got != want {
				t.Fatalf("alone again: %+v, uninterrupted %+v", got, want)
			}
		}
		if n := first.writes.Load(); n != 0 {
			t.Fatalf("the workers alone wrote %d shard results", n)
		}

		// A worker that is not alone, owning half the shards, learns the
		// others' ranges from their boundaries below the next boundary,
		// and writes every result. The last epoch has no boundary above
		// it: its other ranges are learned once their owner's session
		// ends and they are handed to this worker.
		cfg = j.config(store, sink, "newcomer")
		second := &writeCountingLog{EpochLog: epochlog.New(store)}
		cfg.Log = second
		half := []string{j.ex.Key(1), j.ex.Key(3)}
		all := []string{j.ex.Key(0), j.ex.Key(1), j.ex.Key(2), j.ex.Key(3)}
		var owned atomic.Pointer[[]string]
		owned.Store(&half)
		changed := make(chan struct{})
		cfg.Owned = func() []shardid.ID { return shardIDs(*owned.Load()) }
		cfg.Changed = func() <-chan struct{} { return changed }
		ctx, cancel = context.WithCancel(context.Background())
		y, ydone := j.start(ctx, cfg, store)
		wait.For(t, time.Minute, 5*time.Millisecond, "the epochs before the last mixed by the newcomer", func() bool { return y.Mixed() >= last-1 })
		owned.Store(&all)
		close(changed)
		if got := stopAt(t, y, ydone, cancel, last); got != want {
			t.Fatalf("the newcomer: %+v, one worker %+v", got, want)
		}
		if n := second.writes.Load(); n == 0 {
			t.Fatal("the newcomer wrote no result of the ranges it learned")
		}
	})

	t.Run("replay", func(t *testing.T) {
		out := snapshot.NewStore(memblob.OpenBucket(nil), "")
		t.Cleanup(func() { out.Close() })
		live := epochlog.New(one)
		start, err := consumer.FollowStart(context.Background(), live, "mixed")
		if err != nil {
			t.Fatal(err)
		}
		f, err := consumer.Follow(context.Background(), j.config(out, memory.NewSink(), "replay"), live, epochlog.New(out), start,
			epochLearner(), nil, zaptest.NewLogger(t))
		if err != nil {
			t.Fatal(err)
		}
		if f.Mixed != last || len(f.Checked) == 0 {
			t.Fatalf("replay mixed %d epochs, checked %v; the live log has %d", f.Mixed, f.Checked, last)
		}
		got := joinedOutcome{f.Model.State().Digest(), f.JoinCounts, fmt.Sprint(f.Positions)}
		if got != want {
			t.Fatalf("replay: %+v, live %+v", got, want)
		}
	})
}

// TestEpochsJoinWritesWhatItHeldOnceNotAlone: a worker alone with
// labels holds its results of an epoch, with their joins, and loses the
// shard whose range it has not finished to a second worker. Its barrier
// then writes those it held, their joins encoded, since the second
// worker's barrier needs them; both go on to the model and outcomes of
// one worker that writes every result.
func TestEpochsJoinWritesWhatItHeldOnceNotAlone(t *testing.T) {
	j := newJoinedEpochs(t, 500)
	ref := snapshot.NewStore(memblob.OpenBucket(nil), "")
	t.Cleanup(func() { ref.Close() })
	ctx, cancel := context.WithCancel(context.Background())
	x, done := j.start(ctx, j.config(ref, memory.NewSink(), "one"), ref)
	last := j.waitLast(ref)
	want := stopAt(t, x, done, cancel, last)

	store := snapshot.NewStore(memblob.OpenBucket(nil), "")
	t.Cleanup(func() { store.Close() })
	sink := memory.NewSink()
	all := []string{j.ex.Key(0), j.ex.Key(1), j.ex.Key(2), j.ex.Key(3)}
	rest := all[:3]
	var owned atomic.Pointer[[]string]
	owned.Store(&all)
	var alone atomic.Bool
	alone.Store(true)
	changed := make(chan struct{})
	release := make(chan struct{})
	defer close(release)
	cfg := j.config(store, sink, "first")
	first := &writeCountingLog{EpochLog: cfg.Log, at: 1}
	cfg.Log = first
	// Shard 3's reading stops after its first fetch, within epoch 1.
	cfg.Shards = &heldShards{Log: j.ex, shard: j.ex.Key(3), release: release}
	cfg.Alone = alone.Load
	cfg.Owned = func() []shardid.ID { return shardIDs(*owned.Load()) }
	cfg.Changed = func() <-chan struct{} { return changed }
	ctx, cancel = context.WithCancel(context.Background())
	defer cancel()
	x, done = j.start(ctx, cfg, store)
	wait.For(t, time.Minute, time.Millisecond, "epoch 1's other ranges learned, and held", func() bool { return x.HeldResults(1) == 3 })
	if n := first.writes.Load(); n != 0 {
		t.Fatalf("the worker alone wrote %d results", n)
	}

	alone.Store(false)
	owned.Store(&rest)
	close(changed)
	cfg2 := j.config(store, sink, "second")
	cfg2.Owned = func() []shardid.ID { return shardIDs([]string{j.ex.Key(3)}) }
	ctx2, cancel2 := context.WithCancel(context.Background())
	defer cancel2()
	y, ydone := j.start(ctx2, cfg2, store)
	if got := j.waitLast(store); got != last {
		t.Fatalf("two workers made %d epochs, one %d", got, last)
	}
	var got [2]joinedOutcome
	var wg sync.WaitGroup
	for i, w := range []struct {
		x      *consumer.Epochs
		done   <-chan error
		cancel context.CancelFunc
	}{{x, done, cancel}, {y, ydone, cancel2}} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			got[i] = stopAt(t, w.x, w.done, w.cancel, last)
		}()
	}
	wg.Wait()
	for i, g := range got {
		if g != want {
			t.Fatalf("worker %d: %+v, one worker %+v", i, g, want)
		}
	}
	if n := first.atWrites.Load(); n != 3 {
		t.Fatalf("the first worker wrote %d results of epoch 1, want the 3 it held", n)
	}
}

// TestEpochsHeadPredictsScoresAndMarks runs one worker with heads over
// the four shards (docs/labels.md, section 11.3): every delayed example
// is predicted once by its shard's head, the labels that show a served
// prediction wrong publish misclassifications, and the marks the heads
// append to each shard's own labels' partition close the windows of the
// quiet examples at the end, so that the epochs learn every example.
func TestEpochsHeadPredictsScoresAndMarks(t *testing.T) {
	j := newJoinedEpochs(t, 300)
	store := snapshot.NewStore(memblob.OpenBucket(nil), "")
	t.Cleanup(func() { store.Close() })
	sink := memory.NewSink()
	marks := &partitionMarks{log: j.labels}
	cfg := j.config(store, sink, "head")
	cfg.Labels.Marks = func(shard shardid.ID) (consumer.Destination, error) {
		for p := range joinPartitions {
			if j.ex.Shard(p) == shard {
				return consumer.Destination{Sink: marks, Topic: "marks", Partition: int32(p), HasPartition: true}, nil
			}
		}
		return consumer.Destination{}, fmt.Errorf("no partition for %s", shard)
	}
	cfg.Labels.LateLabels = consumer.Destination{Sink: sink, Topic: "late"}
	j.metrics = consumer.NewMetrics(prometheus.NewRegistry())
	ctx, cancel := context.WithCancel(context.Background())
	x, done := j.start(ctx, cfg, store)
	j.awaitLearned(t, x)
	// hyperplane_shard_position is how far each shard's range is
	// learned: the heads, which read further and read the labels, do
	// not set it.
	if n := testutil.CollectAndCount(j.metrics.ShardPosition); n != joinPartitions {
		t.Fatalf("hyperplane_shard_position has %d series for %d shards: the heads' positions are among them", n, joinPartitions)
	}
	for p := range joinPartitions {
		if v := testutil.ToFloat64(j.metrics.ShardPosition.WithLabelValues(j.ex.Key(p))); v != float64(j.ex.Len(p)) {
			t.Fatalf("hyperplane_shard_position of %s is %v, want %d, where its range has learned to", j.ex.Key(p), v, j.ex.Len(p))
		}
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	predicted := map[string]bool{}
	for _, o := range sink.Outputs("pred") {
		predicted[string(o.Key)] = true
	}
	for p := range joinPartitions {
		if marks.marks[p] == 0 {
			t.Errorf("partition %d: no mark in its labels' partition", p)
		}
		for off := range j.ex.Len(p) {
			if id := fmt.Sprintf("%s/%d", j.ex.Key(p), off); !predicted[id] {
				t.Fatalf("example %s was not predicted", id)
			}
		}
	}
	if marks.unchosen != 0 {
		t.Errorf("%d marks chose no partition", marks.unchosen)
	}
	var joined int
	for _, o := range sink.Outputs("mis") {
		if strings.Contains(string(o.Value), `"label_delay_ms":`) {
			joined++
		}
	}
	if joined == 0 || len(sink.Outputs("late")) == 0 {
		t.Fatalf("%d misclassifications of served predictions, %d late labels: want some of each", joined, len(sink.Outputs("late")))
	}
}

// TestEpochsIdleHeadsMark: a worker that resumes from a generation of
// the newest epoch, with every shard waiting for labels that never come,
// cuts no range; the heads started only with a range, so none wrote the
// marks that close those windows, and the quiet examples were never
// learned. The heads of the owned shards start while no epoch is due.
func TestEpochsIdleHeadsMark(t *testing.T) {
	j := newJoinedEpochs(t, 200)
	store := snapshot.NewStore(memblob.OpenBucket(nil), "")
	t.Cleanup(func() { store.Close() })
	sink := memory.NewSink()
	// The first run writes no mark (its windows were not due yet) and
	// stops once the epochs wait for the quiet examples' windows.
	cfg := j.config(store, sink, "idle")
	ctx, cancel := context.WithCancel(context.Background())
	x, done := j.start(ctx, cfg, store)
	stopAt(t, x, done, cancel, j.waitLast(store))
	for p := range joinPartitions {
		if got := x.Positions()[j.ex.Key(p)]; got == int64(j.ex.Len(p)) {
			t.Fatalf("partition %d learned to its end without a mark", p)
		}
	}
	marks := &partitionMarks{log: j.labels}
	cfg.Labels.Marks = func(shard shardid.ID) (consumer.Destination, error) {
		for p := range joinPartitions {
			if j.ex.Shard(p) == shard {
				return consumer.Destination{Sink: marks, Topic: "marks", Partition: int32(p), HasPartition: true}, nil
			}
		}
		return consumer.Destination{}, fmt.Errorf("no partition for %s", shard)
	}
	ctx, cancel = context.WithCancel(context.Background())
	defer cancel()
	x, done = j.start(ctx, cfg, store)
	j.awaitLearned(t, x)
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	for p := range joinPartitions {
		if marks.marks[p] == 0 {
			t.Errorf("partition %d: no mark in its labels' partition", p)
		}
	}
}

// TestEpochsHeadBackPressure: a head whose join holds labels.max_pending
// examples, for labels that do not come, reads no more of its shard, and
// the epochs report the worker not ready with the join's reason.
func TestEpochsHeadBackPressure(t *testing.T) {
	j := newJoinedEpochs(t, 100)
	j.labels = memory.NewLog("labels", joinPartitions) // nothing closes a window
	store := snapshot.NewStore(memblob.OpenBucket(nil), "")
	t.Cleanup(func() { store.Close() })
	cfg := j.config(store, memory.NewSink(), "w")
	cfg.Labels.Join.MaxPending = 10
	ctx, cancel := context.WithCancel(context.Background())
	x, done := j.start(ctx, cfg, store)
	wait.For(t, time.Minute, 5*time.Millisecond, "the worker not ready for its joins", func() bool {
		return slices.ContainsFunc(x.NotReady(), func(r string) bool { return strings.HasPrefix(r, consumer.NotReadyJoin) })
	})
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// TestEpochsJoinPacesItsLabels: with labels.max_pending below the labels
// of a shard, no boundary gives a range more labels than that, and the
// epochs still learn every example with the outcomes of the unbounded
// run (the rule's, whatever the cuts), and reach the same ends.
func TestEpochsJoinPacesItsLabels(t *testing.T) {
	j := newJoinedEpochs(t, 300)
	run := func(maxPending int) (joinedOutcome, *snapshot.Store) {
		t.Helper()
		store := snapshot.NewStore(memblob.OpenBucket(nil), "")
		t.Cleanup(func() { store.Close() })
		cfg := j.config(store, memory.NewSink(), "w")
		cfg.Labels.Join.MaxPending = maxPending
		ctx, cancel := context.WithCancel(context.Background())
		x, done := j.start(ctx, cfg, store)
		return stopAt(t, x, done, cancel, j.waitLast(store)), store
	}
	want, _ := run(0)
	const bound = 40
	got, store := run(bound)
	if got.counts != want.counts || got.positions != want.positions {
		t.Errorf("paced by %d: outcomes %+v reaching %s, unbounded %+v reaching %s", bound, got.counts, got.positions, want.counts, want.positions)
	}
	lg := epochlog.New(store)
	epochs, err := lg.Epochs(context.Background(), "mixed")
	if err != nil {
		t.Fatal(err)
	}
	widest := int64(0)
	for _, e := range epochs {
		b, _, err := lg.Boundary(context.Background(), "mixed", e)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range b.Shards {
			if r.Labels != nil {
				widest = max(widest, r.Labels.To-r.Labels.From)
			}
		}
	}
	if widest > bound || widest == 0 {
		t.Errorf("the widest labels' range spans %d labels, want at most labels.max_pending %d (and some)", widest, bound)
	}
	if last := epochs[len(epochs)-1]; last < uint64(j.labels.Len(0)/bound) {
		t.Errorf("%d epochs for %d labels of a shard paced by %d", last, j.labels.Len(0), bound)
	}
}

// TestEpochsJoinWithAPendingExampleIsAnError resumes a model learned in
// epochs from a generation whose join of a shard holds an example waiting
// for its label, which no range leaves (docs/labels.md, section 11.2),
// its checksum sound: the worker stops with an error that names the shard
// and the example, where it panicked when the next range of that shard
// decided an example.
func TestEpochsJoinWithAPendingExampleIsAnError(t *testing.T) {
	j := newJoinedEpochs(t, 300)
	bucket := memblob.OpenBucket(nil)
	store := snapshot.NewStore(bucket, "")
	t.Cleanup(func() { store.Close() })
	ctx, cancel := context.WithCancel(context.Background())
	x, done := j.start(ctx, j.config(store, memory.NewSink(), "one"), store)
	stopAt(t, x, done, cancel, j.waitLast(store))

	// The newest generation, its join of shard 0 with its last example
	// pending.
	snap, err := store.Latest(context.Background(), "mixed", nil)
	if err != nil {
		t.Fatal(err)
	}
	shard := j.ex.Shard(0).String()
	st, err := consumer.DecodeJoinState(snap.Joins[shard])
	if err != nil {
		t.Fatal(err)
	}
	last := &st.Examples[len(st.Examples)-1]
	last.Learned = false
	if snap.Joins[shard], err = msgpack.Marshal(st); err != nil {
		t.Fatal(err)
	}
	data, err := snapshot.Marshal(snap)
	if err != nil {
		t.Fatal(err)
	}
	if err := bucket.WriteAll(context.Background(), snapshot.Key("", "mixed", snap.Generation), data, nil); err != nil {
		t.Fatal(err)
	}
	// A mark far past the quiet examples' windows decides them: the next
	// range of shard 0 learns them.
	end := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).Add(time.Hour)
	j.labels.AppendAt(0, end, wire.AppendMark(nil, wire.FormatJSON, "test"))

	snap, err = store.Latest(context.Background(), "mixed", nil)
	if err != nil {
		t.Fatal(err)
	}
	cfg := j.config(store, memory.NewSink(), "two")
	ctx, cancel = context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	err = continueEpochs(t, snap, cfg, nil, zaptest.NewLogger(t)).Run(ctx)
	want := fmt.Sprintf("join of shard %s: example %d at offset %d waits for its label", shard, len(st.Examples)-1, last.Offset)
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("Run: %v, want an error saying %q", err, want)
	}
}

// TestEpochsWaitForANewShardsLabels: the examples' topic has partitions
// that the labels' topic does not have yet, as between adding a partition
// to one and to the other: the worker is not ready, naming labels.topics
// and the missing partition, where it stopped for good, and once the
// labels' partitions appear it learns what a run that never missed them
// learns.
func TestEpochsWaitForANewShardsLabels(t *testing.T) {
	j := newJoinedEpochs(t, 100)
	run := func(labels *growingShards) joinedOutcome {
		t.Helper()
		store := snapshot.NewStore(memblob.OpenBucket(nil), "")
		t.Cleanup(func() { store.Close() })
		cfg := j.config(store, memory.NewSink(), "w")
		cfg.Labels.Shards = labels
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		x, done := j.start(ctx, cfg, store)
		if !labels.grown.Load() {
			wait.For(t, time.Minute, 5*time.Millisecond, "the worker not ready for a missing labels' partition", func() bool {
				select {
				case err := <-done:
					t.Fatalf("the worker stopped: %v", err)
				default:
				}
				return slices.ContainsFunc(x.NotReady(), func(r string) bool {
					return strings.Contains(r, "labels.topics: the labels have no partition memory:labels/")
				})
			})
			labels.grow()
		}
		return stopAt(t, x, done, cancel, j.waitLast(store))
	}
	whole := &growingShards{Log: j.labels}
	whole.grow()
	want := run(whole)
	got := run(&growingShards{Log: j.labels})
	if got.counts != want.counts || got.positions != want.positions {
		t.Errorf("labels' partitions added late: outcomes %+v reaching %s, want %+v reaching %s", got.counts, got.positions, want.counts, want.positions)
	}
}

// TestEpochsJoinPacesLabelsBesideTheExamples: the cutter reads a shard's
// labels at most twice the epoch's limit ahead (docs/labels.md, section
// 11.6), not to the labels' end, so that a backlog's labels are not all
// carried in every epoch's join; twice the labels read before when the
// shard's range stalled, so that an example whose label never comes is
// decided within a few epochs. The outcomes and the reached ends are
// those of epochs too large for the pace to bind.
func TestEpochsJoinPacesLabelsBesideTheExamples(t *testing.T) {
	t.Run("backlog", func(t *testing.T) {
		j := newJoinedEpochs(t, 500)
		// run returns the outcome, and the labels each epoch read by
		// shard, taken before the worker stops: no generation is written
		// before then, which would delete the boundaries below it.
		run := func(epochExamples int64) (joinedOutcome, []map[shardid.ID]int64, []string) {
			t.Helper()
			store := snapshot.NewStore(memblob.OpenBucket(nil), "")
			t.Cleanup(func() { store.Close() })
			cfg := j.config(store, memory.NewSink(), "w")
			cfg.EpochExamples = epochExamples
			cfg.SnapshotEvery = 1 << 30
			ctx, cancel := context.WithCancel(context.Background())
			x, done := j.start(ctx, cfg, store)
			last := j.waitLast(store)
			sizes, reasons := labelsRanges(t, store)
			if len(sizes) != int(last) {
				t.Fatalf("%d boundaries in the log, want one for each of the %d epochs", len(sizes), last)
			}
			return stopAt(t, x, done, cancel, last), sizes, reasons
		}
		want, _, _ := run(1 << 20)
		got, sizes, reasons := run(150)
		// The labels' backlog is cut at once, not at the interval, to
		// its end (docs/scale-out.md, section 3.4, rule (e)).
		if !slices.Contains(reasons, epochlog.CutBacklog) {
			t.Errorf("no epoch of %v was cut for the backlog", reasons)
		}
		if got.counts != want.counts || got.positions != want.positions {
			t.Errorf("paced: outcomes %+v reaching %s; in epochs the pace does not bind: %+v reaching %s", got.counts, got.positions, want.counts, want.positions)
		}
		for e := 1; e < len(sizes); e++ {
			for s, n := range sizes[e] {
				if bound := max(2*150, 2*sizes[e-1][s]); n > bound {
					t.Errorf("epoch %d reads %d labels of shard %s, more than %d (twice the limit, or twice the %d before)", e+1, n, s, bound, sizes[e-1][s])
				}
			}
		}
		if first := sizes[0][j.ex.Shard(0)]; first > 2*150 {
			t.Errorf("the first epoch reads %d labels of shard 0, of %d: more than twice the limit", first, j.labels.Len(0))
		}
	})
	t.Run("a label that never comes", func(t *testing.T) {
		// Every example's label at its own time but the first's: the
		// first is decided when the labels pass its window, 2,000
		// examples (1 ms apart) on.
		ex, labels := memory.NewLog("examples", joinPartitions), memory.NewLog("labels", joinPartitions)
		base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
		const n = 2500
		for p := range joinPartitions {
			for i := range n {
				at := base.Add(time.Duration(i) * time.Millisecond)
				ex.AppendAt(p, at, fmt.Appendf(nil, `{"id":"p%d-%d","features":{"a":%d}}`, p, i, i%7))
				if i > 0 {
					labels.AppendAt(p, at, fmt.Appendf(nil, `{"id":"p%d-%d","label":%d}`, p, i, 1-2*(i%2)))
				}
			}
		}
		j := &joinedEpochs{t: t, ex: ex, labels: labels}
		store := snapshot.NewStore(memblob.OpenBucket(nil), "")
		t.Cleanup(func() { store.Close() })
		cfg := j.config(store, memory.NewSink(), "w")
		cfg.EpochExamples = 20
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		x, done := j.start(ctx, cfg, store)
		wait.For(t, time.Minute, 5*time.Millisecond, "the first examples learned", func() bool {
			pos := x.Positions()
			for p := range joinPartitions {
				if pos[ex.Key(p)] == 0 {
					return false
				}
			}
			return true
		})
		// Read at 40 labels an epoch, the labels past the window would
		// take 50; doubled at each stalled epoch, 6.
		if e := x.Mixed(); e > 12 {
			t.Errorf("the first example of every shard was decided in epoch %d: the stalled ranges' labels did not double", e)
		}
		cancel()
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	})
}

// labelsRanges is, epoch by epoch from the first, the labels each shard's
// range read, by shard, and why the epoch was cut.
func labelsRanges(t *testing.T, store *snapshot.Store) ([]map[shardid.ID]int64, []string) {
	t.Helper()
	lg := epochlog.New(store)
	epochs, err := lg.Epochs(context.Background(), "mixed")
	if err != nil || len(epochs) == 0 {
		t.Fatalf("the epoch log lists %v: %v", epochs, err)
	}
	var out []map[shardid.ID]int64
	var reasons []string
	for _, e := range epochs {
		b, _, err := lg.Boundary(context.Background(), "mixed", e)
		if err != nil {
			t.Fatal(err)
		}
		sizes := map[shardid.ID]int64{}
		for _, r := range b.Shards {
			if r.Labels != nil {
				sizes[r.Shard] = r.Labels.To - r.Labels.From
			}
		}
		out = append(out, sizes)
		reasons = append(reasons, b.Cut.Reason)
	}
	return out, reasons
}

// TestEpochsJoinGoesOnPastAPurge: a shard whose examples below an
// offset were deleted (a purge, or retention) where the model's position
// lay: its ranges there hold no message, and each reaches its end rather
// than its start, so the epochs go on to the examples after the purge,
// and every shard reaches where it would have without the purge. Ended at
// its start, each such range was cut again as it was, for ever.
func TestEpochsJoinGoesOnPastAPurge(t *testing.T) {
	run := func(purge int64) joinedOutcome {
		t.Helper()
		j := newJoinedEpochs(t, 500)
		if purge > 0 {
			j.ex.Purge(0, purge)
		}
		store := snapshot.NewStore(memblob.OpenBucket(nil), "")
		t.Cleanup(func() { store.Close() })
		cfg := j.config(store, memory.NewSink(), "w")
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		x, done := j.start(ctx, cfg, store)
		return stopAt(t, x, done, cancel, j.waitLast(store))
	}
	want := run(0)
	// More than an epoch's limit: the first ranges of shard 0 are
	// empty.
	got := run(400)
	if got.positions != want.positions {
		t.Errorf("with shard 0 purged below 400 the shards reached %s, without %s", got.positions, want.positions)
	}
	if got.counts.Labels[consumer.LabelJoined] >= want.counts.Labels[consumer.LabelJoined] {
		t.Errorf("%d labels joined with 400 examples purged, %d without", got.counts.Labels[consumer.LabelJoined], want.counts.Labels[consumer.LabelJoined])
	}
}

// TestEpochsHeadReadsTheLabelsOfItsRanges: a shard's head whose join holds
// labels.max_pending labels for ids no example has, with its labels'
// watermark more than a window past its examples' (a mark, the examples
// quiet), stops reading labels; a range of its shard that reads labels
// past where the head stopped must still be written, where it waited
// for the head for ever, the worker ready and the examples after it
// never learned.
func TestEpochsHeadReadsTheLabelsOfItsRanges(t *testing.T) {
	const n, ghosts, bound = 1500, 30, 20
	ex, labels := memory.NewLog("examples", joinPartitions), memory.NewLog("labels", joinPartitions)
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for p := range joinPartitions {
		o := synth.DefaultOptions()
		o.Vocab, o.Features, o.Seed = 500, 12, uint64(41+p)
		s := synth.New(o)
		for i := range n {
			rec := s.Next()
			rec.Labeled = false
			b := synth.AppendJSON(nil, rec)
			ex.AppendAt(p, base.Add(time.Duration(i)*10*time.Millisecond), b[:len(b)-1])
		}
		last := base.Add((n - 1) * 10 * time.Millisecond)
		// Labels for ids no example has, at the examples' last time:
		// held, as no example comes a window after them.
		for i := range ghosts {
			labels.AppendAt(p, last, fmt.Appendf(nil, `{"id":"ghost%d","label":1}`, i))
		}
		// A mark an hour on closes every window: each example is
		// decided, learned with the default.
		labels.AppendAt(p, last.Add(time.Hour), []byte(`{"mark":"w"}`))
		for i := range 100 * ghosts {
			labels.AppendAt(p, last.Add(time.Hour), fmt.Appendf(nil, `{"id":"after%d","label":1}`, i))
		}
	}
	j := &joinedEpochs{t: t, ex: ex, labels: labels}
	store := snapshot.NewStore(memblob.OpenBucket(nil), "")
	t.Cleanup(func() { store.Close() })
	cfg := j.config(store, memory.NewSink(), "w")
	cfg.Labels.Join.MaxPending = bound
	ctx, cancel := context.WithCancel(context.Background())
	x, done := j.start(ctx, cfg, store)
	j.awaitLearned(t, x)
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}
