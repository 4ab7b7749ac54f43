package wire

import (
	"strconv"
	"time"
)

// Drift is the event published when the model's change detector finds a
// change of concept at a labeled example (learner.Outcome.Drift): the
// model has learned that example, then started its parameters afresh.
type Drift struct {
	// Position is the example's; the event id derives from it, so a
	// replay of the same offsets publishes the same event.
	Position Position
	Meta     Meta
	Model    string
	// Version is the model's updates when it predicted the example.
	Version uint64
	// Examples and Labeled are the model's counts, the example included.
	Examples, Labeled uint64
	// ErrorBefore and ErrorAfter are the prequential error rates the
	// detector saw before the change and after it, up to this example.
	ErrorBefore, ErrorAfter float64
	// Drifts counts the drifts of the model, this one included.
	Drifts uint64
	// Time is the example's message time, as the broker gave it; the zero
	// time leaves it out.
	Time time.Time
}

// AppendDrift appends the drift event d in encoding e.
func (e Encoding) AppendDrift(dst []byte, d *Drift) []byte {
	if e == EncodingMsgpack {
		return d.AppendMsgpack(dst)
	}
	return d.AppendJSON(dst)
}

// AppendJSON appends the event as one JSON object:
//
//	{"event_id":"kafka:t/0/42","id":"a1","drift":3,
//	 "error_before":0.12,"error_after":0.48,"examples":500900,
//	 "labeled":500900,"time":"2026-11-26T15:00:00.5Z",
//	 "model":{"name":"m","version":7},
//	 "position":{"source":"kafka:t/0","offset":42}}
//
// drift is the count of the model's drifts, this one included. id is
// left out when the example had none, time when its message had none.
func (d *Drift) AppendJSON(dst []byte) []byte {
	dst = appendJSONEventHead(dst, d.Position, d.Meta)
	dst = append(dst, `,"drift":`...)
	dst = strconv.AppendUint(dst, d.Drifts, 10)
	dst = append(dst, `,"error_before":`...)
	dst = appendJSONFloat(dst, d.ErrorBefore)
	dst = append(dst, `,"error_after":`...)
	dst = appendJSONFloat(dst, d.ErrorAfter)
	dst = append(dst, `,"examples":`...)
	dst = strconv.AppendUint(dst, d.Examples, 10)
	dst = append(dst, `,"labeled":`...)
	dst = strconv.AppendUint(dst, d.Labeled, 10)
	if !d.Time.IsZero() {
		dst = append(dst, `,"time":"`...)
		dst = d.Time.UTC().AppendFormat(dst, time.RFC3339Nano)
		dst = append(dst, '"')
	}
	dst = appendJSONModel(dst, d.Model, d.Version)
	dst = append(dst, `,"position":`...)
	dst = appendJSONPosition(dst, d.Position)
	return append(dst, '}')
}

// AppendMsgpack appends the event as a msgpack map with the keys and
// values of AppendJSON; time is a string, as in JSON.
func (d *Drift) AppendMsgpack(dst []byte) []byte {
	n := 8
	if d.Meta.HasID {
		n++
	}
	if !d.Time.IsZero() {
		n++
	}
	dst = msgpackMap(dst, n)
	dst = msgpackStr(dst, "event_id")
	dst = msgpackEventID(dst, d.Position)
	if d.Meta.HasID {
		dst = msgpackStr(dst, "id")
		dst = msgpackStr(dst, d.Meta.ID)
	}
	dst = msgpackStr(dst, "drift")
	dst = msgpackUint(dst, d.Drifts)
	dst = msgpackStr(dst, "error_before")
	dst = msgpackFloat(dst, d.ErrorBefore)
	dst = msgpackStr(dst, "error_after")
	dst = msgpackFloat(dst, d.ErrorAfter)
	dst = msgpackStr(dst, "examples")
	dst = msgpackUint(dst, d.Examples)
	dst = msgpackStr(dst, "labeled")
	dst = msgpackUint(dst, d.Labeled)
	if !d.Time.IsZero() {
		dst = msgpackStr(dst, "time")
		dst = msgpackStr(dst, d.Time.UTC().Format(time.RFC3339Nano))
	}
	dst = msgpackModel(dst, d.Model, d.Version)
	dst = msgpackStr(dst, "position")
	return msgpackPosition(dst, d.Position)
}
