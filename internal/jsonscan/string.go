package jsonscan

import (
	"encoding/binary"
	"math/bits"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"
)

// ShortString is the fast path of String for a string whose content and
// closing quote are in the 8 bytes after the opening quote at b[i] and
// that has no escapes: it returns the content, which aliases b, and the
// index after the closing quote, or ok false to say that String must read
// it.
func ShortString(b []byte, i int) (s []byte, end int, ok bool) {
	if len(b)-i < 9 {
		return nil, i, false
	}
	flags := specialBytes(binary.LittleEndian.Uint64(b[i+1:]))
	if flags == 0 {
		return nil, i, false
	}
	j := i + 1 + bits.TrailingZeros64(flags)>>3
	if b[j] != '"' {
		return nil, i, false
	}
	return b[i+1 : j], j + 1, true
}

// specialBytes flags, in the high bit of each byte of w, the bytes that
// are a quote, a backslash or a control character. Flags after the first
// may be wrong (a borrow crosses into them), but the lowest one is exact.
func specialBytes(w uint64) uint64 {
	const ones, highs = 0x0101010101010101, 0x8080808080808080
	q := w ^ (ones * '"')
	s := w ^ (ones * '\\')
	return (((q - ones) &^ q) | ((s - ones) &^ s) | ((w - ones*0x20) &^ w)) & highs
}

// String reads the JSON string whose opening quote is at b[i] and returns
// its content and the index after the closing quote. The content aliases
// b when the string has no escapes; otherwise it is unescaped into *buf,
// which it reuses, and is valid until the next call with buf. A lone
// UTF-16 surrogate escape becomes U+FFFD, as in encoding/json; invalid
// UTF-8 is kept as it is.
func String(b []byte, i int, buf *[]byte) ([]byte, int, *Error) {
	start := i + 1
	j := start
	// Look for a quote, a backslash or a control character eight bytes at
	// a time.
	for len(b)-j >= 8 {
		if flags := specialBytes(binary.LittleEndian.Uint64(b[j:])); flags != 0 {
			j += bits.TrailingZeros64(flags) >> 3
			if b[j] == '"' {
				return b[start:j], j + 1, nil
			}
			return unescape(b, start, j, buf)
		}
		j += 8
	}
	for ; j < len(b); j++ {
		c := b[j]
		if c == '"' {
			return b[start:j], j + 1, nil
		}
		if c == '\\' || c < 0x20 {
			return unescape(b, start, j, buf)
		}
	}
	return nil, len(b), SyntaxError(b, len(b), `'"'`)
}

// unescape continues String at b[j], the first byte that needs care, of
// the string whose content starts at b[start].
func unescape(b []byte, start, j int, buf *[]byte) ([]byte, int, *Error) {
	out := append((*buf)[:0], b[start:j]...)
	defer func() { *buf = out[:0] }()
	for j < len(b) {
		c := b[j]
		switch {
		case c == '"':
			return out, j + 1, nil
		case c < 0x20:
			return nil, j, errorf("control character 0x%02x in a string at byte %d (escape it)", c, j)
		case c != '\\':
			out = append(out, c)
			j++
			continue
		}
		if j+1 >= len(b) {
			return nil, j + 1, SyntaxError(b, j+1, "an escape")
		}
		switch e := b[j+1]; e {
		case '"', '\\', '/':
			out = append(out, e)
		case 'b':
			out = append(out, '\b')
		case 'f':
			out = append(out, '\f')
		case 'n':
			out = append(out, '\n')
		case 'r':
			out = append(out, '\r')
		case 't':
			out = append(out, '\t')
		case 'u':
			r, err := hex4(b, j+2)
			if err != nil {
				return nil, j, err
			}
			j += 6
			if utf16.IsSurrogate(r) {
				// A high surrogate followed by an escaped low surrogate
				// is one character; anything else is U+FFFD.
				r2 := rune(-1)
				if r < 0xdc00 && len(b)-j >= 6 && b[j] == '\\' && b[j+1] == 'u' {
					r2, _ = hex4(b, j+2)
				}
				if r2 >= 0xdc00 && r2 < 0xe000 {
					r = utf16.DecodeRune(r, r2)
					j += 6
				} else {
					r = utf8.RuneError
				}
			}
			out = utf8.AppendRune(out, r)
			continue
		default:
			return nil, j, errorf("invalid escape %s in a string at byte %d", strconv.Quote(string(b[j:j+2])), j)
		}
		j += 2
	}
	return nil, len(b), SyntaxError(b, len(b), `'"'`)
}

// hex4 reads the four hex digits of a \u escape at b[i].
func hex4(b []byte, i int) (rune, *Error) {
	var r rune
	for k := i; k < i+4; k++ {
		if k >= len(b) {
			return 0, SyntaxError(b, k, "a hex digit")
		}
		c := b[k]
		switch {
		case IsDigit(c):
			c -= '0'
		case 'a' <= c|0x20 && c|0x20 <= 'f':
			c = (c | 0x20) - 'a' + 10
		default:
			return 0, errorf("invalid \\u escape at byte %d (want 4 hex digits)", i-2)
		}
		r = r<<4 | rune(c)
	}
	return r, nil
}
