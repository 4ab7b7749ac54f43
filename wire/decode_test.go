package wire

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/hyperplane-ml/hyperplane/learner"
	"github.com/vmihailenco/msgpack/v5"
)

// Configurations of the three kinds of label.
func binaryConfig() learner.Config {
	cfg := learner.DefaultConfig()
	cfg.HashSeed = 42 // so that a decoder ignoring the seed fails
	return cfg
}

func namedConfig() learner.Config {
	cfg := binaryConfig()
	cfg.Classes = []string{"neg", "pos"}
	return cfg
}

func multiConfig() learner.Config {
	cfg := binaryConfig()
	cfg.Classes = []string{"cat", "dog", "bird"}
	return cfg
}

func hasher(cfg learner.Config) learner.Hasher { return learner.NewHasher(cfg.HashBits, cfg.HashSeed) }

// sparse builds the sparse part of an expected example from alternating
// names and values: a float64 value is a numeric feature, a string value
// a categorical one.
func sparse(cfg learner.Config, pairs ...any) ([]uint32, []float64) {
	h := hasher(cfg)
	var index []uint32
	var value []float64
	for k := 0; k < len(pairs); k += 2 {
		name := pairs[k].(string)
		switch v := pairs[k+1].(type) {
		case float64:
			index, value = append(index, learner.Index(h, name)), append(value, v)
		case string:
			index, value = append(index, learner.CategoricalIndex(h, name, v)), append(value, 1)
		default:
			panic(fmt.Sprintf("sparse: value %T", v))
		}
	}
	return index, value
}

// diffExample describes how got differs from want, or is "".
func diffExample(got, want learner.Example) string {
	same := slices.Equal(got.Index, want.Index) &&
		slices.EqualFunc(got.Value, want.Value, sameFloat) &&
		slices.EqualFunc(got.Dense, want.Dense, sameFloat) &&
		got.Labeled == want.Labeled && got.Label == want.Label && sameFloat(got.Weight, want.Weight)
	if same {
		return ""
	}
	return fmt.Sprintf("got  %+v\nwant %+v", got, want)
}

// sameFloat compares bit patterns, so that 0 and -0 differ.
func sameFloat(a, b float64) bool { return math.Float64bits(a) == math.Float64bits(b) }

// The msgpack test inputs are written as Go values: mpMap is a map in the
// order given (alternating keys and values), int a compactly encoded
// integer, the sized integer types their own msgpack types, mpBin a bin,
// mpRaw bytes copied as they are, mpExt an extension.
type (
	mpMap []any
	mpBin []byte
	mpRaw []byte
	mpExt struct {
		typ  int8
		data []byte
	}
)

func encodeMsgpack(tb testing.TB, v any) []byte {
	tb.Helper()
	var buf bytes.Buffer
	enc := msgpack.NewEncoder(&buf)
	if err := encodeValue(enc, &buf, v); err != nil {
		tb.Fatalf("encode %v: %v", v, err)
	}
	return buf.Bytes()
}

func encodeValue(enc *msgpack.Encoder, buf *bytes.Buffer, v any) error {
	switch v := v.(type) {
	case nil:
		return enc.EncodeNil()
	case bool:
		return enc.EncodeBool(v)
	case int:
		return enc.EncodeInt(int64(v))
	case int8:
		return enc.EncodeInt8(v)
	case int16:
		return enc.EncodeInt16(v)
	case int32:
		return enc.EncodeInt32(v)
	case int64:
		return enc.EncodeInt64(v)
	case uint8:
		return enc.EncodeUint8(v)
	case uint16:
		return enc.EncodeUint16(v)
	case uint32:
		return enc.EncodeUint32(v)
	case uint64:
		return enc.EncodeUint64(v)
	case float32:
		return enc.EncodeFloat32(v)
	case float64:
		return enc.EncodeFloat64(v)
	case string:
		return enc.EncodeString(v)
	case mpBin:
		return enc.EncodeBytes(v)
	case mpRaw:
		_, err := buf.Write(v)
		return err
	case mpExt:
		if err := enc.EncodeExtHeader(v.typ, len(v.data)); err != nil {
			return err
		}
		_, err := buf.Write(v.data)
		return err
	case []any:
		if err := enc.EncodeArrayLen(len(v)); err != nil {
			return err
		}
		for _, e := range v {
			if err := encodeValue(enc, buf, e); err != nil {
				return err
			}
		}
		return nil
	case mpMap:
		if err := enc.EncodeMapLen(len(v) / 2); err != nil {
			return err
		}
		for _, e := range v {
			if err := encodeValue(enc, buf, e); err != nil {
				return err
			}
		}
		return nil
	}
	return fmt.Errorf("no msgpack encoding for %T", v)
}

// jsonToMsgpack encodes the JSON document data as msgpack with the same
// structure, keeping the order and repeats of keys: integers that fit an
// int64 are compact integers, larger ones uint64, other numbers float64
// (so 1e999 is +Inf).
func jsonToMsgpack(tb testing.TB, data string) []byte {
	tb.Helper()
	dec := json.NewDecoder(strings.NewReader(data))
	dec.UseNumber()
	v, err := jsonTree(dec)
	if err != nil {
		tb.Fatalf("jsonToMsgpack %s: %v", data, err)
	}
	return encodeMsgpack(tb, v)
}

func jsonTree(dec *json.Decoder) (any, error) {
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	switch tok := tok.(type) {
	case json.Delim:
		var out []any
		for dec.More() {
			if tok == '{' {
				key, err := dec.Token()
				if err != nil {
					return nil, err
				}
				out = append(out, key)
			}
			v, err := jsonTree(dec)
			if err != nil {
				return nil, err
			}
			out = append(out, v)
		}
		if _, err := dec.Token(); err != nil {
			return nil, err
		}
		if tok == '{' {
			return mpMap(out), nil
		}
		if out == nil {
			out = []any{}
		}
		return out, nil
	case json.Number:
		if i, err := strconv.ParseInt(tok.String(), 10, 64); err == nil {
			return int(i), nil
		}
		if u, err := strconv.ParseUint(tok.String(), 10, 64); err == nil {
			return u, nil
		}
		f, _ := strconv.ParseFloat(tok.String(), 64)
		return f, nil
	default:
		return tok, nil // string, bool or nil
	}
}

