package wire_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/hyperplane-ml/hyperplane/learner"
	"github.com/hyperplane-ml/hyperplane/wire"
)

// eventsPage shows an example of every event and reply.
const eventsPage = "../docs/events.md"

// pageExample is an example the events page shows: name, and its bytes.
type pageExample struct {
	name string
	data []byte
}

// pageExamples are the events and replies docs/events.md shows, as the
// encoders write them.
func pageExamples() []pageExample {
	binary := learner.DefaultConfig().Labels()
	colors := learner.DefaultConfig()
	colors.Classes = []string{"red", "green", "blue"}
	multi := colors.Labels()
	clicks := wire.Position{Source: "kafka:clicks/3", Offset: 1042}
	a1 := wire.Meta{ID: []byte("a1"), HasID: true}

	prediction := wire.Prediction{
		Position: clicks,
		Meta:     a1,
		Outcome: learner.Outcome{
			Prediction: learner.Prediction{Label: 1, Score: 0.25, Probability: 0.56},
			Labeled:    true,
			Margin:     -0.25,
		},
		Label:   -1,
		Model:   "clicks",
		Version: 7,
	}
	unlabeled := wire.Prediction{
		Position: wire.Position{Source: "jetstream:SENSORS", Offset: 88},
		Meta:     wire.Meta{ID: []byte("s9"), HasID: true},
		Outcome: learner.Outcome{Prediction: learner.Prediction{
			Label: 2, Score: 1.5, Probability: 0.71,
			Scores:        []float64{-0.5, 0.125, 1.5},
			Probabilities: []float64{0.08, 0.21, 0.71},
		}},
		Model:   "sensors",
		Version: 5120,
	}
	mistake := wire.Misclassification{Prediction: prediction, Mistakes: 1840, Examples: 20512}
	// What the worker publishes when a late label joins: the join keeps
	// the served class and probability, not the score or the margin.
	joined := mistake
	joined.Joined, joined.LabelDelay = true, 8250
	joined.Outcome.Score, joined.Outcome.Margin = 0, 0
	drift := wire.Drift{
		Position: clicks, Meta: a1, Model: "clicks", Version: 412006,
		Examples: 500900, Labeled: 500900, ErrorBefore: 0.12, ErrorAfter: 0.48, Drifts: 3,
		Time: time.Date(2026, 11, 26, 15, 0, 0, 500_000_000, time.UTC),
	}
	late := wire.LateLabel{
		Position: wire.Position{Source: "kafka:labels/0", Offset: 17},
		ID:       "a1", Label: 1, Reason: "late",
		Example: &wire.Position{Source: "kafka:clicks/0", Offset: 42},
	}
	unknown := wire.LateLabel{Position: wire.Position{Source: "kafka:labels/0", Offset: 18}, ID: "zz", Label: -1, Reason: "unknown"}
	bad := []byte(`{"features":{"tags":["a"]}}`)
	badErr := errors.New("features.tags: value is not a number or string (got array)")
	dead, _ := wire.EncodingJSON.AppendDeadLetter(nil, clicks, badErr, bad, 1<<20)
	long := []byte(`{"id":"a1","features":{"tags":["` + strings.Repeat(`lorem","`, 10000) + `"]}}`)
	truncated, _ := wire.EncodingJSON.AppendDeadLetter(nil, clicks, badErr, long, 240)
	reply := wire.Reply{Meta: a1, Prediction: prediction.Outcome.Prediction, Model: "clicks", Version: 7}
	multiReply := wire.Reply{Prediction: unlabeled.Outcome.Prediction, Model: "sensors", Version: 5120}

	return []pageExample{
		{"prediction", prediction.AppendJSON(nil, binary)},
		{"prediction, multiclass, unlabeled", unlabeled.AppendJSON(nil, multi)},
		{"misclassification", mistake.AppendJSON(nil, binary)},
		{"misclassification of a joined label", joined.AppendJSON(nil, binary)},
		{"drift", drift.AppendJSON(nil)},
		{"late label", wire.EncodingJSON.AppendLateLabel(nil, &late, binary)},
		{"unknown label", wire.EncodingJSON.AppendLateLabel(nil, &unknown, binary)},
		{"dead letter", dead},
		{"truncated dead letter", truncated},
		{"reply", reply.AppendJSON(nil, binary)},
		{"reply, multiclass", multiReply.AppendJSON(nil, multi)},
		{"prediction, msgpack", prediction.AppendMsgpack(nil, binary)},
	}
}

// pageBlock is how the page shows an example: JSON indented by two
// spaces, msgpack as hex, 16 bytes a line.
func pageBlock(t *testing.T, e pageExample) string {
	t.Helper()
	if strings.HasSuffix(e.name, "msgpack") {
		var b strings.Builder
		for i, c := range e.data {
			switch {
			case i > 0 && i%16 == 0:
				b.WriteByte('\n')
			case i > 0:
				b.WriteByte(' ')
			}
			fmt.Fprintf(&b, "%02x", c)
		}
		return "```\n" + b.String() + "\n```\n"
	}
	var out bytes.Buffer
	if err := json.Indent(&out, e.data, "", "  "); err != nil {
		t.Fatalf("%s: %v\n%s", e.name, err, e.data)
	}
	return "```json\n" + out.String() + "\n```\n"
}

// TestEventsPageExamples: every event and reply docs/events.md shows is
// what the encoders write for it.
func TestEventsPageExamples(t *testing.T) {
	page, err := os.ReadFile(eventsPage)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range pageExamples() {
		if want := pageBlock(t, e); !strings.Contains(string(page), want) {
			t.Errorf("%s: the %s is not shown as the encoder writes it:\n%s", eventsPage, e.name, want)
		}
	}
}
