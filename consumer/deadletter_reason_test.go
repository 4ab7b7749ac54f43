package consumer

import (
	"encoding/json"
	"math"
	"strings"
	"testing"

	"github.com/hyperplane-ml/hyperplane/learner"
	"github.com/hyperplane-ml/hyperplane/wire"
	"github.com/vmihailenco/msgpack/v5"
)

// TestDeadReasons: every decode error falls in the class its cause says,
// in both formats and with the format detected, and a message of the
// other format than the configured one is wrong_format.
func TestDeadReasons(t *testing.T) {
	cfg := learner.DefaultConfig()
	cfg.HashBits = 4
	cfg.Classes = []string{"cat", "dog", "fox"}
	dec := wire.NewDecoder(cfg, wire.DecoderOptions{MaxFeatures: 3, MaxBytes: 4096})
	many := map[string]any{}
	for i := range 4 {
		many[string(rune('a'+i))] = 1
	}
	tests := []struct {
		name    string
		example any // encoded in both formats
		reason  deadReason
	}{
		{"unknown class", map[string]any{"label": "emu"}, reasonUnknownClass},
		{"class index out of range", map[string]any{"label": 7}, reasonUnknownClass},
		{"label of a wrong type", map[string]any{"label": []int{1}}, reasonType},
		{"features of a wrong type", map[string]any{"features": []int{1}}, reasonType},
		{"feature value of a wrong type", map[string]any{"features": map[string]any{"a": true}}, reasonType},
		{"dense value of a wrong type", map[string]any{"x": []any{"a"}}, reasonType},
		{"id of a wrong type", map[string]any{"id": 1.5}, reasonType},
		{"weight of a wrong type", map[string]any{"weight": "1"}, reasonType},
		{"feature value too large", map[string]any{"features": map[string]any{"a": 1e300}}, reasonOutOfRange},
		{"dense value too large", map[string]any{"x": []any{-1e300}}, reasonOutOfRange},
		{"weight zero", map[string]any{"weight": 0}, reasonOutOfRange},
		{"too many features", map[string]any{"features": many}, reasonTooManyFeatures},
		{"too many dense values", map[string]any{"x": make([]float64, 17)}, reasonTooManyFeatures},
		{"too large", map[string]any{"u": string(make([]byte, 5000))}, reasonTooLarge},
		{"not an object", []int{1, 2}, reasonMalformed},
		{"an unknown key nested too deep", map[string]any{"u": deep(wire.MaxDepth + 1)}, reasonMalformed},
	}
	for _, tt := range tests {
		js, err := json.Marshal(tt.example)
		if err != nil {
			t.Fatal(err)
		}
		mp, err := msgpack.Marshal(tt.example)
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range []struct {
			format wire.Format
			data   []byte
		}{{wire.FormatJSON, js}, {wire.FormatMsgpack, mp}, {wire.FormatAuto, js}, {wire.FormatAuto, mp}} {
			w := &Worker{cfg: WorkerConfig{Format: c.format}, dec: dec}
			var x learner.Example
			_, err := w.decode(c.data, &x)
			if err == nil {
				t.Fatalf("%s, %s %q: decoded", tt.name, c.format, c.data)
			}
			if got := reasonOf(c.format, c.data, err); got != tt.reason {
				t.Errorf("%s, %s: error %q is %s, want %s", tt.name, c.format, err, got, tt.reason)
			}
		}
	}

	nan := append([]byte{0x81, 0xa1, 'x', 0x91, 0xcb}, make([]byte, 8)...)
	for i, b := range [8]byte{0x7f, 0xf8, 0, 0, 0, 0, 0, 1} {
		nan[5+i] = b
	}
	inf, _ := msgpack.Marshal(map[string]any{"features": map[string]any{"a": math.Inf(1)}})
	js := []byte(`  {"label": "cat", "features": {"a": 1}}`)
	mp, _ := msgpack.Marshal(map[string]any{"label": "cat"})
	bigJSON := []byte(`{"label": "cat", "u": "` + strings.Repeat("a", 5000) + `"}`)
	bigBad := append([]byte{0x81, 0xc1}, make([]byte, 5000)...)
	for _, tt := range []struct {
		name   string
		format wire.Format
		data   []byte
		reason deadReason
	}{
		{"NaN", wire.FormatMsgpack, nan, reasonOutOfRange},
		{"infinity", wire.FormatMsgpack, inf, reasonOutOfRange},
		// JSON has no NaN or infinities, but what Python's json module
		// and printf write for them is one, out of range as in msgpack.
		{"NaN in JSON", wire.FormatJSON, []byte(`{"features": {"a": NaN}}`), reasonOutOfRange},
		{"NaN in JSON, detected", wire.FormatAuto, []byte(`{"features": {"a": NaN}}`), reasonOutOfRange},
		{"nan in JSON", wire.FormatJSON, []byte(`{"features": {"a": nan}}`), reasonOutOfRange},
		{"-Infinity in JSON", wire.FormatJSON, []byte(`{"features": {"a": -Infinity}}`), reasonOutOfRange},
		{"Infinity in JSON x", wire.FormatJSON, []byte(`{"x": [1, Infinity]}`), reasonOutOfRange},
		{"-inf in JSON x", wire.FormatJSON, []byte(`{"x": [-inf]}`), reasonOutOfRange},
		{"NaN weight in JSON", wire.FormatJSON, []byte(`{"weight": NaN}`), reasonOutOfRange},
		{"nan weight in JSON", wire.FormatJSON, []byte(`{"weight": nan}`), reasonOutOfRange},
		{"-Infinity weight in JSON", wire.FormatJSON, []byte(`{"weight": -Infinity}`), reasonOutOfRange},
		{"a word in JSON", wire.FormatJSON, []byte(`{"features": {"a": nanny}}`), reasonType},
		{"truncated JSON", wire.FormatJSON, js[:20], reasonMalformed},
		{"truncated msgpack", wire.FormatMsgpack, mp[:len(mp)-1], reasonMalformed},
		{"JSON after msgpack", wire.FormatMsgpack, append(mp, '{', '}'), reasonMalformed},
		{"empty", wire.FormatJSON, nil, reasonMalformed},
		{"JSON syntax", wire.FormatJSON, []byte(`{"label": "cat",}`), reasonMalformed},
		{"duplicate key", wire.FormatJSON, []byte(`{"label": "cat", "label": "dog"}`), reasonMalformed},
		{"JSON read as msgpack", wire.FormatMsgpack, js, reasonWrongFormat},
		{"truncated JSON read as msgpack", wire.FormatMsgpack, js[:20], reasonWrongFormat},
		{"msgpack read as JSON", wire.FormatJSON, mp, reasonWrongFormat},
		{"text read as msgpack", wire.FormatMsgpack, []byte("label=cat"), reasonMalformed},
		{"text read as JSON", wire.FormatJSON, []byte("label=cat"), reasonMalformed},
		{"text detected", wire.FormatAuto, []byte("label=cat"), reasonMalformed},
		// Over source.max_bytes the size is the reason, whatever the
		// first bytes are, in every format.
		{"JSON over the limit read as msgpack", wire.FormatMsgpack, bigJSON, reasonTooLarge},
		{"malformed msgpack over the limit", wire.FormatMsgpack, bigBad, reasonTooLarge},
		{"malformed msgpack over the limit, detected", wire.FormatAuto, bigBad, reasonTooLarge},
		{"msgpack over the limit read as JSON", wire.FormatJSON, bigBad, reasonTooLarge},
	} {
		w := &Worker{cfg: WorkerConfig{Format: tt.format}, dec: dec}
		var x learner.Example
		_, err := w.decode(tt.data, &x)
		if err == nil {
			t.Fatalf("%s: decoded %q", tt.name, tt.data)
		}
		if got := reasonOf(tt.format, tt.data, err); got != tt.reason {
			t.Errorf("%s: error %q is %s, want %s", tt.name, err, got, tt.reason)
		}
	}
}

