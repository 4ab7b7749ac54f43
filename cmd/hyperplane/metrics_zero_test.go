package main

import (
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hyperplane-ml/hyperplane/internal/testbroker"
)

// TestExamplesTotalAtZeroBeforeTheFirstExample: a worker that has
// processed nothing yet, just started or restarted, exports
// hyperplane_examples_total for each result at 0, as it does the dead
// letters: the alert HyperplaneNotConsuming takes rate() over it, and
// over a series that does not exist it never fires, so a worker that
// restarts and then consumes nothing would never be reported.
func TestExamplesTotalAtZeroBeforeTheFirstExample(t *testing.T) {
	t.Parallel()
	c := testbroker.Kafka(t)
	c.CreateTopic(t, "quiet", 1)
	w := startRun(t, []string{"run", "--model.name", "quiet",
		"--source.kind", "kafka", "--source.topics", "quiet", "--kafka.brokers", c.ListenAddrs()[0],
		"--snapshot.url", "file://" + filepath.Join(t.TempDir(), "store") + "?create_dir=1",
		"--http.addr", "127.0.0.1:0", "--log.format", "json"})
	var addr string
	w.wait(t, time.Minute, "the http listening line", func() bool { addr = listenedAddr(w.stderr); return addr != "" })
	// The worker's metrics appear once it has resumed its model.
	var page string
	w.wait(t, time.Minute, "the worker's metrics", func() bool {
		resp, err := http.Get("http://" + addr + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		page = string(readReply(t, resp, http.StatusOK))
		return strings.Contains(page, "hyperplane_model_version ")
	})
	for _, result := range []string{"correct", "mistake", "unlabeled"} {
		line := `hyperplane_examples_total{result="` + result + `"} 0`
		if !strings.Contains(page, line+"\n") {
			t.Errorf("/metrics before the first example has no line %q", line)
		}
	}
	w.stop(t)
}
