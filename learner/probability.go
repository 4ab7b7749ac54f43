package learner

import (
	"math"
	"slices"
	"sync"
)

// ProbabilityScore is what the probability of a labeled example's
// prediction scores, as Metrics scores it. For a binary model P is
// P(label = +1) and Event says the label is +1; for a multiclass one P is
// the predicted class's probability and Event says the prediction is
// correct. LogLoss (natural log, the probability kept within
// [1e-15, 1]) and Brier are the example's log-loss and Brier score.
type ProbabilityScore struct {
	P              float64
	Event          bool
	LogLoss, Brier float64
}

// ScoreProbability scores the prediction pr of an example labeled y (±1
// for a binary model, the class for a multiclass one): pr.Probabilities
// is nil for a binary model, every class's probability for a multiclass
// one, as Learn and Predict return them.
func ScoreProbability(pr *Prediction, y int) ProbabilityScore {
	if pr.Probabilities == nil {
		q, event := pr.Probability, y > 0
		if event {
			return ProbabilityScore{P: q, Event: true, LogLoss: clampedLog(q), Brier: (q - 1) * (q - 1)}
		}
		return ProbabilityScore{P: q, LogLoss: clampedLog(1 - q), Brier: q * q}
	}
	var brier float64
	for c, q := range pr.Probabilities {
		if c == y {
			q--
		}
		brier += q * q
	}
	return ProbabilityScore{P: pr.Probability, Event: pr.Label == y, LogLoss: clampedLog(pr.Probabilities[y]), Brier: brier}
}

// clampedLog is -log(p) with p kept within [minProbability, 1]: the
// log-loss of a probability of 0 is finite.
func clampedLog(p float64) float64 { return -math.Log(max(p, minProbability)) }

// ProbabilitySums are the sums of the scores of a set of labeled
// examples, from which Means gives the measures Metrics reports: those
// over the stream and over the rolling window are sums of this kind. The
// zero value is an empty set.
type ProbabilitySums struct {
	n              uint64
	logLoss, brier float64
	// The calibration bins: examples, events and the sum of the
	// probabilities of each.
	count, events [calibrationBins]uint64
	sum           [calibrationBins]float64
}

// Add adds the score of one example.
func (s *ProbabilitySums) Add(sc ProbabilityScore) {
	s.n++
	s.logLoss += sc.LogLoss
	s.brier += sc.Brier
	b := binOf(sc.P, calibrationBins)
	s.count[b]++
	s.sum[b] += sc.P
	if sc.Event {
		s.events[b]++
	}
}

// Count is the number of examples added.
func (s *ProbabilitySums) Count() uint64 { return s.n }

// Means are the mean log-loss and Brier score of the examples added and
// their expected calibration error (see calibrationError); 0 for an empty
// set.
func (s *ProbabilitySums) Means() (logLoss, brier, calibration float64) {
	if s.n == 0 {
		return 0, 0, 0
	}
	n := float64(s.n)
	return s.logLoss / n, s.brier / n, calibrationError(s.count[:], s.events[:], s.sum[:], n)
}

// calibrationBins is the number of equal-width bins of the expected
// calibration error.
const calibrationBins = 10

// binOf is the bin of p in [0, 1] among n equal-width bins.
func binOf(p float64, n int) int { return max(0, min(int(p*float64(n)), n-1)) }

// calibrationError is Σ_b |events_b − Σ_b p| / n: the mean over the
// examples of the gap between each bin's frequency of the event and its
// mean probability.
func calibrationError(count, events []uint64, sum []float64, n float64) float64 {
	var e float64
	for b := range count {
		e += math.Abs(float64(events[b]) - sum[b])
	}
	return e / n
}

// ExactAUC holds a binary model's probabilities P(label = +1) of labeled
// examples, by label, for the exact ROC AUC over them, window by window
// and over every window so far: Metrics' AUC over the stream is binned
// (within a bound, see aucBins), this one is exact, at the cost of 8
// bytes an example. The zero value holds nothing.
type ExactAUC struct {
	pos, neg       []float64 // sorted, every window but the current one
	newPos, newNeg []float64 // the current window's
}

