package learner

import (
	"fmt"
	"slices"
	"strings"
)

// MixWeights is how an epoch weighs its shards' models in Mix
// (model.mixing.weights).
type MixWeights string

// The weightings of McDonald, Hall & Mann (2010). Each gives shard s a
// weight c_s counted since the base; a shard that learned no labeled
// example since the base is not a participant and weighs 0.
const (
	// MixUniform: c_s = 1 for every participant.
	MixUniform MixWeights = "uniform"
	// MixExamples: c_s is the number of labeled examples the shard
	// learned since the base, so that a nearly empty shard weighs little.
	MixExamples MixWeights = "examples"
	// MixMistakes: c_s is the number of mistakes the shard made since the
	// base, the paper's weighting by errors; uniform when every
	// participant made none.
	MixMistakes MixWeights = "mistakes"
)

// mixWeights lists every weighting, in the order the documentation gives.
var mixWeights = []MixWeights{MixUniform, MixExamples, MixMistakes}

func (w MixWeights) known() bool { return slices.Contains(mixWeights, w) }

// String is w's name.
func (w MixWeights) String() string { return string(w) }

// MarshalText writes w as UnmarshalText reads it.
func (w MixWeights) MarshalText() ([]byte, error) { return []byte(w), nil }

// UnmarshalText reads a weighting by name. On an error w is unchanged.
func (w *MixWeights) UnmarshalText(text []byte) error {
	v := MixWeights(text)
	if !v.known() {
		names := make([]string, len(mixWeights))
		for i, k := range mixWeights {
			names[i] = string(k)
		}
		return fmt.Errorf("unknown mixing weights %q (want one of %s)", v, strings.Join(names, ", "))
	}
	*w = v
	return nil
}

// MixWeightsOf returns the weights that Mix takes for states learned
// from base in one epoch, one per state in their order: c_s as kind says,
// counted in uint64 since base. A participant is a state that learned a
// labeled example since base; any other state (nil, or not ahead of base,
// which Mix refuses) weighs 0, and Mix still adds its counters. With no
// participant the weights are all 0, which Mix accepts. base must not be
// nil.
//
// The weights are the whole numbers c_s, not divided by their sum: Mix
// divides, so μ_s = c_s/Σc is rounded once. Mix takes Σc in float64,
// which for whole numbers is exact, the uint64 sum converted once, while
// it is below 2^53 (about 9·10^15 labeled examples in one epoch).
//
// It panics if kind is not one of the MixWeights constants: the
// configuration is validated before an epoch is mixed.
func MixWeightsOf(kind MixWeights, base *State, states []*State) []float64 {
	if !kind.known() {
		panic(fmt.Sprintf("learner: unknown mixing weights %q", string(kind)))
	}
	out := make([]float64, len(states))
	var participants []int
	var mistakes uint64
	for i, st := range states {
		if st == nil || st.Labeled <= base.Labeled {
			continue // not a participant: weight 0
		}
		participants = append(participants, i)
		var c uint64
		switch kind {
		case MixUniform:
			c = 1
		case MixExamples:
			c = st.Labeled - base.Labeled
		case MixMistakes:
			if st.Mistakes > base.Mistakes {
				c = st.Mistakes - base.Mistakes
			}
			mistakes |= c
		}
		out[i] = float64(c)
	}
	if kind == MixMistakes && mistakes == 0 {
		for _, i := range participants {
			out[i] = 1
		}
	}
	return out
}

// MixRule is how MixWithRule combines the parameters of an epoch's
// shards.
type MixRule string

const (
	// MixMean: the weighted mean of Mix, the default.
	MixMean MixRule = "mean"
	// MixDamped: base plus the shards' weighted deltas scaled by 1/‖μ‖,
	// √k times the mean's for k shards of equal weight; AROW adds the
	// shards' precision gains.
	MixDamped MixRule = "damped"
	// MixTouched: for each coordinate, the weighted mean over the shards
	// that changed it.
	MixTouched MixRule = "touched"
	// MixPegasos: Pegasos's own rule: the shards' shrunk past averaged,
	// their new learning touched-averaged, the step from base stretched
	// by min(1/‖μ‖, 1.75).
	MixPegasos MixRule = "pegasos"
	// MixAROW: AROW's own rule: the weights as MixDamped, the shards'
	// precision gains damped alike.
	MixAROW MixRule = "arow"
	// MixAuto: the rule measured best for the algorithm (RuleFor).
	MixAuto MixRule = "auto"
)

// mixRules lists every rule, in the order the documentation gives.
var mixRules = []MixRule{MixAuto, MixMean, MixDamped, MixTouched, MixPegasos, MixAROW}

// RuleFor is the rule r means for models of algorithm a: r itself, or for
// MixAuto the one that loses least to sequential learning when epochs
// are small (docs/scale-out.md, section 12): touched for the perceptron,
// margin and passive-aggressive models, whose shards mostly touch
// different features; the mean for the averaged perceptron, whose
// average already spans every shard; arow for AROW, and pegasos for
// Pegasos. (Pegasos mixed by the mean under auto before MixPegasos, and
// AROW by MixDamped before MixAROW: an epoch log written so goes on under
// the rule it was written with, see config.Config.WrittenMixings.)
func (r MixRule) For(a Algorithm) MixRule {
	if r != MixAuto {
		return r
	}
	switch a {
	case Pegasos:
		return MixPegasos
	case Averaged:
		return MixMean
	case AROW:
		return MixAROW
	default:
		return MixTouched
	}
}

func (r MixRule) known() bool { return slices.Contains(mixRules, r) }

// String is r's name.
func (r MixRule) String() string { return string(r) }

// MarshalText writes r as UnmarshalText reads it.
func (r MixRule) MarshalText() ([]byte, error) { return []byte(r), nil }

// UnmarshalText reads a rule by name. On an error r is unchanged.
func (r *MixRule) UnmarshalText(text []byte) error {
	v := MixRule(text)
	if !v.known() {
		return unknownMixRule(v)
	}
	*r = v
	return nil
}

func unknownMixRule(r MixRule) error {
	names := make([]string, len(mixRules))
	for i, k := range mixRules {
		names[i] = string(k)
	}
	return fmt.Errorf("unknown mixing rule %q (want one of %s)", string(r), strings.Join(names, ", "))
}
