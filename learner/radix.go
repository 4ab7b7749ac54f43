package learner

import (
	"math"
	"slices"
)

// radixMin is the length from which sortProbabilities sorts by radix:
// below it, a comparison sort's setup is cheaper than 256-entry counts.
const radixMin = 1 << 12

// sortProbabilities sorts s in increasing order, leaving it exactly as
// slices.Sort would. A long s of non-negative numbers, the probabilities
// ExactAUC holds, is sorted by the bytes of its IEEE 754 encoding, whose
// order is then the numbers' own, least significant byte first: eight
// linear passes, against the n·log n comparisons of slices.Sort, which
// the last window of a stream, sorted after everything is learned, would
// add to the run's time. An s with a NaN, -0 or a negative number, whose
// encodings are not in the numbers' order, is left to slices.Sort.
func sortProbabilities(s []float64) {
	if len(s) < radixMin {
		slices.Sort(s)
		return
	}
	var count [8][256]int
	for _, v := range s {
		u := math.Float64bits(v)
		if u>>63 != 0 || v != v {
			slices.Sort(s)
			return
		}
		for p := range count {
			count[p][byte(u>>(8*p))]++
		}
	}
	src, dst := s, make([]float64, len(s))
	first := math.Float64bits(s[0])
	for p := range count {
		c := &count[p]
		if c[byte(first>>(8*p))] == len(s) {
			continue // every number has this byte: the pass moves nothing
		}
		off := 0
		for b, n := range c {
			c[b] = off
			off += n
		}
		for _, v := range src {
			b := byte(math.Float64bits(v) >> (8 * p))
			dst[c[b]] = v
			c[b]++
		}
		src, dst = dst, src
	}
	if &src[0] != &s[0] {
		copy(s, src)
	}
}
