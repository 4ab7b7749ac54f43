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

// aucBins is the number of equal-width bins of P(label = +1) in which the
// ROC AUC over the stream counts the positive and negative examples. Two
// examples of the same bin count as a tie, one half, so the AUC is within
// ½·Σ_b P_b·N_b/(P·N) of the exact one (P_b and N_b being bin b's
// positives and negatives, P and N their totals): at most half the share
// of pairs whose probabilities are less than 1/aucBins apart.
const aucBins = 1024

// probabilityMetrics are the prequential measures of the published
// probabilities (see ScoreProbability): sums over the stream and a ring of
// the window's last outcomes, aligned with prequential.window.
type probabilityMetrics struct {
	stream ProbabilitySums
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
	// The rolling measures as fill last computed them, at stream.n
	// (cached is false until then and after a restore).
	cached   bool
	cachedAt uint64
	rolling  [4]float64
}

func newProbabilityMetrics(window int) probabilityMetrics {
	return probabilityMetrics{
		wProb:  make([]float64, window),
		wEvent: make([]bool, window),
		wLoss:  make([]float64, window),
		wBrier: make([]float64, window),
	}
}

// measure records the score of one outcome at the window's slot. binary
// says whether the AUC counts it.
func (q *probabilityMetrics) measure(slot int, sc ProbabilityScore, binary bool) {
	q.stream.Add(sc)
	if binary {
		if q.aucPositive == nil {
			q.aucPositive = make([]uint64, aucBins)
			q.aucNegative = make([]uint64, aucBins)
		}
		if sc.Event {
			q.aucPositive[binOf(sc.P, aucBins)]++
		} else {
			q.aucNegative[binOf(sc.P, aucBins)]++
		}
	}
	q.wProb[slot], q.wEvent[slot], q.wLoss[slot], q.wBrier[slot] = sc.P, sc.Event, sc.LogLoss, sc.Brier
}

// fill sets m's probability measures.
func (q *probabilityMetrics) fill(m *Metrics, next int) {
	n := q.stream.Count()
	if n == 0 {
		return
	}
	if !q.cached || q.cachedAt != n {
		q.rolling = q.window(next)
		q.cached, q.cachedAt = true, n
	}
	q.set(m, q.rolling)
}

// set sets m's probability measures over the stream, and over the window
// to rolling (log-loss, Brier score, calibration error, AUC).
func (q *probabilityMetrics) set(m *Metrics, rolling [4]float64) {
	m.LogLoss, m.Brier, m.CalibrationError = q.stream.Means()
	if q.aucPositive != nil {
		m.AUC = histogramAUC(q.aucPositive, q.aucNegative)
	}
	m.RollingLogLoss, m.RollingBrier, m.RollingCalibrationError, m.RollingAUC = rolling[0], rolling[1], rolling[2], rolling[3]
}

// window computes the rolling log-loss, Brier score, calibration error
// and, for a binary model, AUC over the filled slots of the window, the
// newest being before next.
func (q *probabilityMetrics) window(next int) [4]float64 {
	r := q.gather(next)
	if q.aucPositive != nil {
		r[3] = windowAUC(q.pos, q.neg)
	}
	return r
}

// windowAUC is the exact AUC of a window's probabilities of positive and
// of negative examples, which it sorts in place.
func windowAUC(pos, neg []float64) float64 {
	slices.Sort(pos)
	slices.Sort(neg)
	return exactAUC(pos, neg)
}

// gather is window but for the AUC, left 0: the window's probabilities of
// positive and of negative examples are left in q.pos and q.neg, unsorted.
func (q *probabilityMetrics) gather(next int) (r [4]float64) {
	w := len(q.wProb)
	filled := int(min(q.stream.Count(), uint64(w)))
	var sums ProbabilitySums
	q.pos, q.neg = q.pos[:0], q.neg[:0]
	for i := range filled {
		slot := next - 1 - i
		if slot < 0 {
			slot += w
		}
		sc := ProbabilityScore{P: q.wProb[slot], Event: q.wEvent[slot], LogLoss: q.wLoss[slot], Brier: q.wBrier[slot]}
		sums.Add(sc)
		if sc.Event {
			q.pos = append(q.pos, sc.P)
		} else {
			q.neg = append(q.neg, sc.P)
		}
	}
	r[0], r[1], r[2] = sums.Means()
	return r
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

// measure records the probabilities of a labeled example's prediction
// pr, before record moves the window on, y being the label.
func (p *prequential) measure(pr *Prediction, y int) {
	p.prob.measure(p.next, ScoreProbability(pr, y), pr.Probabilities == nil)
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
	m := p.counted()
	p.prob.fill(&m, p.next)
	return m
}

// counted is snapshot without the probability measures.
func (p *prequential) counted() Metrics {
	m := p.Metrics
	m.R = math.Sqrt(p.r2)
	if m.Labeled > 0 {
		m.Accuracy = 1 - float64(m.Mistakes)/float64(m.Labeled)
		filled := min(m.Labeled, uint64(len(p.window)))
		m.RollingAccuracy = float64(p.correct) / float64(filled)
	}
	return m
}
