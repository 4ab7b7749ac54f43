package wire

import (
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"strconv"

	"github.com/hyperplane-ml/hyperplane/internal/msgpackscan"
	"github.com/hyperplane-ml/hyperplane/learner"
)

// DecodeMsgpack decodes the msgpack map at the front of data into x, which
// it resets first and whose slices it reuses, and returns the number of
// bytes the map takes; bytes after it are left alone, so data may be a
// buffer of several maps. The keys are those of DecodeJSON, with the same
// rules. Keys and string values may be msgpack str or bin; numbers may be
// any msgpack integer or float.
//
// On error, x is reset and the error is a *DecodeError. If data ends
// inside the map the error wraps io.ErrUnexpectedEOF and n is 0: more data
// may complete it. A map that is well formed but not a valid example (a
// NaN value, an unknown class, too many features, an unknown key's value
// nested too deep...) still reports its length as n, so a reader of a
// stream can skip it and go on; n is 0 when
// the map itself is malformed. A map longer than MaxBytes is an error with
// Field "payload". Meta holds the id if it was read before the problem.
func (d *Decoder) DecodeMsgpack(data []byte, x *learner.Example) (n int, meta Meta, err error) {
	return d.decodeMsgpackFront(data, x, false)
}

// decodeMsgpackFront is DecodeMsgpack; with deferHash, x.Index holds the
// offsets of the features' names in data instead of their weight
// indices, for hashNames to finish.
func (d *Decoder) decodeMsgpackFront(data []byte, x *learner.Example, deferHash bool) (n int, meta Meta, err error) {
	d.start(x)
	b := data
	if len(b) > d.maxBytes {
		b = b[:d.maxBytes]
	}
	n, meta, derr := d.decodeMsgpack(b, x, deferHash)
	if derr == nil {
		return n, meta, nil
	}
	x.Reset()
	// The error path walks the map again to tell its length, so that the
	// caller can skip it, and to apply the size limit first, as
	// DecodeJSON does.
	end, st := msgpackscan.Skip(data, 0)
	switch {
	case st == msgpackscan.OK && end > d.maxBytes:
		return end, meta, d.sizeError(end)
	case st != msgpackscan.OK && len(b) < len(data) && derr.err == io.ErrUnexpectedEOF:
		return 0, meta, decodeErr("payload", "the map runs past the limit of %d bytes", d.maxBytes).because(ReasonTooLarge)
	case st != msgpackscan.OK:
		end = 0
	}
	return end, meta, derr
}

func (d *Decoder) decodeMsgpack(b []byte, x *learner.Example, deferHash bool) (int, Meta, *DecodeError) {
	var meta Meta
	if len(b) == 0 {
		return 0, meta, truncated("example", 0)
	}
	n, i, st := msgpackscan.MapLen(b, 0)
	if st != msgpackscan.OK {
		return 0, meta, mpError("example", b, 0, st, "a map")
	}
	seen := 0
	for range n {
		key, j, st := msgpackscan.String(b, i)
		if st != msgpackscan.OK {
			return 0, meta, mpError("example", b, i, st, "a string key")
		}
		i = j
		bit := keyBit(key)
		if seen&bit != 0 {
			return 0, meta, duplicateKey(key)
		}
		seen |= bit
		var err *DecodeError
		switch bit {
		case keyID:
			i, err = d.mpID(b, i, &meta)
		case keyLabel:
			i, err = d.mpLabel(b, i, x)
		case keyFeatures:
			if deferHash {
				i, err = d.mpFeatureNames(b, i, x)
			} else {
				i, err = d.mpFeatures(b, i, x)
			}
		case keyX:
			i, err = d.mpDense(b, i, x)
		case keyWeight:
			i, err = d.mpWeight(b, i, x)
		default:
			d.noteUnknownKey(key)
			var st msgpackscan.Status
			if i, st = d.skipMsgpack.Skip(b, i); st != msgpackscan.OK {
				err = mpError(quoteField(key), b, i, st, "a value")
			}
		}
		if err != nil {
			return 0, meta, err
		}
	}
	if err := d.checkUnknownKeys(); err != nil {
		return 0, meta, err
	}
	return i, meta, nil
}

