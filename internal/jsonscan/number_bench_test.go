package jsonscan

import (
	"math"
	"strconv"
	"testing"
)

// BenchmarkNumber is Number over feature values as hyperplane gen writes
// them (four decimals at most, in their shortest form, so from one to
// four digits after the point), each followed by a comma; one op is one
// number.
func BenchmarkNumber(b *testing.B) {
	rng := newRand(5)
	var nums [][]byte
	for range 4096 {
		v := math.Round(rng.Float64()*1e4) / 1e4
		nums = append(nums, []byte(strconv.FormatFloat(v, 'f', -1, 64)+`,"f12345":`))
	}
	var sum float64
	for i := 0; b.Loop(); i++ {
		v, _, _ := Number(nums[i&4095], 0, 1e30)
		sum += v
	}
	if math.IsNaN(sum) {
		b.Fatal(sum)
	}
}
