package main

import (
	"bufio"
	"fmt"
	"math"
	"os"
	"slices"

	"github.com/hyperplane-ml/hyperplane/learner"
	"github.com/hyperplane-ml/hyperplane/wire"
)

// minProbability bounds from below the probability whose log-loss is
// taken, as the learner's log-loss (and scikit-learn's log_loss) does.
const minProbability = 1e-15

// calibrationBins is the number of equal-width bins of the expected
// calibration error, as the learner's.
const calibrationBins = 10

// probabilityOutcome is what a labeled example's prequential prediction
// scores, measured as the learner measures its Metrics: p is the
// probability of the event, event whether it happened (for a binary model
// P(label = +1) and label +1; for a multiclass one the predicted class's
// probability and a correct prediction), logLoss and brier the example's
// log-loss and Brier score.
type probabilityOutcome struct {
	p              float64
	event          bool
	logLoss, brier float64
}

// measureProbability scores the prediction pr of an example labeled y.
func measureProbability(pr *learner.Prediction, y int, multiclass bool) probabilityOutcome {
	if !multiclass {
		q, t := pr.Probability, 0.0
		if y > 0 {
			t = 1
		}
		loss := clampedLog(1 - q)
		if y > 0 {
			loss = clampedLog(q)
		}
		return probabilityOutcome{p: q, event: y > 0, logLoss: loss, brier: (q - t) * (q - t)}
	}
	var brier float64
	for c, q := range pr.Probabilities {
		if c == y {
			q--
		}
		brier += q * q
	}
	return probabilityOutcome{p: pr.Probability, event: pr.Label == y, logLoss: clampedLog(pr.Probabilities[y]), brier: brier}
}

func clampedLog(p float64) float64 { return -math.Log(max(p, minProbability)) }

// probabilityWindow sums the scores of the labeled examples of a window.
type probabilityWindow struct {
	n              uint64
	logLoss, brier float64
	// The calibration bins: examples, events and the sum of the
	// probabilities in each.
	count, events [calibrationBins]uint64
	sum           [calibrationBins]float64
}

func (w *probabilityWindow) add(o probabilityOutcome) {
	w.n++
	w.logLoss += o.logLoss
	w.brier += o.brier
	b := max(0, min(int(o.p*calibrationBins), calibrationBins-1))
	w.count[b]++
	w.sum[b] += o.p
	if o.event {
		w.events[b]++
	}
}

// means are the window's log-loss, Brier score and expected calibration
// error: the mean over its examples of the gap between each bin's
// frequency of the event and its mean probability.
func (w *probabilityWindow) means() (logLoss, brier, calibration float64) {
	if w.n == 0 {
		return 0, 0, 0
	}
	n := float64(w.n)
	for b := range w.count {
		calibration += math.Abs(float64(w.events[b]) - w.sum[b])
	}
	return w.logLoss / n, w.brier / n, calibration / n
}

// aucSet holds a binary model's probabilities of the first pass, by
// label, to give the exact ROC AUC over the stream and over its last
// window: 8 bytes a labeled example.
type aucSet struct {
	pos, neg       []float64 // sorted, every window but the last
	newPos, newNeg []float64 // the last window's
}

func (s *aucSet) add(p float64, positive bool) {
	if positive {
		s.newPos = append(s.newPos, p)
	} else {
		s.newNeg = append(s.newNeg, p)
	}
}

// window closes the window: it returns the AUC over it and over every
// window so far.
func (s *aucSet) window() (window, overall float64) {
	slices.Sort(s.newPos)
	slices.Sort(s.newNeg)
	window = sortedAUC(s.newPos, s.newNeg)
	s.pos, s.newPos = mergeSorted(s.pos, s.newPos)
	s.neg, s.newNeg = mergeSorted(s.neg, s.newNeg)
	return window, sortedAUC(s.pos, s.neg)
}

// mergeSorted merges the sorted b into the sorted a, in place from the
// end, and returns a and b emptied for reuse. An empty a takes b's array
// instead of a copy: the first window, and the only one without -curve.
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

// sortedAUC is the ROC AUC of the positives' and negatives' sorted
// probabilities: the share of (positive, negative) pairs the positive
// ranks above, ties counting one half; 0 without both, as the learner's.
func sortedAUC(pos, neg []float64) float64 {
	if len(pos) == 0 || len(neg) == 0 {
		return 0
	}
	var wins float64
	below, upTo := 0, 0 // negatives < p, negatives <= p
	for _, p := range pos {
		for below < len(neg) && neg[below] < p {
			below++
		}
		upTo = max(upTo, below)
		for upTo < len(neg) && neg[upTo] <= p {
			upTo++
		}
		wins += float64(below) + float64(upTo-below)/2
	}
	return wins / (float64(len(pos)) * float64(len(neg)))
}

// firstPassProbabilities measures the probabilities of train's first
// pass: the exact AUC of a binary model, the windows of -curve, and the
// lines of -predictions.
type firstPassProbabilities struct {
	multiclass  bool
	auc         *aucSet            // nil for a multiclass model
	window      *probabilityWindow // -curve's current window; nil without
	predictions *backtestWriter    // nil without -predictions
}

// learned takes the outcome o of the example of rec, before the curve
// makes a point of it.
func (f *firstPassProbabilities) learned(rec *wire.Record, o *learner.Outcome) error {
	if f.predictions != nil {
		if err := f.predictions.write(rec, o); err != nil {
			return err
		}
	}
	if !o.Labeled {
		return nil
	}
	y := rec.Example.Label
	if f.auc != nil {
		f.auc.add(o.Probability, y > 0)
	}
	if f.window != nil {
		f.window.add(measureProbability(&o.Prediction, y, f.multiclass))
	}
	return nil
}

// backtestWriter writes -predictions: a JSON line per example of the
// first pass (see wire.Backtest).
type backtestWriter struct {
	path   string
	f      *os.File
	w      *bufio.Writer
	labels learner.Labels
	line   []byte
}

func createBacktest(path string, labels learner.Labels) (*backtestWriter, error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("-predictions: %w", err)
	}
	return &backtestWriter{path: path, f: f, w: bufio.NewWriterSize(f, 1<<16), labels: labels}, nil
}

func (b *backtestWriter) write(rec *wire.Record, o *learner.Outcome) error {
	l := wire.Backtest{Meta: rec.Meta, N: rec.N, Labeled: o.Labeled, Label: rec.Example.Label, Prediction: o.Prediction}
	b.line = append(l.AppendJSON(b.line[:0], b.labels), '\n')
	if _, err := b.w.Write(b.line); err != nil {
		return fmt.Errorf("-predictions: %s: %w", b.path, err)
	}
	return nil
}

// close flushes and closes the file; it is safe to call twice.
func (b *backtestWriter) close() error {
	if b.f == nil {
		return nil
	}
	err := b.w.Flush()
	if cerr := b.f.Close(); err == nil {
		err = cerr
	}
	b.f = nil
	if err != nil {
		return fmt.Errorf("-predictions: %s: %w", b.path, err)
	}
	return nil
}
