package e2e

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	natsgo "github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/hyperplane-ml/hyperplane/internal/testbroker"
	"github.com/hyperplane-ml/hyperplane/internal/wait"
)

// natsServer is a NATS server with JetStream for one test: in-process, or
// the standalone server HYPERPLANE_E2E_NATS_URL names.
type natsServer struct {
	*testbroker.NATSServer
	t   testing.TB
	url string
}

func startNATS(t testing.TB) *natsServer {
	t.Helper()
	s := testbroker.NATS(t, testbroker.Standalone(os.Getenv("HYPERPLANE_E2E_NATS_URL")))
	return &natsServer{NATSServer: s, t: t, url: s.URL()}
}

// restart stops the in-process server until down holds and starts it
// again on the same port with the same store.
func (n *natsServer) restart(what string, down func() bool) {
	n.t.Helper()
	n.Shutdown()
	wait.For(n.t, time.Minute, 50*time.Millisecond, what, down)
	n.Start()
}

// streams creates the test's streams, named after prefix, and returns a
// JetStream handle on a fresh connection.
func (n *natsServer) streams(ctx context.Context, prefix string) (jetstream.JetStream, *natsgo.Conn) {
	n.t.Helper()
	js := n.JetStream(n.t)
	for _, s := range []string{"IN", "PRED", "MIS", "DEAD"} {
		name := prefix + "_" + s
		if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: name, Subjects: []string{prefix + "." + s}}); err != nil {
			n.t.Fatalf("create %s: %v", name, err)
		}
	}
	return js, js.Conn()
}

func publishAll(t *testing.T, ctx context.Context, js jetstream.JetStream, subject string, msgs [][]byte) {
	t.Helper()
	for _, m := range msgs {
		if _, err := js.Publish(ctx, subject, m); err != nil {
			t.Fatal(err)
		}
	}
}

// count is the number of messages a stream holds.
func count(t *testing.T, ctx context.Context, js jetstream.JetStream, stream string) int {
	s, err := js.Stream(ctx, stream)
	if err != nil {
		return -1
	}
	info, err := s.Info(ctx)
	if err != nil {
		return -1
	}
	return int(info.State.Msgs)
}

// readAll reads every message of a stream.
func readAll(t *testing.T, ctx context.Context, js jetstream.JetStream, stream string) [][]byte {
	t.Helper()
	return testbroker.ReadStream(t, ctx, js, stream)
}

func jetStreamConfig(url, prefix string) string {
	return fmt.Sprintf(`
model:
  name: e2e
  learner:
    hash_bits: 16
nats:
  url: %s
source:
  kind: jetstream
  stream: %[2]s_IN
outputs:
  predictions: jetstream:%[2]s.PRED
  misclassifications: jetstream:%[2]s.MIS
  dead_letter: jetstream:%[2]s.DEAD
`, url, prefix)
}

var prefixes atomic.Int64 //nolint:gochecknoglobals // unique stream names across tests on a shared server

func uniquePrefix(name string) string {
	return fmt.Sprintf("%s%d_%d", name, os.Getpid(), prefixes.Add(1))
}

