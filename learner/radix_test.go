package learner

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// TestSortProbabilities: sortProbabilities leaves every input bit for bit
// as slices.Sort does, whether it sorts by radix or falls back.
func TestSortProbabilities(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 5))
	gen := func(n int, f func(i int) float64) []float64 {
		s := make([]float64, n)
		for i := range s {
			s[i] = f(i)
		}
		return s
	}
	sigmoid := func(int) float64 { return 1 / (1 + math.Exp(-4*r.NormFloat64())) }
	for _, tc := range []struct {
		name string
		s    []float64
	}{
		{"short", gen(100, sigmoid)},
		{"below radixMin", gen(radixMin-1, sigmoid)},
		{"probabilities", gen(100_000, sigmoid)},
		{"ties", gen(50_000, func(int) float64 { return float64(r.IntN(7)) / 6 })},
		{"one value", gen(radixMin, func(int) float64 { return 0.25 })},
		{"zeros, ones, tiny and infinite", gen(20_000, func(i int) float64 {
			return []float64{0, 1, math.SmallestNonzeroFloat64, math.Inf(1), 0.5, 1e300}[r.IntN(6)]
		})},
		{"sorted", gen(10_000, func(i int) float64 { return float64(i) / 10_000 })},
		{"descending", gen(10_000, func(i int) float64 { return float64(10_000-i) / 10_000 })},
		{"negative", gen(10_000, func(int) float64 { return r.NormFloat64() })},
		{"negative zero", gen(10_000, func(i int) float64 {
			if i%3 == 0 {
				return math.Copysign(0, -1)
			}
			return sigmoid(i)
		})},
		{"NaN", gen(10_000, func(i int) float64 {
			if i == 5000 {
				return math.NaN()
			}
			return sigmoid(i)
		})},
	} {
		t.Run(tc.name, func(t *testing.T) {
			want := slices.Clone(tc.s)
			slices.Sort(want)
			got := slices.Clone(tc.s)
			sortProbabilities(got)
			for i := range want {
				if math.Float64bits(got[i]) != math.Float64bits(want[i]) {
					t.Fatalf("at %d: %v (%#x), slices.Sort has %v (%#x)", i, got[i], math.Float64bits(got[i]), want[i], math.Float64bits(want[i]))
				}
			}
		})
	}
}

// BenchmarkSortProbabilities is the sort of one side of the last window
// of a 1,000,000-example stream, 500,000 probabilities, by
// sortProbabilities and by slices.Sort.
func BenchmarkSortProbabilities(b *testing.B) {
	r := rand.New(rand.NewPCG(1, 2))
	p := make([]float64, 500_000)
	for i := range p {
		p[i] = 1 / (1 + math.Exp(-2*r.NormFloat64()))
	}
	s := make([]float64, len(p))
	for _, sorter := range []struct {
		name string
		sort func([]float64)
	}{{"radix", sortProbabilities}, {"slices.Sort", slices.Sort[[]float64]}} {
		b.Run(sorter.name, func(b *testing.B) {
			for b.Loop() {
				copy(s, p)
				sorter.sort(s)
			}
		})
	}
}
