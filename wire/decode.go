package wire

import (
	"bytes"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/hyperplane-ml/hyperplane/internal/jsonscan"
	"github.com/hyperplane-ml/hyperplane/internal/msgpackscan"
	"github.com/hyperplane-ml/hyperplane/learner"
)

// Limits a Decoder applies when DecoderOptions leaves them at zero.
const (
	DefaultMaxFeatures = 4096
	DefaultMaxBytes    = 1 << 20
)

// MaxDepth bounds the nesting of the values both decoders skip (those of
// unknown keys): a value with more containers open at once is refused, so
// that a hostile payload cannot make the decoder keep a large stack, and
// both formats accept the same documents.
const MaxDepth = 1000

// MaxIDBytes bounds an id's bytes (as a string, or an integer's digits):
// a longer one is refused as too large. The join of labels that come later
// holds the id of every example waiting for its label, and of every label
// waiting for its example, so that ids of a megabyte within
// source.max_bytes would make its memory unbounded by labels.max_pending.
const MaxIDBytes = 1024

// DecoderOptions are the limits a Decoder enforces on every example. A field
// that is zero or negative takes its default.
type DecoderOptions struct {
	// MaxFeatures bounds the number of features of one example, sparse and
	// dense together (DefaultMaxFeatures).
	MaxFeatures int
	// MaxBytes bounds the encoded size of one example (DefaultMaxBytes).
	MaxBytes int
}

// Decoder turns encoded examples (JSON objects or msgpack maps, see
// DESIGN.md §3) into learner.Examples for one model configuration: it hashes
// feature names with the model's hasher, maps labels to the model's classes
// and enforces the dimension, the bound learner.MaxValue on every feature
// value and weight, and the DecoderOptions limits.
//
// A Decoder keeps scratch buffers between calls, so that decoding does not
// allocate once they have grown to the size of the examples it sees. It is
// not safe for concurrent use; give each goroutine its own.
//
// Every error a Decoder returns for bad input is a *DecodeError.
type Decoder struct {
	hasher      learner.Hasher
	labels      learner.Labels
	dim         int
	maxFeatures int
	maxBytes    int

	// Scratch buffers for unescaped JSON strings and formatted ids. name
	// and value are alive together (a categorical feature), id until the
	// next call.
	name  []byte
	value []byte
	id    []byte
	// The skippers of unknown keys' values, with their own scratch
	// buffers, both bounded by MaxDepth.
	skipJSON    jsonscan.Skipper
	skipMsgpack msgpackscan.Skipper
	// Unknown top-level keys of the current example, for the duplicate
	// check: their bytes end to end in keys, their ends in keyEnds.
	keys    []byte
	keyEnds []int
	order   []int
}

// NewDecoder returns a Decoder for the model cfg describes. cfg must be
// valid (see learner.Config.Validate).
func NewDecoder(cfg learner.Config, opts DecoderOptions) *Decoder {
	d := &Decoder{
		hasher:      learner.NewHasher(cfg.HashBits, cfg.HashSeed),
		labels:      cfg.Labels(),
		dim:         cfg.Dimension(),
		maxFeatures: opts.MaxFeatures,
		maxBytes:    opts.MaxBytes,
		skipJSON:    jsonscan.Skipper{MaxDepth: MaxDepth},
		skipMsgpack: msgpackscan.Skipper{MaxDepth: MaxDepth},
	}
	if d.maxFeatures <= 0 {
		d.maxFeatures = DefaultMaxFeatures
	}
	if d.maxBytes <= 0 {
		d.maxBytes = DefaultMaxBytes
	}
	return d
}

// Meta is what a Decoder keeps of an example besides its features.
type Meta struct {
	// ID is the text of the example's id: the string, or the decimal
	// digits of an integer id. It aliases the decoded data or a scratch
	// buffer of the Decoder, so it is valid only until the next call to
	// the Decoder and while the data is unchanged; copy it to keep it.
	ID []byte
	// HasID reports whether the example had an id (an empty string is
	// an id; null is not).
	HasID bool
}

