package msgpackscan

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"strconv"
	"strings"
	"testing"

	"github.com/vmihailenco/msgpack/v5"
)

// encode is v as vmihailenco/msgpack writes it, in the smallest form.
func encode(tb testing.TB, v any) []byte {
	tb.Helper()
	var buf bytes.Buffer
	enc := msgpack.NewEncoder(&buf)
	enc.UseCompactInts(true)
	enc.UseCompactFloats(false)
	if err := enc.Encode(v); err != nil {
		tb.Fatalf("encode %v: %v", v, err)
	}
	return buf.Bytes()
}

func TestNumber(t *testing.T) {
	tests := []struct {
		name string
		data []byte
		want float64
		text string // of NumberText
	}{
		{"positive fixint", []byte{0x05}, 5, "5"},
		{"negative fixint", []byte{0xfd}, -3, "-3"},
		{"uint8", []byte{0xcc, 200}, 200, "200"},
		{"uint16", []byte{0xcd, 0xea, 0x60}, 60000, "60000"},
		{"uint32", binary.BigEndian.AppendUint32([]byte{0xce}, 4000000000), 4000000000, "4000000000"},
		{"uint64 max", binary.BigEndian.AppendUint64([]byte{0xcf}, math.MaxUint64), math.MaxUint64, "18446744073709551615"},
		{"int8", []byte{0xd0, 0x9c}, -100, "-100"},
		{"int16", binary.BigEndian.AppendUint16([]byte{0xd1}, uint16(0x10000-30000)), -30000, "-30000"},
		{"int32", binary.BigEndian.AppendUint32([]byte{0xd2}, uint32(0x100000000-2000000000)), -2000000000, "-2000000000"},
		{"int64 min", binary.BigEndian.AppendUint64([]byte{0xd3}, 1<<63), math.MinInt64, "-9223372036854775808"},
		{"int64 beyond 2^53", binary.BigEndian.AppendUint64([]byte{0xd3}, 1<<53+1), 1 << 53, "9007199254740993"},
		{"float32", binary.BigEndian.AppendUint32([]byte{0xca}, math.Float32bits(0.1)), float64(float32(0.1)), "0.1"},
		{"float32 infinity", binary.BigEndian.AppendUint32([]byte{0xca}, math.Float32bits(float32(math.Inf(1)))), math.Inf(1), "+Inf"},
		{"float64", binary.BigEndian.AppendUint64([]byte{0xcb}, math.Float64bits(0.1)), 0.1, "0.1"},
		{"float64 negative zero", binary.BigEndian.AppendUint64([]byte{0xcb}, 1<<63), math.Copysign(0, -1), "-0"},
		{"float64 NaN", binary.BigEndian.AppendUint64([]byte{0xcb}, math.Float64bits(math.NaN())), math.NaN(), "NaN"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			data := append(bytes.Clone(tt.data), 0xc0) // the next value is not read
			v, end, st := Number(data, 0)
			if st != OK || end != len(tt.data) || math.Float64bits(v) != math.Float64bits(tt.want) && !(math.IsNaN(v) && math.IsNaN(tt.want)) {
				t.Errorf("Number = %v, %d, status %d; want %v, %d", v, end, st, tt.want, len(tt.data))
			}
			if got := NumberText(tt.data); got != tt.text {
				t.Errorf("NumberText = %q, want %q", got, tt.text)
			}
			if IsInteger(tt.data[0]) {
				if got := string(AppendInteger([]byte("id "), tt.data)); got != "id "+tt.text {
					t.Errorf("AppendInteger = %q, want %q", got, "id "+tt.text)
				}
			}
			for n := range len(tt.data) {
				if _, end, st := Number(tt.data[:n], 0); st != Truncated || end != 0 {
					t.Errorf("%d of %d bytes: %d, status %d; want 0, Truncated", n, len(tt.data), end, st)
				}
			}
		})
	}
	for _, c := range []byte{0xc0, 0xc2, 0xa1, 0x90, 0x80, 0xc4, 0xd4} {
		if _, end, st := Number([]byte{c, 0, 0, 0, 0, 0, 0, 0, 0}, 0); st != WrongType || end != 0 {
			t.Errorf("Number(0x%02x...): %d, status %d; want 0, WrongType", c, end, st)
		}
	}
	if _, end, st := Number([]byte{0xc1}, 0); st != Invalid || end != 0 {
		t.Errorf("Number(0xc1): %d, status %d; want 0, Invalid", end, st)
	}
}

