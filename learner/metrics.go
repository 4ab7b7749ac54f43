package learner

import (
	"math"
	"slices"
)

// Metrics are the prequential counts of a model: every labeled example is
// scored before the model learns from it, so Accuracy is an honest
// estimate of how the model does on examples it has not seen.
type Metrics struct {
	Examples uint64 `json:"examples"` // every example, labeled or not
	Labeled  uint64 `json:"labeled"`
	// Mistakes counts labeled examples whose published prediction was
	// wrong.
	Mistakes uint64 `json:"mistakes"`
	// Updates counts the updates applied to the model: its version. It
	// can differ from Mistakes: Margin and the passive-aggressive rules
	// update on correct predictions too, the averaged perceptron predicts
	// with weights other than those it trains, and every rule updates at
	// f(x) = 0 although the prediction there is positive.
	Updates uint64 `json:"updates"`
	// R is the running maximum of ‖x‖ over labeled examples, after
	// normalisation.
	R float64 `json:"r"`
	// Accuracy is 1 - Mistakes/Labeled (0 before any labeled example).
	Accuracy float64 `json:"accuracy"`
	// RollingAccuracy is the accuracy over the last Config.Window labeled
	// examples.
	RollingAccuracy float64 `json:"rolling_accuracy"`
	// The confusion counts of a binary model, the positive class being +1.
	TruePositives  uint64 `json:"true_positives"`
	FalsePositives uint64 `json:"false_positives"`
	TrueNegatives  uint64 `json:"true_negatives"`
	FalseNegatives uint64 `json:"false_negatives"`
	// The prequential quality of the calibrated probabilities, over the
	// stream and over the last Config.Window labeled examples: log-loss
	// (natural log), Brier score, expected calibration error (10
	// equal-width bins; for a multiclass model over the predicted class's
	// probability) and, for a binary model only, ROC AUC (0 otherwise).
	LogLoss                 float64 `json:"log_loss"`
	Brier                   float64 `json:"brier"`
	CalibrationError        float64 `json:"calibration_error"`
	AUC                     float64 `json:"auc"`
	RollingLogLoss          float64 `json:"rolling_log_loss"`
	RollingBrier            float64 `json:"rolling_brier"`
	RollingCalibrationError float64 `json:"rolling_calibration_error"`
	RollingAUC              float64 `json:"rolling_auc"`
}

// prequential holds the counters and the rolling window.
type prequential struct {
	Metrics
	window  []bool  // ring of the last len(window) outcomes, true = correct
	next    int     // slot of the next outcome
	correct int     // true values in the filled part of window
	r2      float64 // R², kept squared so that the r2 bias rule is exact
	prob    probabilityMetrics
}

func newPrequential(window int) prequential {
	return prequential{window: make([]bool, window), prob: newProbabilityMetrics(window)}
}

// calibrationBins is the number of equal-width bins of the expected
// calibration error.
const calibrationBins = 10

// aucBins is the number of equal-width bins of P(label = +1) in which the
// ROC AUC over the stream counts the positive and negative examples. Two
// examples of the same bin count as a tie, one half, so the AUC is within
// ½·Σ_b P_b·N_b/(P·N) of the exact one (P_b and N_b being bin b's
// positives and negatives, P and N their totals): at most half the share
// of pairs whose probabilities are less than 1/aucBins apart.
const aucBins = 1024

// probabilityMetrics are the prequential measures of the published
// probabilities: sums over the stream and a ring of the window's last
// outcomes, aligned with prequential.window. A binary model's event is
// label = +1 and its probability P(label = +1); a multiclass model's event
// is a correct prediction and its probability the predicted class's (the
// top-label calibration error).
type probabilityMetrics struct {
	count   uint64 // labeled examples measured
	logLoss float64
	brier   float64
	// The calibration bins: examples, events and the sum of the
	// probabilities of each.
	binCount  []uint64
	binEvents []uint64
	binSum    []float64
	// The AUC histogram of a binary model: positives and negatives per
	// bin of P(label = +1); nil for a multiclass model.
	aucPositive []uint64
	aucNegative []uint64
	// The window's slots: probability, event, log-loss and Brier score.
	wProb  []float64
	wEvent []bool
	wLoss  []float64
	wBrier []float64
	// The rolling AUC's scratch: the window's probabilities of positive
	// and of negative examples.
	pos, neg []float64
	// The rolling measures as fill last computed them, at count
	// (cached is false until then and after a restore).
	cached   bool
	cachedAt uint64
	rolling  [4]float64
}

func newProbabilityMetrics(window int) probabilityMetrics {
	return probabilityMetrics{
		binCount:  make([]uint64, calibrationBins),
		binEvents: make([]uint64, calibrationBins),
		binSum:    make([]float64, calibrationBins),
		wProb:     make([]float64, window),
		wEvent:    make([]bool, window),
		wLoss:     make([]float64, window),
		wBrier:    make([]float64, window),
	}
}

// binOf is the bin of p in [0, 1] among n equal-width bins.
func binOf(p float64, n int) int { return max(0, min(int(p*float64(n)), n-1)) }

