package consumer_test

import (
	"context"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/vmihailenco/msgpack/v5"
	"go.uber.org/zap/zaptest"

	"github.com/hyperplane-ml/hyperplane/consumer"
	"github.com/hyperplane-ml/hyperplane/consumer/memory"
	"github.com/hyperplane-ml/hyperplane/learner"
	"github.com/hyperplane-ml/hyperplane/wire"
)

// TestJoinedWorkerRefusesAStoredLabelOutOfRange: a snapshot whose join
// holds a label the model has no class for (a damaged or foreign
// generation) stops the worker with an error naming it, before the tail
// would learn the example with it; and so does one whose pending example
// of a multiclass model was served a class the model has not, before a
// label joining it would name that class in a misclassification; and
// so does one whose served probability or log-loss no prediction gives,
// before the served log-loss would turn NaN; and so does one whose head
// is before the log's start, or which holds an example at or past its
// head, which the head would push again behind it out of the log's order.
func TestJoinedWorkerRefusesAStoredLabelOutOfRange(t *testing.T) {
	for _, tc := range []struct {
		name    string
		st      consumer.JoinState
		classes []string
		want    string
	}{
		{"joined example", consumer.JoinState{
			Examples: []consumer.JoinedExample{{ID: "e0", Offset: 0, T: 1, A: 1, Joined: true, Label: 7}},
		}, nil, "label 7"},
		{"held label", consumer.JoinState{
			Labels: []consumer.HeldLabelState{{ID: "e0", Offset: 0, T: 1, B: 1, Label: 7}},
		}, nil, "label 7"},
		{"served class", consumer.JoinState{
			WE: 1, Examples: []consumer.JoinedExample{{ID: "e0", Offset: 0, T: 1, A: 1, Predicted: 7}},
		}, []string{"red", "green", "blue"}, "served class 7"},
		{"served probability", consumer.JoinState{
			WE: 1, Examples: []consumer.JoinedExample{{ID: "e0", Offset: 0, T: 1, A: 1, Predicted: 1, Probability: float32(math.NaN())}},
		}, nil, "served probability NaN"},
		{"served log-loss", consumer.JoinState{
			Counts: consumer.JoinCountsState{Served: 1, ServedLogLoss: math.Inf(1)},
		}, nil, "served log-loss is +Inf"},
		{"example past the head", consumer.JoinState{
			WE: 1, Examples: []consumer.JoinedExample{
				{ID: "e0", Offset: 0, T: 1, A: 1, Predicted: 1},
				{ID: "e1", Offset: 3, T: 1, A: 1, Predicted: 1},
			},
		}, nil, "example 1 at offset 3, beyond its head at 1"},
		{"head before the log", consumer.JoinState{Head: -1}, nil, "head is at offset -1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ex, labels := memory.NewLog("examples", 1), memory.NewLog("labels", 1)
			ex.AppendAt(0, time.UnixMilli(1), []byte(`{"id":"e0","features":{"a":1}}`))
			// A label that joins e0 and finds its served class wrong.
			labels.AppendAt(0, time.UnixMilli(1), []byte(`{"id":"e0","label":0}`))
			st := tc.st
			st.Source, st.LabelsSource = ex.Key(0), labels.Key(0)
			if len(st.Examples) > 0 {
				st.Head = 1
			}
			b, err := msgpack.Marshal(&st)
			if err != nil {
				t.Fatal(err)
			}
			restored, err := consumer.DecodeJoinState(b)
			if err != nil {
				if !strings.Contains(err.Error(), tc.want) {
					t.Fatalf("DecodeJoinState = %v, want an error naming %s", err, tc.want)
				}
				return
			}
			lcfg := learner.DefaultConfig()
			lcfg.HashBits = 10
			lcfg.Classes = tc.classes
			lc := &consumer.LabelsConfig{
				Join:   consumer.JoinConfig{Window: time.Second},
				Source: memory.NewSource(labels, nil),
				OpenTail: func(_ context.Context, resume map[string]int64) (consumer.Source, error) {
					return memory.NewSource(ex, resume), nil
				},
				Format: wire.FormatJSON, Writer: "w", State: restored,
			}
			m, err := learner.New(lcfg)
			if err != nil {
				t.Fatal(err)
			}
			sink := memory.NewSink()
			cfg := consumer.WorkerConfig{Model: "joined", Batch: 16, Labels: lc,
				Misclassifications: consumer.Destination{Sink: sink, Topic: "mis"}}
			w := consumer.NewWorker(cfg, memory.NewSource(ex, map[string]int64{ex.Key(0): st.Head}), m, nil, nil, zaptest.NewLogger(t))
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			err = w.Run(ctx)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Run = %v, want an error naming %s", err, tc.want)
			}
		})
	}
}

