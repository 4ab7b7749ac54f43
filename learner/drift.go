package learner

import (
	"math"
)

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
	// lowN and lowMean are n and mean when the sum last reached its
	// lowest point: where the rise began.
	lowN    uint64
	lowMean float64
	// before and after are the rates of the last alarm (see Rates).
	before, after float64
}

// DefaultPageHinkley is tuned for the 0/1 loss of prequential
// predictions: it ignores rises of the error rate under 5 points and
// needs about 2,000 examples of a rise of 10 (BENCHMARKS.md, "Detecting a
// change of concept").
func DefaultPageHinkley() PageHinkley {
	d := DefaultDrift()
	return PageHinkley{Delta: d.Delta, Threshold: d.Threshold, MinExamples: d.MinExamples}
}

// Add adds the loss of one example and reports whether the losses have
// risen: then the detector starts again from nothing, to find the next
// change, and Rates gives the mean loss before and after the rise.
func (d *PageHinkley) Add(loss float64) bool {
	d.n++
	d.mean += (loss - d.mean) / float64(d.n)
	d.sum += loss - d.mean - d.Delta
	if d.sum < d.low {
		d.low, d.lowN, d.lowMean = d.sum, d.n, d.mean
	}
	if d.n >= d.MinExamples && d.sum-d.low > d.Threshold {
		before, after := d.lowMean, d.mean
		if k := d.n - d.lowN; k > 0 {
			// The losses since the lowest point: all of them less those
			// up to it.
			after = (d.mean*float64(d.n) - d.lowMean*float64(d.lowN)) / float64(k)
			after = min(max(after, 0), 1)
		}
		*d = PageHinkley{Delta: d.Delta, Threshold: d.Threshold, MinExamples: d.MinExamples, before: before, after: after}
		return true
	}
	return false
}

// Rates are the mean loss before the rise that the last alarm found (up
// to the lowest point of the sum) and after it (from there to the alarm):
// for the 0/1 loss, the error rates the detector saw on either side of
// the change. Both are 0 before the first alarm.
func (d *PageHinkley) Rates() (before, after float64) { return d.before, d.after }

// DriftConfig configures a model's change detector (model.drift): a
// Page-Hinkley test over the 0/1 loss of each labeled example's
// prequential prediction. When it finds a rise of the error rate, the
// model reports a drift on that example (Outcome.Drift) and starts its
// parameters afresh, keeping its counters.
type DriftConfig struct {
	Enabled bool `json:"enabled" yaml:"enabled" msgpack:"enabled" help:"watch the prequential error rate for a change of concept; on a change, report a drift and start the model's parameters afresh"`
	// Delta is the rise of the error rate that is ignored.
	Delta float64 `json:"delta" yaml:"delta" msgpack:"delta" help:"rise of the error rate the change detector ignores (Page-Hinkley's delta)"`
	// Threshold is the evidence of a rise that makes a drift.
	Threshold float64 `json:"threshold" yaml:"threshold" msgpack:"threshold" help:"evidence of a rise of the error rate that reports a drift (Page-Hinkley's lambda)"`
	// MinExamples is the labeled examples the detector sees, since the
	// model began or since the last drift, before it can report one.
	MinExamples uint64 `json:"min_examples" yaml:"min_examples" msgpack:"min_examples" help:"labeled examples since the start or the last drift before a drift can be reported"`
}

// DefaultDrift is the detector every model has unless configured
// otherwise: on, with the values of BENCHMARKS.md, "Detecting a change of
// concept" (no alarm on the stationary synthetic stream of 1M examples,
// an abrupt change found within 1,100 examples).
func DefaultDrift() DriftConfig {
	return DriftConfig{Enabled: true, Delta: 0.05, Threshold: 100, MinExamples: 1000}
}

// validate checks the detector's settings, whether or not it is enabled:
// a disabled detector keeps values that enabling it would use.
func (c DriftConfig) validate() error {
	switch {
	case !(c.Delta >= 0 && c.Delta < 1):
		return fieldErr("drift.delta", "must be a number in [0, 1), got %v", c.Delta)
	case !positive(c.Threshold):
		return fieldErr("drift.threshold", "must be a positive number, got %v", c.Threshold)
	case c.MinExamples < 1:
		return fieldErr("drift.min_examples", "must be at least 1, got %d", c.MinExamples)
	}
	return nil
}

// Detector is the state of a model's change detector: zero for a fresh
// one, as a model begins, and as a snapshot written before detectors
// existed loads. N, Mean, Sum and Low are the Page-Hinkley test's count,
// mean loss, cumulative sum and its lowest point since the last drift;
// LowN and LowMean are N and Mean at that lowest point; Drifts counts the
// drifts found over the model's life, and Restarted is the labeled
// examples the model had learned when its parameters last started afresh
// at one (0 before the first).
type Detector struct {
	N, LowN       uint64
	Mean, LowMean float64
	Sum, Low      float64
	Drifts        uint64
	Restarted     uint64
}

