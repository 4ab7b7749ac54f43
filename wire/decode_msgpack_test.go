package wire

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"testing"
	"testing/iotest"
	"time"

	"github.com/hyperplane-ml/hyperplane/internal/msgpackscan"
	"github.com/hyperplane-ml/hyperplane/learner"
	"github.com/vmihailenco/msgpack/v5"
)

// decodeMsgpackOnce decodes data with a fresh Decoder and checks that a
// successful decode used all of it.
func decodeMsgpackOnce(t *testing.T, cfg learner.Config, opts DecoderOptions, data []byte) (learner.Example, Meta, error) {
	t.Helper()
	var x learner.Example
	n, meta, err := NewDecoder(cfg, opts).DecodeMsgpack(data, &x)
	if err == nil && n != len(data) {
		t.Errorf("used %d bytes of %d", n, len(data))
	}
	return x, meta, err
}

func TestMsgpackNumberTypes(t *testing.T) {
	cfg := binaryConfig()
	tests := []struct {
		name  string
		value any
		want  float64
	}{
		{"positive fixint", 5, 5},
		{"negative fixint", -3, -3},
		{"uint8", uint8(200), 200},
		{"uint16", uint16(60000), 60000},
		{"uint32", uint32(4000000000), 4000000000},
		{"uint64", uint64(1 << 63), 1 << 63},
		{"uint64 max", uint64(math.MaxUint64), math.MaxUint64},
		{"int8", int8(-100), -100},
		{"int16", int16(-30000), -30000},
		{"int32", int32(-2000000000), -2000000000},
		{"int64", int64(-1 << 62), -1 << 62},
		{"int64 positive", int64(7), 7},
		{"float32", float32(0.5), 0.5},
		{"float32 inexact", float32(0.1), float64(float32(0.1))},
		{"float64", 0.1, 0.1},
		{"float64 negative zero", math.Copysign(0, -1), math.Copysign(0, -1)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			data := encodeMsgpack(t, mpMap{"features", mpMap{"a", tt.value}, "x", []any{tt.value}})
			x, _, err := decodeMsgpackOnce(t, cfg, DecoderOptions{}, data)
			if err != nil {
				t.Fatal(err)
			}
			index, value := sparse(cfg, "a", tt.want)
			if diff := diffExample(x, learner.Example{Index: index, Value: value, Dense: []float64{tt.want}}); diff != "" {
				t.Error(diff)
			}
			if tt.want > 0 {
				x, _, err := decodeMsgpackOnce(t, cfg, DecoderOptions{}, encodeMsgpack(t, mpMap{"weight", tt.value}))
				if err != nil || !sameFloat(x.Weight, tt.want) {
					t.Errorf("weight %v, %v; want %v", x.Weight, err, tt.want)
				}
			}
			if _, isFloat := tt.value.(float64); isFloat || strings.HasPrefix(tt.name, "float") {
				return
			}
			// Integers are ids too, as their decimal text.
			_, meta, err := decodeMsgpackOnce(t, cfg, DecoderOptions{}, encodeMsgpack(t, mpMap{"id", tt.value}))
			want := fmt.Sprint(tt.value)
			if err != nil || !meta.HasID || string(meta.ID) != want {
				t.Errorf("id %q (HasID %v), %v; want %q", meta.ID, meta.HasID, err, want)
			}
		})
	}
}

func TestMsgpackLabelTypes(t *testing.T) {
	tests := []struct {
		cfg   learner.Config
		label any
		want  int
	}{
		{binaryConfig(), uint8(1), 1},
		{binaryConfig(), int64(-1), -1},
		{binaryConfig(), int16(0), -1},
		{binaryConfig(), float32(1), 1},
		{binaryConfig(), float64(-1), -1},
		{binaryConfig(), true, 1},
		{namedConfig(), mpBin("pos"), 1},
		{namedConfig(), mpRaw{0xd9, 3, 'n', 'e', 'g'}, -1}, // str8
		{multiConfig(), uint16(2), 2},
		{multiConfig(), float32(1), 1},
		{multiConfig(), mpBin("bird"), 2},
	}
	for _, tt := range tests {
		x, _, err := decodeMsgpackOnce(t, tt.cfg, DecoderOptions{}, encodeMsgpack(t, mpMap{"label", tt.label}))
		if err != nil || !x.Labeled || x.Label != tt.want {
			t.Errorf("classes %v, label %#v: got %d (labeled %v), %v; want %d", tt.cfg.Classes, tt.label, x.Label, x.Labeled, err, tt.want)
		}
	}
}

// strHeader is the msgpack header of a str or bin of n bytes in the given
// width (8, 16 or 32 bits).
func strHeader(bin bool, width, n int) mpRaw {
	codes := map[int]byte{8: 0xd9, 16: 0xda, 32: 0xdb}
	if bin {
		codes = map[int]byte{8: 0xc4, 16: 0xc5, 32: 0xc6}
	}
	h := mpRaw{codes[width]}
	switch width {
	case 8:
		return append(h, byte(n))
	case 16:
		return binary.BigEndian.AppendUint16(h, uint16(n))
	}
	return binary.BigEndian.AppendUint32(h, uint32(n))
}

