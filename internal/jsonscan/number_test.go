package jsonscan

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"io"
	"math"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
)

func newRand(seed uint64) *rand.Rand { return rand.New(rand.NewPCG(seed, 1)) }

// sameFloat compares bit patterns, so that 0 and -0 differ.
func sameFloat(a, b float64) bool { return math.Float64bits(a) == math.Float64bits(b) }

// randomNumber is a JSON number of one of the forms producers write.
func randomNumber(rng *rand.Rand) string {
	switch rng.IntN(8) {
	case 0:
		return strconv.Itoa(rng.IntN(2001) - 1000)
	case 1:
		return strconv.FormatFloat(rng.NormFloat64()*1e3, 'g', -1, 64)
	case 2:
		return strconv.FormatFloat(rng.NormFloat64()*math.Pow10(rng.IntN(80)-40), 'e', rng.IntN(20), 64)
	case 3:
		return strconv.FormatFloat(math.Float64frombits(rng.Uint64()&^(0x7ff<<52)|uint64(rng.IntN(0x7ff))<<52), 'g', -1, 64)
	default:
		return strconv.FormatFloat(float64(rng.IntN(20001)-10000)/1e4, 'f', 4, 64)
	}
}

func TestExactFloatIsCorrectlyRounded(t *testing.T) {
	rng := newRand(1)
	check := func(m uint64, exp int) {
		t.Helper()
		f, ok := exactFloat(m, exp)
		if m <= 1<<53 && exp >= -22 && exp <= 22 && !ok {
			t.Fatalf("exactFloat(%d, %d) refused a number of Clinger's fast path", m, exp)
		}
		if !ok {
			return
		}
		s := strconv.FormatUint(m, 10) + "e" + strconv.Itoa(exp)
		want, err := strconv.ParseFloat(s, 64)
		if err != nil {
			t.Fatal(err)
		}
		if !sameFloat(f, want) {
			t.Fatalf("exactFloat(%d, %d) = %v (%#x), strconv says %v (%#x)", m, exp, f, math.Float64bits(f), want, math.Float64bits(want))
		}
	}
	edges := []uint64{0, 1, 9, 10, 1<<53 - 1, 1 << 53, 1<<53 + 1, 1<<52 + 1, 999999999999999, 4503599627370497, 9007199254740991}
	for _, m := range edges {
		for exp := -25; exp <= 40; exp++ {
			check(m, exp)
		}
	}
	for range 300000 {
		m := rng.Uint64N(1<<53 + 1)
		if rng.IntN(2) == 0 {
			m >>= rng.IntN(53) // short mantissas too
		}
		check(m, rng.IntN(64)-24)
	}
}

