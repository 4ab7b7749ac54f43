package consumer_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"go.uber.org/zap/zaptest"
	"gocloud.dev/blob/memblob"

	"github.com/hyperplane-ml/hyperplane/consumer/memory"
	"github.com/hyperplane-ml/hyperplane/epochlog"
	"github.com/hyperplane-ml/hyperplane/shardid"
	"github.com/hyperplane-ml/hyperplane/snapshot"
)

// TestEpochsIdleTailOfTwoWorkers: two workers of one model, each owning
// half of the shards, whose epoch_examples may differ (a rolling change
// of configuration), learn data that arrives over time and then stops.
// A generation holding every shard's end is written within
// snapshot.interval and the mixing interval of the last message.
func TestEpochsIdleTailOfTwoWorkers(t *testing.T) {
	for _, examples := range [][2]int64{{100000, 100000}, {100000, 1000}, {1000, 100000}, {100000, 5000}} {
		t.Run(fmt.Sprintf("%d-%d", examples[0], examples[1]), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				const partitions, steps, perStep = 4, 30, 397
				data := memory.NewLog("ex", partitions)
				msgs, _ := messages(steps * perStep)
				store := snapshot.NewStore(memblob.OpenBucket(nil), "")
				ctx, cancel := context.WithCancel(context.Background())
				defer cancel()
				owners := [][]string{{data.Key(0), data.Key(2)}, {data.Key(1), data.Key(3)}}
				var done []<-chan error
				for i, name := range []string{"a", "b"} {
					cfg := epochConfig(nil, store, memory.NewSink(), name)
					cfg.Shards = data
					owned := owners[i]
					cfg.Owned = func() []shardid.ID { return shardIDs(owned) }
					cfg.EpochExamples = examples[i]
					cfg.Growth = 16
					cfg.Interval = 5 * time.Second
					cfg.SnapshotEvery = 100000
					cfg.SnapshotInterval = time.Second
					_, d := startEpochs(t, ctx, cfg, store)
					done = append(done, d)
				}
				for s := range steps {
					for p := range partitions {
						data.Append(p, msgs[s*perStep:(s+1)*perStep]...)
					}
					time.Sleep(100 * time.Millisecond)
				}
				// The last message is in; learning takes no time in the
				// bubble, so what is due by snapshot.interval and the
				// mixing interval is written by then.
				time.Sleep(time.Second + 5*time.Second + time.Second)
				synctest.Wait()
				gens, err := store.Generations(context.Background(), "mixed")
				if err != nil || len(gens) == 0 {
					t.Fatalf("generations %v (%v)", gens, err)
				}
				snap, err := store.Load(context.Background(), "mixed", gens[len(gens)-1])
				if err != nil {
					t.Fatal(err)
				}
				for p := range partitions {
					if got := snap.Positions[data.Key(p)]; got != int64(data.Len(p)) {
						t.Errorf("generation %d holds partition %d up to %d of %d, 7 s after its last message", snap.Generation, p, got, data.Len(p))
					}
				}
				cancel()
				for _, d := range done {
					<-d
				}
			})
		})
	}
}

