package learner

import (
	"fmt"
	"math"
)

// Prediction is a model's output for one example.
type Prediction struct {
	// Label is the predicted label: +1 or -1 for a binary model, the class
	// index for a multiclass one (ties go to the lowest index).
	Label int
	// Score is f(x) = w·x + b for a binary model and the predicted class's
	// score for a multiclass one.
	Score float64
	// Scores holds every class's score of a multiclass model (nil for a
	// binary one). It is owned by the Model and overwritten by its next
	// call.
	Scores []float64
	// Probability is the calibrated probability of the prediction: for a
	// binary model P(label = +1), for a multiclass one the predicted
	// class's probability. The label is the score's (its sign, or the
	// class of the highest score), not the probability's: a multiclass
	// calibrator's offset per class can make a class the scores rank
	// lower the more probable one.
	Probability float64
	// Probabilities holds every class's calibrated probability of a
	// multiclass model, summing to 1 (nil for a binary one). It is owned
	// by the Model and overwritten by its next call, like Scores.
	Probabilities []float64
}

// Outcome is what Learn did with one example.
type Outcome struct {
	Prediction
	Labeled bool
	// Correct reports whether the prediction equals the label.
	Correct bool
	// Margin is y·f(x) for a binary model and, for a multiclass one, the
	// label's score minus the best other score. It is measured on the
	// prediction, before the update.
	Margin float64
	// Updated reports whether the example changed the model (or, in
	// mini-batch mode, added to the pending update).
	Updated bool
	// Drift is the change of concept the model's detector found at this
	// labeled example, nil if none (see DriftConfig). The model learned
	// the example, then started its parameters afresh.
	Drift *Drift
}

// engine is an update rule with its state.
type engine interface {
	// predict writes the published scores of x to out and keeps what a
	// following update of the same x needs. labeled is the number of
	// labeled examples learned so far.
	predict(x *Example, out []float64, labeled uint64)
	// update learns the label y of the x last predicted and reports
	// whether it changed the model.
	update(x *Example, y int, s step) bool
	// export writes the engine's state into st, its per-weight vectors
	// copied, or handed over with release.
	export(st *State, release bool)
	// freeze returns a copy of what predicting reads (see View).
	freeze() scorer
}

// step is what an update needs beyond the example.
type step struct {
	t          uint64  // 1-based index of this labeled example
	eta        float64 // η_t · importance
	importance float64
	norm2      float64 // ‖x‖²
	r2         float64 // R², running, including this example
}

// Model is an on-line classifier. Build one with New or Restore.
type Model struct {
	cfg      Config
	eng      engine
	metrics  prequential
	detector detector
	scores   []float64
	cal      calibrator
	calIn    []float64 // the calibrator's inputs for the current example
	probs    []float64 // the current example's probabilities
	norm     Example   // the normalised copy of the current example
	// challengers learn beside the model (see Challengers); nil for
	// none.
	challengers []*Challenger
	// promotions are the model's history of promotions (Promote).
	promotions []Promotion
	// changes records what learning writes, after TrackChanges.
	changes *changeSet
}

// New returns an untrained model for cfg, which must be valid.
func New(cfg Config) (*Model, error) { return newModel(cfg, newEngine) }

// newModel is a model of cfg whose rule engine makes.
func newModel(cfg Config, engine func(Config) engine) (*Model, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg.Classes = append([]string(nil), cfg.Classes...)
	m := &Model{
		cfg:      cfg,
		metrics:  newPrequential(cfg.Window),
		detector: newDetector(cfg.Drift),
		scores:   make([]float64, cfg.outputs()),
		cal:      newCalibrator(cfg.outputs()),
		calIn:    make([]float64, calibratorInputs(cfg.outputs())),
		probs:    make([]float64, cfg.outputs()),
		eng:      engine(cfg),
	}
	return m, nil
}

// newEngine is the update rule of cfg with the state of a new model.
func newEngine(cfg Config) engine {
	if cfg.Algorithm == Kernel {
		return newKernelPerceptron(cfg)
	}
	return newLinear(cfg)
}

// Config is the model's configuration.
func (m *Model) Config() Config {
	c := m.cfg
	c.Classes = append([]string(nil), c.Classes...)
	return c
}

// Metrics are the model's prequential counts.
func (m *Model) Metrics() Metrics { return m.metrics.snapshot() }

// Counts are a model's prequential counters alone, as Metrics has them.
type Counts struct{ Examples, Labeled, Mistakes, Updates uint64 }

// Counts returns the model's counters: cheap enough to read for every
// example, where Metrics also measures the rolling window.
func (m *Model) Counts() Counts {
	p := &m.metrics
	return Counts{Examples: p.Examples, Labeled: p.Labeled, Mistakes: p.Mistakes, Updates: p.Updates}
}

// Version is the number of updates applied so far.
func (m *Model) Version() uint64 { return m.metrics.Updates }

// Predict scores x without learning from it or counting it. A label on x
// is ignored.
func (m *Model) Predict(x *Example) Prediction {
	x = m.prepare(x)
	return m.predict(x)
}