func TestString(t *testing.T) {
	header := func(code byte, width, n int) []byte {
		switch width {
		case 8:
			return []byte{code, byte(n)}
		case 16:
			return binary.BigEndian.AppendUint16([]byte{code}, uint16(n))
		}
		return binary.BigEndian.AppendUint32([]byte{code}, uint32(n))
	}
	type form struct {
		name string
		head []byte
	}
	s := strings.Repeat("s", 300)
	forms := []form{
		{"fixstr", []byte{0xa0 | 31}},
		{"str8", header(0xd9, 8, 31)},
		{"str16", header(0xda, 16, 31)},
		{"str32", header(0xdb, 32, 31)},
		{"bin8", header(0xc4, 8, 31)},
		{"bin16", header(0xc5, 16, 31)},
		{"bin32", header(0xc6, 32, 31)},
	}
	for _, f := range forms {
		data := append(append(bytes.Clone(f.head), s[:31]...), 0xc0)
		got, end, st := String(data, 0)
		if st != OK || string(got) != s[:31] || end != len(data)-1 {
			t.Errorf("%s: %q, %d, status %d", f.name, got, end, st)
		}
		if !IsString(data[0]) {
			t.Errorf("%s: IsString(0x%02x) is false", f.name, data[0])
		}
		for n := range len(data) - 1 {
			if _, end, st := String(data[:n], 0); st != Truncated || end != 0 {
				t.Errorf("%s, %d bytes: %d, status %d; want 0, Truncated", f.name, n, end, st)
			}
		}
	}
	// A length beyond the data, even beyond an int.
	if _, _, st := String(header(0xdb, 32, math.MaxUint32), 0); st != Truncated {
		t.Errorf("str32 of 2^32-1 bytes: status %d, want Truncated", st)
	}
	for _, c := range []byte{0x01, 0xc0, 0x90, 0x80, 0xcb} {
		if _, _, st := String([]byte{c, 0, 0, 0, 0, 0, 0, 0, 0}, 0); st != WrongType || IsString(c) {
			t.Errorf("String(0x%02x...): status %d, want WrongType", c, st)
		}
	}
	if _, _, st := String([]byte{0xc1}, 0); st != Invalid {
		t.Errorf("String(0xc1): status %d, want Invalid", st)
	}
}

func TestMapAndArrayLen(t *testing.T) {
	tests := []struct {
		name  string
		data  []byte
		read  func([]byte, int) (int, int, Status)
		n     int
		after int
		st    Status
	}{
		{"fixmap", []byte{0x82, 1, 2, 3, 4}, MapLen, 2, 1, OK},
		{"map16", []byte{0xde, 0, 2, 1, 2, 3, 4}, MapLen, 2, 3, OK},
		{"map32", []byte{0xdf, 0, 0, 0, 2, 1, 2, 3, 4}, MapLen, 2, 5, OK},
		{"map32 beyond the data", []byte{0xdf, 0, 0, 0, 10, 1, 2, 3, 4}, MapLen, 0, 0, Truncated},
		{"map16 header cut", []byte{0xde, 0}, MapLen, 0, 0, Truncated},
		{"array for a map", []byte{0x92, 1, 2}, MapLen, 0, 0, WrongType},
		{"fixarray", []byte{0x92, 1, 2}, ArrayLen, 2, 1, OK},
		{"array16", []byte{0xdc, 0, 2, 1, 2}, ArrayLen, 2, 3, OK},
		{"array32", []byte{0xdd, 0, 0, 0, 2, 1, 2}, ArrayLen, 2, 5, OK},
		{"array32 beyond the data", []byte{0xdd, 0xff, 0xff, 0xff, 0xff, 1}, ArrayLen, 0, 0, Truncated},
		{"array32 header cut", []byte{0xdd, 0, 0}, ArrayLen, 0, 0, Truncated},
		{"map for an array", []byte{0x81, 1, 2}, ArrayLen, 0, 0, WrongType},
		{"nothing", nil, ArrayLen, 0, 0, Truncated},
	}
	for _, tt := range tests {
		n, after, st := tt.read(tt.data, 0)
		if n != tt.n || after != tt.after || st != tt.st {
			t.Errorf("%s: %d, %d, status %d; want %d, %d, status %d", tt.name, n, after, st, tt.n, tt.after, tt.st)
		}
	}
}

