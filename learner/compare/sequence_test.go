package compare_test

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/hyperplane-ml/hyperplane/learner/compare"
)

// binomialLimit is the most of n trials of probability p one expects to
// see succeed: the mean plus three standard deviations.
func binomialLimit(n int, p float64) int {
	return int(math.Ceil(float64(n)*p + 3*math.Sqrt(float64(n)*p*(1-p))))
}

// pairedErrors draws the difference of two classifiers' 0/1 losses on one
// example: the model alone wrong with probability pm, the challenger
// alone wrong with probability pc.
func pairedErrors(r *rand.Rand, pm, pc float64) float64 {
	u := r.Float64()
	switch {
	case u < pm:
		return 1
	case u < pm+pc:
		return -1
	}
	return 0
}

// TestSequenceCoversAtEveryLook: over many streams of a true difference of
// zero, the share whose band ever excludes zero, looked at after every
// example, stays within alpha; a fixed-sample 95% interval looked at as
// often does not, which shows the check can fail.
func TestSequenceCoversAtEveryLook(t *testing.T) {
	const streams, length, alpha = 1000, 2000, 0.05
	r := rand.New(rand.NewPCG(1, 2))
	var excluded, naive int
	for range streams {
		s, err := compare.NewSequence(alpha, 1)
		if err != nil {
			t.Fatal(err)
		}
		var sum, sq float64
		ever, everNaive := false, false
		for i := 1; i <= length; i++ {
			d := pairedErrors(r, 0.1, 0.1)
			s.Add(d)
			if lo, hi := s.Bounds(); lo > 0 || hi < 0 {
				ever = true
			}
			sum += d
			sq += d * d
			if n := float64(i); i >= 30 {
				mean := sum / n
				sd := math.Sqrt(max(sq/n-mean*mean, 0) / n)
				if math.Abs(mean) > 1.96*sd {
					everNaive = true
				}
			}
		}
		if ever {
			excluded++
		}
		if everNaive {
			naive++
		}
	}
	limit := binomialLimit(streams, alpha)
	t.Logf("band excluded zero in %d of %d streams (limit %d); a 95%% interval looked at after every example: %d", excluded, streams, limit, naive)
	if excluded > limit {
		t.Errorf("the band excluded a true zero in %d of %d streams, above %d (alpha %v)", excluded, streams, limit, alpha)
	}
	if naive <= limit {
		t.Errorf("a fixed-sample interval peeked at after every example excluded zero in only %d streams: the check would not catch a dishonest band", naive)
	}
}

// TestSequenceCoversAShiftedMean: the band holds a mean that is not zero,
// on a scale other than [-1, 1], at every look in nearly every stream,
// and shrinks around it.
func TestSequenceCoversAShiftedMean(t *testing.T) {
	const streams, length, alpha, bound = 300, 5000, 0.1, 13.8
	r := rand.New(rand.NewPCG(3, 4))
	missed := 0
	var width float64
	for range streams {
		s, _ := compare.NewSequence(alpha, bound)
		miss := false
		for range length {
			// Exponential-ish positive losses minus a shifted copy:
			// mean 0.3.
			s.Add(r.ExpFloat64() - r.ExpFloat64() + 0.3)
			if lo, hi := s.Bounds(); lo > 0.3 || hi < 0.3 {
				miss = true
			}
		}
		if miss {
			missed++
		}
		lo, hi := s.Bounds()
		width += (hi - lo) / streams
	}
	if limit := binomialLimit(streams, alpha); missed > limit {
		t.Errorf("the band missed the mean 0.3 in %d of %d streams, above %d", missed, streams, limit)
	}
	if width > 0.3 {
		t.Errorf("after %d observations of standard deviation 1.4 the band is %.3f wide on average; want it under 0.3", length, width)
	}
}

// TestSequenceFindsAOnePointDifference: a challenger right 1 point more
// often is found, in most streams, well within a million examples.
func TestSequenceFindsAOnePointDifference(t *testing.T) {
	const streams, alpha = 20, 0.05
	r := rand.New(rand.NewPCG(5, 6))
	found := 0
	for range streams {
		s, _ := compare.NewSequence(alpha, 1)
		for range 200000 {
			// 5.5% of examples only the model gets wrong, 4.5% only the
			// challenger: a difference of 1 point of accuracy.
			s.Add(pairedErrors(r, 0.055, 0.045))
			if lo, _ := s.Bounds(); lo > 0 {
				found++
				break
			}
		}
	}
	if found < streams*9/10 {
		t.Errorf("a 1-point difference was found within 200,000 examples in %d of %d streams", found, streams)
	}
}

func TestSequenceBeforeAndOutsideItsRange(t *testing.T) {
	s, err := compare.NewSequence(0.05, 2)
	if err != nil {
		t.Fatal(err)
	}
	if lo, hi := s.Bounds(); lo != -2 || hi != 2 || s.Mean() != 0 || s.Count() != 0 {
		t.Errorf("empty: bounds [%v, %v], mean %v, count %d; want [-2, 2], 0, 0", lo, hi, s.Mean(), s.Count())
	}
	s.Add(5)
	s.Add(math.NaN())
	s.Add(-7)
	if s.Mean() != 0 || s.Count() != 3 {
		t.Errorf("after 5, NaN and -7 clipped to [-2, 2]: mean %v, count %d; want 0 and 3", s.Mean(), s.Count())
	}
	if lo, hi := s.Bounds(); !(lo >= -2 && hi <= 2 && lo < 0 && hi > 0) {
		t.Errorf("bounds [%v, %v] after three observations: want within [-2, 2] around 0", lo, hi)
	}
	for _, alpha := range []float64{0, 1, -0.1, math.NaN()} {
		if _, err := compare.NewSequence(alpha, 1); err == nil {
			t.Errorf("alpha %v accepted", alpha)
		}
	}
	for _, bound := range []float64{0, -1, math.Inf(1), math.NaN()} {
		if _, err := compare.NewSequence(0.05, bound); err == nil {
			t.Errorf("bound %v accepted", bound)
		}
	}
}

func TestSequenceAddDoesNotAllocate(t *testing.T) {
	s, _ := compare.NewSequence(0.05, 1)
	if n := testing.AllocsPerRun(1000, func() { s.Add(0.25) }); n != 0 {
		t.Errorf("Add allocates %v times", n)
	}
}
