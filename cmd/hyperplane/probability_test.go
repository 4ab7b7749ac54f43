package main

import (
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/hyperplane-ml/hyperplane/learner"
	"github.com/hyperplane-ml/hyperplane/wire"
)

// TestAUCSetIsExact: the AUC of every window and of the stream so far,
// windows merged as -curve merges them, equal the share of (positive,
// negative) pairs ranked right counted pair by pair, ties one half; with
// probabilities drawn from a few values, so that ties are many.
func TestAUCSetIsExact(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	var s aucSet
	var allPos, allNeg []float64
	for w, size := range []int{0, 1, 7, 300, 50, 1000} {
		var pos, neg []float64
		for range size {
			p := float64(rng.IntN(20)) / 19
			positive := rng.Float64() < p
			s.add(p, positive)
			if positive {
				pos = append(pos, p)
			} else {
				neg = append(neg, p)
			}
		}
		allPos, allNeg = append(allPos, pos...), append(allNeg, neg...)
		window, overall := s.window()
		if want := pairwiseAUC(pos, neg); window != want {
			t.Errorf("window %d: AUC %v, want %v", w, window, want)
		}
		if want := pairwiseAUC(allPos, allNeg); !closeTo(overall, want) {
			t.Errorf("after window %d: AUC %v, want %v", w, overall, want)
		}
		if !slices.IsSorted(s.pos) || !slices.IsSorted(s.neg) || len(s.pos) != len(allPos) || len(s.neg) != len(allNeg) {
			t.Fatalf("after window %d: the merged probabilities are not the stream's, sorted", w)
		}
	}
}

// BenchmarkFirstPassProbabilities is what train adds to each labeled
// example of its first pass for its summary: keeping the probability
// for the exact AUC, whose sort at the end is included (1,000,000
// examples an op); -curve's window measures in curve.
func BenchmarkFirstPassProbabilities(b *testing.B) {
	const n = 1_000_000
	rng := rand.New(rand.NewPCG(3, 4))
	outcomes := make([]learner.Outcome, 4096)
	labels := make([]int, len(outcomes))
	for i := range outcomes {
		p := rng.Float64()
		outcomes[i] = learner.Outcome{Prediction: learner.Prediction{Label: 1, Probability: p}, Labeled: true}
		labels[i] = -1
		if rng.Float64() < p {
			labels[i] = 1
		}
	}
	for _, curve := range []bool{false, true} {
		name := "summary"
		if curve {
			name = "curve"
		}
		b.Run(name, func(b *testing.B) {
			var x learner.Example
			rec := wire.Record{Example: &x}
			for b.Loop() {
				f := firstPassProbabilities{auc: &aucSet{}}
				if curve {
					f.window = &probabilityWindow{}
				}
				for i := range n {
					j := i % len(outcomes)
					x.Label = labels[j]
					if err := f.learned(&rec, &outcomes[j]); err != nil {
						b.Fatal(err)
					}
					if curve && i%10000 == 9999 {
						f.window.means()
						*f.window = probabilityWindow{}
						f.auc.window()
					}
				}
				f.auc.window()
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/example")
		})
	}
}

// pairwiseAUC is the ROC AUC of probabilities pos (of positives) and neg
// (of negatives) by its definition: the share of pairs a positive ranks
// above, ties counting a half; 0 without both.
func pairwiseAUC(pos, neg []float64) float64 {
	if len(pos) == 0 || len(neg) == 0 {
		return 0
	}
	var wins float64
	for _, p := range pos {
		for _, q := range neg {
			switch {
			case p > q:
				wins++
			case p == q:
				wins += 0.5
			}
		}
	}
	return wins / float64(len(pos)*len(neg))
}