// TestJetStream: every valid example gets one prediction whose id is its
// position, the misclassifications are exactly the learner's mistakes,
// garbage goes to the dead letters, and unlabeled examples never change
// the model.
func TestJetStream(t *testing.T) {
	ctx := testContext(t)
	ns := startNATS(t)
	prefix := uniquePrefix("JS")
	js, _ := ns.streams(ctx, prefix)
	in := makeInput(3000, 7, 101)
	publishAll(t, ctx, js, prefix+".IN", in.messages)

	p := start(t, "run", "--config", writeConfig(t, jetStreamConfig(ns.url, prefix)))
	ref := in.reference(t, testLearner())
	wait.For(t, time.Minute, 50*time.Millisecond, "every prediction and dead letter", func() bool {
		return count(t, ctx, js, prefix+"_PRED") == in.valid() && count(t, ctx, js, prefix+"_DEAD") == len(in.garbage) &&
			count(t, ctx, js, prefix+"_MIS") == int(ref.Metrics().Mistakes)
	})
	if !p.ready() {
		t.Error("/readyz is not ready while the worker runs")
	}
	if v := p.metric("hyperplane_model_version"); v != float64(ref.Version()) {
		t.Errorf("the worker's model has version %v, the reference %d: unlabeled examples or garbage changed it", v, ref.Version())
	}
	p.stop()

	preds := decodeEvents(t, readAll(t, ctx, js, prefix+"_PRED"))
	seen := map[string]bool{}
	unlabeled := 0
	for _, e := range preds {
		seq := e.Position.Offset
		if want := fmt.Sprintf("jetstream:%s_IN/%d", prefix, seq); e.EventID != want || seen[e.EventID] {
			t.Fatalf("prediction event id %q at %+v: want %q, once", e.EventID, e.Position, want)
		}
		seen[e.EventID] = true
		if in.garbage[int(seq-1)] {
			t.Fatalf("a prediction for malformed message %d", seq)
		}
		if e.Label == nil {
			unlabeled++
			if e.Correct != nil {
				t.Fatalf("an unlabeled prediction says correct: %+v", e)
			}
		}
	}
	if unlabeled == 0 {
		t.Fatal("no unlabeled predictions: the test checks nothing about them")
	}
	for _, e := range decodeEvents(t, readAll(t, ctx, js, prefix+"_DEAD")) {
		if !in.garbage[int(e.Position.Offset-1)] || e.Error == "" || e.EventID != fmt.Sprintf("jetstream:%s_IN/%d", prefix, e.Position.Offset) {
			t.Fatalf("dead letter %+v", e)
		}
	}
	mis := decodeEvents(t, readAll(t, ctx, js, prefix+"_MIS"))
	for i, e := range mis {
		if e.Mistakes != uint64(i+1) || e.Correct == nil || *e.Correct {
			t.Fatalf("misclassification %d: %+v", i, e)
		}
	}
}

// TestJetStreamBrokerOutage stops the NATS server mid-stream for a while:
// the worker reports not ready, waits, and once the server is back every
// example gets exactly one prediction (JetStream drops the repeats of a
// retried batch by their Nats-Msg-Id).
func TestJetStreamBrokerOutage(t *testing.T) {
	if os.Getenv("HYPERPLANE_E2E_NATS_URL") != "" {
		t.Log("standalone server: this test restarts an in-process one instead")
	}
	ctx := testContext(t)
	t.Setenv("HYPERPLANE_E2E_NATS_URL", "")
	ns := startNATS(t)
	prefix := uniquePrefix("OUT")
	js, _ := ns.streams(ctx, prefix)
	in := makeInput(4000, 9, 0)
	publishAll(t, ctx, js, prefix+".IN", in.messages[:2000])

	p := start(t, "run", "--config", writeConfig(t, jetStreamConfig(ns.url, prefix)))
	wait.For(t, time.Minute, 50*time.Millisecond, "the first predictions", func() bool { return count(t, ctx, js, prefix+"_PRED") > 0 })
	// Down until the worker has seen its connection drop.
	disconnects := strings.Count(p.log(), `"msg":"nats disconnected"`)
	ns.restart("the worker to see the server go", func() bool {
		return strings.Count(p.log(), `"msg":"nats disconnected"`) > disconnects
	})
	wait.For(t, time.Minute, 50*time.Millisecond, "readiness after the restart", p.ready)
	publishAll(t, ctx, js, prefix+".IN", in.messages[2000:])
	wait.For(t, time.Minute, 50*time.Millisecond, "every prediction", func() bool { return count(t, ctx, js, prefix+"_PRED") >= in.valid() })
	p.stop()

	seen := map[int64]int{}
	for _, e := range decodeEvents(t, readAll(t, ctx, js, prefix+"_PRED")) {
		seen[e.Position.Offset]++
	}
	for seq := int64(1); seq <= int64(in.valid()); seq++ {
		if seen[seq] != 1 {
			t.Fatalf("message %d has %d predictions, want 1", seq, seen[seq])
		}
	}
}