// TestEpochsIdleTailOnTime: data that comes after a generation, and then
// stops, is cut and written when snapshot.interval since that generation
// ends, not at the idle poll after it (which backs off to 500 ms).
func TestEpochsIdleTailOnTime(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const partitions, perPart = 4, 300
		data := memory.NewLog("ex", partitions)
		msgs, _ := messages(2 * partitions * perPart)
		store := snapshot.NewStore(memblob.OpenBucket(nil), "")
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		cfg := epochConfig(nil, store, memory.NewSink(), "w")
		cfg.Shards = data
		cfg.EpochExamples = 100000
		cfg.Interval = 5 * time.Second
		cfg.SnapshotEvery = 100000
		cfg.SnapshotInterval = time.Second
		_, done := startEpochs(t, ctx, cfg, store)
		// newest is the newest generation, once one holds every message
		// appended so far.
		newest := func() *snapshot.Snapshot {
			snap, err := store.Latest(context.Background(), "mixed", nil)
			if err != nil {
				return nil
			}
			for p := range partitions {
				if snap.Positions[data.Key(p)] != int64(data.Len(p)) {
					return nil
				}
			}
			return snap
		}
		appendHalf := func(half int) {
			for p := range partitions {
				at := (half*partitions + p) * perPart
				data.Append(p, msgs[at:at+perPart]...)
			}
		}
		// Time in the bubble is the fake clock: each sleep below returns
		// only once every goroutine of the worker is blocked, so the
		// loops wait for the generation itself, and the 300 ms is part
		// of the scenario (data 300 ms after a generation), however
		// busy the machine.
		appendHalf(0)
		var first *snapshot.Snapshot
		for first = newest(); first == nil; first = newest() {
			time.Sleep(10 * time.Millisecond)
		}
		// The rest comes soon after the generation, and then nothing.
		time.Sleep(300 * time.Millisecond)
		appendHalf(1)
		var tail *snapshot.Snapshot
		for tail = newest(); tail == nil; tail = newest() {
			time.Sleep(10 * time.Millisecond)
		}
		if late := tail.Created.Sub(first.Created); late > cfg.SnapshotInterval+100*time.Millisecond {
			t.Errorf("the tail's generation %d was written %v after generation %d; snapshot.interval is %v", tail.Generation, late, first.Generation, cfg.SnapshotInterval)
		}
		cancel()
		<-done
	})
}

// staleFirstRead is a log whose first read of a boundary answers "not
// found", as a read that raced the boundary's creation by another worker
// does.
type staleFirstRead struct {
	*epochlog.Log
	once sync.Once
}

func (l *staleFirstRead) Boundary(ctx context.Context, model string, e uint64) (*epochlog.Boundary, [32]byte, error) {
	stale := false
	l.once.Do(func() { stale = true })
	if stale {
		return nil, [32]byte{}, fmt.Errorf("epoch %d's boundary: %w", e, snapshot.ErrNotFound)
	}
	return l.Log.Boundary(ctx, model, e)
}

// TestEpochsBoundaryCutMeanwhileIsNoGap: a worker that finds no boundary
// of its next epoch while another worker cuts it, and the epochs after it,
// follows them: a boundary is missing only if it is still absent once a
// later one is seen. It holds the model of the worker that cut them, and
// begins no new history.
func TestEpochsBoundaryCutMeanwhileIsNoGap(t *testing.T) {
	data := epochLog(300)
	store := snapshot.NewStore(memblob.OpenBucket(nil), "")
	ctx, cancel := context.WithCancel(context.Background())
	x, done := startEpochs(t, ctx, epochConfig(data, store, memory.NewSink(), "first"), store)
	last := waitComplete(t, store, data)
	want := finalDigest(t, x, done, cancel, last)

	cfg := epochConfig(data, store, memory.NewSink(), "late")
	cfg.Log = &staleFirstRead{Log: epochlog.New(store)}
	// It starts from the oldest generation, below the log's later epochs.
	gens, err := store.Generations(context.Background(), "mixed")
	if err != nil || len(gens) == 0 || gens[0] >= last {
		t.Fatalf("generations %v (%v), want one below the last epoch %d", gens, err, last)
	}
	snap, err := store.Load(context.Background(), "mixed", gens[0])
	if err != nil {
		t.Fatal(err)
	}
	late := continueEpochs(t, snap, cfg, nil, zaptest.NewLogger(t))
	ctx, cancel = context.WithCancel(context.Background())
	lateDone := make(chan error, 1)
	go func() { lateDone <- late.Run(ctx) }()
	if got := finalDigest(t, late, lateDone, cancel, last); got != want {
		t.Fatalf("the late worker holds %x at epoch %d, the log's model is %x", got, late.Mixed(), want)
	}
	if late.Mixed() != last {
		t.Fatalf("the late worker mixed up to epoch %d, the log ends at %d", late.Mixed(), last)
	}
}