// measure records one outcome at the window's slot: p the probability of
// the event, event whether it happened, loss and brier the example's
// log-loss and Brier score. binary says whether the AUC counts it.
func (q *probabilityMetrics) measure(slot int, p float64, event bool, loss, brier float64, binary bool) {
	q.count++
	q.logLoss += loss
	q.brier += brier
	b := binOf(p, calibrationBins)
	q.binCount[b]++
	q.binSum[b] += p
	if event {
		q.binEvents[b]++
	}
	if binary {
		if q.aucPositive == nil {
			q.aucPositive = make([]uint64, aucBins)
			q.aucNegative = make([]uint64, aucBins)
		}
		if event {
			q.aucPositive[binOf(p, aucBins)]++
		} else {
			q.aucNegative[binOf(p, aucBins)]++
		}
	}
	q.wProb[slot], q.wEvent[slot], q.wLoss[slot], q.wBrier[slot] = p, event, loss, brier
}

// clampedLog is -log(p) with p kept within [minProbability, 1]: the
// log-loss of a probability of 0 is finite.
func clampedLog(p float64) float64 { return -math.Log(max(p, minProbability)) }

// fill sets m's probability measures.
func (q *probabilityMetrics) fill(m *Metrics, next int) {
	if q.count == 0 {
		return
	}
	n := float64(q.count)
	m.LogLoss, m.Brier = q.logLoss/n, q.brier/n
	m.CalibrationError = calibrationError(q.binCount, q.binEvents, q.binSum, n)
	if q.aucPositive != nil {
		m.AUC = histogramAUC(q.aucPositive, q.aucNegative)
	}
	if !q.cached || q.cachedAt != q.count {
		q.rolling = q.window(next)
		q.cached, q.cachedAt = true, q.count
	}
	m.RollingLogLoss, m.RollingBrier, m.RollingCalibrationError, m.RollingAUC = q.rolling[0], q.rolling[1], q.rolling[2], q.rolling[3]
}

// window computes the rolling log-loss, Brier score, calibration error
// and, for a binary model, AUC over the filled slots of the window, the
// newest being before next.
func (q *probabilityMetrics) window(next int) (r [4]float64) {
	w := len(q.wProb)
	filled := int(min(q.count, uint64(w)))
	var count, events [calibrationBins]uint64
	var sum [calibrationBins]float64
	var loss, brier float64
	q.pos, q.neg = q.pos[:0], q.neg[:0]
	for i := range filled {
		slot := next - 1 - i
		if slot < 0 {
			slot += w
		}
		p := q.wProb[slot]
		loss += q.wLoss[slot]
		brier += q.wBrier[slot]
		b := binOf(p, calibrationBins)
		count[b]++
		sum[b] += p
		if q.wEvent[slot] {
			events[b]++
			q.pos = append(q.pos, p)
		} else {
			q.neg = append(q.neg, p)
		}
	}
	f := float64(filled)
	r[0], r[1] = loss/f, brier/f
	r[2] = calibrationError(count[:], events[:], sum[:], f)
	if q.aucPositive != nil {
		slices.Sort(q.pos)
		slices.Sort(q.neg)
		r[3] = exactAUC(q.pos, q.neg)
	}
	return r
}

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

func (p *prequential) record(correct bool) {
	p.Labeled++
	if !correct {
		p.Mistakes++
	}
	if p.Labeled > uint64(len(p.window)) && p.window[p.next] {
		p.correct--
	}
	p.window[p.next] = correct
	if correct {
		p.correct++
	}
	p.next++
	if p.next == len(p.window) {
		p.next = 0
	}
}

// measure records the probabilities of a labeled example's prediction,
// before record moves the window on: probs are the calibrator's (P(label
// = +1) of a binary model, every class's of a multiclass one), y the
// label.
func (p *prequential) measure(pr *Prediction, y int, probs []float64) {
	if len(probs) == 1 {
		q, event := probs[0], y > 0
		t := 0.0
		if event {
			t = 1
		}
		loss := clampedLog(1 - q)
		if event {
			loss = clampedLog(q)
		}
		p.prob.measure(p.next, q, event, loss, (q-t)*(q-t), true)
		return
	}
	var brier float64
	for c, q := range probs {
		if c == y {
			q--
		}
		brier += q * q
	}
	p.prob.measure(p.next, pr.Probability, pr.Label == y, clampedLog(probs[y]), brier, false)
}

func (p *prequential) confusion(predicted, label int) {
	switch {
	case predicted > 0 && label > 0:
		p.TruePositives++
	case predicted > 0:
		p.FalsePositives++
	case label > 0:
		p.FalseNegatives++
	default:
		p.TrueNegatives++
	}
}

func (p *prequential) snapshot() Metrics {
	m := p.Metrics
	m.R = math.Sqrt(p.r2)
	if m.Labeled > 0 {
		m.Accuracy = 1 - float64(m.Mistakes)/float64(m.Labeled)
		filled := min(m.Labeled, uint64(len(p.window)))
		m.RollingAccuracy = float64(p.correct) / float64(filled)
	}
	p.prob.fill(&m, p.next)
	return m
}
