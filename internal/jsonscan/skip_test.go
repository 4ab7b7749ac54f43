package jsonscan

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
)

// randomJSON is a random JSON value nested at most depth deep, with
// white space between the tokens if spaced.
func randomJSON(rng *rand.Rand, depth int, spaced bool) string {
	space := func() string {
		if !spaced {
			return ""
		}
		return []string{"", " ", "\n\t", "\r\n  "}[rng.IntN(4)]
	}
	n := 9
	if depth == 0 {
		n = 7
	}
	switch rng.IntN(n) {
	case 0:
		return "null"
	case 1:
		return []string{"true", "false"}[rng.IntN(2)]
	case 2, 3:
		return randomNumber(rng)
	case 4, 5, 6:
		b, _ := json.Marshal(strings.Repeat("é\"\\\n\u2028x", rng.IntN(4)) + strconv.Itoa(rng.IntN(1000)))
		return string(b)
	case 7:
		var elems []string
		for range rng.IntN(6) {
			elems = append(elems, space()+randomJSON(rng, depth-1, spaced)+space())
		}
		return "[" + space() + strings.Join(elems, ",") + "]"
	default:
		var members []string
		for i := range rng.IntN(6) {
			members = append(members, space()+`"k`+strconv.Itoa(i)+`"`+space()+":"+space()+randomJSON(rng, depth-1, spaced)+space())
		}
		return "{" + space() + strings.Join(members, ",") + "}"
	}
}

// TestSkipAgreesWithJSONValid: Skip steps over random values, and refuses
// every proper prefix of them as the end of input.
func TestSkipAgreesWithJSONValid(t *testing.T) {
	rng := newRand(5)
	s := Skipper{MaxDepth: 10}
	for range 2000 {
		v := randomJSON(rng, 5, rng.IntN(2) == 0)
		if !json.Valid([]byte(v)) {
			t.Fatalf("test value %s is not valid JSON", v)
		}
		in := []byte(v + ",")
		end, err := s.Skip(in, 0)
		if err != nil || end != len(v) {
			t.Fatalf("Skip(%s) = %d, %v; want %d", v, end, err, len(v))
		}
		for n := range len(v) {
			prefix := []byte(v[:n])
			if end, err := s.Skip(prefix, 0); err == nil {
				// A prefix of a number is a number.
				if !json.Valid(prefix) || SkipSpace(prefix, end) != len(prefix) {
					t.Fatalf("Skip accepted the prefix %q of %s", prefix, v)
				}
			} else if !errors.Is(err, io.ErrUnexpectedEOF) {
				t.Fatalf("prefix %q of %s: %v, want the end of input", prefix, v, err)
			}
		}
	}
}

func TestSkipDepth(t *testing.T) {
	nested := func(depth int) string {
		return strings.Repeat(`{"a":[`, depth/2) + strings.Repeat("[", depth%2) + "1" + strings.Repeat("]", depth%2) + strings.Repeat("]}", depth/2)
	}
	for _, max := range []int{1, 2, 7, 1000} {
		s := Skipper{MaxDepth: max}
		for _, depth := range []int{0, 1, max - 1, max} {
			v := nested(depth)
			if end, err := s.Skip([]byte(v), 0); err != nil || end != len(v) {
				t.Errorf("MaxDepth %d, depth %d: %d, %v; want %d", max, depth, end, err, len(v))
			}
		}
		for _, depth := range []int{max + 1, max + 2, 3 * max} {
			v := nested(depth)
			end, err := s.Skip([]byte(v), 0)
			at := openAt(v, max)
			if want := "values nest deeper than " + strconv.Itoa(max) + " at byte " + strconv.Itoa(at); err == nil || err.Problem != want || end != at {
				t.Errorf("MaxDepth %d, depth %d: %d, %v; want %d, %q", max, depth, end, err, at, want)
			}
		}
	}
	// No bound: a million deep.
	deep := strings.Repeat("[", 1000000) + strings.Repeat("]", 1000000)
	if end, err := new(Skipper).Skip([]byte(deep), 0); err != nil || end != len(deep) {
		t.Errorf("a million deep with no bound: %d, %v", end, err)
	}
}

// openAt is the index of the container of v that opens with max
// containers open.
func openAt(v string, max int) int {
	open := 0
	for i := range len(v) {
		switch v[i] {
		case '[', '{':
			if open == max {
				return i
			}
			open++
		case ']', '}':
			open--
		}
	}
	return -1
}