// mpID reads the id at b[i]: a string, an integer or nil. An integer is
// formatted into the Decoder's id buffer.
func (d *Decoder) mpID(b []byte, i int, meta *Meta) (int, *DecodeError) {
	if i >= len(b) {
		return i, truncated("id", i)
	}
	c := b[i]
	if c == 0xc0 {
		return i + 1, nil
	}
	if msgpackscan.IsString(c) {
		s, j, st := msgpackscan.String(b, i)
		if st != msgpackscan.OK {
			return j, mpError("id", b, i, st, "a string")
		}
		if len(s) > MaxIDBytes {
			return j, idTooLarge(len(s))
		}
		meta.ID, meta.HasID = s, true
		return j, nil
	}
	if !msgpackscan.IsInteger(c) {
		return i, decodeErr("id", "value is not a string or an integer (got %s)", msgpackscan.Kind(c)).because(ReasonType)
	}
	_, j, st := msgpackscan.Number(b, i)
	if st != msgpackscan.OK {
		return j, mpError("id", b, i, st, "an integer")
	}
	d.id = msgpackscan.AppendInteger(d.id[:0], b[i:j])
	meta.ID, meta.HasID = d.id, true
	return j, nil
}

// mpLabel reads the label at b[i] into x.
func (d *Decoder) mpLabel(b []byte, i int, x *learner.Example) (int, *DecodeError) {
	if i >= len(b) {
		return i, truncated("label", i)
	}
	switch c := b[i]; {
	case c == 0xc0:
		return i + 1, nil
	case c == 0xc2 || c == 0xc3:
		return i + 1, d.labelBool(x, c == 0xc3)
	case msgpackscan.IsString(c):
		s, j, st := msgpackscan.String(b, i)
		if st != msgpackscan.OK {
			return j, mpError("label", b, i, st, "a string")
		}
		return j, d.labelName(x, s)
	}
	v, j, st := msgpackscan.Number(b, i)
	if st == msgpackscan.WrongType {
		return i, d.badLabelType(msgpackscan.Kind(b[i]))
	}
	if st != msgpackscan.OK {
		return j, mpError("label", b, i, st, "a number")
	}
	if !d.labelNumber(x, v) {
		return j, d.badLabelNumber(v, msgpackscan.NumberText(b[i:j]))
	}
	return j, nil
}

// mpWeight reads the weight at b[i] into x.
func (d *Decoder) mpWeight(b []byte, i int, x *learner.Example) (int, *DecodeError) {
	if i < len(b) && b[i] == 0xc0 {
		return i + 1, nil
	}
	v, j, st := msgpackscan.Number(b, i)
	if st != msgpackscan.OK {
		return j, mpError("weight", b, i, st, "a number")
	}
	if !setWeight(x, v) {
		return j, badWeight(msgpackscan.NumberText(b[i:j]))
	}
	return j, nil
}

// mpFeatures reads the map of sparse features at b[i] into x. It is the
// hot loop of msgpack decoding: the map's length is checked against
// MaxFeatures once, it appends to local copies of x's slices (the compiler
// cannot keep x's fields in registers), and it reads fixstr names and
// float64 values, what typical producers send, without a call.
func (d *Decoder) mpFeatures(b []byte, i int, x *learner.Example) (int, *DecodeError) {
	if i < len(b) && b[i] == 0xc0 {
		return i + 1, nil
	}
	n, i, st := msgpackscan.MapLen(b, i)
	if st != msgpackscan.OK {
		return i, mpError("features", b, i, st, "a map")
	}
	if n > d.maxFeatures-len(x.Index)-len(x.Dense) {
		return i, d.tooManyFeatures("features")
	}
	index, value := x.Index, x.Value
	for range n {
		var name []byte
		if i < len(b) && b[i]&0xe0 == 0xa0 && int(b[i]&0x1f) < len(b)-i {
			end := i + 1 + int(b[i]&0x1f)
			name, i = b[i+1:end], end
		} else {
			s, j, st := msgpackscan.String(b, i)
			if st != msgpackscan.OK {
				return j, mpError("features", b, i, st, "a string feature name")
			}
			name, i = s, j
		}
		if len(b)-i >= 9 && b[i] == 0xcb {
			u := binary.BigEndian.Uint64(b[i+1:])
			// With the sign shifted out, the bits compare as |v| does,
			// and those of infinities and NaNs are above all others.
			if u<<1 > maxValueBits<<1 {
				return i, outOfRange(featureField(name), msgpackscan.NumberText(b[i:i+9]))
			}
			index = append(index, learner.Index(d.hasher, name))
			value = append(value, math.Float64frombits(u))
			i += 9
			continue
		}
		if i >= len(b) {
			return i, truncated(featureField(name), i)
		}
		if msgpackscan.IsString(b[i]) {
			s, j, st := msgpackscan.String(b, i)
			if st != msgpackscan.OK {
				return j, mpError(featureField(name), b, i, st, "a string")
			}
			index = append(index, learner.CategoricalIndex(d.hasher, name, s))
			value = append(value, 1)
			i = j
			continue
		}
		v, j, st := msgpackscan.Number(b, i)
		if st != msgpackscan.OK {
			return j, mpError(featureField(name), b, i, st, "a number or string")
		}
		if !inRange(v) {
			return j, outOfRange(featureField(name), msgpackscan.NumberText(b[i:j]))
		}
		index = append(index, learner.Index(d.hasher, name))
		value = append(value, v)
		i = j
	}
	x.Index, x.Value = index, value
	return i, nil
}

