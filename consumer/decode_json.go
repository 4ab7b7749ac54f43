package consumer

import (
	"encoding/binary"
	"io"
	"math"
	"math/bits"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"
	"unsafe"

	"github.com/hyperplane-ml/hyperplane/learner"
)

// DecodeJSON decodes data, one JSON object (a line of JSON Lines; white
// space may surround it), into x, which it resets first and whose slices it
// reuses. The keys are those of DESIGN.md §3; unknown keys are skipped
// whatever their value (if it nests at most maxDepth arrays and objects),
// so producers can add keys before the decoder knows them. A key that
// appears twice at the top level is an error; a feature name that appears
// twice inside "features" adds two features.
//
// Strings are unescaped before hashing (a lone UTF-16 surrogate becomes
// U+FFFD, as in encoding/json); invalid UTF-8 is hashed as it is.
//
// On error, x is reset and the error is a *DecodeError that names the field
// (or "example" and a byte offset) and the problem; when the input ends
// inside the object it wraps io.ErrUnexpectedEOF. Meta holds the id if it
// was read before the problem.
func (d *Decoder) DecodeJSON(data []byte, x *learner.Example) (Meta, error) {
	d.start(x)
	if len(data) > d.maxBytes {
		return Meta{}, d.sizeError(len(data))
	}
	meta, err := d.decodeJSON(data, x)
	if err != nil {
		x.Reset()
		return meta, err
	}
	return meta, nil
}

func (d *Decoder) decodeJSON(b []byte, x *learner.Example) (Meta, *DecodeError) {
	var meta Meta
	i := skipSpace(b, 0)
	if i == len(b) {
		return meta, syntaxError("example", b, i, "a JSON object")
	}
	if b[i] != '{' {
		if kind := jsonKind(b[i]); kind != "" {
			return meta, decodeErr("example", "not a JSON object (got %s)", kind)
		}
		return meta, syntaxError("example", b, i, "a JSON object")
	}
	i = skipSpace(b, i+1)
	if i < len(b) && b[i] == '}' {
		i++
	} else {
		seen := 0
		for {
			if i >= len(b) || b[i] != '"' {
				return meta, syntaxError("example", b, i, "a key")
			}
			key, j, err := scanString(b, i, &d.name)
			if err != nil {
				return meta, err.at("example")
			}
			i = skipSpace(b, j)
			if i >= len(b) || b[i] != ':' {
				return meta, syntaxError(quoteField(key), b, i, "':'")
			}
			i = skipSpace(b, i+1)
			bit := keyBit(key)
			if seen&bit != 0 {
				return meta, duplicateKey(key)
			}
			seen |= bit
			switch bit {
			case keyID:
				i, err = d.jsonID(b, i, &meta)
			case keyLabel:
				i, err = d.jsonLabel(b, i, x)
			case keyFeatures:
				i, err = d.jsonFeatures(b, i, x)
			case keyX:
				i, err = d.jsonDense(b, i, x)
			case keyWeight:
				i, err = d.jsonWeight(b, i, x)
			default:
				d.noteUnknownKey(key)
				if i, err = d.skipJSON(b, i); err != nil {
					err = err.at(quoteField(key))
				}
			}
			if err != nil {
				return meta, err
			}
			i = skipSpace(b, i)
			if i < len(b) && b[i] == ',' {
				i = skipSpace(b, i+1)
				continue
			}
			if i < len(b) && b[i] == '}' {
				i++
				break
			}
			return meta, syntaxError("example", b, i, "',' or '}'")
		}
	}
	if err := d.checkUnknownKeys(); err != nil {
		return meta, err
	}
	if i = skipSpace(b, i); i != len(b) {
		return meta, decodeErr("example", "unexpected %s after the object at byte %d", describeByte(b[i]), i)
	}
	return meta, nil
}