func TestSkipErrors(t *testing.T) {
	tests := []struct {
		in, problem string
		eof         bool
	}{
		{"", "unexpected end of input at byte 0 (want a value)", true},
		{"  ", "unexpected end of input at byte 2 (want a value)", true},
		{"[1,2", "unexpected end of input at byte 4 (want ',' or ']')", true},
		{`{"a":1`, "unexpected end of input at byte 6 (want ',' or '}')", true},
		{`{"a"`, "unexpected end of input at byte 4 (want ':')", true},
		{`{"a":`, "unexpected end of input at byte 5 (want a value)", true},
		{`{`, "unexpected end of input at byte 1 (want a key)", true},
		{`[tr`, "unexpected end of input at byte 3 (want 'u')", true},
		{`[1,]`, "unexpected ']' at byte 3 (want a value)", false},
		{`{"a":1,}`, "unexpected '}' at byte 7 (want a key)", false},
		{`{"a" 1}`, "unexpected '1' at byte 5 (want ':')", false},
		{`{1:2}`, "unexpected '1' at byte 1 (want a key)", false},
		{`[1 2]`, "unexpected '2' at byte 3 (want ',' or ']')", false},
		{`[1}`, "unexpected '}' at byte 2 (want ',' or ']')", false},
		{`[01]`, "unexpected '1' at byte 2 (want ',' or ']')", false},
		{`[1.]`, "malformed number at byte 1 (unexpected ']' at byte 3)", false},
		{`[True]`, "unexpected 'T' at byte 1 (want a value)", false},
		{`[nul]`, "unexpected ']' at byte 4 (want 'l')", false},
		{`[NaN]`, "NaN is not a JSON number (JSON has no NaN or infinities)", false},
		{`{"a":-Infinity}`, "-Infinity is not a JSON number (JSON has no NaN or infinities)", false},
		{`{"a":nano}`, "unexpected 'a' at byte 6 (want 'u')", false},
		{`["\x"]`, `invalid escape "\\x" in a string at byte 2`, false},
		{"{\"a\x01\":1}", "control character 0x01 in a string at byte 3 (escape it)", false},
		{"\ufeff1", "unexpected byte 0xef at byte 0 (want a value)", false},
	}
	var s Skipper
	for _, tt := range tests {
		_, err := s.Skip([]byte(tt.in), 0)
		if err == nil {
			t.Errorf("Skip(%q) accepted it", tt.in)
			continue
		}
		if err.Problem != tt.problem || errors.Is(err, io.ErrUnexpectedEOF) != tt.eof {
			t.Errorf("Skip(%q): %q (end of input %v), want %q (end of input %v)", tt.in, err, errors.Is(err, io.ErrUnexpectedEOF), tt.problem, tt.eof)
		}
	}
}

func TestSkipDoesNotAllocate(t *testing.T) {
	v := []byte(`{"a":[1,-2.5e-3,{"b":null,"c":"\u0041\n"}],"d":true,"e":{"f":[[["deep"]]]}}`)
	s := Skipper{MaxDepth: 1000}
	s.Skip(v, 0) // grows the scratch buffers
	allocs := testing.AllocsPerRun(100, func() {
		if _, err := s.Skip(v, 0); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 0 {
		t.Errorf("%v allocations, want 0", allocs)
	}
}

// FuzzSkip checks Skip against encoding/json.
func FuzzSkip(f *testing.F) {
	f.Add([]byte(`{"a":[1,2,{"b":null,"c":"\u0041"}],"d":true,"e":{}}`))
	f.Add([]byte(` [ -0.5e-3 , "x" , [[ ]] ] `))
	f.Add([]byte(strings.Repeat("[", 17) + strings.Repeat("]", 17)))
	f.Add([]byte(`{"u":[1,NaN]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		const maxDepth = 16
		s := Skipper{MaxDepth: maxDepth}
		end, err := s.Skip(data, 0)
		if end < 0 || end > len(data) {
			t.Fatalf("end %d of %d bytes", end, len(data))
		}
		valid := json.Valid(data)
		if err != nil {
			tooDeep := strings.HasPrefix(err.Problem, "values nest deeper than ")
			if valid && !tooDeep {
				t.Fatalf("Skip refused valid JSON: %v", err)
			}
			if tooDeep && openAt(string(data), maxDepth) != end {
				t.Fatalf("%v, at %d", err, end)
			}
			// Without the bound, Skip takes or refuses the value as
			// encoding/json does.
			if tooDeep {
				end, err := new(Skipper).Skip(data, 0)
				if (err == nil && SkipSpace(data, end) == len(data)) != valid {
					t.Fatalf("with no bound: %d, %v; encoding/json says valid %v", end, err, valid)
				}
			}
			return
		}
		rest := bytes.TrimLeft(data[end:], " \t\r\n")
		if (len(rest) == 0) != valid {
			t.Fatalf("Skip took %q and left %q; encoding/json says valid %v", data[:end], rest, valid)
		}
		if !json.Valid(data[:end]) {
			t.Fatalf("Skip took %q, which is not valid JSON", data[:end])
		}
	})
}
