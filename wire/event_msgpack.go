package wire

import (
	"math"
	"strconv"

	"github.com/hyperplane-ml/hyperplane/learner"
)

// AppendMsgpack appends the prediction event as a msgpack map with the
// keys and values of AppendJSON.
func (p *Prediction) AppendMsgpack(dst []byte, labels learner.Labels) []byte {
	n := 3 + msgpackPredictionKeys(labels)
	if p.Meta.HasID {
		n++
	}
	if p.Outcome.Labeled {
		n += 2
	}
	return p.appendMsgpackFields(msgpackMap(dst, n), labels)
}

func (p *Prediction) appendMsgpackFields(dst []byte, labels learner.Labels) []byte {
	dst = msgpackStr(dst, "event_id")
	dst = msgpackEventID(dst, p.Position)
	if p.Meta.HasID {
		dst = msgpackStr(dst, "id")
		dst = msgpackStr(dst, p.Meta.ID)
	}
	dst = msgpackPrediction(dst, labels, &p.Outcome.Prediction)
	if p.Outcome.Labeled {
		dst = msgpackStr(dst, "label")
		dst = msgpackLabel(dst, labels, p.Label)
		dst = msgpackStr(dst, "correct")
		dst = msgpackBool(dst, p.Outcome.Correct)
	}
	dst = msgpackModel(dst, p.Model, p.Version)
	dst = msgpackStr(dst, "position")
	return msgpackPosition(dst, p.Position)
}

// msgpackModel appends the "model" key of events and replies and its map:
// the model's name and version.
func msgpackModel(dst []byte, name string, version uint64) []byte {
	dst = msgpackStr(dst, "model")
	dst = msgpackMap(dst, 2)
	dst = msgpackStr(dst, "name")
	dst = msgpackStr(dst, name)
	dst = msgpackStr(dst, "version")
	return msgpackUint(dst, version)
}

// msgpackPredictionKeys is how many keys msgpackPrediction appends.
func msgpackPredictionKeys(labels learner.Labels) int {
	if labels.Multiclass() {
		return 4
	}
	return 3
}

// msgpackPrediction appends the "predicted", "score" and "probability"
// keys and values of pred, and "probabilities" for a multiclass model, as
// events and replies have them.
func msgpackPrediction(dst []byte, labels learner.Labels, pred *learner.Prediction) []byte {
	dst = msgpackStr(dst, "predicted")
	dst = msgpackLabel(dst, labels, pred.Label)
	dst = msgpackStr(dst, "score")
	if !labels.Multiclass() {
		dst = msgpackFloat(dst, pred.Score)
		dst = msgpackStr(dst, "probability")
		return msgpackFloat(dst, pred.Probability)
	}
	dst = msgpackClassMap(dst, labels, pred.Scores)
	dst = msgpackStr(dst, "probability")
	dst = msgpackFloat(dst, pred.Probability)
	dst = msgpackStr(dst, "probabilities")
	return msgpackClassMap(dst, labels, pred.Probabilities)
}

// msgpackClassMap appends a map of class name to v[class].
func msgpackClassMap(dst []byte, labels learner.Labels, v []float64) []byte {
	dst = msgpackMap(dst, len(v))
	for c, f := range v {
		dst = msgpackLabel(dst, labels, c)
		dst = msgpackFloat(dst, f)
	}
	return dst
}

// AppendMsgpack appends the misclassification event as a msgpack map with
// the keys and values of AppendJSON.
func (m *Misclassification) AppendMsgpack(dst []byte, labels learner.Labels) []byte {
	n := 6 + msgpackPredictionKeys(labels)
	if m.Meta.HasID {
		n++
	}
	if m.Outcome.Labeled {
		n += 2
	}
	if m.Joined {
		n++
	}
	dst = m.appendMsgpackFields(msgpackMap(dst, n), labels)
	dst = msgpackStr(dst, "margin")
	dst = msgpackFloat(dst, m.Outcome.Margin)
	dst = msgpackStr(dst, "mistakes")
	dst = msgpackUint(dst, m.Mistakes)
	dst = msgpackStr(dst, "examples")
	dst = msgpackUint(dst, m.Examples)
	if m.Joined {
		dst = msgpackStr(dst, "label_delay_ms")
		dst = msgpackInt(dst, m.LabelDelay)
	}
	return dst
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

// msgpackLabel appends label as its class name, or as an integer for a
// binary model without names.
func msgpackLabel(dst []byte, labels learner.Labels, label int) []byte {
	if name, ok := labels.Class(label); ok {
		return msgpackStr(dst, name)
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
