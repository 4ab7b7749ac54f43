package consumer_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"go.uber.org/zap/zaptest"
	"gocloud.dev/blob/memblob"

	"github.com/hyperplane-ml/hyperplane/consumer"
	"github.com/hyperplane-ml/hyperplane/consumer/memory"
	"github.com/hyperplane-ml/hyperplane/epochlog"
	"github.com/hyperplane-ml/hyperplane/shardid"
	"github.com/hyperplane-ml/hyperplane/snapshot"
)

// errStoreDown is what a store in an outage answers.
var errStoreDown = errors.New("store unreachable")

// outageLog is a store that goes down when trip says so for an operation
// about to run (its name and epoch), and stays down until up is called:
// every operation then fails as an unreachable store's would.
type outageLog struct {
	*epochlog.Log
	trip func(op string, epoch uint64) bool

	mu   sync.Mutex
	down bool
	// failed counts the operations refused while down.
	failed int
}

func (l *outageLog) check(op string, epoch uint64) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.down && l.trip != nil && l.trip(op, epoch) {
		l.down, l.trip = true, nil
	}
	if l.down {
		l.failed++
		return errStoreDown
	}
	return nil
}

func (l *outageLog) up() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.down = false
}

func (l *outageLog) refused() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.failed
}

func (l *outageLog) CreateBoundary(ctx context.Context, b *epochlog.Boundary) (*epochlog.Boundary, [32]byte, error) {
	if err := l.check("CreateBoundary", b.Epoch); err != nil {
		return nil, [32]byte{}, err
	}
	return l.Log.CreateBoundary(ctx, b)
}

func (l *outageLog) Boundary(ctx context.Context, model string, e uint64) (*epochlog.Boundary, [32]byte, error) {
	if err := l.check("Boundary", e); err != nil {
		return nil, [32]byte{}, err
	}
	return l.Log.Boundary(ctx, model, e)
}

func (l *outageLog) WriteShard(ctx context.Context, r *epochlog.ShardResult, base *epochlog.Base) error {
	if err := l.check("WriteShard", r.Epoch); err != nil {
		return err
	}
	return l.Log.WriteShard(ctx, r, base)
}

func (l *outageLog) Shard(ctx context.Context, model string, e uint64, shard shardid.ID, base *epochlog.Base) (*epochlog.ShardResult, error) {
	if err := l.check("Shard", e); err != nil {
		return nil, err
	}
	return l.Log.Shard(ctx, model, e, shard, base)
}

func (l *outageLog) ShardExists(ctx context.Context, model string, e uint64, shard shardid.ID) (bool, error) {
	if err := l.check("ShardExists", e); err != nil {
		return false, err
	}
	return l.Log.ShardExists(ctx, model, e, shard)
}

func (l *outageLog) Write(ctx context.Context, snap *snapshot.Snapshot) error {
	if err := l.check("Write", snap.Epoch); err != nil {
		return err
	}
	return l.Log.Write(ctx, snap)
}

func (l *outageLog) Generations(ctx context.Context, model string) ([]uint64, error) {
	if err := l.check("Generations", 0); err != nil {
		return nil, err
	}
	return l.Log.Generations(ctx, model)
}

func (l *outageLog) Load(ctx context.Context, model string, gen uint64) (*snapshot.Snapshot, error) {
	if err := l.check("Load", gen); err != nil {
		return nil, err
	}
	return l.Log.Load(ctx, model, gen)
}

// runEpochs runs one worker's epochs over data until its last epoch is
// mixed and returns the mixed model's digest.
func runEpochs(t *testing.T, data *memory.Log, cfg consumer.EpochConfig, store *snapshot.Store) [32]byte {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	x, done := startEpochs(t, ctx, cfg, store)
	return finalDigest(t, x, done, cancel, waitComplete(t, store, data))
}

// oneWorkerDigest is the model one worker mixes over data, at
// epochConfig, on a store of its own: what the tests of other runs over
// data end at.
func oneWorkerDigest(t *testing.T, data *memory.Log) [32]byte {
	t.Helper()
	store := snapshot.NewStore(memblob.OpenBucket(nil), "")
	return runEpochs(t, data, epochConfig(data, store, memory.NewSink(), "one"), store)
}

