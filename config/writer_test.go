package config_test

import (
	"os"
	"testing"

	"github.com/hyperplane-ml/hyperplane/config"
)

// TestSnapshotWriter: snapshot.writer names the worker, and the host name
// does when it is empty.
func TestSnapshotWriter(t *testing.T) {
	host, err := os.Hostname()
	if err != nil || host == "" {
		t.Fatalf("this machine has no host name (%v)", err)
	}
	var cfg config.Config
	if got := cfg.SnapshotWriter(); got != host {
		t.Errorf("no snapshot.writer: %q, want the host name %q", got, host)
	}
	cfg.Snapshot.Writer = "worker-7"
	if got := cfg.SnapshotWriter(); got != "worker-7" {
		t.Errorf("snapshot.writer worker-7: %q", got)
	}
}

// TestKafkaGroupInstance: kafka.group_instance is the worker's static
// membership of the consumer group; snapshot.writer (the host name) is
// when it is empty and that is a valid instance id; "none" is none.
func TestKafkaGroupInstance(t *testing.T) {
	host, err := os.Hostname()
	if err != nil || host == "" {
		t.Fatalf("this machine has no host name (%v)", err)
	}
	for _, tc := range []struct {
		name, instance, writer, want string
	}{
		{"defaults", "", "", host},
		{"the writer", "", "worker-7", "worker-7"},
		{"a writer that is no instance id", "", "worker 7", ""},
		{"set", "pod-0", "worker-7", "pod-0"},
		{"none", config.NoGroupInstance, "worker-7", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var cfg config.Config
			cfg.Kafka.GroupInstance, cfg.Snapshot.Writer = tc.instance, tc.writer
			if got := cfg.KafkaGroupInstance(); got != tc.want {
				t.Errorf("kafka.group_instance %q, snapshot.writer %q: %q, want %q", tc.instance, tc.writer, got, tc.want)
			}
		})
	}
}