// Learn scores x with the current model, then, if x is labeled, records
// whether that prediction was right and updates the model. Unlabeled
// examples are counted and never change the model.
//
// A labeled example the model cannot learn safely, because ‖x‖² exceeds
// MaxNorm2 or is NaN, or its importance is not in (0, MaxValue], is
// treated as unlabeled: scored and counted, never learned, and
// Outcome.Labeled is false. Decoders refuse such input before it gets
// here (see MaxValue).
//
// Learn panics if x's label or an index is out of range for the model:
// decoders reject such input with an error before it gets here.
func (m *Model) Learn(x *Example) Outcome {
	x = m.prepare(x)
	o := Outcome{Prediction: m.predict(x)}
	m.metrics.Examples++
	if !x.Labeled {
		return o
	}
	y := x.Label
	m.checkLabel(y)
	n2 := x.norm2()
	imp := x.importance()
	if !learnable(n2, imp) {
		return o
	}
	o.Labeled = true
	o.Correct = o.Label == y
	if m.cfg.Multiclass() {
		o.Margin = o.Scores[y] - bestOther(o.Scores, y)
	} else {
		o.Margin = float64(y) * o.Score
		m.metrics.confusion(o.Label, y)
	}
	m.metrics.measure(&o.Prediction, y)
	m.metrics.record(o.Correct)
	m.cal.learn(m.scores, m.calIn, m.probs, y)

	m.metrics.r2 = max(m.metrics.r2, n2)
	t := m.metrics.Labeled
	s := step{
		t:          t,
		eta:        m.eta(t) * imp,
		importance: imp,
		norm2:      n2,
		r2:         m.metrics.r2,
	}
	if m.eng.update(x, y, s) {
		m.metrics.Updates++
		o.Updated = true
	}
	if m.cfg.Drift.Enabled {
		o.Drift = m.observe(o.Correct)
	}
	if m.changes != nil && (o.Updated || o.Drift != nil) {
		m.markChanged(x, o.Drift != nil)
	}
	return o
}

func (m *Model) predict(x *Example) Prediction {
	m.eng.predict(x, m.scores, m.metrics.Labeled)
	p := m.cfg.prediction(m.scores)
	m.cal.probability(m.scores, m.calIn, m.probs)
	m.cfg.probability(&p, m.probs)
	return p
}

// probability sets p's probabilities from probs, the calibrator's.
func (cfg *Config) probability(p *Prediction, probs []float64) {
	if cfg.Multiclass() {
		p.Probabilities = probs
		p.Probability = probs[p.Label]
		return
	}
	p.Probability = probs[0]
}

// prediction is the prediction of the published scores.
func (cfg *Config) prediction(scores []float64) Prediction {
	if !cfg.Multiclass() {
		p := Prediction{Score: scores[0], Label: -1}
		if p.Score >= 0 {
			p.Label = 1
		}
		return p
	}
	best := 0
	for c, s := range scores {
		if s > scores[best] {
			best = c
		}
	}
	return Prediction{Label: best, Score: scores[best], Scores: scores}
}

// prepare returns x, or its normalised copy when the model normalises.
func (m *Model) prepare(x *Example) *Example { return m.cfg.normalize(x, &m.norm) }

// normalize returns x, or, when cfg normalises, x scaled to unit norm in
// c.
func (cfg *Config) normalize(x, c *Example) *Example {
	if !cfg.Normalize {
		return x
	}
	n := math.Sqrt(x.norm2())
	if n == 0 || n == 1 || !finite(n) {
		// Nothing to scale, or nothing that scales: an example with a
		// NaN or infinite norm stays as it is, for Learn to refuse.
		return x
	}
	c.Index = x.Index
	c.Value = c.Value[:0]
	for _, v := range x.Value {
		c.Value = append(c.Value, v/n)
	}
	c.Dense = c.Dense[:0]
	for _, v := range x.Dense {
		c.Dense = append(c.Dense, v/n)
	}
	c.Labeled, c.Label, c.Weight = x.Labeled, x.Label, x.Weight
	return c
}

func (m *Model) checkLabel(y int) {
	if m.cfg.Multiclass() {
		if y < 0 || y >= len(m.cfg.Classes) {
			panic(fmt.Sprintf("learner: class %d out of range [0, %d)", y, len(m.cfg.Classes)))
		}
		return
	}
	if y != 1 && y != -1 {
		panic(fmt.Sprintf("learner: binary label %d is neither +1 nor -1", y))
	}
}

func (m *Model) eta(t uint64) float64 {
	switch m.cfg.Schedule {
	case Inverse:
		return m.cfg.Eta / float64(t)
	case InverseSqrt:
		return m.cfg.Eta / math.Sqrt(float64(t))
	}
	return m.cfg.Eta
}

// bestOther is the largest score of a class other than y.
func bestOther(scores []float64, y int) float64 {
	return scores[argmaxOther(scores, y)]
}

// argmaxOther is the class other than y with the largest score, the
// lowest index on ties.
func argmaxOther(scores []float64, y int) int {
	best := -1
	for c, s := range scores {
		if c != y && (best < 0 || s > scores[best]) {
			best = c
		}
	}
	return best
}
