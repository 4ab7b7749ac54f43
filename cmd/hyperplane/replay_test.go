package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/hyperplane-ml/hyperplane/internal/testbroker"
)

// TestReplayRange: a replay without --out keeps its model in memory
// without the worker's warning that the model is lost when it stops,
// which is what a replay without --out is for, and its summary says that
// --to offset:N leaves offset N out.
func TestReplayRange(t *testing.T) {
	srv := testbroker.NATS(t)
	testbroker.CreateStream(t, srv.JetStream(t), jetstream.StreamConfig{Name: "EXAMPLES", Subjects: []string{"examples"}})
	mustRun(t, "", "gen", "-examples", "50", "-seed", "2", "-to", "jetstream:examples", "-nats-url", srv.URL())
	args := []string{"replay", "--nats.url", srv.URL(), "--source.kind", "jetstream", "--source.stream", "EXAMPLES", "--from", "earliest"}
	for _, c := range []struct {
		to       []string
		examples int
		summary  string
	}{
		{[]string{"--to", "offset:11"}, 10, `"from":"earliest","to":"offset:11 (exclusive)"`},
		{nil, 50, `"from":"earliest","to":"latest"`},
	} {
		out, stderr, err := runCmd(t, "", append(args, c.to...)...)
		if err != nil {
			t.Fatalf("replay %q: %v\n%s", c.to, err, stderr)
		}
		if strings.Contains(stderr, "lost when the worker stops") || strings.Contains(stderr, "snapshot.url") {
			t.Errorf("replay %q warns as the worker does: %s", c.to, stderr)
		}
		var sum struct{ Examples int }
		if err := json.Unmarshal([]byte(out), &sum); err != nil || sum.Examples != c.examples || !strings.Contains(out, c.summary) {
			t.Errorf("replay %q printed %s (%v), want %d examples and %s", c.to, out, err, c.examples, c.summary)
		}
	}
	if help := mustRun(t, "", "replay", "-h"); !strings.Contains(help, "stops before offset N") {
		t.Errorf("replay -h does not say that --to offset:N is exclusive:\n%s", help)
	}
}
