package consumer

import (
	"encoding/base64"
	"math"
	"strconv"
)

// Encoding is how events are written.
type Encoding string

// The event encodings.
const (
	EncodingJSON    Encoding = "json"
	EncodingMsgpack Encoding = "msgpack"
)

func (e Encoding) appendPrediction(dst []byte, p *Prediction, l Labels) []byte {
	if e == EncodingMsgpack {
		return p.AppendMsgpack(dst, l)
	}
	return p.AppendJSON(dst, l)
}

func (e Encoding) appendMisclassification(dst []byte, m *Misclassification, l Labels) []byte {
	if e == EncodingMsgpack {
		return m.AppendMsgpack(dst, l)
	}
	return m.AppendJSON(dst, l)
}

// appendDeadLetter appends the dead letter for the message at pos that err
// refused, whose bytes are payload, in at most limit bytes: with the whole
// payload if that fits, and otherwise with the longest prefix of it that
// fits, marked Truncated. It returns dst unchanged and false when not even
// an empty payload fits (a limit below a few hundred bytes, since errors
// are short).
func (e Encoding) appendDeadLetter(dst []byte, pos Position, err error, payload []byte, limit int) ([]byte, bool) {
	start := len(dst)
	d := DeadLetter{Position: pos, Error: err.Error(), Payload: payload}
	if dst = e.appendDeadLetterEvent(dst, &d); len(dst)-start <= limit {
		return dst, true
	}
	d.Payload, d.Truncated, d.PayloadBytes = nil, true, len(payload)
	dst = e.appendDeadLetterEvent(dst[:start], &d)
	room := limit - (len(dst) - start)
	if room < 0 {
		return dst[:start], false
	}
	d.Payload = payload[:min(e.payloadFitting(room), len(payload))]
	return e.appendDeadLetterEvent(dst[:start], &d), true
}

func (e Encoding) appendDeadLetterEvent(dst []byte, d *DeadLetter) []byte {
	if e == EncodingMsgpack {
		return d.AppendMsgpack(dst)
	}
	return d.AppendJSON(dst)
}

// payloadFitting is the most payload bytes whose encoding in a dead letter
// takes at most room bytes more than an empty payload does.
func (e Encoding) payloadFitting(room int) int {
	if e != EncodingMsgpack {
		return room / 4 * 3 // base64: 4 characters for every 3 bytes
	}
	// A bin header grows from 2 bytes (empty) to 3 or 5 with the length.
	n := room
	for n > 0 && n+msgpackBinHeader(n)-msgpackBinHeader(0) > room {
		n--
	}
	return n
}

// DeadLetter is the event for a message that is not a valid example, or
// whose event is too large for its output.
type DeadLetter struct {
	Position Position
	// Error says what is wrong and where, e.g. "features.age: value is
	// not a number or string (got array)".
	Error string
	// Payload is the message as it arrived, or its first bytes if
	// Truncated.
	Payload []byte
	// Truncated says Payload was cut to fit the output's size limit;
	// PayloadBytes is then the message's full size. Both are written only
	// when Truncated is set.
	Truncated    bool
	PayloadBytes int
}

// AppendJSON appends the event:
//
//	{"event_id":"kafka:t/0/42","error":"label: ...","payload":"<base64>",
//	 "position":{"source":"kafka:t/0","offset":42}}
//
// payload is the original bytes in standard base64, since they need not
// be text. A truncated payload adds "payload_bytes" (the message's size)
// and "truncated":true after "payload".
func (d *DeadLetter) AppendJSON(dst []byte) []byte {
	dst = append(dst, `{"event_id":"`...)
	dst = appendJSONStringBody(dst, d.Position.Source)
	dst = append(dst, '/')
	dst = strconv.AppendInt(dst, d.Position.Offset, 10)
	dst = append(dst, `","error":`...)
	dst = appendJSONString(dst, d.Error)
	dst = append(dst, `,"payload":"`...)
	dst = base64.StdEncoding.AppendEncode(dst, d.Payload)
	dst = append(dst, '"')
	if d.Truncated {
		dst = append(dst, `,"payload_bytes":`...)
		dst = strconv.AppendInt(dst, int64(d.PayloadBytes), 10)
		dst = append(dst, `,"truncated":true`...)
	}
	dst = append(dst, `,"position":`...)
	dst = appendJSONPosition(dst, d.Position)
	return append(dst, '}')
}

