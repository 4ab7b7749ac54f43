package wire

import (
	"bytes"
	"encoding/json"
	"errors"
	"math"
	"testing"

	"github.com/vmihailenco/msgpack/v5"
)

// TestDeadLetterWireFormat pins the dead letter as it was before payloads
// could be truncated: a dead letter that fits is written as before.
func TestDeadLetterWireFormat(t *testing.T) {
	pos := Position{Source: "kafka:t/0", Offset: 42}
	got, ok := EncodingJSON.AppendDeadLetter(nil, pos, errors.New(`label: "x"`), []byte("\x00{bad"), math.MaxInt)
	want := `{"event_id":"kafka:t/0/42","error":"label: \"x\"","payload":"AHtiYWQ=","position":{"source":"kafka:t/0","offset":42}}`
	if !ok || string(got) != want {
		t.Fatalf("JSON dead letter\n got %s\nwant %s", got, want)
	}
	got, ok = EncodingMsgpack.AppendDeadLetter(nil, pos, errors.New("e"), []byte{1, 2}, math.MaxInt)
	want = "\x84\xa8event_id\xackafka:t/0/42\xa5error\xa1e\xa7payload\xc4\x02\x01\x02\xa8position\x82\xa6source\xa9kafka:t/0\xa6offset\x2a"
	if !ok || string(got) != want {
		t.Fatalf("msgpack dead letter\n got %q\nwant %q", got, want)
	}
}

// TestDeadLetterTruncation: for every limit, in both encodings, the dead
// letter fits, carries the longest prefix of the payload that fits, and
// says it was truncated (with the payload's size) exactly when it was;
// below the size of an empty payload's dead letter there is none.
func TestDeadLetterTruncation(t *testing.T) {
	pos := Position{Source: "jetstream:IN", Offset: 7}
	cause := errors.New("label: value is not a label")
	payloads := [][]byte{nil, []byte("{}"), bytes.Repeat([]byte{0xff, 'a', 0}, 100), bytes.Repeat([]byte("x"), 70_000)}
	for _, enc := range []Encoding{EncodingJSON, EncodingMsgpack} {
		for _, payload := range payloads {
			whole, _ := enc.AppendDeadLetter(nil, pos, cause, payload, math.MaxInt)
			empty := enc.appendDeadLetterEvent(nil, &DeadLetter{Position: pos, Error: cause.Error(), Truncated: true, PayloadBytes: len(payload)})
			limits := []int{0, len(empty) - 1, len(empty), len(empty) + 1, len(whole) - 1, len(whole), len(whole) + 1}
			for l := len(empty); l < len(whole); l += max(1, (len(whole)-len(empty))/200) {
				limits = append(limits, l, l+1, l+2, l+3)
			}
			for _, limit := range limits {
				prefix := []byte("prefix")
				got, ok := enc.AppendDeadLetter(prefix, pos, cause, payload, limit)
				if !bytes.HasPrefix(got, prefix) {
					t.Fatalf("%s: dst was overwritten", enc)
				}
				ev := got[len(prefix):]
				if fits := limit >= min(len(whole), len(empty)); ok != fits {
					t.Fatalf("%s, payload %d, limit %d: ok %v, want %v (whole %d, empty %d)", enc, len(payload), limit, ok, fits, len(whole), len(empty))
				}
				if !ok {
					if len(ev) != 0 {
						t.Fatalf("%s, limit %d: not ok but %d bytes appended", enc, limit, len(ev))
					}
					continue
				}
				if len(ev) > limit {
					t.Fatalf("%s, payload %d, limit %d: dead letter of %d bytes", enc, len(payload), limit, len(ev))
				}
				d := decodeDeadLetter(t, enc, ev)
				if d.EventID != "jetstream:IN/7" || d.Error != cause.Error() || !bytes.HasPrefix(payload, d.Payload) {
					t.Fatalf("%s, limit %d: decoded %+v", enc, limit, d)
				}
				truncated := len(d.Payload) < len(payload)
				if truncated != (limit < len(whole)) || (d.Truncated != nil) != truncated ||
					truncated && (!*d.Truncated || d.PayloadBytes == nil || *d.PayloadBytes != len(payload)) {
					t.Fatalf("%s, limit %d: payload %d of %d bytes, truncated %v, payload_bytes %v", enc, limit, len(d.Payload), len(payload), d.Truncated, d.PayloadBytes)
				}
				if truncated {
					// One more byte of payload would not fit.
					more := enc.appendDeadLetterEvent(nil, &DeadLetter{Position: pos, Error: cause.Error(), Payload: payload[:len(d.Payload)+1], Truncated: true, PayloadBytes: len(payload)})
					if len(more) <= limit {
						t.Fatalf("%s, limit %d: %d payload bytes, but %d would fit", enc, limit, len(d.Payload), len(d.Payload)+1)
					}
				}
			}
		}
	}
}

type decodedDeadLetter struct {
	EventID      string `json:"event_id" msgpack:"event_id"`
	Error        string `json:"error" msgpack:"error"`
	Payload      []byte `json:"payload" msgpack:"payload"`
	PayloadBytes *int   `json:"payload_bytes" msgpack:"payload_bytes"`
	Truncated    *bool  `json:"truncated" msgpack:"truncated"`
	Position     struct {
		Source string `json:"source" msgpack:"source"`
		Offset int64  `json:"offset" msgpack:"offset"`
	} `json:"position" msgpack:"position"`
}

func decodeDeadLetter(t *testing.T, enc Encoding, ev []byte) decodedDeadLetter {
	t.Helper()
	var d decodedDeadLetter
	var err error
	if enc == EncodingMsgpack {
		err = msgpack.Unmarshal(ev, &d)
	} else {
		dec := json.NewDecoder(bytes.NewReader(ev))
		dec.DisallowUnknownFields()
		err = dec.Decode(&d)
	}
	if err != nil {
		t.Fatalf("%s: decode %q: %v", enc, ev, err)
	}
	return d
}