// jsonID reads the id at b[i]: a string, an integer or null.
func (d *Decoder) jsonID(b []byte, i int, meta *Meta) (int, *DecodeError) {
	if i >= len(b) {
		return i, syntaxError("id", b, i, "a value")
	}
	switch c := b[i]; {
	case c == '"':
		s, j, err := scanString(b, i, &d.id)
		if err != nil {
			return j, err.at("id")
		}
		meta.ID, meta.HasID = s, true
		return j, nil
	case startsNumber(c):
		_, j, st := parseNumber(b, i)
		if st == numSyntax {
			return j, numberError("id", b, i, j, st)
		}
		for _, c := range b[i:j] {
			if !startsNumber(c) {
				return j, decodeErr("id", "%s is not a string or an integer", b[i:j])
			}
		}
		meta.ID, meta.HasID = b[i:j], true
		return j, nil
	case c == 'n':
		return literal(b, i, "null", "id")
	default:
		return i, typeError("id", b, i, "a string or an integer")
	}
}

// jsonLabel reads the label at b[i] into x.
func (d *Decoder) jsonLabel(b []byte, i int, x *learner.Example) (int, *DecodeError) {
	if i >= len(b) {
		return i, syntaxError("label", b, i, "a value")
	}
	switch c := b[i]; {
	case c == '"':
		s, j, err := scanString(b, i, &d.value)
		if err != nil {
			return j, err.at("label")
		}
		return j, d.labelString(x, s)
	case startsNumber(c):
		v, j, st := parseNumber(b, i)
		if st == numSyntax {
			return j, numberError("label", b, i, j, st)
		}
		if !d.labelNumber(x, v) {
			return j, d.badLabelNumber(v, string(b[i:j]))
		}
		return j, nil
	case c == 't':
		j, err := literal(b, i, "true", "label")
		if err == nil {
			err = d.labelBool(x, true)
		}
		return j, err
	case c == 'f':
		j, err := literal(b, i, "false", "label")
		if err == nil {
			err = d.labelBool(x, false)
		}
		return j, err
	case c == 'n':
		return literal(b, i, "null", "label")
	case c == '{' || c == '[':
		return i, d.badLabelType(jsonKind(c))
	default:
		return i, valueError("label", b, i)
	}
}

// jsonWeight reads the weight at b[i] into x.
func (d *Decoder) jsonWeight(b []byte, i int, x *learner.Example) (int, *DecodeError) {
	if i >= len(b) {
		return i, syntaxError("weight", b, i, "a value")
	}
	switch c := b[i]; {
	case startsNumber(c):
		v, j, st := parseNumber(b, i)
		if st == numSyntax {
			return j, numberError("weight", b, i, j, st)
		}
		if !setWeight(x, v) {
			return j, badWeight(string(b[i:j]))
		}
		return j, nil
	case c == 'n':
		return literal(b, i, "null", "weight")
	default:
		return i, typeError("weight", b, i, "a number")
	}
}

