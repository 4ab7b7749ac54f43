package main

import (
	"slices"
	"testing"

	"github.com/hyperplane-ml/hyperplane/config"
	"github.com/hyperplane-ml/hyperplane/consumer"
	kafkaio "github.com/hyperplane-ml/hyperplane/consumer/kafka"
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
	if got := config.Default().Source.Batch; got != consumer.DefaultBatch {
		t.Errorf("source.batch defaults to %d, the worker's default is %d", got, consumer.DefaultBatch)
	}
}
