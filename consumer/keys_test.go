package consumer_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hyperplane-ml/hyperplane/consumer"
	"github.com/hyperplane-ml/hyperplane/consumer/memory"
	"github.com/hyperplane-ml/hyperplane/internal/wait"
	"github.com/hyperplane-ml/hyperplane/learner/synth"
	"github.com/hyperplane-ml/hyperplane/wire"
	"go.uber.org/zap/zaptest"
)

// keySink keeps what is published, as memory.Sink does, and hands the
// marks on to the labels' log as markSink does.
type keySink struct {
	*memory.Sink
	marks markSink
}

func (s keySink) Publish(ctx context.Context, batch []consumer.Output) error {
	if err := s.marks.Publish(ctx, batch); err != nil {
		return err
	}
	return s.Sink.Publish(ctx, batch)
}

// eventID is the event_id field of a JSON event.
func eventID(t *testing.T, value []byte) string {
	t.Helper()
	var ev struct {
		EventID string `json:"event_id"`
	}
	if err := json.Unmarshal(value, &ev); err != nil || ev.EventID == "" {
		t.Fatalf("event %s: no event id (%v)", value, err)
	}
	return ev.EventID
}

// checkKeys checks that every output of topic in sink is keyed by its
// event's id, and that there is one at least; it returns their keys.
func checkKeys(t *testing.T, sink *memory.Sink, topic string) []string {
	t.Helper()
	outs := sink.Outputs(topic)
	if len(outs) == 0 {
		t.Fatalf("no %s output", topic)
	}
	keys := make([]string, len(outs))
	for i, o := range outs {
		keys[i] = string(o.Key)
		if id := eventID(t, o.Value); keys[i] != id {
			t.Fatalf("%s output keyed %q, its event id is %q", topic, o.Key, id)
		}
	}
	return keys
}

// TestOutputKeys: each kind of output is keyed by its event id, the bytes
// a Kafka message key and a JetStream Nats-Msg-Id carry: the position of
// the example (a prediction, a misclassification, a drift), of the
// refused message (a dead letter) or of the label (a late label), and a
// mark by its writer and its time, each its own (a JetStream stream drops
// a message whose id it saw within its duplicate window). The worker's
// batches are many, so their buffers are reused while the sink holds
// earlier keys.
func TestOutputKeys(t *testing.T) {
	t.Run("labeled", func(t *testing.T) {
		const n, flip, garbage = 8000, 4000, 1000
		in := memory.NewLog("in", 1)
		o := synth.DefaultOptions()
		o.Vocab = 300
		s := synth.New(o)
		var wantPred, wantDead []string
		for i := range n {
			key := fmt.Sprintf("memory:in/0/%d", i)
			if i%garbage == garbage-1 {
				in.Append(0, []byte(`{"label": "maybe"}`))
				wantDead = append(wantDead, key)
				continue
			}
			wantPred = append(wantPred, key)
			r := s.Next()
			if i >= flip {
				r.Label = -r.Label
			}
			m := synth.AppendJSON(nil, r)
			in.Append(0, m[:len(m)-1])
		}
		sink := memory.NewSink()
		cfg := consumer.WorkerConfig{
			Model:              "m",
			Predictions:        consumer.Destination{Sink: sink, Topic: "pred"},
			Misclassifications: consumer.Destination{Sink: sink, Topic: "mis"},
			DeadLetter:         consumer.Destination{Sink: sink, Topic: "dead"},
			Drift:              consumer.Destination{Sink: sink, Topic: "drift"},
			Batch:              64,
		}
		w := consumer.NewWorker(cfg, memory.NewSource(in, nil), newModel(t), nil, nil, zaptest.NewLogger(t))
		runUntil(t, w, func() bool { return w.Published()[in.Key(0)] >= n })

		if pred := checkKeys(t, sink, "pred"); !slices.Equal(pred, wantPred) {
			t.Errorf("%d predictions keyed %s … %s, want %d keyed %s … %s",
				len(pred), pred[0], pred[len(pred)-1], len(wantPred), wantPred[0], wantPred[len(wantPred)-1])
		}
		checkKeys(t, sink, "mis")
		checkKeys(t, sink, "drift")
		if dead := checkKeys(t, sink, "dead"); !slices.Equal(dead, wantDead) {
			t.Errorf("dead letters keyed %v, want %v", dead, wantDead)
		}
	})
	t.Run("joined", func(t *testing.T) {
		const n, quiet = 1000, 10
		ex, labels := delayedLogs(n)
		// Examples after every label, whose windows only a mark closes.
		end := time.Now().Add(-time.Hour)
		for i := range quiet {
			ex.AppendAt(0, end.Add(time.Duration(i)*time.Millisecond), fmt.Appendf(nil, `{"id":"q%d","features":{"a":%d}}`, i, i%7))
		}
		sink := memory.NewSink()
		cfg := consumer.WorkerConfig{
			Model:              "joined",
			Predictions:        consumer.Destination{Sink: sink, Topic: "pred"},
			Misclassifications: consumer.Destination{Sink: sink, Topic: "mis"},
			Batch:              64,
			Labels: &consumer.LabelsConfig{
				Join:   consumer.JoinConfig{Window: joinWindow, Default: -1, HasDefault: true},
				Source: memory.NewSource(labels, nil),
				OpenTail: func(_ context.Context, resume map[string]int64) (consumer.Source, error) {
					return memory.NewSource(ex, resume), nil
				},
				Format:     wire.FormatJSON,
				Marks:      consumer.Destination{Sink: keySink{sink, markSink{labels}}, Topic: "marks"},
				Writer:     "w",
				LateLabels: consumer.Destination{Sink: sink, Topic: "late"},
			},
		}
		w := consumer.NewWorker(cfg, memory.NewSource(ex, nil), newModel(t), nil, nil, zaptest.NewLogger(t))
		runUntil(t, w, func() bool { return w.Positions()[ex.Key(0)] >= n+quiet })

		if pred := checkKeys(t, sink, "pred"); pred[0] != "memory:examples/0/0" {
			t.Errorf("the first prediction keyed %s, want memory:examples/0/0", pred[0])
		}
		for _, k := range checkKeys(t, sink, "mis") {
			var off int
			if _, err := fmt.Sscanf(k, "memory:examples/0/%d", &off); err != nil {
				t.Fatalf("a misclassification keyed %s, not by its example's position", k)
			}
		}
		for _, k := range checkKeys(t, sink, "late") {
			var off int
			if _, err := fmt.Sscanf(k, "memory:labels/0/%d", &off); err != nil {
				t.Fatalf("a late label keyed %s, not by its position", k)
			}
		}
		marks := sink.Outputs("marks")
		if len(marks) == 0 {
			t.Fatal("no mark written")
		}
		seen := map[string]bool{}
		for _, m := range marks {
			if !strings.HasPrefix(string(m.Key), "mark/w/") || seen[string(m.Key)] {
				t.Fatalf("a mark keyed %q, want mark/w/<ns>, a key no other mark has", m.Key)
			}
			seen[string(m.Key)] = true
		}
	})
}

// runUntil runs w until done says so, then stops it.
func runUntil(t *testing.T, w *consumer.Worker, done func() bool) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- w.Run(ctx) }()
	wait.For(t, time.Minute, 5*time.Millisecond, "the worker", func() bool {
		select {
		case err := <-errc:
			t.Fatalf("Run stopped: %v", err)
		default:
		}
		return done()
	})
	cancel()
	if err := <-errc; err != nil {
		t.Fatalf("Run: %v", err)
	}
}