// mpFeatureNames is mpFeatures with the hashing of the names left to
// hashNames: it appends to x.Index the offset in b of each feature's
// name. A loop of its own, so that mpFeatures, the decoding of every
// message from a broker, keeps its registers.
func (d *Decoder) mpFeatureNames(b []byte, i int, x *learner.Example) (int, *DecodeError) {
	if i < len(b) && b[i] == 0xc0 {
		return i + 1, nil
	}
	n, i, st := msgpackscan.MapLen(b, i)
	if st != msgpackscan.OK {
		return i, mpError("features", b, i, st, "a map")
	}
	if n > d.maxFeatures-len(x.Index)-len(x.Dense) {
		return i, d.tooManyFeatures("features")
	}
	index, value := x.Index, x.Value
	for range n {
		var name []byte
		at := i
		if i < len(b) && b[i]&0xe0 == 0xa0 && int(b[i]&0x1f) < len(b)-i {
			end := i + 1 + int(b[i]&0x1f)
			name, i = b[i+1:end], end
		} else {
			s, j, st := msgpackscan.String(b, i)
			if st != msgpackscan.OK {
				return j, mpError("features", b, i, st, "a string feature name")
			}
			name, i = s, j
		}
		if len(b)-i >= 9 && b[i] == 0xcb {
			u := binary.BigEndian.Uint64(b[i+1:])
			// With the sign shifted out, the bits compare as |v| does,
			// and those of infinities and NaNs are above all others.
			if u<<1 > maxValueBits<<1 {
				return i, outOfRange(featureField(name), msgpackscan.NumberText(b[i:i+9]))
			}
			index = append(index, uint32(at))
			value = append(value, math.Float64frombits(u))
			i += 9
			continue
		}
		if i >= len(b) {
			return i, truncated(featureField(name), i)
		}
		if msgpackscan.IsString(b[i]) {
			_, j, st := msgpackscan.String(b, i)
			if st != msgpackscan.OK {
				return j, mpError(featureField(name), b, i, st, "a string")
			}
			index = append(index, uint32(at))
			value = append(value, 1)
			i = j
			continue
		}
		v, j, st := msgpackscan.Number(b, i)
		if st != msgpackscan.OK {
			return j, mpError(featureField(name), b, i, st, "a number or string")
		}
		if !inRange(v) {
			return j, outOfRange(featureField(name), msgpackscan.NumberText(b[i:j]))
		}
		index = append(index, uint32(at))
		value = append(value, v)
		i = j
	}
	x.Index, x.Value = index, value
	return i, nil
}

// hashNames finishes an example that decodeMsgpackFront decoded from the
// map b with deferHash set: each of x.Index is then the offset in b of a
// feature's name, which is followed by its value, and becomes the weight
// index of that feature. b must be the bytes decoded, unchanged.
func (d *Decoder) hashNames(b []byte, x *learner.Example) {
	index := x.Index
	for k, at := range index {
		i := int(at)
		var name []byte
		if c := b[i]; c&0xe0 == 0xa0 { // fixstr, as mpFeatures' fast path
			end := i + 1 + int(c&0x1f)
			name, i = b[i+1:end], end
		} else {
			name, i, _ = msgpackscan.String(b, i)
		}
		if i < len(b) && msgpackscan.IsString(b[i]) {
			s, _, _ := msgpackscan.String(b, i)
			index[k] = learner.CategoricalIndex(d.hasher, name, s)
			continue
		}
		index[k] = learner.Index(d.hasher, name)
	}
}