// deep is n arrays, one inside the other.
func deep(n int) any {
	var v any = []any{}
	for range n - 1 {
		v = []any{v}
	}
	return v
}

// TestDeadReasonNames: the label values are distinct, and none is the
// fallback of a reason out of range.
func TestDeadReasonNames(t *testing.T) {
	seen := map[string]bool{}
	for r := range numReasons {
		s := r.String()
		if seen[s] || s == numReasons.String() {
			t.Fatalf("reason %d has the name %q of another", r, s)
		}
		seen[s] = true
	}
	if numReasons > 16 {
		t.Fatal("deadStreak.warned holds 16 reasons")
	}
}

// TestDeadStreak: a run warns once it is long enough (sooner while nothing
// decoded yet), once per reason until a message decodes.
func TestDeadStreak(t *testing.T) {
	var s deadStreak
	warnings := func(r deadReason, n int) int {
		w := 0
		for range n {
			if s.fail(r) {
				w++
			}
		}
		return w
	}
	if w := warnings(reasonMalformed, deadStreakFirst-1); w != 0 {
		t.Fatalf("%d warnings before the first run is long enough", w)
	}
	if w := warnings(reasonType, deadStreakFirst); w != 1 || s.run != deadStreakFirst {
		t.Fatalf("a run of %d at the start: %d warnings, run %d", deadStreakFirst, w, s.run)
	}
	if w := warnings(reasonMalformed, 2*deadStreakWarn); w != 1 {
		t.Fatalf("another reason's run: %d warnings, want 1", w)
	}
	if w := warnings(reasonType, 2*deadStreakWarn); w != 0 {
		t.Fatalf("the first reason again: %d warnings, want none before a message decodes", w)
	}
	if warned, failed := s.ok(); !warned || failed != deadStreakFirst-1+deadStreakFirst+4*deadStreakWarn {
		t.Fatalf("ok: warned %v, failed %d", warned, failed)
	}
	if w := warnings(reasonType, deadStreakWarn-1); w != 0 {
		t.Fatalf("a run of %d after a message decoded: %d warnings", deadStreakWarn-1, w)
	}
	if w := warnings(reasonType, 1); w != 1 {
		t.Fatalf("a run of %d: %d warnings, want 1", deadStreakWarn, w)
	}
	if warned, _ := s.ok(); !warned {
		t.Fatal("ok: not warned")
	}
	if warned, failed := s.ok(); warned || failed != 0 {
		t.Fatalf("ok twice: warned %v, failed %d", warned, failed)
	}
}
