package main

import (
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kfake"
)

// TestGenConnectsAsRun: gen reaches Kafka with the configuration's
// kafka.* keys, as run does, SASL included, from flags or variables; and
// a cluster that wants SASL refuses gen without it.
func TestGenConnectsAsRun(t *testing.T) {
	t.Parallel()
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "examples"),
		kfake.EnableSASL(), kfake.Superuser("PLAIN", "gen-user", "secret"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	brokers := strings.Join(c.ListenAddrs(), ",")
	gen := []string{"gen", "-examples", "20", "-to", "kafka:examples", "--kafka.brokers", brokers, "--kafka.sasl.mechanism", "plain", "--kafka.sasl.username", "gen-user"}

	_, stderr, err := runEnv(t, map[string]string{"HYPERPLANE_KAFKA_SASL_PASSWORD": "secret"}, gen...)
	if err != nil || !strings.Contains(stderr, "published 20 examples to kafka:examples") {
		t.Fatalf("gen with SASL: %v\n%s", err, stderr)
	}
	_, stderr, err = runCmd(t, "", append(gen, "--kafka.sasl.password", "secret", "-examples", "5")...)
	if err != nil || !strings.Contains(stderr, "published 5 examples") {
		t.Fatalf("gen with SASL from flags: %v\n%s", err, stderr)
	}
	if _, _, err := runCmd(t, "", "gen", "-examples", "1", "-to", "kafka:examples", "-kafka-brokers", brokers); err == nil {
		t.Fatal("gen without SASL published to a cluster that wants it")
	}
	// A configuration mistake is named before anything is dialled.
	_, _, err = runCmd(t, "", append(gen[:len(gen):len(gen)], "--kafka.sasl.password", "")...)
	if err == nil || !strings.Contains(err.Error(), "config: kafka.sasl.password: required") {
		t.Fatalf("gen without the password: %v", err)
	}
}
