package learner_test

import (
	"math/rand/v2"
	"testing"

	"github.com/hyperplane-ml/hyperplane/learner"
)

// TestRestoreIntoASpare: a model restored into a spare that SpareFor made
// is the model Restore gives, to the bit, and goes on learning as it
// does, in the spare's vectors; its challengers likewise.
func TestRestoreIntoASpare(t *testing.T) {
	for name, cfg := range configs() {
		t.Run(name, func(t *testing.T) {
			m, err := learner.New(cfg)
			if err != nil {
				t.Fatal(err)
			}
			linear := cfg.Algorithm != learner.Kernel
			if linear {
				if _, _, err := m.SetChallengers([]learner.ChallengerConfig{{Name: "c", Config: cfg}}); err != nil {
					t.Fatal(err)
				}
			}
			rng := rand.New(rand.NewPCG(7, 9))
			example := func() *learner.Example {
				var x learner.Example
				for range 1 + rng.IntN(6) {
					x.Add(uint32(rng.IntN(cfg.Dimension())), rng.NormFloat64())
				}
				x.Labeled, x.Label = true, 2*rng.IntN(2)-1
				if cfg.Multiclass() {
					x.Label = rng.IntN(len(cfg.Classes))
				}
				return &x
			}
			for range 150 {
				m.Learn(example())
			}
			st := m.State()
			sp := learner.SpareFor(st)
			got, err := learner.RestoreInto(st, sp, learner.AllCoords)
			if err != nil {
				t.Fatal(err)
			}
			want, err := learner.Restore(st)
			if err != nil {
				t.Fatal(err)
			}
			for i := range 100 {
				if g, w := got.State().Digest(), want.State().Digest(); g != w {
					t.Fatalf("after %d more examples: %x, Restore's %x", i, g[:4], w[:4])
				}
				x := example()
				got.Learn(x)
				want.Learn(x)
			}
			if !linear {
				return
			}
			rel := got.Release()
			if &rel.Weights[0] != &sp.Weights[0] {
				t.Error("the model does not learn in the spare's weights")
			}
			if &rel.Challengers[0].State.Weights[0] != &sp.Challengers[0].State.Weights[0] {
				t.Error("the challenger does not learn in the spare's weights")
			}
		})
	}
}
