package learner

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
)

// Labels are a model's label rules, set by Config.Classes: which label
// values an example may carry, the label (Example.Label) each stands for,
// and the class name, if any, of a label. A model's labels are of one of
// three kinds:
//
//   - no class names: binary, with labels +1 (positive) and -1 (negative),
//     written 1 and -1, or 1 and 0, or true and false;
//   - two class names: binary, the first name -1 and the second +1,
//     written as a name or as the numbers and booleans above;
//   - three or more: multiclass, with labels the class indexes 0 to n-1,
//     written as a class name or an integer index.
//
// A class whose name is an integer in decimal ("3", "-1") or a boolean
// ("true") is what that number or boolean means as a label, so that a
// label means one class however it is written: with classes 1, 2 and 3,
// the label 1 is class "1" (index 0), not index 1. A multiclass model
// with such a name reads every integer label as a name, never as an
// index; a binary one reads a number or boolean that no class is named by
// as above.
//
// The Parse methods do not allocate, so that a decoder may call them for
// every example. When one refuses a value, the Problem method of the same
// kind of value says why, in a sentence fit for an error message.
//
// The zero Labels are those of a binary model without class names. Labels
// are read-only and safe for concurrent use; a Labels value is one word,
// cheap to pass on the per-example path.
type Labels struct {
	r *labelRules // nil: binary without class names
}

type labelRules struct {
	classes    []string
	multiclass bool
	index      map[string]int // multiclass models only
	// named are the labels of the classes whose names are integers in
	// decimal, by that integer, and bools those of the classes named
	// true or false: nil when none is.
	named map[int64]int
	bools map[bool]int
}

// Labels returns the label rules of a model of c, which must be valid (see
// Validate). They keep their own copy of the class names.
func (c Config) Labels() Labels {
	if len(c.Classes) == 0 {
		return Labels{}
	}
	r := &labelRules{classes: slices.Clone(c.Classes), multiclass: c.Multiclass()}
	if r.multiclass {
		r.index = make(map[string]int, len(r.classes))
		for i, name := range r.classes {
			r.index[name] = i
		}
	}
	for i, name := range r.classes {
		label := i
		if !r.multiclass {
			label = 2*i - 1 // the first name -1, the second +1
		}
		if n, ok := decimal(name); ok {
			if r.named == nil {
				r.named = map[int64]int{}
			}
			r.named[n] = label
		}
		if b, err := strconv.ParseBool(name); err == nil && strconv.FormatBool(b) == name {
			if r.bools == nil {
				r.bools = map[bool]int{}
			}
			r.bools[b] = label
		}
	}
	return Labels{r: r}
}

// decimal is the integer name writes in decimal, as a number label of
// that value is written: no sign but a leading minus, no leading zeros.
func decimal(name string) (int64, bool) {
	n, err := strconv.ParseInt(name, 10, 64)
	return n, err == nil && strconv.FormatInt(n, 10) == name
}

// numbered reports whether a class of l is named by an integer.
func (l Labels) numbered() bool { return l.r != nil && len(l.r.named) > 0 }

// Multiclass reports whether labels are class indexes rather than ±1.
func (l Labels) Multiclass() bool { return l.r != nil && l.r.multiclass }

// names are the class names, nil for none.
func (l Labels) names() []string {
	if l.r == nil {
		return nil
	}
	return l.r.classes
}

// Class is the name of label's class: the class of that index for a
// multiclass model, the first name for -1 and the second for +1 for a
// binary model with names. ok is false for a binary model without names,
// whose labels are only numbers. label must be a label of the model.
func (l Labels) Class(label int) (name string, ok bool) {
	switch {
	case l.Multiclass():
		return l.names()[label], true
	case len(l.names()) == 2 && label > 0:
		return l.names()[1], true
	case len(l.names()) == 2:
		return l.names()[0], true
	}
	return "", false
}

// ParseNumber is the label that the number v stands for: the class named
// v, if one is; else for a binary model, +1 for 1 and -1 for -1 or 0; for
// a multiclass model none of whose classes is named by an integer, the
// class index v. ok is false for any other number (see NumberProblem).
func (l Labels) ParseNumber(v float64) (label int, ok bool) {
	if l.numbered() && v == math.Trunc(v) && math.Abs(v) < 1<<63 {
		if label, ok := l.r.named[int64(v)]; ok {
			return label, true
		}
	}
	if !l.Multiclass() {
		switch v {
		case 1:
			return 1, true
		case -1, 0:
			return -1, true
		}
		return 0, false
	}
	if l.numbered() || v != math.Trunc(v) || v < 0 || v >= float64(len(l.names())) {
		return 0, false
	}
	return int(v), true
}