// decoded is the outcome of decoding one input.
type decoded struct {
	x    learner.Example
	meta Meta
	err  error
}

// decodeBoth decodes the JSON document doc, and its msgpack form, with a
// fresh Decoder each, through DecodeJSON / DecodeMsgpack and through Decode.
func decodeBoth(t *testing.T, cfg learner.Config, opts DecoderOptions, doc string) map[string]decoded {
	t.Helper()
	out := map[string]decoded{}
	inputs := map[string][]byte{"json": []byte(doc), "msgpack": jsonToMsgpack(t, doc)}
	for format, data := range inputs {
		d := NewDecoder(cfg, opts)
		var r decoded
		if format == "json" {
			r.meta, r.err = d.DecodeJSON(data, &r.x)
		} else {
			var n int
			n, r.meta, r.err = d.DecodeMsgpack(data, &r.x)
			if r.err == nil && n != len(data) {
				t.Errorf("msgpack: used %d bytes of %d", n, len(data))
			}
		}
		r.meta.ID = bytes.Clone(r.meta.ID)
		out[format] = r
		var auto decoded
		auto.meta, auto.err = NewDecoder(cfg, opts).Decode(data, &auto.x)
		auto.meta.ID = bytes.Clone(auto.meta.ID)
		out[format+" via Decode"] = auto
	}
	return out
}

func TestDecodeBothFormats(t *testing.T) {
	cfg := binaryConfig()
	ex := func(labeled bool, label int, weight float64, dense []float64, pairs ...any) learner.Example {
		index, value := sparse(cfg, pairs...)
		return learner.Example{Index: index, Value: value, Dense: dense, Labeled: labeled, Label: label, Weight: weight}
	}
	tests := []struct {
		name string
		doc  string
		want learner.Example
		id   string // "-" for no id
	}{
		{
			name: "every key",
			doc:  `{"id":"a1","label":1,"features":{"f1":0.5,"color":"red"},"x":[1,2.5],"weight":2}`,
			want: ex(true, 1, 2, []float64{1, 2.5}, "f1", 0.5, "color", "red"),
			id:   "a1",
		},
		{
			name: "keys in another order",
			doc:  `{"weight":0.25,"x":[3],"features":{"a":-1},"label":-1,"id":"z"}`,
			want: ex(true, -1, 0.25, []float64{3}, "a", -1.0),
			id:   "z",
		},
		{
			name: "empty object",
			doc:  `{}`,
			want: ex(false, 0, 0, nil),
			id:   "-",
		},
		{
			name: "null means absent",
			doc:  `{"id":null,"label":null,"features":null,"x":null,"weight":null}`,
			want: ex(false, 0, 0, nil),
			id:   "-",
		},
		{
			name: "empty containers",
			doc:  `{"features":{},"x":[]}`,
			want: ex(false, 0, 0, nil),
			id:   "-",
		},
		{
			name: "integer id",
			doc:  `{"id":42,"features":{"a":1}}`,
			want: ex(false, 0, 0, nil, "a", 1.0),
			id:   "42",
		},
		{
			name: "negative integer id",
			doc:  `{"id":-7}`,
			want: ex(false, 0, 0, nil),
			id:   "-7",
		},
		{
			name: "large integer id",
			doc:  `{"id":18446744073709551615}`,
			want: ex(false, 0, 0, nil),
			id:   "18446744073709551615",
		},
		{
			name: "empty string id",
			doc:  `{"id":""}`,
			want: ex(false, 0, 0, nil),
			id:   "",
		},
		{
			name: "white space everywhere",
			doc:  " \t\r\n{ \"id\" : \"x\" ,\n \"features\" : { \"a\" : 1 , \"b\" : \"c\" } , \"x\" : [ 1 , 2 ] , \"label\" : true }\n",
			want: ex(true, 1, 0, []float64{1, 2}, "a", 1.0, "b", "c"),
			id:   "x",
		},
		{
			name: "escapes in names and values",
			doc:  `{"id":"i\u0064","features":{"a\"b\\c\/d\b\f\n\r\t":1,"caf\u00e9":"\u00fcber","emoji\ud83d\ude00":2,"\u00E9":"\"q\""}}`,
			want: ex(false, 0, 0, nil, "a\"b\\c/d\b\f\n\r\t", 1.0, "café", "über", "emoji😀", 2.0, "é", `"q"`),
			id:   "id",
		},
		{
			name: "raw UTF-8",
			doc:  `{"features":{"größe":"groß","日本":3}}`,
			want: ex(false, 0, 0, nil, "größe", "groß", "日本", 3.0),
			id:   "-",
		},
		{
			name: "a name twice inside features adds both",
			doc:  `{"features":{"a":1,"a":"x","a":2}}`,
			want: ex(false, 0, 0, nil, "a", 1.0, "a", "x", "a", 2.0),
			id:   "-",
		},
		{
			name: "numbers",
			doc:  `{"features":{"a":1e3,"b":-2.5E-3,"c":0,"d":-0.0,"e":123456789012345678901234567890,"f":0.1,"g":5e-324,"h":1e30,"i":-1000000000000000000000000000000}}`,
			want: ex(false, 0, 0, nil, "a", 1e3, "b", -2.5e-3, "c", 0.0, "d", math.Copysign(0, -1), "e", 123456789012345678901234567890.0, "f", 0.1, "g", 5e-324, "h", 1e30, "i", -1e30),
			id:   "-",
		},
		{
			name: "dense only",
			doc:  `{"x":[0,-1.5,3e2,7]}`,
			want: ex(false, 0, 0, []float64{0, -1.5, 300, 7}),
			id:   "-",
		},
		{
			name: "unknown keys are skipped whatever their value",
			doc:  `{"meta":{"a":[1,2,{"b":null,"c":"\u0041"}],"d":true,"e":{}},"v":-2.5e3,"features":{"a":1},"s":"str","n":null,"arr":[[],[[]]],"t":false}`,
			want: ex(false, 0, 0, nil, "a", 1.0),
			id:   "-",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for format, r := range decodeBoth(t, cfg, DecoderOptions{}, tt.doc) {
				if r.err != nil {
					t.Errorf("%s: %v", format, r.err)
					continue
				}
				if diff := diffExample(r.x, tt.want); diff != "" {
					t.Errorf("%s:\n%s", format, diff)
				}
				if tt.id == "-" {
					if r.meta.HasID {
						t.Errorf("%s: HasID with id %q, want none", format, r.meta.ID)
					}
				} else if !r.meta.HasID || string(r.meta.ID) != tt.id {
					t.Errorf("%s: id %q (HasID %v), want %q", format, r.meta.ID, r.meta.HasID, tt.id)
				}
			}
		})
	}
}

