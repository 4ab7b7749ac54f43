package e2e

import (
	"strings"
	"testing"
	"time"

	"github.com/hyperplane-ml/hyperplane/internal/wait"
)

// TestRestartRestoresGauges: a worker without snapshot.url says at start
// that its model will be lost; one with snapshots, restarted on a stream
// with nothing new, reports the restored model's version, accuracy and
// snapshot time from its first scrape, not zeros.
func TestRestartRestoresGauges(t *testing.T) {
	ctx := testContext(t)
	ns := startNATS(t)
	prefix := uniquePrefix("GAUGE")
	js, _ := ns.streams(ctx, prefix)
	in := makeInput(2000, 11, 0)
	publishAll(t, ctx, js, prefix+".IN", in.messages)

	unsaved := start(t, "run", "--config", writeConfig(t, jetStreamConfig(ns.url, prefix)))
	wait.For(t, time.Minute, 50*time.Millisecond, "the warning about the missing snapshot.url", func() bool {
		return strings.Contains(unsaved.log(), "no snapshot.url: the model is not saved")
	})
	unsaved.stop()

	cfg := writeConfig(t, jetStreamConfig(ns.url, prefix)+`
snapshot:
  url: file://`+t.TempDir()+`
  every: 500
`)
	first := start(t, "run", "--config", cfg)
	wait.For(t, time.Minute, 50*time.Millisecond, "every example", func() bool {
		return first.metric(`hyperplane_examples_total{result="correct"}`)+first.metric(`hyperplane_examples_total{result="mistake"}`)+first.metric(`hyperplane_examples_total{result="unlabeled"}`) >= float64(len(in.messages))
	})
	version := first.metric("hyperplane_model_version")
	accuracy := first.metric("hyperplane_rolling_accuracy")
	first.stop()
	if version == 0 || accuracy == 0 {
		t.Fatalf("the first run reports version %v and accuracy %v", version, accuracy)
	}
	if strings.Contains(first.log(), "no snapshot.url") {
		t.Fatal("a worker with snapshot.url warns that it has none")
	}

	second := start(t, "run", "--config", cfg)
	// The worker's metrics appear once it has resumed the model.
	wait.For(t, time.Minute, 50*time.Millisecond, "the worker's /metrics", func() bool { return second.hasMetric("hyperplane_model_version") })
	if got := second.metric("hyperplane_model_version"); got != version {
		t.Errorf("after the restart hyperplane_model_version is %v, the restored model's %v", got, version)
	}
	if got := second.metric("hyperplane_rolling_accuracy"); got != accuracy {
		t.Errorf("after the restart hyperplane_rolling_accuracy is %v, the restored model's %v", got, accuracy)
	}
	if got := second.metric("hyperplane_last_snapshot_timestamp_seconds"); got < float64(time.Now().Add(-time.Hour).Unix()) {
		t.Errorf("after the restart hyperplane_last_snapshot_timestamp_seconds is %v", got)
	}
	second.stop()
}
