package config

import (
	"testing"
	"time"
)

// TestHistoryDigest: the digest changes with every setting that decides
// the model a log produces, and with none of those that only decide where
// epochs end or where the outputs go.
func TestHistoryDigest(t *testing.T) {
	base := validKafka().HistoryDigest()
	for name, change := range map[string]func(*Config){
		"model name":   func(c *Config) { c.Model.Name = "other" },
		"learner":      func(c *Config) { c.Model.Learner.Eta = 0.5 },
		"weights":      func(c *Config) { c.Model.Mixing.Weights = "uniform" },
		"topics":       func(c *Config) { c.Source.Topics = append(c.Source.Topics, "more") },
		"kind":         func(c *Config) { c.Source.Kind = KindJetStream },
		"group":        func(c *Config) { c.Source.Group = "another" },
		"partitions":   func(c *Config) { c.Source.Kind, c.Source.Stream, c.Source.StreamPartitions = KindJetStream, "S", 4 },
		"max features": func(c *Config) { c.Source.MaxFeatures++ },
		"format":       func(c *Config) { c.Source.Format = "msgpack" },
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
	} {
		c := validKafka()
		change(&c)
		if c.HistoryDigest() != base {
			t.Errorf("%s: the digest changed", name)
		}
	}
}
