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
// the floor of 250 positions a shard; after the drift they hold 250 again.
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
	cfg.EpochExamples, cfg.Growth, cfg.SnapshotEvery, cfg.Keep = 100000, 16, 0, 0
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
	const floor = 250
	grown, again := false, false
	for i, l := range limits {
		grown = grown || l > floor
		if grown && l == floor && i > 0 && limits[i-1] > floor {
			again = true
		}
	}
	if !grown || !again {
		t.Fatalf("epoch limits %v: want them to grow beyond %d and fall back to %d after the drift", limits, floor, floor)
	}
	if d := x.Model().Drifts(); d == 0 {
		t.Fatal("the mixed model found no drift")
	}
}