// Drift is a change of concept found at an example: the detector's count
// of drifts, this one included, and the error rates it saw before and
// after the change.
type Drift struct {
	Count                   uint64
	ErrorBefore, ErrorAfter float64
}

// detector is the model's running detector.
type detector struct {
	ph        PageHinkley
	drifts    uint64
	restarted uint64
}

func newDetector(c DriftConfig) detector {
	return detector{ph: PageHinkley{Delta: c.Delta, Threshold: c.Threshold, MinExamples: c.MinExamples}}
}

func (d *detector) export() Detector {
	p := &d.ph
	return Detector{
		N: p.n, LowN: p.lowN, Mean: p.mean, LowMean: p.lowMean, Sum: p.sum, Low: p.low,
		Drifts: d.drifts, Restarted: d.restarted,
	}
}

func (d *detector) restore(s Detector) {
	p := &d.ph
	p.n, p.lowN, p.mean, p.lowMean, p.sum, p.low = s.N, s.LowN, s.Mean, s.LowMean, s.Sum, s.Low
	d.drifts, d.restarted = s.Drifts, s.Restarted
}

// observe feeds the detector the outcome of one labeled example and
// returns the drift it found there, nil if none. When it finds one the
// model starts its parameters afresh (see recover).
func (m *Model) observe(correct bool) *Drift {
	loss := 1.0
	if correct {
		loss = 0
	}
	d := &m.detector
	if !d.ph.Add(loss) {
		return nil
	}
	d.drifts++
	d.restarted = m.metrics.Labeled
	m.recover()
	before, after := d.ph.Rates()
	return &Drift{Count: d.drifts, ErrorBefore: before, ErrorAfter: after}
}

// recover starts the model's parameters afresh after a drift: the
// weights, biases, averaging sums and AROW's variances of a new model, an
// empty support set for the kernel. The counters, the rolling window and
// the version go on. It is the recovery that measured best
// (BenchmarkDriftRecovery, 1M synthetic examples whose concept changes at
// 500k): over the 500k after the change, arow, perceptron, pa1 and
// averaged end within 0.06 points of a model trained on them alone, where
// without recovery they trail it by 6.0, 0.7, 1.3 and 10.3 points (AROW's
// variances and the averaged perceptron's average only grow more
// attached to the old concept), and a reset of AROW's variances alone by
// 1.5. The stationary stream raises no drift, so costs nothing. The
// calibrator starts afresh too: its scale and its outcomes are the old
// model's, and read the new model's first scores as if they were as sure.
// A linear model's parameters start afresh in their own vectors: a new
// engine's would be new memory, faulted in page by page as it is first
// written (a 4 MiB AROW model at the defaults, and one for every range of
// an epoch that finds the drift).
func (m *Model) recover() {
	if l, ok := m.eng.(*linear); ok {
		l.reset()
	} else {
		m.eng = newEngine(m.cfg)
	}
	m.cal = newCalibrator(m.cfg.outputs())
}

// Drifts is the number of drifts the model's detector has found.
func (m *Model) Drifts() uint64 { return m.detector.drifts }

// SinceRestart is the labeled examples the model has learned since its
// parameters last started afresh at a drift, and false when they never
// did: then the model has learned every example it counts. Epochs grow
// from there, as from a new model's start.
func (m *Model) SinceRestart() (uint64, bool) {
	if m.detector.drifts == 0 {
		return 0, false
	}
	return m.metrics.Labeled - m.detector.restarted, true
}

// validateDetector checks st.Detector: finite statistics in their ranges.
func (st *State) validateDetector() error {
	d := &st.Detector
	for _, v := range []struct {
		field string
		value float64
	}{
		{"detector.mean", d.Mean}, {"detector.low_mean", d.LowMean},
	} {
		if !(v.value >= 0 && v.value <= 1) {
			return stateErr(v.field, "must be a loss rate in [0, 1], got %v", v.value)
		}
	}
	if !finite(d.Sum) || !(d.Low <= 0) || !(d.Low <= d.Sum) || math.IsInf(d.Low, 0) {
		return stateErr("detector.low", "must be a finite number <= 0 and <= detector.sum %v, got %v", d.Sum, d.Low)
	}
	if d.LowN > d.N || d.N > st.Labeled {
		return stateErr("detector.n", "need detector.low_n <= detector.n <= labeled, got %d, %d, %d", d.LowN, d.N, st.Labeled)
	}
	if d.Drifts > st.Labeled {
		return stateErr("detector.drifts", "%d drifts exceed the %d labeled examples", d.Drifts, st.Labeled)
	}
	if d.Restarted > st.Labeled || (d.Restarted > 0 && d.Drifts == 0) {
		return stateErr("detector.restarted", "must be at most the %d labeled examples, and 0 before a drift, got %d after %d drifts", st.Labeled, d.Restarted, d.Drifts)
	}
	return nil
}

