package learner_test

import (
	"math"
	"math/rand/v2"

	"github.com/hyperplane-ml/hyperplane/learner"
)

// dense is a labeled example in d dimensions with a hidden hyperplane.
type dense struct {
	x []float64
	y int
}

// separable draws n points in [-1,1]^d whose margin to the unit-norm
// hyperplane (w, b) is at least gap, labeled by its side.
func separable(r *rand.Rand, n, d int, gap float64) (pts []dense, w []float64, b float64) {
	w = unit(r, d)
	b = r.Float64()*0.4 - 0.2
	for len(pts) < n {
		x := make([]float64, d)
		for i := range x {
			x[i] = 2*r.Float64() - 1
		}
		f := dotf(w, x) + b
		if math.Abs(f) < gap {
			continue
		}
		y := 1
		if f < 0 {
			y = -1
		}
		pts = append(pts, dense{x, y})
	}
	return pts, w, b
}

func unit(r *rand.Rand, d int) []float64 {
	w := make([]float64, d)
	var n float64
	for i := range w {
		w[i] = r.NormFloat64()
		n += w[i] * w[i]
	}
	n = math.Sqrt(n)
	for i := range w {
		w[i] /= n
	}
	return w
}

func dotf(a, b []float64) float64 {
	var s float64
	for i := range a {
		s += a[i] * b[i]
	}
	return s
}

func (p dense) example() *learner.Example {
	return &learner.Example{Dense: p.x, Labeled: true, Label: p.y}
}

// sparseStream is a reproducible stream of sparse examples over 2^bits
// weights: nnz features each, a hidden linear rule for the labels, some
// label noise, a share of unlabeled examples and varied importance.
func sparseStream(seed uint64, n, bits, nnz, classes int) []learner.Example {
	r := rand.New(rand.NewPCG(seed, 1))
	d := 1 << bits
	outputs := max(classes, 1)
	hidden := make([]float64, d*outputs)
	for i := range hidden {
		hidden[i] = r.NormFloat64()
	}
	xs := make([]learner.Example, n)
	for e := range xs {
		x := &xs[e]
		for range nnz {
			x.Add(uint32(r.IntN(d)), math.Round(r.NormFloat64()*1000)/1000)
		}
		if e%7 == 0 {
			x.Dense = []float64{r.Float64(), r.Float64()}
		}
		if e%11 == 0 {
			x.Weight = 0.5 + r.Float64()
		}
		if e%13 == 0 {
			continue // unlabeled
		}
		x.Labeled = true
		scores := make([]float64, outputs)
		for j, i := range x.Index {
			for c := range outputs {
				scores[c] += hidden[int(i)*outputs+c] * x.Value[j]
			}
		}
		if classes == 0 {
			x.Label = 1
			if scores[0] < 0 {
				x.Label = -1
			}
			if r.Float64() < 0.05 {
				x.Label = -x.Label
			}
			continue
		}
		best := 0
		for c := range scores {
			if scores[c] > scores[best] {
				best = c
			}
		}
		x.Label = best
		if r.Float64() < 0.05 {
			x.Label = r.IntN(classes)
		}
	}
	return xs
}
