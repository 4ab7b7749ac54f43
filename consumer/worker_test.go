package consumer_test

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/hyperplane-ml/hyperplane/consumer"
	natsio "github.com/hyperplane-ml/hyperplane/consumer/nats"
	"github.com/hyperplane-ml/hyperplane/internal/testbroker"
	"github.com/hyperplane-ml/hyperplane/internal/wait"
	"github.com/hyperplane-ml/hyperplane/learner"
	"github.com/hyperplane-ml/hyperplane/learner/synth"
	"github.com/hyperplane-ml/hyperplane/snapshot"
	"github.com/hyperplane-ml/hyperplane/wire"
	natsgo "github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/vmihailenco/msgpack/v5"
	"go.uber.org/zap/zaptest"
	"gocloud.dev/blob/memblob"
)

// broker is an in-process NATS server with JetStream and the streams a
// worker test uses: IN for examples, PRED, MIS and DEAD for events.
type broker struct {
	nc *natsgo.Conn
	js jetstream.JetStream
}

func newBroker(t *testing.T) *broker {
	t.Helper()
	js := testbroker.NATS(t).JetStream(t)
	for _, s := range []string{"IN", "PRED", "MIS", "DEAD"} {
		testbroker.CreateStream(t, js, jetstream.StreamConfig{Name: s, Subjects: []string{"t." + s}})
	}
	return &broker{nc: js.Conn(), js: js}
}

func (b *broker) publish(t *testing.T, msgs [][]byte) {
	t.Helper()
	for _, m := range msgs {
		if _, err := b.js.Publish(context.Background(), "t.IN", m); err != nil {
			t.Fatal(err)
		}
	}
}

// read returns every message stream holds.
func (b *broker) read(t *testing.T, stream string) [][]byte {
	t.Helper()
	return testbroker.ReadStream(t, context.Background(), b.js, stream)
}

// messages is a generated stream with garbage at every 50th place and a
// fifth of the examples unlabeled.
func messages(n int) (msgs [][]byte, garbage int) {
	o := synth.DefaultOptions()
	o.Vocab, o.Unlabeled, o.Features = 200, 0.2, 10
	s := synth.New(o)
	for i := range n {
		if i%50 == 49 {
			msgs = append(msgs, []byte(`{"label": "maybe", "features": {"a": 1}}`))
			garbage++
			continue
		}
		b := synth.AppendJSON(nil, s.Next())
		msgs = append(msgs, b[:len(b)-1])
	}
	return msgs, garbage
}

// runWorker runs a worker over the IN stream until it has consumed n
// messages and published their outputs, then stops it.
func runWorker(t *testing.T, b *broker, cfg consumer.WorkerConfig, model *learner.Model, n int) (*consumer.Worker, *consumer.Metrics) {
	t.Helper()
	log := zaptest.NewLogger(t)
	src, err := natsio.NewJetStreamSource(context.Background(), b.nc, "IN", "", nil, wire.Start{Kind: "earliest"}, log)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	sink, err := natsio.NewSink(b.nc, true, log)
	if err != nil {
		t.Fatal(err)
	}
	defer sink.Close()
	for _, d := range []*consumer.Destination{&cfg.Predictions, &cfg.Misclassifications, &cfg.DeadLetter} {
		if d.Topic != "" {
			d.Sink = sink
		}
	}
	metrics := consumer.NewMetrics(nil)
	w := consumer.NewWorker(cfg, src, model, nil, metrics, log)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	wait.For(t, 2*time.Minute, 20*time.Millisecond, fmt.Sprintf("the outputs of %d messages published", n), func() bool {
		return w.Published()["jetstream:IN"] >= int64(n)
	})
	if !w.Ready() {
		t.Error("a running worker with working outputs is not ready")
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run: %v", err)
	}
	return w, metrics
}

