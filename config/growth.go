package config

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/hyperplane-ml/hyperplane/learner"
)

// Growth is model.mixing.growth: an epoch holds 1/Growth of the examples
// a partition learned before it (since a drift restarted the model), at
// least Config.EpochMinExamples and at most epoch_examples; 0 makes every
// epoch epoch_examples. GrowthAuto, the default, is the growth measured for the
// model's learners (Config.EpochGrowth).
type Growth int

// GrowthAuto chooses the growth by the learners mixed in the epochs.
const GrowthAuto Growth = -1

// The growths GrowthAuto chooses between. AROW's mix keeps its accuracy
// with epochs twice as large as the other algorithms need, and each epoch
// costs a barrier (BENCHMARKS.md, "Mixing at the defaults").
const (
	growthAROW  = 8
	growthOther = 16
)

// The least examples of a partition in an epoch that grows, which
// EpochMinExamples chooses between by the same learners.
const (
	minEpochAROW  = 1000
	minEpochOther = 250
)

// MarshalText writes g as UnmarshalText reads it.
func (g Growth) MarshalText() ([]byte, error) {
	if g == GrowthAuto {
		return []byte("auto"), nil
	}
	return []byte(strconv.Itoa(int(g))), nil
}

// UnmarshalText reads "auto" or a whole number, 0 or more. On an error g
// is unchanged.
func (g *Growth) UnmarshalText(text []byte) error {
	s := strings.TrimSpace(string(text))
	if s == "auto" {
		*g = GrowthAuto
		return nil
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 0 {
		return fmt.Errorf("growth %q: want auto, 0 (epochs of epoch_examples) or a whole number more (such as 16)", s)
	}
	*g = Growth(n)
	return nil
}

// EpochGrowth is model.mixing.growth as the epochs use it: auto is 8 when
// the model and every challenger learn by AROW, 16 otherwise.
func (c Config) EpochGrowth() int {
	if g := c.Model.Mixing.Growth; g != GrowthAuto {
		return int(g)
	}
	if c.allAROW() {
		return growthAROW
	}
	return growthOther
}

// EpochMinExamples is the least examples of a partition in an epoch that
// grows: 1,000 when the model and every challenger learn by AROW, whose
// mix keeps its accuracy with a new model's epochs that large, 250
// otherwise (BENCHMARKS.md, "Mixing at the defaults").
func (c Config) EpochMinExamples() int {
	if c.allAROW() {
		return minEpochAROW
	}
	return minEpochOther
}

// allAROW reports whether the model and every challenger learn by AROW.
func (c Config) allAROW() bool {
	if c.Model.Learner.Algorithm != learner.AROW {
		return false
	}
	for _, ch := range c.ChallengerConfigs() {
		if ch.Config.Algorithm != learner.AROW {
			return false
		}
	}
	return true
}