func TestDecodeLabels(t *testing.T) {
	const unlabeled = math.MinInt
	tests := []struct {
		name    string
		cfg     learner.Config
		label   string // the JSON value; "" leaves the key out
		want    int    // unlabeled for none
		problem string // the error's problem, in part, if it must fail
	}{
		{"binary absent", binaryConfig(), "", unlabeled, ""},
		{"binary null", binaryConfig(), "null", unlabeled, ""},
		{"binary 1", binaryConfig(), "1", 1, ""},
		{"binary -1", binaryConfig(), "-1", -1, ""},
		{"binary 0", binaryConfig(), "0", -1, ""},
		{"binary 1.0", binaryConfig(), "1.0", 1, ""},
		{"binary -1e0", binaryConfig(), "-1e0", -1, ""},
		{"binary true", binaryConfig(), "true", 1, ""},
		{"binary false", binaryConfig(), "false", -1, ""},
		{"binary 2", binaryConfig(), "2", 0, "2 is not a binary label (want 1/-1, 0/1 or true/false; more classes are named in model.learner.classes, train's -classes)"},
		{"binary 0.5", binaryConfig(), "0.5", 0, "0.5 is not a binary label"},
		{"binary string", binaryConfig(), `"1"`, 0, `"1" is not a binary label (want 1/-1, 0/1 or true/false; more classes are named in model.learner.classes, train's -classes)`},
		{"binary array", binaryConfig(), `[1]`, 0, "value is not a number, boolean or class name (got array)"},
		{"named positive", namedConfig(), `"pos"`, 1, ""},
		{"named negative", namedConfig(), `"neg"`, -1, ""},
		{"named escaped", namedConfig(), `"p\u006fs"`, 1, ""},
		{"named 1", namedConfig(), "1", 1, ""},
		{"named 0", namedConfig(), "0", -1, ""},
		{"named false", namedConfig(), "false", -1, ""},
		{"named unknown", namedConfig(), `"maybe"`, 0, `"maybe" is not a binary label (want 1/-1, 0/1, true/false or "neg"/"pos")`},
		{"named prefix", namedConfig(), `"po"`, 0, `"po" is not a binary label`},
		{"named 3", namedConfig(), "3", 0, `3 is not a binary label (want 1/-1, 0/1, true/false or "neg"/"pos")`},
		{"multi name 0", multiConfig(), `"cat"`, 0, ""},
		{"multi name 2", multiConfig(), `"bird"`, 2, ""},
		{"multi index 1", multiConfig(), "1", 1, ""},
		{"multi index 2", multiConfig(), "2", 2, ""},
		{"multi index 2.0", multiConfig(), "2.0", 2, ""},
		{"multi null", multiConfig(), "null", unlabeled, ""},
		{"multi unknown name", multiConfig(), `"fish"`, 0, `unknown class "fish"`},
		{"multi index 3", multiConfig(), "3", 0, `class 3 is out of range (want a class name ("cat", "dog", "bird") or an integer from 0 to 2)`},
		{"multi index -1", multiConfig(), "-1", 0, "class -1 is out of range"},
		{"multi index 1.5", multiConfig(), "1.5", 0, `1.5 is not a class (want a class name ("cat", "dog", "bird") or an integer from 0 to 2)`},
		{"multi boolean", multiConfig(), "true", 0, "true is not a class"},
		{"multi object", multiConfig(), `{"a":1}`, 0, "value is not a class name or index (got "},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := tt.cfg.Validate(); err != nil {
				t.Fatal(err)
			}
			doc := `{"features":{"a":1}}`
			if tt.label != "" {
				doc = `{"label":` + tt.label + `,"features":{"a":1}}`
			}
			for format, r := range decodeBoth(t, tt.cfg, DecoderOptions{}, doc) {
				if tt.problem != "" {
					checkDecodeError(t, format, r.err, "label", tt.problem)
					continue
				}
				if r.err != nil {
					t.Errorf("%s: %v", format, r.err)
					continue
				}
				if tt.want == unlabeled {
					if r.x.Labeled {
						t.Errorf("%s: labeled %d, want unlabeled", format, r.x.Label)
					}
				} else if !r.x.Labeled || r.x.Label != tt.want {
					t.Errorf("%s: label %d (labeled %v), want %d", format, r.x.Label, r.x.Labeled, tt.want)
				}
			}
		})
	}
}

