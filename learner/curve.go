package learner

// Curve is the learning curve of a model over a stream, measured
// prequentially as Curve.Learn learns it: every window labeled examples a
// point with the accuracy and the probabilities' measures over that
// window and over the stream so far. It also keeps, with or without
// points, the examples at which the model's detector found a change of
// concept and, for a binary model, the exact ROC AUC over the stream
// (see ExactAUC; Metrics' is binned). The measures are the Metrics' own
// (see ScoreProbability and ProbabilitySums).
//
// A binary model's Curve holds 8 bytes for each labeled example, for the
// exact AUC. A Curve is not safe for concurrent use.
type Curve struct {
	window  uint64 // labeled examples a point measures; 0: no points
	m       *Model
	start   CurvePoint // the model's counts when the curve began
	labeled uint64     // labeled examples learned through the curve
	sums    ProbabilitySums
	auc     *ExactAUC // nil for a multiclass model
	drifts  []uint64
	pending int     // changes found since the last point
	at      Metrics // the model's metrics at the last point
	points  []CurvePoint
	overall float64 // the exact AUC over every window closed
}

// Window is the number of labeled examples a point measures; 0 for a
// curve without points.
func (c *Curve) Window() uint64 { return c.window }

// CurvePoint is one point of a learning curve.
type CurvePoint struct {
	// Examples and Labeled are the model's counts at the point.
	Examples, Labeled uint64
	// Drifts are the changes of concept found in the window.
	Drifts int
	// WindowAccuracy is the accuracy over the labeled examples since the
	// point before (a full window but for the last point); Accuracy the
	// model's over every labeled example so far.
	WindowAccuracy, Accuracy float64
	// The probabilities' log-loss, Brier score, expected calibration
	// error and ROC AUC over the same window, and over the stream so far:
	// the model's Metrics but for the AUC, exact here. HasAUC says the
	// model is binary, the only kind with an AUC.
	WindowLogLoss, LogLoss                   float64
	WindowBrier, Brier                       float64
	WindowCalibrationError, CalibrationError float64
	WindowAUC, AUC                           float64
	HasAUC                                   bool
}

// NewCurve returns the curve of m from its next example on, a point every
// window labeled examples (none for 0). The curve's points count the
// model's Metrics from where m is.
func NewCurve(m *Model, window uint64) *Curve {
	c := &Curve{window: window, m: m, at: m.Metrics()}
	c.start = CurvePoint{Examples: c.at.Examples, Labeled: c.at.Labeled}
	if !m.cfg.Multiclass() {
		c.auc = &ExactAUC{}
	}
	return c
}

// Learn learns x with the curve's model (see Model.Learn), measures the
// outcome and adds a point when a window is full.
func (c *Curve) Learn(x *Example) Outcome {
	o := c.m.Learn(x)
	if o.Drift != nil {
		c.drifts = append(c.drifts, c.m.metrics.Examples-1)
		c.pending++
	}
	if !o.Labeled {
		return o
	}
	c.measure(&o, x.Label)
	if c.labeled++; c.window > 0 && c.labeled%c.window == 0 {
		c.point(c.m.Metrics())
	}
	return o
}

// measure takes the probabilities of the outcome o of an example labeled
// y.
func (c *Curve) measure(o *Outcome, y int) {
	if c.auc != nil {
		c.auc.Add(o.Probability, y > 0)
	}
	if c.window > 0 {
		c.sums.Add(ScoreProbability(&o.Prediction, y))
	}
}

// End closes the curve: it adds the point of a last window that is not
// full, and closes the exact AUC's window. Call it once, after the last
// example and before Points and AUC.
func (c *Curve) End() {
	mt := c.m.Metrics()
	if c.window > 0 && mt.Labeled > c.at.Labeled {
		c.point(mt)
	} else if c.auc != nil {
		_, c.overall = c.auc.Window()
	}
}

func (c *Curve) point(mt Metrics) {
	n := mt.Labeled - c.at.Labeled
	p := CurvePoint{
		Examples: mt.Examples, Labeled: mt.Labeled, Drifts: c.pending,
		WindowAccuracy: 1 - float64(mt.Mistakes-c.at.Mistakes)/float64(n), Accuracy: mt.Accuracy,
		LogLoss: mt.LogLoss, Brier: mt.Brier, CalibrationError: mt.CalibrationError,
	}
	p.WindowLogLoss, p.WindowBrier, p.WindowCalibrationError = c.sums.Means()
	if c.auc != nil {
		p.HasAUC = true
		p.WindowAUC, p.AUC = c.auc.Window()
		c.overall = p.AUC
	}
	c.points = append(c.points, p)
	c.at, c.pending, c.sums = mt, 0, ProbabilitySums{}
}

// Points are the curve's points, oldest first.
func (c *Curve) Points() []CurvePoint { return c.points }

// Drifts are the examples, counted from 0 over the model's life, at which
// the model's detector found a change of concept while the curve learned.
func (c *Curve) Drifts() []uint64 { return c.drifts }

// AUC is the exact ROC AUC of a binary model's probabilities over the
// labeled examples the curve learned, as of End (0 without both a
// positive and a negative); ok is false for a multiclass model.
func (c *Curve) AUC() (auc float64, ok bool) { return c.overall, c.auc != nil }

// DriftsLabeled places each change found on the curve's axis of labeled
// examples: the labeled examples learned when it was found, interpolated
// between the points around it. A change after the last point has no
// place, and is left out.
func (c *Curve) DriftsLabeled() []float64 {
	var at []float64
	for _, ex := range c.drifts {
		prev := c.start
		for _, p := range c.points {
			if p.Examples > ex {
				span := float64(p.Examples - prev.Examples)
				frac := float64(ex+1-prev.Examples) / span
				at = append(at, float64(prev.Labeled)+frac*float64(p.Labeled-prev.Labeled))
				break
			}
			prev = p
		}
	}
	return at
}
