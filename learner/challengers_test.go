package learner_test

import (
	"math"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/hyperplane-ml/hyperplane/learner"
)

func TestSetChallengersKeepsStartsAndDrops(t *testing.T) {
	cfg := learner.DefaultConfig()
	cfg.HashBits = 8
	m, err := learner.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	p, pa := cfg, cfg
	p.Algorithm, pa.Algorithm = learner.Perceptron, learner.PA
	started, dropped, err := m.SetChallengers([]learner.ChallengerConfig{{Name: "p", Config: p}, {Name: "pa", Config: pa}})
	if err != nil || !slices.Equal(started, []string{"p", "pa"}) || dropped != nil {
		t.Fatalf("started %v, dropped %v, err %v", started, dropped, err)
	}
	x := learner.Example{Labeled: true, Label: 1}
	x.Add(3, 1)
	for _, c := range m.Challengers() {
		c.Model.Learn(&x)
	}
	kept := m.Challengers()[0]
	// p goes on; pa changes its configuration and starts new (the old one
	// dropped); q is new.
	pa.C = 0.5
	pa.Algorithm = learner.PA1
	started, dropped, err = m.SetChallengers([]learner.ChallengerConfig{{Name: "q", Config: p}, {Name: "p", Config: p}, {Name: "pa", Config: pa}})
	if err != nil || !slices.Equal(started, []string{"q", "pa"}) || !slices.Equal(dropped, []string{"pa"}) {
		t.Fatalf("started %v, dropped %v, err %v", started, dropped, err)
	}
	if m.Challengers()[1] != kept || kept.Model.Counts().Labeled != 1 {
		t.Fatal("an unchanged challenger did not keep its state")
	}
	if m.Challengers()[2].Model.Counts().Labeled != 0 {
		t.Fatal("a changed challenger kept its state")
	}
	_, dropped, err = m.SetChallengers(nil)
	if err != nil || !slices.Equal(dropped, []string{"q", "p", "pa"}) || m.Challengers() != nil {
		t.Fatalf("dropped %v, err %v, left %d", dropped, err, len(m.Challengers()))
	}
	if st := m.State(); st.Challengers != nil {
		t.Fatal("a model without challengers has them in its state")
	}

	for name, cs := range map[string][]learner.ChallengerConfig{
		"no name":   {{Config: p}},
		"same name": {{Name: "a", Config: p}, {Name: "a", Config: pa}},
		"classes":   {{Name: "a", Config: func() learner.Config { c := p; c.Classes = []string{"x", "y", "z"}; return c }()}},
		"invalid":   {{Name: "a", Config: func() learner.Config { c := p; c.HashBits = 99; return c }()}},
	} {
		if _, _, err := m.SetChallengers(cs); err == nil {
			t.Errorf("%s: SetChallengers took %+v", name, cs)
		}
	}
}

// TestChallengersRestore: a state with challengers restores to a model
// whose state is the same, and the challengers go on learning as the
// original's would.
func TestChallengersRestore(t *testing.T) {
	cfg := learner.DefaultConfig()
	cfg.HashBits = 8
	m, _ := learner.New(cfg)
	p := cfg
	p.Algorithm = learner.Perceptron
	if _, _, err := m.SetChallengers([]learner.ChallengerConfig{{Name: "p", Config: p}}); err != nil {
		t.Fatal(err)
	}
	learn := func(m *learner.Model, from, to int) {
		for i := from; i < to; i++ {
			x := learner.Example{Labeled: true, Label: 1 - 2*(i%2)}
			x.Add(uint32(i%7+(i%2)*10), 1)
			m.Learn(&x)
			m.Challengers()[0].Model.Learn(&x)
			m.Challengers()[0].Comparison.LogLoss.Count++
			m.Challengers()[0].Comparison.Errors.Count++
		}
	}
	learn(m, 0, 50)
	r, err := learner.Restore(m.State())
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(r.State(), m.State()) {
		t.Fatal("the restored state differs")
	}
	learn(m, 50, 100)
	learn(r, 50, 100)
	if r.State().StateSHA256() != m.State().StateSHA256() {
		t.Fatal("the restored challengers learned differently")
	}
}

// TestValidateLean checks a state without its per-weight vectors, its
// challengers' left out too: what it keeps is checked as Validate checks
// it, and a state that still holds its vectors is refused.
func TestValidateLean(t *testing.T) {
	cfg := learner.DefaultConfig()
	cfg.HashBits = 8
	m, err := learner.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	p := cfg
	p.Algorithm = learner.Perceptron
	if _, _, err := m.SetChallengers([]learner.ChallengerConfig{{Name: "p", Config: p}}); err != nil {
		t.Fatal(err)
	}
	lean := func() *learner.State {
		st := m.State()
		st.Weights, st.SumWeights, st.Variance = nil, nil, nil
		c := *st.Challengers[0].State
		c.Weights, c.SumWeights, c.Variance = nil, nil, nil
		st.Challengers[0].State = &c
		return st
	}
	if err := lean().ValidateLean(); err != nil {
		t.Fatalf("a lean state: %v", err)
	}
	if err := m.State().ValidateLean(); err == nil || !strings.Contains(err.Error(), "weights") {
		t.Fatalf("a whole state: %v, want an error naming weights", err)
	}
	for field, spoil := range map[string]func(st *learner.State){
		"counters":      func(st *learner.State) { st.Mistakes = st.Labeled + 1 },
		"r2":            func(st *learner.State) { st.R2 = math.NaN() },
		"bias":          func(st *learner.State) { st.Bias[0] = math.Inf(1) },
		"variance_bias": func(st *learner.State) { st.VarianceBias = 2 },
		"challenger p":  func(st *learner.State) { st.Challengers[0].State.Bias = nil },
	} {
		st := lean()
		spoil(st)
		if err := st.ValidateLean(); err == nil || !strings.Contains(err.Error(), field) {
			t.Errorf("%s spoiled: %v, want an error naming it", field, err)
		}
	}
}