// checkDecodeError checks that err is a *DecodeError for field whose
// problem contains problem.
func checkDecodeError(t *testing.T, format string, err error, field, problem string) {
	t.Helper()
	var de *DecodeError
	if !errors.As(err, &de) {
		t.Errorf("%s: error %v (%T), want a *DecodeError", format, err, err)
		return
	}
	if de.Field != field || !strings.Contains(de.Problem, problem) {
		t.Errorf("%s: error %q, want field %q and a problem containing %q", format, err, field, problem)
	}
	if got, want := de.Error(), de.Field+": "+de.Problem; got != want {
		t.Errorf("%s: Error() = %q, want %q", format, got, want)
	}
}

func TestDecodeErrors(t *testing.T) {
	small := binaryConfig()
	small.HashBits = 2 // a dimension of 4
	tests := []struct {
		name       string
		cfg        learner.Config
		opts       DecoderOptions
		doc        string
		field      string
		problem    string // in both formats
		jsonDetail string // in the error of DecodeJSON only
	}{
		{"feature array", binaryConfig(), DecoderOptions{}, `{"features":{"age":[1]}}`, "features.age", "value is not a number or string (got array)", ""},
		{"feature object", binaryConfig(), DecoderOptions{}, `{"features":{"age":{}}}`, "features.age", "value is not a number or string (got ", "object"},
		{"feature boolean", binaryConfig(), DecoderOptions{}, `{"features":{"age":true}}`, "features.age", "value is not a number or string (got boolean)", ""},
		{"feature null", binaryConfig(), DecoderOptions{}, `{"features":{"age":null}}`, "features.age", "value is not a number or string (got ", "null"},
		{"feature overflows", binaryConfig(), DecoderOptions{}, `{"features":{"age":1e999}}`, "features.age", outOfRangeProblem, "1e999"},
		{"feature overflows negative", binaryConfig(), DecoderOptions{}, `{"features":{"a":2,"age":-1e400}}`, "features.age", outOfRangeProblem, "-1e400"},
		// 1e200 is a float64, but its square is not: it once made R² of
		// the model infinite, and every later snapshot unloadable.
		{"feature 1e200", binaryConfig(), DecoderOptions{}, `{"label":-1,"features":{"a":1e200}}`, "features.a", outOfRangeProblem, "1e200 " + outOfRangeProblem},
		{"feature just beyond the bound", binaryConfig(), DecoderOptions{}, `{"features":{"a":1.0000000000000002e30}}`, "features.a", outOfRangeProblem, ""},
		{"feature integer beyond the bound", binaryConfig(), DecoderOptions{}, `{"features":{"a":-123456789012345678901234567890123}}`, "features.a", outOfRangeProblem, ""},
		{"dense beyond the bound", binaryConfig(), DecoderOptions{}, `{"x":[1,-2e31]}`, "x[1]", outOfRangeProblem, "-2e31"},
		{"features not an object", binaryConfig(), DecoderOptions{}, `{"features":[1]}`, "features", "(got array)", "value is not an object"},
		{"features a string", binaryConfig(), DecoderOptions{}, `{"features":"a"}`, "features", "(got string)", ""},
		{"dense string", binaryConfig(), DecoderOptions{}, `{"x":[1,"a"]}`, "x[1]", "value is not a number (got string)", ""},
		{"dense null", binaryConfig(), DecoderOptions{}, `{"x":[1,2,null]}`, "x[2]", "value is not a number (got ", "null"},
		{"dense overflows", binaryConfig(), DecoderOptions{}, `{"x":[1,1e999]}`, "x[1]", outOfRangeProblem, ""},
		{"dense not an array", binaryConfig(), DecoderOptions{}, `{"x":5}`, "x", "value is not an array (got ", "number"},
		{"dense over the dimension", small, DecoderOptions{}, `{"x":[1,2,3,4,5]}`, "x", "more than 4 values (the model's dimension)", ""},
		{"dense at the dimension", small, DecoderOptions{}, `{"x":[1,2,3,4],"label":7}`, "label", "7 is not a binary label", ""},
		{"too many sparse", binaryConfig(), DecoderOptions{MaxFeatures: 3}, `{"features":{"a":1,"b":2,"c":3,"d":4}}`, "features", "more than 3 features", ""},
		{"too many mixed", binaryConfig(), DecoderOptions{MaxFeatures: 3}, `{"features":{"a":1,"b":"x"},"x":[1,2]}`, "x", "more than 3 features, features and x together", ""},
		{"too many mixed dense first", binaryConfig(), DecoderOptions{MaxFeatures: 3}, `{"x":[1,2],"features":{"a":1,"b":"x"}}`, "features", "more than 3 features", ""},
		{"too many dense", binaryConfig(), DecoderOptions{MaxFeatures: 3}, `{"x":[1,2,3,4]}`, "x", "more than 3 features, features and x together", ""},
		{"weight zero", binaryConfig(), DecoderOptions{}, `{"weight":0}`, "weight", "0 is not a positive number up to 1e+30", ""},
		{"weight negative", binaryConfig(), DecoderOptions{}, `{"weight":-1.5}`, "weight", "-1.5 is not a positive number up to 1e+30", ""},
		{"weight infinite", binaryConfig(), DecoderOptions{}, `{"weight":1e999}`, "weight", "is not a positive number up to 1e+30", ""},
		{"weight beyond the bound", binaryConfig(), DecoderOptions{}, `{"weight":2e30}`, "weight", "is not a positive number up to 1e+30", "2e30 is not"},
		{"weight string", binaryConfig(), DecoderOptions{}, `{"weight":"2"}`, "weight", "value is not a number (got string)", ""},
		{"id fraction", binaryConfig(), DecoderOptions{}, `{"id":1.5}`, "id", "is not a string or an integer", ""},
		{"id exponent", binaryConfig(), DecoderOptions{}, `{"id":1e3}`, "id", "is not a string or an integer", ""},
		{"id boolean", binaryConfig(), DecoderOptions{}, `{"id":true}`, "id", "value is not a string or an integer (got boolean)", ""},
		{"id array", binaryConfig(), DecoderOptions{}, `{"id":["a"]}`, "id", "value is not a string or an integer (got array)", ""},
		{"not an object", binaryConfig(), DecoderOptions{}, `[1]`, "example", "not a", "not a JSON object (got array)"},
		{"a string", binaryConfig(), DecoderOptions{}, `"a"`, "example", "not a", "not a JSON object (got string)"},
		{"duplicate known key", binaryConfig(), DecoderOptions{}, `{"label":1,"features":{},"label":1}`, "label", "duplicate key", ""},
		{"duplicate unknown key", binaryConfig(), DecoderOptions{}, `{"u":1,"v":2,"u":[2]}`, "u", "duplicate key", ""},
		{"duplicate escaped key", binaryConfig(), DecoderOptions{}, `{"ab":1,"a\u0062":2}`, "ab", "duplicate key", ""},
		{"duplicate among many unknown keys", binaryConfig(), DecoderOptions{}, `{"k1":1,"k2":1,"k3":1,"k4":1,"k5":1,"k6":1,"k7":1,"k8":1,"k9":1,"k10":1,"k3":1,"k11":1}`, "k3", "duplicate key", ""},
		{"payload over the limit", binaryConfig(), DecoderOptions{MaxBytes: 20}, `{"features":{"abcdefghijklmn":1}}`, "payload", "bytes exceed the limit of 20", "33 bytes exceed"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for format, r := range decodeBoth(t, tt.cfg, tt.opts, tt.doc) {
				problem := tt.problem
				if format == "json" && tt.jsonDetail != "" {
					checkDecodeError(t, format, r.err, tt.field, tt.jsonDetail)
				}
				checkDecodeError(t, format, r.err, tt.field, problem)
				if diff := diffExample(r.x, learner.Example{}); diff != "" {
					t.Errorf("%s: example not reset after the error:\n%s", format, diff)
				}
			}
		})
	}
}