// digestDrift appends the detector's settings and state to a digest,
// only when the settings are not the defaults or the state is not fresh:
// the digest of a state without either is what it was before detectors
// existed.
func (st *State) digestDrift(e *digestEncoder) {
	c, d := st.Config.Drift, st.Detector
	if c == DefaultDrift() && d == (Detector{}) {
		return
	}
	e.str("drift")
	e.bool(c.Enabled)
	e.float(c.Delta)
	e.float(c.Threshold)
	e.uint(c.MinExamples)
	e.uint(d.N)
	e.uint(d.LowN)
	e.float(d.Mean)
	e.float(d.LowMean)
	e.float(d.Sum)
	e.float(d.Low)
	e.uint(d.Drifts)
	e.uint(d.Restarted)
}

// drifted reports whether st, learned from base, found a drift.
func drifted(base, st *State) bool { return st.Detector.Drifts > base.Detector.Drifts }

// restart is what a mix's parameters start from: base and the mixing
// weights mu when no state of positive weight found a drift beyond base;
// otherwise base's counters with a new model's parameters, and mu kept
// for the states that found one only, scaled to sum to 1. Those states
// started afresh at their drift, as a model does (Model.recover), so
// their parameters are those of a new model that learned their examples
// since: mixing them from a new model is mixing models of the new concept
// alone. The others learned the new concept on top of the old and are
// left out of the parameters, as the old model is; their counters count.
// Without it the mixing rules, which weigh each state's change against
// base, would bring the old concept back: BenchmarkDriftRecoveryMixed.
// One state that drifted alone among states of no change still mixes into
// itself.
func restart(base *State, states []*State, mu []float64) (*State, []float64) {
	var sum float64
	for i, st := range states {
		if drifted(base, st) {
			sum += mu[i]
		}
	}
	if sum == 0 {
		return base, mu
	}
	kept := make([]float64, len(mu))
	for i, st := range states {
		if drifted(base, st) {
			kept[i] = mu[i] / sum
		}
	}
	m, err := New(base.Config)
	if err != nil {
		// Not expected: the mix checked base.
		panic("learner: mix: a new model of a valid base's config: " + err.Error())
	}
	// base's counters, with the new model's parameters handed over
	// rather than copied: one model's vectors made, not four.
	fresh := *base
	fresh.Config, fresh.Window = cloneConfig(base.Config), clone(base.Window)
	fresh.takeParameters(m.Release())
	return &fresh, kept
}

// mixDetector sets out.Detector from the states' detectors. The
// statistics are the examples-weighted mean of the states' (a state that
// learned no labeled example beyond base weighs 0; with none, base's),
// summed in state order: the evidence of a change that every shard sees
// stays what one shard gathered, as with one worker, and a shard that
// has seen nothing new does not dilute it. When the model restarts
// (restart), only the states that found a drift count, as for the
// parameters. The drift count is base's plus every state's new drifts,
// as the counters are: each was reported once.
func mixDetector(out, base *State, states []*State, restarted bool) {
	counts := func(st *State) bool { return st.Labeled > base.Labeled && (!restarted || drifted(base, st)) }
	var total float64
	for _, st := range states {
		if counts(st) {
			total += float64(st.Labeled - base.Labeled)
		}
	}
	d := base.Detector
	if total > 0 {
		var n, lowN, mean, lowMean, sum, low float64
		for _, st := range states {
			if !counts(st) {
				continue
			}
			w := float64(st.Labeled-base.Labeled) / total
			s := &st.Detector
			n += w * float64(s.N)
			lowN += w * float64(s.LowN)
			mean += w * s.Mean
			lowMean += w * s.LowMean
			sum += w * s.Sum
			low += w * s.Low
		}
		d.N, d.LowN = uint64(math.Round(n)), uint64(math.Round(lowN))
		d.LowN = min(d.LowN, d.N)
		clamp := func(v float64) float64 { return min(max(v, 0), 1) }
		d.Mean, d.LowMean = clamp(mean), clamp(lowMean)
		d.Sum, d.Low = sum, min(low, sum, 0)
	}
	d.Drifts = base.Detector.Drifts
	for _, st := range states {
		d.Drifts += st.Detector.Drifts - min(st.Detector.Drifts, base.Detector.Drifts)
	}
	if restarted {
		// The parameters start from a new model's at this mix.
		d.Restarted = out.Labeled
	}
	out.Detector = d
}
