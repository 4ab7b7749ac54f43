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