// jsonFeatures reads the object of sparse features at b[i] into x. It is
// the hot loop of JSON decoding: it appends to local copies of x's slices
// (the compiler cannot keep x's fields in registers) and tries the short,
// unescaped names of typical producers without a call.
func (d *Decoder) jsonFeatures(b []byte, i int, x *learner.Example) (int, *DecodeError) {
	if i >= len(b) {
		return i, syntaxError("features", b, i, "an object")
	}
	switch b[i] {
	case '{':
	case 'n':
		return literal(b, i, "null", "features")
	default:
		return i, typeError("features", b, i, "an object")
	}
	i = skipSpace(b, i+1)
	if i < len(b) && b[i] == '}' {
		return i + 1, nil
	}
	index, value := x.Index, x.Value
	room := d.maxFeatures - len(index) - len(x.Dense)
	for {
		if i >= len(b) || b[i] != '"' {
			return i, syntaxError("features", b, i, "a feature name")
		}
		name, j, ok := shortString(b, i)
		if !ok {
			var err *DecodeError
			if name, j, err = scanString(b, i, &d.name); err != nil {
				return j, err.at("features")
			}
		}
		i = j
		if i < len(b) && b[i] == ':' {
			i++
		} else if i = skipSpace(b, i); i < len(b) && b[i] == ':' {
			i++
		} else {
			return i, syntaxError(featureField(name), b, i, "':'")
		}
		i = skipSpace(b, i)
		if i >= len(b) {
			return i, syntaxError(featureField(name), b, i, "a value")
		}
		if room == 0 {
			return i, d.tooManyFeatures()
		}
		room--
		switch c := b[i]; {
		case startsNumber(c):
			v, j, st := parseNumber(b, i)
			if st != numOK {
				return j, numberError(featureField(name), b, i, j, st)
			}
			index = append(index, learner.Index(d.hasher, name))
			value = append(value, v)
			i = j
		case c == '"':
			s, j, err := scanString(b, i, &d.value)
			if err != nil {
				return j, err.at(featureField(name))
			}
			index = append(index, learner.CategoricalIndex(d.hasher, name, s))
			value = append(value, 1)
			i = j
		default:
			return i, typeError(featureField(name), b, i, "a number or string")
		}
		if i < len(b) && b[i] == ',' {
			i = skipSpace(b, i+1)
			continue
		}
		if i = skipSpace(b, i); i < len(b) {
			switch b[i] {
			case ',':
				i = skipSpace(b, i+1)
				continue
			case '}':
				x.Index, x.Value = index, value
				return i + 1, nil
			}
		}
		return i, syntaxError("features", b, i, "',' or '}'")
	}
}

// jsonDense reads the array of dense features at b[i] into x.
func (d *Decoder) jsonDense(b []byte, i int, x *learner.Example) (int, *DecodeError) {
	if i >= len(b) {
		return i, syntaxError("x", b, i, "an array")
	}
	switch b[i] {
	case '[':
	case 'n':
		return literal(b, i, "null", "x")
	default:
		return i, typeError("x", b, i, "an array")
	}
	i = skipSpace(b, i+1)
	if i < len(b) && b[i] == ']' {
		return i + 1, nil
	}
	for {
		if i >= len(b) {
			return i, syntaxError(denseField(len(x.Dense)), b, i, "a number")
		}
		c := b[i]
		if !startsNumber(c) {
			return i, typeError(denseField(len(x.Dense)), b, i, "a number")
		}
		v, j, st := parseNumber(b, i)
		if st != numOK {
			return j, numberError(denseField(len(x.Dense)), b, i, j, st)
		}
		if err := d.addDense(x, v); err != nil {
			return j, err
		}
		i = skipSpace(b, j)
		if i < len(b) && b[i] == ',' {
			i = skipSpace(b, i+1)
			continue
		}
		if i < len(b) && b[i] == ']' {
			return i + 1, nil
		}
		return i, syntaxError("x", b, i, "',' or ']'")
	}
}

// denseField is the field name of the dense feature at position i.
func denseField(i int) string { return "x[" + strconv.Itoa(i) + "]" }

