package consumer_test

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/hyperplane-ml/hyperplane/consumer"
	natsio "github.com/hyperplane-ml/hyperplane/consumer/nats"
	"github.com/hyperplane-ml/hyperplane/internal/testbroker"
	"github.com/hyperplane-ml/hyperplane/learner"
	"github.com/hyperplane-ml/hyperplane/learner/synth"
	"github.com/hyperplane-ml/hyperplane/wire"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"go.uber.org/zap/zaptest"
)

// TestWorkerDrift: when the stream's concept turns over, the worker's
// model finds the change; the worker publishes one drift event, at the
// example where a model learning the same examples alone finds it, with
// the model's counts, and counts it in hyperplane_drifts_total.
func TestWorkerDrift(t *testing.T) {
	const n, at = 8000, 4000
	b := newBroker(t)
	testbroker.CreateStream(t, b.js, jetstream.StreamConfig{Name: "DRIFT", Subjects: []string{"t.DRIFT"}})
	o := synth.DefaultOptions()
	o.Vocab = 300
	s := synth.New(o)
	msgs := make([][]byte, n)
	for i := range msgs {
		r := s.Next()
		if i >= at {
			r.Label = -r.Label
		}
		m := synth.AppendJSON(nil, r)
		msgs[i] = m[:len(m)-1]
	}
	b.publish(t, msgs)

	// The reference: the learner alone over the examples, in order.
	ref := newModel(t)
	d := wire.NewDecoder(ref.Config(), wire.DecoderOptions{})
	var x learner.Example
	var want *learner.Drift
	wantAt, labeled := -1, uint64(0)
	for i, m := range msgs {
		if _, err := d.Decode(m, &x); err != nil {
			t.Fatal(err)
		}
		if o := ref.Learn(&x); o.Drift != nil {
			if want != nil {
				t.Fatalf("the reference found a second drift at %d", i)
			}
			want, wantAt, labeled = o.Drift, i, ref.Metrics().Labeled
		}
	}
	if want == nil || wantAt < at {
		t.Fatalf("the reference found drift %v at %d; the concept changed at %d", want, wantAt, at)
	}

	sink, err := natsio.NewSink(b.nc, true, zaptest.NewLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	defer sink.Close()
	cfg := consumer.WorkerConfig{Model: "m", Drift: consumer.Destination{Sink: sink, Topic: "t.DRIFT"}, Batch: 64}
	w, metrics := runWorker(t, b, cfg, newModel(t), n)
	if w.Model().Drifts() != 1 {
		t.Fatalf("the worker's model found %d drifts, want 1", w.Model().Drifts())
	}
	if got := testutil.ToFloat64(metrics.Drifts); got != 1 {
		t.Fatalf("hyperplane_drifts_total is %v, want 1", got)
	}
	events := b.read(t, "DRIFT")
	if len(events) != 1 {
		t.Fatalf("%d drift events, want 1", len(events))
	}
	var ev struct {
		EventID     string  `json:"event_id"`
		Drift       uint64  `json:"drift"`
		ErrorBefore float64 `json:"error_before"`
		ErrorAfter  float64 `json:"error_after"`
		Examples    uint64  `json:"examples"`
		Labeled     uint64  `json:"labeled"`
		Time        string  `json:"time"`
		Model       struct {
			Name string `json:"name"`
		} `json:"model"`
	}
	if err := json.Unmarshal(events[0], &ev); err != nil {
		t.Fatal(err)
	}
	// JetStream sequences start at 1.
	if wantID := fmt.Sprintf("jetstream:IN/%d", wantAt+1); ev.EventID != wantID || ev.Drift != 1 || ev.Model.Name != "m" ||
		ev.ErrorBefore != want.ErrorBefore || ev.ErrorAfter != want.ErrorAfter ||
		ev.Examples != uint64(wantAt+1) || ev.Labeled != labeled || ev.Time == "" {
		t.Fatalf("drift event %s; want id %s and the reference's drift %+v after %d labeled examples", events[0], wantID, *want, labeled)
	}
}
