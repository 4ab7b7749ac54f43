package learner

import (
	"math"
	"testing"
)

// TestCalibratorAtTheBounds: whatever the scores (infinite, NaN, at the
// float's limits) and the calibrator's state, the probabilities are
// numbers in [0, 1], a multiclass model's summing to 1, and learning
// keeps the state finite and valid.
func TestCalibratorAtTheBounds(t *testing.T) {
	scores := []float64{0, 1, -1, 1e300, -1e300, math.MaxFloat64, -math.MaxFloat64, math.Inf(1), math.Inf(-1), math.NaN(), 5e-324}
	for _, k := range []int{1, 3} {
		for _, a := range []float64{1, 1e300, -1e300, 0} {
			for _, m := range []float64{0, 5e-324, 1, 1e300} {
				c := newCalibrator(k)
				c.v[calA], c.v[calM], c.v[calN] = a, m, 1
				z, p := make([]float64, k+1), make([]float64, k)
				in := make([]float64, k)
				for i := range scores {
					for j := range in {
						in[j] = scores[(i+j)%len(scores)]
					}
					c.probability(in, z, p)
					var sum float64
					for _, q := range p {
						if !(q >= 0 && q <= 1) {
							t.Fatalf("k %d, a %v, m %v: scores %v give probabilities %v", k, a, m, in, p)
						}
						sum += q
					}
					if k > 1 && math.Abs(sum-1) > 1e-12 {
						t.Fatalf("scores %v: probabilities %v sum to %v", in, p, sum)
					}
					y := 1
					if k > 1 {
						y = i % k
					}
					c.learn(in, z, p, y)
					if err := validCalibrator(c.v, k); err != nil {
						t.Fatalf("k %d, a %v, m %v: after scores %v: %v", k, a, m, in, err)
					}
				}
			}
		}
	}
}
