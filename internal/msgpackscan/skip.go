package msgpackscan

import "encoding/binary"

// Skip walks the msgpack value at b[i], of any type and depth, and returns
// the index after it. On Invalid the index is that of the bad byte; on
// Truncated it means nothing (it may lie beyond b). It
// counts the values still to walk instead of recursing, so depth costs no
// stack; as every value takes at least a byte, a count above the bytes
// left means the data is truncated. Finding where a value ends (splitting
// a stream of values, or stepping over a map that is not a valid example)
// needs no more, whatever the depth.
func Skip(b []byte, i int) (int, Status) {
	end, st, _ := walk(b, i, 0, nil)
	return end, st
}

// Skipper is Skip with a bound on nesting, for values whose depth a
// caller wants to bound like that of JSON values. It keeps a scratch
// buffer, so that it does not allocate once it has grown. It is not safe
// for concurrent use.
type Skipper struct {
	// MaxDepth bounds the arrays and maps open at once: a value that opens
	// one more is TooDeep, with the index of the container that does. Zero
	// or less means no bound, as Skip.
	MaxDepth int

	open []int // values left outside each container open
}

// Skip walks the value at b[i] as the package's Skip does, within
// MaxDepth.
func (s *Skipper) Skip(b []byte, i int) (int, Status) {
	end, st, open := walk(b, i, s.MaxDepth, s.open[:0])
	s.open = open[:0]
	return end, st
}

// walk is Skip, with a bound on depth if maxDepth > 0. It then keeps in
// outer, for each container open, the count of values still to walk
// outside it, and returns outer for reuse.
func walk(b []byte, i, maxDepth int, outer []int) (int, Status, []int) {
	limited := maxDepth > 0
	for pending := 1; pending > 0; pending-- {
		if pending > len(b)-i {
			return i, Truncated, outer
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
				if outer, ok = enter(outer, maxDepth, pending, 2*int(c&0x0f)); !ok {
					return i, TooDeep, outer
				}
			}
			pending += 2 * int(c&0x0f)
			i++
			continue
		case c <= 0x9f: // fixarray
			if limited {
				var ok bool
				if outer, ok = enter(outer, maxDepth, pending, int(c&0x0f)); !ok {
					return i, TooDeep, outer
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
			return i, Invalid, outer
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
			return i, Truncated, outer
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
			return i, Truncated, outer
		}
		if limited && c >= 0xdc && c <= 0xdf { // array16/32, map16/32
			var ok bool
			if outer, ok = enter(outer, maxDepth, pending, int(items)); !ok {
				return i, TooDeep, outer
			}
		}
		i += header + int(length)
		pending += int(items)
	}
	if i > len(b) {
		return len(b), Truncated, outer
	}
	return i, OK, outer
}

// head reads, for Stream, the header of the value at b[i], whose type
// byte is none of the fixed ones (fixint, fixmap, fixarray, fixstr): how
// many bytes the type and length take, how many bytes of data follow
// them, and how many values a container holds. It is Truncated if b ends
// inside the header, and Invalid at 0xc1. walk reads the same headers
// inline: it is how the decoder steps over the values of unknown keys,
// and a call here made it a quarter slower (BenchmarkSkip).
func head(b []byte, i int) (header int, length, items uint64, st Status) {
	c := b[i]
	switch c {
	case 0xc0, 0xc2, 0xc3: // nil, false, true
		header = 1
	case 0xc1:
		return 0, 0, 0, Invalid
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
		return 0, 0, 0, Truncated
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
	return header, length, items, OK
}

// Stream walks one msgpack value given in pieces, for a reader that
// steps over a value without holding it: a value too large to keep. Its
// zero value is at the value's start.
type Stream struct {
	started bool
	pending uint64 // values still to begin
	skip    uint64 // bytes of data of the value begun still to pass
}

// Feed walks b, the next bytes of the value, and returns how many of
// them belong to it and whether it ends there. A header that b cuts is
// not walked: n stops at its first byte, and the caller gives it again
// with the bytes that follow. The Status is Invalid at a byte that is no
// msgpack type, n its index.
func (s *Stream) Feed(b []byte) (n int, done bool, st Status) {
	if !s.started {
		s.started, s.pending = true, 1
	}
	i := 0
	for {
		if s.skip > 0 {
			k := min(s.skip, uint64(len(b)-i))
			i += int(k)
			s.skip -= k
			if s.skip > 0 {
				return i, false, OK
			}
		}
		if s.pending == 0 {
			return i, true, OK
		}
		if i == len(b) {
			return i, false, OK
		}
		var (
			header        = 1
			length, items uint64
		)
		switch c := b[i]; {
		case c <= 0x7f || c >= 0xe0: // fixint
		case c <= 0x8f: // fixmap
			items = 2 * uint64(c&0x0f)
		case c <= 0x9f: // fixarray
			items = uint64(c & 0x0f)
		case c <= 0xbf: // fixstr
			length = uint64(c & 0x1f)
		default:
			var st Status
			if header, length, items, st = head(b, i); st == Truncated {
				return i, false, OK
			} else if st != OK {
				return i, false, st
			}
		}
		i += header
		s.pending += items - 1
		s.skip = length
	}
}

// enter records, for walk, a container of items values met with pending
// values left to walk, itself included; ok is false if maxDepth
// containers are open already.
func enter(outer []int, maxDepth, pending, items int) (_ []int, ok bool) {
	if len(outer) == maxDepth {
		return outer, false
	}
	if items > 0 {
		outer = append(outer, pending-1)
	}
	return outer, true
}
