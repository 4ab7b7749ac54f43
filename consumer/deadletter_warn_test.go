package consumer_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/hyperplane-ml/hyperplane/consumer"
	"github.com/hyperplane-ml/hyperplane/consumer/memory"
	"github.com/hyperplane-ml/hyperplane/internal/wait"
	"github.com/hyperplane-ml/hyperplane/learner"
	"github.com/hyperplane-ml/hyperplane/learner/synth"
	"github.com/hyperplane-ml/hyperplane/wire"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
)

// observedWorker runs a worker with format over a one-partition memory
// log, logging to an observer; stop ends it.
type observedWorker struct {
	*consumer.Worker
	log     *memory.Log
	sink    *memory.Sink
	metrics *consumer.Metrics
	logs    *observer.ObservedLogs
	read    int
}

func startObservedWorker(t *testing.T, format wire.Format) *observedWorker {
	t.Helper()
	lcfg := learner.DefaultConfig()
	lcfg.HashBits = 12
	model, err := learner.New(lcfg)
	if err != nil {
		t.Fatal(err)
	}
	core, logs := observer.New(zapcore.InfoLevel)
	o := &observedWorker{log: memory.NewLog("in", 1), sink: memory.NewSink(), metrics: consumer.NewMetrics(prometheus.NewRegistry()), logs: logs}
	o.Worker = consumer.NewWorker(consumer.WorkerConfig{
		Model:       "m",
		Predictions: consumer.Destination{Sink: o.sink, Topic: "pred"},
		DeadLetter:  consumer.Destination{Sink: o.sink, Topic: "dead"},
		Format:      format,
		Batch:       64,
	}, memory.NewSource(o.log, nil), model, nil, o.metrics, zap.New(core))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- o.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("Run: %v", err)
			}
		case <-time.After(time.Minute):
			t.Error("worker did not stop")
		}
	})
	return o
}

// feed appends msgs and waits until the worker has processed them and
// published their outputs.
func (o *observedWorker) feed(t *testing.T, msgs ...[]byte) {
	t.Helper()
	o.log.Append(0, msgs...)
	o.read += len(msgs)
	wait.For(t, time.Minute, 5*time.Millisecond, fmt.Sprintf("%d messages processed", o.read), func() bool {
		return o.Published()[o.log.Key(0)] == int64(o.read)
	})
}

func (o *observedWorker) warnings(snippet string) []observer.LoggedEntry {
	return o.logs.FilterLevelExact(zapcore.WarnLevel).FilterMessageSnippet(snippet).All()
}

func (o *observedWorker) deadLetters(reason string) float64 {
	return testutil.ToFloat64(o.metrics.DeadLetters.WithLabelValues(reason))
}

func repeat(msg []byte, n int) [][]byte {
	msgs := make([][]byte, n)
	for i := range msgs {
		msgs[i] = msg
	}
	return msgs
}

// examples encodes n labeled examples in format.
func examples(format wire.Format, n int) [][]byte {
	s := synth.New(synth.DefaultOptions())
	msgs := make([][]byte, n)
	for i := range msgs {
		if format == wire.FormatMsgpack {
			msgs[i] = synth.AppendMsgpack(nil, s.Next())
		} else {
			b := synth.AppendJSON(nil, s.Next())
			msgs[i] = b[:len(b)-1]
		}
	}
	return msgs
}