// TestDecodeIDUpToMaxIDBytes: both formats take an id of MaxIDBytes
// bytes and refuse a longer one as too large, naming the field; a JSON
// integer id of more digits too.
func TestDecodeIDUpToMaxIDBytes(t *testing.T) {
	long := strings.Repeat("a", MaxIDBytes)
	for format, r := range decodeBoth(t, binaryConfig(), DecoderOptions{}, `{"id":"`+long+`","features":{"f":2}}`) {
		if r.err != nil || string(r.meta.ID) != long {
			t.Errorf("%s: an id of %d bytes: %v", format, MaxIDBytes, r.err)
		}
	}
	want := fmt.Sprintf("%d bytes, more than the %d an id may have", MaxIDBytes+1, MaxIDBytes)
	for format, r := range decodeBoth(t, binaryConfig(), DecoderOptions{}, `{"id":"`+long+`b","features":{"f":2}}`) {
		checkDecodeError(t, format, r.err, "id", want)
		var de *DecodeError
		if errors.As(r.err, &de) && de.Reason != ReasonTooLarge {
			t.Errorf("%s: reason %v, want too large", format, de.Reason)
		}
	}
	d := NewDecoder(binaryConfig(), DecoderOptions{})
	var x learner.Example
	_, err := d.Decode([]byte(`{"id":`+strings.Repeat("7", MaxIDBytes+1)+`}`), &x)
	checkDecodeError(t, "json integer", err, "id", want)
}

// outOfRangeProblem ends the problem of a feature value beyond the bound.
const outOfRangeProblem = "is out of range (feature values must be finite and within ±1e+30)"

// TestDecodeSkipsValuesUpToMaxDepth: both formats skip an unknown value
// that nests MaxDepth containers, and refuse one that nests more, however
// deep, with the same error; the stream goes on after it.
func TestDecodeSkipsValuesUpToMaxDepth(t *testing.T) {
	nested := func(depth int) string {
		return strings.Repeat(`{"a":[`, depth/2) + strings.Repeat("[", depth%2) + "1" + strings.Repeat("]", depth%2) + strings.Repeat("]}", depth/2)
	}
	for _, depth := range []int{1, 2, MaxDepth - 1, MaxDepth} {
		doc := `{"u":` + nested(depth) + `,"features":{"f":2}}`
		for format, r := range decodeBoth(t, binaryConfig(), DecoderOptions{}, doc) {
			if r.err != nil || len(r.x.Index) != 1 || r.x.Value[0] != 2 {
				t.Errorf("depth %d, %s: %v, features %v %v; want one of value 2", depth, format, r.err, r.x.Index, r.x.Value)
			}
		}
	}
	for _, depth := range []int{MaxDepth + 1, MaxDepth + 2} {
		doc := `{"u":` + nested(depth) + `,"features":{"f":2}}`
		for format, r := range decodeBoth(t, binaryConfig(), DecoderOptions{}, doc) {
			checkDecodeError(t, fmt.Sprintf("depth %d, %s", depth, format), r.err, "u", fmt.Sprintf("values nest deeper than %d at byte", MaxDepth))
		}
	}
	// A million deep, in every msgpack container type: refused, and the
	// map's length is still reported, so a reader steps over it.
	const deep = 1000000
	var b bytes.Buffer
	b.Write([]byte{0x82, 0xa1, 'u'})
	headers := [][]byte{{0x91}, {0x81, 0xa0}, {0xdc, 0, 1}, {0xdd, 0, 0, 0, 1}, {0xde, 0, 1, 0xa0}, {0xdf, 0, 0, 0, 1, 0xa0}}
	for k := range deep {
		b.Write(headers[k%len(headers)])
	}
	b.Write([]byte{0xc0, 0xa1, 'x', 0x91, 0x01})
	data := b.Bytes()
	var x learner.Example
	n, _, err := NewDecoder(binaryConfig(), DecoderOptions{MaxBytes: len(data)}).DecodeMsgpack(data, &x)
	checkDecodeError(t, "msgpack", err, "u", fmt.Sprintf("values nest deeper than %d at byte", MaxDepth))
	if n != len(data) {
		t.Errorf("msgpack: reported %d bytes, want %d", n, len(data))
	}
	doc := `{"u":` + strings.Repeat("[", deep) + strings.Repeat("]", deep) + `}`
	_, err = NewDecoder(binaryConfig(), DecoderOptions{MaxBytes: len(doc)}).DecodeJSON([]byte(doc), &x)
	checkDecodeError(t, "json", err, "u", fmt.Sprintf("values nest deeper than %d at byte %d", MaxDepth, 5+MaxDepth))
}