func TestMsgpackStringTypes(t *testing.T) {
	cfg := binaryConfig()
	for _, bin := range []bool{false, true} {
		for _, width := range []int{8, 16, 32} {
			name := strings.Repeat("n", 20+width)
			value := strings.Repeat("v", 30+width)
			str := func(s string) mpRaw { return append(strHeader(bin, width, len(s)), s...) }
			data := encodeMsgpack(t, mpMap{str("id"), str("the id"), str("features"), mpMap{str(name), str(value), str("n"), 1.5}})
			x, meta, err := decodeMsgpackOnce(t, cfg, DecoderOptions{}, data)
			if err != nil {
				t.Fatalf("bin %v, width %d: %v", bin, width, err)
			}
			index, values := sparse(cfg, name, value, "n", 1.5)
			if diff := diffExample(x, learner.Example{Index: index, Value: values}); diff != "" {
				t.Errorf("bin %v, width %d:\n%s", bin, width, diff)
			}
			if string(meta.ID) != "the id" {
				t.Errorf("bin %v, width %d: id %q", bin, width, meta.ID)
			}
		}
	}
}

func TestMsgpackContainerTypes(t *testing.T) {
	cfg := binaryConfig()
	// map16 and map32 features, array16 and array32 dense parts, as the
	// JSON equivalent.
	var features mpRaw
	features = binary.BigEndian.AppendUint16(append(features, 0xde), 2)
	features = append(features, encodeMsgpack(t, "a")...)
	features = append(features, encodeMsgpack(t, 1.5)...)
	features = append(features, encodeMsgpack(t, "b")...)
	features = append(features, encodeMsgpack(t, "c")...)
	var dense mpRaw
	dense = binary.BigEndian.AppendUint32(append(dense, 0xdd), 2)
	dense = append(dense, 1, 2)
	data := encodeMsgpack(t, mpRaw(binary.BigEndian.AppendUint32([]byte{0xdf}, 2)))
	data = append(data, encodeMsgpack(t, "features")...)
	data = append(data, features...)
	data = append(data, encodeMsgpack(t, "x")...)
	data = append(data, dense...)
	x, _, err := decodeMsgpackOnce(t, cfg, DecoderOptions{}, data)
	if err != nil {
		t.Fatal(err)
	}
	index, value := sparse(cfg, "a", 1.5, "b", "c")
	if diff := diffExample(x, learner.Example{Index: index, Value: value, Dense: []float64{1, 2}}); diff != "" {
		t.Error(diff)
	}
}

// TestMaxValueBits: the fast path's test on bits is inRange.
func TestMaxValueBits(t *testing.T) {
	if got := math.Float64bits(learner.MaxValue); got != maxValueBits {
		t.Fatalf("maxValueBits is %#x, learner.MaxValue has the bits %#x", uint64(maxValueBits), got)
	}
	up, down := math.Nextafter(learner.MaxValue, math.Inf(1)), math.Nextafter(learner.MaxValue, 0)
	for _, v := range []float64{0, math.Copysign(0, -1), 5e-324, 1, down, learner.MaxValue, up, 1e300, math.MaxFloat64, math.Inf(1), math.NaN()} {
		for _, v := range []float64{v, -v} {
			if fast := math.Float64bits(v)&^(1<<63) <= maxValueBits; fast != inRange(v) {
				t.Errorf("%v: the bits say %v, inRange %v", v, fast, inRange(v))
			}
		}
	}
}

