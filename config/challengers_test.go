package config

import (
	"bytes"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/hyperplane-ml/hyperplane/learner"
)

func TestChallengersFromTheFile(t *testing.T) {
	path := writeConfig(t, `
model:
  learner:
    hash_bits: 16
  challengers:
    - name: perceptron
      algorithm: perceptron
      eta: 0.5
    - name: seed
      hash_seed: 7
  compare:
    alpha: 0.01
`)
	c, err := Load([]string{"--config", path}, envOf(nil))
	if err != nil {
		t.Fatal(err)
	}
	if err := c.validateChallengers(); err != nil {
		t.Fatal(err)
	}
	if c.Model.Compare.Alpha != 0.01 || len(c.Model.Challengers) != 2 {
		t.Fatalf("alpha %v, challengers %+v", c.Model.Compare.Alpha, c.Model.Challengers)
	}
	p := c.Model.Challengers[0].Learner(c.Model.Learner)
	want := c.Model.Learner
	want.Algorithm, want.Eta = learner.Perceptron, 0.5
	if !reflect.DeepEqual(p, want) {
		t.Errorf("perceptron's learner %+v, want %+v", p, want)
	}
	s := c.Model.Challengers[1].Learner(c.Model.Learner)
	if s.HashSeed != 7 || s.HashBits != 16 || s.Algorithm != learner.AROW {
		t.Errorf("seed's learner %+v: want the model's (hash_bits 16, arow) with hash_seed 7", s)
	}

	// The written configuration reads back the same.
	var buf bytes.Buffer
	if err := WriteYAML(&buf, c); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(buf.String(), "- name: perceptron") {
		t.Errorf("written challengers are not a list of mappings:\n%s", buf.String())
	}
	back, err := Load([]string{"--config", writeConfig(t, buf.String())}, envOf(nil))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(back.Model.Challengers, c.Model.Challengers) {
		t.Errorf("read back %+v, want %+v", back.Model.Challengers, c.Model.Challengers)
	}
}

func TestChallengersRefusedByLoad(t *testing.T) {
	for _, tc := range []struct{ name, yaml, env, want string }{
		{"unknown key", "model:\n  challengers:\n    - name: a\n      colour: red\n", "", "line 4: model.challengers[0].colour: unknown key"},
		{"classes", "model:\n  challengers:\n    - name: a\n    - name: b\n      classes: x\n", "", "model.challengers[1].classes: a challenger learns the model's classes"},
		{"classes as a list", "model:\n  challengers:\n    - name: a\n      classes: [x, y]\n", "", "line 4: model.challengers[0].classes: a challenger learns the model's classes"},
		{"an unknown key as a list", "model:\n  challengers:\n    - name: a\n      colours: [red]\n", "", "line 4: model.challengers[0].colours: unknown key"},
		{"a list of a known key", "model:\n  challengers:\n    - name: a\n      eta: [1, 2]\n", "", "model.challengers[0].eta: want a single value, not a list"},
		{"bad value", "model:\n  challengers:\n    - name: a\n      eta: fast\n", "", `model.challengers[0].eta: "fast" is not a number`},
		{"not a list", "model:\n  challengers:\n    name: a\n", "", "model.challengers: want a list of challengers"},
		{"repeated key", "model:\n  challengers:\n    - name: a\n      eta: 1\n      eta: 2\n", "", "model.challengers[0].eta is given twice"},
		{"variable", "", "a:hash_seed=x", `HYPERPLANE_MODEL_CHALLENGERS: challenger 0 (a): hash_seed: "x" is not a non-negative integer`},
		{"variable without a colon", "", "a", "want name:key=value"},
		{"variable with a repeated key", "", "a:eta=1,eta=2", "HYPERPLANE_MODEL_CHALLENGERS: challenger 0 (a): eta: given twice"},
		{"text in the file with a repeated key", "model:\n  challengers: 'a:eta=1;b:eta=1,eta=1'\n", "", "challenger 1 (b): eta: given twice"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var args []string
			if tc.yaml != "" {
				args = []string{"--config", writeConfig(t, tc.yaml)}
			}
			env := map[string]string{}
			if tc.env != "" {
				env["HYPERPLANE_MODEL_CHALLENGERS"] = tc.env
			}
			_, err := Load(args, envOf(env))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want one containing %q", err, tc.want)
			}
		})
	}
}

func TestChallengersRefusedByValidate(t *testing.T) {
	seed := func(name string) Challenger {
		return Challenger{Name: name, Changes: []Change{{Key: "hash_seed", Value: uint64(3)}}}
	}
	for _, tc := range []struct {
		name  string
		set   func(*Config)
		field string
	}{
		{"no name", func(c *Config) { c.Model.Challengers = Challengers{seed("a"), seed("")} }, "model.challengers[1].name"},
		{"twice", func(c *Config) { c.Model.Challengers = Challengers{seed("a"), seed("b"), seed("a")} }, "model.challengers[2].name"},
		{"the model's name", func(c *Config) { c.Model.Challengers = Challengers{seed(c.Model.Name)} }, "model.challengers[0].name"},
		{"a slash", func(c *Config) { c.Model.Challengers = Challengers{seed("a/b")} }, "model.challengers[0].name"},
		{"invalid learner", func(c *Config) {
			c.Model.Challengers = Challengers{seed("a"), {Name: "big", Changes: []Change{{Key: "hash_bits", Value: 99}}}}
		}, "model.challengers[1].hash_bits"},
		{"alpha 0", func(c *Config) { c.Model.Compare.Alpha = 0 }, "model.compare.alpha"},
		{"alpha 1", func(c *Config) { c.Model.Compare.Alpha = 1 }, "model.compare.alpha"},
		{"promote unknown", func(c *Config) {
			c.Model.Challengers = Challengers{seed("a")}
			c.Model.Compare.Promote = "sometimes"
		}, "model.compare.promote"},
		{"auto without challengers", func(c *Config) { c.Model.Compare.Promote = PromoteAuto }, "model.compare.promote"},
		{"promotions without challengers", func(c *Config) { c.Outputs.Promotions = Destination{Kind: KindKafka, Topic: "promotions"} }, "outputs.promotions"},
		{"challenger predictions with labels that come later", func(c *Config) {
			c.Source = Source{Kind: KindKafka, Topics: []string{"impressions"}, Format: c.Source.Format, MaxBytes: c.Source.MaxBytes, MaxFeatures: c.Source.MaxFeatures, Batch: c.Source.Batch, Start: c.Source.Start}
			c.Kafka.Brokers = []string{"localhost:9092"}
			c.Labels.Kind, c.Labels.Topics = KindKafka, []string{"clicks"}
			c.Model.Challengers = Challengers{seed("a")}
			c.Outputs.ChallengerPredictions = Destination{Kind: KindKafka, Topic: "challengers"}
		}, "outputs.challenger_predictions"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := Default()
			tc.set(&c)
			var fe *FieldError
			if err := c.Validate(); !errors.As(err, &fe) || fe.Field != tc.field {
				t.Errorf("Validate: %v, want an error of field %s", err, tc.field)
			}
		})
	}
	c := Default()
	c.Model.Challengers = Challengers{seed("a"), seed("b")}
	if err := c.validateChallengers(); err != nil {
		t.Errorf("two challengers of distinct names: %v", err)
	}
	c.Model.Compare.Promote = PromoteAuto
	if err := c.validateChallengers(); err != nil {
		t.Errorf("auto with challengers: %v", err)
	}
}