// AppendMsgpack appends the event as a msgpack map with the keys of
// AppendJSON; payload is a bin value of the original bytes.
func (d *DeadLetter) AppendMsgpack(dst []byte) []byte {
	n := 4
	if d.Truncated {
		n += 2
	}
	dst = msgpackMap(dst, n)
	dst = msgpackStr(dst, "event_id")
	dst = msgpackEventID(dst, d.Position)
	dst = msgpackStr(dst, "error")
	dst = msgpackStr(dst, d.Error)
	dst = msgpackStr(dst, "payload")
	dst = msgpackBin(dst, d.Payload)
	if d.Truncated {
		dst = msgpackStr(dst, "payload_bytes")
		dst = msgpackInt(dst, int64(d.PayloadBytes))
		dst = msgpackStr(dst, "truncated")
		dst = msgpackBool(dst, true)
	}
	dst = msgpackStr(dst, "position")
	return msgpackPosition(dst, d.Position)
}

func appendJSONPosition(dst []byte, p Position) []byte {
	dst = append(dst, `{"source":`...)
	dst = appendJSONString(dst, p.Source)
	dst = append(dst, `,"offset":`...)
	dst = strconv.AppendInt(dst, p.Offset, 10)
	return append(dst, '}')
}

// AppendMsgpack appends the prediction event as a msgpack map with the
// keys and values of AppendJSON.
func (p *Prediction) AppendMsgpack(dst []byte, l Labels) []byte {
	n := 5
	if p.Meta.HasID {
		n++
	}
	if p.Outcome.Labeled {
		n += 2
	}
	return p.appendMsgpackFields(msgpackMap(dst, n), l)
}

func (p *Prediction) appendMsgpackFields(dst []byte, l Labels) []byte {
	dst = msgpackStr(dst, "event_id")
	dst = msgpackEventID(dst, p.Position)
	if p.Meta.HasID {
		dst = msgpackStr(dst, "id")
		dst = msgpackStr(dst, p.Meta.ID)
	}
	dst = msgpackStr(dst, "predicted")
	dst = l.appendMsgpack(dst, p.Outcome.Prediction.Label)
	dst = msgpackStr(dst, "score")
	if l.multiclass {
		dst = msgpackMap(dst, len(p.Outcome.Scores))
		for c, s := range p.Outcome.Scores {
			dst = msgpackStr(dst, l.classes[c])
			dst = msgpackFloat(dst, s)
		}
	} else {
		dst = msgpackFloat(dst, p.Outcome.Score)
	}
	if p.Outcome.Labeled {
		dst = msgpackStr(dst, "label")
		dst = l.appendMsgpack(dst, p.Label)
		dst = msgpackStr(dst, "correct")
		dst = msgpackBool(dst, p.Outcome.Correct)
	}
	dst = msgpackStr(dst, "model")
	dst = msgpackMap(dst, 2)
	dst = msgpackStr(dst, "name")
	dst = msgpackStr(dst, p.Model)
	dst = msgpackStr(dst, "version")
	dst = msgpackUint(dst, p.Version)
	dst = msgpackStr(dst, "position")
	return msgpackPosition(dst, p.Position)
}

// AppendMsgpack appends the misclassification event as a msgpack map with
// the keys and values of AppendJSON.
func (m *Misclassification) AppendMsgpack(dst []byte, l Labels) []byte {
	n := 8
	if m.Meta.HasID {
		n++
	}
	if m.Outcome.Labeled {
		n += 2
	}
	dst = m.appendMsgpackFields(msgpackMap(dst, n), l)
	dst = msgpackStr(dst, "margin")
	dst = msgpackFloat(dst, m.Outcome.Margin)
	dst = msgpackStr(dst, "mistakes")
	dst = msgpackUint(dst, m.Mistakes)
	dst = msgpackStr(dst, "examples")
	return msgpackUint(dst, m.Examples)
}

