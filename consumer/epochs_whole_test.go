package consumer_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"gocloud.dev/blob/memblob"

	"github.com/hyperplane-ml/hyperplane/consumer"
	"github.com/hyperplane-ml/hyperplane/consumer/memory"
	"github.com/hyperplane-ml/hyperplane/internal/wait"
	"github.com/hyperplane-ml/hyperplane/learner"
	"github.com/hyperplane-ml/hyperplane/shardid"
	"github.com/hyperplane-ml/hyperplane/snapshot"
)

// pegasosLearner is epochLearner with Pegasos, whose mix rewrites every
// weight, over enough weights that an epoch's results change only some:
// the coordinates a mix changes are not those its results did.
func pegasosLearner() learner.Config {
	lc := epochLearner()
	lc.Algorithm = learner.Pegasos
	lc.HashBits = 18
	return lc
}

// TestEpochsOfAWholeMixDoNotDependOnTheWorkers: with a mix that rewrites
// the whole model, three workers stopped and started again, each reading
// the others' results from the log, end with the model of one worker,
// and agree on every base digest on the way.
func TestEpochsOfAWholeMixDoNotDependOnTheWorkers(t *testing.T) {
	oneAndThreeAgree(t, epochLog(600), pegasosLearner(), func(cfg *consumer.EpochConfig) { cfg.Rule = learner.MixAuto })
}

// TestEpochsOfAWholeMixWithAWorkerOwningNothing: a worker that owns no
// shard mixes every epoch from results it reads, and agrees with the
// worker that learned them, whether the mix rewrites the whole model or
// only what the results changed.
func TestEpochsOfAWholeMixWithAWorkerOwningNothing(t *testing.T) {
	arow := epochLearner()
	arow.HashBits = 18
	for name, lc := range map[string]learner.Config{"pegasos": pegasosLearner(), "arow": arow} {
		t.Run(name, func(t *testing.T) {
			data := epochLog(600)
			store := snapshot.NewStore(memblob.OpenBucket(nil), "")
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			cfg := epochConfig(data, store, memory.NewSink(), "learns")
			cfg.Rule = learner.MixAuto
			x, done := startEpochsOf(t, ctx, cfg, store, lc, nil)
			idle := epochConfig(data, store, memory.NewSink(), "reads")
			idle.Rule = learner.MixAuto
			idle.Owned = func() []shardid.ID { return nil }
			ctx2, cancel2 := context.WithCancel(context.Background())
			defer cancel2()
			y, done2 := startEpochsOf(t, ctx2, idle, store, lc, nil)
			last := waitComplete(t, store, data)
			want := finalDigest(t, x, done, cancel, last)
			if got := finalDigest(t, y, done2, cancel2, last); got != want {
				t.Fatalf("the worker that read every result holds %x, the one that learned them %x", got, want)
			}
		})
	}
}

// TestEpochsOfAWholeMixTakenOver: a worker that mixed an epoch from
// results it read, then takes every shard over, learns its ranges from
// the mixed model and ends with the model of one worker.
func TestEpochsOfAWholeMixTakenOver(t *testing.T) {
	data := epochLog(600)
	one := snapshot.NewStore(memblob.OpenBucket(nil), "")
	cfg := epochConfig(data, one, memory.NewSink(), "one")
	cfg.Rule = learner.MixAuto
	want := func() [32]byte {
		ctx, cancel := context.WithCancel(context.Background())
		x, done := startEpochsOf(t, ctx, cfg, one, pegasosLearner(), nil)
		return finalDigest(t, x, done, cancel, waitComplete(t, one, data))
	}()

	store := snapshot.NewStore(memblob.OpenBucket(nil), "")
	var moved atomic.Bool
	all := func() []shardid.ID {
		ids := make([]shardid.ID, 6)
		for p := range ids {
			ids[p] = data.Shard(p)
		}
		return ids
	}
	first := epochConfig(data, store, memory.NewSink(), "first")
	first.Rule = learner.MixAuto
	first.Owned = func() []shardid.ID {
		if moved.Load() {
			return nil
		}
		return all()
	}
	second := epochConfig(data, store, memory.NewSink(), "second")
	second.Rule = learner.MixAuto
	second.Owned = func() []shardid.ID {
		if moved.Load() {
			return all()
		}
		return nil
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	_, done := startEpochsOf(t, ctx, first, store, pegasosLearner(), nil)
	ctx2, cancel2 := context.WithCancel(context.Background())
	defer cancel2()
	y, done2 := startEpochsOf(t, ctx2, second, store, pegasosLearner(), nil)
	wait.For(t, time.Minute, time.Millisecond, "the second worker mixed two epochs it read", func() bool { return y.Mixed() >= 2 })
	moved.Store(true)
	last := waitComplete(t, store, data)
	if got := finalDigest(t, y, done2, cancel2, last); got != want {
		t.Fatalf("the worker that took the shards over holds %x, one worker %x", got, want)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("the first worker: %v", err)
	}
}
