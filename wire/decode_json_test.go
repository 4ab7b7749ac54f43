package wire

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/hyperplane-ml/hyperplane/learner"
)

func newRand(seed uint64) *rand.Rand { return rand.New(rand.NewPCG(seed, 1)) }

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

// randomFeatureValue is a randomNumber that is a valid feature value: within
// ±learner.MaxValue.
func randomFeatureValue(rng *rand.Rand) string {
	for {
		s := randomNumber(rng)
		if f, err := strconv.ParseFloat(s, 64); err == nil && math.Abs(f) <= learner.MaxValue {
			return s
		}
	}
}

func TestJSONSyntaxErrors(t *testing.T) {
	deep := strings.Repeat("[", MaxDepth+1) + strings.Repeat("]", MaxDepth+1)
	tests := []struct {
		name, doc, field, problem string
		eof                       bool // the error must wrap io.ErrUnexpectedEOF
	}{
		{"empty", "", "example", "unexpected end of input at byte 0", true},
		{"open brace", "{", "example", "unexpected end of input at byte 1 (want a key)", true},
		{"trailing comma", `{"a":1,}`, "example", "unexpected '}' at byte 7 (want a key)", false},
		{"missing colon", `{"a" 1}`, "a", "unexpected '1' at byte 5 (want ':')", false},
		{"missing value", `{"label":}`, "label", "unexpected '}' at byte 9 (want a value)", false},
		{"unquoted key", `{a:1}`, "example", "unexpected 'a' at byte 1 (want a key)", false},
		{"single quotes", `{'a':1}`, "example", `unexpected '\'' at byte 1`, false},
		{"missing comma", `{"features":{"a":1 "b":2}}`, "features", `unexpected '"' at byte 19 (want ',' or '}')`, false},
		{"missing comma at the top", `{"a":1 "b":2}`, "example", "(want ',' or '}')", false},
		{"leading zero", `{"features":{"a":01}}`, "features.a", "malformed number at byte 17 (unexpected '1' at byte 18)", false},
		{"point without digits", `{"features":{"a":1.}}`, "features.a", "malformed number at byte 17", false},
		{"minus alone", `{"features":{"a":-}}`, "features.a", "malformed number", false},
		{"exponent without digits", `{"x":[1e]}`, "x[0]", "malformed number", false},
		{"exponent sign without digits", `{"weight":1e+}`, "weight", "malformed number", false},
		{"point first", `{"features":{"a":.5}}`, "features.a", "unexpected '.' at byte 17 (want a value)", false},
		{"plus sign", `{"x":[+1]}`, "x[0]", "unexpected '+'", false},
		// NaN and infinities as other languages write them are not JSON:
		// the error says what was sent, not "got null" (nan) or a syntax
		// error at its first letter.
		{"NaN", `{"features":{"a":NaN}}`, "features.a", "NaN is not a JSON number (JSON has no NaN or infinities)", false},
		{"nan", `{"features":{"a":nan}}`, "features.a", "nan is not a JSON number", false},
		{"Infinity", `{"features":{"a":Infinity}}`, "features.a", "Infinity is not a JSON number", false},
		{"-Infinity", `{"features":{"a":-Infinity}}`, "features.a", "-Infinity is not a JSON number", false},
		{"+inf", `{"features":{"a":+inf}}`, "features.a", "+inf is not a JSON number", false},
		{"dense NaN", `{"x":[1,NaN]}`, "x[1]", "NaN is not a JSON number", false},
		{"dense -Infinity", `{"x":[-Infinity]}`, "x[0]", "-Infinity is not a JSON number", false},
		{"weight NaN", `{"weight":NaN}`, "weight", "NaN is not a JSON number", false},
		{"weight nan", `{"weight":nan}`, "weight", "nan is not a JSON number", false},
		{"weight -Infinity", `{"weight":-Infinity}`, "weight", "-Infinity is not a JSON number", false},
		{"label NaN", `{"label":NaN}`, "label", "NaN is not a JSON number", false},
		{"label nan", `{"label":nan}`, "label", "nan is not a JSON number", false},
		{"id Infinity", `{"id":Infinity}`, "id", "Infinity is not a JSON number", false},
		{"features NaN", `{"features":NaN}`, "features", "NaN is not a JSON number", false},
		{"unknown NaN", `{"u":[1,NaN]}`, "u", "NaN is not a JSON number", false},
		{"unknown nan", `{"u":{"v":nan}}`, "u", "nan is not a JSON number", false},
		{"unknown -Infinity", `{"u":-Infinity}`, "u", "-Infinity is not a JSON number", false},
		{"a word that starts like nan", `{"features":{"a":nano}}`, "features.a", "unexpected 'a' at byte 18 (want 'u')", false},
		{"a word that starts like inf", `{"features":{"a":info}}`, "features.a", "unexpected 'i' at byte 17 (want a value)", false},
		{"bad literal", `{"label":tru}`, "label", "unexpected '}' at byte 12 (want 'e')", false},
		{"bad null", `{"id":nul}`, "id", "(want 'l')", false},
		{"capital literal", `{"label":True}`, "label", "unexpected 'T'", false},
		{"garbage after", `{"a":1} x`, "example", "unexpected 'x' after the object at byte 8", false},
		{"two objects", `{"a":1}{"b":2}`, "example", "unexpected '{' after the object at byte 7", false},
		{"unclosed array", `{"a":[1,2}`, "a", "unexpected '}' at byte 9 (want ',' or ']')", false},
		{"colon missing inside", `{"a":{"b" 1}}`, "a", "(want ':')", false},
		{"bad escape", `{"a":"\x"}`, "a", `invalid escape "\\x" in a string at byte 6`, false},
		{"bad escape in a name", `{"features":{"a\q":1}}`, "features", "invalid escape", false},
		{"bad escape in a key", `{"\q":1}`, "example", "invalid escape", false},
		{"bad hex", `{"id":"\u12G4"}`, "id", `invalid \u escape at byte 7 (want 4 hex digits)`, false},
		{"short hex", `{"id":"\u12"}`, "id", `invalid \u escape`, false},
		{"control character", "{\"features\":{\"a\":\"x\x01\"}}", "features.a", "control character 0x01 in a string at byte 19", false},
		{"raw new line", "{\"id\":\"a\nb\"}", "id", "control character 0x0a", false},
		{"deep unknown value", `{"u":` + deep + `}`, "u", fmt.Sprintf("values nest deeper than %d at byte %d", MaxDepth, 5+MaxDepth), false},
		{"truncated string", `{"id":"abc`, "id", "unexpected end of input at byte 10", true},
		{"truncated escape", `{"id":"abc\`, "id", "unexpected end of input", true},
		{"truncated hex", `{"id":"\u12`, "id", "unexpected end of input", true},
		{"truncated array", `{"x":[1,2`, "x", "unexpected end of input", true},
		{"truncated number", `{"x":[1,2.`, "x[1]", "unexpected end of input", true},
		{"truncated feature", `{"features":{"a":"b`, "features.a", "unexpected end of input", true},
		{"truncated unknown", `{"u":{"v":[`, "u", "unexpected end of input", true},
		{"truncated literal", `{"label":tr`, "label", "unexpected end of input", true},
		{"space only", " \n", "example", "unexpected end of input", true},
		{"null", "null", "example", "not a JSON object (got null)", false},
		{"number", "12", "example", "not a JSON object (got number)", false},
		{"garbage", "hello", "example", "unexpected 'h' at byte 0 (want a JSON object)", false},
		{"not a null", "not json", "example", "unexpected 'n' at byte 0 (want a JSON object)", false},
		{"not a boolean", "tru", "example", "unexpected 't' at byte 0 (want a JSON object)", false},
		{"feature not a null", `{"features":{"a":nope}}`, "features.a", "unexpected 'o' at byte 18 (want 'u')", false},
		{"dense value not a boolean", `{"x":[fals]}`, "x[0]", "unexpected ']' at byte 10 (want 'e')", false},
		{"byte order mark", "\ufeff{}", "example", "unexpected byte 0xef at byte 0", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var x learner.Example
			_, err := NewDecoder(binaryConfig(), DecoderOptions{}).DecodeJSON([]byte(tt.doc), &x)
			checkDecodeError(t, "json", err, tt.field, tt.problem)
			if got := errors.Is(err, io.ErrUnexpectedEOF); got != tt.eof {
				t.Errorf("errors.Is(%v, io.ErrUnexpectedEOF) = %v, want %v", err, got, tt.eof)
			}
			// The test inputs are malformed, but for three examples that are
			// valid JSON, just not acceptable.
			acceptable := tt.name == "null" || tt.name == "number" || tt.name == "deep unknown value"
			if json.Valid([]byte(tt.doc)) != acceptable {
				t.Errorf("json.Valid(%q) = %v", tt.doc, !acceptable)
			}
		})
	}
}

func TestJSONSkipsValuesUpToMaxDepth(t *testing.T) {
	nested := strings.Repeat(`{"a":[`, MaxDepth/2) + "1" + strings.Repeat("]}", MaxDepth/2)
	doc := `{"u":` + nested + `,"features":{"f":2}}`
	var x learner.Example
	if _, err := NewDecoder(binaryConfig(), DecoderOptions{}).DecodeJSON([]byte(doc), &x); err != nil {
		t.Fatal(err)
	}
	if len(x.Index) != 1 || x.Value[0] != 2 {
		t.Errorf("features %v %v, want one of value 2", x.Index, x.Value)
	}
}

func TestJSONHashesInvalidUTF8AsItIs(t *testing.T) {
	cfg := binaryConfig()
	name := "a\xffb"
	var x learner.Example
	if _, err := NewDecoder(cfg, DecoderOptions{}).DecodeJSON([]byte(`{"features":{"`+name+`":1}}`), &x); err != nil {
		t.Fatal(err)
	}
	if want := learner.Index(hasher(cfg), name); len(x.Index) != 1 || x.Index[0] != want {
		t.Errorf("index %v, want [%d]", x.Index, want)
	}
}

// referenceDecodeJSON decodes an example with encoding/json, by the rules
// of DESIGN.md §3, as an independent check of the hand-written decoder.
// It replaces invalid UTF-8 in strings with U+FFFD, which DecodeJSON does
// not, and it nests deeper than MaxDepth.
func referenceDecodeJSON(cfg learner.Config, opts DecoderOptions, data []byte) (learner.Example, Meta, error) {
	var x learner.Example
	var meta Meta
	if len(data) > opts.MaxBytes {
		return x, meta, errors.New("too large")
	}
	h := hasher(cfg)
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	number := func(tok json.Token) (float64, error) {
		n, ok := tok.(json.Number)
		if !ok {
			return 0, fmt.Errorf("%v is not a number", tok)
		}
		f, err := strconv.ParseFloat(n.String(), 64)
		if err != nil && !math.IsInf(f, 0) {
			return 0, err
		}
		return f, nil
	}
	tok, err := dec.Token()
	if err != nil {
		return x, meta, err
	}
	if tok != json.Delim('{') {
		return x, meta, errors.New("not an object")
	}
	seen := map[string]bool{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return x, meta, err
		}
		key := tok.(string)
		if seen[key] {
			return x, meta, errors.New("duplicate key")
		}
		seen[key] = true
		if key != "id" && key != "label" && key != "features" && key != "x" && key != "weight" {
			var raw json.RawMessage
			if err := dec.Decode(&raw); err != nil {
				return x, meta, err
			}
			continue
		}
		tok, err = dec.Token()
		if err != nil {
			return x, meta, err
		}
		if tok == nil {
			continue
		}
		switch key {
		case "id":
			switch v := tok.(type) {
			case string:
				meta.ID, meta.HasID = []byte(v), true
			case json.Number:
				if strings.ContainsAny(v.String(), ".eE") {
					return x, meta, errors.New("id not an integer")
				}
				meta.ID, meta.HasID = []byte(v.String()), true
			default:
				return x, meta, errors.New("bad id")
			}
		case "label":
			y, ok := -1, false
			switch v := tok.(type) {
			case bool:
				ok = len(cfg.Classes) <= 2
				if v {
					y = 1
				}
			case string:
				switch i := cfg.ClassIndex(v); {
				case i < 0:
				case len(cfg.Classes) == 2:
					y, ok = 2*i-1, true
				default:
					y, ok = i, true
				}
			case json.Number:
				f, _ := number(v)
				switch {
				case len(cfg.Classes) <= 2 && (f == 1 || f == -1 || f == 0):
					y, ok = -1, true
					if f == 1 {
						y = 1
					}
				case len(cfg.Classes) > 2 && f >= 0 && f < float64(len(cfg.Classes)) && f == math.Floor(f):
					y, ok = int(f), true
				}
			}
			if !ok {
				return x, meta, errors.New("bad label")
			}
			x.Labeled, x.Label = true, y
		case "features":
			if tok != json.Delim('{') {
				return x, meta, errors.New("features not an object")
			}
			for dec.More() {
				name, err := dec.Token()
				if err != nil {
					return x, meta, err
				}
				v, err := dec.Token()
				if err != nil {
					return x, meta, err
				}
				if s, ok := v.(string); ok {
					x.Add(learner.CategoricalIndex(h, name.(string), s), 1)
					continue
				}
				f, err := number(v)
				if err != nil || !(math.Abs(f) <= learner.MaxValue) {
					return x, meta, errors.New("bad feature")
				}
				x.Add(learner.Index(h, name.(string)), f)
			}
			if _, err := dec.Token(); err != nil {
				return x, meta, err
			}
		case "x":
			if tok != json.Delim('[') {
				return x, meta, errors.New("x not an array")
			}
			for dec.More() {
				v, err := dec.Token()
				if err != nil {
					return x, meta, err
				}
				f, err := number(v)
				if err != nil || !(math.Abs(f) <= learner.MaxValue) {
					return x, meta, errors.New("bad x")
				}
				x.Dense = append(x.Dense, f)
			}
			if _, err := dec.Token(); err != nil {
				return x, meta, err
			}
			if len(x.Dense) > cfg.Dimension() {
				return x, meta, errors.New("x too long")
			}
		case "weight":
			f, err := number(tok)
			if err != nil || !(f > 0 && f <= learner.MaxValue) {
				return x, meta, errors.New("bad weight")
			}
			x.Weight = f
		}
	}
	if _, err := dec.Token(); err != nil {
		return x, meta, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return x, meta, fmt.Errorf("after the object: %v", err)
	}
	if x.NNZ() > opts.MaxFeatures {
		return x, meta, errors.New("too many features")
	}
	return x, meta, nil
}