func (l Labels) appendMsgpack(dst []byte, label int) []byte {
	switch {
	case l.multiclass:
		return msgpackStr(dst, l.classes[label])
	case len(l.classes) == 2 && label > 0:
		return msgpackStr(dst, l.classes[1])
	case len(l.classes) == 2:
		return msgpackStr(dst, l.classes[0])
	}
	return msgpackInt(dst, int64(label))
}

func msgpackEventID(dst []byte, p Position) []byte {
	var num [20]byte
	digits := strconv.AppendInt(num[:0], p.Offset, 10)
	dst = msgpackStrHeader(dst, len(p.Source)+1+len(digits))
	dst = append(dst, p.Source...)
	dst = append(dst, '/')
	return append(dst, digits...)
}

func msgpackPosition(dst []byte, p Position) []byte {
	dst = msgpackMap(dst, 2)
	dst = msgpackStr(dst, "source")
	dst = msgpackStr(dst, p.Source)
	dst = msgpackStr(dst, "offset")
	return msgpackInt(dst, p.Offset)
}

func msgpackMap(dst []byte, n int) []byte {
	switch {
	case n < 16:
		return append(dst, 0x80|byte(n))
	case n < 1<<16:
		return append(dst, 0xde, byte(n>>8), byte(n))
	}
	return append(dst, 0xdf, byte(n>>24), byte(n>>16), byte(n>>8), byte(n))
}

func msgpackStrHeader(dst []byte, n int) []byte {
	switch {
	case n < 32:
		return append(dst, 0xa0|byte(n))
	case n < 1<<8:
		return append(dst, 0xd9, byte(n))
	case n < 1<<16:
		return append(dst, 0xda, byte(n>>8), byte(n))
	}
	return append(dst, 0xdb, byte(n>>24), byte(n>>16), byte(n>>8), byte(n))
}

func msgpackStr[T string | []byte](dst []byte, s T) []byte {
	return append(msgpackStrHeader(dst, len(s)), s...)
}

func msgpackBin(dst []byte, b []byte) []byte {
	n := len(b)
	switch msgpackBinHeader(n) {
	case 2:
		dst = append(dst, 0xc4, byte(n))
	case 3:
		dst = append(dst, 0xc5, byte(n>>8), byte(n))
	default:
		dst = append(dst, 0xc6, byte(n>>24), byte(n>>16), byte(n>>8), byte(n))
	}
	return append(dst, b...)
}

// msgpackBinHeader is the size of the header of a bin value of n bytes.
func msgpackBinHeader(n int) int {
	switch {
	case n < 1<<8:
		return 2
	case n < 1<<16:
		return 3
	}
	return 5
}

func msgpackInt(dst []byte, v int64) []byte {
	if v >= -32 && v <= 127 {
		return append(dst, byte(int8(v)))
	}
	return append(dst, 0xd3, byte(v>>56), byte(v>>48), byte(v>>40), byte(v>>32), byte(v>>24), byte(v>>16), byte(v>>8), byte(v))
}

func msgpackUint(dst []byte, v uint64) []byte {
	if v <= 127 {
		return append(dst, byte(v))
	}
	return append(dst, 0xcf, byte(v>>56), byte(v>>48), byte(v>>40), byte(v>>32), byte(v>>24), byte(v>>16), byte(v>>8), byte(v))
}

func msgpackFloat(dst []byte, f float64) []byte {
	b := math.Float64bits(f)
	return append(dst, 0xcb, byte(b>>56), byte(b>>48), byte(b>>40), byte(b>>32), byte(b>>24), byte(b>>16), byte(b>>8), byte(b))
}

func msgpackBool(dst []byte, v bool) []byte {
	if v {
		return append(dst, 0xc3)
	}
	return append(dst, 0xc2)
}
