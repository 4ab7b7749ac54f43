package e2e

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/hyperplane-ml/hyperplane/learner"
	"github.com/hyperplane-ml/hyperplane/learner/synth"
	"github.com/hyperplane-ml/hyperplane/wire"
)

// input is a generated stream of messages: valid examples, some without a
// label, and malformed ones at known places.
type input struct {
	messages [][]byte
	garbage  map[int]bool // message index -> malformed
}

func makeInput(n int, seed uint64, garbageEvery int) input {
	o := synth.DefaultOptions()
	o.Seed, o.Unlabeled, o.Vocab = seed, 0.2, 500
	s := synth.New(o)
	in := input{garbage: map[int]bool{}}
	for i := range n {
		if garbageEvery > 0 && i%garbageEvery == garbageEvery-1 {
			in.garbage[i] = true
			in.messages = append(in.messages, fmt.Appendf(nil, `{"label": 1, "features": {"f%d": [1]}}`, i))
			continue
		}
		b := synth.AppendJSON(nil, s.Next())
		in.messages = append(in.messages, b[:len(b)-1])
	}
	return in
}

func (in input) valid() int { return len(in.messages) - len(in.garbage) }

// reference runs the learner itself over the valid messages in order:
// what the worker must have done.
func (in input) reference(t *testing.T, cfg learner.Config) *learner.Model {
	t.Helper()
	m, err := learner.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	d := wire.NewDecoder(cfg, wire.DecoderOptions{})
	var x learner.Example
	for i, msg := range in.messages {
		_, err := d.Decode(msg, &x)
		if (err != nil) != in.garbage[i] {
			t.Fatalf("message %d: decode error %v, garbage %v", i, err, in.garbage[i])
		}
		if err == nil {
			m.Learn(&x)
		}
	}
	return m
}

func testLearner() learner.Config {
	cfg := learner.DefaultConfig()
	cfg.HashBits = 16
	return cfg
}

// event is the part of an event the tests read.
type event struct {
	EventID  string          `json:"event_id"`
	ID       string          `json:"id"`
	Label    json.RawMessage `json:"label"`
	Correct  *bool           `json:"correct"`
	Error    string          `json:"error"`
	Mistakes uint64          `json:"mistakes"`
	Position struct {
		Source string `json:"source"`
		Offset int64  `json:"offset"`
	} `json:"position"`
}

func decodeEvents(t *testing.T, values [][]byte) []event {
	t.Helper()
	out := make([]event, len(values))
	for i, v := range values {
		if err := json.Unmarshal(v, &out[i]); err != nil {
			t.Fatalf("event %d: %v: %s", i, err, v)
		}
	}
	return out
}