// TestEpochsWaitOutAStoreOutage: a store that refuses every operation
// from the first one of a kind (a shard's result, a boundary, a
// generation) after epoch 1 makes the epochs not ready, with the reason,
// and they wait: Run does not return. Once the store is back they go on
// to the model of a run without the outage.
func TestEpochsWaitOutAStoreOutage(t *testing.T) {
	want := func() [32]byte {
		data := epochLog(600)
		store := snapshot.NewStore(memblob.OpenBucket(nil), "")
		return runEpochs(t, data, epochConfig(data, store, memory.NewSink(), "calm"), store)
	}()
	for _, op := range []string{"WriteShard", "CreateBoundary", "Write"} {
		t.Run(op, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				data := epochLog(600)
				store := snapshot.NewStore(memblob.OpenBucket(nil), "")
				outage := &outageLog{Log: epochlog.New(store), trip: func(o string, e uint64) bool { return o == op && e >= 2 }}
				cfg := epochConfig(data, store, memory.NewSink(), "w")
				cfg.Log = outage
				ctx, cancel := context.WithCancel(context.Background())
				defer cancel()
				x, done := startEpochs(t, ctx, cfg, store)
				// Every goroutine waits: for the store, to retry.
				synctest.Wait()
				select {
				case err := <-done:
					t.Fatalf("Run returned during the outage: %v", err)
				default:
				}
				if outage.refused() == 0 {
					t.Fatalf("the store was never down (no %s after epoch 1)", op)
				}
				reasons := strings.Join(x.NotReady(), "\n")
				if !strings.Contains(reasons, consumer.NotReadySnapshots+": ") || !strings.Contains(reasons, errStoreDown.Error()) {
					t.Fatalf("during the outage the epochs say %q, want the snapshots failing and why", reasons)
				}
				// An hour of outage, retried, changes nothing.
				time.Sleep(time.Hour)
				synctest.Wait()
				refused := outage.refused()
				outage.up()
				got := finalDigest(t, x, done, cancel, waitComplete(t, store, data))
				if got != want {
					t.Fatalf("after the outage the model is %x, without one %x", got, want)
				}
				if refused < 10 {
					t.Errorf("%d operations were refused in an hour of outage: the epochs did not retry", refused)
				}
			})
		})
	}
}

// TestEpochsShutdownDuringAStoreOutage: a worker stopped while its store
// is down returns within its shutdown timeout, saying what was not
// written.
func TestEpochsShutdownDuringAStoreOutage(t *testing.T) {
	for name, trip := range map[string]func(string, uint64) bool{
		// Only the generation is left to write.
		"generation": func(o string, _ uint64) bool { return o == "Write" },
		// A complete range's result of epoch 3, then the generation of
		// epoch 2, never written before: one shutdown.timeout bounds
		// both.
		"result and generation": func(o string, e uint64) bool { return o == "WriteShard" && e >= 3 },
	} {
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				data := epochLog(600)
				store := snapshot.NewStore(memblob.OpenBucket(nil), "")
				outage := &outageLog{Log: epochlog.New(store), trip: trip}
				cfg := epochConfig(data, store, memory.NewSink(), "w")
				cfg.Log = outage
				cfg.Worker.ShutdownTimeout = 3 * time.Second
				if name == "result and generation" {
					cfg.SnapshotEvery = 1 << 30
				}
				snap, err := store.Latest(context.Background(), "mixed", nil)
				if !errors.Is(err, snapshot.ErrNotFound) {
					t.Fatalf("a new store has %v, %v", snap, err)
				}
				x := newEpochs(t, cfg)
				ctx, cancel := context.WithCancel(context.Background())
				done := make(chan error, 1)
				go func() { done <- x.Run(ctx) }()
				synctest.Wait()
				if outage.refused() == 0 {
					t.Fatal("the store was never down")
				}
				start := time.Now()
				cancel()
				err = <-done
				if took := time.Since(start); took > cfg.Worker.ShutdownTimeout {
					t.Errorf("the shutdown took %v, over its timeout of %v", took, cfg.Worker.ShutdownTimeout)
				}
				if err == nil || !strings.Contains(err.Error(), "not written") || !strings.Contains(err.Error(), errStoreDown.Error()) {
					t.Fatalf("Run returned %v, want the generation not written, and why", err)
				}
			})
		})
	}
}

