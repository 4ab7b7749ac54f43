package config

import (
	"encoding"
	"fmt"
	"math"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/hyperplane-ml/hyperplane/internal/redact"
)

// envPrefix starts every environment variable of a key.
const envPrefix = "HYPERPLANE_"

// configEnv names the config file when no --config flag does.
const configEnv = envPrefix + "CONFIG"

// key is one leaf of Config: a setting with a YAML path, an environment
// variable and a flag.
type key struct {
	path   string       // dotted YAML path, also the flag name: model.learner.eta
	env    string       // HYPERPLANE_MODEL_LEARNER_ETA
	index  []int        // field index path from Config, for reflect.Value.FieldByIndex
	typ    reflect.Type // the field's type
	help   string       // the help tag
	secret secrecy      // the secret tag: what of the value is never shown
}

// secrecy is what of a key's value is never shown, by its secret tag.
type secrecy int

const (
	public       secrecy = iota // no secret tag: shown as it is
	secretValue                 // secret:"true": the whole value (a password)
	secretInURLs                // secret:"url": the credentials in its URLs (see redact.URLs)
)

// parseSecrecy reads a secret tag.
func parseSecrecy(tag string) (secrecy, bool) {
	switch tag {
	case "":
		return public, true
	case "true":
		return secretValue, true
	case "url":
		return secretInURLs, true
	}
	return public, false
}

// classesKey is the one key whose text is read otherwise than its type's:
// model.learner.classes is a list of class names, or their number N,
// which names them 0 to N-1 (see parseClasses).
const classesKey = "model.learner.classes"

// parse parses s, the text of k's variable or flag, as parseText does.
// The error of a key with URLs shows them with their credentials hidden.
func (k key) parse(s string) (reflect.Value, error) {
	if k.path == classesKey {
		return parseClasses(s)
	}
	v, err := parseText(k.typ, s)
	if err != nil && k.secret == secretInURLs {
		err = redact.SecretsIn(s).HideError(err)
	}
	return v, err
}

// parseClasses reads the classes from a number N, up to 65536, as the
// names "0" to "N-1" (0 is none: binary labels), or else as a list.
func parseClasses(s string) (reflect.Value, error) {
	n, err := strconv.Atoi(strings.TrimSpace(s))
	if err != nil {
		return parseText(reflect.TypeFor[[]string](), s)
	}
	if n < 0 || n > 1<<16 {
		return reflect.Value{}, fmt.Errorf("%d classes is out of range (0 to %d)", n, 1<<16)
	}
	var classes []string
	for i := range n {
		classes = append(classes, strconv.Itoa(i))
	}
	return reflect.ValueOf(classes), nil
}

// keys lists every key of Config in declaration order. It is built by
// reflection so that a field added to Config is a YAML key, a variable and
// a flag without further code. It panics on a field of a type it cannot
// parse: that is a programming error, caught by the package's tests.
func keys() []key {
	var ks []key
	walkKeys(reflect.TypeFor[Config](), nil, nil, &ks)
	return ks
}

func walkKeys(t reflect.Type, prefix []string, index []int, ks *[]key) {
	for i := range t.NumField() {
		f := t.Field(i)
		name, ok := yamlName(f)
		if !ok {
			continue
		}
		path := append(append([]string(nil), prefix...), name)
		idx := append(append([]int(nil), index...), i)
		if isSection(f.Type) {
			walkKeys(f.Type, path, idx, ks)
			continue
		}
		if !supported(f.Type) {
			panic(fmt.Sprintf("config: key %s has unsupported type %s", strings.Join(path, "."), f.Type))
		}
		secret, ok := parseSecrecy(f.Tag.Get("secret"))
		switch {
		case !ok:
			panic(fmt.Sprintf("config: key %s: secret tag %q is not true or url", strings.Join(path, "."), f.Tag.Get("secret")))
		case secret == secretValue && f.Type.Kind() != reflect.String,
			secret == secretInURLs && f.Type.Kind() != reflect.String && f.Type.Kind() != reflect.Slice:
			panic(fmt.Sprintf("config: secret key %s must be a string (or, for URLs, a list)", strings.Join(path, ".")))
		}
		*ks = append(*ks, key{
			path:   strings.Join(path, "."),
			env:    envPrefix + strings.ToUpper(strings.Join(path, "_")),
			index:  idx,
			typ:    f.Type,
			help:   f.Tag.Get("help"),
			secret: secret,
		})
	}
}

