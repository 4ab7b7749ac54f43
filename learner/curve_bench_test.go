package learner

import (
	"math/rand/v2"
	"testing"
)

// BenchmarkCurveMeasure is what a learning curve adds to each labeled
// example of a binary model beyond learning it: keeping the probability
// for the exact AUC, whose sort at the end is included (1,000,000
// examples an op), and, with windows ("curve"), the window's measures
// and a point every 10,000.
func BenchmarkCurveMeasure(b *testing.B) {
	const n = 1_000_000
	rng := rand.New(rand.NewPCG(3, 4))
	outcomes := make([]Outcome, 4096)
	labels := make([]int, len(outcomes))
	for i := range outcomes {
		p := rng.Float64()
		outcomes[i] = Outcome{Prediction: Prediction{Label: 1, Probability: p}, Labeled: true}
		labels[i] = -1
		if rng.Float64() < p {
			labels[i] = 1
		}
	}
	for _, window := range []uint64{0, 10000} {
		name := "summary"
		if window > 0 {
			name = "curve"
		}
		b.Run(name, func(b *testing.B) {
			for b.Loop() {
				c := Curve{window: window, auc: &ExactAUC{}}
				for i := range n {
					j := i % len(outcomes)
					c.measure(&outcomes[j], labels[j])
					if window > 0 && i%10000 == 9999 {
						c.sums.Means()
						c.sums = ProbabilitySums{}
						c.auc.Window()
					}
				}
				c.auc.Window()
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/example")
		})
	}
}
