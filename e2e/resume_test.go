package e2e

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"testing"
	"time"

	"github.com/hyperplane-ml/hyperplane/snapshot"
)

// TestKillAndResume kills the worker with SIGKILL at random points
// mid-stream, several times, restarting it each time from its snapshots:
// the final model must be bit-identical to one uninterrupted run, and every
// input position must have its prediction.
func TestKillAndResume(t *testing.T) {
	ctx := testContext(t)
	t.Setenv("HYPERPLANE_E2E_NATS_URL", "")
	ns := startNATS(t)
	prefix := uniquePrefix("KILL")
	js, _ := ns.streams(ctx, prefix)
	in := makeInput(30000, 11, 0)
	// The stream arrives over a few seconds, so that the kills land in it.
	fed := make(chan error, 1)
	go func() {
		for i, m := range in.messages {
			if _, err := js.PublishAsync(prefix+".IN", m); err != nil {
				fed <- err
				return
			}
			if i%1000 == 999 {
				<-js.PublishAsyncComplete()
				time.Sleep(40 * time.Millisecond)
			}
		}
		<-js.PublishAsyncComplete()
		fed <- nil
	}()
	store := "file://" + t.TempDir()
	cfg := writeConfig(t, jetStreamConfig(ns.url, prefix)+fmt.Sprintf(`
snapshot:
  url: %s
  every: 300
  interval: 200ms
  keep: 3
`, store))

	r := rand.New(rand.NewPCG(1, 2))
	kills := 0
	for kills < 3 {
		p := start(t, "run", "--config", cfg, "--source.batch", "64")
		time.Sleep(time.Duration(150+r.IntN(400)) * time.Millisecond)
		if n := count(t, ctx, js, prefix+"_PRED"); n >= in.valid() {
			t.Logf("the stream was done before kill %d", kills+1)
			break
		}
		p.cmd.Process.Kill() //nolint:errcheck // it may have died already, which the wait reports
		<-p.done
		kills++
	}
	if err := <-fed; err != nil {
		t.Fatal(err)
	}
	p := start(t, "run", "--config", cfg, "--source.batch", "64")
	eventually(t, time.Minute, "every prediction", func() bool { return count(t, ctx, js, prefix+"_PRED") >= in.valid() })
	p.stop()
	if kills == 0 {
		t.Fatal("the worker was never killed: the test proves nothing")
	}

	s, err := snapshot.OpenStore(ctx, store)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	latest, err := s.Latest(ctx, "e2e", nil)
	if err != nil {
		t.Fatal(err)
	}
	if pos := latest.Positions["jetstream:"+prefix+"_IN"]; pos != int64(len(in.messages)) {
		t.Fatalf("the last snapshot is at %d, want %d", pos, len(in.messages))
	}
	ref := in.reference(t, testLearner())
	if !reflect.DeepEqual(latest.State, ref.State()) {
		got, want := latest.State, ref.State()
		t.Fatalf("after %d kills the model differs from an uninterrupted run: examples %d/%d, mistakes %d/%d, updates %d/%d",
			kills, got.Examples, want.Examples, got.Mistakes, want.Mistakes, got.Updates, want.Updates)
	}
	seen := map[int64]bool{}
	for _, e := range decodeEvents(t, readAll(t, ctx, js, prefix+"_PRED")) {
		seen[e.Position.Offset] = true
	}
	for seq := int64(1); seq <= int64(len(in.messages)); seq++ {
		if !seen[seq] {
			t.Fatalf("message %d has no prediction", seq)
		}
	}
	t.Logf("%d kills, final generation %d", kills, latest.Generation)
}