// fuzzConfigs are the models the fuzz tests decode for: a small dimension,
// so that dense parts can exceed it, and each kind of label.
func fuzzConfigs() []learner.Config {
	small := binaryConfig()
	small.HashBits = 4
	named := namedConfig()
	named.HashBits = 8
	multi := multiConfig()
	multi.HashBits = 8
	return []learner.Config{small, named, multi}
}

// fuzzOptions are the limits of the fuzz tests: low enough to be reached.
func fuzzOptions() DecoderOptions { return DecoderOptions{MaxFeatures: 40, MaxBytes: 4096} }

// checkDecoded checks what must hold of any example a decoder accepts.
func checkDecoded(t *testing.T, cfg learner.Config, x *learner.Example) {
	t.Helper()
	dim := cfg.Dimension()
	if len(x.Index) != len(x.Value) {
		t.Fatalf("%d indices, %d values", len(x.Index), len(x.Value))
	}
	for i, j := range x.Index {
		if int(j) >= dim {
			t.Fatalf("index %d >= dimension %d", j, dim)
		}
		if !(math.Abs(x.Value[i]) <= learner.MaxValue) {
			t.Fatalf("value %v", x.Value[i])
		}
	}
	if len(x.Dense) > dim {
		t.Fatalf("%d dense values > dimension %d", len(x.Dense), dim)
	}
	for _, v := range x.Dense {
		if !(math.Abs(v) <= learner.MaxValue) {
			t.Fatalf("dense value %v", v)
		}
	}
	if x.NNZ() > fuzzOptions().MaxFeatures {
		t.Fatalf("%d features > %d", x.NNZ(), fuzzOptions().MaxFeatures)
	}
	if x.Weight != 0 && !(x.Weight > 0 && x.Weight <= learner.MaxValue) {
		t.Fatalf("weight %v", x.Weight)
	}
	if x.Labeled {
		if cfg.Multiclass() && (x.Label < 0 || x.Label >= len(cfg.Classes)) ||
			!cfg.Multiclass() && x.Label != 1 && x.Label != -1 {
			t.Fatalf("label %d", x.Label)
		}
	}
}