func TestMsgpackErrors(t *testing.T) {
	small := binaryConfig()
	small.HashBits = 2
	nan := math.NaN()
	tests := []struct {
		name    string
		cfg     learner.Config
		opts    DecoderOptions
		value   any
		field   string
		problem string
		eof     bool
	}{
		{"NaN feature", binaryConfig(), DecoderOptions{}, mpMap{"features", mpMap{"a", nan}}, "features.a", "NaN " + outOfRangeProblem, false},
		{"infinite float32 feature", binaryConfig(), DecoderOptions{}, mpMap{"features", mpMap{"a", float32(math.Inf(1))}}, "features.a", "+Inf " + outOfRangeProblem, false},
		{"NaN float32 dense", binaryConfig(), DecoderOptions{}, mpMap{"x", []any{1, float32(nan)}}, "x[1]", "NaN " + outOfRangeProblem, false},
		{"float64 feature 1e200", binaryConfig(), DecoderOptions{}, mpMap{"label", -1, "features", mpMap{"a", 1e200}}, "features.a", "1e+200 " + outOfRangeProblem, false},
		{"float64 feature -Inf", binaryConfig(), DecoderOptions{}, mpMap{"features", mpMap{"a", math.Inf(-1)}}, "features.a", "-Inf " + outOfRangeProblem, false},
		{"float32 feature beyond the bound", binaryConfig(), DecoderOptions{}, mpMap{"features", mpMap{"a", float32(math.MaxFloat32)}}, "features.a", "3.4028235e+38 " + outOfRangeProblem, false},
		{"float64 dense beyond the bound", binaryConfig(), DecoderOptions{}, mpMap{"x", []any{1, -1.5e30}}, "x[1]", "-1.5e+30 " + outOfRangeProblem, false},
		{"NaN weight", binaryConfig(), DecoderOptions{}, mpMap{"weight", nan}, "weight", "NaN is not a positive number up to 1e+30", false},
		{"weight beyond the bound", binaryConfig(), DecoderOptions{}, mpMap{"weight", float32(1e31)}, "weight", "is not a positive number up to 1e+30", false},
		{"deep unknown value", binaryConfig(), DecoderOptions{}, mpMap{"u", mpRaw(bytes.Repeat([]byte{0x91}, MaxDepth+1)), "x", []any{}}, "u", "values nest deeper than 1000 at byte 1003", false},
		{"deep unknown value of 16-bit arrays", binaryConfig(), DecoderOptions{}, mpMap{"u", mpRaw(append(bytes.Repeat([]byte{0xdc, 0, 1}, MaxDepth+1), 0xc0))}, "u", "values nest deeper than 1000 at byte 3003", false},
		{"NaN label", binaryConfig(), DecoderOptions{}, mpMap{"label", nan}, "label", "NaN is not a binary label", false},
		{"integer feature name", binaryConfig(), DecoderOptions{}, mpMap{"features", mpMap{1, 2}}, "features", "value is not a string feature name (got integer)", false},
		{"integer key", binaryConfig(), DecoderOptions{}, mpMap{7, 2}, "example", "value is not a string key (got integer)", false},
		{"extension feature", binaryConfig(), DecoderOptions{}, mpMap{"features", mpMap{"a", mpExt{5, []byte{1, 2, 3}}}}, "features.a", "value is not a number or string (got extension)", false},
		{"map feature", binaryConfig(), DecoderOptions{}, mpMap{"features", mpMap{"a", mpMap{}}}, "features.a", "value is not a number or string (got map)", false},
		{"nil feature", binaryConfig(), DecoderOptions{}, mpMap{"features", mpMap{"a", nil}}, "features.a", "(got nil)", false},
		{"invalid byte feature", binaryConfig(), DecoderOptions{}, mpMap{"features", mpMap{"a", mpRaw{0xc1}}}, "features.a", "invalid msgpack type byte 0xc1 at byte", false},
		{"invalid byte in an unknown key", binaryConfig(), DecoderOptions{}, mpMap{"u", []any{mpMap{"v", mpRaw{0xc1}}}}, "u", "invalid msgpack type byte 0xc1 at byte 7", false},
		{"invalid byte at the top", binaryConfig(), DecoderOptions{}, mpRaw{0xc1}, "example", "invalid msgpack type byte 0xc1", false},
		{"array at the top", binaryConfig(), DecoderOptions{}, []any{1}, "example", "value is not a map (got array)", false},
		{"float id", binaryConfig(), DecoderOptions{}, mpMap{"id", 1.5}, "id", "value is not a string or an integer (got float)", false},
		{"boolean id", binaryConfig(), DecoderOptions{}, mpMap{"id", true}, "id", "(got boolean)", false},
		{"extension label", binaryConfig(), DecoderOptions{}, mpMap{"label", mpExt{1, []byte{1}}}, "label", "(got extension)", false},
		{"bin label unknown class", multiConfig(), DecoderOptions{}, mpMap{"label", mpBin("fish")}, "label", `unknown class "fish"`, false},
		{"uint64 label", multiConfig(), DecoderOptions{}, mpMap{"label", uint64(math.MaxUint64)}, "label", "class 18446744073709551615 is out of range", false},
		{"float32 label", binaryConfig(), DecoderOptions{}, mpMap{"label", float32(0.5)}, "label", "0.5 is not a binary label", false},
		{"string x", binaryConfig(), DecoderOptions{}, mpMap{"x", "abc"}, "x", "value is not an array (got string)", false},
		{"map x", binaryConfig(), DecoderOptions{}, mpMap{"x", mpMap{}}, "x", "(got map)", false},
		{"binary weight", binaryConfig(), DecoderOptions{}, mpMap{"weight", mpBin{1}}, "weight", "value is not a number (got binary)", false},
		{"duplicate bin and str key", binaryConfig(), DecoderOptions{}, mpMap{"x", []any{}, mpBin("x"), []any{}}, "x", "duplicate key", false},
		{"dense header over the dimension", small, DecoderOptions{}, mpMap{"x", []any{1, 2, 3, 4, 5}}, "x", "more than 4 values (the model's dimension)", false},
		{"map header over MaxFeatures", binaryConfig(), DecoderOptions{MaxFeatures: 2}, mpMap{"features", mpMap{"a", 1, "b", 2, "c", 3}}, "features", "more than 2 features", false},
		{"array header over MaxFeatures", binaryConfig(), DecoderOptions{MaxFeatures: 2}, mpMap{"x", []any{1, 2, 3}}, "x", "more than 2 features, features and x together", false},
		{"map32 header beyond the data", binaryConfig(), DecoderOptions{}, mpRaw{0xdf, 0xff, 0xff, 0xff, 0xff, 0xa1, 'a'}, "example", "unexpected end of data at byte 0", true},
		{"features map32 header beyond the data", binaryConfig(), DecoderOptions{}, mpMap{"features", mpRaw{0xdf, 0xff, 0xff, 0xff, 0xff}}, "features", "unexpected end of data", true},
		{"dense array32 header beyond the data", binaryConfig(), DecoderOptions{}, mpMap{"x", mpRaw{0xdd, 0x7f, 0xff, 0xff, 0xff, 1}}, "x", "unexpected end of data", true},
		{"str32 header beyond the data", binaryConfig(), DecoderOptions{}, mpMap{"features", mpMap{mpRaw{0xdb, 0xff, 0xff, 0xff, 0xf0, 'a'}, 1}}, "features", "unexpected end of data", true},
		{"truncated float", binaryConfig(), DecoderOptions{}, mpRaw{0x81, 0xa1, 'x', 0x91, 0xcb, 0, 0}, "x[0]", "unexpected end of data at byte 4", true},
		{"truncated name", binaryConfig(), DecoderOptions{}, mpRaw{0x81, 0xa8, 'f', 'e', 'a'}, "example", "unexpected end of data at byte 1", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			data := encodeMsgpack(t, tt.value)
			x, _, err := decodeMsgpackOnce(t, tt.cfg, tt.opts, data)
			checkDecodeError(t, "msgpack", err, tt.field, tt.problem)
			if got := errors.Is(err, io.ErrUnexpectedEOF); got != tt.eof {
				t.Errorf("errors.Is(%v, io.ErrUnexpectedEOF) = %v, want %v", err, got, tt.eof)
			}
			if x.NNZ() != 0 || x.Labeled || x.Weight != 0 {
				t.Errorf("example not reset: %+v", x)
			}
		})
	}
}

