package main

import (
	"slices"
	"testing"

	"github.com/hyperplane-ml/hyperplane/config"
	"github.com/hyperplane-ml/hyperplane/consumer"
	kafkaio "github.com/hyperplane-ml/hyperplane/consumer/kafka"
	"github.com/hyperplane-ml/hyperplane/serve"
)

// TestConfigAgreesWithAdapters: config imports no consumer package, so
// the values it holds for them are its own; they must be the ones the
// adapters take, which cmd converts them to.
func TestConfigAgreesWithAdapters(t *testing.T) {
	var cfgMechs, kafkaMechs []string
	for _, m := range config.Mechanisms() {
		cfgMechs = append(cfgMechs, string(m))
	}
	for _, m := range kafkaio.Mechanisms() {
		kafkaMechs = append(kafkaMechs, string(m))
	}
	if !slices.Equal(cfgMechs, kafkaMechs) {
		t.Errorf("kafka.sasl.mechanism: config has %q, the Kafka adapter %q", cfgMechs, kafkaMechs)
	}
	def := config.Default()
	if got := def.Source.Batch; got != consumer.DefaultBatch {
		t.Errorf("source.batch defaults to %d, the worker's default is %d", got, consumer.DefaultBatch)
	}
	if got := def.Shutdown.Timeout; got != consumer.DefaultShutdownTimeout {
		t.Errorf("shutdown.timeout defaults to %v, the worker's default is %v", got, consumer.DefaultShutdownTimeout)
	}
}

// TestConfigAgreesWithServe: config does not import serve (nor its NATS
// and Prometheus clients), so it writes the limits serve.Options defaults
// to itself; they must be the same.
func TestConfigAgreesWithServe(t *testing.T) {
	s := config.Default().Serve
	for _, tc := range []struct {
		key       string
		got, want any
	}{
		{"serve.max_bytes", s.MaxBytes, serve.DefaultMaxBytes},
		{"serve.max_examples", s.MaxExamples, serve.DefaultMaxExamples},
		{"serve.max_in_flight", s.MaxInFlight, serve.DefaultMaxInFlight},
		{"serve.timeout", s.Timeout, serve.DefaultTimeout},
		{"serve.generations", s.Generations, serve.DefaultGenerations},
	} {
		if tc.got != tc.want {
			t.Errorf("%s defaults to %v, serve's default is %v", tc.key, tc.got, tc.want)
		}
	}
}