// TestNumberMatchesStrconv: Number gives the float64 strconv.ParseFloat
// gives, for the numbers producers write and for random ones, with the
// status that the bound asks for.
func TestNumberMatchesStrconv(t *testing.T) {
	inputs := []string{
		"0", "-0", "0.0", "-0.0", "0e0", "0E+5", "-0e-5", "1", "-1", "0.5", "0.5123", "-0.9876",
		"1e1", "1E-1", "1e+1", "0.1", "0.2", "0.3", "0.30000000000000004", "123.456e-7",
		"9007199254740991", "9007199254740992", "9007199254740993", "9007199254740994", "9007199254740995",
		"18446744073709551615", "18446744073709551616", "99999999999999999999", "1234567890123456789",
		"12345678901234567890", "1234567890123456789.5", "0.1234567890123456789", "0.12345678901234567891",
		"0.000000000000000000001234", "1000000000000000000000000", "1e22", "1e23", "9e22", "9.5e22",
		"123456789e22", "8999999999999999e22", "9007199254740991e22", "9007199254740993e22", "1e37", "1e38",
		"4503599627370497e-22", "1e-22", "1e-23", "5e-324", "4e-324", "3e-324", "2e-324", "1e-324",
		"2.4703282292062327e-324", "2.4703282292062328e-324", "2.2250738585072011e-308", "2.2250738585072012e-308",
		"1.7976931348623157e308", "1.7976931348623158e308", "1.7976931348623159e308", "8.98846567431158e307",
		"1e308", "1e309", "1e999", "-1e999", "1e-999", "1e100000", "1e-100000", "1e99999999999999999999",
		"0e99999999999999999999", "100000000000000016777215", "100000000000000016777216", "7.038531e-26",
		"3.4028234663852886e38", "0.000001", "1e-5", "12345e-5", "2.5e-3",
		"1e30", "-1e30", "1000000000000000000000000000000", "1.0000000000000001e30", "1.0000000000000002e30", "-1.0000000000000002e30",
		"999999999999999999999999999999", "1000000000000000019884624838656", "1000000000000000019884624838657", "10000000e23", "9007199254740993e22",
		"1" + strings.Repeat("0", 400), "0." + strings.Repeat("0", 400) + "1", strings.Repeat("9", 800),
		"1." + strings.Repeat("9", 40) + "e-10", "-" + strings.Repeat("1", 30) + "." + strings.Repeat("2", 30),
	}
	rng := newRand(2)
	for range 200000 {
		switch rng.IntN(4) {
		case 0: // any float64, shortest form
			f := math.Float64frombits(rng.Uint64())
			if !math.IsNaN(f) && !math.IsInf(f, 0) {
				inputs = append(inputs, strconv.FormatFloat(f, "eg"[rng.IntN(2)], -1, 64))
			}
		case 1: // any float64, rounded to some digits
			f := math.Float64frombits(rng.Uint64())
			if !math.IsNaN(f) && !math.IsInf(f, 0) {
				inputs = append(inputs, strconv.FormatFloat(f, 'e', rng.IntN(25), 64))
			}
		case 2: // digits, point and exponent at random
			inputs = append(inputs, randomDecimal(rng))
		default:
			inputs = append(inputs, randomNumber(rng))
		}
	}
	// The bytes after the number must not be read as part of it, whether
	// the input ends soon after it or goes on for 8 bytes and more (read
	// 8 at a time), with bytes that carry when 6 is added to them.
	tails := []string{",", "}\n{\"features\":{\"f1\":0.5}}", "\xfa\xff9999999", " 1234567890", ":/@`~"}
	for k, s := range inputs {
		b := []byte(s + tails[k%len(tails)])
		want, err := strconv.ParseFloat(s, 64)
		if e, ok := NumberEnd(b, 0); !ok || e != len(s) {
			t.Errorf("NumberEnd(%s) = %d, %v; want %d, true", s, e, ok, len(s))
		}
		// The bound of feature values, and none but the float64s.
		for _, bound := range []float64{1e30, math.MaxFloat64} {
			got, end, st := Number(b, 0, bound)
			wantSt := NumOK
			if !(math.Abs(want) <= bound) {
				wantSt = NumRange
			}
			switch {
			case end != len(s):
				t.Errorf("Number(%s) ended at %d, want %d", s, end, len(s))
			case err != nil && !math.IsInf(want, 0):
				t.Errorf("strconv.ParseFloat(%s): %v", s, err)
			case st != wantSt || !sameFloat(got, want):
				t.Errorf("Number(%s, bound %g) = %v (%#x, status %d), strconv says %v (%#x, status %d)", s, bound, got, math.Float64bits(got), st, want, math.Float64bits(want), wantSt)
			}
		}
	}
}

// randomDecimal is a JSON number with random digits, point and exponent.
func randomDecimal(rng *rand.Rand) string {
	var b strings.Builder
	if rng.IntN(2) == 0 {
		b.WriteByte('-')
	}
	digits := func(n int) {
		for range n {
			b.WriteByte(byte('0' + rng.IntN(10)))
		}
	}
	if rng.IntN(3) == 0 {
		b.WriteByte('0')
	} else {
		b.WriteByte(byte('1' + rng.IntN(9)))
		digits(rng.IntN(25))
	}
	if rng.IntN(2) == 0 {
		b.WriteByte('.')
		if rng.IntN(4) == 0 {
			b.WriteString(strings.Repeat("0", rng.IntN(30)))
		}
		digits(1 + rng.IntN(25))
	}
	if rng.IntN(2) == 0 {
		b.WriteString([]string{"e", "E", "e+", "e-", "E-"}[rng.IntN(5)])
		b.WriteString(strconv.Itoa(rng.IntN(400)))
	}
	return b.String()
}