// TestEpochsSnapshotAnIdleTail: when the stream stops, the newest mixed
// model is written once snapshot.interval has passed, though no epoch
// follows it.
func TestEpochsSnapshotAnIdleTail(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		data := epochLog(600)
		store := snapshot.NewStore(memblob.OpenBucket(nil), "")
		cfg := epochConfig(data, store, memory.NewSink(), "w")
		cfg.SnapshotEvery = 0
		cfg.SnapshotInterval = time.Minute
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		x, done := startEpochs(t, ctx, cfg, store)
		// Learning takes no time in the bubble: in a second every epoch
		// is mixed, the last one cut by the mixing interval, and none
		// is written yet.
		time.Sleep(time.Second)
		synctest.Wait()
		last, ok := complete(context.Background(), store, data)
		if !ok || x.Mixed() != last {
			t.Fatalf("the epochs stopped at %d before the data's last epoch (%d, %v)", x.Mixed(), last, ok)
		}
		if gens, err := store.Generations(context.Background(), "mixed"); err != nil || len(gens) != 0 {
			t.Fatalf("generations %v (%v) before the interval passed", gens, err)
		}
		time.Sleep(cfg.SnapshotInterval + time.Second)
		synctest.Wait()
		gens, err := store.Generations(context.Background(), "mixed")
		if err != nil || len(gens) == 0 || gens[len(gens)-1] != last {
			t.Fatalf("generations %v (%v) a minute after the stream went idle, want the last epoch %d", gens, err, last)
		}
		cancel()
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	})
}

// newEpochs is a worker's epochs over a new model.
func newEpochs(t *testing.T, cfg consumer.EpochConfig) *consumer.Epochs {
	t.Helper()
	m, e, prev, pos, err := consumer.Continue(nil, epochLearner(), cfg.ConfigDigest)
	if err != nil {
		t.Fatal(err)
	}
	return consumer.NewEpochs(cfg, m, e, prev, pos, nil, zaptest.NewLogger(t))
}

// damagedLog is a store whose every boundary reads as damaged.
type damagedLog struct {
	*epochlog.Log
	err error
}

func (l damagedLog) Boundary(context.Context, string, uint64) (*epochlog.Boundary, [32]byte, error) {
	return nil, [32]byte{}, l.err
}

// TestEpochsStopOnWhatNoRetryMends: an artefact that reads as damaged, or
// is of a newer format, stops the epochs with its error at once: waiting
// would not mend it.
func TestEpochsStopOnWhatNoRetryMends(t *testing.T) {
	for _, cause := range []error{snapshot.ErrCorrupt, snapshot.ErrNewerFormat} {
		t.Run(cause.Error(), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				data := epochLog(10)
				store := snapshot.NewStore(memblob.OpenBucket(nil), "")
				cfg := epochConfig(data, store, memory.NewSink(), "w")
				cfg.Log = damagedLog{epochlog.New(store), fmt.Errorf("epoch 1: %w", cause)}
				x := newEpochs(t, cfg)
				done := make(chan error, 1)
				go func() { done <- x.Run(context.Background()) }()
				synctest.Wait()
				select {
				case err := <-done:
					if !errors.Is(err, cause) {
						t.Fatalf("Run returned %v, want %v", err, cause)
					}
				default:
					t.Fatalf("the epochs still retry an artefact that reads as %v", cause)
				}
			})
		})
	}
}

// errOutputDown is what an output in an outage answers.
var errOutputDown = errors.New("output topic unreachable")

