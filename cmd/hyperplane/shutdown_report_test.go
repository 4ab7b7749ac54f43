package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/hyperplane-ml/hyperplane/internal/testbroker"
)

// TestInterruptedRunSaysWhatItCouldNotFlush: a worker whose outputs are
// down when it is stopped exits after shutdown.timeout with the report
// docs/operations.md promises (how many processed messages were not
// published, and that the next start reads them again), not with a bare
// "interrupted".
func TestInterruptedRunSaysWhatItCouldNotFlush(t *testing.T) {
	ns := testbroker.NATS(t)
	js := ns.JetStream(t)
	for _, c := range []jetstream.StreamConfig{
		{Name: "IN", Subjects: []string{"in"}},
		{Name: "NOWHERE", Subjects: []string{"nowhere"}},
	} {
		c.Storage = jetstream.MemoryStorage
		testbroker.CreateStream(t, js, c)
	}
	r := startRun(t, []string{"run", "--model.name", "m", "--nats.url", ns.URL(),
		"--source.kind", "jetstream", "--source.stream", "IN",
		"--outputs.predictions", "jetstream:nowhere",
		"--snapshot.url", "file://" + t.TempDir(), "--shutdown.timeout", "1s",
		"--http.addr", "", "--log.format", "json"})
	r.wait(t, time.Minute, "the worker starting", func() bool { return strings.Contains(r.log(), "worker starting") })
	if err := js.DeleteStream(context.Background(), "NOWHERE"); err != nil {
		t.Fatal(err)
	}
	if _, stderr, err := runCmd(t, "", "gen", "-examples", "50", "-to", "jetstream:in", "-nats-url", ns.URL()); err != nil {
		t.Fatalf("gen: %v\n%s", err, stderr)
	}
	r.wait(t, time.Minute, "a failed publish", func() bool { return strings.Contains(r.log(), "publishing outputs failed") })
	r.cancel()
	select {
	case <-r.done:
	case <-time.After(time.Minute):
		t.Fatalf("run did not stop in a minute:\n%s", r.log())
	}
	if r.err == nil {
		t.Fatalf("a shutdown that could not publish its outputs returned no error:\n%s", r.log())
	}
	for _, want := range []string{"were not published", "reads them again"} {
		if !strings.Contains(r.err.Error(), want) {
			t.Errorf("run returned %q, which does not say %q", r.err, want)
		}
	}
}
