package config

import (
	"path/filepath"
	"testing"
)

// TestExamples loads and validates every example configuration under
// deploy/examples, with an empty environment: an example that drifts from
// the Config struct or breaks a rule fails here.
func TestExamples(t *testing.T) {
	paths, err := filepath.Glob(filepath.Join("..", "deploy", "examples", "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if len(paths) < 2 {
		t.Fatalf("found %d examples under deploy/examples, want at least 2", len(paths))
	}
	for _, path := range paths {
		t.Run(filepath.Base(path), func(t *testing.T) {
			c, err := Load([]string{"--config", path}, func(string) string { return "" })
			if err != nil {
				t.Fatal(err)
			}
			if err := c.Validate(); err != nil {
				t.Fatal(err)
			}
			if c.Model.Name == Default().Model.Name {
				t.Errorf("the example does not name its model")
			}
		})
	}
}
