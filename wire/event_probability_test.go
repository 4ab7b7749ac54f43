package wire_test

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/hyperplane-ml/hyperplane/learner"
	"github.com/hyperplane-ml/hyperplane/wire"
	"github.com/vmihailenco/msgpack/v5"
)

// TestEventsMsgpackAgreesWithJSON reads every golden event in both
// encodings with the standard decoders: the same keys and values, so a
// msgpack map's size matches the keys it holds.
func TestEventsMsgpackAgreesWithJSON(t *testing.T) {
	for _, e := range goldenEvents() {
		var fromJSON map[string]any
		if err := json.Unmarshal(e.json(nil), &fromJSON); err != nil {
			t.Fatalf("%s: JSON: %v", e.name, err)
		}
		raw := e.mp(nil)
		d := msgpack.NewDecoder(bytes.NewReader(raw))
		var fromMsgpack map[string]any
		if err := d.Decode(&fromMsgpack); err != nil {
			t.Fatalf("%s: msgpack: %v", e.name, err)
		}
		if _, err := d.DecodeInterface(); err == nil {
			t.Fatalf("%s: bytes follow the msgpack map: its size is short of its keys", e.name)
		}
		if got, want := asJSON(fromMsgpack), asJSON(fromJSON); !reflect.DeepEqual(got, want) {
			t.Errorf("%s:\nmsgpack %v\nJSON    %v", e.name, got, want)
		}
	}
}

// asJSON is v, decoded from msgpack or JSON, as JSON holds it: numbers
// as float64, strings with each byte that is not UTF-8 as U+FFFD, bytes
// in base64.
func asJSON(v any) any {
	switch v := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(v))
		for k, x := range v {
			out[jsonText(k)] = asJSON(x)
		}
		return out
	case string:
		return jsonText(v)
	case []byte:
		return base64.StdEncoding.EncodeToString(v)
	case float64, bool, nil:
		return v
	case int8, int16, int32, int64, uint8, uint16, uint32, uint64:
		var f float64
		fmt.Sscan(fmt.Sprint(v), &f)
		return f
	}
	panic(fmt.Sprintf("unexpected %T", v))
}

func jsonText(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		b.WriteRune(r) // utf8.RuneError for a byte that is not UTF-8
		i += size
	}
	return b.String()
}

// TestEventsCarryProbability checks where the probabilities go: after
// score, the binary model's P(+1) or, for a multiclass model, the
// predicted class's probability and every class's by name; in prediction
// and misclassification events and replies, in both encodings.
func TestEventsCarryProbability(t *testing.T) {
	binary := learner.DefaultConfig()
	multi := binary
	multi.Classes = []string{"a", "b", "c"}
	cases := []struct {
		name   string
		cfg    learner.Config
		pred   learner.Prediction
		fields string // the JSON from "predicted" to the last added field
		want   map[string]any
	}{
		{
			name:   "binary",
			cfg:    binary,
			pred:   learner.Prediction{Label: -1, Score: -0.5, Probability: 0.25},
			fields: `"predicted":-1,"score":-0.5,"probability":0.25`,
			want:   map[string]any{"probability": 0.25},
		},
		{
			name:   "multiclass",
			cfg:    multi,
			pred:   learner.Prediction{Label: 2, Score: 3, Scores: []float64{1, -2, 3}, Probability: 0.625, Probabilities: []float64{0.25, 0.125, 0.625}},
			fields: `"predicted":"c","score":{"a":1,"b":-2,"c":3},"probability":0.625,"probabilities":{"a":0.25,"b":0.125,"c":0.625}`,
			want:   map[string]any{"probability": 0.625, "probabilities": map[string]any{"a": 0.25, "b": 0.125, "c": 0.625}},
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			labels := c.cfg.Labels()
			pos := wire.Position{Source: "kafka:t/0", Offset: 9}
			p := wire.Prediction{Position: pos, Outcome: learner.Outcome{Prediction: c.pred, Labeled: true}, Label: 0, Model: "m", Version: 3}
			m := wire.Misclassification{Prediction: p, Mistakes: 1, Examples: 2}
			r := wire.Reply{Prediction: c.pred, Model: "m", Version: 3}
			for _, enc := range []struct {
				name     string
				json, mp []byte
			}{
				{"prediction", p.AppendJSON(nil, labels), p.AppendMsgpack(nil, labels)},
				{"misclassification", m.AppendJSON(nil, labels), m.AppendMsgpack(nil, labels)},
				{"reply", r.AppendJSON(nil, labels), r.AppendMsgpack(nil, labels)},
			} {
				if !bytes.Contains(enc.json, []byte(c.fields+",")) {
					t.Errorf("%s: %s does not hold %s", enc.name, enc.json, c.fields)
				}
				var fromJSON, fromMsgpack map[string]any
				if err := json.Unmarshal(enc.json, &fromJSON); err != nil {
					t.Fatalf("%s: %v", enc.name, err)
				}
				if err := msgpack.Unmarshal(enc.mp, &fromMsgpack); err != nil {
					t.Fatalf("%s: %v", enc.name, err)
				}
				for name, got := range map[string]map[string]any{"JSON": fromJSON, "msgpack": fromMsgpack} {
					for k, v := range c.want {
						if !reflect.DeepEqual(got[k], v) {
							t.Errorf("%s %s: %s is %v, want %v", enc.name, name, k, got[k], v)
						}
					}
					if _, ok := got["probabilities"]; ok && !labels.Multiclass() {
						t.Errorf("%s %s: a binary model's event has probabilities", enc.name, name)
					}
				}
			}
		})
	}
}

// TestEventEncodingDoesNotAllocate appends events and replies of binary
// and multiclass models, with their probabilities, to a buffer large
// enough: the worker's and the server's hot path.
func TestEventEncodingDoesNotAllocate(t *testing.T) {
	binary := learner.DefaultConfig()
	multi := binary
	multi.Classes = []string{"a", "b", "c"}
	for _, cfg := range []learner.Config{binary, multi} {
		labels := cfg.Labels()
		pred := learner.Prediction{Label: 1, Score: 0.5, Probability: 0.6}
		if cfg.Multiclass() {
			pred.Scores, pred.Probabilities = []float64{0.1, 0.5, -1}, []float64{0.3, 0.6, 0.1}
		}
		p := wire.Prediction{
			Position: wire.Position{Source: "kafka:t/0", Offset: 1 << 33},
			Meta:     wire.Meta{ID: []byte("id-1"), HasID: true},
			Outcome:  learner.Outcome{Prediction: pred, Labeled: true, Margin: -0.5},
			Label:    0, Model: "model", Version: 12345,
		}
		m := wire.Misclassification{Prediction: p, Mistakes: 10, Examples: 1000}
		r := wire.Reply{Meta: p.Meta, Prediction: pred, Model: "model", Version: 12345}
		buf := make([]byte, 0, 4096)
		for _, enc := range []wire.Encoding{wire.EncodingJSON, wire.EncodingMsgpack} {
			allocs := testing.AllocsPerRun(100, func() {
				buf = enc.AppendPrediction(buf[:0], &p, labels)
				buf = enc.AppendMisclassification(buf, &m, labels)
				if enc == wire.EncodingMsgpack {
					buf = r.AppendMsgpack(buf, labels)
				} else {
					buf = r.AppendJSON(buf, labels)
				}
			})
			if allocs != 0 {
				t.Errorf("%s, multiclass %v: %v allocations, want 0", enc, cfg.Multiclass(), allocs)
			}
		}
	}
}
