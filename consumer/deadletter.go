package consumer

import (
	"errors"

	"github.com/hyperplane-ml/hyperplane/internal/jsonscan"
	"github.com/hyperplane-ml/hyperplane/internal/msgpackscan"
	"github.com/hyperplane-ml/hyperplane/wire"
)

// deadReason is why a message became a dead letter, in a few classes: the
// values of the reason label of hyperplane_dead_letters_total, so that
// the label's cardinality stays bounded whatever the input says.
type deadReason uint8

// The reasons: those of a *wire.DecodeError (see decodeReason) and the
// worker's own.
const (
	// reasonMalformed: not a well-formed example (bad syntax, truncated,
	// a duplicate key, values nested too deep, bytes after the example,
	// a document that is no object or map).
	reasonMalformed deadReason = iota
	// reasonWrongFormat: the message is in the other format than the
	// configured one (JSON read as msgpack or the reverse).
	reasonWrongFormat
	// reasonType: a field's value of the wrong type.
	reasonType
	// reasonOutOfRange: a feature value NaN, infinite or beyond
	// ±learner.MaxValue, or a weight that is not a positive number up to
	// it.
	reasonOutOfRange
	// reasonTooManyFeatures: more features than DecoderOptions.MaxFeatures,
	// or more dense values than the model's dimension.
	reasonTooManyFeatures
	// reasonUnknownClass: a label that is no class of the model.
	reasonUnknownClass
	// reasonTooLarge: a payload over DecoderOptions.MaxBytes.
	reasonTooLarge
	// reasonOutputTooLarge: an example the model learned whose event is
	// over its output's size limit (see limitedSink).
	reasonOutputTooLarge

	numReasons
)

// String is the reason's label value.
func (r deadReason) String() string {
	switch r {
	case reasonMalformed:
		return "malformed"
	case reasonWrongFormat:
		return "wrong_format"
	case reasonType:
		return "type"
	case reasonOutOfRange:
		return "out_of_range"
	case reasonTooManyFeatures:
		return "too_many_features"
	case reasonUnknownClass:
		return "unknown_class"
	case reasonTooLarge:
		return "too_large"
	case reasonOutputTooLarge:
		return "output_too_large"
	}
	return "unknown"
}

// hint is the likely cause of a run of dead letters of the reason, naming
// the setting to look at; empty when there is nothing to add to the
// errors themselves.
func (r deadReason) hint() string {
	switch r {
	case reasonTooLarge:
		return "examples are larger than source.max_bytes"
	case reasonTooManyFeatures:
		return "examples have more features than source.max_features, or more values in x than the model's dimension"
	case reasonUnknownClass:
		return "labels are not classes of the model (model.learner.classes)"
	case reasonOutOfRange:
		return "feature values or weights are NaN, infinite or too large"
	}
	return ""
}

// reasonOf classes err, the error of decoding value in format. A message
// refused by the decoder of one format that the first byte shows to be in
// the other is reasonWrongFormat: the likely cause is then source.format,
// not the producer.
func reasonOf(format wire.Format, value []byte, err error) deadReason {
	r := reasonMalformed
	var de *wire.DecodeError
	if errors.As(err, &de) {
		r = decodeReason(de.Reason)
	}
	if r == reasonMalformed || r == reasonType {
		if looks := sniff(value); looks != "" && (format == wire.FormatJSON || format == wire.FormatMsgpack) && looks != format {
			return reasonWrongFormat
		}
	}
	return r
}

// decodeReason is the dead-letter reason of a decoder's class of problem.
func decodeReason(r wire.Reason) deadReason {
	switch r {
	case wire.ReasonType:
		return reasonType
	case wire.ReasonOutOfRange:
		return reasonOutOfRange
	case wire.ReasonTooManyFeatures:
		return reasonTooManyFeatures
	case wire.ReasonUnknownClass:
		return reasonUnknownClass
	case wire.ReasonTooLarge:
		return reasonTooLarge
	}
	return reasonMalformed
}

// sniff tells the format value looks like from its first byte, as
// Decoder.Decode does: FormatJSON for '{' after JSON white space,
// FormatMsgpack for a msgpack map header, else "".
func sniff(value []byte) wire.Format {
	i := jsonscan.SkipSpace(value, 0)
	switch {
	case i == len(value):
		return ""
	case value[i] == '{':
		return wire.FormatJSON
	case msgpackscan.IsMap(value[i]):
		return wire.FormatMsgpack
	}
	return ""
}

// Thresholds of deadStreak: how many messages in a row must fail to decode
// for the same reason before the worker says so.
const (
	// deadStreakWarn is the run that warns at any time.
	deadStreakWarn = 100
	// deadStreakFirst is the run that warns when no message has decoded
	// since the worker started: a misconfigured worker is told soon,
	// even on a slow stream.
	deadStreakFirst = 10
)

// deadStreak follows the messages of a source that fail to decode, so
// that a persistent cause is logged once, not once per message: a run of
// failures of the same reason warns once it is long enough, and a reason
// warns again only after a message decoded. Only the goroutine that
// decodes uses it.
type deadStreak struct {
	// failed counts the messages that failed since the last that decoded;
	// the last run of them, run long, all failed for reason.
	failed int
	run    int
	reason deadReason
	// decoded says a message decoded since the worker started.
	decoded bool
	// warned has bit r set once reason r was warned about, since the last
	// message that decoded.
	warned uint16
}

// fail records a message that failed for r and reports whether to warn
// now.
func (s *deadStreak) fail(r deadReason) bool {
	s.failed++
	if s.run > 0 && s.reason == r {
		s.run++
	} else {
		s.reason, s.run = r, 1
	}
	if s.warned&(1<<r) != 0 {
		return false
	}
	if s.run >= deadStreakWarn || (!s.decoded && s.run >= deadStreakFirst) {
		s.warned |= 1 << r
		return true
	}
	return false
}

// ok records a message that decoded and reports whether a warning was
// given since the last one, and how many failed in between.
func (s *deadStreak) ok() (warned bool, failed int) {
	warned, failed = s.warned != 0, s.failed
	*s = deadStreak{decoded: true}
	return warned, failed
}