// yamlName is the YAML key of a struct field as yaml.v3 names it, and
// false for a field that is not a key (unexported or tagged "-").
func yamlName(f reflect.StructField) (string, bool) {
	if !f.IsExported() {
		return "", false
	}
	tag := f.Tag.Get("yaml")
	if tag == "-" {
		return "", false
	}
	name, opts, _ := strings.Cut(tag, ",")
	if strings.Contains(opts, "inline") {
		panic(fmt.Sprintf("config: field %s: inline YAML fields are not supported", f.Name))
	}
	if name == "" {
		name = strings.ToLower(f.Name)
	}
	return name, true
}

// fieldByYAMLName is the index of the field of struct type t whose YAML key
// is name.
func fieldByYAMLName(t reflect.Type, name string) (int, bool) {
	for i := range t.NumField() {
		if n, ok := yamlName(t.Field(i)); ok && n == name {
			return i, true
		}
	}
	return 0, false
}

// yamlNames lists the YAML keys of struct type t, for error messages.
func yamlNames(t reflect.Type) []string {
	var names []string
	for i := range t.NumField() {
		if n, ok := yamlName(t.Field(i)); ok {
			names = append(names, n)
		}
	}
	return names
}

// isSection reports whether a field of type t is a section of keys rather
// than a key: a struct that does not read text.
func isSection(t reflect.Type) bool {
	return t.Kind() == reflect.Struct && !isText(t)
}

// isText reports whether values of type t read and write text themselves
// (wire.Start, Destination, wire.Format, ...): parseText and
// formatText leave them to UnmarshalText and MarshalText.
func isText(t reflect.Type) bool {
	return reflect.PointerTo(t).Implements(reflect.TypeFor[encoding.TextUnmarshaler]()) &&
		t.Implements(reflect.TypeFor[encoding.TextMarshaler]())
}

// isDuration reports whether t is time.Duration, a key type of its own:
// an int64 read and written as a duration.
func isDuration(t reflect.Type) bool { return t == reflect.TypeFor[time.Duration]() }

// isTextual reports whether a key of type t is shown as a string is: text
// types and durations.
func isTextual(t reflect.Type) bool {
	return t.Kind() == reflect.String || isText(t) || isDuration(t)
}

// supported reports whether parseText can produce a value of type t.
func supported(t reflect.Type) bool {
	if isText(t) || isDuration(t) {
		return true
	}
	switch t.Kind() {
	case reflect.String, reflect.Bool, reflect.Int, reflect.Uint64, reflect.Float64:
		return true
	case reflect.Slice:
		return t.Elem().Kind() == reflect.String
	}
	return false
}

// typeName is how Usage names a key's type.
func typeName(t reflect.Type) string {
	if isTextual(t) {
		return "string"
	}
	switch t.Kind() {
	case reflect.Bool:
		return "bool"
	case reflect.Int:
		return "int"
	case reflect.Uint64:
		return "uint"
	case reflect.Float64:
		return "float"
	case reflect.Slice:
		return "list"
	}
	return "string"
}

// durationForm is the form of a Go duration, which time.ParseDuration
// refuses, as it refuses any other text, once it is beyond an int64 of
// nanoseconds.
var durationForm = regexp.MustCompile(`^[-+]?(([0-9]+(\.[0-9]*)?|\.[0-9]+)(ns|us|µs|μs|ms|s|m|h))+$`)