// parallelSort is the size of a window from which ExactAUC.Window sorts
// its positives and negatives on two goroutines.
const parallelSort = 1 << 16

// Add adds the probability p of a positive (label +1) or a negative
// example to the current window.
func (a *ExactAUC) Add(p float64, positive bool) {
	if positive {
		a.newPos = appendDoubling(a.newPos, p)
	} else {
		a.newNeg = appendDoubling(a.newNeg, p)
	}
}

// appendDoubling appends p to s, doubling s's capacity when it is full.
// append grows a large slice by a quarter at a time, which, over a
// window of the whole stream, copies it about four times over; doubling
// copies it about once.
func appendDoubling(s []float64, p float64) []float64 {
	if len(s) == cap(s) {
		s = slices.Grow(s, max(len(s), 256))
	}
	return append(s, p)
}

// Window closes the current window: it returns the AUC over it and over
// every window so far (0 without both a positive and a negative), and
// starts the next.
func (a *ExactAUC) Window() (window, overall float64) {
	// The last window of a curve without points holds the whole stream,
	// and its sort is on the path of everything learned: the positives
	// and the negatives are sorted side by side when that is worth a
	// goroutine.
	if len(a.newPos)+len(a.newNeg) >= parallelSort {
		var wg sync.WaitGroup
		wg.Go(func() { sortProbabilities(a.newNeg) })
		sortProbabilities(a.newPos)
		wg.Wait()
	} else {
		sortProbabilities(a.newPos)
		sortProbabilities(a.newNeg)
	}
	window = exactAUC(a.newPos, a.newNeg)
	a.pos, a.newPos = mergeSorted(a.pos, a.newPos)
	a.neg, a.newNeg = mergeSorted(a.neg, a.newNeg)
	return window, exactAUC(a.pos, a.neg)
}

// mergeSorted merges the sorted b into the sorted a, in place from the
// end, and returns a and b emptied for reuse. An empty a takes b's array
// instead of a copy: the first window, and the only one of a single
// window.
func mergeSorted(a, b []float64) ([]float64, []float64) {
	if len(a) == 0 {
		return b, nil
	}
	i, j := len(a)-1, len(b)-1
	a = slices.Grow(a, len(b))[:len(a)+len(b)]
	for k := len(a) - 1; j >= 0; k-- {
		if i >= 0 && a[i] > b[j] {
			a[k] = a[i]
			i--
		} else {
			a[k] = b[j]
			j--
		}
	}
	return a, b[:0]
}

// histogramAUC is the ROC AUC of the histogram, a pair in one bin
// counting one half; 0 without both a positive and a negative.
func histogramAUC(pos, neg []uint64) float64 {
	var below, p, n, wins float64 // negatives in lower bins
	for b := range pos {
		pb, nb := float64(pos[b]), float64(neg[b])
		wins += pb*below + pb*nb/2
		below += nb
		p += pb
		n += nb
	}
	if p == 0 || n == 0 {
		return 0
	}
	return wins / (p * n)
}

// exactAUC is the ROC AUC of the probabilities of positive and of
// negative examples, each sorted, ties counting one half; 0 without both
// a positive and a negative.
func exactAUC(pos, neg []float64) float64 {
	if len(pos) == 0 || len(neg) == 0 {
		return 0
	}
	var wins float64
	below, tied := 0, 0 // negatives below pos[i], and equal to it
	for i, p := range pos {
		if i == 0 || p != pos[i-1] {
			below += tied
			for below < len(neg) && neg[below] < p {
				below++
			}
			tied = 0
			for below+tied < len(neg) && neg[below+tied] == p {
				tied++
			}
		}
		wins += float64(below) + float64(tied)/2
	}
	return wins / (float64(len(pos)) * float64(len(neg)))
}