func newModel(t *testing.T) *learner.Model {
	cfg := learner.DefaultConfig()
	cfg.HashBits = 12
	m, err := learner.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func TestWorker(t *testing.T) {
	b := newBroker(t)
	msgs, garbage := messages(1000)
	b.publish(t, msgs)
	cfg := consumer.WorkerConfig{
		Model:              "m",
		Predictions:        consumer.Destination{Topic: "t.PRED"},
		Misclassifications: consumer.Destination{Topic: "t.MIS"},
		DeadLetter:         consumer.Destination{Topic: "t.DEAD"},
		Batch:              64,
	}
	w, metrics := runWorker(t, b, cfg, newModel(t), len(msgs))

	// The reference: the learner alone over the valid examples, in order.
	ref := newModel(t)
	d := wire.NewDecoder(ref.Config(), wire.DecoderOptions{})
	var x learner.Example
	for _, m := range msgs {
		if _, err := d.Decode(m, &x); err == nil {
			ref.Learn(&x)
		}
	}
	got := w.Model().Metrics()
	if got != ref.Metrics() {
		t.Fatalf("worker model %+v, reference %+v", got, ref.Metrics())
	}
	if pos := w.Positions()["jetstream:IN"]; pos != int64(len(msgs)) {
		t.Fatalf("position %d, want %d", pos, len(msgs))
	}
	if n := len(b.read(t, "PRED")); n != len(msgs)-garbage {
		t.Fatalf("%d predictions, want %d", n, len(msgs)-garbage)
	}
	if n := len(b.read(t, "MIS")); n != int(ref.Metrics().Mistakes) {
		t.Fatalf("%d misclassifications, the model made %d mistakes", n, ref.Metrics().Mistakes)
	}
	dead := b.read(t, "DEAD")
	if len(dead) != garbage {
		t.Fatalf("%d dead letters, want %d", len(dead), garbage)
	}
	var dl struct {
		EventID string `json:"event_id"`
		Error   string `json:"error"`
		Payload []byte `json:"payload"`
	}
	if err := json.Unmarshal(dead[0], &dl); err != nil {
		t.Fatal(err)
	}
	if dl.EventID != "jetstream:IN/50" || string(dl.Payload) != string(msgs[49]) || dl.Error == "" {
		t.Fatalf("dead letter %+v", dl)
	}
	if v := testutil.ToFloat64(metrics.DecodeErrors); v != float64(garbage) {
		t.Errorf("decode errors metric %v, want %d", v, garbage)
	}
	if v := testutil.ToFloat64(metrics.Examples.WithLabelValues("mistake")); v != float64(ref.Metrics().Mistakes) {
		t.Errorf("mistake metric %v, want %d", v, ref.Metrics().Mistakes)
	}
}

func TestWorkerPublishModesAndMsgpack(t *testing.T) {
	for _, mode := range []wire.Publish{wire.PublishUnlabeled, wire.PublishNone} {
		t.Run(string(mode), func(t *testing.T) {
			b := newBroker(t)
			msgs, _ := messages(400)
			b.publish(t, msgs)
			cfg := consumer.WorkerConfig{
				Model:              "m",
				Predictions:        consumer.Destination{Topic: "t.PRED"},
				Misclassifications: consumer.Destination{Topic: "t.MIS"},
				Publish:            mode,
				Encoding:           wire.EncodingMsgpack,
			}
			w, _ := runWorker(t, b, cfg, newModel(t), len(msgs))
			preds := b.read(t, "PRED")
			for _, p := range preds {
				var ev map[string]any
				if err := msgpack.Unmarshal(p, &ev); err != nil {
					t.Fatal(err)
				}
				if _, labeled := ev["label"]; labeled {
					t.Fatalf("mode %s published a labeled prediction: %v", mode, ev)
				}
			}
			m := w.Model().Metrics()
			if want := int(m.Examples - m.Labeled); mode == wire.PublishUnlabeled && len(preds) != want {
				t.Fatalf("%d predictions, want the %d unlabeled", len(preds), want)
			}
			if mode == wire.PublishNone && len(preds) != 0 {
				t.Fatalf("%d predictions published with mode none", len(preds))
			}
			if n := len(b.read(t, "MIS")); n != int(m.Mistakes) || n == 0 {
				t.Fatalf("%d misclassifications, %d mistakes: they are published in every mode", n, m.Mistakes)
			}
		})
	}
}

func TestWorkerWithoutDeadLetterDestination(t *testing.T) {
	b := newBroker(t)
	msgs, garbage := messages(200)
	b.publish(t, msgs)
	cfg := consumer.WorkerConfig{Model: "m", Predictions: consumer.Destination{Topic: "t.PRED"}}
	_, metrics := runWorker(t, b, cfg, newModel(t), len(msgs))
	if v := testutil.ToFloat64(metrics.DecodeErrors); v != float64(garbage) {
		t.Fatalf("decode errors %v, want %d", v, garbage)
	}
	if n := len(b.read(t, "DEAD")); n != 0 {
		t.Fatalf("%d dead letters with no destination", n)
	}
	if n := len(b.read(t, "PRED")); n != len(msgs)-garbage {
		t.Fatalf("%d predictions, want %d", n, len(msgs)-garbage)
	}
}

// TestWorkerSnapshots: with a Snapshotter, the worker writes snapshots
// as it goes and one at shutdown that includes every message, with the
// model's final state, and its metrics count them.
func TestWorkerSnapshots(t *testing.T) {
	b := newBroker(t)
	msgs, _ := messages(1000)
	b.publish(t, msgs)
	store := snapshot.NewStore(memblob.OpenBucket(nil), "")
	defer store.Close()
	cfg := consumer.WorkerConfig{
		Model:         "m",
		Predictions:   consumer.Destination{Topic: "t.PRED"},
		Batch:         64,
		Snapshots:     snapshot.NewSnapshotter(store, "m", "test", 1, 100, zaptest.NewLogger(t)),
		SnapshotEvery: 200,
	}
	before := time.Now()
	w, metrics := runWorker(t, b, cfg, newModel(t), len(msgs))

	ctx := context.Background()
	gens, err := store.Generations(ctx, "m")
	if err != nil {
		t.Fatal(err)
	}
	// About 780 labeled examples: a snapshot after the first 200, then
	// one at shutdown; the ones between coalesce while a write is behind.
	if len(gens) < 2 {
		t.Fatalf("generations %v: want a snapshot every 200 labeled examples and one at shutdown", gens)
	}
	var last int64
	for _, g := range gens {
		s, err := store.Load(ctx, "m", g)
		if err != nil {
			t.Fatal(err)
		}
		pos := s.Positions["jetstream:IN"]
		if pos <= last {
			t.Fatalf("generation %d is at %d, not after the one before (%d)", g, pos, last)
		}
		last = pos
	}
	latest, err := store.Latest(ctx, "m", nil)
	if err != nil {
		t.Fatal(err)
	}
	if pos := latest.Positions["jetstream:IN"]; pos != int64(len(msgs)) {
		t.Fatalf("the shutdown snapshot is at %d, want %d", pos, len(msgs))
	}
	if !reflect.DeepEqual(latest.State, w.Model().State()) {
		t.Fatal("the shutdown snapshot is not the final model")
	}
	if v := testutil.ToFloat64(metrics.Snapshots); v != float64(len(gens)) {
		t.Errorf("snapshots metric %v, want %d", v, len(gens))
	}
	if v := testutil.ToFloat64(metrics.LastSnapshot); v < float64(before.Unix()) || v > float64(time.Now().Unix()+1) {
		t.Errorf("last snapshot timestamp %v, want between %d and now", v, before.Unix())
	}
}
