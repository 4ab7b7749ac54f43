package consumer_test

import (
	"context"
	"fmt"
	"testing"

	"gocloud.dev/blob/memblob"

	"github.com/hyperplane-ml/hyperplane/consumer"
	"github.com/hyperplane-ml/hyperplane/consumer/memory"
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
	log := epochLog(600)
	one := snapshot.NewStore(memblob.OpenBucket(nil), "")
	cfg := epochConfig(log, one, memory.NewSink(), "one")
	cfg.Rule = learner.MixAuto
	ctx, cancel := context.WithCancel(context.Background())
	x, done := startEpochsOf(t, ctx, cfg, one, pegasosLearner(), nil)
	last := waitComplete(t, one, log)
	want := finalDigest(t, x, done, cancel, last)

	three := snapshot.NewStore(memblob.OpenBucket(nil), "")
	sink := memory.NewSink()
	threeWorkersAgree(t, three, log, last, want, 1, 4, func(ctx context.Context, i int, owned []string) (*consumer.Epochs, <-chan error) {
		cfg := epochConfig(log, three, sink, fmt.Sprintf("w%d", i))
		cfg.Rule = learner.MixAuto
		cfg.Owned = func() []shardid.ID { return shardIDs(owned) }
		return startEpochsOf(t, ctx, cfg, three, pegasosLearner(), nil)
	})
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
