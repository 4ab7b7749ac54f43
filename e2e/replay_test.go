package e2e

import (
	"encoding/json"
	"os/exec"
	"reflect"
	"testing"

	"github.com/hyperplane-ml/hyperplane/snapshot"
)

// TestReplay rebuilds the model from the stream into a store of its own:
// the same model as the learner's over the same examples, and no events
// unless asked.
func TestReplay(t *testing.T) {
	ctx := testContext(t)
	t.Setenv("HYPERPLANE_E2E_NATS_URL", "")
	ns := startNATS(t)
	prefix := uniquePrefix("REPLAY")
	js, _ := ns.streams(ctx, prefix)
	in := makeInput(3000, 15, 0)
	publishAll(t, ctx, js, prefix+".IN", in.messages)
	cfg := writeConfig(t, jetStreamConfig(ns.url, prefix))

	for _, c := range []struct {
		to       string
		examples int
	}{{"latest", 3000}, {"offset:1001", 1000}} {
		dir := t.TempDir()
		out, err := exec.Command(hyperplane.path, "replay", "--config", cfg, "--from", "earliest", "--to", c.to, "--out", "file://"+dir).Output()
		if err != nil {
			var stderr []byte
			if ee, ok := err.(*exec.ExitError); ok {
				stderr = ee.Stderr
			}
			t.Fatalf("replay --to %s: %v\n%s", c.to, err, stderr)
		}
		var sum struct{ Examples int }
		if err := json.Unmarshal(out, &sum); err != nil || sum.Examples != c.examples {
			t.Fatalf("replay --to %s printed %s (%v), want %d examples", c.to, out, err, c.examples)
		}
		s, err := snapshot.LoadURL(ctx, "file://"+dir+"/e2e", nil)
		if err != nil {
			t.Fatal(err)
		}
		part := input{messages: in.messages[:c.examples], garbage: in.garbage}
		if !reflect.DeepEqual(s.State, part.reference(t, testLearner()).State()) {
			t.Fatalf("replay --to %s: the model differs from the learner's over the same examples", c.to)
		}
		if got := s.Positions["jetstream:"+prefix+"_IN"]; got != int64(c.examples) {
			t.Fatalf("replay --to %s: position %d, want %d", c.to, got, c.examples)
		}
	}
	if n := count(t, ctx, js, prefix+"_PRED"); n != 0 {
		t.Fatalf("replay without --publish published %d predictions", n)
	}
}