// skipJSON checks the syntax of the JSON value at b[i] and returns the
// index after it. It keeps its own stack of open containers, so the depth
// it handles (up to maxDepth) does not depend on the goroutine stack.
func (d *Decoder) skipJSON(b []byte, i int) (int, *DecodeError) {
	stack := d.stack[:0]
	defer func() { d.stack = stack[:0] }()
	var err *DecodeError
	for {
		// A value starts at b[i], after optional space.
		i = skipSpace(b, i)
		if i >= len(b) {
			return i, syntaxError("", b, i, "a value")
		}
		switch c := b[i]; {
		case c == '{' || c == '[':
			if len(stack) == maxDepth {
				return i, tooDeep(i)
			}
			i = skipSpace(b, i+1)
			if i < len(b) && b[i] == c+2 { // '{'+2 == '}', '['+2 == ']'
				i++
				break
			}
			stack = append(stack, c)
			if c == '{' {
				if i, err = skipKey(b, i, &d.skip); err != nil {
					return i, err
				}
			}
			continue
		case c == '"':
			if _, i, err = scanString(b, i, &d.skip); err != nil {
				return i, err
			}
		case startsNumber(c):
			// Only the syntax: the value is not wanted, and strconv would
			// allocate its error for a number out of range.
			j, ok := numberEnd(b, i)
			if !ok {
				return j, numberError("", b, i, j, numSyntax)
			}
			i = j
		case c == 't':
			i, err = literal(b, i, "true", "")
		case c == 'f':
			i, err = literal(b, i, "false", "")
		case c == 'n':
			i, err = literal(b, i, "null", "")
		default:
			return i, valueError("", b, i)
		}
		if err != nil {
			return i, err
		}
		// After a value: close containers until one has more elements.
		for {
			if len(stack) == 0 {
				return i, nil
			}
			open := stack[len(stack)-1]
			i = skipSpace(b, i)
			if i < len(b) && b[i] == ',' {
				i++
				if open == '{' {
					if i, err = skipKey(b, skipSpace(b, i), &d.skip); err != nil {
						return i, err
					}
				}
				break
			}
			if i < len(b) && b[i] == open+2 {
				i++
				stack = stack[:len(stack)-1]
				continue
			}
			return i, syntaxError("", b, i, "',' or '"+string(open+2)+"'")
		}
	}
}

// skipKey checks an object key and its colon at b[i] and returns the index
// after the colon.
func skipKey(b []byte, i int, buf *[]byte) (int, *DecodeError) {
	if i >= len(b) || b[i] != '"' {
		return i, syntaxError("", b, i, "a key")
	}
	_, i, err := scanString(b, i, buf)
	if err != nil {
		return i, err
	}
	i = skipSpace(b, i)
	if i >= len(b) || b[i] != ':' {
		return i, syntaxError("", b, i, "':'")
	}
	return i + 1, nil
}

// skipSpace returns the index of the first byte at or after i that is not
// JSON white space.
func skipSpace(b []byte, i int) int {
	for ; i < len(b) && b[i] <= ' '; i++ {
		switch b[i] {
		case ' ', '\n', '\r', '\t':
		default:
			return i
		}
	}
	return i
}

func isDigit(c byte) bool { return c-'0' <= 9 }

// startsNumber reports whether a JSON number starts with c: '-' or a digit.
// It tests one bit of a mask rather than c == '-' || isDigit(c), whose
// first test goes either way with the random signs of real data and so
// would be a mispredicted branch for every other number.
func startsNumber(c byte) bool {
	d := c - '-'
	return d < 13 && (0b1_1111_1111_1001>>d)&1 != 0 // '-' and '0' to '9'
}

// b2u is 1 for true and 0 for false, without a branch.
func b2u(v bool) uint64 {
	var u uint64
	if v {
		u = 1
	}
	return u
}