// TestDecodeMsgpackReportsTheLength checks that a reader of a buffer of
// maps can step over a map that is not a valid example.
func TestDecodeMsgpackReportsTheLength(t *testing.T) {
	cfg := binaryConfig()
	maps := [][]byte{
		encodeMsgpack(t, mpMap{"label", 1, "features", mpMap{"a", 1.5}}),
		encodeMsgpack(t, mpMap{"label", 1, "features", mpMap{"a", math.NaN()}, "u", []any{"long", "tail"}}),
		encodeMsgpack(t, mpMap{"label", "yes", "u", 1}),
		encodeMsgpack(t, mpMap{"id", 5, "features", mpMap{"b", "c"}}),
	}
	valid := []bool{true, false, false, true}
	buf := bytes.Join(maps, nil)
	d := NewDecoder(cfg, DecoderOptions{})
	var x learner.Example
	for k, m := range maps {
		n, _, err := d.DecodeMsgpack(buf, &x)
		if (err == nil) != valid[k] {
			t.Errorf("map %d: error %v, want valid %v", k, err, valid[k])
		}
		if n != len(m) {
			t.Fatalf("map %d: used %d bytes, want %d", k, n, len(m))
		}
		buf = buf[n:]
	}
	if len(buf) != 0 {
		t.Errorf("%d bytes left", len(buf))
	}
	// A malformed map has no length to report.
	bad := append(encodeMsgpack(t, mpMap{"u", mpRaw{0xc1}}), maps[0]...)
	if n, _, err := d.DecodeMsgpack(bad, &x); err == nil || n != 0 {
		t.Errorf("malformed map: used %d bytes, error %v; want 0 and an error", n, err)
	}
}

func TestDecodeMsgpackSizeLimit(t *testing.T) {
	cfg := binaryConfig()
	big := encodeMsgpack(t, mpMap{"features", mpMap{strings.Repeat("a", 40), 1}})
	small := encodeMsgpack(t, mpMap{"features", mpMap{"b", 1}})
	limit := DecoderOptions{MaxBytes: 30}
	t.Run("alone", func(t *testing.T) {
		var x learner.Example
		n, _, err := NewDecoder(cfg, limit).DecodeMsgpack(big, &x)
		checkDecodeError(t, "msgpack", err, "payload", strconv.Itoa(len(big))+" bytes exceed the limit of 30")
		if n != len(big) {
			t.Errorf("used %d bytes, want %d", n, len(big))
		}
	})
	t.Run("before another map", func(t *testing.T) {
		var x learner.Example
		n, _, err := NewDecoder(cfg, limit).DecodeMsgpack(append(bytes.Clone(big), small...), &x)
		checkDecodeError(t, "msgpack", err, "payload", strconv.Itoa(len(big))+" bytes exceed the limit of 30")
		if n != len(big) {
			t.Errorf("used %d bytes, want %d", n, len(big))
		}
	})
	t.Run("a whole message, however it begins", func(t *testing.T) {
		// A message is refused for its size first, in every format and
		// with the challengers' hashings, even when its first bytes are
		// no msgpack map: JSON read as msgpack, or a malformed map.
		for name, data := range map[string][]byte{
			"JSON":      []byte(`{"features":{"` + strings.Repeat("a", 40) + `":1}}`),
			"malformed": append([]byte{0x81, 0xc1}, big...),
		} {
			for _, format := range []Format{FormatMsgpack, FormatJSON, FormatAuto} {
				var x learner.Example
				_, err := NewDecoder(cfg, limit).DecodeMessage(data, format, &x)
				checkDecodeError(t, name+" as "+string(format), err, "payload", strconv.Itoa(len(data))+" bytes exceed the limit of 30")
				ocfg := binaryConfig()
				ocfg.HashSeed = 7
				other := NewDecoder(ocfg, limit)
				_, err = NewDecoder(cfg, limit).DecodeHashings(data, format, &x, []*Decoder{other}, []*learner.Example{{}}, []error{nil})
				checkDecodeError(t, name+" as "+string(format)+" with hashings", err, "payload", strconv.Itoa(len(data))+" bytes exceed the limit of 30")
			}
		}
	})
	t.Run("truncated past the limit", func(t *testing.T) {
		var x learner.Example
		_, _, err := NewDecoder(cfg, limit).DecodeMsgpack(big[:35], &x)
		checkDecodeError(t, "msgpack", err, "payload", "the map runs past the limit of 30 bytes")
		if errors.Is(err, io.ErrUnexpectedEOF) {
			t.Error("a map over the limit is not a truncation")
		}
	})
	t.Run("limit per map, not per buffer", func(t *testing.T) {
		buf := bytes.Repeat(small, 10)
		d := NewDecoder(cfg, DecoderOptions{MaxBytes: len(small)})
		var x learner.Example
		for len(buf) > 0 {
			n, _, err := d.DecodeMsgpack(buf, &x)
			if err != nil {
				t.Fatal(err)
			}
			buf = buf[n:]
		}
	})
}

