package compare

import (
	"fmt"
	"slices"

	"github.com/hyperplane-ml/hyperplane/learner"
)

// Entrant is one named learner configuration of a contest.
type Entrant struct {
	Name   string
	Config learner.Config
}

// Contest is a model and its challengers learning the same examples, in
// the same order: for each example every one predicts, then learns, and
// each challenger's losses are compared with the model's (Comparison).
//
// Feature names are hashed as an example is decoded, so an example is
// wanted once per hashing (hash_bits, hash_seed) among the entrants
// (Hashings, which wire.Decoder.DecodeHashings fills in one decoding),
// not once per entrant: challengers that hash as the model does share
// its decoded example.
type Contest struct {
	entrants []Entrant // [0] is the model
	models   []*learner.Model
	hashing  []int            // entrant → index in hashings
	hashings []learner.Config // one configuration per distinct hashing
	comps    []*Comparison    // per challenger: comps[i-1] is entrant i's
	traces   []*Trace         // likewise
	own      []Loss           // each entrant's loss sums over its labeled examples
	labeled  []int            // each entrant's labeled examples
	losses   []Loss           // the current example's, per entrant
	learned  []bool           // whether the current example was learned, per entrant
}

// NewContest returns a contest of model, named name, and challengers, at
// level alpha (see NewComparison). Names must be distinct and not empty,
// every configuration valid, and every challenger must have the model's
// classes: the label of an example is decoded once for all.
func NewContest(model Entrant, challengers []Entrant, alpha float64) (*Contest, error) {
	c := &Contest{entrants: append([]Entrant{model}, challengers...)}
	for i, e := range c.entrants {
		if e.Name == "" {
			return nil, fmt.Errorf("compare: entrant %d has no name", i)
		}
		if j := slices.IndexFunc(c.entrants[:i], func(o Entrant) bool { return o.Name == e.Name }); j >= 0 {
			return nil, fmt.Errorf("compare: %q names two entrants", e.Name)
		}
		if !slices.Equal(e.Config.Classes, model.Config.Classes) {
			return nil, fmt.Errorf("compare: %s: classes %v are not the model's %v", e.Name, e.Config.Classes, model.Config.Classes)
		}
		m, err := learner.New(e.Config)
		if err != nil {
			return nil, fmt.Errorf("compare: %s: %w", e.Name, err)
		}
		c.models = append(c.models, m)
		h := slices.IndexFunc(c.hashings, func(o learner.Config) bool {
			return o.HashBits == e.Config.HashBits && o.HashSeed == e.Config.HashSeed
		})
		if h < 0 {
			h = len(c.hashings)
			c.hashings = append(c.hashings, e.Config)
		}
		c.hashing = append(c.hashing, h)
		if i > 0 {
			cmp, err := NewComparison(alpha)
			if err != nil {
				return nil, err
			}
			c.comps = append(c.comps, cmp)
			c.traces = append(c.traces, &Trace{})
		}
	}
	n := len(c.entrants)
	c.own, c.labeled, c.losses, c.learned = make([]Loss, n), make([]int, n), make([]Loss, n), make([]bool, n)
	return c, nil
}

// Hashings are the configurations an example is to be decoded with for
// Learn, the model's first: xs[k] of Learn is the example as a decoder
// of Hashings()[k] decodes it.
func (c *Contest) Hashings() []learner.Config { return slices.Clone(c.hashings) }

// Entrants are the model and the challengers, in order.
func (c *Contest) Entrants() []Entrant { return slices.Clone(c.entrants) }

// Learn has every entrant predict, then learn, the same example: xs[k] is
// it decoded with Hashings()[k]. A labeled example that both the model
// and a challenger learned adds their pair of losses to the challenger's
// comparison. Learn does not allocate.
func (c *Contest) Learn(xs []*learner.Example) {
	for i, m := range c.models {
		x := xs[c.hashing[i]]
		o := m.Learn(x)
		c.learned[i] = o.Labeled
		if !o.Labeled {
			continue
		}
		l := LossOf(&o, x.Label)
		c.losses[i] = l
		c.labeled[i]++
		c.own[i].LogLoss += l.LogLoss
		c.own[i].Error += l.Error
	}
	if !c.learned[0] {
		return
	}
	for i, cmp := range c.comps {
		if c.learned[i+1] {
			cmp.Add(c.losses[0], c.losses[i+1])
			c.traces[i].observe(cmp)
		}
	}
}

// Standing is one entrant's measures over the labeled examples it
// learned.
type Standing struct {
	Name     string
	Examples int // labeled examples learned
	Accuracy float64
	LogLoss  float64 // mean, clipped as Loss is
	// Result is the comparison with the model (zero for the model
	// itself).
	Result Result
}

// Standings are the model's standing and then each challenger's.
func (c *Contest) Standings() []Standing {
	s := make([]Standing, len(c.entrants))
	for i, e := range c.entrants {
		s[i] = Standing{Name: e.Name, Examples: c.labeled[i]}
		if n := float64(c.labeled[i]); n > 0 {
			s[i].Accuracy, s[i].LogLoss = 1-c.own[i].Error/n, c.own[i].LogLoss/n
		}
		if i > 0 {
			s[i].Result = c.comps[i-1].Result()
		}
	}
	return s
}

// Result is challenger i's comparison with the model now, i counted from
// 1 as in Entrants: Standings()[i].Result without the standings.
func (c *Contest) Result(i int) Result { return c.comps[i-1].Result() }

// Traces are each challenger's comparison over the stream, in the order
// of the challengers.
func (c *Contest) Traces() []*Trace { return slices.Clone(c.traces) }

// Model is entrant i's model (0 is the model's), for reading only.
func (c *Contest) Model(i int) *learner.Model { return c.models[i] }

// TracePoint is a comparison as it stood after Examples paired examples.
type TracePoint struct {
	Examples                                int
	LogLossDiff, LogLossLow, LogLossHigh    float64
	AccuracyDiff, AccuracyLow, AccuracyHigh float64
}

// maxTracePoints bounds a Trace: when it is full, every other point goes
// and the step between points doubles.
const maxTracePoints = 512

// Trace is a comparison's course over the stream: at most
// maxTracePoints points evenly spaced in examples, and the last, so that
// its memory is bounded whatever the stream's length.
type Trace struct {
	points []TracePoint
	step   int
	cmp    *Comparison
}

func (t *Trace) observe(c *Comparison) {
	t.cmp = c
	if t.step == 0 {
		t.step = 1
	}
	n := c.logLoss.Count()
	if n%t.step != 0 {
		return
	}
	if len(t.points) == maxTracePoints {
		kept := t.points[:0]
		for i, p := range t.points {
			if i%2 == 1 {
				kept = append(kept, p)
			}
		}
		t.points = kept
		t.step *= 2
		if n%t.step != 0 {
			return
		}
	}
	t.points = append(t.points, pointOf(c))
}

// Points are the trace's points in order of examples, the last one the
// comparison as it stands.
func (t *Trace) Points() []TracePoint {
	p := slices.Clone(t.points)
	if t.cmp != nil && (len(p) == 0 || p[len(p)-1].Examples != t.cmp.logLoss.Count()) {
		p = append(p, pointOf(t.cmp))
	}
	return p
}

func pointOf(c *Comparison) TracePoint {
	r := c.Result()
	return TracePoint{Examples: r.Examples, LogLossDiff: r.LogLossDiff, LogLossLow: r.LogLossLow, LogLossHigh: r.LogLossHigh,
		AccuracyDiff: r.AccuracyDiff, AccuracyLow: r.AccuracyLow, AccuracyHigh: r.AccuracyHigh}
}