// mpDense reads the array of dense features at b[i] into x.
func (d *Decoder) mpDense(b []byte, i int, x *learner.Example) (int, *DecodeError) {
	if i < len(b) && b[i] == 0xc0 {
		return i + 1, nil
	}
	n, i, st := msgpackscan.ArrayLen(b, i)
	if st != msgpackscan.OK {
		return i, mpError("x", b, i, st, "an array")
	}
	if n > d.dim {
		return i, d.tooManyValues()
	}
	if n > d.maxFeatures-len(x.Index)-len(x.Dense) {
		return i, d.tooManyFeatures("x")
	}
	for k := range n {
		v, j, st := msgpackscan.Number(b, i)
		if st != msgpackscan.OK {
			return j, mpError(denseField(k), b, i, st, "a number")
		}
		if !inRange(v) {
			return j, outOfRange(denseField(k), msgpackscan.NumberText(b[i:j]))
		}
		if err := d.addDense(x, v); err != nil {
			return j, err
		}
		i = j
	}
	return i, nil
}

// SplitMsgpack is a bufio.SplitFunc whose tokens are whole top-level msgpack
// values, so that a bufio.Scanner reads a stream of msgpack maps (or of any
// msgpack values) one value at a time. It walks every msgpack type,
// nested to any depth, without decoding it. A value longer than the
// Scanner's buffer stops the Scanner with bufio.ErrTooLong.
//
// A byte that is no msgpack type (0xc1) is an error, as is a stream that
// ends inside a value (wrapping io.ErrUnexpectedEOF); both are
// *DecodeErrors with Field "example" and stop the Scanner, as no value
// boundary can be found after them.
func SplitMsgpack(data []byte, atEOF bool) (advance int, token []byte, err error) {
	if len(data) == 0 {
		return 0, nil, nil
	}
	n, st := msgpackscan.Skip(data, 0)
	switch st {
	case msgpackscan.OK:
		return n, data[:n], nil
	case msgpackscan.Truncated:
		if atEOF {
			return 0, nil, &DecodeError{
				Field:   "example",
				Problem: fmt.Sprintf("the stream ends inside a msgpack value (%d bytes)", len(data)),
				err:     io.ErrUnexpectedEOF,
			}
		}
		return 0, nil, nil
	default:
		return 0, nil, decodeErr("example", "invalid msgpack type byte 0x%02x at byte %d", data[n], n)
	}
}

// mpError is the error for status st of the value at b[i] in field; want is
// the type the field takes.
func mpError(field string, b []byte, i int, st msgpackscan.Status, want string) *DecodeError {
	if st == msgpackscan.WrongType && i < len(b) && b[i] == 0xc1 {
		st = msgpackscan.Invalid
	}
	switch st {
	case msgpackscan.Truncated:
		return truncated(field, min(i, len(b)))
	case msgpackscan.Invalid:
		return decodeErr(field, "invalid msgpack type byte 0x%02x at byte %d", b[i], i)
	case msgpackscan.TooDeep:
		// The words of jsonscan.Skipper: both formats refuse a value
		// nested too deep alike.
		return decodeErr(field, "values nest deeper than %d at byte %d", MaxDepth, i)
	}
	if i >= len(b) {
		return truncated(field, i)
	}
	err := decodeErr(field, "value is not %s (got %s)", want, msgpackscan.Kind(b[i]))
	if field == "example" {
		// Not a map, or a key that is not a string: not an example at
		// all, as a JSON document that is not an object.
		return err
	}
	return err.because(ReasonType)
}

// truncated is the error for msgpack data that ends at byte i, inside
// field.
func truncated(field string, i int) *DecodeError {
	return &DecodeError{
		Field:   field,
		Problem: "unexpected end of data at byte " + strconv.Itoa(i),
		err:     io.ErrUnexpectedEOF,
	}
}
