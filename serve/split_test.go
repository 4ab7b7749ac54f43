package serve

import (
	"bytes"
	"encoding/json"
	"io"
	"strings"
	"testing"

	"github.com/hyperplane-ml/hyperplane/internal/msgpackscan"
)

// TestSplit finds the examples of bodies of each shape, and refuses
// bodies that hold none or break off.
func TestSplit(t *testing.T) {
	for _, tc := range []struct {
		name    string
		body    string
		msgpack bool
		shape   shape
		spans   []string // the examples found; nil: an error
	}{
		{"one object", ` {"a":1} `, false, shapeOne, []string{`{"a":1}`}},
		{"an array", `[ {"a":1} , {"b":[2]} ]`, false, shapeArray, []string{`{"a":1}`, `{"b":[2]}`}},
		{"an empty array", "[\n]\n", false, shapeArray, []string{}},
		{"lines", "{\"a\":1}\n{\"b\":2}\r\n{}", false, shapeLines, []string{`{"a":1}`, `{"b":2}`, `{}`}},
		{"values end to end", `{}{}`, false, shapeLines, []string{`{}`, `{}`}},
		{"other values", `1 "x"`, false, shapeLines, []string{`1`, `"x"`}},
		{"empty", "", false, 0, nil},
		{"white space", " \t\r\n", false, 0, nil},
		{"an array with a trailing comma", `[{},]`, false, 0, nil},
		{"an array not closed", `[{}`, false, 0, nil},
		{"two arrays", `[][]`, false, 0, nil},
		{"a truncated object", `{"a":`, false, 0, nil},
		{"too deep", strings.Repeat("[", maxDepth+2) + strings.Repeat("]", maxDepth+2), false, 0, nil},
		{"a msgpack map", "\x81\xa1a\x01", true, shapeOne, []string{"\x81\xa1a\x01"}},
		{"a msgpack array", "\x92\x80\x81\xa1a\xc0", true, shapeArray, []string{"\x80", "\x81\xa1a\xc0"}},
		{"an empty msgpack array", "\x90", true, shapeArray, []string{}},
		{"msgpack maps end to end", "\x80\x80\x80", true, shapeLines, []string{"\x80", "\x80", "\x80"}},
		{"empty msgpack", "", true, 0, nil},
		{"a msgpack string", "\xa1a", true, 0, nil},
		{"a truncated msgpack map", "\x81\xa1a", true, 0, nil},
		{"bytes after a msgpack array", "\x91\x80\x80", true, 0, nil},
		{"a msgpack array counting more", "\x93\x80\x80", true, 0, nil},
		{"a msgpack array header cut short", "\xdc\x00", true, 0, nil},
		{"a map after maps, cut short", "\x80\x81", true, 0, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var s splitter
			shp, spans, err := s.split([]byte(tc.body), tc.msgpack)
			if tc.spans == nil {
				if err == nil {
					t.Fatalf("split %q: shape %d, %d examples; want an error", tc.body, shp, len(spans))
				}
				return
			}
			if err != nil {
				t.Fatalf("split %q: %v", tc.body, err)
			}
			if shp != tc.shape {
				t.Errorf("shape %d, want %d", shp, tc.shape)
			}
			// An example may keep the white space before it, which the
			// decoder skips.
			var got []string
			for _, sp := range spans {
				got = append(got, strings.TrimLeft(tc.body[sp[0]:sp[1]], " \t\r\n"))
			}
			if strings.Join(got, "|") != strings.Join(tc.spans, "|") || len(got) != len(tc.spans) {
				t.Errorf("examples %q, want %q", got, tc.spans)
			}
		})
	}
}

// isJSONSpace reports whether c is JSON white space.
func isJSONSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

