package learner_test

import (
	"fmt"
	"strconv"
	"testing"

	"github.com/hyperplane-ml/hyperplane/learner"
	"github.com/hyperplane-ml/hyperplane/learner/synth"
)

// epochStates is an epoch of the default learner (AROW, 2^18 weights)
// over shards shards of a synth stream of vocab features: a base that
// learned 20,000 examples, and each shard's state after per more
// examples from it, with the coordinates each changed.
func epochStates(b *testing.B, vocab, shards, per int) (base *learner.Model, states []*learner.State, changed []learner.Coords) {
	b.Helper()
	cfg := learner.DefaultConfig()
	o := synth.DefaultOptions()
	o.Vocab = vocab
	s := synth.New(o)
	h := learner.NewHasher(cfg.HashBits, cfg.HashSeed)
	var x learner.Example
	learn := func(m *learner.Model, n int) {
		for range n {
			rec := s.Next()
			x.Reset()
			for i, k := range rec.Names {
				x.Add(learner.Index(h, "f"+strconv.Itoa(k)), rec.Values[i])
			}
			x.Labeled, x.Label = rec.Labeled, rec.Label
			m.Learn(&x)
		}
	}
	base, err := learner.New(cfg)
	if err != nil {
		b.Fatal(err)
	}
	learn(base, 20_000)
	for range shards {
		m, err := learner.Restore(base.State())
		if err != nil {
			b.Fatal(err)
		}
		m.TrackChanges()
		learn(m, per)
		changed = append(changed, m.Changed())
		states = append(states, m.State())
	}
	return base, states, changed
}

// BenchmarkMixChanged measures the mix of an epoch of four shards at the
// coordinates they changed (the epochs' mix), and the union of those
// coordinates (UnionCoords), at 2,500 and 10,000 examples a shard.
//
//	go test ./learner/ -run '^$' -bench 'BenchmarkMixChanged|BenchmarkUnionCoords' -count 6
func BenchmarkMixChanged(b *testing.B) {
	for _, per := range []int{2_500, 10_000} {
		base, states, changed := epochStates(b, 100_000, 4, per)
		u := learner.UnionCoords(changed...)
		weights := []float64{1, 1, 1, 1}
		b.Run(fmt.Sprintf("examples=%d", per), func(b *testing.B) {
			for b.Loop() {
				b.StopTimer()
				into := base.State()
				b.StartTimer()
				if _, err := learner.MixChanged(learner.MixAuto, into, states, weights, u); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(len(u.Index)), "coords")
		})
	}
}

func BenchmarkUnionCoords(b *testing.B) {
	for _, per := range []int{2_500, 10_000} {
		_, _, changed := epochStates(b, 100_000, 4, per)
		b.Run(fmt.Sprintf("examples=%d", per), func(b *testing.B) {
			for b.Loop() {
				learner.UnionCoords(changed...)
			}
		})
	}
}

// BenchmarkMixChangedDrift is BenchmarkMixChanged's epoch at 2,500
// examples a shard when every shard found a change of concept: the mix
// of the whole state, from a new model's parameters (docs/scale-out.md,
// section 12), which an epoch that holds a change pays once.
//
//	go test ./learner/ -run '^$' -bench BenchmarkMixChangedDrift -benchmem -count 8
func BenchmarkMixChangedDrift(b *testing.B) {
	base, states, _ := epochStates(b, 100_000, 4, 2_500)
	for _, st := range states {
		st.Detector.Drifts++
	}
	weights := []float64{1, 1, 1, 1}
	for b.Loop() {
		b.StopTimer()
		into := base.State()
		b.StartTimer()
		if _, err := learner.MixChanged(learner.MixAuto, into, states, weights, learner.AllCoords); err != nil {
			b.Fatal(err)
		}
	}
}