func TestNumberRejectsWhatJSONRejects(t *testing.T) {
	for _, s := range []string{"", "-", "--1", "+1", "01", "-01", "00", "1.", "1.e5", ".5", "-.5", "1e", "1e+", "1E-", "1ee5", "0x10", "Inf", "-Inf", "NaN", "1_000"} {
		v, end, st := Number([]byte(s), 0, 1e30)
		if st == NumOK && end == len(s) {
			t.Errorf("Number(%q) = %v, want an error", s, v)
		}
		if end, ok := NumberEnd([]byte(s), 0); ok && end == len(s) {
			t.Errorf("NumberEnd(%q) accepted it", s)
		}
		if json.Valid([]byte(s)) {
			t.Errorf("test input %q is valid JSON", s)
		}
	}
}

func TestNumberErrors(t *testing.T) {
	tests := []struct {
		in, problem string
		eof         bool
	}{
		{"01", "malformed number at byte 0 (unexpected '1' at byte 1)", false},
		{"-01", "malformed number at byte 0 (unexpected '1' at byte 2)", false},
		{"1.x", "malformed number at byte 0 (unexpected 'x' at byte 2)", false},
		{"1e+]", "malformed number at byte 0 (unexpected ']' at byte 3)", false},
		{"-\n", "malformed number at byte 0 (unexpected byte 0x0a at byte 1)", false},
		{"-", "unexpected end of input at byte 1 (want a digit)", true},
		{"1.", "unexpected end of input at byte 2 (want a digit)", true},
		{"2E-", "unexpected end of input at byte 3 (want a digit)", true},
		{"-Infinity", "-Infinity is not a JSON number (JSON has no NaN or infinities)", false},
		{"-inf,", "-inf is not a JSON number (JSON has no NaN or infinities)", false},
		{"-NaN", "-NaN is not a JSON number (JSON has no NaN or infinities)", false},
		{"-info", "malformed number at byte 0 (unexpected 'i' at byte 1)", false},
	}
	for _, tt := range tests {
		b := []byte(tt.in)
		_, j, st := Number(b, 0, 1e30)
		if st != NumSyntax {
			t.Errorf("Number(%q): status %d, want NumSyntax", tt.in, st)
			continue
		}
		err := NumberError(b, 0, j)
		if err.Problem != tt.problem || errors.Is(err, io.ErrUnexpectedEOF) != tt.eof {
			t.Errorf("%q: error %q (end of input %v), want %q (end of input %v)", tt.in, err, errors.Is(err, io.ErrUnexpectedEOF), tt.problem, tt.eof)
		}
	}
}

// TestNumberBound: the status is NumRange exactly for the numbers beyond
// ±bound, whatever path of Number reads them.
func TestNumberBound(t *testing.T) {
	rng := newRand(4)
	for range 20000 {
		s := randomNumber(rng)
		if rng.IntN(2) == 0 {
			s = randomDecimal(rng)
		}
		want, _ := strconv.ParseFloat(s, 64)
		for _, bound := range []float64{1 << 53, 1e22, 1e30, 1e300} {
			_, _, st := Number([]byte(s), 0, bound)
			if got := st == NumRange; got != !(math.Abs(want) <= bound) {
				t.Fatalf("Number(%s, bound %g): status %d for %v", s, bound, st, want)
			}
		}
	}
}

