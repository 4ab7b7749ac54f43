package consumer_test

import (
	"context"
	"testing"

	"github.com/hyperplane-ml/hyperplane/consumer"
	"github.com/hyperplane-ml/hyperplane/consumer/memory"
	"github.com/hyperplane-ml/hyperplane/epochlog"
	"github.com/hyperplane-ml/hyperplane/learner/synth"
)

// TestEpochsGrowAgainAfterADrift: epochs that have grown with the model
// (model.mixing.growth) are small again once a change of concept starts
// the mixed model afresh, as a new model's are, though not smaller than
// 1/4 of what the whole history gives: the new concept's first examples
// are mixed often, without a barrier every few hundred examples. Two
// partitions share one stream whose concept changes at example 100,000
// of 160,000: before it the epochs grow beyond the floor of 250
// positions a shard; after the drift they fall to 1/4 of the history's
// limit (the examples learned before the epoch, over 2 shards, over 16,
// over 4), which is more than the floor here.
func TestEpochsGrowAgainAfterADrift(t *testing.T) {
	const n, at, shards, growth = 160000, 100000, 2, 16
	o := synth.DefaultOptions()
	o.Vocab, o.Features, o.DriftAt = 200, 10, at
	s := synth.New(o)
	log := memory.NewLog("ex", shards)
	for i := range n {
		b := synth.AppendJSON(nil, s.Next())
		log.Append(i%shards, b[:len(b)-1])
	}
	store, last, x := learnAll(t, log, func(cfg *consumer.EpochConfig) {
		cfg.EpochExamples, cfg.Growth, cfg.SnapshotEvery, cfg.Keep = 100000, growth, 0, 0
	})

	lg := epochlog.New(store)
	const floor = 250
	prev, fell := 0, false
	var limits []int
	for e := uint64(1); e <= last && !fell; e++ {
		b, _, err := lg.Boundary(context.Background(), "mixed", e)
		if err != nil {
			t.Fatalf("boundary %d: %v", e, err)
		}
		if b.Cut.Reason != epochlog.CutExamples {
			continue
		}
		l := b.Cut.EpochExamples
		limits = append(limits, l)
		if prev > floor && l < prev {
			fell = true
			learned := int64(0)
			for _, r := range b.Shards {
				learned += r.From
			}
			if want := max(floor, int(learned/shards/growth/4)); l != want || l <= floor {
				t.Fatalf("epoch %d, after %d examples: the limit fell from %d to %d, want %d (1/4 of the history's), more than %d", e, learned, prev, l, want, floor)
			}
		}
		prev = l
	}
	if !fell {
		t.Fatalf("epoch limits %v: want them to grow beyond %d and fall after the drift", limits, floor)
	}
	if d := x.Model().Drifts(); d == 0 {
		t.Fatal("the mixed model found no drift")
	}
}
