package config

import (
	"strings"
	"testing"

	"github.com/hyperplane-ml/hyperplane/learner"
)

// TestWrittenMixings: the rules an epoch log may have been written with
// before the rule a configuration mixes by now: the mean for every
// algorithm, and for AROW under auto also damped, what auto meant for it
// before learner.MixAROW; each with its own digest, and never the rule
// of the configuration itself. AROW under an explicit rule keeps the
// mean's alone, and the rule arow is refused for another algorithm,
// naming the field.
func TestWrittenMixings(t *testing.T) {
	rules := func(c Config) []learner.MixRule {
		var out []learner.MixRule
		for _, w := range c.WrittenMixings() {
			if w.HistoryDigest() == c.HistoryDigest() {
				t.Errorf("%s: a written mixing (%s) has the configuration's own digest", c.MixRule(), w.MixRule())
			}
			out = append(out, w.MixRule())
		}
		return out
	}
	for _, tc := range []struct {
		alg  learner.Algorithm
		rule learner.MixRule
		want []learner.MixRule
	}{
		{learner.AROW, learner.MixAuto, []learner.MixRule{learner.MixMean, learner.MixDamped}},
		{learner.AROW, learner.MixDamped, []learner.MixRule{learner.MixMean}},
		{learner.AROW, learner.MixMean, nil},
		{learner.Pegasos, learner.MixAuto, []learner.MixRule{learner.MixMean}},
		{learner.Perceptron, learner.MixAuto, []learner.MixRule{learner.MixMean}},
		{learner.Averaged, learner.MixAuto, nil},
	} {
		c := validKafka()
		c.Model.Learner.Algorithm, c.Model.Mixing.Rule = tc.alg, tc.rule
		got := rules(c)
		if len(got) != len(tc.want) {
			t.Errorf("%s under %s: written with %v, want %v", tc.alg, tc.rule, got, tc.want)
			continue
		}
		for i := range got {
			if got[i] != tc.want[i] {
				t.Errorf("%s under %s: written with %v, want %v", tc.alg, tc.rule, got, tc.want)
			}
		}
	}
	c := validKafka()
	c.Model.Learner.Algorithm, c.Model.Mixing.Rule = learner.AROW, learner.MixAuto
	if c.MixRule() != learner.MixAROW {
		t.Fatalf("auto for arow is %s, want %s", c.MixRule(), learner.MixAROW)
	}
	c.Model.Learner.Algorithm, c.Model.Mixing.Rule = learner.Perceptron, learner.MixAROW
	if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "model.mixing.rule") || !strings.Contains(err.Error(), "arow mixes AROW models only, not perceptron") {
		t.Errorf("rule arow for a perceptron: %v", err)
	}
}