// literal checks that b[i:] starts with the literal lit (true, false or
// null) and returns the index after it.
func literal(b []byte, i int, lit, field string) (int, *DecodeError) {
	for k := 0; k < len(lit); k++ {
		if i+k >= len(b) || b[i+k] != lit[k] {
			if name, ok := notJSONNumber(b, i); ok {
				return i, notJSONNumberError(field, name)
			}
			return i + k, syntaxError(field, b, i+k, strconv.QuoteRune(rune(lit[k])))
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
		if k < len(b) && (isDigit(b[k]) || 'a' <= b[k]|0x20 && b[k]|0x20 <= 'z' || b[k] == '_') {
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

// notJSONNumberError is the error for the NaN or infinity name at a value.
func notJSONNumberError(field, name string) *DecodeError {
	return decodeErr(field, "%s is not a JSON number (JSON has no NaN or infinities)", name)
}

// valueError is the error for b[i], where a value must start and none does.
func valueError(field string, b []byte, i int) *DecodeError {
	if name, ok := notJSONNumber(b, i); ok {
		return notJSONNumberError(field, name)
	}
	return syntaxError(field, b, i, "a value")
}

// shortString is the fast path of scanString for a string whose content
// and closing quote are in the 8 bytes after the opening quote at b[i] and
// that has no escapes: it returns the content and the index after the
// closing quote, or ok false to say that scanString must read it.
func shortString(b []byte, i int) (s []byte, end int, ok bool) {
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

// scanString reads the JSON string whose opening quote is at b[i] and
// returns its content and the index after the closing quote. The content
// aliases b when the string has no escapes; otherwise it is unescaped into
// *buf, which it reuses.
func scanString(b []byte, i int, buf *[]byte) ([]byte, int, *DecodeError) {
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
	return nil, len(b), syntaxError("", b, len(b), `'"'`)
}

// unescape continues scanString at b[j], the first byte that needs care,
// of the string whose content starts at b[start].
func unescape(b []byte, start, j int, buf *[]byte) ([]byte, int, *DecodeError) {
	out := append((*buf)[:0], b[start:j]...)
	defer func() { *buf = out[:0] }()
	for j < len(b) {
		c := b[j]
		switch {
		case c == '"':
			return out, j + 1, nil
		case c < 0x20:
			return nil, j, decodeErr("", "control character 0x%02x in a string at byte %d (escape it)", c, j)
		case c != '\\':
			out = append(out, c)
			j++
			continue
		}
		if j+1 >= len(b) {
			return nil, j + 1, syntaxError("", b, j+1, "an escape")
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
			return nil, j, decodeErr("", "invalid escape %s in a string at byte %d", strconv.Quote(string(b[j:j+2])), j)
		}
		j += 2
	}
	return nil, len(b), syntaxError("", b, len(b), `'"'`)
}

// hex4 reads the four hex digits of a \u escape at b[i].
func hex4(b []byte, i int) (rune, *DecodeError) {
	var r rune
	for k := i; k < i+4; k++ {
		if k >= len(b) {
			return 0, syntaxError("", b, k, "a hex digit")
		}
		c := b[k]
		switch {
		case isDigit(c):
			c -= '0'
		case 'a' <= c|0x20 && c|0x20 <= 'f':
			c = (c | 0x20) - 'a' + 10
		default:
			return 0, decodeErr("", "invalid \\u escape at byte %d (want 4 hex digits)", i-2)
		}
		r = r<<4 | rune(c)
	}
	return r, nil
}

// numStatus is the outcome of parseNumber.
type numStatus uint8

const (
	numOK     numStatus = iota
	numSyntax           // not a JSON number
	numRange            // a JSON number beyond ±learner.MaxValue (see inRange)
)

// parseNumber parses the JSON number at b[i] and returns its value, the
// index after it and its status. The value is the float64 nearest to the
// decimal number, ties to even, exactly as strconv.ParseFloat gives it
// (±Inf beyond the float64s). The status is numRange for a value beyond
// ±learner.MaxValue, the bound on feature values: the callers that read
// other numbers ignore it. Only the paths that can give such a value test
// for it, so that the common numbers pay nothing.
//
// Up to 19 significant digits are read into a uint64 mantissa m with a
// decimal exponent e. When m <= 2^53 (exact in a float64) and 10^|e| is
// exact in a float64 (|e| <= 22), the value is float64(m) multiplied or
// divided by 10^|e|: one correctly rounded operation on exact operands,
// hence the correctly rounded result (Clinger's fast path). Other numbers,
// rare in practice, go to strconv.ParseFloat.
func parseNumber(b []byte, i int) (float64, int, numStatus) {
	start := i
	// The sign is taken without a branch: signs are random in real data,
	// and a mispredicted branch costs more than the rest of the number.
	var sign uint64
	if i < len(b) {
		sign = b2u(b[i] == '-')
		i += int(sign)
	}
	neg := sign != 0
	// Read the digits of the integer and fraction parts into m. Past 19
	// digits m overflows; nd tells, and then slowMantissa reads them again.
	var m uint64
	intStart := i
	for ; i < len(b); i++ {
		c := b[i] - '0'
		if c > 9 {
			break
		}
		m = m*10 + uint64(c)
	}
	intEnd := i
	switch {
	case intEnd == intStart:
		return 0, i, numSyntax
	case b[intStart] == '0' && intEnd-intStart > 1:
		// JSON forbids leading zeros: the number is the "0".
		return 0, intStart + 1, numSyntax
	}
	fracStart, fracEnd := i, i
	if i < len(b) && b[i] == '.' {
		i++
		fracStart = i
		for ; i < len(b); i++ {
			c := b[i] - '0'
			if c > 9 {
				break
			}
			m = m*10 + uint64(c)
		}
		fracEnd = i
		if fracEnd == fracStart {
			return 0, i, numSyntax
		}
	}
	exp := 0
	if i < len(b) && b[i]|0x20 == 'e' {
		i++
		eneg := false
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			eneg = b[i] == '-'
			i++
		}
		if i >= len(b) || !isDigit(b[i]) {
			return 0, i, numSyntax
		}
		for ; i < len(b) && isDigit(b[i]); i++ {
			if exp < 100000 { // far beyond any float64; keeps exp from overflowing
				exp = exp*10 + int(b[i]-'0')
			}
		}
		if eneg {
			exp = -exp
		}
	}
	trunc := false
	if nd := (intEnd - intStart) + (fracEnd - fracStart); nd <= 19 {
		exp -= fracEnd - fracStart
		// The common case, a few decimals: the division of exactFloat,
		// without the call.
		if m != 0 && m <= 1<<53 && exp < 0 && exp >= -22 {
			f := float64(m) / math.Pow10(-exp)
			return math.Float64frombits(math.Float64bits(f) | sign<<63), i, numOK
		}
	} else {
		var e int
		m, e, trunc = slowMantissa(b[intStart:intEnd], b[fracStart:fracEnd])
		exp += e
	}
	if m == 0 {
		if neg {
			return math.Copysign(0, -1), i, numOK
		}
		return 0, i, numOK
	}
	if !trunc {
		if f, ok := exactFloat(m, exp); ok {
			st := numOK
			if exp > 0 && f > learner.MaxValue {
				st = numRange
			}
			return math.Float64frombits(math.Float64bits(f) | sign<<63), i, st
		}
	}
	f, st := parseFloat(b[start:i])
	return f, i, st
}

// parseFloat is the slow path of parseNumber: b is a JSON number. It is a
// function of its own to keep the frame of parseNumber small.
func parseFloat(b []byte) (float64, numStatus) {
	// The string aliases b only for the call: ParseFloat keeps it only in
	// its error, and the error is dropped here.
	f, _ := strconv.ParseFloat(unsafe.String(&b[0], len(b)), 64)
	if !inRange(f) { // ±Inf too, for a number beyond the float64s
		return f, numRange
	}
	return f, numOK
}

// exactFloat is Clinger's fast path: m·10^exp correctly rounded, when m
// and 10^|exp| are exact float64s, so that one multiplication or division,
// which IEEE 754 rounds correctly, gives the answer. ok is false for the
// other numbers.
func exactFloat(m uint64, exp int) (f float64, ok bool) {
	if m > 1<<53 {
		return 0, false
	}
	switch {
	case exp == 0:
		return float64(m), true
	case exp < 0 && exp >= -22:
		return float64(m) / math.Pow10(-exp), true
	case exp > 0 && exp <= 22:
		return float64(m) * math.Pow10(exp), true
	case exp > 22 && exp <= 22+15:
		// m·10^(exp-22) may still be an exact integer below 2^53.
		if p := uint64(math.Pow10(exp - 22)); m <= (1<<53)/p {
			return float64(m*p) * 1e22, true
		}
	}
	return 0, false
}

// slowMantissa reads the first 19 significant digits of the integer part
// ip and fraction part fp of a number with more than 19 digits. The number
// is m·10^exp, exactly unless trunc reports that nonzero digits were
// dropped.
func slowMantissa(ip, fp []byte) (m uint64, exp int, trunc bool) {
	nd := 0 // digits in m, leading zeros excluded
	for _, c := range ip {
		if nd < 19 {
			m = m*10 + uint64(c-'0')
			if m != 0 {
				nd++
			}
		} else {
			exp++
			trunc = trunc || c != '0'
		}
	}
	for _, c := range fp {
		if nd < 19 {
			m = m*10 + uint64(c-'0')
			if m != 0 {
				nd++
			}
			exp--
		} else {
			trunc = trunc || c != '0'
		}
	}
	return m, exp, trunc
}

// numberEnd checks the syntax of the JSON number at b[i] and returns the
// index after it, or the index of the first wrong byte and false.
func numberEnd(b []byte, i int) (int, bool) {
	if i < len(b) && b[i] == '-' {
		i++
	}
	digits := func() bool {
		start := i
		for i < len(b) && isDigit(b[i]) {
			i++
		}
		return i > start
	}
	switch {
	case i < len(b) && b[i] == '0':
		i++ // no more digits may follow a leading zero
	case !digits():
		return i, false
	}
	if i < len(b) && b[i] == '.' {
		i++
		if !digits() {
			return i, false
		}
	}
	if i < len(b) && b[i]|0x20 == 'e' {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		if !digits() {
			return i, false
		}
	}
	return i, true
}

// numberError is the error for the number b[i:j] with status st.
func numberError(field string, b []byte, i, j int, st numStatus) *DecodeError {
	if st == numRange {
		return outOfRange(field, string(b[i:j]))
	}
	if name, ok := notJSONNumber(b, i); ok {
		return notJSONNumberError(field, name)
	}
	if j >= len(b) {
		return syntaxError(field, b, j, "a digit")
	}
	return decodeErr(field, "malformed number at byte %d (unexpected %s at byte %d)", i, describeByte(b[j]), j)
}

// jsonKind names the type of the JSON value that starts with c, or is ""
// if no value starts with c.
func jsonKind(c byte) string {
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
	case startsNumber(c):
		return "number"
	}
	return ""
}

// typeError is the error for a value of the wrong type at b[i]; want is
// what the field takes. If no value starts at b[i] it is a syntax error.
func typeError(field string, b []byte, i int, want string) *DecodeError {
	if name, ok := notJSONNumber(b, i); ok {
		return notJSONNumberError(field, name) // nan is not null
	}
	kind := jsonKind(b[i])
	if kind == "" {
		return syntaxError(field, b, i, "a value")
	}
	return decodeErr(field, "value is not %s (got %s)", want, kind)
}

// syntaxError is the error for malformed JSON at b[i]; want is what the
// grammar allows there.
func syntaxError(field string, b []byte, i int, want string) *DecodeError {
	if i >= len(b) {
		return &DecodeError{
			Field:   field,
			Problem: "unexpected end of input at byte " + strconv.Itoa(i) + " (want " + want + ")",
			err:     io.ErrUnexpectedEOF,
		}
	}
	return decodeErr(field, "unexpected %s at byte %d (want %s)", describeByte(b[i]), i, want)
}

// describeByte shows the byte c in a message.
func describeByte(c byte) string {
	if c > ' ' && c < 0x7f {
		return strconv.QuoteRune(rune(c))
	}
	return "byte 0x" + strconv.FormatUint(uint64(c)|0x100, 16)[1:]
}

// at sets the field of an error that does not have one yet.
func (e *DecodeError) at(field string) *DecodeError {
	if e.Field == "" {
		e.Field = field
	}
	return e
}
