package compare

import (
	"fmt"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"

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
	// losses[i][j] is entrant i's loss on example j of the chunk being
	// learned, and learned[i][j] whether it learned it (LearnChunk).
	losses  [][]Loss
	learned [][]bool
	// cost is the time each entrant took over the last chunk it learned
	// on several goroutines, and order the entrants from the costliest:
	// the order in which the goroutines take them up.
	cost  []time.Duration
	order []int
	one   [1][]*learner.Example // Learn's chunk
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
	c.own, c.labeled, c.losses, c.learned = make([]Loss, n), make([]int, n), make([][]Loss, n), make([][]bool, n)
	c.cost, c.order = make([]time.Duration, n), make([]int, n)
	for i := range c.order {
		c.order[i] = i
	}
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
	c.one[0] = xs
	c.LearnChunk(c.one[:])
	c.one[0] = nil
}

// minParallelChunk is the least number of examples LearnChunk spreads
// over goroutines: below it, starting them costs more than it saves.
const minParallelChunk = 64

// LearnChunk is Learn of chunk[0], then chunk[1], and so on: chunk[j] is
// example j as Learn takes it. Its results are those of Learn example by
// example, to the bit: each entrant learns the examples in order, and
// the pairs of losses are added to the comparisons in order. The entrants
// learn the chunk on up to GOMAXPROCS goroutines, one entrant on one
// goroutine at a time (a contest of one entrant, or a chunk of fewer than
// minParallelChunk examples, is learned on the calling goroutine), and
// LearnChunk returns when all have learned it; the examples are only
// read, so entrants that share a hashing share them. LearnChunk allocates
// only when a chunk is longer than any before, and for its goroutines.
func (c *Contest) LearnChunk(chunk [][]*learner.Example) {
	n := len(chunk)
	if n == 0 {
		return
	}
	for i := range c.models {
		if cap(c.losses[i]) < n {
			c.losses[i], c.learned[i] = make([]Loss, n), make([]bool, n)
		}
		c.losses[i], c.learned[i] = c.losses[i][:n], c.learned[i][:n]
	}
	workers := min(runtime.GOMAXPROCS(0), len(c.models))
	if workers <= 1 || n < minParallelChunk {
		for i := range c.models {
			c.learnEntrant(i, chunk)
		}
	} else {
		c.spread(workers, chunk)
	}
	model, modelLearned := c.losses[0], c.learned[0]
	for j := range n {
		if !modelLearned[j] {
			continue
		}
		for i, cmp := range c.comps {
			if c.learned[i+1][j] {
				cmp.Add(model[j], c.losses[i+1][j])
				c.traces[i].observe(cmp)
			}
		}
	}
}

// spread has workers goroutines, the calling one among them, learn chunk,
// each taking the next entrant in c.order until none is left. The
// costliest go first, so that a cheap entrant fills in beside a costly
// one rather than waiting alone at the end; the order is last chunk's.
func (c *Contest) spread(workers int, chunk [][]*learner.Example) {
	var next atomic.Int32
	work := func() {
		for {
			k := int(next.Add(1)) - 1
			if k >= len(c.order) {
				return
			}
			i := c.order[k]
			start := time.Now()
			c.learnEntrant(i, chunk)
			c.cost[i] = time.Since(start)
		}
	}
	var wg sync.WaitGroup
	for range workers - 1 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			work()
		}()
	}
	work()
	wg.Wait()
	slices.SortStableFunc(c.order, func(a, b int) int { return int(c.cost[b] - c.cost[a]) })
}

// learnEntrant has entrant i learn every example of chunk in order,
// keeping its losses in c.losses[i] and c.learned[i]. It touches entrant
// i's state alone, so that entrants learn on goroutines of their own.
func (c *Contest) learnEntrant(i int, chunk [][]*learner.Example) {
	m, h := c.models[i], c.hashing[i]
	losses, learned := c.losses[i], c.learned[i]
	own, labeled := c.own[i], c.labeled[i]
	for j, xs := range chunk {
		x := xs[h]
		o := m.Learn(x)
		learned[j] = o.Labeled
		if !o.Labeled {
			continue
		}
		l := LossOf(&o, x.Label)
		losses[j] = l
		labeled++
		own.LogLoss += l.LogLoss
		own.Error += l.Error
	}
	c.own[i], c.labeled[i] = own, labeled
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
