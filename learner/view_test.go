package learner_test

import (
	"math"
	"sync"
	"testing"

	"github.com/hyperplane-ml/hyperplane/learner"
)

// TestViewPredictsAsItsModelDid takes views mid-stream and keeps learning:
// each view must go on predicting, to the bit, what its model predicted
// when it was taken, and what a model restored from the state of that
// moment predicts, for every algorithm.
func TestViewPredictsAsItsModelDid(t *testing.T) {
	for name, cfg := range configs() {
		t.Run(name, func(t *testing.T) {
			xs := streamFor(cfg, 5, 1200)
			probe := streamFor(cfg, 6, 200)
			m := mustNew(t, cfg)
			type taken struct {
				view    *learner.View
				want    []learner.Prediction
				version uint64
			}
			var views []taken
			for i := range xs {
				if i%300 == 0 {
					v := m.View()
					restored, err := learner.Restore(m.State())
					if err != nil {
						t.Fatal(err)
					}
					var want []learner.Prediction
					for j := range probe {
						p, q := m.Predict(&probe[j]), restored.Predict(&probe[j])
						if !samePrediction(p, q) {
							t.Fatalf("restored model predicts %+v, the model %+v", q, p)
						}
						p.Scores = append([]float64(nil), p.Scores...)
						want = append(want, p)
					}
					views = append(views, taken{v, want, m.Version()})
				}
				m.Learn(&xs[i])
			}
			if m.Version() == views[len(views)-1].version {
				t.Fatal("the model did not change after the last view: the test says nothing")
			}
			var s learner.Scratch
			for n, tk := range views {
				if tk.view.Version() != tk.version {
					t.Fatalf("view %d: version %d, the model's was %d", n, tk.view.Version(), tk.version)
				}
				for j := range probe {
					if got := tk.view.Predict(&probe[j], &s); !samePrediction(got, tk.want[j]) {
						t.Fatalf("view %d, example %d: %+v, the model predicted %+v", n, j, got, tk.want[j])
					}
				}
			}
		})
	}
}

func samePrediction(a, b learner.Prediction) bool {
	if a.Label != b.Label || math.Float64bits(a.Score) != math.Float64bits(b.Score) || len(a.Scores) != len(b.Scores) {
		return false
	}
	for i := range a.Scores {
		if math.Float64bits(a.Scores[i]) != math.Float64bits(b.Scores[i]) {
			return false
		}
	}
	return true
}

// TestViewIsSafeWhileTheModelLearns predicts from views in several
// goroutines while the model keeps learning and new views are taken; the
// race detector checks that they share nothing.
func TestViewIsSafeWhileTheModelLearns(t *testing.T) {
	for _, name := range []string{"averaged", "arow", "kernel/rbf/budget=25", "multiclass/perceptron", "perceptron/r2/inverse/normalize"} {
		t.Run(name, func(t *testing.T) {
			cfg := configs()[name]
			xs := streamFor(cfg, 7, 2000)
			m := mustNew(t, cfg)
			views := make(chan *learner.View, 4)
			var wg sync.WaitGroup
			for range 3 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					var s learner.Scratch
					for v := range views {
						for j := range xs[:50] {
							p := v.Predict(&xs[j], &s)
							if math.IsNaN(p.Score) {
								t.Errorf("NaN score")
								return
							}
						}
					}
				}()
			}
			for i := range xs {
				m.Learn(&xs[i])
				if i%100 == 0 {
					views <- m.View()
				}
			}
			close(views)
			wg.Wait()
		})
	}
}

// TestViewPredictDoesNotAllocate: with a reused Scratch, predicting costs
// no allocation.
func TestViewPredictDoesNotAllocate(t *testing.T) {
	for _, name := range []string{"averaged", "multiclass/perceptron", "kernel/rbf/budget=25", "perceptron/r2/inverse/normalize"} {
		cfg := configs()[name]
		xs := streamFor(cfg, 8, 300)
		m := mustNew(t, cfg)
		for i := range xs {
			m.Learn(&xs[i])
		}
		v := m.View()
		var s learner.Scratch
		v.Predict(&xs[0], &s)
		if n := testing.AllocsPerRun(100, func() { v.Predict(&xs[1], &s) }); n != 0 {
			t.Errorf("%s: %v allocations per prediction", name, n)
		}
	}
}