// FuzzSplit splits any body, reusing one splitter: it never panics, and
// what it finds is consistent. The examples are in order, inside the
// body and not empty; between them there is only what the shape allows
// (white space, and the brackets and commas of an array, in JSON; the
// array's header in msgpack, whose examples cover the rest end to end);
// a JSON example is one whole JSON value when encoding/json reads the
// body; and the same body split again gives the same answer.
func FuzzSplit(f *testing.F) {
	for _, seed := range []struct {
		body    string
		msgpack bool
	}{
		{`{"id":"a","features":{"f1":1}}`, false},
		{`[{"x":[1,2]},{"label":1,"features":{"c":"red"}}]`, false},
		{"{\"x\":[1]}\n{\"x\":[2]}\n", false},
		{`[]`, false},
		{`[{"a":"\u00e9\"\\"}, 1e5, -0.5e-3, true, null]`, false},
		{`[{},`, false},
		{"\x81\xa1x\x91\x01", true},
		{"\x92\x80\x81\xa2id\xa1a", true},
		{"\x80\x80", true},
		{"\xdc\x00\x01\x80", true},
		{"\xdd\x00\x00\x00\x02\x80\x80", true},
		{"\x81\xc4\x01x\xd9\x03abc", true},
		{"\x81\xa1e\xc7\x02\x01ab", true},
	} {
		f.Add([]byte(seed.body), seed.msgpack)
	}
	var s splitter
	f.Fuzz(func(t *testing.T, body []byte, msgpack bool) {
		shp, spans, err := s.split(body, msgpack)
		if err != nil {
			if err.Error() == "" {
				t.Fatal("an error that says nothing")
			}
			if _, _, err2 := s.split(body, msgpack); err2 == nil || err2.Error() != err.Error() {
				t.Fatalf("split again: %v, first %v", err2, err)
			}
			return
		}
		spans = append([][2]int(nil), spans...)
		switch {
		case shp == shapeOne && len(spans) != 1:
			t.Fatalf("shape one with %d examples", len(spans))
		case shp == shapeLines && len(spans) < 2:
			t.Fatalf("shape lines with %d examples", len(spans))
		case shp > shapeLines:
			t.Fatalf("shape %d", shp)
		}
		prev := 0
		for _, sp := range spans {
			if sp[0] < prev || sp[1] <= sp[0] || sp[1] > len(body) {
				t.Fatalf("example at [%d,%d) after %d in %d bytes", sp[0], sp[1], prev, len(body))
			}
			if msgpack && shp != shapeArray && sp[0] != prev {
				t.Fatalf("msgpack example at %d, the one before ends at %d", sp[0], prev)
			}
			prev = sp[1]
		}
		if msgpack {
			checkMsgpackSplit(t, body, shp, spans)
		} else {
			checkJSONSplit(t, body, shp, spans)
		}
		shp2, spans2, err := s.split(body, msgpack)
		if err != nil || shp2 != shp || !equalSpans(spans, spans2) {
			t.Fatalf("split again: shape %d, %v, %v; first shape %d, %v", shp2, spans2, err, shp, spans)
		}
	})
}

func equalSpans(a, b [][2]int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func checkMsgpackSplit(t *testing.T, body []byte, shp shape, spans [][2]int) {
	t.Helper()
	start := 0
	if shp == shapeArray {
		n, next, st := msgpackscan.ArrayLen(body, 0)
		if st != msgpackscan.OK || n != len(spans) {
			t.Fatalf("array of %d (%v), %d examples found", n, st, len(spans))
		}
		start = next
	}
	end := start
	if len(spans) > 0 {
		if spans[0][0] != start {
			t.Fatalf("the first example at %d, want %d", spans[0][0], start)
		}
		end = spans[len(spans)-1][1]
	}
	if end != len(body) {
		t.Fatalf("the examples end at %d of %d bytes", end, len(body))
	}
	for i := 1; i < len(spans); i++ {
		if spans[i][0] != spans[i-1][1] {
			t.Fatalf("example %d at %d, the one before ends at %d", i+1, spans[i][0], spans[i-1][1])
		}
	}
}

func checkJSONSplit(t *testing.T, body []byte, shp shape, spans [][2]int) {
	t.Helper()
	// What is between the examples, with the white space taken out.
	var between []string
	prev := 0
	for _, sp := range spans {
		between = append(between, stripSpace(body[prev:sp[0]]))
		prev = sp[1]
	}
	between = append(between, stripSpace(body[prev:]))
	for i, b := range between {
		want := ""
		if shp == shapeArray {
			switch {
			case len(spans) == 0:
				want = "[]"
			case i == 0:
				want = "["
			case i == len(spans):
				want = "]"
			default:
				want = ","
			}
		}
		if b != want {
			t.Fatalf("%q between examples %d and %d, want %q", b, i, i+1, want)
		}
	}
	valid := json.Valid(body)
	if shp == shapeLines {
		valid = validLines(body)
	}
	if !valid {
		// The splitter does not validate: the decoder refuses what it
		// lets through.
		return
	}
	for _, sp := range spans {
		if v := body[sp[0]:sp[1]]; !json.Valid(v) {
			t.Fatalf("example %q is not one whole JSON value of the body", v)
		}
	}
}

// validLines reports whether encoding/json reads body as values end to
// end.
func validLines(body []byte) bool {
	d := json.NewDecoder(bytes.NewReader(body))
	for {
		var v json.RawMessage
		if err := d.Decode(&v); err != nil {
			return err == io.EOF
		}
	}
}

func stripSpace(b []byte) string {
	var out []byte
	for _, c := range b {
		if !isJSONSpace(c) {
			out = append(out, c)
		}
	}
	return string(out)
}
