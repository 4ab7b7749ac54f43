package consumer_test

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"
	"gocloud.dev/blob/memblob"

	"github.com/hyperplane-ml/hyperplane/consumer"
	"github.com/hyperplane-ml/hyperplane/consumer/memory"
	"github.com/hyperplane-ml/hyperplane/epochlog"
	"github.com/hyperplane-ml/hyperplane/internal/wait"
	"github.com/hyperplane-ml/hyperplane/snapshot"
)

// heldGenerationLog holds the write of the first generation: it waits
// for its context, then fails, as a worker killed during the write would
// leave it (absent), and every later generation fails too. Meanwhile it
// records the boundaries and results written.
type heldGenerationLog struct {
	consumer.EpochLog
	held chan struct{} // closed when the first write starts

	mu      sync.Mutex
	holding uint64 // the generation held, 0 before
	after   []uint64
	started bool
}

func (l *heldGenerationLog) Write(ctx context.Context, snap *snapshot.Snapshot) error {
	l.mu.Lock()
	if l.started {
		l.mu.Unlock()
		return errStoreDown
	}
	l.started, l.holding = true, snap.Generation
	l.mu.Unlock()
	close(l.held)
	<-ctx.Done()
	return ctx.Err()
}

func (l *heldGenerationLog) CreateBoundary(ctx context.Context, b *epochlog.Boundary) (*epochlog.Boundary, [32]byte, error) {
	stored, sha, err := l.EpochLog.CreateBoundary(ctx, b)
	l.note(b.Epoch, err)
	return stored, sha, err
}

func (l *heldGenerationLog) WriteShard(ctx context.Context, r *epochlog.ShardResult, base *epochlog.Base) error {
	err := l.EpochLog.WriteShard(ctx, r, base)
	l.note(r.Epoch, err)
	return err
}

// note records an object of epoch e written while the generation is held.
func (l *heldGenerationLog) note(e uint64, err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if err == nil && l.holding > 0 && e > l.holding {
		l.after = append(l.after, e)
	}
}

// writtenAfter is how many boundaries and results of epochs above the
// held generation were written while it was held, and that generation.
func (l *heldGenerationLog) writtenAfter() (int, uint64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.after), l.holding
}

// TestEpochsGenerationBesideTheNextEpoch: a due generation is written
// while the next epoch is learned (docs/scale-out.md, section 3.6): with
// the first generation's write held, the worker cuts the next epochs'
// boundaries and writes their results. Killed during that write, its
// generation absent, the worker leaves the log a restart learns on from:
// the same model as a run never killed.
func TestEpochsGenerationBesideTheNextEpoch(t *testing.T) {
	data := epochLog(600)
	one := snapshot.NewStore(memblob.OpenBucket(nil), "")
	want := runEpochs(t, data, epochConfig(data, one, memory.NewSink(), "one"), one)

	store := snapshot.NewStore(memblob.OpenBucket(nil), "")
	sink := memory.NewSink()
	cfg := epochConfig(data, store, sink, "killed")
	held := &heldGenerationLog{EpochLog: cfg.Log, held: make(chan struct{})}
	cfg.Log = held
	cfg.Worker.ShutdownTimeout = 2 * time.Second
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	_, done := runUntilHeld(t, ctx, cfg, held.held, "a generation was written")
	// Two epochs on, while generation g is still being written: the next
	// epoch was cut and learned, and the one after it cut.
	wait.For(t, time.Minute, 5*time.Millisecond, "the next epochs written while the generation is", func() bool {
		n, _ := held.writtenAfter()
		return n >= 2
	})
	_, g := held.writtenAfter()
	cancel()
	<-done // the kill: the last generation is refused too
	if gens, err := store.Generations(context.Background(), "mixed"); err != nil || slices.Contains(gens, g) {
		t.Fatalf("generations %v (%v): %d was to be absent", gens, err, g)
	}
	lg := epochlog.New(store)
	if _, _, err := lg.Boundary(context.Background(), "mixed", g+1); err != nil {
		t.Fatalf("epoch %d's boundary, cut while generation %d was written: %v", g+1, g, err)
	}

	ctx, cancel = context.WithCancel(context.Background())
	defer cancel()
	again, stopped := startEpochs(t, ctx, epochConfig(data, store, sink, "restarted"), store)
	if got := finalDigest(t, again, stopped, cancel, waitComplete(t, store, data)); got != want {
		t.Fatalf("after the kill the model is %x, without it %x", got, want)
	}
}

// runUntilHeld starts the epochs of a new model of cfg and returns once
// held is closed: the test's log holds a write there, and what names it.
// done reports the worker's end, which may be an error (a killed
// worker's).
func runUntilHeld(t *testing.T, ctx context.Context, cfg consumer.EpochConfig, held <-chan struct{}, what string) (*consumer.Epochs, <-chan error) {
	t.Helper()
	m, e, prev, pos, err := consumer.Continue(nil, epochLearner(), cfg.ConfigDigest)
	if err != nil {
		t.Fatal(err)
	}
	x := consumer.NewEpochs(cfg, m, e, prev, pos, nil, zaptest.NewLogger(t))
	done := make(chan error, 1)
	go func() { done <- x.Run(ctx) }()
	select {
	case <-held:
	case err := <-done:
		t.Fatalf("the worker stopped (%v) before %s", err, what)
	case <-time.After(time.Minute):
		t.Fatalf("in a minute, never %s", what)
	}
	return x, done
}
