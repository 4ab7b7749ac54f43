package learner

// PageHinkley detects a rise in the mean of a stream of losses: the
// Page-Hinkley test (Page 1954; Hinkley 1971) as River's
// drift.PageHinkley and MOA's PageHinkleyDM run it. It sums how far each
// loss lies above the running mean, less Delta, and raises an alarm when
// that sum has climbed Threshold above its lowest point: a rise of more
// than Delta held long enough. A loss below the mean, as while a model
// still learns, only lowers the sum. It is deterministic: the same losses
// give the same alarms on every machine.
//
// The zero value is not usable: start from DefaultPageHinkley.
type PageHinkley struct {
	// Delta is the rise of the mean that is ignored, Threshold the
	// evidence that makes an alarm, MinExamples the losses seen since
	// the last alarm before the next can be raised.
	Delta, Threshold float64
	MinExamples      uint64

	n              uint64
	mean, sum, low float64
}

// DefaultPageHinkley is tuned for the 0/1 loss of prequential
// predictions: it ignores rises of the error rate under 5 points and
// needs about 2,000 examples of a rise of 10 (BENCHMARKS.md, "Detecting a
// change of concept").
func DefaultPageHinkley() PageHinkley {
	return PageHinkley{Delta: 0.05, Threshold: 100, MinExamples: 1000}
}

// Add adds the loss of one example and reports whether the losses have
// risen: then the detector starts again from nothing, to find the next
// change.
func (d *PageHinkley) Add(loss float64) bool {
	d.n++
	d.mean += (loss - d.mean) / float64(d.n)
	d.sum += loss - d.mean - d.Delta
	d.low = min(d.low, d.sum)
	if d.n >= d.MinExamples && d.sum-d.low > d.Threshold {
		*d = PageHinkley{Delta: d.Delta, Threshold: d.Threshold, MinExamples: d.MinExamples}
		return true
	}
	return false
}
