package config

import (
	"crypto/sha256"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hyperplane-ml/hyperplane/learner"
)

// TestHistoryDigest: the digest changes with every setting that decides
// the model a log produces, and with none of those that only decide where
// epochs end or where the outputs go.
func TestHistoryDigest(t *testing.T) {
	base := validKafka().HistoryDigest()
	for name, change := range map[string]func(*Config){
		"model name":   func(c *Config) { c.Model.Name = "other" },
		"learner":      func(c *Config) { c.Model.Learner.AROWR = 0.5 },
		"weights":      func(c *Config) { c.Model.Mixing.Weights = "uniform" },
		"topics":       func(c *Config) { c.Source.Topics = append(c.Source.Topics, "more") },
		"kind":         func(c *Config) { c.Source.Kind = KindJetStream },
		"group":        func(c *Config) { c.Source.Group = "another" },
		"partitions":   func(c *Config) { c.Source.Kind, c.Source.Stream, c.Source.StreamPartitions = KindJetStream, "S", 4 },
		"max features": func(c *Config) { c.Source.MaxFeatures++ },
		"format":       func(c *Config) { c.Source.Format = "msgpack" },
		"rule":         func(c *Config) { c.Model.Mixing.Rule = "touched" },
		"challengers": func(c *Config) {
			c.Model.Challengers = Challengers{{Name: "seed", Changes: []Change{{Key: "hash_seed", Value: uint64(7)}}}}
		},
	} {
		c := validKafka()
		change(&c)
		if c.HistoryDigest() == base {
			t.Errorf("%s: the digest did not change", name)
		}
	}
	for name, change := range map[string]func(*Config){
		"epoch examples": func(c *Config) { c.Model.Mixing.EpochExamples = 7 },
		"interval":       func(c *Config) { c.Model.Mixing.Interval = time.Hour },
		"start":          func(c *Config) { c.Source.Start.Kind = "latest" },
		"outputs":        func(c *Config) { c.Outputs.Predictions = dest("kafka:elsewhere") },
		"snapshot":       func(c *Config) { c.Snapshot.Every = 3 },
		"topic order":    func(c *Config) { c.Source.Topics = []string{"examples", "examples"} },
		"serve and http": func(c *Config) { c.Serve.HTTP, c.HTTP.Addr = false, ":1" },
		"growth":         func(c *Config) { c.Model.Mixing.Growth = 2 },
		"unread setting": func(c *Config) { c.Model.Learner.Eta = 0.5 },
	} {
		c := validKafka()
		change(&c)
		if c.HistoryDigest() != base {
			t.Errorf("%s: the digest changed", name)
		}
	}
}

// TestHistoryDigestOfTheMean: a model that mixes by the mean has the
// digest its epoch log had before model.mixing.rule, whose JSON had no
// rule, so that logs written then continue; auto means the mean for the
// averaged perceptron, and touched, another digest, for the perceptron.
func TestHistoryDigestOfTheMean(t *testing.T) {
	c := validKafka()
	c.Model.Mixing.Rule = learner.MixMean
	h := history{Model: c.Model.Name, Learner: c.Model.Learner, Scope: string(c.Model.Scope), Weights: c.Model.Mixing.Weights,
		Kind: c.Source.Kind, Topics: c.Source.Topics, Group: c.KafkaGroup(), Format: string(c.Source.Format),
		MaxBytes: c.Source.MaxBytes, MaxFeatures: c.Source.MaxFeatures}
	h.Learner.Drift = learner.DriftConfig{} // the detector at its defaults is left out (TestHistoryDigestDrift)
	b, err := json.Marshal(h)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(b), "rule") || c.HistoryDigest() != sha256.Sum256(b) {
		t.Fatalf("the mean's history is %s, digest %x: want no rule in it", b, c.HistoryDigest())
	}
	if c.LegacyMixing().HistoryDigest() != c.HistoryDigest() {
		t.Error("LegacyMixing changed a digest of the mean")
	}
	auto := validKafka()
	auto.Model.Learner.Algorithm = learner.Averaged
	mean := auto
	mean.Model.Mixing.Rule = learner.MixMean
	if auto.HistoryDigest() != mean.HistoryDigest() {
		t.Error("auto for the averaged perceptron is not the mean")
	}
	auto.Model.Learner.Algorithm, mean.Model.Learner.Algorithm = learner.Perceptron, learner.Perceptron
	if auto.MixRule() != learner.MixTouched || auto.HistoryDigest() == mean.HistoryDigest() || auto.LegacyMixing().HistoryDigest() != mean.HistoryDigest() {
		t.Errorf("auto for the perceptron is %s, digest %x; the mean's %x", auto.MixRule(), auto.HistoryDigest(), mean.HistoryDigest())
	}
}

// TestOwnedPartitions: the partitions a worker learns, from a list or
// from its StatefulSet ordinal, and the errors naming source.partitions.
func TestOwnedPartitions(t *testing.T) {
	c := validJetStream()
	c.Source.StreamPartitions = 5
	for _, tc := range []struct {
		parts []string
		host  string
		want  []int
		err   string
	}{
		{nil, "any", nil, ""},
		{[]string{"3", "1", "3"}, "any", []int{3, 1}, ""},
		{[]string{"replicas:2"}, "hp-0", []int{0, 2, 4}, ""},
		{[]string{"replicas:2"}, "hp-1", []int{1, 3}, ""},
		{[]string{"replicas:7"}, "hp-6", nil, "would learn none"},
		{[]string{"replicas:2"}, "hp-2", nil, "ordinal 2 of replicas:2"},
		{[]string{"replicas:2"}, "nohyphen", nil, "-<ordinal>"},
		{[]string{"5"}, "any", nil, "not a partition of 5"},
		{[]string{"replicas:2", "1"}, "hp-0", nil, "alone"},
	} {
		c.Source.Partitions = tc.parts
		got, err := c.OwnedPartitions(tc.host)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) || !strings.Contains(err.Error(), "source.partitions") {
				t.Errorf("%v on %s: error %v, want one naming source.partitions with %q", tc.parts, tc.host, err, tc.err)
			}
			continue
		}
		if err != nil || !slices.Equal(got, tc.want) {
			t.Errorf("%v on %s: %v, %v; want %v", tc.parts, tc.host, got, err, tc.want)
		}
	}
}

// TestHistoryDigestBeforeArowR10: a perceptron's epoch log written when
// model.learner.arow_r defaulted to 1 keeps its digest under today's
// default of 10, which the perceptron does not read; an AROW model's does
// not, since AROW reads it.
func TestHistoryDigestBeforeArowR10(t *testing.T) {
	for _, c := range []struct {
		algorithm learner.Algorithm
		same      bool
	}{{learner.Perceptron, true}, {learner.Averaged, true}, {learner.AROW, false}} {
		before, now := validKafka(), validKafka()
		before.Model.Learner.Algorithm, now.Model.Learner.Algorithm = c.algorithm, c.algorithm
		before.Model.Learner.AROWR = 1
		if (before.HistoryDigest() == now.HistoryDigest()) != c.same {
			t.Errorf("%s: the digests are equal: %v, want %v", c.algorithm, !c.same, c.same)
		}
	}
}
