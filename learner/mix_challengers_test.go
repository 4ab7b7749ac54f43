package learner_test

import (
	"strings"
	"testing"

	"github.com/hyperplane-ml/hyperplane/learner"
)

// TestMixChallengersCountsEachExampleOnce: two states learned from one
// base, each with a challenger whose comparison went on from the base's,
// mix into a challenger whose comparison is the base's plus both ranges'
// increases, and one without the base's challengers is refused.
func TestMixChallengersCountsEachExampleOnce(t *testing.T) {
	cfg := learner.DefaultConfig()
	cfg.HashBits = 8
	m, err := learner.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := m.SetChallengers([]learner.ChallengerConfig{{Name: "c", Config: cfg}}); err != nil {
		t.Fatal(err)
	}
	m.Challengers()[0].Comparison = learner.ComparisonState{
		LogLoss: learner.SequenceState{Count: 10, Sum: 1, SumScaled: 5, V: 2}, Errors: learner.SequenceState{Count: 10, Sum: 2, SumScaled: 6, V: 1},
		ModelLogLoss: 7, ModelErrors: 3, ChallengerLogLoss: 6, ChallengerErrors: 1,
	}
	base := m.State()
	ranges := []learner.ComparisonState{
		{LogLoss: learner.SequenceState{Count: 13, Sum: 1.5, SumScaled: 6.5, V: 2.25}, Errors: learner.SequenceState{Count: 13, Sum: 3, SumScaled: 7.5, V: 1.5},
			ModelLogLoss: 9, ModelErrors: 4, ChallengerLogLoss: 7.5, ChallengerErrors: 1},
		base.Challengers[0].Comparison, // a range that compared nothing
		{LogLoss: learner.SequenceState{Count: 14, Sum: 0.5, SumScaled: 7, V: 3}, Errors: learner.SequenceState{Count: 14, Sum: 1, SumScaled: 7.5, V: 1.25},
			ModelLogLoss: 10, ModelErrors: 3, ChallengerLogLoss: 9.5, ChallengerErrors: 2},
	}
	states := make([]*learner.State, len(ranges))
	for i, c := range ranges {
		states[i] = m.State()
		states[i].Challengers[0].Comparison = c
	}
	mixed, err := learner.MixChallengers(learner.MixAuto, learner.MixExamples, m.State(), states, nil)
	if err != nil {
		t.Fatal(err)
	}
	got := mixed[0].Comparison
	want := learner.ComparisonState{
		LogLoss: learner.SequenceState{Count: 17, Sum: 1, SumScaled: 8.5, V: 3.25}, Errors: learner.SequenceState{Count: 17, Sum: 2, SumScaled: 9, V: 1.75},
		ModelLogLoss: 12, ModelErrors: 4, ChallengerLogLoss: 11, ChallengerErrors: 2,
	}
	if got != want {
		t.Fatalf("mixed comparison %+v, want %+v", got, want)
	}

	states[1].Challengers = nil
	if _, err := learner.MixChallengers(learner.MixAuto, learner.MixExamples, m.State(), states, nil); err == nil || !strings.Contains(err.Error(), "challengers") {
		t.Fatalf("a state without the base's challengers: %v, want a refusal", err)
	}
}
