package wire_test

import (
	"encoding/json"
	"reflect"
	"testing"
	"time"

	"github.com/hyperplane-ml/hyperplane/wire"
	"github.com/vmihailenco/msgpack/v5"
)

// TestDriftEvent: the drift event in JSON is the documented object, and
// in msgpack the same keys and values.
func TestDriftEvent(t *testing.T) {
	d := wire.Drift{
		Position: wire.Position{Source: "kafka:t/0", Offset: 42},
		Meta:     wire.Meta{ID: []byte("a\"1"), HasID: true},
		Model:    "m", Version: 7, Examples: 500900, Labeled: 500800,
		ErrorBefore: 0.125, ErrorAfter: 0.5, Drifts: 3,
		Time: time.Date(2026, 11, 26, 15, 0, 0, 500000000, time.FixedZone("x", 3600)),
	}
	const want = `{"event_id":"kafka:t/0/42","id":"a\"1","drift":3,"error_before":0.125,"error_after":0.5,"examples":500900,"labeled":500800,"time":"2026-11-26T14:00:00.5Z","model":{"name":"m","version":7},"position":{"source":"kafka:t/0","offset":42}}`
	if got := string(wire.EncodingJSON.AppendDrift(nil, &d)); got != want {
		t.Fatalf("JSON\n got %s\nwant %s", got, want)
	}
	for _, c := range []wire.Drift{d, {Position: d.Position, Model: "m"}} {
		var fromJSON, fromMsgpack map[string]any
		if err := json.Unmarshal(wire.EncodingJSON.AppendDrift(nil, &c), &fromJSON); err != nil {
			t.Fatal(err)
		}
		if err := msgpack.Unmarshal(wire.EncodingMsgpack.AppendDrift(nil, &c), &fromMsgpack); err != nil {
			t.Fatal(err)
		}
		if len(fromJSON) != len(fromMsgpack) {
			t.Fatalf("JSON keys %v, msgpack keys %v", fromJSON, fromMsgpack)
		}
		if !reflect.DeepEqual(driftNumbers(fromJSON), driftNumbers(fromMsgpack)) {
			t.Fatalf("JSON %v, msgpack %v", fromJSON, fromMsgpack)
		}
	}
}

// driftNumbers makes every number a float64, as JSON decodes them.
func driftNumbers(v any) any {
	switch x := v.(type) {
	case map[string]any:
		out := map[string]any{}
		for k, e := range x {
			out[k] = driftNumbers(e)
		}
		return out
	case int8, int16, int32, int64, uint8, uint16, uint32, uint64:
		return reflect.ValueOf(x).Convert(reflect.TypeFor[float64]()).Interface()
	}
	return v
}
