package wire

import (
	"encoding/base64"
	"math"
	"strconv"
	"unicode/utf8"

	"github.com/hyperplane-ml/hyperplane/learner"
)

// AppendJSON appends the prediction event as one JSON object:
//
//	{"event_id":"kafka:t/0/42","id":"a1","predicted":1,"score":0.25,
//	 "probability":0.56,"label":-1,"correct":false,
//	 "model":{"name":"m","version":7},
//	 "position":{"source":"kafka:t/0","offset":42}}
//
// Labels are class names, or the numbers 1 and -1 for a binary model
// without names (see learner.Labels.Class). probability is the calibrated
// P(label = +1) of a binary model. For a multiclass model score is an
// object of class name to score, probability the predicted class's, and
// probabilities follows it: an object of class name to probability. id is
// left out when the example had none, label and correct when it was
// unlabeled.
func (p *Prediction) AppendJSON(dst []byte, labels learner.Labels) []byte {
	dst = p.appendFields(dst, labels)
	return append(dst, '}')
}

func (p *Prediction) appendFields(dst []byte, labels learner.Labels) []byte {
	dst = appendJSONEventHead(dst, p.Position, p.Meta)
	dst = append(dst, ',')
	dst = appendJSONPrediction(dst, labels, &p.Outcome.Prediction)
	if p.Outcome.Labeled {
		dst = append(dst, `,"label":`...)
		dst = appendJSONLabel(dst, labels, p.Label)
		dst = append(dst, `,"correct":`...)
		dst = strconv.AppendBool(dst, p.Outcome.Correct)
	}
	dst = appendJSONModel(dst, p.Model, p.Version)
	dst = append(dst, `,"position":`...)
	return appendJSONPosition(dst, p.Position)
}

// appendJSONEventHead opens an event's object with its event_id (the
// message's position) and, when the example had one, its id.
func appendJSONEventHead(dst []byte, pos Position, meta Meta) []byte {
	dst = append(dst, `{"event_id":"`...)
	dst = appendJSONStringBody(dst, pos.Source)
	dst = append(dst, '/')
	dst = strconv.AppendInt(dst, pos.Offset, 10)
	dst = append(dst, '"')
	if meta.HasID {
		dst = append(dst, `,"id":`...)
		dst = appendJSONString(dst, meta.ID)
	}
	return dst
}

// appendJSONModel appends the "model" key of events and replies: the
// model's name and version.
func appendJSONModel(dst []byte, name string, version uint64) []byte {
	dst = append(dst, `,"model":{"name":`...)
	dst = appendJSONString(dst, name)
	dst = append(dst, `,"version":`...)
	dst = strconv.AppendUint(dst, version, 10)
	return append(dst, '}')
}

// appendJSONPrediction appends the "predicted", "score" and
// "probability" fields of pred, and "probabilities" for a multiclass
// model, as events and replies have them.
func appendJSONPrediction(dst []byte, labels learner.Labels, pred *learner.Prediction) []byte {
	dst = append(dst, `"predicted":`...)
	dst = appendJSONLabel(dst, labels, pred.Label)
	dst = append(dst, `,"score":`...)
	if !labels.Multiclass() {
		dst = appendJSONFloat(dst, pred.Score)
		dst = append(dst, `,"probability":`...)
		return appendJSONFloat(dst, pred.Probability)
	}
	dst = appendJSONClassMap(dst, labels, pred.Scores)
	dst = append(dst, `,"probability":`...)
	dst = appendJSONFloat(dst, pred.Probability)
	dst = append(dst, `,"probabilities":`...)
	return appendJSONClassMap(dst, labels, pred.Probabilities)
}

// appendJSONClassMap appends an object of class name to v[class].
func appendJSONClassMap(dst []byte, labels learner.Labels, v []float64) []byte {
	dst = append(dst, '{')
	for c, f := range v {
		if c > 0 {
			dst = append(dst, ',')
		}
		dst = appendJSONLabel(dst, labels, c)
		dst = append(dst, ':')
		dst = appendJSONFloat(dst, f)
	}
	return append(dst, '}')
}

// AppendJSON appends the event: a prediction event with "margin" (y·f(x),
// or the label's score minus the best other score), "mistakes" and
// "examples" added.
func (m *Misclassification) AppendJSON(dst []byte, labels learner.Labels) []byte {
	dst = m.appendFields(dst, labels)
	dst = append(dst, `,"margin":`...)
	dst = appendJSONFloat(dst, m.Outcome.Margin)
	dst = append(dst, `,"mistakes":`...)
	dst = strconv.AppendUint(dst, m.Mistakes, 10)
	dst = append(dst, `,"examples":`...)
	dst = strconv.AppendUint(dst, m.Examples, 10)
	if m.Joined {
		dst = append(dst, `,"label_delay_ms":`...)
		dst = strconv.AppendInt(dst, m.LabelDelay, 10)
	}
	return append(dst, '}')
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

// appendJSONLabel appends label as its class name, or as a number for a
// binary model without names.
func appendJSONLabel(dst []byte, labels learner.Labels, label int) []byte {
	if name, ok := labels.Class(label); ok {
		return appendJSONString(dst, name)
	}
	return strconv.AppendInt(dst, int64(label), 10)
}

func appendJSONPosition(dst []byte, p Position) []byte {
	dst = append(dst, `{"source":`...)
	dst = appendJSONString(dst, p.Source)
	dst = append(dst, `,"offset":`...)
	dst = strconv.AppendInt(dst, p.Offset, 10)
	return append(dst, '}')
}

// appendJSONFloat writes f in the shortest form that reads back exactly.
// Scores are finite: inputs with NaN or infinities never reach a model.
func appendJSONFloat(dst []byte, f float64) []byte {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return append(dst, "null"...)
	}
	return strconv.AppendFloat(dst, f, 'g', -1, 64)
}

func appendJSONString[T string | []byte](dst []byte, s T) []byte {
	dst = append(dst, '"')
	dst = appendJSONStringBody(dst, s)
	return append(dst, '"')
}

const hexDigits = "0123456789abcdef"

// appendJSONStringBody escapes s for the inside of a JSON string;
// invalid UTF-8 becomes U+FFFD.
func appendJSONStringBody[T string | []byte](dst []byte, s T) []byte {
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			switch {
			case c == '"' || c == '\\':
				dst = append(dst, '\\', c)
			case c >= 0x20:
				dst = append(dst, c)
			case c == '\n':
				dst = append(dst, '\\', 'n')
			case c == '\r':
				dst = append(dst, '\\', 'r')
			case c == '\t':
				dst = append(dst, '\\', 't')
			default:
				dst = append(dst, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(string(s[i:min(i+utf8.UTFMax, len(s))]))
		if r == utf8.RuneError && size == 1 {
			dst = append(dst, "\ufffd"...)
		} else {
			dst = append(dst, s[i:i+size]...)
		}
		i += size
	}
	return dst
}
