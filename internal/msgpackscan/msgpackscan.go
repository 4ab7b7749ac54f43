// Package msgpackscan reads msgpack values from a byte slice without
// allocating: map and array headers, strings (str or bin, aliasing the
// input), numbers of every integer and float type as float64, and whole
// values of any type, stepped over with or without a bound on their
// nesting. It is the scanner under consumer's example decoder, which reads
// the example's keys with it; it knows no schema.
//
// Every function takes the input b and the index i of the first byte to
// read, and returns the index after what it read and a Status. A Status
// is not an error message: the caller, which knows what it was reading,
// words it (see Kind for the name of a type).
package msgpackscan

import (
	"encoding/binary"
	"math"
	"strconv"
)

// Status is the outcome of reading a msgpack value.
type Status uint8

// The outcomes of reading a value.
const (
	OK        Status = iota
	Truncated        // the data ends inside the value
	WrongType        // the value has another type than the one asked
	Invalid          // 0xc1, which is no msgpack type
	TooDeep          // more containers open at once than a Skipper's MaxDepth
)

// IsMap reports whether c starts a msgpack map.
func IsMap(c byte) bool { return c&0xf0 == 0x80 || c == 0xde || c == 0xdf }

// IsString reports whether c starts a msgpack str or bin.
func IsString(c byte) bool {
	return c&0xe0 == 0xa0 || (c >= 0xd9 && c <= 0xdb) || (c >= 0xc4 && c <= 0xc6)
}

// IsInteger reports whether c starts a msgpack integer.
func IsInteger(c byte) bool { return c <= 0x7f || c >= 0xe0 || (c >= 0xcc && c <= 0xd3) }

// Kind names the msgpack type that starts with c: "integer", "float",
// "string", "binary", "array", "map", "nil", "boolean", "extension", or
// "invalid type byte 0xc1".
func Kind(c byte) string {
	switch {
	case IsInteger(c):
		return "integer"
	case c == 0xca || c == 0xcb:
		return "float"
	case c&0xe0 == 0xa0 || (c >= 0xd9 && c <= 0xdb):
		return "string"
	case c >= 0xc4 && c <= 0xc6:
		return "binary"
	case c&0xf0 == 0x90 || c == 0xdc || c == 0xdd:
		return "array"
	case IsMap(c):
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

// MapLen reads the header of the map at b[i] and returns its number of
// entries and the index after the header. A count that the rest of b
// cannot hold is Truncated, so that a caller may allocate for it.
func MapLen(b []byte, i int) (int, int, Status) {
	if i >= len(b) {
		return 0, i, Truncated
	}
	switch c := b[i]; {
	case c&0xf0 == 0x80:
		return int(c & 0x0f), i + 1, OK
	case c == 0xde:
		if !need(b, i, 3) {
			return 0, i, Truncated
		}
		return int(binary.BigEndian.Uint16(b[i+1:])), i + 3, OK
	case c == 0xdf:
		if !need(b, i, 5) {
			return 0, i, Truncated
		}
		n := binary.BigEndian.Uint32(b[i+1:])
		if uint64(n) > uint64(len(b)) { // each entry takes at least two bytes
			return 0, i, Truncated
		}
		return int(n), i + 5, OK
	}
	return 0, i, WrongType
}

// ArrayLen reads the header of the array at b[i] and returns its length
// and the index after the header. A length that the rest of b cannot hold
// is Truncated, as in MapLen.
func ArrayLen(b []byte, i int) (int, int, Status) {
	if i >= len(b) {
		return 0, i, Truncated
	}
	switch c := b[i]; {
	case c&0xf0 == 0x90:
		return int(c & 0x0f), i + 1, OK
	case c == 0xdc:
		if !need(b, i, 3) {
			return 0, i, Truncated
		}
		return int(binary.BigEndian.Uint16(b[i+1:])), i + 3, OK
	case c == 0xdd:
		if !need(b, i, 5) {
			return 0, i, Truncated
		}
		n := binary.BigEndian.Uint32(b[i+1:])
		if uint64(n) > uint64(len(b)) { // each element takes at least a byte
			return 0, i, Truncated
		}
		return int(n), i + 5, OK
	}
	return 0, i, WrongType
}

// String reads the str or bin at b[i] and returns its bytes, which alias
// b, and the index after it.
func String(b []byte, i int) ([]byte, int, Status) {
	if i >= len(b) {
		return nil, i, Truncated
	}
	var n uint64
	h := 1 // header length
	switch c := b[i]; {
	case c&0xe0 == 0xa0:
		n = uint64(c & 0x1f)
	case c == 0xd9 || c == 0xc4:
		if !need(b, i, 2) {
			return nil, i, Truncated
		}
		n, h = uint64(b[i+1]), 2
	case c == 0xda || c == 0xc5:
		if !need(b, i, 3) {
			return nil, i, Truncated
		}
		n, h = uint64(binary.BigEndian.Uint16(b[i+1:])), 3
	case c == 0xdb || c == 0xc6:
		if !need(b, i, 5) {
			return nil, i, Truncated
		}
		n, h = uint64(binary.BigEndian.Uint32(b[i+1:])), 5
	case c == 0xc1:
		return nil, i, Invalid
	default:
		return nil, i, WrongType
	}
	if n > uint64(len(b)-i-h) {
		return nil, i, Truncated
	}
	end := i + h + int(n)
	return b[i+h : end], end, OK
}

// Number reads the integer or float at b[i] and returns it as a float64
// (rounded to nearest for integers beyond 2^53) and the index after it.
func Number(b []byte, i int) (float64, int, Status) {
	if i >= len(b) {
		return 0, i, Truncated
	}
	c := b[i]
	if c <= 0x7f {
		return float64(c), i + 1, OK
	}
	if c >= 0xe0 {
		return float64(int8(c)), i + 1, OK
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
		return 0, i, Invalid
	default:
		return 0, i, WrongType
	}
	if !need(b, i, 1+size) {
		return 0, i, Truncated
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
	return v, i + 1 + size, OK
}

// AppendInteger appends the decimal text of the msgpack integer b, which
// Number has read, exactly (also beyond 2^53).
func AppendInteger(dst, b []byte) []byte {
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

// NumberText is the msgpack number b, which Number has read, as text for
// a message: integers in decimal, floats in the shortest form that reads
// back exactly ("NaN", "+Inf" and "-Inf" for those).
func NumberText(b []byte) string {
	switch b[0] {
	case 0xca:
		return strconv.FormatFloat(float64(math.Float32frombits(binary.BigEndian.Uint32(b[1:]))), 'g', -1, 32)
	case 0xcb:
		return strconv.FormatFloat(math.Float64frombits(binary.BigEndian.Uint64(b[1:])), 'g', -1, 64)
	}
	return string(AppendInteger(nil, b))
}