func TestDecodeUnknownKeysMayBeMany(t *testing.T) {
	var doc strings.Builder
	doc.WriteString(`{"features":{"a":1}`)
	for i := range 100 {
		fmt.Fprintf(&doc, `,"k%d":%d`, i, i)
	}
	doc.WriteString("}")
	for format, r := range decodeBoth(t, binaryConfig(), DecoderOptions{}, doc.String()) {
		if r.err != nil || len(r.x.Index) != 1 {
			t.Errorf("%s: %v, %d features; want 1 feature", format, r.err, len(r.x.Index))
		}
	}
}

func TestDecodeLimitsAreInclusive(t *testing.T) {
	small := binaryConfig()
	small.HashBits = 2
	doc := `{"features":{"a":1e30,"b":-1e30},"x":[1,2,3,-1e30],"weight":1e30}`
	opts := DecoderOptions{MaxFeatures: 6, MaxBytes: len(doc)}
	for format, r := range decodeBoth(t, small, opts, doc) {
		if r.err != nil {
			t.Errorf("%s: %v", format, r.err)
		}
		if r.x.NNZ() != 6 {
			t.Errorf("%s: %d features, want 6", format, r.x.NNZ())
		}
	}
}

func TestDecoderOptionsDefaults(t *testing.T) {
	for _, opts := range []DecoderOptions{{}, {MaxFeatures: -1, MaxBytes: -1}} {
		d := NewDecoder(binaryConfig(), opts)
		if d.maxFeatures != DefaultMaxFeatures || d.maxBytes != DefaultMaxBytes {
			t.Errorf("%+v: limits %d features, %d bytes; want %d, %d", opts, d.maxFeatures, d.maxBytes, DefaultMaxFeatures, DefaultMaxBytes)
		}
	}
	// The default feature limit applies: 4097 features are refused.
	var doc strings.Builder
	doc.WriteString(`{"features":{`)
	for i := range DefaultMaxFeatures + 1 {
		if i > 0 {
			doc.WriteByte(',')
		}
		fmt.Fprintf(&doc, `"f%d":1`, i)
	}
	doc.WriteString("}}")
	for format, r := range decodeBoth(t, binaryConfig(), DecoderOptions{}, doc.String()) {
		checkDecodeError(t, format, r.err, "features", "more than 4096 features")
	}
	// The default size limit applies.
	big := `{"s":"` + strings.Repeat("a", DefaultMaxBytes) + `"}`
	for format, r := range decodeBoth(t, binaryConfig(), DecoderOptions{}, big) {
		checkDecodeError(t, format, r.err, "payload", fmt.Sprintf("bytes exceed the limit of %d", DefaultMaxBytes))
	}
}

func TestDecodeDetectsTheFormat(t *testing.T) {
	cfg := binaryConfig()
	mp := encodeMsgpack(t, mpMap{"label", 1, "features", mpMap{"a", 0.5}})
	index, value := sparse(cfg, "a", 0.5)
	want := learner.Example{Index: index, Value: value, Labeled: true, Label: 1}
	good := map[string][]byte{
		"json":                               []byte(`{"label":1,"features":{"a":0.5}}`),
		"json with space":                    []byte("\n {\"label\":1,\"features\":{\"a\":0.5}} \r\n"),
		"msgpack":                            mp,
		"msgpack after and before space":     append(append([]byte(" \n"), mp...), ' ', '\n'),
		"msgpack map16":                      append([]byte{0xde, 0, 2}, mp[1:]...),
		"msgpack map32":                      append([]byte{0xdf, 0, 0, 0, 2}, mp[1:]...),
		"msgpack with bin keys":              encodeMsgpack(t, mpMap{mpBin("label"), 1, mpBin("features"), mpMap{mpBin("a"), 0.5}}),
		"msgpack with an unknown nested key": encodeMsgpack(t, mpMap{"z", []any{mpMap{"q", mpExt{1, []byte{1, 2}}}}, "label", int8(1), "features", mpMap{"a", 0.5}}),
	}
	for name, data := range good {
		t.Run(name, func(t *testing.T) {
			var x learner.Example
			if _, err := NewDecoder(cfg, DecoderOptions{}).Decode(data, &x); err != nil {
				t.Fatal(err)
			}
			if diff := diffExample(x, want); diff != "" {
				t.Error(diff)
			}
		})
	}
	bad := []struct {
		name, data, field, problem string
	}{
		{"empty", "", "example", "empty payload"},
		{"space only", " \n\t", "example", "empty payload"},
		{"JSON array", "[1]", "example", "not a JSON object or msgpack map (first byte 0x5b)"},
		{"msgpack array", string(encodeMsgpack(t, []any{1})), "example", "not a JSON object or msgpack map (first byte 0x91)"},
		{"msgpack then garbage", string(mp) + "x", "example", "1 bytes follow the msgpack map"},
		{"two msgpack maps", string(mp) + string(mp), "example", "bytes follow the msgpack map"},
		{"JSON then garbage", `{"label":1} 1`, "example", "unexpected '1' after the object at byte 12"},
		{"truncated msgpack", string(mp[:len(mp)-1]), "features.a", "unexpected end of data"},
	}
	for _, tt := range bad {
		t.Run(tt.name, func(t *testing.T) {
			var x learner.Example
			_, err := NewDecoder(cfg, DecoderOptions{}).Decode([]byte(tt.data), &x)
			checkDecodeError(t, "Decode", err, tt.field, tt.problem)
			if x.NNZ() != 0 || x.Labeled {
				t.Errorf("example not reset: %+v", x)
			}
		})
	}
	t.Run("size limit first", func(t *testing.T) {
		var x learner.Example
		_, err := NewDecoder(cfg, DecoderOptions{MaxBytes: 4}).Decode([]byte("xxxxxxx"), &x)
		checkDecodeError(t, "Decode", err, "payload", "7 bytes exceed the limit of 4")
	})
}

