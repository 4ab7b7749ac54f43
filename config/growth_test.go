package config

import (
	"testing"

	"github.com/hyperplane-ml/hyperplane/learner"
)

// TestEpochSchedule: the growth and the floor of the epochs follow the
// learners, AROW's (the model's and every challenger's) or another's; a
// growth set is kept, and the floor follows the learners whatever the
// growth.
func TestEpochSchedule(t *testing.T) {
	arow := func(c *Config) { c.Model.Learner.Algorithm = learner.AROW }
	for _, tc := range []struct {
		name            string
		change          func(*Config)
		growth, minimum int
	}{
		{"default: AROW", func(*Config) {}, growthAROW, 1000},
		{"auto, AROW", arow, growthAROW, 1000},
		{"auto, perceptron", func(c *Config) { c.Model.Learner.Algorithm = learner.Perceptron }, growthOther, 250},
		{"auto, AROW with an AROW challenger", func(c *Config) {
			arow(c)
			c.Model.Challengers = Challengers{{Name: "seed", Changes: []Change{{Key: "hash_seed", Value: uint64(7)}}}}
		}, growthAROW, 1000},
		{"auto, AROW with a Pegasos challenger", func(c *Config) {
			arow(c)
			c.Model.Challengers = Challengers{{Name: "pegasos", Changes: []Change{{Key: "algorithm", Value: learner.Pegasos}}}}
		}, growthOther, 250},
		{"set", func(c *Config) { c.Model.Mixing.Growth = 16 }, 16, 1000},
		{"set to 0", func(c *Config) { c.Model.Mixing.Growth = 0 }, 0, 1000},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := Default()
			tc.change(&c)
			if got := c.EpochGrowth(); got != tc.growth {
				t.Errorf("EpochGrowth() = %d, want %d", got, tc.growth)
			}
			if got := c.EpochMinExamples(); got != tc.minimum {
				t.Errorf("EpochMinExamples() = %d, want %d", got, tc.minimum)
			}
		})
	}
}

func TestGrowthText(t *testing.T) {
	for _, g := range []Growth{GrowthAuto, 0, 8, 16} {
		text, err := g.MarshalText()
		if err != nil {
			t.Fatal(err)
		}
		var back Growth
		if err := back.UnmarshalText(text); err != nil || back != g {
			t.Errorf("%q read back as %d (%v), want %d", text, back, err, g)
		}
	}
	g := Growth(8)
	if err := g.UnmarshalText([]byte("-3")); err == nil || g != 8 {
		t.Errorf(`UnmarshalText("-3") = %v, leaving %d; want an error and 8`, err, g)
	}
}