// allTypes is one msgpack value of every type and width, nested, with the
// containers in every header width.
func allTypes(tb testing.TB) []byte {
	values := []any{
		nil, true, false, 0, 127, -1, -32, uint8(255), uint16(65535), uint32(1 << 31), uint64(1 << 63),
		int8(-128), int16(-32768), int32(-1 << 31), int64(-1 << 63), float32(1.5), 2.5,
		"", "fixstr", strings.Repeat("s", 200), strings.Repeat("s", 300), mpRaw(append(strHeader(false, 32, 3), "s32"...)),
		mpBin{}, mpBin(strings.Repeat("b", 300)), mpRaw(append(strHeader(true, 32, 2), "b3"...)),
		mpExt{1, []byte{1}}, mpExt{2, []byte{1, 2}}, mpExt{3, []byte{1, 2, 3, 4}}, mpExt{4, make([]byte, 8)},
		mpExt{5, make([]byte, 16)}, mpExt{6, make([]byte, 3)}, mpExt{7, make([]byte, 300)}, mpExt{-1, make([]byte, 70000)},
		mpRaw{0xdc, 0, 2, 1, 2}, mpRaw{0xdd, 0, 0, 0, 1, 0xc0}, mpRaw{0xde, 0, 1, 0xa1, 'k', 1}, mpRaw{0xdf, 0, 0, 0, 1, 0xa1, 'k', 0x90},
		[]any{}, mpMap{}, make([]any, 20), mpMap{"a", []any{mpMap{"b", []any{[]any{nil}}}}},
	}
	nested := any(values)
	for range 200 {
		nested = []any{mpMap{"n", nested}}
	}
	return encodeMsgpack(tb, mpMap{"all", values, "nested", nested})
}

func TestSplitMsgpack(t *testing.T) {
	tokens := [][]byte{
		encodeMsgpack(t, mpMap{"label", 1, "features", mpMap{"a", 1.5}}),
		allTypes(t),
		encodeMsgpack(t, 7), // a stream may hold values other than maps
		encodeMsgpack(t, mpMap{"id", "x", "features", mpMap{"b", "c"}, "x", []any{1, 2}}),
		encodeMsgpack(t, mpMap{}),
	}
	stream := bytes.Join(tokens, nil)

	t.Run("direct", func(t *testing.T) {
		data := stream
		for k, want := range tokens {
			advance, token, err := SplitMsgpack(data, false)
			if err != nil || advance != len(want) || !bytes.Equal(token, want) {
				t.Fatalf("token %d: advance %d, %d bytes, %v; want %d bytes", k, advance, len(token), err, len(want))
			}
			data = data[advance:]
		}
		if advance, token, err := SplitMsgpack(data, true); advance != 0 || token != nil || err != nil {
			t.Errorf("at the end: %d, %v, %v; want nothing", advance, token, err)
		}
	})
	t.Run("every prefix asks for more", func(t *testing.T) {
		for _, tok := range tokens {
			for n := range len(tok) {
				if advance, token, err := SplitMsgpack(tok[:n], false); advance != 0 || token != nil || err != nil {
					t.Fatalf("%d of %d bytes: %d, %v, %v; want a request for more", n, len(tok), advance, token, err)
				}
			}
		}
	})
	readers := map[string]func() io.Reader{
		"one byte at a time": func() io.Reader { return iotest.OneByteReader(bytes.NewReader(stream)) },
		"half reads":         func() io.Reader { return iotest.HalfReader(bytes.NewReader(stream)) },
		"error with data":    func() io.Reader { return iotest.DataErrReader(bytes.NewReader(stream)) },
		"whole":              func() io.Reader { return bytes.NewReader(stream) },
	}
	for name, reader := range readers {
		t.Run("scanner, "+name, func(t *testing.T) {
			s := bufio.NewScanner(reader())
			s.Buffer(make([]byte, 0, 7), 1<<20) // a small buffer: boundaries fall inside maps
			s.Split(SplitMsgpack)
			k := 0
			for s.Scan() {
				if k >= len(tokens) || !bytes.Equal(s.Bytes(), tokens[k]) {
					t.Fatalf("token %d: %d bytes, not the one written", k, len(s.Bytes()))
				}
				k++
			}
			if err := s.Err(); err != nil || k != len(tokens) {
				t.Errorf("%d tokens, %v; want %d tokens", k, err, len(tokens))
			}
		})
	}
	t.Run("scanner decodes examples", func(t *testing.T) {
		cfg := binaryConfig()
		s := bufio.NewScanner(iotest.OneByteReader(bytes.NewReader(append(bytes.Clone(tokens[0]), tokens[3]...))))
		s.Buffer(make([]byte, 0, 5), 1024)
		s.Split(SplitMsgpack)
		d := NewDecoder(cfg, DecoderOptions{})
		var got []learner.Example
		for s.Scan() {
			var x learner.Example
			if _, err := d.Decode(s.Bytes(), &x); err != nil {
				t.Fatal(err)
			}
			got = append(got, x)
		}
		i1, v1 := sparse(cfg, "a", 1.5)
		i2, v2 := sparse(cfg, "b", "c")
		want := []learner.Example{{Index: i1, Value: v1, Labeled: true, Label: 1}, {Index: i2, Value: v2, Dense: []float64{1, 2}}}
		if len(got) != len(want) {
			t.Fatalf("%d examples, want %d", len(got), len(want))
		}
		for k := range want {
			if diff := diffExample(got[k], want[k]); diff != "" {
				t.Errorf("example %d:\n%s", k, diff)
			}
		}
	})
	t.Run("truncated stream", func(t *testing.T) {
		// The stream ends one byte into the last but one token.
		s := bufio.NewScanner(bytes.NewReader(stream[:len(stream)-len(tokens[4])-1]))
		s.Buffer(nil, 1<<20)
		s.Split(SplitMsgpack)
		k := 0
		for s.Scan() {
			k++
		}
		if k != len(tokens)-2 || !errors.Is(s.Err(), io.ErrUnexpectedEOF) {
			t.Errorf("%d tokens, %v; want %d and io.ErrUnexpectedEOF", k, s.Err(), len(tokens)-2)
		}
	})
	t.Run("invalid type byte", func(t *testing.T) {
		bad := append(bytes.Clone(tokens[0]), 0x92, 0x01, 0xc1)
		s := bufio.NewScanner(bytes.NewReader(bad))
		s.Split(SplitMsgpack)
		k := 0
		for s.Scan() {
			k++
		}
		var de *DecodeError
		if k != 1 || !errors.As(s.Err(), &de) || !strings.Contains(de.Problem, "invalid msgpack type byte 0xc1 at byte 2") {
			t.Errorf("%d tokens, %v; want 1 and an invalid type byte", k, s.Err())
		}
	})
	t.Run("value longer than the buffer", func(t *testing.T) {
		s := bufio.NewScanner(bytes.NewReader(tokens[1]))
		s.Buffer(nil, 1000)
		s.Split(SplitMsgpack)
		if s.Scan() || !errors.Is(s.Err(), bufio.ErrTooLong) {
			t.Errorf("Scan: %v; want bufio.ErrTooLong", s.Err())
		}
	})
}

