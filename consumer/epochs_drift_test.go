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

// TestEpochsStartAtTheirFloor: a growing epoch holds at least
// EpochConfig.MinEpochExamples positions a shard, the default floor when
// it is 0, and 1/Growth of what each shard learned before it once that
// is more. Two partitions of 20,000 examples, growth 8.
func TestEpochsStartAtTheirFloor(t *testing.T) {
	const n, shards, growth = 20000, 2, 8
	for _, floor := range []int64{0, 600} {
		want := floor
		if want == 0 {
			want = consumer.DefaultMinEpochExamples
		}
		log := memory.NewLog("ex", shards)
		s := synth.New(synth.DefaultOptions())
		for i := range n {
			b := synth.AppendJSON(nil, s.Next())
			log.Append(i%shards, b[:len(b)-1])
		}
		store, last, _ := learnAll(t, log, func(cfg *consumer.EpochConfig) {
			cfg.EpochExamples, cfg.Growth, cfg.MinEpochExamples, cfg.SnapshotEvery, cfg.Keep = 100000, growth, floor, 0, 0
		})
		lg := epochlog.New(store)
		var limits []int
		for e := uint64(1); e <= last; e++ {
			b, _, err := lg.Boundary(context.Background(), "mixed", e)
			if err != nil {
				t.Fatalf("floor %d: boundary %d: %v", floor, e, err)
			}
			if b.Cut.Reason != epochlog.CutExamples {
				continue
			}
			learned := int64(0)
			for _, r := range b.Shards {
				learned += r.From
			}
			if l, w := int64(b.Cut.EpochExamples), max(want, learned/shards/growth); l != w {
				t.Fatalf("floor %d: epoch %d, after %d examples: the limit is %d, want %d", floor, e, learned, l, w)
			}
			limits = append(limits, b.Cut.EpochExamples)
		}
		if len(limits) < 2 || int64(limits[0]) != want || int64(limits[len(limits)-1]) <= want {
			t.Fatalf("floor %d: epoch limits %v: want them to start at %d and grow beyond it", floor, limits, want)
		}
	}
}