// TestRestoreJoinUnderItsSettings: a join's state records the window and
// default it was kept under, through its encoding, and is restored only
// under the same, the refusal naming the setting; a state recorded before
// the settings were is restored under any.
func TestRestoreJoinUnderItsSettings(t *testing.T) {
	recorded := consumer.JoinConfig{Window: time.Minute, Default: -1, HasDefault: true}
	b, err := msgpack.Marshal(consumer.NewJoin(recorded).State(0))
	if err != nil {
		t.Fatal(err)
	}
	st, err := consumer.DecodeJoinState(b)
	if err != nil {
		t.Fatal(err)
	}
	older := *st
	older.Window, older.Default, older.HasDefault = 0, 0, false
	mcfg := learner.DefaultConfig()
	for _, tc := range []struct {
		name string
		st   *consumer.JoinState
		cfg  consumer.JoinConfig
		want string // the refusal's prefix; empty: restored
	}{
		{"the same", st, recorded, ""},
		{"another window", st, consumer.JoinConfig{Window: time.Second, Default: -1, HasDefault: true}, "labels.window: "},
		{"no default", st, consumer.JoinConfig{Window: time.Minute}, "labels.default: "},
		{"another default", st, consumer.JoinConfig{Window: time.Minute, Default: 1, HasDefault: true}, "labels.default: "},
		{"recorded before the settings", &older, consumer.JoinConfig{Window: time.Second}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := consumer.RestoreJoin(tc.cfg, tc.st, mcfg)
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("RestoreJoin: %v", err)
			case tc.want != "" && (err == nil || !strings.HasPrefix(err.Error(), tc.want)):
				t.Fatalf("RestoreJoin: %v, want a refusal beginning %q", err, tc.want)
			}
		})
	}
}

// TestRestoreJoinNamesTheDefaultsByClass: a model with class names is
// refused another labels.default naming both defaults as its config and
// its events write them, by class name, not by the label numbers the
// join keeps.
func TestRestoreJoinNamesTheDefaultsByClass(t *testing.T) {
	for _, tc := range []struct {
		classes            []string
		recorded, this     int
		recordedName, name string
	}{
		{[]string{"ham", "spam"}, -1, 1, `"ham"`, `"spam"`},
		{[]string{"billing issue", "technical", "other"}, 2, 0, `"other"`, `"billing issue"`},
	} {
		mcfg := learner.DefaultConfig()
		mcfg.Classes = tc.classes
		b, err := msgpack.Marshal(consumer.NewJoin(consumer.JoinConfig{Window: time.Minute, Default: tc.recorded, HasDefault: true}).State(0))
		if err != nil {
			t.Fatal(err)
		}
		st, err := consumer.DecodeJoinState(b)
		if err != nil {
			t.Fatal(err)
		}
		_, err = consumer.RestoreJoin(consumer.JoinConfig{Window: time.Minute, Default: tc.this, HasDefault: true}, st, mcfg)
		if err == nil || !strings.HasPrefix(err.Error(), "labels.default: ") {
			t.Fatalf("classes %q: RestoreJoin = %v, want a refusal naming labels.default", tc.classes, err)
		}
		want := "the default label " + tc.recordedName + ", and this worker's is " + tc.name + ":"
		if !strings.Contains(err.Error(), want) {
			t.Errorf("classes %q: %v\nwant it to say %q", tc.classes, err, want)
		}
	}
}