// TestSplitMsgpackAgreesWithTheLibrary splits random values that
// vmihailenco/msgpack encodes.
func TestSplitMsgpackAgreesWithTheLibrary(t *testing.T) {
	rng := newRand(5)
	var values [][]byte
	for range 300 {
		b, err := msgpack.Marshal(randomValue(rng, 4))
		if err != nil {
			t.Fatal(err)
		}
		values = append(values, b)
	}
	stream := bytes.Join(values, nil)
	for k, want := range values {
		advance, token, err := SplitMsgpack(stream, true)
		if err != nil || !bytes.Equal(token, want) {
			t.Fatalf("value %d: %d bytes, %v; want %d bytes", k, len(token), err, len(want))
		}
		stream = stream[advance:]
	}
}

func randomValue(rng *rand.Rand, depth int) any {
	n := 12
	if depth == 0 {
		n = 9
	}
	switch rng.IntN(n) {
	case 0:
		return nil
	case 1:
		return rng.IntN(2) == 0
	case 2:
		return rng.Int64() >> rng.IntN(64)
	case 3:
		return rng.Uint64() >> rng.IntN(64)
	case 4:
		return float32(rng.NormFloat64())
	case 5:
		return rng.NormFloat64()
	case 6:
		return strings.Repeat("s", rng.IntN([]int{32, 256, 70000}[rng.IntN(3)]))
	case 7:
		return make([]byte, rng.IntN([]int{256, 70000}[rng.IntN(2)]))
	case 8:
		return time.Unix(rng.Int64N(1<<40), rng.Int64N(1e9)) // extension -1
	case 9, 10:
		m := map[string]any{}
		for i := range rng.IntN(20) {
			m["k"+strconv.Itoa(i)] = randomValue(rng, depth-1)
		}
		return m
	default:
		a := make([]any, rng.IntN(20))
		for i := range a {
			a[i] = randomValue(rng, depth-1)
		}
		return a
	}
}

