package deploy

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hyperplane-ml/hyperplane/config"
	"github.com/hyperplane-ml/hyperplane/snapshot"
)

// TestExamplesKeepTheirModel: every example config under examples/ loads
// and validates as run loads it, and keeps its model in snapshots: without
// snapshot.url a worker started from it, as the README does, would lose
// the model at exit. A file:// store is opened from an empty working
// directory, as on a first run, and must come into being.
func TestExamplesKeepTheirModel(t *testing.T) {
	paths, err := filepath.Glob(filepath.Join("examples", "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if len(paths) < 2 {
		t.Fatalf("found %d examples under deploy/examples, want at least 2", len(paths))
	}
	for _, path := range paths {
		path, err := filepath.Abs(path)
		if err != nil {
			t.Fatal(err)
		}
		t.Run(filepath.Base(path), func(t *testing.T) {
			c, err := config.Load([]string{"--config", path}, func(string) string { return "" })
			if err != nil {
				t.Fatal(err)
			}
			if err := c.Validate(); err != nil {
				t.Fatal(err)
			}
			if c.Snapshot.URL == "" {
				t.Fatal("no snapshot.url: the model would be lost at exit")
			}
			if !strings.HasPrefix(c.Snapshot.URL, "file://") {
				return
			}
			t.Chdir(t.TempDir())
			s, err := snapshot.OpenStore(context.Background(), c.Snapshot.URL)
			if err != nil {
				t.Fatalf("snapshot.url %s does not open in an empty directory: %v", c.Snapshot.URL, err)
			}
			defer s.Close()
			if _, err := s.Generations(context.Background(), c.Model.Name); err != nil {
				t.Fatalf("snapshot.url %s: %v", c.Snapshot.URL, err)
			}
			if entries, err := os.ReadDir("."); err != nil || len(entries) == 0 {
				t.Errorf("snapshot.url %s made nothing in the working directory (%v)", c.Snapshot.URL, err)
			}
		})
	}
}
