// Package subject compares NATS subjects, whose tokens are separated by
// dots and may be the wildcards '*' (one token) and '>' (the rest, one
// token or more). It is what the configuration and the NATS adapters
// both ask: whether a stream or a filter takes in a subject.
package subject

import "strings"

// Within reports whether every subject that sub matches is matched by of;
// both may hold wildcards.
func Within(sub, of string) bool {
	st, ot := strings.Split(sub, "."), strings.Split(of, ".")
	for i, o := range ot {
		if o == ">" {
			return len(st) > i
		}
		if i >= len(st) || st[i] == ">" || (o != "*" && (st[i] == "*" || st[i] != o)) {
			return false
		}
	}
	return len(st) == len(ot)
}

// Overlap reports whether some subject is matched by both a and b; both
// may hold wildcards.
func Overlap(a, b string) bool {
	at, bt := strings.Split(a, "."), strings.Split(b, ".")
	for i := 0; i < len(at) && i < len(bt); i++ {
		switch x, y := at[i], bt[i]; {
		case x == ">":
			return true
		case y == ">":
			return true
		case x != "*" && y != "*" && x != y:
			return false
		}
	}
	return len(at) == len(bt)
}