func FuzzDecodeMsgpack(f *testing.F) {
	for _, e := range typicalExamples(f, 2) {
		f.Add(e.msgpack)
	}
	f.Add(encodeMsgpack(f, mpMap{"id", 7, "label", "dog", "features", mpMap{"a", float32(1), mpBin("b"), mpBin("c")}, "x", []any{uint8(1), -2}, "weight", 0.5, "u", mpExt{1, []byte{1}}}))
	f.Add(encodeMsgpack(f, mpMap{"label", "pos", "features", mpMap{}, "x", []any{}}))
	f.Add(encodeMsgpack(f, mpMap{"label", -1, "features", mpMap{"a", 1e200, "b", 1e30, "c", float32(-1e31)}, "x", []any{math.NaN(), math.Inf(-1)}, "weight", 1e31}))
	f.Add(encodeMsgpack(f, mpMap{"u", mpRaw(append(bytes.Repeat([]byte{0x91}, MaxDepth+1), 0xc0)), "label", 1}))
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, cfg := range fuzzConfigs() {
			d := NewDecoder(cfg, fuzzOptions())
			var x learner.Example
			n, meta, err := d.DecodeMsgpack(data, &x)
			var de *DecodeError
			if err != nil && !errors.As(err, &de) {
				t.Fatalf("error %v is a %T, not a *DecodeError", err, err)
			}
			if n < 0 || n > len(data) {
				t.Fatalf("used %d bytes of %d", n, len(data))
			}
			end, st := msgpackscan.Skip(data, 0)
			if err == nil {
				checkDecoded(t, cfg, &x)
				if st != msgpackscan.OK || n != end {
					t.Fatalf("used %d bytes; msgpackscan.Skip says %d, status %d", n, end, st)
				}
			}
			if n > 0 && (st != msgpackscan.OK || n != end) {
				t.Fatalf("error %v with %d bytes used; msgpackscan.Skip says %d, status %d", err, n, end, st)
			}
			// SplitMsgpack finds the same value.
			advance, token, splitErr := SplitMsgpack(data, true)
			if st == msgpackscan.OK && (splitErr != nil || advance != end || len(token) != end) {
				t.Fatalf("SplitMsgpack: %d, %d bytes, %v; msgpackscan.Skip says %d", advance, len(token), splitErr, end)
			}
			if st != msgpackscan.OK && len(data) > 0 && splitErr == nil {
				t.Fatalf("SplitMsgpack accepted what msgpackscan.Skip refused (status %d)", st)
			}
			// vmihailenco/msgpack agrees on where the value ends.
			r := bytes.NewReader(data)
			libErr := msgpack.NewDecoder(r).Skip()
			if (libErr == nil) != (st == msgpackscan.OK) || libErr == nil && len(data)-r.Len() != end {
				t.Fatalf("msgpack.Decoder.Skip: %v after %d bytes; msgpackscan.Skip: %d bytes, status %d", libErr, len(data)-r.Len(), end, st)
			}
			// The map alone decodes the same, and the scratch buffers do not
			// leak one example into the next.
			if st == msgpackscan.OK {
				id := bytes.Clone(meta.ID)
				var x2 learner.Example
				n2, meta2, err2 := d.DecodeMsgpack(data[:end], &x2)
				if n2 != n || (err == nil) != (err2 == nil) || diffExample(x, x2) != "" || !bytes.Equal(id, meta2.ID) {
					t.Fatalf("decoding the map alone differs: %d %v %+v, then %d %v %+v", n, err, x, n2, err2, x2)
				}
			}
		}
	})
}

func BenchmarkDecodeMsgpack(b *testing.B) {
	examples := typicalExamples(b, 256)
	d := NewDecoder(learner.DefaultConfig(), DecoderOptions{})
	var x learner.Example
	size := 0
	for _, e := range examples {
		size += len(e.msgpack)
	}
	b.SetBytes(int64(size / len(examples)))
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		if _, _, err := d.DecodeMsgpack(examples[i%len(examples)].msgpack, &x); err != nil {
			b.Fatal(err)
		}
	}
}

// fileRecord is what a test keeps of a Record.
type fileRecord struct {
	n       int
	x       learner.Example
	id      string
	hasID   bool
	err     string
	payload string
}

func (r fileRecord) String() string {
	return fmt.Sprintf("record %d: id %q (%t), err %q, %+v, payload %x", r.n, r.id, r.hasID, r.err, r.x, r.payload)
}

// splitThenDecode is the reference for ReadExamples over msgpack: each
// value split off with SplitMsgpack, then decoded alone with Decode; white
// space at the end is no record. It returns the records and the error
// that ends the stream, if any.
func splitThenDecode(d *Decoder, data []byte) ([]fileRecord, string) {
	var recs []fileRecord
	for n := 1; len(bytes.TrimLeft(data, " \t\r\n")) > 0; n++ {
		adv, tok, err := SplitMsgpack(data, true)
		if err != nil {
			return recs, fmt.Sprintf("record %d: %v", n, err)
		}
		var x learner.Example
		meta, err := d.Decode(tok, &x)
		r := fileRecord{n: n, x: x, id: string(meta.ID), hasID: meta.HasID, payload: string(tok)}
		if err != nil {
			r.err = err.Error()
		}
		recs = append(recs, r)
		data = data[adv:]
	}
	return recs, ""
}