// ParseBool is the label that a boolean stands for: the class named v, if
// one is; else in a binary model +1 for true, -1 for false. ok is false
// for a multiclass model without such a class (see BoolProblem).
func (l Labels) ParseBool(v bool) (label int, ok bool) {
	if l.r != nil {
		if label, ok := l.r.bools[v]; ok {
			return label, true
		}
	}
	switch {
	case l.Multiclass():
		return 0, false
	case v:
		return 1, true
	}
	return -1, true
}

// ParseName is the label of the class named name. ok is false for a name
// that is not a class, and for any name if the model has no class names
// (see NameProblem). name is bytes so that a decoder can look up a name in
// its buffer without a copy.
func (l Labels) ParseName(name []byte) (label int, ok bool) {
	switch {
	case l.Multiclass():
		label, ok = l.r.index[string(name)]
		return label, ok
	case len(l.names()) == 2 && string(name) == l.names()[0]:
		return -1, true
	case len(l.names()) == 2 && string(name) == l.names()[1]:
		return 1, true
	}
	return 0, false
}

// NumberProblem says why ParseNumber refused v, which the input wrote as
// text.
func (l Labels) NumberProblem(v float64, text string) string {
	switch {
	case !l.Multiclass():
		return l.notBinary(text)
	case v != math.Trunc(v):
		return l.notClass(text)
	case l.numbered():
		return fmt.Sprintf("%s is not a class (%s)", text, l.want())
	}
	return fmt.Sprintf("class %s is out of range (%s)", text, l.want())
}

// BoolProblem says why ParseBool refused v: booleans are no classes of a
// multiclass model, the only kind that refuses them.
func (l Labels) BoolProblem(v bool) string { return l.notClass(strconv.FormatBool(v)) }

// NameProblem says why ParseName refused a name, which quoted shows.
func (l Labels) NameProblem(quoted string) string {
	if l.Multiclass() {
		return fmt.Sprintf("unknown class %s (%s)", quoted, l.want())
	}
	return l.notBinary(quoted)
}

// TypeProblem is the problem of a label value of a type that is no label,
// got naming that type ("array", "object", "nil"...).
func (l Labels) TypeProblem(got string) string {
	if l.numbered() && l.Multiclass() {
		return "value is not a class name (got " + got + ")"
	}
	if l.Multiclass() {
		return "value is not a class name or index (got " + got + ")"
	}
	return "value is not a number, boolean or class name (got " + got + ")"
}

// notBinary is the problem of text, which is not a binary label.
func (l Labels) notBinary(text string) string {
	if len(l.names()) == 2 {
		return fmt.Sprintf("%s is not a binary label (want 1/-1, 0/1, true/false or %q/%q)", text, l.names()[0], l.names()[1])
	}
	return text + " is not a binary label (want 1/-1, 0/1 or true/false; more classes are named in model.learner.classes, train's -classes)"
}

// notClass is the problem of text, which is no class of a multiclass
// model.
func (l Labels) notClass(text string) string {
	return fmt.Sprintf("%s is not a class (%s)", text, l.want())
}

// want says what a multiclass model takes: a class name, or an index
// unless a class is named by a number.
func (l Labels) want() string {
	if l.numbered() {
		return "want a class name " + l.listed() + ": the classes named by numbers are read by name, not by index"
	}
	return fmt.Sprintf("want a class name %s or an integer from 0 to %d", l.listed(), len(l.names())-1)
}

// maxListed is how many class names an error lists.
const maxListed = 10

// listed is the model's class names, quoted, for an error: the first
// maxListed and how many more there are.
func (l Labels) listed() string {
	names := l.names()
	var b strings.Builder
	b.WriteByte('(')
	for i, n := range names[:min(len(names), maxListed)] {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(strconv.Quote(n))
	}
	if more := len(names) - maxListed; more > 0 {
		fmt.Fprintf(&b, " and %d more", more)
	}
	b.WriteByte(')')
	return b.String()
}
