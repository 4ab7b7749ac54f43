// Package oneof checks the settings that take one of a fixed list of
// values (a format, a mode, a mechanism, a kind) and names the list in its
// errors. Each such setting is a string type that lists its values once,
// as typed constants, and reads that one list both to parse text and to
// validate a value set in code.
package oneof

import (
	"fmt"
	"slices"
	"strings"
)

// Check returns nil if v is one of values, or else the error
// `unknown <what> "v" (want a, b or c)`.
func Check[T ~string](what string, v T, values ...T) error {
	if slices.Contains(values, v) {
		return nil
	}
	return fmt.Errorf("unknown %s %q (want %s)", what, string(v), List(values...))
}

// Parse sets *dst to text if text is one of values, for an UnmarshalText
// method; otherwise it leaves *dst as it was and returns Check's error.
func Parse[T ~string](dst *T, text []byte, what string, values ...T) error {
	v := T(text)
	if err := Check(what, v, values...); err != nil {
		return err
	}
	*dst = v
	return nil
}

// List is values as a sentence names them: "a, b or c".
func List[T ~string](values ...T) string {
	var b strings.Builder
	for i, v := range values {
		switch {
		case i == 0:
		case i == len(values)-1:
			b.WriteString(" or ")
		default:
			b.WriteString(", ")
		}
		b.WriteString(string(v))
	}
	return b.String()
}
