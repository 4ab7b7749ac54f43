package compare

import (
	"github.com/hyperplane-ml/hyperplane/learner"
)

// Live has a model's challengers (learner.Model.Challengers) learn every
// example the model learns, each predicting before it learns, and
// compares each one's losses with the model's. What it learns and
// compares is in the model's challengers, so in its State: a model
// restored from that state continues the comparisons exactly.
//
// Where Contest builds its own models, Live works on a model that a
// worker learns, snapshots and resumes.
type Live struct {
	challengers []*learner.Challenger
	comps       []*Comparison
	outcomes    []learner.Outcome
	learned     []bool
}

// NewLive returns the challengers of m, compared at level alpha, in (0,
// 1). It is nil, and Learn does nothing, when m has no challenger. m's
// challengers must not change while it is in use (SetChallengers).
func NewLive(m *learner.Model, alpha float64) (*Live, error) {
	cs := m.Challengers()
	if len(cs) == 0 {
		return nil, nil
	}
	l := &Live{challengers: cs, outcomes: make([]learner.Outcome, len(cs)), learned: make([]bool, len(cs))}
	for _, c := range cs {
		cmp, err := Attach(c, alpha)
		if err != nil {
			return nil, err
		}
		l.comps = append(l.comps, cmp)
	}
	return l, nil
}

// Len is the number of challengers.
func (l *Live) Len() int {
	if l == nil {
		return 0
	}
	return len(l.challengers)
}

// Name is challenger i's name.
func (l *Live) Name(i int) string { return l.challengers[i].Name }

// Model is challenger i's model, for reading only.
func (l *Live) Model(i int) *learner.Model { return l.challengers[i].Model }

// Learn has every challenger predict, then learn, the example the model
// just learned with outcome o: xs[i] is the example as challenger i's
// hashing decodes it, nil when it could not be decoded (the challenger
// then skips it). A labeled example that both the model and a
// challenger learned adds their losses to the challenger's comparison.
// Learn does not allocate.
func (l *Live) Learn(o *learner.Outcome, y int, xs []*learner.Example) {
	if l == nil {
		return
	}
	var model Loss
	if o.Labeled {
		model = LossOf(o, y)
	}
	for i, c := range l.challengers {
		x := xs[i]
		l.learned[i] = false
		if x == nil {
			continue
		}
		l.outcomes[i] = c.Model.Learn(x)
		oc := &l.outcomes[i]
		l.learned[i] = true
		if o.Labeled && oc.Labeled {
			l.comps[i].Add(model, LossOf(oc, x.Label))
		}
	}
}

// Better is the first challenger, in order, whose comparison with the
// model says "challenger better" now (Comparison.ChallengerBetter), -1
// when none does. Looked at after every example, it is the rule of
// automatic promotion: each comparison's chance of ever saying so of a
// challenger that is not better is at most alpha.
func (l *Live) Better() int {
	if l == nil {
		return -1
	}
	for i, c := range l.comps {
		if c.ChallengerBetter() {
			return i
		}
	}
	return -1
}

// Outcome is challenger i's outcome of the example Learn was last given,
// nil if it did not learn it. It is overwritten by the next Learn.
func (l *Live) Outcome(i int) *learner.Outcome {
	if !l.learned[i] {
		return nil
	}
	return &l.outcomes[i]
}

// Results are each challenger's comparison with the model now.
func (l *Live) Results() []Result {
	if l == nil {
		return nil
	}
	r := make([]Result, len(l.comps))
	for i, c := range l.comps {
		r[i] = c.Result()
	}
	return r
}

// ResultOf is the comparison recorded in a challenger's state, at level
// alpha: what Live's Results said when the state was taken.
func ResultOf(c *learner.ChallengerState, alpha float64) (Result, error) {
	st := c.Comparison
	cmp, err := comparisonOf(alpha, &st)
	if err != nil {
		return Result{}, err
	}
	return cmp.Result(), nil
}

// Standings are the model's standing, named name, and its challengers'
// as the state st records them, compared at level alpha: what a worker
// learning the model had measured when it took st. A model's accuracy
// is over every labeled example it learned, its log-loss over those its
// calibrator measured (learner.Calibration), unclipped; a challenger's
// Result is over the examples both learned.
//
// After a promotion the model's standing is named by its configuration,
// the promoted challenger's name (learner.NameOf).
func Standings(name string, st *learner.State, alpha float64) ([]Standing, error) {
	s := []Standing{standingOf(learner.NameOf(st.Promotions, name), st)}
	for i := range st.Challengers {
		c := &st.Challengers[i]
		r, err := ResultOf(c, alpha)
		if err != nil {
			return nil, err
		}
		cs := standingOf(c.Name, c.State)
		cs.Result = r
		s = append(s, cs)
	}
	return s, nil
}

func standingOf(name string, st *learner.State) Standing {
	s := Standing{Name: name, Examples: int(st.Labeled)}
	if st.Labeled > 0 {
		s.Accuracy = 1 - float64(st.Mistakes)/float64(st.Labeled)
	}
	if c := &st.Calibration; c.Count > 0 {
		s.LogLoss = c.LogLoss / float64(c.Count)
	}
	return s
}