func TestDecodeErrorWrapsUnexpectedEOF(t *testing.T) {
	doc := `{"id":"a","label":1,"features":{"f1":0.5,"c":"red"},"x":[1,2],"weight":2}`
	inputs := map[string][]byte{"json": []byte(doc), "msgpack": jsonToMsgpack(t, doc)}
	for format, data := range inputs {
		d := NewDecoder(binaryConfig(), DecoderOptions{})
		for n := range len(data) {
			var x learner.Example
			var err error
			if format == "json" {
				_, err = d.DecodeJSON(data[:n], &x)
			} else {
				var used int
				used, _, err = d.DecodeMsgpack(data[:n], &x)
				if used != 0 {
					t.Errorf("%s: %d of %d bytes: used %d, want 0", format, n, len(data), used)
				}
			}
			var de *DecodeError
			if !errors.Is(err, io.ErrUnexpectedEOF) || !errors.As(err, &de) {
				t.Errorf("%s: %d of %d bytes: error %v, want a *DecodeError wrapping io.ErrUnexpectedEOF", format, n, len(data), err)
			}
		}
	}
	// Other errors do not claim to be truncations.
	_, err := NewDecoder(binaryConfig(), DecoderOptions{}).DecodeJSON([]byte(`{"label":2}`), new(learner.Example))
	if err == nil || errors.Is(err, io.ErrUnexpectedEOF) {
		t.Errorf("bad label: error %v, want one that is not io.ErrUnexpectedEOF", err)
	}
}

func TestDecodeResetsTheExample(t *testing.T) {
	cfg := binaryConfig()
	big := `{"label":1,"weight":3,"features":{"a":1,"b":2,"c":"x"},"x":[1,2,3]}`
	small := `{"features":{"z":4}}`
	index, value := sparse(cfg, "z", 4.0)
	want := learner.Example{Index: index, Value: value}
	for _, format := range []string{"json", "msgpack"} {
		d := NewDecoder(cfg, DecoderOptions{})
		var x learner.Example
		var err error
		for _, doc := range []string{big, small} {
			if format == "json" {
				_, err = d.DecodeJSON([]byte(doc), &x)
			} else {
				_, _, err = d.DecodeMsgpack(jsonToMsgpack(t, doc), &x)
			}
			if err != nil {
				t.Fatalf("%s: %v", format, err)
			}
		}
		if diff := diffExample(x, want); diff != "" {
			t.Errorf("%s:\n%s", format, diff)
		}
	}
}

// TestJSONAndMsgpackAgree decodes random examples written in both formats.
func TestJSONAndMsgpackAgree(t *testing.T) {
	for _, cfg := range []learner.Config{binaryConfig(), namedConfig(), multiConfig()} {
		for k, e := range randomDocs(t, cfg, 300) {
			results := decodeBoth(t, cfg, DecoderOptions{}, e)
			ref := results["json"]
			if ref.err != nil {
				t.Fatalf("example %d %s: %v", k, e, ref.err)
			}
			for format, r := range results {
				if r.err != nil {
					t.Errorf("example %d, %s: %v\n%s", k, format, r.err, e)
					continue
				}
				if diff := diffExample(r.x, ref.x); diff != "" {
					t.Errorf("example %d, %s differs from json:\n%s\n%s", k, format, diff, e)
				}
				if !bytes.Equal(r.meta.ID, ref.meta.ID) || r.meta.HasID != ref.meta.HasID {
					t.Errorf("example %d, %s: id %q, json id %q", k, format, r.meta.ID, ref.meta.ID)
				}
			}
		}
	}
}

func TestDecodeDoesNotAllocate(t *testing.T) {
	cfg := namedConfig()
	docs := []string{
		`{"id":"a1","label":"pos","features":{"f1":0.5,"color":"red","n":-3,"big":1.2345678901234567e29,"long":0.12345678901234567890123},"x":[1,2.5],"weight":2}`,
		`{"id":"\u0041\n","label":"neg","features":{"caf\u00e9":"\u00fcber\ud83d\ude00","x\ty":1},"unknown":{"a":[1,{"b":"\"c\""}]},"u2":[1,2,3,1e999,-0.5e-400]}`,
		`{"id":12345,"label":false,"x":[0.1,0.2,0.3]}`,
	}
	for i, doc := range docs {
		for _, format := range []string{"json", "msgpack"} {
			data := []byte(doc)
			if format == "msgpack" {
				data = jsonToMsgpack(t, doc)
			}
			d := NewDecoder(cfg, DecoderOptions{})
			var x learner.Example
			decode := func() {
				var err error
				if format == "json" {
					_, err = d.DecodeJSON(data, &x)
				} else {
					_, _, err = d.DecodeMsgpack(data, &x)
				}
				if err != nil {
					t.Fatal(err)
				}
			}
			decode() // grows the scratch buffers and x
			if allocs := testing.AllocsPerRun(100, decode); allocs != 0 {
				t.Errorf("example %d, %s: %v allocations per decode, want 0", i, format, allocs)
			}
		}
	}
	// So does the typical example of the benchmarks.
	d := NewDecoder(binaryConfig(), DecoderOptions{})
	var x learner.Example
	ex := typicalExamples(t, 4)
	for _, e := range ex {
		if _, err := d.DecodeJSON(e.json, &x); err != nil {
			t.Fatal(err)
		}
	}
	allocs := testing.AllocsPerRun(100, func() {
		for _, e := range ex {
			if _, err := d.DecodeJSON(e.json, &x); err != nil {
				t.Fatal(err)
			}
			if _, _, err := d.DecodeMsgpack(e.msgpack, &x); err != nil {
				t.Fatal(err)
			}
			if _, err := d.Decode(e.msgpack, &x); err != nil {
				t.Fatal(err)
			}
		}
	})
	if allocs != 0 {
		t.Errorf("typical examples: %v allocations, want 0", allocs)
	}
}