// DecodeError is an example the Decoder refused: Field is where the problem
// is (a top-level key such as "label", a path such as "features.age" or
// "x[3]", "payload" for the size limit, or "example" when the problem is
// not inside a field), Problem says what is wrong.
type DecodeError struct {
	Field   string
	Problem string
	// Reason is the class of the problem, which a worker counts and warns
	// by; the zero value is ReasonMalformed.
	Reason Reason
	// err is the cause, if any: io.ErrUnexpectedEOF for truncated input.
	err error
}

// Reason is the class of a DecodeError's problem, in a few values, so
// that what counts refused examples by it stays bounded whatever the
// input says.
type Reason uint8

// The reasons. The zero value is ReasonMalformed: a *DecodeError is
// malformed unless its constructor says otherwise.
const (
	// ReasonMalformed: not a well-formed example (bad syntax, truncated,
	// a duplicate key, values nested too deep, bytes after the example,
	// a document that is no object or map).
	ReasonMalformed Reason = iota
	// ReasonType: a field's value of the wrong type.
	ReasonType
	// ReasonOutOfRange: a feature value NaN, infinite or beyond
	// ±learner.MaxValue, or a weight that is not a positive number up to
	// it.
	ReasonOutOfRange
	// ReasonTooManyFeatures: more features than DecoderOptions.MaxFeatures,
	// or more dense values than the model's dimension.
	ReasonTooManyFeatures
	// ReasonUnknownClass: a label that is no class of the model.
	ReasonUnknownClass
	// ReasonTooLarge: a payload over DecoderOptions.MaxBytes.
	ReasonTooLarge
)

// Error is Field + ": " + Problem, e.g.
// "features.age: value is not a number or string (got array)".
func (e *DecodeError) Error() string { return e.Field + ": " + e.Problem }

// Unwrap returns the cause: io.ErrUnexpectedEOF when the input ended inside
// the example, else nil.
func (e *DecodeError) Unwrap() error { return e.err }

// idTooLarge is the refusal of an id of n bytes, over MaxIDBytes.
func idTooLarge(n int) *DecodeError {
	return decodeErr("id", "%d bytes, more than the %d an id may have", n, MaxIDBytes).because(ReasonTooLarge)
}

func decodeErr(field, format string, args ...any) *DecodeError {
	return &DecodeError{Field: field, Problem: fmt.Sprintf(format, args...)}
}

// because sets the reason of e and returns e.
func (e *DecodeError) because(r Reason) *DecodeError {
	e.Reason = r
	return e
}

// Decode decodes data, which must hold exactly one example, JSON or
// msgpack: the format is told by the first byte that is not JSON white
// space ('{' for a JSON object; 0x80-0x8f, 0xde or 0xdf for a msgpack map).
// White space may follow the example; nothing else may. x is reset first
// and its slices are reused.
//
// On error, x is reset and the error is a *DecodeError; Meta holds the id
// if it was read before the problem.
func (d *Decoder) Decode(data []byte, x *learner.Example) (Meta, error) {
	if len(data) > d.maxBytes {
		d.start(x)
		return Meta{}, d.sizeError(len(data))
	}
	i := jsonscan.SkipSpace(data, 0)
	if i == len(data) {
		d.start(x)
		return Meta{}, decodeErr("example", "empty payload")
	}
	switch c := data[i]; {
	case c == '{':
		return d.DecodeJSON(data, x)
	case msgpackscan.IsMap(c):
		n, meta, err := d.DecodeMsgpack(data[i:], x)
		if err != nil {
			return meta, err
		}
		if end := jsonscan.SkipSpace(data, i+n); end != len(data) {
			x.Reset()
			return meta, decodeErr("example", "%d bytes follow the msgpack map (at byte %d)", len(data)-end, end)
		}
		return meta, nil
	default:
		d.start(x)
		return Meta{}, decodeErr("example", "not a JSON object or msgpack map (first byte 0x%02x)", c)
	}
}

// DecodeMessage decodes data, one whole message, as format says: a JSON
// object (FormatJSON), one msgpack map and nothing after it
// (FormatMsgpack), or either (FormatAuto, as Decode). In every format a
// message over the size limit is refused for its size first, whatever its
// bytes hold.
func (d *Decoder) DecodeMessage(data []byte, format Format, x *learner.Example) (Meta, error) {
	switch format {
	case FormatJSON:
		return d.DecodeJSON(data, x)
	case FormatMsgpack:
		return d.decodeWholeMsgpack(data, x)
	}
	return d.Decode(data, x)
}

