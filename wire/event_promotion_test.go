package wire_test

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/hyperplane-ml/hyperplane/wire"
)

// TestPromotionEvent: the JSON event has the documented keys, and the
// msgpack one the same keys and values.
func TestPromotionEvent(t *testing.T) {
	for _, p := range []wire.Promotion{
		{Position: wire.Position{Source: "kafka:t/0", Offset: 42}, Model: "clicks", Version: 7, Promoted: "arow", Replaced: "clicks",
			Auto: true, Examples: 500900, Compared: 500000, LogLossDiff: 0.021, Low: 0.002, High: 0.04, Promotions: 1},
		{Position: wire.Position{Source: "jetstream:S", Offset: 3}, Model: "clicks", Promoted: "p", Replaced: "clicks", Request: "ab12", Promotions: 2},
	} {
		var fromJSON, fromMsgpack map[string]any
		if err := json.Unmarshal(p.AppendJSON(nil), &fromJSON); err != nil {
			t.Fatalf("JSON: %v: %s", err, p.AppendJSON(nil))
		}
		if err := msgpack.Unmarshal(p.AppendMsgpack(nil), &fromMsgpack); err != nil {
			t.Fatalf("msgpack: %v", err)
		}
		if fromJSON["event_id"] != string(p.Position.AppendEventID(nil)) || fromJSON["promoted"] != p.Promoted || fromJSON["replaced"] != p.Replaced {
			t.Errorf("JSON event %v", fromJSON)
		}
		if _, auto := fromJSON["auto"]; auto != p.Auto {
			t.Errorf("auto %v in %v", p.Auto, fromJSON)
		}
		if _, req := fromJSON["request"]; req == p.Auto {
			t.Errorf("request in an event of auto %v: %v", p.Auto, fromJSON)
		}
		// Numbers decode as float64 from JSON and as ints from msgpack:
		// compare through JSON.
		b, _ := json.Marshal(fromMsgpack)
		var again map[string]any
		json.Unmarshal(b, &again) //nolint:errcheck // just encoded
		if !reflect.DeepEqual(fromJSON, again) {
			t.Errorf("msgpack %v, JSON %v", again, fromJSON)
		}
	}
}
