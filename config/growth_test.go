package config

import (
	"testing"

	"github.com/hyperplane-ml/hyperplane/learner"
)

func TestEpochGrowth(t *testing.T) {
	arow := func(c *Config) { c.Model.Learner.Algorithm = learner.AROW }
	for _, tc := range []struct {
		name   string
		change func(*Config)
		want   int
	}{
		{"default: AROW", func(*Config) {}, growthAROW},
		{"auto, AROW", arow, growthAROW},
		{"auto, perceptron", func(c *Config) { c.Model.Learner.Algorithm = learner.Perceptron }, growthOther},
		{"auto, AROW with an AROW challenger", func(c *Config) {
			arow(c)
			c.Model.Challengers = Challengers{{Name: "seed", Changes: []Change{{Key: "hash_seed", Value: uint64(7)}}}}
		}, growthAROW},
		{"auto, AROW with a Pegasos challenger", func(c *Config) {
			arow(c)
			c.Model.Challengers = Challengers{{Name: "pegasos", Changes: []Change{{Key: "algorithm", Value: learner.Pegasos}}}}
		}, growthOther},
		{"set", func(c *Config) { c.Model.Mixing.Growth = 16 }, 16},
		{"set to 0", func(c *Config) { c.Model.Mixing.Growth = 0 }, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := Default()
			tc.change(&c)
			if got := c.EpochGrowth(); got != tc.want {
				t.Errorf("EpochGrowth() = %d, want %d", got, tc.want)
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

func TestEpochMinExamples(t *testing.T) {
	arow := func(c *Config) { c.Model.Learner.Algorithm = learner.AROW }
	for _, tc := range []struct {
		name   string
		change func(*Config)
		want   int
	}{
		{"default: AROW", func(*Config) {}, 1000},
		{"perceptron", func(c *Config) { c.Model.Learner.Algorithm = learner.Perceptron }, 250},
		{"AROW with an AROW challenger", func(c *Config) {
			arow(c)
			c.Model.Challengers = Challengers{{Name: "seed", Changes: []Change{{Key: "hash_seed", Value: uint64(7)}}}}
		}, 1000},
		{"AROW with a Pegasos challenger", func(c *Config) {
			arow(c)
			c.Model.Challengers = Challengers{{Name: "pegasos", Changes: []Change{{Key: "algorithm", Value: learner.Pegasos}}}}
		}, 250},
		{"AROW, growth set", func(c *Config) { c.Model.Mixing.Growth = 16 }, 1000},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := Default()
			tc.change(&c)
			if got := c.EpochMinExamples(); got != tc.want {
				t.Errorf("EpochMinExamples() = %d, want %d", got, tc.want)
			}
		})
	}
}