// The top-level keys, as bits of a set for the duplicate check.
const (
	keyID = 1 << iota
	keyLabel
	keyFeatures
	keyX
	keyWeight
)

// keyBit is the bit of a known top-level key, 0 for an unknown key.
func keyBit(key []byte) int {
	switch string(key) {
	case "id":
		return keyID
	case "label":
		return keyLabel
	case "features":
		return keyFeatures
	case "x":
		return keyX
	case "weight":
		return keyWeight
	}
	return 0
}

// start prepares the Decoder and x for a new example.
func (d *Decoder) start(x *learner.Example) {
	x.Reset()
	d.keys = d.keys[:0]
	d.keyEnds = d.keyEnds[:0]
}

// sizeError is the error for a payload of n bytes over the limit.
func (d *Decoder) sizeError(n int) *DecodeError {
	return decodeErr("payload", "%d bytes exceed the limit of %d", n, d.maxBytes).because(ReasonTooLarge)
}

// tooManyFeatures is the error for an example with more than MaxFeatures,
// found in field: features, or x, whose values count as features too.
func (d *Decoder) tooManyFeatures(field string) *DecodeError {
	if field == "x" {
		return decodeErr(field, "more than %d features, features and x together", d.maxFeatures).because(ReasonTooManyFeatures)
	}
	return decodeErr(field, "more than %d features", d.maxFeatures).because(ReasonTooManyFeatures)
}

// full reports whether x already holds MaxFeatures features.
func (d *Decoder) full(x *learner.Example) bool {
	return len(x.Index)+len(x.Dense) >= d.maxFeatures
}

// tooManyValues is the error for a dense part longer than the dimension.
func (d *Decoder) tooManyValues() *DecodeError {
	return decodeErr("x", "more than %d values (the model's dimension)", d.dim).because(ReasonTooManyFeatures)
}

// addDense appends v to the dense part of x.
func (d *Decoder) addDense(x *learner.Example, v float64) *DecodeError {
	if len(x.Dense) >= d.dim {
		return d.tooManyValues()
	}
	if d.full(x) {
		return d.tooManyFeatures("x")
	}
	x.Dense = append(x.Dense, v)
	return nil
}

// setWeight sets the importance weight of x to v, if v is a positive
// number no larger than learner.MaxValue.
func setWeight(x *learner.Example, v float64) bool {
	if !(v > 0 && v <= learner.MaxValue) {
		return false
	}
	x.Weight = v
	return true
}

// badWeight is the error for a weight that setWeight refused; text is the
// weight as the input wrote it.
func badWeight(text string) *DecodeError {
	return decodeErr("weight", "%s is not a positive number up to %g", text, learner.MaxValue).because(ReasonOutOfRange)
}

// inRange reports whether the feature value v is within ±learner.MaxValue:
// beyond it, the learner's arithmetic could overflow. NaN is not.
func inRange(v float64) bool { return math.Abs(v) <= learner.MaxValue }

// maxValueBits is math.Float64bits(learner.MaxValue), for the msgpack fast
// path, which has the bits of a float64 in hand: the bits of |v|, as an
// unsigned integer, are at most maxValueBits if and only if inRange(v)
// (the bits of infinities and NaNs are above those of every finite number).
const maxValueBits = 0x46293e5939a08cea

// outOfRange is the error for a feature value beyond ±learner.MaxValue,
// NaN or infinite; text is the value as the input wrote it.
func outOfRange(field, text string) *DecodeError {
	return decodeErr(field, "%s is out of range (feature values must be finite and within ±%g)", text, learner.MaxValue).because(ReasonOutOfRange)
}

// noteUnknownKey records an unknown top-level key for the duplicate check.
func (d *Decoder) noteUnknownKey(key []byte) {
	d.keys = append(d.keys, key...)
	d.keyEnds = append(d.keyEnds, len(d.keys))
}

