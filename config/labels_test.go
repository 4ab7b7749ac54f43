package config

import (
	"strings"
	"testing"
	"time"

	"github.com/hyperplane-ml/hyperplane/learner"
)

func kafkaLabels() Config {
	c := validKafka()
	c.Labels = Labels{Kind: KindKafka, Topics: []string{"clicks"}, Format: "auto", Window: time.Minute, Default: "-1", MaxPending: 10}
	return c
}

func TestValidateLabels(t *testing.T) {
	for _, tc := range []struct {
		name  string
		edit  func(c *Config)
		field string // "" for valid
	}{
		{"kafka", func(*Config) {}, ""},
		{"no default", func(c *Config) { c.Labels.Default = "" }, ""},
		{"a class name", func(c *Config) { c.Model.Learner.Classes = []string{"no", "yes"}; c.Labels.Default = "no" }, ""},
		{"jetstream", func(c *Config) {
			*c = validJetStream()
			c.Labels = Labels{Kind: KindJetStream, Stream: "CLICKS", Subject: "clicks", Format: "auto", Window: time.Minute, MaxPending: 1}
		}, ""},
		{"core NATS", func(c *Config) { c.Labels.Kind = KindNATS }, "labels.kind"},
		{"no labels", func(c *Config) { c.Labels = Labels{Format: "auto", Window: time.Minute, MaxPending: 1} }, ""},
		{"no labels, a negative window", func(c *Config) { c.Labels = Labels{Format: "auto", Window: -time.Minute, MaxPending: 1} }, "labels.window"},
		{"no labels, no bound", func(c *Config) { c.Labels = Labels{Format: "auto", Window: time.Minute} }, "labels.max_pending"},
		{"a topic without a kind", func(c *Config) { c.Labels.Kind, c.Labels.Default = "", "" }, "labels.kind"},
		{"a default without a kind", func(c *Config) { c.Labels.Kind, c.Labels.Topics = "", nil }, "labels.kind"},
		{"a stream without a kind", func(c *Config) {
			*c = validJetStream()
			c.Labels = Labels{Stream: "CLICKS", Subject: "clicks", Format: "auto", Window: time.Minute, MaxPending: 1}
		}, "labels.kind"},
		{"kafka labels, jetstream source", func(c *Config) {
			*c = validJetStream()
			c.Labels = Labels{Kind: KindKafka, Topics: []string{"clicks"}, Format: "auto", Window: time.Minute, MaxPending: 1}
		}, "labels.kind"},
		{"two topics", func(c *Config) { c.Labels.Topics = []string{"a", "b"} }, "labels.topics"},
		{"the examples' topic", func(c *Config) { c.Labels.Topics = []string{"examples"} }, "labels.topics"},
		{"no window", func(c *Config) { c.Labels.Window = 0 }, "labels.window"},
		{"a default that is no label", func(c *Config) { c.Labels.Default = "2" }, "labels.default"},
		{"a default that is no class", func(c *Config) { c.Labels.Default = "maybe" }, "labels.default"},
		{"no bound", func(c *Config) { c.Labels.MaxPending = 0 }, "labels.max_pending"},
		{"a challenger of the model's hashing", func(c *Config) {
			c.Model.Challengers = Challengers{{Name: "p", Changes: []Change{{Key: "algorithm", Value: learner.Perceptron}}}}
		}, ""},
		{"a challenger of another hash_seed", func(c *Config) {
			c.Model.Challengers = Challengers{{Name: "p"}, {Name: "s7", Changes: []Change{{Key: "hash_seed", Value: uint64(7)}}}}
		}, "model.challengers[1].hash_seed"},
		{"a challenger of other hash_bits", func(c *Config) {
			c.Model.Challengers = Challengers{{Name: "b12", Changes: []Change{{Key: "hash_bits", Value: 12}}}}
		}, "model.challengers[0].hash_bits"},
		{"partition scope", func(c *Config) { c.Model.Scope = ScopePartition }, ""},
		{"partition scope of a partitioned stream", func(c *Config) {
			*c = validJetStream()
			c.Model.Scope = ScopePartition
			c.Source.StreamPartitions = 4
			c.Labels = Labels{Kind: KindJetStream, Stream: "CLICKS", Subject: "clicks.*", Format: "auto", Window: time.Minute, MaxPending: 1}
		}, ""},
		{"partition scope of an unpartitioned stream", func(c *Config) {
			*c = validJetStream()
			c.Model.Scope = ScopePartition
			c.Labels = Labels{Kind: KindJetStream, Stream: "CLICKS", Subject: "clicks", Format: "auto", Window: time.Minute, MaxPending: 1}
		}, "model.scope"},
		{"a partitioned stream", func(c *Config) {
			*c = validJetStream()
			c.Source.StreamPartitions = 4
			c.Labels = Labels{Kind: KindJetStream, Stream: "CLICKS", Subject: "clicks.*", Format: "auto", Window: time.Minute, MaxPending: 1}
		}, ""},
		{"a partitioned stream of one partition", func(c *Config) {
			*c = validJetStream()
			c.Source.StreamPartitions = 1
			c.Labels = Labels{Kind: KindJetStream, Stream: "CLICKS", Subject: "clicks.*", Format: "auto", Window: time.Minute, MaxPending: 1}
		}, "source.stream_partitions"},
		{"partition scope of a partitioned stream of one partition", func(c *Config) {
			*c = validJetStream()
			c.Model.Scope = ScopePartition
			c.Source.StreamPartitions = 1
			c.Labels = Labels{Kind: KindJetStream, Stream: "CLICKS", Subject: "clicks.*", Format: "auto", Window: time.Minute, MaxPending: 1}
		}, ""},
		{"a stream without a subject", func(c *Config) {
			*c = validJetStream()
			c.Labels = Labels{Kind: KindJetStream, Stream: "CLICKS", Format: "auto", Window: time.Minute, MaxPending: 1}
		}, "labels.subject"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := kafkaLabels()
			tc.edit(&c)
			err := c.Validate()
			switch {
			case tc.field == "" && err != nil:
				t.Fatalf("valid configuration refused: %v", err)
			case tc.field != "" && (err == nil || !strings.HasPrefix(err.Error(), tc.field+":")):
				t.Fatalf("got %v, want an error naming %s", err, tc.field)
			}
		})
	}
}

func TestDefaultLabel(t *testing.T) {
	c := kafkaLabels()
	for text, want := range map[string]int{"-1": -1, "0": -1, "1": 1, "false": -1, "true": 1} {
		c.Labels.Default = text
		if got, err := c.DefaultLabel(); err != nil || got != want {
			t.Errorf("default %q: %d, %v; want %d", text, got, err, want)
		}
	}
	c.Model.Learner.Classes = []string{"a", "b", "c"}
	c.Labels.Default = "c"
	if got, err := c.DefaultLabel(); err != nil || got != 2 {
		t.Errorf("default c of three classes: %d, %v; want 2", got, err)
	}
}