func TestKind(t *testing.T) {
	values := map[string]any{
		"integer": []any{0, -1, uint8(200), int64(-1 << 40), uint64(1 << 63)},
		"float":   []any{float32(1.5), 2.5},
		"string":  []any{"", strings.Repeat("s", 40), strings.Repeat("s", 300)},
		"binary":  []any{[]byte{}, make([]byte, 300)},
		"array":   []any{[]any{}, make([]any, 20)},
		"map":     []any{map[string]any{}, map[string]any{"a": 1}},
		"nil":     []any{nil},
		"boolean": []any{true, false},
	}
	for want, vs := range values {
		for _, v := range vs.([]any) {
			b := encode(t, v)
			if got := Kind(b[0]); got != want {
				t.Errorf("Kind of %T %v (0x%02x) = %q, want %q", v, v, b[0], got, want)
			}
			if IsMap(b[0]) != (want == "map") || IsInteger(b[0]) != (want == "integer") || IsString(b[0]) != (want == "string" || want == "binary") {
				t.Errorf("%T %v (0x%02x): IsMap %v, IsInteger %v, IsString %v", v, v, b[0], IsMap(b[0]), IsInteger(b[0]), IsString(b[0]))
			}
		}
	}
	for _, c := range []byte{0xc7, 0xc8, 0xc9, 0xd4, 0xd5, 0xd6, 0xd7, 0xd8} {
		if got := Kind(c); got != "extension" {
			t.Errorf("Kind(0x%02x) = %q, want extension", c, got)
		}
	}
	if got := Kind(0xc1); got != "invalid type byte 0xc1" {
		t.Errorf("Kind(0xc1) = %q", got)
	}
}

// FuzzNumber checks Number against vmihailenco/msgpack.
func FuzzNumber(f *testing.F) {
	for _, v := range []any{0, -32, 127, uint8(200), uint64(math.MaxUint64), int64(math.MinInt64), float32(0.1), 0.1, math.NaN(), "s", nil} {
		f.Add(encode(f, v))
	}
	f.Add([]byte{0xc1})
	f.Add([]byte{0xcb, 0x3f})
	f.Fuzz(func(t *testing.T, data []byte) {
		v, end, st := Number(data, 0)
		if len(data) == 0 {
			if st != Truncated {
				t.Fatalf("Number of nothing: status %d", st)
			}
			return
		}
		if !IsInteger(data[0]) && data[0] != 0xca && data[0] != 0xcb {
			// Not a number. (The library would decode any value, and
			// may allocate for a huge header.)
			want := WrongType
			if data[0] == 0xc1 {
				want = Invalid
			}
			if st != want || end != 0 {
				t.Fatalf("Number of 0x%02x: %d, status %d; want 0, %d", data[0], end, st, want)
			}
			return
		}
		lib, err := msgpack.NewDecoder(bytes.NewReader(data)).DecodeInterface()
		var want float64
		isNumber := true
		switch n := lib.(type) {
		case int8:
			want = float64(n)
		case int16:
			want = float64(n)
		case int32:
			want = float64(n)
		case int64:
			want = float64(n)
		case uint8:
			want = float64(n)
		case uint16:
			want = float64(n)
		case uint32:
			want = float64(n)
		case uint64:
			want = float64(n)
		case float32:
			want = float64(n)
		case float64:
			want = n
		default:
			isNumber = false
		}
		switch {
		case st == OK && (err != nil || !isNumber || math.Float64bits(v) != math.Float64bits(want) && !(math.IsNaN(v) && math.IsNaN(want))):
			t.Fatalf("Number: %v; the library: %v (%T), %v", v, lib, lib, err)
		case st == OK && NumberText(data[:end]) != libText(lib):
			t.Fatalf("NumberText %q, the library %v", NumberText(data[:end]), lib)
		case st != OK && err == nil && isNumber:
			t.Fatalf("Number: status %d; the library read %v (%T)", st, lib, lib)
		case st == OK && IsInteger(data[0]) != isInteger(lib):
			t.Fatalf("IsInteger(0x%02x) = %v for %T", data[0], IsInteger(data[0]), lib)
		}
	})
}

// libText is the number n, as the library decoded it, in the form of
// NumberText.
func libText(n any) string {
	switch n := n.(type) {
	case float32:
		return strconv.FormatFloat(float64(n), 'g', -1, 32)
	case float64:
		return strconv.FormatFloat(n, 'g', -1, 64)
	}
	return fmt.Sprint(n)
}

func isInteger(n any) bool {
	switch n.(type) {
	case float32, float64:
		return false
	}
	return true
}
