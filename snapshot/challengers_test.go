package snapshot_test

import (
	"errors"
	"reflect"
	"testing"

	"github.com/hyperplane-ml/hyperplane/learner"
	"github.com/hyperplane-ml/hyperplane/learner/compare"
	"github.com/hyperplane-ml/hyperplane/snapshot"
)

// challenged is a model of cfg with two challengers (the averaged
// perceptron and another hash seed), all three having learned the same
// stream, and compared.
func challenged(t *testing.T) *learner.Model {
	t.Helper()
	cfg := learner.DefaultConfig()
	cfg.HashBits = 6
	m := train(t, cfg, 0)
	avg, seed := cfg, cfg
	avg.Algorithm = learner.Averaged
	seed.HashSeed = 3
	if _, _, err := m.SetChallengers([]learner.ChallengerConfig{{Name: "avg", Config: avg}, {Name: "seed", Config: seed}}); err != nil {
		t.Fatal(err)
	}
	live, err := compare.NewLive(m, 0.05)
	if err != nil {
		t.Fatal(err)
	}
	// The same examples for every hashing: a test of the format only.
	for e := range 301 {
		x := learner.Example{Labeled: e%5 != 0, Label: 1 - 2*(e%2)}
		x.Add(uint32(e%64), float64(e%3)-1)
		x.Add(uint32((e*7)%64), 1)
		o := m.Learn(&x)
		live.Learn(&o, x.Label, []*learner.Example{&x, &x})
	}
	return m
}

func TestChallengersRoundTrip(t *testing.T) {
	m := challenged(t)
	st := m.State()
	if len(st.Challengers) != 2 || st.Challengers[0].Comparison.LogLoss.Count == 0 {
		t.Fatalf("challengers %+v: want two, compared", st.Challengers)
	}
	want := snap(st)
	data, err := snapshot.Marshal(want)
	if err != nil {
		t.Fatal(err)
	}
	got, err := snapshot.Unmarshal(data)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("round trip changed the snapshot:\n got %+v\nwant %+v", got.State.Challengers, want.State.Challengers)
	}
	restored, err := learner.Restore(got.State)
	if err != nil {
		t.Fatal(err)
	}
	if restored.State().StateSHA256() != st.StateSHA256() {
		t.Fatal("the restored model's digest differs")
	}
	// The challengers are in the digest: without them it is another.
	bare := *st
	bare.Challengers = nil
	if bare.StateSHA256() == st.StateSHA256() {
		t.Fatal("the digest does not cover the challengers")
	}
	other := *st
	other.Challengers = append([]learner.ChallengerState(nil), st.Challengers...)
	other.Challengers[1].Comparison.LogLoss.Sum += 1e-9
	if other.StateSHA256() == st.StateSHA256() {
		t.Fatal("the digest does not cover the comparisons")
	}
}

// TestChallengerThatDoesNotFitIsRefused: a challenger's state is checked
// as the model's is, by field, and so is the comparison.
func TestChallengerThatDoesNotFitIsRefused(t *testing.T) {
	for name, damage := range map[string]func(st *learner.State){
		"weights": func(st *learner.State) {
			c := *st.Challengers[0].State
			c.Weights = c.Weights[1:]
			st.Challengers[0].State = &c
		},
		"classes": func(st *learner.State) {
			c := *st.Challengers[1].State
			c.Config.Classes = []string{"a", "b", "c"}
			st.Challengers[1].State = &c
		},
		"name":   func(st *learner.State) { st.Challengers[1].Name = st.Challengers[0].Name },
		"counts": func(st *learner.State) { st.Challengers[0].Comparison.Errors.Count++ },
	} {
		t.Run(name, func(t *testing.T) {
			st := challenged(t).State()
			damage(st)
			_, err := snapshot.Marshal(snap(st))
			if !errors.Is(err, snapshot.ErrInvalidState) {
				t.Fatalf("Marshal: %v, want ErrInvalidState", err)
			}
		})
	}
}