func FuzzDecodeJSON(f *testing.F) {
	f.Add([]byte(`{"id":"a1","label":1,"features":{"f1":0.5,"color":"red"},"x":[1,2.5],"weight":2}`))
	f.Add([]byte(`{"id":7,"label":"dog","features":{"caf\u00e9":"\ud83d\ude00","n":-1e-7},"u":[{"v":null}]}`))
	f.Add([]byte(`{"label":"pos","features":{},"x":[]}`))
	f.Add([]byte(`{"label":-1,"features":{"a":1e200,"b":1e30,"c":-1e31},"x":[NaN,-Infinity,nan],"weight":1e31}`))
	f.Add([]byte(`{"u":` + strings.Repeat("[", MaxDepth+1) + strings.Repeat("]", MaxDepth+1) + `}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, cfg := range fuzzConfigs() {
			d := NewDecoder(cfg, fuzzOptions())
			var x learner.Example
			meta, err := d.DecodeJSON(data, &x)
			var de *DecodeError
			if err != nil && !errors.As(err, &de) {
				t.Fatalf("error %v is a %T, not a *DecodeError", err, err)
			}
			if err == nil {
				checkDecoded(t, cfg, &x)
				if !json.Valid(data) {
					t.Fatalf("accepted invalid JSON")
				}
			}
			// The scratch buffers must not leak one example into the next.
			id := bytes.Clone(meta.ID)
			var x2 learner.Example
			meta2, err2 := d.DecodeJSON(data, &x2)
			if (err == nil) != (err2 == nil) || diffExample(x, x2) != "" || !bytes.Equal(id, meta2.ID) {
				t.Fatalf("second decode differs: %v %+v, then %v %+v", err, x, err2, x2)
			}
			if !utf8.Valid(data) || err != nil && strings.Contains(err.Error(), "values nest deeper") {
				// encoding/json replaces invalid UTF-8, so that keys that
				// differ may be the same to it, and it nests deeper.
				continue
			}
			ref, refMeta, refErr := referenceDecodeJSON(cfg, fuzzOptions(), data)
			if (err == nil) != (refErr == nil) {
				t.Fatalf("DecodeJSON: %v; encoding/json: %v", err, refErr)
			}
			if err == nil {
				if diff := diffExample(x, ref); diff != "" {
					t.Fatalf("DecodeJSON and encoding/json differ:\n%s", diff)
				}
				if meta.HasID != refMeta.HasID || !bytes.Equal(meta.ID, refMeta.ID) {
					t.Fatalf("id %q, encoding/json %q", meta.ID, refMeta.ID)
				}
			}
		}
	})
}

func BenchmarkDecodeJSON(b *testing.B) {
	examples := typicalExamples(b, 256)
	d := NewDecoder(learner.DefaultConfig(), DecoderOptions{})
	var x learner.Example
	size := 0
	for _, e := range examples {
		size += len(e.json)
	}
	b.SetBytes(int64(size / len(examples)))
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		if _, err := d.DecodeJSON(examples[i%len(examples)].json, &x); err != nil {
			b.Fatal(err)
		}
	}
}
