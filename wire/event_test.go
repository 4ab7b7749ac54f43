package wire_test

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/hyperplane-ml/hyperplane/learner"
	"github.com/hyperplane-ml/hyperplane/wire"
)

func TestPredictionEventJSON(t *testing.T) {
	binary := learner.DefaultConfig()
	named := binary
	named.Classes = []string{"ham", "spam"}
	multi := binary
	multi.Classes = []string{"a", "b\"quoted\"", "c"}
	pos := wire.Position{Source: "kafka:clicks/3", Offset: 1042}
	cases := []struct {
		name string
		cfg  learner.Config
		ev   wire.Prediction
		want map[string]any
	}{
		{
			name: "binary labeled",
			cfg:  binary,
			ev: wire.Prediction{
				Position: pos, Meta: wire.Meta{ID: []byte("a\n1"), HasID: true},
				Outcome: learner.Outcome{Prediction: learner.Prediction{Label: 1, Score: 0.25, Probability: 0.75}, Labeled: true, Correct: false},
				Label:   -1, Model: "m", Version: 7,
			},
			want: map[string]any{
				"event_id": "kafka:clicks/3/1042", "id": "a\n1", "predicted": 1.0, "score": 0.25, "probability": 0.75,
				"label": -1.0, "correct": false,
				"model":    map[string]any{"name": "m", "version": 7.0},
				"position": map[string]any{"source": "kafka:clicks/3", "offset": 1042.0},
			},
		},
		{
			name: "named classes unlabeled",
			cfg:  named,
			ev:   wire.Prediction{Position: pos, Outcome: learner.Outcome{Prediction: learner.Prediction{Label: -1, Score: -3, Probability: 0.125}}, Model: "m"},
			want: map[string]any{
				"event_id": "kafka:clicks/3/1042", "predicted": "ham", "score": -3.0, "probability": 0.125,
				"model":    map[string]any{"name": "m", "version": 0.0},
				"position": map[string]any{"source": "kafka:clicks/3", "offset": 1042.0},
			},
		},
		{
			name: "multiclass",
			cfg:  multi,
			ev: wire.Prediction{
				Position: pos,
				Outcome:  learner.Outcome{Prediction: learner.Prediction{Label: 1, Score: 2, Scores: []float64{1, 2, -0.5}, Probability: 0.5, Probabilities: []float64{0.25, 0.5, 0.25}}, Labeled: true, Correct: true},
				Label:    1, Model: "m", Version: 1,
			},
			want: map[string]any{
				"event_id": "kafka:clicks/3/1042", "predicted": "b\"quoted\"",
				"score":         map[string]any{"a": 1.0, "b\"quoted\"": 2.0, "c": -0.5},
				"probability":   0.5,
				"probabilities": map[string]any{"a": 0.25, "b\"quoted\"": 0.5, "c": 0.25},
				"label":         "b\"quoted\"", "correct": true,
				"model":    map[string]any{"name": "m", "version": 1.0},
				"position": map[string]any{"source": "kafka:clicks/3", "offset": 1042.0},
			},
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			raw := c.ev.AppendJSON(nil, c.cfg.Labels())
			var got map[string]any
			if err := json.Unmarshal(raw, &got); err != nil {
				t.Fatalf("%v: %s", err, raw)
			}
			if !reflect.DeepEqual(got, c.want) {
				t.Fatalf("got  %v\nwant %v", got, c.want)
			}
			m := wire.Misclassification{Prediction: c.ev, Mistakes: 3, Examples: 10}
			m.Outcome.Margin = -0.5
			if err := json.Unmarshal(m.AppendJSON(nil, c.cfg.Labels()), &got); err != nil {
				t.Fatal(err)
			}
			if got["margin"] != -0.5 || got["mistakes"] != 3.0 || got["examples"] != 10.0 || got["event_id"] != c.want["event_id"] {
				t.Fatalf("misclassification %v", got)
			}
		})
	}
}

func TestEventEscapesInvalidUTF8(t *testing.T) {
	ev := wire.Prediction{Position: wire.Position{Source: "file:x", Offset: 1}, Meta: wire.Meta{ID: []byte("\xff\x01é"), HasID: true}, Model: "m"}
	var got map[string]any
	if err := json.Unmarshal(ev.AppendJSON(nil, learner.DefaultConfig().Labels()), &got); err != nil {
		t.Fatal(err)
	}
	if got["id"] != "\ufffd\x01é" {
		t.Fatalf("id %q", got["id"])
	}
}
