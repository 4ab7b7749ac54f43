package wire_test

import (
	"bytes"
	"flag"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/hyperplane-ml/hyperplane/learner"
	"github.com/hyperplane-ml/hyperplane/wire"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

// goldenEvent appends one event in each encoding.
type goldenEvent struct {
	name     string
	json, mp func(dst []byte) []byte
}

// goldenEvents are events of every kind, for every kind of labels, with
// values that take each branch of the encoders: ids to escape, invalid
// UTF-8, strings, bins and maps past the smallest msgpack headers,
// integers past the fixint range, negative zero and extreme floats, and
// probabilities at 0, 1 and in between.
func goldenEvents() []goldenEvent {
	binary := learner.DefaultConfig()
	named := binary
	named.Classes = []string{"ham", "spam"}
	multi := binary
	multi.Classes = []string{"a", "b\"quoted\"", "c\n"}
	many := binary
	for i := range 17 { // a map16 of scores
		many.Classes = append(many.Classes, "class-"+strconv.Itoa(i))
	}
	positions := []wire.Position{
		{Source: "kafka:clicks/3", Offset: 1042},
		{Source: "jetstream:IN", Offset: 7},
		{Source: "file:" + strings.Repeat("d/", 20) + "x\"\\é\xff", Offset: 1 << 40},
		{Source: "nats:" + strings.Repeat("s", 300), Offset: 0},
	}
	metas := []wire.Meta{
		{},
		{ID: []byte("a1"), HasID: true},
		{ID: []byte(""), HasID: true},
		{ID: []byte("\x00\x1f\t\n\r\"\\/\u2028é\xff" + strings.Repeat("i", 40)), HasID: true},
	}
	scores := []float64{0.25, -3, math.Copysign(0, -1), 1e-7, 1.7976931348623157e308, 5e-324, 1e21, 123456.789}
	probabilities := []float64{0.5, 0, 1, 0.7310585786300049, 1e-300, 0.9999999999999999, 0.1}
	var out []goldenEvent
	add := func(name string, json, mp func([]byte) []byte) {
		out = append(out, goldenEvent{name, json, mp})
	}
	k := 0
	for _, cfg := range []learner.Config{binary, named, multi, many} {
		labels := cfg.Labels()
		classes := max(len(cfg.Classes), 2)
		label := func(i int) int {
			if cfg.Multiclass() {
				return i % classes
			}
			return 1 - 2*(i%2)
		}
		for _, labeled := range []bool{false, true} {
			for _, correct := range []bool{false, true} {
				if !labeled && correct {
					continue
				}
				k++
				o := learner.Outcome{
					Prediction: learner.Prediction{Label: label(k), Score: scores[k%len(scores)], Probability: probabilities[k%len(probabilities)]},
					Labeled:    labeled,
					Correct:    correct,
					Margin:     -scores[(k+3)%len(scores)],
				}
				if cfg.Multiclass() {
					o.Scores = make([]float64, classes)
					o.Probabilities = make([]float64, classes)
					for c := range o.Scores {
						o.Scores[c] = scores[(k+c)%len(scores)]
						o.Probabilities[c] = probabilities[(k+c)%len(probabilities)]
					}
				}
				p := wire.Prediction{
					Position: positions[k%len(positions)],
					Meta:     metas[k%len(metas)],
					Outcome:  o,
					Label:    label(k + 1),
					Model:    []string{"m", "model \"x\"", strings.Repeat("m", 40)}[k%3],
					Version:  []uint64{0, 127, 128, math.MaxUint64}[k%4],
				}
				name := strings.Join(cfg.Classes, ",") + " labeled=" + strconv.FormatBool(labeled) + " correct=" + strconv.FormatBool(correct)
				add("prediction "+name, func(dst []byte) []byte { return p.AppendJSON(dst, labels) },
					func(dst []byte) []byte { return p.AppendMsgpack(dst, labels) })
				m := wire.Misclassification{Prediction: p, Mistakes: uint64(k * 100), Examples: uint64(k * 1000)}
				add("misclassification "+name, func(dst []byte) []byte { return m.AppendJSON(dst, labels) },
					func(dst []byte) []byte { return m.AppendMsgpack(dst, labels) })
			}
		}
	}
	payloads := [][]byte{nil, []byte("{\"a\":1}"), bytes.Repeat([]byte{0xff, 0, 'x'}, 100)}
	for i, payload := range payloads {
		for _, truncated := range []bool{false, true} {
			d := wire.DeadLetter{
				Position: positions[i%len(positions)],
				Error:    []string{"label: \"x\" is not a binary label", "features.\"a\\nb\": value is not a number or string (got array)", "e\xff\u2028"}[i%3],
				Payload:  payload,
			}
			if truncated {
				d.Truncated, d.PayloadBytes = true, len(payload)*2+1
			}
			add("dead letter "+strconv.Itoa(i)+" truncated="+strconv.FormatBool(truncated), d.AppendJSON, d.AppendMsgpack)
		}
	}
	return out
}

// TestEventsGolden pins the wire format of every event, in both
// encodings, byte for byte: testdata/events.jsonl holds one JSON event
// per line, testdata/events.msgpack the msgpack events end to end.
func TestEventsGolden(t *testing.T) {
	var js, mp []byte
	for _, e := range goldenEvents() {
		js = append(e.json(js), '\n')
		mp = e.mp(mp)
	}
	for file, got := range map[string][]byte{"events.jsonl": js, "events.msgpack": mp} {
		path := filepath.Join("testdata", file)
		if *update {
			if err := os.WriteFile(path, got, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		want, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s: the events differ from the golden file (go test -run TestEventsGolden -update rewrites it)", path)
		}
	}
	// Each event on its own, after other bytes: the encoders append.
	for _, e := range goldenEvents() {
		prefix := []byte("prefix")
		if got, want := e.json(bytes.Clone(prefix)), append(bytes.Clone(prefix), e.json(nil)...); !bytes.Equal(got, want) {
			t.Errorf("%s: JSON appended after other bytes differs", e.name)
		}
		if got, want := e.mp(bytes.Clone(prefix)), append(bytes.Clone(prefix), e.mp(nil)...); !bytes.Equal(got, want) {
			t.Errorf("%s: msgpack appended after other bytes differs", e.name)
		}
	}
}