// FuzzNumber checks Number and NumberEnd against strconv and encoding/json.
func FuzzNumber(f *testing.F) {
	for _, s := range []string{"0", "-0.0", "1e30", "-1.0000000000000002e30", "123456789012345678901234567890", "4e-324", "1e999", "01", "1.", "-", "NaN", "-Infinity", "1e+5x", "9007199254740993"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		const bound = 1e30
		v, end, st := Number(data, 0, bound)
		e, ok := NumberEnd(data, 0)
		if end < 0 || end > len(data) || e < 0 || e > len(data) {
			t.Fatalf("ends %d and %d out of %d bytes", end, e, len(data))
		}
		// NumberEnd takes the "0" of "01" as a number, which Number
		// refuses; otherwise they agree.
		if ok && (e == len(data) || !IsDigit(data[e])) && (st == NumSyntax || end != e) {
			t.Fatalf("NumberEnd: %d bytes; Number: status %d at %d", e, st, end)
		}
		if st == NumSyntax {
			err := NumberError(data, 0, end)
			if err == nil || errors.Is(err, io.ErrUnexpectedEOF) && end < len(data) {
				t.Fatalf("NumberError(%q, 0, %d) = %v", data, end, err)
			}
			return
		}
		if !ok || !json.Valid(data[:end]) {
			t.Fatalf("Number accepted %q, which is not a JSON number", data[:end])
		}
		want, _ := strconv.ParseFloat(string(data[:end]), 64)
		if !sameFloat(v, want) || (st == NumRange) != !(math.Abs(want) <= bound) {
			t.Fatalf("Number(%q) = %v, status %d; strconv says %v", data[:end], v, st, want)
		}
	})
}

func TestDigitRunAndValue(t *testing.T) {
	rng := newRand(3)
	var b [8]byte
	for range 1000000 {
		for k := range b {
			if rng.IntN(4) == 0 {
				b[k] = byte(rng.IntN(256))
			} else {
				b[k] = byte('0' + rng.IntN(10))
			}
		}
		want := 0
		for want < 8 && IsDigit(b[want]) {
			want++
		}
		w := binary.LittleEndian.Uint64(b[:])
		if got := digitRun(w); got != want {
			t.Fatalf("digitRun(%q) = %d, want %d", b, got, want)
		}
		var v uint64
		for _, c := range b[:want] {
			v = v*10 + uint64(c-'0')
		}
		if got := digitsValue(w, want); got != v {
			t.Fatalf("digitsValue(%q, %d) = %d, want %d", b, want, got, v)
		}
	}
}

// TestNumberShortForm checks the path of one digit, a point and one to
// seven more against strconv, with each byte that may follow such a
// number (an exponent's among them, which the path must leave to the
// general one) and with the input ending at every distance after it.
func TestNumberShortForm(t *testing.T) {
	rng := newRand(7)
	tails := []string{"", ",", "}", " ", "e5", "E-2", "e+1", "e", ".5", "x", "0", "9"}
	for range 20000 {
		var b strings.Builder
		if rng.IntN(4) == 0 {
			b.WriteByte('-')
		}
		b.WriteByte(byte('0' + rng.IntN(10)))
		b.WriteByte('.')
		for range 1 + rng.IntN(8) {
			b.WriteByte(byte('0' + rng.IntN(10)))
		}
		num := b.String()
		for _, tail := range tails {
			s := num + tail
			want, wantEnd := s, len(s)
			if e, ok := NumberEnd([]byte(s), 0); ok {
				want, wantEnd = s[:e], e
			}
			f, err := strconv.ParseFloat(want, 64)
			for pad := range 12 {
				in := []byte(s + strings.Repeat(",", pad))
				got, end, st := Number(in, 0, 1e30)
				switch {
				case err != nil:
					if st != NumSyntax {
						t.Fatalf("Number(%q) = %v, status %d; want a syntax error", in, got, st)
					}
				case st != NumOK || end != wantEnd || !sameFloat(got, f):
					t.Fatalf("Number(%q) = %v, %d, status %d; want %v, %d", in, got, end, st, f, wantEnd)
				}
			}
		}
	}
}
