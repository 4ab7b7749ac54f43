package consumer

import (
	"context"
	"math/rand/v2"
	"runtime/debug"
	"testing"

	"go.uber.org/zap"

	"github.com/hyperplane-ml/hyperplane/learner"
)

// BenchmarkFirstEpochModels is what the first epoch of a new model of the
// default configuration over 4 shards waits for on a worker that learns
// every range: each range's model of W_{e-1} learning 1,000 examples,
// then the early mix's target. The memory the process has freed is given
// back to the system before each, as a process that has just started has
// none: with ready=false the models are copies in new memory, each page
// faulted in as it is first written; with ready=true in the spares made
// ready as the worker starts (makeReady, which a worker runs while its
// group forms, and which is not timed).
//
//	go test -run XXX -bench BenchmarkFirstEpochModels -count 8 ./consumer/
func BenchmarkFirstEpochModels(b *testing.B) {
	const shards, examples = 4, 1000
	cfg := learner.DefaultConfig()
	rng := rand.New(rand.NewPCG(4, 2))
	xs := make([]learner.Example, examples)
	for i := range xs {
		for range 40 {
			xs[i].Add(uint32(rng.IntN(cfg.Dimension())), rng.NormFloat64())
		}
		xs[i].Labeled, xs[i].Label = true, 2*rng.IntN(2)-1
	}
	for _, ready := range []bool{false, true} {
		name := "ready=false"
		if ready {
			name = "ready=true"
		}
		b.Run(name, func(b *testing.B) {
			for range b.N {
				b.StopTimer()
				m, err := learner.New(cfg)
				if err != nil {
					b.Fatal(err)
				}
				x := NewEpochs(EpochConfig{}, m, 1, nil, nil, nil, zap.NewNop())
				debug.FreeOSMemory()
				if ready {
					x.makeReady(context.Background(), shards+1)()
				}
				b.StartTimer()
				for range shards {
					r, err := x.rangeModel()
					if err != nil {
						b.Fatal(err)
					}
					for i := range xs {
						r.Learn(&xs[i])
					}
				}
				if _, err := x.mixTarget(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
