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

func (e Encoding) appendDeadLetter(dst []byte, pos Position, err error, payload []byte) []byte {
	d := DeadLetter{Position: pos, Error: err.Error(), Payload: payload}
	if e == EncodingMsgpack {
		return d.AppendMsgpack(dst)
	}
	return d.AppendJSON(dst)
}

// DeadLetter is the event for a message that is not a valid example.
type DeadLetter struct {
	Position Position
	// Error says what is wrong and where, e.g. "features.age: value is
	// not a number or string (got array)".
	Error string
	// Payload is the message as it arrived.
	Payload []byte
}

// AppendJSON appends the event:
//
//	{"event_id":"kafka:t/0/42","error":"label: ...","payload":"<base64>",
//	 "position":{"source":"kafka:t/0","offset":42}}
//
// payload is the original bytes in standard base64, since they need not
// be text.
func (d *DeadLetter) AppendJSON(dst []byte) []byte {
	dst = append(dst, `{"event_id":"`...)
	dst = appendJSONStringBody(dst, d.Position.Source)
	dst = append(dst, '/')
	dst = strconv.AppendInt(dst, d.Position.Offset, 10)
	dst = append(dst, `","error":`...)
	dst = appendJSONString(dst, d.Error)
	dst = append(dst, `,"payload":"`...)
	dst = base64.StdEncoding.AppendEncode(dst, d.Payload)
	dst = append(dst, `","position":`...)
	dst = appendJSONPosition(dst, d.Position)
	return append(dst, '}')
}

// AppendMsgpack appends the event as a msgpack map with the keys of
// AppendJSON; payload is a bin value of the original bytes.
func (d *DeadLetter) AppendMsgpack(dst []byte) []byte {
	dst = msgpackMap(dst, 4)
	dst = msgpackStr(dst, "event_id")
	dst = msgpackEventID(dst, d.Position)
	dst = msgpackStr(dst, "error")
	dst = msgpackStr(dst, d.Error)
	dst = msgpackStr(dst, "payload")
	dst = msgpackBin(dst, d.Payload)
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
	switch {
	case n < 1<<8:
		dst = append(dst, 0xc4, byte(n))
	case n < 1<<16:
		dst = append(dst, 0xc5, byte(n>>8), byte(n))
	default:
		dst = append(dst, 0xc6, byte(n>>24), byte(n>>16), byte(n>>8), byte(n))
	}
	return append(dst, b...)
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