// checkUnknownKeys reports an unknown top-level key that appeared twice.
func (d *Decoder) checkUnknownKeys() *DecodeError {
	n := len(d.keyEnds)
	if n < 2 {
		return nil
	}
	key := func(i int) []byte {
		start := 0
		if i > 0 {
			start = d.keyEnds[i-1]
		}
		return d.keys[start:d.keyEnds[i]]
	}
	if n <= 8 {
		for i := 1; i < n; i++ {
			for j := 0; j < i; j++ {
				if bytes.Equal(key(i), key(j)) {
					return duplicateKey(key(i))
				}
			}
		}
		return nil
	}
	// Many unknown keys: sort their indices by key, then compare
	// neighbours, so a hostile payload cannot make this quadratic.
	order := d.order[:0]
	for i := range n {
		order = append(order, i)
	}
	d.order = order
	slices.SortFunc(order, func(a, b int) int { return bytes.Compare(key(a), key(b)) })
	for i := 1; i < n; i++ {
		if bytes.Equal(key(order[i]), key(order[i-1])) {
			return duplicateKey(key(order[i]))
		}
	}
	return nil
}

func duplicateKey(key []byte) *DecodeError {
	return &DecodeError{Field: quoteField(key), Problem: "duplicate key"}
}

// featureField is the field name of the feature name, for errors.
func featureField(name []byte) string { return "features." + quoteField(name) }

// quoteField shortens a name from the input to a readable field name:
// names longer than 64 bytes are cut, and names with bytes that would not
// read well in a message are quoted.
func quoteField(name []byte) string {
	b, cut := clip(name)
	s := string(b)
	if strings.ContainsFunc(s, func(r rune) bool { return r < ' ' || r == '"' || r == 0x7f || r == 0xfffd }) {
		return strconv.Quote(s) + cut
	}
	return s + cut
}

// numberText renders a number as the input wrote it, b, for a message:
// cut as quoteValue cuts a string, so that a number of a million digits
// gives an error of a few dozen bytes, which a dead letter has room for
// beside the payload.
func numberText(b []byte) string {
	b, cut := clip(b)
	return string(b) + cut
}

// clip is b cut after the 64 bytes of an input's name or value that a
// message repeats, and "..." if it was cut.
func clip(b []byte) ([]byte, string) {
	const max = 64
	if len(b) > max {
		return b[:max], "..."
	}
	return b, ""
}

// quoteValue renders a string value from the input for a message.
func quoteValue(value []byte) string {
	b, cut := clip(value)
	return strconv.Quote(string(b)) + cut
}

// labelNumber sets the label of x from the number v and reports whether v
// is a label of the model; if not, badLabelNumber says why.
func (d *Decoder) labelNumber(x *learner.Example, v float64) bool {
	y, ok := d.labels.ParseNumber(v)
	if ok {
		x.Labeled, x.Label = true, y
	}
	return ok
}

// badLabelNumber is the error for a number v that labelNumber refused;
// text is v as the input wrote it.
func (d *Decoder) badLabelNumber(v float64, text string) *DecodeError {
	return labelError(d.labels.NumberProblem(v, text))
}

// labelBool sets the label of x from a boolean.
func (d *Decoder) labelBool(x *learner.Example, v bool) *DecodeError {
	y, ok := d.labels.ParseBool(v)
	if !ok {
		return labelError(d.labels.BoolProblem(v))
	}
	x.Labeled, x.Label = true, y
	return nil
}

// labelName sets the label of x from a class name.
func (d *Decoder) labelName(x *learner.Example, s []byte) *DecodeError {
	y, ok := d.labels.ParseName(s)
	if !ok {
		return labelError(d.labels.NameProblem(quoteValue(s)))
	}
	x.Labeled, x.Label = true, y
	return nil
}

// badLabelType is the error for a label of the wrong type; got names it.
func (d *Decoder) badLabelType(got string) *DecodeError {
	return labelError(d.labels.TypeProblem(got)).because(ReasonType)
}

// labelError is the error for a label the model does not take. It is
// kept out of line for the reason of jsonError's.
//
//go:noinline
func labelError(problem string) *DecodeError {
	return &DecodeError{Field: "label", Problem: problem, Reason: ReasonUnknownClass}
}