func TestDecodeErrorMessage(t *testing.T) {
	err := error(&DecodeError{Field: "features.age", Problem: "value is not a number or string (got array)"})
	if got, want := err.Error(), "features.age: value is not a number or string (got array)"; got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
	wrapped := fmt.Errorf("kafka:t/0/5: %w", err)
	var de *DecodeError
	if !errors.As(wrapped, &de) || de.Field != "features.age" {
		t.Errorf("errors.As through a wrap: %v", de)
	}
}

func TestDecodeErrorQuotesOddNames(t *testing.T) {
	long := strings.Repeat("n", 100)
	tests := []struct{ name, field string }{
		{"plain", "features.plain"},
		{"new\nline", `features."new\nline"`},
		{long, "features." + long[:64] + "..."},
	}
	for _, tt := range tests {
		doc, _ := json.Marshal(map[string]any{"features": map[string]any{tt.name: []int{1}}})
		_, err := NewDecoder(binaryConfig(), DecoderOptions{}).DecodeJSON(doc, new(learner.Example))
		checkDecodeError(t, tt.name, err, tt.field, "(got array)")
	}
}

// randomDocs are n random valid examples in JSON for cfg, with every kind
// of key and value.
func randomDocs(tb testing.TB, cfg learner.Config, n int) []string {
	rng := newRand(7)
	docs := make([]string, n)
	for k := range docs {
		var keys []string
		if rng.IntN(3) > 0 {
			if rng.IntN(2) == 0 {
				keys = append(keys, fmt.Sprintf(`"id":"e\u00e9-%d"`, rng.IntN(1000)))
			} else {
				keys = append(keys, fmt.Sprintf(`"id":%d`, rng.Int64N(1<<62)-1<<61))
			}
		}
		if rng.IntN(4) > 0 {
			keys = append(keys, `"label":`+randomLabel(rng, cfg))
		}
		if rng.IntN(5) > 0 {
			var f []string
			for range rng.IntN(30) {
				name := fmt.Sprintf("f%d", rng.IntN(500))
				if rng.IntN(10) == 0 {
					name = `n\"\u00e9\ud83d\ude00` + name
				}
				switch rng.IntN(4) {
				case 0:
					f = append(f, fmt.Sprintf(`"%s":"v%d"`, name, rng.IntN(5)))
				case 1:
					f = append(f, fmt.Sprintf(`"%s":%d`, name, rng.IntN(2000)-1000))
				default:
					f = append(f, fmt.Sprintf(`"%s":%s`, name, randomFeatureValue(rng)))
				}
			}
			keys = append(keys, `"features":{`+strings.Join(f, ",")+"}")
		}
		if rng.IntN(3) == 0 {
			var x []string
			for range rng.IntN(10) {
				x = append(x, randomFeatureValue(rng))
			}
			keys = append(keys, `"x":[`+strings.Join(x, ",")+"]")
		}
		if rng.IntN(3) == 0 {
			keys = append(keys, fmt.Sprintf(`"weight":%g`, 0.01+rng.Float64()*10))
		}
		if rng.IntN(4) == 0 {
			keys = append(keys, `"extra":{"a":[1,"b",null,true],"c":{}}`)
		}
		rng.Shuffle(len(keys), func(i, j int) { keys[i], keys[j] = keys[j], keys[i] })
		docs[k] = "{" + strings.Join(keys, ",") + "}"
	}
	return docs
}

func randomLabel(rng interface{ IntN(int) int }, cfg learner.Config) string {
	switch len(cfg.Classes) {
	case 0:
		return []string{"1", "-1", "0", "true", "false", "null"}[rng.IntN(6)]
	case 2:
		return []string{"1", "-1", "0", "true", "false", "null", `"neg"`, `"pos"`}[rng.IntN(8)]
	}
	if rng.IntN(2) == 0 {
		return strconv.Quote(cfg.Classes[rng.IntN(len(cfg.Classes))])
	}
	return strconv.Itoa(rng.IntN(len(cfg.Classes)))
}

type typical struct{ json, msgpack []byte }

// typicalExamples are n examples like a producer sends: an id string, a
// label of 1 or -1 and 40 features named like "f1234" with values of four
// decimals, of either sign.
func typicalExamples(tb testing.TB, n int) []typical {
	rng := newRand(11)
	out := make([]typical, n)
	for k := range out {
		id := fmt.Sprintf("ex-%06d", k)
		label := 1
		if rng.IntN(2) == 0 {
			label = -1
		}
		var doc bytes.Buffer
		features := make(mpMap, 0, 80)
		fmt.Fprintf(&doc, `{"id":%q,"label":%d,"features":{`, id, label)
		for i := range 40 {
			name := "f" + strconv.Itoa(rng.IntN(10000))
			value := float64(rng.IntN(20001)-10000) / 1e4
			if i > 0 {
				doc.WriteByte(',')
			}
			fmt.Fprintf(&doc, "%q:%s", name, strconv.FormatFloat(value, 'f', 4, 64))
			features = append(features, name, value)
		}
		doc.WriteString("}}")
		out[k] = typical{
			json:    doc.Bytes(),
			msgpack: encodeMsgpack(tb, mpMap{"id", id, "label", label, "features", features}),
		}
	}
	return out
}
