package main

import (
	"strings"
	"testing"
)

// TestConfigCommand: config --defaults is a config file that run accepts
// as it is, and config prints the configuration run would use, with the
// flags applied and secrets redacted.
func TestConfigCommand(t *testing.T) {
	defaults := mustRun(t, "", "config", "--defaults")
	if !strings.Contains(defaults, "# HYPERPLANE_SOURCE_KIND, --source.kind\n  kind: \"\"") {
		t.Fatalf("the defaults do not document source.kind:\n%s", defaults)
	}
	out := mustRun(t, "", "config", "--source.kind", "jetstream", "--source.stream", "EX", "--nats.url", "nats://n:4222",
		"--kafka.sasl.mechanism", "plain", "--kafka.sasl.username", "u", "--kafka.sasl.password", "hunter2")
	for _, want := range []string{"kind: jetstream", "stream: EX", "url: nats://n:4222", `password: "" # set, not shown`} {
		if !strings.Contains(out, want) {
			t.Errorf("config output lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "hunter2") {
		t.Error("config printed the password")
	}
	if _, _, err := runCmd(t, "", "config", "--defaults", "--source.kind", "kafka"); err == nil {
		t.Error("config --defaults with other arguments succeeded")
	}
}
