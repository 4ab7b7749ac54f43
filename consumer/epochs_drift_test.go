package consumer_test

import (
	"context"
	"testing"

	"gocloud.dev/blob/memblob"

	"github.com/hyperplane-ml/hyperplane/consumer/memory"
	"github.com/hyperplane-ml/hyperplane/epochlog"
	"github.com/hyperplane-ml/hyperplane/learner/synth"
	"github.com/hyperplane-ml/hyperplane/snapshot"
)

// TestEpochsGrowAgainAfterADrift: epochs that have grown with the model
// (model.mixing.growth) are small again once a change of concept starts
// the mixed model afresh, as a new model's are: the new concept's first
// examples are mixed often. Two partitions share one stream whose concept
// changes at example 24,000 of 40,000: before it the epochs grow beyond
// 1,000 positions a shard; after the drift they hold 1,000 again.
func TestEpochsGrowAgainAfterADrift(t *testing.T) {
	const n, at = 40000, 24000
	o := synth.DefaultOptions()
	o.Vocab, o.Features, o.DriftAt = 200, 10, at
	s := synth.New(o)
	log := memory.NewLog("ex", 2)
	for i := range n {
		b := synth.AppendJSON(nil, s.Next())
		log.Append(i%2, b[:len(b)-1])
	}
	store := snapshot.NewStore(memblob.OpenBucket(nil), "")
	sink := memory.NewSink()
	cfg := epochConfig(log, store, sink, "w1")
	cfg.EpochExamples, cfg.Growth, cfg.SnapshotEvery, cfg.Keep = 100000, 8, 0, 0
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	x, done := startEpochs(t, ctx, cfg, store)
	last := waitComplete(t, store, log)
	finalDigest(t, x, done, cancel, last)

	lg := epochlog.New(store)
	var limits []int
	for e := uint64(1); e <= last; e++ {
		b, _, err := lg.Boundary(context.Background(), "mixed", e)
		if err != nil {
			t.Fatalf("boundary %d: %v", e, err)
		}
		if b.Cut.Reason == epochlog.CutExamples {
			limits = append(limits, b.Cut.EpochExamples)
		}
	}
	grown, again := false, false
	for i, l := range limits {
		grown = grown || l > 1000
		if grown && l == 1000 && i > 0 && limits[i-1] > 1000 {
			again = true
		}
	}
	if !grown || !again {
		t.Fatalf("epoch limits %v: want them to grow beyond 1000 and fall back to 1000 after the drift", limits)
	}
	if d := x.Model().Drifts(); d == 0 {
		t.Fatal("the mixed model found no drift")
	}
}
