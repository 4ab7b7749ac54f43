package wire

import "github.com/hyperplane-ml/hyperplane/learner"

// Encoding is how events are written.
type Encoding string

// The event encodings.
const (
	EncodingJSON    Encoding = "json"
	EncodingMsgpack Encoding = "msgpack"
)

// Publish says which predictions a worker publishes.
type Publish string

// The publish modes. Misclassifications are published whenever they have
// a destination, whatever the mode.
const (
	PublishAll       Publish = "all"
	PublishUnlabeled Publish = "unlabeled"
	PublishNone      Publish = "none"
)

// Prediction is the event published for every example.
type Prediction struct {
	Position Position
	Meta     Meta
	Outcome  learner.Outcome // Labeled, Label and Correct only if labeled
	Label    int             // the example's label, if Outcome.Labeled
	Model    string
	Version  uint64 // the model's updates when it predicted
}

// Misclassification is the event published for a labeled example whose
// prediction was wrong: the prediction's fields and the model's running
// counts.
type Misclassification struct {
	Prediction
	Mistakes uint64
	Examples uint64
	// Joined marks the misclassification of a prediction as served, found
	// when its label came later (docs/labels.md): Version is the served
	// model's, and LabelDelay the label's time minus the example's, in
	// milliseconds ("label_delay_ms").
	Joined     bool
	LabelDelay int64
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

// AppendPrediction appends the prediction event p in encoding e.
func (e Encoding) AppendPrediction(dst []byte, p *Prediction, l learner.Labels) []byte {
	if e == EncodingMsgpack {
		return p.AppendMsgpack(dst, l)
	}
	return p.AppendJSON(dst, l)
}

// AppendMisclassification appends the misclassification event m in
// encoding e.
func (e Encoding) AppendMisclassification(dst []byte, m *Misclassification, l learner.Labels) []byte {
	if e == EncodingMsgpack {
		return m.AppendMsgpack(dst, l)
	}
	return m.AppendJSON(dst, l)
}

// AppendDeadLetter appends the dead letter for the message at pos that err
// refused, whose bytes are payload, in at most limit bytes: with the whole
// payload if that fits, and otherwise with the longest prefix of it that
// fits, marked Truncated. It returns dst unchanged and false when not even
// an empty payload fits (a limit below a few hundred bytes, since errors
// are short).
func (e Encoding) AppendDeadLetter(dst []byte, pos Position, err error, payload []byte, limit int) ([]byte, bool) {
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
