package jsonscan

import (
	"encoding/binary"
	"math"
	"math/bits"
	"strconv"
	"unsafe"
)

// NumStatus is the outcome of Number.
type NumStatus uint8

// The outcomes of Number.
const (
	NumOK     NumStatus = iota
	NumSyntax           // not a JSON number
	NumRange            // a JSON number beyond ±bound (see Number)
)

// b2u is 1 for true and 0 for false, without a branch.
func b2u(v bool) uint64 {
	var u uint64
	if v {
		u = 1
	}
	return u
}

// Number parses the JSON number at b[i] and returns its value, the index
// after it and its status. The value is the float64 nearest to the
// decimal number, ties to even, exactly as strconv.ParseFloat gives it
// (±Inf beyond the float64s). The status is NumRange for a value beyond
// ±bound, which must be at least 2^53: a caller that wants all numbers
// ignores it. Only the paths that can give such a value test for it, so
// that the common numbers pay nothing. On NumSyntax the index is that of
// the first byte that does not fit the grammar (see NumberError).
//
// Up to 19 significant digits are read into a uint64 mantissa m with a
// decimal exponent e. When m <= 2^53 (exact in a float64) and 10^|e| is
// exact in a float64 (|e| <= 22), the value is float64(m) multiplied or
// divided by 10^|e|: one correctly rounded operation on exact operands,
// hence the correctly rounded result (Clinger's fast path). Other numbers,
// rare in practice, go to strconv.ParseFloat.
func Number(b []byte, i int, bound float64) (float64, int, NumStatus) {
	start := i
	// The sign is taken without a branch: signs are random in real data,
	// and a mispredicted branch costs more than the rest of the number.
	var sign uint64
	if i < len(b) {
		sign = b2u(b[i] == '-')
		i += int(sign)
	}
	// The form of most feature values, one digit, a point and one to
	// seven more, is read in one 8-byte word without a loop: the digits
	// after the point, and the byte after them, which must not start an
	// exponent. The value is m/10^k with m < 10^8, Clinger's fast path.
	if len(b)-i >= 10 {
		if d := b[i] - '0'; d <= 9 && b[i+1] == '.' {
			w := binary.LittleEndian.Uint64(b[i+2:])
			k := digitRun(w)
			if uint(k-1) < 7 && byte(w>>(8*uint(k)))|0x20 != 'e' {
				m := uint64(d)*pow10Int[k] + digitsValue(w, k)
				f := float64(m) / pow10Float[k]
				return math.Float64frombits(math.Float64bits(f) | sign<<63), i + 2 + k, NumOK
			}
		}
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
		return 0, i, NumSyntax
	case b[intStart] == '0' && intEnd-intStart > 1:
		// JSON forbids leading zeros: the number is the "0".
		return 0, intStart + 1, NumSyntax
	}
	fracStart, fracEnd := i, i
	if i < len(b) && b[i] == '.' {
		i++
		fracStart = i
		// Fewer than 8 digits followed by anything, the common fraction,
		// are read 8 bytes at a time, without a branch per digit (whose
		// count varies from number to number and would be mispredicted):
		// m*10^k + f is the loop's m, modulo 2^64 like it.
		if len(b)-i >= 8 {
			w := binary.LittleEndian.Uint64(b[i:])
			if k := digitRun(w); k < 8 {
				m = m*pow10Int[k] + digitsValue(w, k)
				i += k
			}
		}
		if i == fracStart { // 8 digits or more, or none, or near the end of b
			for ; i < len(b); i++ {
				c := b[i] - '0'
				if c > 9 {
					break
				}
				m = m*10 + uint64(c)
			}
		}
		fracEnd = i
		if fracEnd == fracStart {
			return 0, i, NumSyntax
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
		if i >= len(b) || !IsDigit(b[i]) {
			return 0, i, NumSyntax
		}
		for ; i < len(b) && IsDigit(b[i]); i++ {
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
			f := float64(m) / pow10Float[-exp]
			return math.Float64frombits(math.Float64bits(f) | sign<<63), i, NumOK
		}
	} else {
		var e int
		m, e, trunc = slowMantissa(b[intStart:intEnd], b[fracStart:fracEnd])
		exp += e
	}
	if m == 0 {
		if neg {
			return math.Copysign(0, -1), i, NumOK
		}
		return 0, i, NumOK
	}
	if !trunc {
		if f, ok := exactFloat(m, exp); ok {
			st := NumOK
			if exp > 0 && f > bound {
				st = NumRange
			}
			return math.Float64frombits(math.Float64bits(f) | sign<<63), i, st
		}
	}
	f, st := parseFloat(b[start:i], bound)
	return f, i, st
}

// pow10Int are the powers of ten that digitRun's counts need.
var pow10Int = [8]uint64{1, 10, 100, 1e3, 1e4, 1e5, 1e6, 1e7}

// pow10Float are the powers of ten exact in a float64, as math.Pow10
// gives them, without its multiplication.
var pow10Float = [23]float64{
	1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11,
	1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22,
}

// digitRun is the number of ASCII digits at the front of the 8 bytes w
// (read little-endian, the first byte lowest), 0 to 8. A byte is a digit
// when its high nibble is 3 and stays 3 with 6 added; a carry out of a
// byte above 0xf9 only spoils the bytes after it, past the first
// non-digit.
func digitRun(w uint64) int {
	const ones, highs = 0x0101010101010101, 0xf0f0f0f0f0f0f0f0
	other := (w&highs ^ ones*0x30) | ((w+ones*6)&highs ^ ones*0x30)
	return bits.TrailingZeros64(other) >> 3
}

// digitsValue is the value of the first k ASCII digits of w (read as
// digitRun reads it), 0 for k = 0: the digits are shifted to the top,
// below them zeros, and summed in pairs, fours and eights.
func digitsValue(w uint64, k int) uint64 {
	w = (w & 0x0f0f0f0f0f0f0f0f) << (64 - 8*uint(k)) // 0 for k = 0
	w = (w * (10<<8 + 1)) >> 8 & 0x00ff00ff00ff00ff
	w = (w * (100<<16 + 1)) >> 16 & 0x0000ffff0000ffff
	return (w * (10000<<32 + 1)) >> 32
}

// parseFloat is the slow path of Number: b is a JSON number. It is a
// function of its own to keep the frame of Number small.
func parseFloat(b []byte, bound float64) (float64, NumStatus) {
	// The string aliases b only for the call: ParseFloat keeps it only in
	// its error, and the error is dropped here.
	f, _ := strconv.ParseFloat(unsafe.String(&b[0], len(b)), 64)
	if !(math.Abs(f) <= bound) { // ±Inf too, for a number beyond the float64s
		return f, NumRange
	}
	return f, NumOK
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

// NumberEnd checks the syntax of the JSON number at b[i] and returns the
// index after it, or the index of the first wrong byte and false. It
// reads no value: strconv would allocate its error for a number out of
// range.
func NumberEnd(b []byte, i int) (int, bool) {
	if i < len(b) && b[i] == '-' {
		i++
	}
	digits := func() bool {
		start := i
		for i < len(b) && IsDigit(b[i]) {
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

// NumberError is the error for the malformed number that starts at b[i]
// and goes wrong at b[j], where Number or NumberEnd stopped: it names a
// NaN or an infinity as such.
func NumberError(b []byte, i, j int) *Error {
	if name, ok := notJSONNumber(b, i); ok {
		return notJSONNumberError(name)
	}
	if j >= len(b) {
		return SyntaxError(b, j, "a digit")
	}
	return errorf("malformed number at byte %d (unexpected %s at byte %d)", i, DescribeByte(b[j]), j)
}
