package consumer

import (
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"strconv"

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
	d.start(x)
	b := data
	if len(b) > d.maxBytes {
		b = b[:d.maxBytes]
	}
	n, meta, derr := d.decodeMsgpack(b, x)
	if derr == nil {
		return n, meta, nil
	}
	x.Reset()
	// The error path walks the map again to tell its length, so that the
	// caller can skip it, and to apply the size limit first, as
	// DecodeJSON does.
	end, st := skipMsgpack(data, 0)
	switch {
	case st == mpOK && end > d.maxBytes:
		return end, meta, d.sizeError(end)
	case st != mpOK && len(b) < len(data) && derr.err == io.ErrUnexpectedEOF:
		return 0, meta, decodeErr("payload", "the map runs past the limit of %d bytes", d.maxBytes)
	case st != mpOK:
		end = 0
	}
	return end, meta, derr
}

func (d *Decoder) decodeMsgpack(b []byte, x *learner.Example) (int, Meta, *DecodeError) {
	var meta Meta
	if len(b) == 0 {
		return 0, meta, truncated("example", 0)
	}
	n, i, st := mapLen(b, 0)
	if st != mpOK {
		return 0, meta, mpError("example", b, 0, st, "a map")
	}
	seen := 0
	for range n {
		key, j, st := mpString(b, i)
		if st != mpOK {
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
			i, err = d.mpFeatures(b, i, x)
		case keyX:
			i, err = d.mpDense(b, i, x)
		case keyWeight:
			i, err = d.mpWeight(b, i, x)
		default:
			d.noteUnknownKey(key)
			var st mpStatus
			if i, st = d.skipMsgpack(b, i); st != mpOK {
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
	if isString(c) {
		s, j, st := mpString(b, i)
		if st != mpOK {
			return j, mpError("id", b, i, st, "a string")
		}
		meta.ID, meta.HasID = s, true
		return j, nil
	}
	if !isInteger(c) {
		return i, decodeErr("id", "value is not a string or an integer (got %s)", mpKind(c))
	}
	_, j, st := mpNumber(b, i)
	if st != mpOK {
		return j, mpError("id", b, i, st, "an integer")
	}
	d.id = appendInteger(d.id[:0], b[i:j])
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
	case isString(c):
		s, j, st := mpString(b, i)
		if st != mpOK {
			return j, mpError("label", b, i, st, "a string")
		}
		return j, d.labelString(x, s)
	}
	v, j, st := mpNumber(b, i)
	if st == mpWrongType {
		return i, d.badLabelType(mpKind(b[i]))
	}
	if st != mpOK {
		return j, mpError("label", b, i, st, "a number")
	}
	if !d.labelNumber(x, v) {
		return j, d.badLabelNumber(v, numberText(b[i:j]))
	}
	return j, nil
}

// mpWeight reads the weight at b[i] into x.
func (d *Decoder) mpWeight(b []byte, i int, x *learner.Example) (int, *DecodeError) {
	if i < len(b) && b[i] == 0xc0 {
		return i + 1, nil
	}
	v, j, st := mpNumber(b, i)
	if st != mpOK {
		return j, mpError("weight", b, i, st, "a number")
	}
	if !setWeight(x, v) {
		return j, badWeight(numberText(b[i:j]))
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
	n, i, st := mapLen(b, i)
	if st != mpOK {
		return i, mpError("features", b, i, st, "a map")
	}
	if n > d.maxFeatures-len(x.Index)-len(x.Dense) {
		return i, d.tooManyFeatures()
	}
	index, value := x.Index, x.Value
	for range n {
		var name []byte
		if i < len(b) && b[i]&0xe0 == 0xa0 && int(b[i]&0x1f) < len(b)-i {
			end := i + 1 + int(b[i]&0x1f)
			name, i = b[i+1:end], end
		} else {
			s, j, st := mpString(b, i)
			if st != mpOK {
				return j, mpError("features", b, i, st, "a string feature name")
			}
			name, i = s, j
		}
		if len(b)-i >= 9 && b[i] == 0xcb {
			u := binary.BigEndian.Uint64(b[i+1:])
			// With the sign shifted out, the bits compare as |v| does,
			// and those of infinities and NaNs are above all others.
			if u<<1 > maxValueBits<<1 {
				return i, outOfRange(featureField(name), numberText(b[i:i+9]))
			}
			index = append(index, learner.Index(d.hasher, name))
			value = append(value, math.Float64frombits(u))
			i += 9
			continue
		}
		if i >= len(b) {
			return i, truncated(featureField(name), i)
		}
		if isString(b[i]) {
			s, j, st := mpString(b, i)
			if st != mpOK {
				return j, mpError(featureField(name), b, i, st, "a string")
			}
			index = append(index, learner.CategoricalIndex(d.hasher, name, s))
			value = append(value, 1)
			i = j
			continue
		}
		v, j, st := mpNumber(b, i)
		if st != mpOK {
			return j, mpError(featureField(name), b, i, st, "a number or string")
		}
		if !inRange(v) {
			return j, outOfRange(featureField(name), numberText(b[i:j]))
		}
		index = append(index, learner.Index(d.hasher, name))
		value = append(value, v)
		i = j
	}
	x.Index, x.Value = index, value
	return i, nil
}

// mpDense reads the array of dense features at b[i] into x.
func (d *Decoder) mpDense(b []byte, i int, x *learner.Example) (int, *DecodeError) {
	if i < len(b) && b[i] == 0xc0 {
		return i + 1, nil
	}
	n, i, st := arrayLen(b, i)
	if st != mpOK {
		return i, mpError("x", b, i, st, "an array")
	}
	if n > d.dim {
		return i, d.tooManyValues()
	}
	if n > d.maxFeatures-len(x.Index)-len(x.Dense) {
		return i, d.tooManyFeatures()
	}
	for k := range n {
		v, j, st := mpNumber(b, i)
		if st != mpOK {
			return j, mpError(denseField(k), b, i, st, "a number")
		}
		if !inRange(v) {
			return j, outOfRange(denseField(k), numberText(b[i:j]))
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
	n, st := skipMsgpack(data, 0)
	switch st {
	case mpOK:
		return n, data[:n], nil
	case mpTruncated:
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

// isMsgpackMap reports whether c starts a msgpack map.
func isMsgpackMap(c byte) bool { return c&0xf0 == 0x80 || c == 0xde || c == 0xdf }

// isString reports whether c starts a msgpack str or bin.
func isString(c byte) bool {
	return c&0xe0 == 0xa0 || (c >= 0xd9 && c <= 0xdb) || (c >= 0xc4 && c <= 0xc6)
}

// isInteger reports whether c starts a msgpack integer.
func isInteger(c byte) bool { return c <= 0x7f || c >= 0xe0 || (c >= 0xcc && c <= 0xd3) }

// mpStatus is the outcome of reading a msgpack value.
type mpStatus uint8

const (
	mpOK        mpStatus = iota
	mpTruncated          // the data ends inside the value
	mpWrongType          // the value has another type than the one asked
	mpInvalid            // 0xc1, which is no msgpack type
	mpTooDeep            // more than maxDepth containers open at once
)

// mpError is the error for status st of the value at b[i] in field; want is
// the type the field takes.
func mpError(field string, b []byte, i int, st mpStatus, want string) *DecodeError {
	if st == mpWrongType && i < len(b) && b[i] == 0xc1 {
		st = mpInvalid
	}
	switch st {
	case mpTruncated:
		return truncated(field, min(i, len(b)))
	case mpInvalid:
		return decodeErr(field, "invalid msgpack type byte 0x%02x at byte %d", b[i], i)
	case mpTooDeep:
		return tooDeep(i).at(field)
	}
	if i >= len(b) {
		return truncated(field, i)
	}
	return decodeErr(field, "value is not %s (got %s)", want, mpKind(b[i]))
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

// mpKind names the msgpack type that starts with c.
func mpKind(c byte) string {
	switch {
	case isInteger(c):
		return "integer"
	case c == 0xca || c == 0xcb:
		return "float"
	case c&0xe0 == 0xa0 || (c >= 0xd9 && c <= 0xdb):
		return "string"
	case c >= 0xc4 && c <= 0xc6:
		return "binary"
	case c&0xf0 == 0x90 || c == 0xdc || c == 0xdd:
		return "array"
	case isMsgpackMap(c):
		return "map"
	case c == 0xc0:
		return "nil"
	case c == 0xc2 || c == 0xc3:
		return "boolean"
	case c == 0xc1:
		return "invalid type byte 0xc1"
	}
	return "extension"
}

// need reports whether b has k bytes from i on.
func need(b []byte, i, k int) bool { return len(b)-i >= k }

// mapLen reads the header of the map at b[i] and returns its number of
// entries and the index after the header.
func mapLen(b []byte, i int) (int, int, mpStatus) {
	if i >= len(b) {
		return 0, i, mpTruncated
	}
	switch c := b[i]; {
	case c&0xf0 == 0x80:
		return int(c & 0x0f), i + 1, mpOK
	case c == 0xde:
		if !need(b, i, 3) {
			return 0, i, mpTruncated
		}
		return int(binary.BigEndian.Uint16(b[i+1:])), i + 3, mpOK
	case c == 0xdf:
		if !need(b, i, 5) {
			return 0, i, mpTruncated
		}
		n := binary.BigEndian.Uint32(b[i+1:])
		if uint64(n) > uint64(len(b)) { // each entry takes at least two bytes
			return 0, i, mpTruncated
		}
		return int(n), i + 5, mpOK
	}
	return 0, i, mpWrongType
}

// arrayLen reads the header of the array at b[i] and returns its length and
// the index after the header.
func arrayLen(b []byte, i int) (int, int, mpStatus) {
	if i >= len(b) {
		return 0, i, mpTruncated
	}
	switch c := b[i]; {
	case c&0xf0 == 0x90:
		return int(c & 0x0f), i + 1, mpOK
	case c == 0xdc:
		if !need(b, i, 3) {
			return 0, i, mpTruncated
		}
		return int(binary.BigEndian.Uint16(b[i+1:])), i + 3, mpOK
	case c == 0xdd:
		if !need(b, i, 5) {
			return 0, i, mpTruncated
		}
		n := binary.BigEndian.Uint32(b[i+1:])
		if uint64(n) > uint64(len(b)) { // each element takes at least a byte
			return 0, i, mpTruncated
		}
		return int(n), i + 5, mpOK
	}
	return 0, i, mpWrongType
}

// mpString reads the str or bin at b[i] and returns its bytes, which alias
// b, and the index after it.
func mpString(b []byte, i int) ([]byte, int, mpStatus) {
	if i >= len(b) {
		return nil, i, mpTruncated
	}
	var n uint64
	h := 1 // header length
	switch c := b[i]; {
	case c&0xe0 == 0xa0:
		n = uint64(c & 0x1f)
	case c == 0xd9 || c == 0xc4:
		if !need(b, i, 2) {
			return nil, i, mpTruncated
		}
		n, h = uint64(b[i+1]), 2
	case c == 0xda || c == 0xc5:
		if !need(b, i, 3) {
			return nil, i, mpTruncated
		}
		n, h = uint64(binary.BigEndian.Uint16(b[i+1:])), 3
	case c == 0xdb || c == 0xc6:
		if !need(b, i, 5) {
			return nil, i, mpTruncated
		}
		n, h = uint64(binary.BigEndian.Uint32(b[i+1:])), 5
	case c == 0xc1:
		return nil, i, mpInvalid
	default:
		return nil, i, mpWrongType
	}
	if n > uint64(len(b)-i-h) {
		return nil, i, mpTruncated
	}
	end := i + h + int(n)
	return b[i+h : end], end, mpOK
}

// mpNumber reads the integer or float at b[i] and returns it as a float64
// (rounded to nearest for integers beyond 2^53) and the index after it.
func mpNumber(b []byte, i int) (float64, int, mpStatus) {
	if i >= len(b) {
		return 0, i, mpTruncated
	}
	c := b[i]
	if c <= 0x7f {
		return float64(c), i + 1, mpOK
	}
	if c >= 0xe0 {
		return float64(int8(c)), i + 1, mpOK
	}
	var size int
	switch c {
	case 0xcc, 0xd0:
		size = 1
	case 0xcd, 0xd1:
		size = 2
	case 0xca, 0xce, 0xd2:
		size = 4
	case 0xcb, 0xcf, 0xd3:
		size = 8
	case 0xc1:
		return 0, i, mpInvalid
	default:
		return 0, i, mpWrongType
	}
	if !need(b, i, 1+size) {
		return 0, i, mpTruncated
	}
	p := b[i+1:]
	var v float64
	switch c {
	case 0xcb:
		v = math.Float64frombits(binary.BigEndian.Uint64(p))
	case 0xca:
		v = float64(math.Float32frombits(binary.BigEndian.Uint32(p)))
	case 0xcc:
		v = float64(p[0])
	case 0xcd:
		v = float64(binary.BigEndian.Uint16(p))
	case 0xce:
		v = float64(binary.BigEndian.Uint32(p))
	case 0xcf:
		v = float64(binary.BigEndian.Uint64(p))
	case 0xd0:
		v = float64(int8(p[0]))
	case 0xd1:
		v = float64(int16(binary.BigEndian.Uint16(p)))
	case 0xd2:
		v = float64(int32(binary.BigEndian.Uint32(p)))
	case 0xd3:
		v = float64(int64(binary.BigEndian.Uint64(p)))
	}
	return v, i + 1 + size, mpOK
}

// appendInteger appends the decimal text of the msgpack integer b, which
// mpNumber has read.
func appendInteger(dst, b []byte) []byte {
	c := b[0]
	switch {
	case c <= 0x7f:
		return strconv.AppendUint(dst, uint64(c), 10)
	case c >= 0xe0:
		return strconv.AppendInt(dst, int64(int8(c)), 10)
	}
	p := b[1:]
	switch c {
	case 0xcc:
		return strconv.AppendUint(dst, uint64(p[0]), 10)
	case 0xcd:
		return strconv.AppendUint(dst, uint64(binary.BigEndian.Uint16(p)), 10)
	case 0xce:
		return strconv.AppendUint(dst, uint64(binary.BigEndian.Uint32(p)), 10)
	case 0xcf:
		return strconv.AppendUint(dst, binary.BigEndian.Uint64(p), 10)
	case 0xd0:
		return strconv.AppendInt(dst, int64(int8(p[0])), 10)
	case 0xd1:
		return strconv.AppendInt(dst, int64(int16(binary.BigEndian.Uint16(p))), 10)
	case 0xd2:
		return strconv.AppendInt(dst, int64(int32(binary.BigEndian.Uint32(p))), 10)
	default: // 0xd3
		return strconv.AppendInt(dst, int64(binary.BigEndian.Uint64(p)), 10)
	}
}

// numberText is the msgpack number b, which mpNumber has read, as text for
// a message.
func numberText(b []byte) string {
	switch b[0] {
	case 0xca:
		return strconv.FormatFloat(float64(math.Float32frombits(binary.BigEndian.Uint32(b[1:]))), 'g', -1, 32)
	case 0xcb:
		return strconv.FormatFloat(math.Float64frombits(binary.BigEndian.Uint64(b[1:])), 'g', -1, 64)
	}
	return string(appendInteger(nil, b))
}

// skipMsgpack walks the msgpack value at b[i], of any type and depth, and
// returns the index after it. On mpInvalid the index is that of the bad
// byte. It counts the values still to walk instead of recursing, so depth
// costs no stack; as every value takes at least a byte, a count above the
// bytes left means the data is truncated. Finding where a value ends
// (SplitMsgpack, and the length of a map that is not a valid example)
// needs no more, whatever the depth.
func skipMsgpack(b []byte, i int) (int, mpStatus) {
	end, st, _ := walkMsgpack(b, i, false, nil)
	return end, st
}

// skipMsgpack is the package's skipMsgpack with the depth limit of
// skipJSON, for the values of unknown keys: a container opened with
// maxDepth containers open is mpTooDeep, its index returned.
func (d *Decoder) skipMsgpack(b []byte, i int) (int, mpStatus) {
	end, st, open := walkMsgpack(b, i, true, d.open[:0])
	d.open = open[:0]
	return end, st
}

// walkMsgpack is skipMsgpack, with the depth limit if limited. It then
// keeps in outer, for each container open, the count of values still to
// walk outside it, and returns outer for reuse.
func walkMsgpack(b []byte, i int, limited bool, outer []int) (int, mpStatus, []int) {
	for pending := 1; pending > 0; pending-- {
		if pending > len(b)-i {
			return i, mpTruncated, outer
		}
		for len(outer) > 0 && outer[len(outer)-1] == pending {
			outer = outer[:len(outer)-1] // its values are walked: closed
		}
		c := b[i]
		switch {
		case c <= 0x7f || c >= 0xe0: // fixint
			i++
			continue
		case c <= 0x8f: // fixmap
			if limited {
				var ok bool
				if outer, ok = enter(outer, pending, 2*int(c&0x0f)); !ok {
					return i, mpTooDeep, outer
				}
			}
			pending += 2 * int(c&0x0f)
			i++
			continue
		case c <= 0x9f: // fixarray
			if limited {
				var ok bool
				if outer, ok = enter(outer, pending, int(c&0x0f)); !ok {
					return i, mpTooDeep, outer
				}
			}
			pending += int(c & 0x0f)
			i++
			continue
		case c <= 0xbf: // fixstr
			i += 1 + int(c&0x1f)
			continue
		}
		var (
			header int    // bytes of the type and length
			length uint64 // bytes of data after the header
			items  uint64 // values inside a container
		)
		switch c {
		case 0xc0, 0xc2, 0xc3: // nil, false, true
			header = 1
		case 0xc1:
			return i, mpInvalid, outer
		case 0xcc, 0xd0: // 8-bit integers
			header, length = 1, 1
		case 0xcd, 0xd1:
			header, length = 1, 2
		case 0xca, 0xce, 0xd2:
			header, length = 1, 4
		case 0xcb, 0xcf, 0xd3:
			header, length = 1, 8
		case 0xd4, 0xd5, 0xd6, 0xd7, 0xd8: // fixext: type byte and 1 to 16 bytes
			header, length = 2, 1<<(c-0xd4)
		case 0xc4, 0xd9: // bin8, str8
			header = 2
		case 0xc5, 0xda, 0xdc, 0xde: // bin16, str16, array16, map16
			header = 3
		case 0xc6, 0xdb, 0xdd, 0xdf: // bin32, str32, array32, map32
			header = 5
		case 0xc7: // ext8: length and type
			header = 3
		case 0xc8:
			header = 4
		case 0xc9:
			header = 6
		}
		if len(b)-i < header {
			return i, mpTruncated, outer
		}
		switch c {
		case 0xc4, 0xd9, 0xc7:
			length = uint64(b[i+1])
		case 0xc5, 0xda, 0xc8:
			length = uint64(binary.BigEndian.Uint16(b[i+1:]))
		case 0xc6, 0xdb, 0xc9:
			length = uint64(binary.BigEndian.Uint32(b[i+1:]))
		case 0xdc:
			items = uint64(binary.BigEndian.Uint16(b[i+1:]))
		case 0xdd:
			items = uint64(binary.BigEndian.Uint32(b[i+1:]))
		case 0xde:
			items = 2 * uint64(binary.BigEndian.Uint16(b[i+1:]))
		case 0xdf:
			items = 2 * uint64(binary.BigEndian.Uint32(b[i+1:]))
		}
		left := uint64(len(b) - i - header)
		if length > left || items > left {
			return i, mpTruncated, outer
		}
		if limited && c >= 0xdc && c <= 0xdf { // array16/32, map16/32
			var ok bool
			if outer, ok = enter(outer, pending, int(items)); !ok {
				return i, mpTooDeep, outer
			}
		}
		i += header + int(length)
		pending += int(items)
	}
	if i > len(b) {
		return len(b), mpTruncated, outer
	}
	return i, mpOK, outer
}

// enter records, for walkMsgpack, a container of items values met with
// pending values left to walk, itself included; ok is false if maxDepth
// containers are open already.
func enter(outer []int, pending, items int) (_ []int, ok bool) {
	if len(outer) == maxDepth {
		return outer, false
	}
	if items > 0 {
		outer = append(outer, pending-1)
	}
	return outer, true
}