// parseText parses s, the text of an environment variable, a flag or a
// YAML scalar, as a value of type t. Numbers, booleans and durations may
// be surrounded by spaces; a list is comma-separated, each element
// trimmed, "" (or spaces) the empty list, and an empty element among
// others ("a,,b", "a,") an error, as it is in a YAML list; a text type
// reads s with its UnmarshalText. The error says what s is not, quoting
// it; the caller adds where s came from.
func parseText(t reflect.Type, s string) (reflect.Value, error) {
	v := reflect.New(t).Elem()
	trimmed := strings.TrimSpace(s)
	switch {
	case isText(t):
		err := v.Addr().Interface().(encoding.TextUnmarshaler).UnmarshalText([]byte(s))
		return v, err
	case isDuration(t):
		d, err := time.ParseDuration(trimmed)
		if err != nil && durationForm.MatchString(trimmed) {
			return v, fmt.Errorf("%q is longer than a duration can be (%s)", s, time.Duration(math.MaxInt64))
		}
		if err != nil {
			return v, fmt.Errorf("%q is not a duration such as 30s or 5m", s)
		}
		v.SetInt(int64(d))
		return v, nil
	}
	switch t.Kind() {
	case reflect.String:
		v.SetString(s)
	case reflect.Bool:
		b, err := strconv.ParseBool(trimmed)
		if err != nil {
			return v, fmt.Errorf("%q is not a boolean (want true or false)", s)
		}
		v.SetBool(b)
	case reflect.Int:
		n, err := strconv.ParseInt(trimmed, 0, t.Bits())
		if err != nil {
			return v, numError(s, "an integer", err)
		}
		v.SetInt(n)
	case reflect.Uint64:
		n, err := strconv.ParseUint(trimmed, 0, 64)
		if err != nil {
			return v, numError(s, "a non-negative integer", err)
		}
		v.SetUint(n)
	case reflect.Float64:
		f, err := strconv.ParseFloat(trimmed, 64)
		if err != nil {
			return v, numError(s, "a number", err)
		}
		v.SetFloat(f)
	case reflect.Slice:
		if trimmed == "" {
			break
		}
		for i, part := range strings.Split(s, ",") {
			if part = strings.TrimSpace(part); part == "" {
				return v, fmt.Errorf("%q has an empty element (element %d of a comma-separated list)", s, i+1)
			}
			v = reflect.Append(v, reflect.ValueOf(part).Convert(t.Elem()))
		}
	default:
		return v, fmt.Errorf("unsupported type %s", t)
	}
	return v, nil
}

func numError(s, what string, err error) error {
	if ne, ok := err.(*strconv.NumError); ok && ne.Err == strconv.ErrRange {
		return fmt.Errorf("%q is out of range", s)
	}
	return fmt.Errorf("%q is not %s", s, what)
}

// formatText is the text form of v that parseText reads back: a list is
// comma-separated, a duration as formatDuration writes it.
func formatText(v reflect.Value) string {
	switch {
	case isText(v.Type()):
		text, err := v.Interface().(encoding.TextMarshaler).MarshalText()
		if err != nil {
			return fmt.Sprintf("!(%v)", err)
		}
		return string(text)
	case isDuration(v.Type()):
		return formatDuration(time.Duration(v.Int()))
	}
	switch v.Kind() {
	case reflect.Bool:
		return strconv.FormatBool(v.Bool())
	case reflect.Int:
		return strconv.FormatInt(v.Int(), 10)
	case reflect.Uint64:
		return strconv.FormatUint(v.Uint(), 10)
	case reflect.Float64:
		return strconv.FormatFloat(v.Float(), 'g', -1, 64)
	case reflect.Slice:
		parts := make([]string, v.Len())
		for i := range parts {
			parts[i] = v.Index(i).String()
		}
		return strings.Join(parts, ",")
	}
	return v.String()
}

// formatDuration writes d as people write these settings: in seconds up
// to a minute ("25s", "60s", "0s") or when that is the largest whole unit
// ("90s"), else in whole hours or minutes ("5m", "2h"), and as Go does a
// duration of no whole seconds ("1.5s", "500ms"). Each reads back the
// same.
func formatDuration(d time.Duration) string {
	switch {
	case d%time.Second != 0:
		return d.String()
	case d <= time.Minute || d%time.Minute != 0:
		return strconv.FormatInt(int64(d/time.Second), 10) + "s"
	case d%time.Hour == 0:
		return strconv.FormatInt(int64(d/time.Hour), 10) + "h"
	}
	return strconv.FormatInt(int64(d/time.Minute), 10) + "m"
}
