// Package jsonscan reads JSON values from a byte slice without allocating:
// white space, literals, strings (unescaped into a buffer the caller
// keeps), numbers (parsed exactly as strconv.ParseFloat does) and whole
// values of any type, skipped with a bound on their nesting. It is the
// scanner under consumer's example decoder, which reads the example's keys
// with it; it knows no schema.
//
// Every function takes the input b and the index i of the first byte to
// read, and returns the index after what it read. Errors are *Error, whose
// Problem names the byte offset in b; they wrap io.ErrUnexpectedEOF when b
// ends inside the value, so that a caller can tell truncated input from
// malformed input.
package jsonscan

import (
	"fmt"
	"io"
	"strconv"
)

// Error is JSON that the scanner refused.
type Error struct {
	// Problem says what is wrong and where, e.g. "unexpected '}' at byte
	// 7 (want a key)".
	Problem string
	// Err is io.ErrUnexpectedEOF when the input ends inside the value,
	// else nil.
	Err error
}

// Error is the Problem.
func (e *Error) Error() string { return e.Problem }

// Unwrap returns Err.
func (e *Error) Unwrap() error { return e.Err }

func errorf(format string, args ...any) *Error {
	return &Error{Problem: fmt.Sprintf(format, args...)}
}

// SkipSpace returns the index of the first byte at or after i that is not
// JSON white space.
func SkipSpace(b []byte, i int) int {
	for ; i < len(b) && b[i] <= ' '; i++ {
		switch b[i] {
		case ' ', '\n', '\r', '\t':
		default:
			return i
		}
	}
	return i
}

// IsDigit reports whether c is an ASCII digit.
func IsDigit(c byte) bool { return c-'0' <= 9 }

// StartsNumber reports whether a JSON number starts with c: '-' or a digit.
// It tests one bit of a mask rather than c == '-' || IsDigit(c), whose
// first test goes either way with the random signs of real data and so
// would be a mispredicted branch for every other number.
func StartsNumber(c byte) bool {
	d := c - '-'
	return d < 13 && (0b1_1111_1111_1001>>d)&1 != 0 // '-' and '0' to '9'
}

// Kind names the type of the JSON value that starts with c ("object",
// "array", "string", "boolean", "null" or "number"), or is "" if no value
// starts with c.
func Kind(c byte) string {
	switch {
	case c == '{':
		return "object"
	case c == '[':
		return "array"
	case c == '"':
		return "string"
	case c == 't' || c == 'f':
		return "boolean"
	case c == 'n':
		return "null"
	case StartsNumber(c):
		return "number"
	}
	return ""
}

// KindAt is Kind(b[i]), or "" where b[i] is the first letter of true,
// false or null and the literal is not there: "nope" is no null, and no
// value starts there.
func KindAt(b []byte, i int) string {
	if lit := literalOf(b[i]); lit != "" && !hasLiteral(b, i, lit) {
		return ""
	}
	return Kind(b[i])
}

// literalOf is the literal that starts with c, or "" if none does.
func literalOf(c byte) string {
	switch c {
	case 't':
		return "true"
	case 'f':
		return "false"
	case 'n':
		return "null"
	}
	return ""
}

// hasLiteral reports whether b[i:] starts with lit.
func hasLiteral(b []byte, i int, lit string) bool {
	return len(b)-i >= len(lit) && string(b[i:i+len(lit)]) == lit
}

// Literal checks that b[i:] starts with the literal lit (true, false or
// null) and returns the index after it.
func Literal(b []byte, i int, lit string) (int, *Error) {
	for k := 0; k < len(lit); k++ {
		if i+k >= len(b) || b[i+k] != lit[k] {
			if name, ok := notJSONNumber(b, i); ok {
				return i, notJSONNumberError(name)
			}
			return i + k, SyntaxError(b, i+k, strconv.QuoteRune(rune(lit[k])))
		}
	}
	return i + len(lit), nil
}

// notJSONNumber reports whether a NaN or an infinity as other languages
// write them (NaN, Infinity, -Infinity, nan, inf...: what Python's json
// module and C's printf produce) starts at b[i], and returns its text. JSON
// has no such numbers; naming what was sent is clearer than the syntax
// error, or the "null" of its first letter, the grammar would report.
func notJSONNumber(b []byte, i int) (string, bool) {
	j := i
	if j < len(b) && (b[j] == '-' || b[j] == '+') {
		j++
	}
	for _, word := range [...]string{"infinity", "inf", "nan"} {
		k := j + len(word)
		if k > len(b) || !asciiEqualFold(b[j:k], word) {
			continue
		}
		if k < len(b) && (IsDigit(b[k]) || 'a' <= b[k]|0x20 && b[k]|0x20 <= 'z' || b[k] == '_') {
			return "", false // a longer word: not a number at all
		}
		return string(b[i:k]), true
	}
	return "", false
}

// asciiEqualFold reports whether b is the lower-case ASCII word w, ignoring
// the case of b.
func asciiEqualFold(b []byte, w string) bool {
	for k := range len(w) {
		if b[k]|0x20 != w[k] {
			return false
		}
	}
	return true
}

// IsNotJSONNumber reports whether a NaN or an infinity as other languages
// write them starts at b[i] (see notJSONNumber).
func IsNotJSONNumber(b []byte, i int) bool {
	_, ok := notJSONNumber(b, i)
	return ok
}

// notJSONNumberError is the error for the NaN or infinity name at a value.
func notJSONNumberError(name string) *Error {
	return errorf("%s is not a JSON number (JSON has no NaN or infinities)", name)
}

// ValueError is the error for b[i], where a value must start and none
// does.
func ValueError(b []byte, i int) *Error {
	if name, ok := notJSONNumber(b, i); ok {
		return notJSONNumberError(name)
	}
	return SyntaxError(b, i, "a value")
}

// TypeError is the error for a value of the wrong type at b[i]; want is
// what the caller takes ("a number", "an object"...). If no value starts
// at b[i] it is the error of ValueError.
func TypeError(b []byte, i int, want string) *Error {
	if name, ok := notJSONNumber(b, i); ok {
		return notJSONNumberError(name) // nan is not null
	}
	kind := KindAt(b, i)
	if kind == "" {
		if lit := literalOf(b[i]); lit != "" {
			_, err := Literal(b, i, lit) // where the letters part from the literal
			return err
		}
		return SyntaxError(b, i, "a value")
	}
	return errorf("value is not %s (got %s)", want, kind)
}

// SyntaxError is the error for malformed JSON at b[i]; want is what the
// grammar allows there. If i is the end of b the error wraps
// io.ErrUnexpectedEOF.
func SyntaxError(b []byte, i int, want string) *Error {
	if i >= len(b) {
		return &Error{
			Problem: "unexpected end of input at byte " + strconv.Itoa(i) + " (want " + want + ")",
			Err:     io.ErrUnexpectedEOF,
		}
	}
	return errorf("unexpected %s at byte %d (want %s)", DescribeByte(b[i]), i, want)
}

// DescribeByte shows the byte c in a message: quoted if it is printable
// ASCII, in hex otherwise.
func DescribeByte(c byte) string {
	if c > ' ' && c < 0x7f {
		return strconv.QuoteRune(rune(c))
	}
	return "byte 0x" + strconv.FormatUint(uint64(c)|0x100, 16)[1:]
}
