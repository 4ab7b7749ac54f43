package jsonscan

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestStringMatchesEncodingJSON(t *testing.T) {
	pieces := []string{
		"a", "Z", " ", "é", "日本", "😀", `\"`, `\\`, `\/`, `\b`, `\f`, `\n`, `\r`, `\t`,
		`\u0000`, `\u001f`, `\u0041`, `\u00e9`, `\u00E9`, `\u20ac`, `\uFFFF`, `\ud83d\ude00`, `\uD83D\uDE00`,
		`\ud83d`, `\ude00`, `\ud83d\u0041`, `\ud83dx`, `\ud83d\ud83d\ude00`, `\udbff\udfff`, `\ud800\udc00`,
	}
	rng := newRand(3)
	var buf []byte
	for range 20000 {
		var s strings.Builder
		for range rng.IntN(12) {
			s.WriteString(pieces[rng.IntN(len(pieces))])
		}
		if rng.IntN(3) == 0 {
			s.WriteString(strings.Repeat("x", rng.IntN(20))) // long runs for the 8-byte scan
		}
		lit := `"` + s.String() + `"`
		var want string
		if err := json.Unmarshal([]byte(lit), &want); err != nil {
			t.Fatalf("%s: %v", lit, err)
		}
		got, end, err := String([]byte(lit+`,"`), 0, &buf)
		if err != nil || end != len(lit) || string(got) != want {
			t.Fatalf("String(%s) = %q, %d, %v; want %q, %d", lit, got, end, err, want, len(lit))
		}
	}
}

func TestStringErrors(t *testing.T) {
	tests := []struct {
		in, problem string
		eof         bool
	}{
		{`"a\x"`, `invalid escape "\\x" in a string at byte 2`, false},
		{`"\q"`, `invalid escape "\\q" in a string at byte 1`, false},
		{`"\u12G4"`, `invalid \u escape at byte 1 (want 4 hex digits)`, false},
		{`"ab\u12"`, `invalid \u escape at byte 3 (want 4 hex digits)`, false},
		{"\"x\x01\"", "control character 0x01 in a string at byte 2 (escape it)", false},
		{"\"a\nb\"", "control character 0x0a in a string at byte 2 (escape it)", false},
		{`"abc`, `unexpected end of input at byte 4 (want '"')`, true},
		{`"` + strings.Repeat("x", 20), `unexpected end of input at byte 21 (want '"')`, true},
		{`"abc\`, "unexpected end of input at byte 5 (want an escape)", true},
		{`"\u12`, "unexpected end of input at byte 5 (want a hex digit)", true},
		{`"\n`, `unexpected end of input at byte 3 (want '"')`, true},
	}
	var buf []byte
	for _, tt := range tests {
		_, _, err := String([]byte(tt.in), 0, &buf)
		if err == nil {
			t.Errorf("String(%q) accepted it", tt.in)
			continue
		}
		if err.Problem != tt.problem || errors.Is(err, io.ErrUnexpectedEOF) != tt.eof {
			t.Errorf("String(%q): %q (end of input %v), want %q (end of input %v)", tt.in, err, errors.Is(err, io.ErrUnexpectedEOF), tt.problem, tt.eof)
		}
		if json.Valid([]byte(tt.in)) {
			t.Errorf("test input %q is valid JSON", tt.in)
		}
	}
}

// TestShortString: the fast path reads the short unescaped strings, and
// only those, as String does.
func TestShortString(t *testing.T) {
	var buf []byte
	for _, tt := range []struct {
		in string
		ok bool // the fast path reads it
	}{
		{`"":1,"pad"`, true},
		{`"f1234":1.5`, true},
		{`"1234567":1`, true},   // 7 bytes and the quote: the 8 bytes
		{`"12345678":1`, false}, // the quote is the 9th byte
		{`"a\"b":1,"pad"`, false},
		{"\"a\tb\":1,\"pad\"", false},
		{`"short"`, false}, // fewer than 8 bytes after the quote
	} {
		b := []byte(tt.in)
		s, end, ok := ShortString(b, 0)
		if ok != tt.ok {
			t.Errorf("ShortString(%q): ok %v, want %v", tt.in, ok, tt.ok)
		}
		if !ok {
			continue
		}
		want, wantEnd, err := String(b, 0, &buf)
		if err != nil || string(s) != string(want) || end != wantEnd {
			t.Errorf("ShortString(%q) = %q, %d; String says %q, %d, %v", tt.in, s, end, want, wantEnd, err)
		}
	}
}

func TestStringDoesNotAllocate(t *testing.T) {
	in := []byte(`"caf\u00e9 \ud83d\ude00 \"quoted\" and a long tail of plain text"`)
	var buf []byte
	String(in, 0, &buf) // grows buf
	allocs := testing.AllocsPerRun(100, func() {
		if _, _, err := String(in, 0, &buf); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 0 {
		t.Errorf("%v allocations, want 0", allocs)
	}
}

// FuzzString checks String and ShortString against encoding/json.
func FuzzString(f *testing.F) {
	f.Add([]byte(`"plain"`))
	f.Add([]byte(`"f1":`))
	f.Add([]byte(`"a\"b\\c\/d\b\f\n\r\t\u00e9\ud83d\ude00\ud83d"`))
	f.Add([]byte("\"a\x01\""))
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) == 0 || data[0] != '"' {
			return
		}
		buf := []byte("stale")
		got, end, err := String(data, 0, &buf)
		if s, sEnd, ok := ShortString(data, 0); ok && (err != nil || string(s) != string(got) || sEnd != end) {
			t.Fatalf("ShortString: %q, %d; String: %q, %d, %v", s, sEnd, got, end, err)
		}
		if end < 1 || end > len(data) {
			t.Fatalf("end %d of %d bytes", end, len(data))
		}
		// encoding/json reads the same string, or refuses it too. It
		// replaces invalid UTF-8, which String keeps.
		var want string
		jsonErr := json.Unmarshal(data[:end], &want)
		if err != nil {
			if jsonErr == nil {
				t.Fatalf("String refused %q (%v), which encoding/json reads", data[:end], err)
			}
			if errors.Is(err, io.ErrUnexpectedEOF) && bytes.IndexByte(data[1:], '"') >= 0 && !bytes.Contains(data, []byte(`\`)) {
				t.Fatalf("end of input in %q, which has a closing quote: %v", data, err)
			}
			return
		}
		if jsonErr != nil {
			t.Fatalf("String read %q from %q, which encoding/json refuses: %v", got, data[:end], jsonErr)
		}
		if utf8.Valid(data[:end]) && string(got) != want {
			t.Fatalf("String read %q, encoding/json %q", got, want)
		}
	})
}