// TestWrongFormatWarnsOnce: a worker reading examples of the other format
// than source.format says so in one warning, however many follow, counts
// them as wrong_format, and warns again only after a message decoded.
func TestWrongFormatWarnsOnce(t *testing.T) {
	for _, tt := range []struct {
		format, other wire.Format
		says          string
	}{
		{wire.FormatMsgpack, wire.FormatJSON, "messages look like JSON but source.format is msgpack"},
		{wire.FormatJSON, wire.FormatMsgpack, "messages look like msgpack but source.format is jsonl"},
	} {
		t.Run(string(tt.format), func(t *testing.T) {
			o := startObservedWorker(t, tt.format)
			o.feed(t, examples(tt.other, 300)...)
			if got := o.warnings("source.format"); len(got) != 1 || !strings.Contains(got[0].Message, tt.says) {
				t.Fatalf("after 300 messages in %s: warnings %v, want one saying %q", tt.other, got, tt.says)
			}
			if w := o.logs.FilterLevelExact(zapcore.WarnLevel).Len(); w != 1 {
				t.Fatalf("%d warnings, want 1: %v", w, o.logs.All())
			}
			ctx := o.warnings("source.format")[0].ContextMap()
			if ctx["reason"] != "wrong_format" || ctx["messages"] != int64(10) || ctx["source"] != o.log.Key(0) || ctx["error"] == nil {
				t.Fatalf("warning's fields %v", ctx)
			}
			if n := o.deadLetters("wrong_format"); n != 300 {
				t.Fatalf("hyperplane_dead_letters_total{reason=wrong_format} = %v, want 300", n)
			}
			if n := testutil.ToFloat64(o.metrics.DecodeErrors); n != 300 {
				t.Fatalf("hyperplane_decode_errors_total = %v, want 300", n)
			}
			if n := len(o.sink.Outputs("dead")); n != 300 {
				t.Fatalf("%d dead letters published, want 300", n)
			}

			// One message decodes: the run ends, and a new one warns
			// again once it is long enough.
			o.feed(t, examples(tt.format, 1)...)
			if got := o.logs.FilterMessage("messages decode again").All(); len(got) != 1 || got[0].ContextMap()["dead_letters"] != int64(300) {
				t.Fatalf("after a good message: %v, want one line counting 300 dead letters", got)
			}
			o.feed(t, examples(tt.other, 99)...)
			if got := o.warnings("source.format"); len(got) != 1 {
				t.Fatalf("99 messages after a good one: %d warnings, want still 1", len(got))
			}
			o.feed(t, examples(tt.other, 50)...)
			if got := o.warnings("source.format"); len(got) != 2 || got[1].ContextMap()["messages"] != int64(100) {
				t.Fatalf("149 messages after a good one: warnings %v, want a second after 100", got)
			}
			if n := o.deadLetters("wrong_format"); n != 449 {
				t.Fatalf("hyperplane_dead_letters_total{reason=wrong_format} = %v, want 449", n)
			}
		})
	}
}

// TestPersistentDeadLettersWarnOnce: messages that keep failing for the
// same reason, the format right, are warned about once with the reason
// and its likely cause; other reasons count apart; a lone bad message
// says nothing.
func TestPersistentDeadLettersWarnOnce(t *testing.T) {
	o := startObservedWorker(t, wire.FormatJSON)
	good := examples(wire.FormatJSON, 1)[0]
	o.feed(t, good, []byte(`{"label": 1, "features": {"a": 1}`), good)
	if n := o.logs.FilterLevelExact(zapcore.WarnLevel).Len(); n != 0 {
		t.Fatalf("one malformed message between good ones: %d warnings, want none", n)
	}
	o.feed(t, repeat([]byte(`{"label": 1, "x": [1, 2]`), 20)...)
	o.feed(t, repeat([]byte(`{"label": "maybe", "features": {"a": 1}}`), 250)...)
	got := o.warnings("failed to decode")
	if len(got) != 1 {
		t.Fatalf("250 unknown classes: warnings %v, want 1", got)
	}
	ctx := got[0].ContextMap()
	if ctx["reason"] != "unknown_class" || ctx["messages"] != int64(100) || !strings.Contains(ctx["hint"].(string), "model.learner.classes") ||
		!strings.Contains(ctx["error"].(string), "maybe") {
		t.Fatalf("warning's fields %v", ctx)
	}
	if n := o.logs.FilterLevelExact(zapcore.WarnLevel).Len(); n != 1 {
		t.Fatalf("%d warnings, want 1: %v", n, o.logs.All())
	}
	for reason, want := range map[string]float64{"unknown_class": 250, "malformed": 21, "wrong_format": 0, "too_large": 0} {
		if n := o.deadLetters(reason); n != want {
			t.Errorf("hyperplane_dead_letters_total{reason=%s} = %v, want %v", reason, n, want)
		}
	}
}