// checkReadMsgpack reads data with ReadExamples, as msgpack, in chunks of
// every size of chunks, and fails unless it gives the records and error
// of splitThenDecode.
func checkReadMsgpack(t *testing.T, cfg learner.Config, opts DecoderOptions, data []byte, chunks ...int) {
	t.Helper()
	want, wantErr := splitThenDecode(NewDecoder(cfg, opts), data)
	for _, chunk := range chunks {
		var got []fileRecord
		err := ReadExamples(context.Background(), bytes.NewReader(data), func() *Decoder { return NewDecoder(cfg, opts) },
			ReadOptions{Format: FormatMsgpack, Workers: 2, ChunkSize: chunk}, func(r *Record) error {
				f := fileRecord{n: r.N, id: string(r.Meta.ID), hasID: r.Meta.HasID, payload: string(r.Payload)}
				if r.Err != nil {
					f.err = r.Err.Error()
				} else {
					f.x = learner.Example{Index: slices.Clone(r.Example.Index), Value: slices.Clone(r.Example.Value), Dense: slices.Clone(r.Example.Dense),
						Labeled: r.Example.Labeled, Label: r.Example.Label, Weight: r.Example.Weight}
				}
				got = append(got, f)
				return nil
			})
		gotErr := ""
		if err != nil {
			gotErr = err.Error()
		}
		if gotErr != wantErr {
			t.Fatalf("chunks of %d: error %q, want %q", chunk, gotErr, wantErr)
		}
		if len(got) != len(want) {
			t.Fatalf("chunks of %d: %d records, want %d:\n%v\nwant\n%v", chunk, len(got), len(want), got, want)
		}
		for i := range want {
			g, w := got[i], want[i]
			if g.n != w.n || g.id != w.id || g.hasID != w.hasID || g.err != w.err || g.payload != w.payload || diffExample(g.x, w.x) != "" {
				t.Fatalf("chunks of %d:\n%v\nwant\n%v", chunk, g, w)
			}
		}
	}
}

// TestReadExamplesMsgpackAgreesWithSplitting reads streams of good and
// bad maps and other values: decoding each map where it starts, to find
// where it ends, gives the records, numbers, errors and end of the
// stream that splitting it first and then decoding gave.
func TestReadExamplesMsgpackAgreesWithSplitting(t *testing.T) {
	var typical []byte
	for _, e := range typicalExamples(t, 40) {
		typical = append(typical, e.msgpack...)
	}
	long := strings.Repeat("n", 40) // a str8 name
	mixed := slices.Concat(
		encodeMsgpack(t, mpMap{"id", 7, "label", "dog", "features", mpMap{"a", float32(1), mpBin("b"), mpBin("c"), long, "v", "d", uint8(3)}, "x", []any{uint8(1), -2}, "weight", 0.5, "u", mpExt{1, []byte{1}}}),
		encodeMsgpack(t, mpMap{"label", "fish", "features", mpMap{"a", 1.0}}), // no such class
		[]byte("\n "), // white space between maps: a record each
		encodeMsgpack(t, []any{1, 2}),
		encodeMsgpack(t, mpMap{"id", "big", "label", "cat", "features", mpMap{"a", 1.0}, "pad", strings.Repeat("p", 5000)}), // beyond MaxBytes
		encodeMsgpack(t, mpMap{"label", "bird", "features", mpMap{"a", 1.0, "a", 2.0}}),
		encodeMsgpack(t, mpMap{"label", "cat", "label", "dog"}), // duplicate key
		encodeMsgpack(t, mpMap{"id", uint64(1) << 40, "label", "bird", "features", mpMap{long + "x", "y", "z", -3.5}}),
		encodeMsgpack(t, mpMap{"label", "cat", "features", mpMap{"a", math.NaN()}}),
		[]byte("{}"),
		encodeMsgpack(t, mpMap{"label", "dog", "features", mpMap{}}),
	)
	tail := encodeMsgpack(t, mpMap{"label", "cat", "features", mpMap{"a", 1.0}})
	cases := []struct {
		name string
		cfg  learner.Config
		data []byte
	}{
		{"typical", binaryConfig(), typical},
		{"mixed", multiConfig(), mixed},
		{"mixed then white space", multiConfig(), append(slices.Clone(mixed), " \n\t"...)},
		{"mixed then a bad type byte", multiConfig(), slices.Concat(mixed, []byte{0xc1}, tail)},
		{"mixed then a truncated map", multiConfig(), slices.Concat(mixed, tail[:len(tail)-3])},
		{"bad type byte inside a map", multiConfig(), slices.Concat(tail, tail[:5], []byte{0xc1}, tail)},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			checkReadMsgpack(t, c.cfg, fuzzOptions(), c.data, 1, 7, 100, 4096, 0)
		})
	}
}

// FuzzReadExamplesMsgpack checks ReadExamples against splitThenDecode on
// any bytes, read in chunks of a size the input chooses.
func FuzzReadExamplesMsgpack(f *testing.F) {
	var two []byte
	for _, e := range typicalExamples(f, 2) {
		f.Add(e.msgpack)
		two = append(two, e.msgpack...)
	}
	f.Add(two)
	f.Add(append(slices.Clone(two), ' ', '\n'))
	f.Add(slices.Concat(two[:len(two)-1], []byte{0xc1}))
	f.Add(slices.Concat(encodeMsgpack(f, mpMap{"id", 7, "label", "dog", "features", mpMap{"a", float32(1), mpBin("b"), mpBin("c")}}), []byte{' '}, encodeMsgpack(f, mpMap{"label", "pos", "features", mpMap{}})))
	f.Fuzz(func(t *testing.T, data []byte) {
		chunk := 1
		if len(data) > 0 {
			chunk += int(data[0]) % 64
		}
		for _, cfg := range fuzzConfigs() {
			checkReadMsgpack(t, cfg, fuzzOptions(), data, chunk, 0)
		}
	})
}