// TestEpochsWaitOutAnOutputOutage: outputs that fail while the ranges of
// an epoch reach their ends make the epochs not ready for their outputs,
// and they wait, however long: a range that is complete but whose
// outputs are not durable is no shutdown, so shutdown.timeout does not
// bound it and Run does not return. Once the outputs are back the
// epochs go on to the model of a run without the outage, every
// prediction published.
func TestEpochsWaitOutAnOutputOutage(t *testing.T) {
	keys := func(sink *memory.Sink) map[string]bool {
		ids := map[string]bool{}
		for _, o := range sink.Outputs("pred") {
			ids[string(o.Key)] = true
		}
		return ids
	}
	calm := memory.NewSink()
	want := func() [32]byte {
		data := epochLog(600)
		store := snapshot.NewStore(memblob.OpenBucket(nil), "")
		return runEpochs(t, data, epochConfig(data, store, calm, "calm"), store)
	}()
	synctest.Test(t, func(t *testing.T) {
		data, store, sink, cfg := outputsDown()
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		x, done := startEpochs(t, ctx, cfg, store)
		// Every range of the first epoch is read and waits for its
		// outputs, retrying, far longer than shutdown.timeout.
		time.Sleep(time.Hour)
		synctest.Wait()
		select {
		case err := <-done:
			t.Fatalf("Run returned during the outputs' outage: %v", err)
		default:
		}
		reasons := strings.Join(x.NotReady(), "\n")
		if !strings.Contains(reasons, consumer.NotReadyOutputs+": ") || !strings.Contains(reasons, errOutputDown.Error()) {
			t.Fatalf("during the outage the epochs say %q, want the outputs failing and why", reasons)
		}
		if x.Mixed() != 0 {
			t.Fatalf("epoch %d mixed while no output was durable", x.Mixed())
		}
		sink.Fail(nil)
		got := finalDigest(t, x, done, cancel, waitComplete(t, store, data))
		if got != want {
			t.Fatalf("after the outage the model is %x, without one %x", got, want)
		}
		if got, want := keys(sink), keys(calm); !maps.Equal(got, want) {
			t.Fatalf("%d examples' predictions published, %d without the outage", len(got), len(want))
		}
	})
}

// outputsDown is a worker's epochs over a log of its own, with a store
// of its own, whose outputs' sink fails every publish with errOutputDown,
// and a shutdown timeout of 3 s.
func outputsDown() (*memory.Log, *snapshot.Store, *memory.Sink, consumer.EpochConfig) {
	data := epochLog(600)
	store := snapshot.NewStore(memblob.OpenBucket(nil), "")
	sink := memory.NewSink()
	sink.Fail(errOutputDown)
	cfg := epochConfig(data, store, sink, "w")
	cfg.Worker.ShutdownTimeout = 3 * time.Second
	return data, store, sink, cfg
}

// TestEpochsShutdownDuringAnOutputOutage: a worker stopped while its
// outputs are down returns within its shutdown timeout with an error
// saying what it could not publish, as a worker of one partition does
// (docs/operations.md, "Stopping": exit status 1), not nil.
func TestEpochsShutdownDuringAnOutputOutage(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		_, _, _, cfg := outputsDown()
		x := newEpochs(t, cfg)
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- x.Run(ctx) }()
		// A minute of the bubble's clock: every goroutine of the epochs
		// is blocked retrying its outputs when Wait returns.
		time.Sleep(time.Minute)
		synctest.Wait()
		if reasons := strings.Join(x.NotReady(), "\n"); !strings.Contains(reasons, consumer.NotReadyOutputs+": ") {
			t.Fatalf("before the stop the epochs say %q, want the outputs failing", reasons)
		}
		start := time.Now()
		cancel()
		err := <-done
		if took := time.Since(start); took > cfg.Worker.ShutdownTimeout {
			t.Errorf("the shutdown took %v, over its timeout of %v", took, cfg.Worker.ShutdownTimeout)
		}
		var shut *consumer.ShutdownError
		if !errors.As(err, &shut) || !strings.Contains(err.Error(), "were not published") || !strings.Contains(err.Error(), errOutputDown.Error()) {
			t.Fatalf("Run returned %v, want what was not published, and why", err)
		}
	})
}
