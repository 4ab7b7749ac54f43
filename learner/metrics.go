package learner

import "math"

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
}

func newPrequential(window int) prequential {
	return prequential{window: make([]bool, window)}
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
	return m
}
