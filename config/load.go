package config

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"reflect"
	"strings"

	"github.com/hyperplane-ml/hyperplane/internal/redact"
	"gopkg.in/yaml.v3"
)

// Load builds the configuration from, in increasing precedence, Default(),
// a YAML file, HYPERPLANE_* environment variables and the flags in args.
// It does not validate the result: call Validate.
//
// The file is named by --config PATH (also -config, --config=PATH) or,
// without that flag, by HYPERPLANE_CONFIG. It is read strictly: an unknown
// or repeated key, a value of the wrong type or a second YAML document is
// an error naming the file, the line and the dotted key (for an unknown
// one, also the key probably meant, as for a flag). A key given with
// no value (null) keeps the value beneath it.
//
// Every key model.learner.hash_bits is read from the variable
// HYPERPLANE_MODEL_LEARNER_HASH_BITS (getenv; an empty variable counts as
// unset) and from the flag --model.learner.hash_bits VALUE. Lists are
// comma-separated in variables and flags, YAML lists in the file; a list
// flag given more than once collects every value. A bool flag alone means
// true; it also takes a value, --key=false or --key false (the next word
// is its value only when it is true or false). model.learner.classes also
// takes a number N, which names the classes 0 to N-1. Any other
// HYPERPLANE_* variable is ignored: UnknownEnv finds them, for the caller
// to warn about (Load prints nothing).
//
// Every value is parsed here, once, into its field's type: a start, a
// destination, a kind, a format or a duration that does not parse is an
// error naming the key (its variable, its flag, or the file's line);
// Validate then checks the typed values.
//
// args hold only --config and keys: an unknown flag or a positional
// argument is an error naming it, and the key probably meant (the nearest
// name, as UnknownEnv finds it for a variable). -h or --help returns flag.ErrHelp
// (check with errors.Is) and the caller prints Usage. On any error Load
// returns the zero Config.
func Load(args []string, getenv func(string) string) (Config, error) {
	ks := keys()
	fs := flag.NewFlagSet("hyperplane run", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	var file string
	fileFlag := false
	fs.Func("config", "YAML file to read", func(s string) error {
		file, fileFlag = s, true
		return nil
	})
	flagged := make([]reflect.Value, len(ks)) // parsed flag values, applied last
	var refused string                        // the text of a flag with URLs that did not parse
	for i := range ks {
		fs.Var(&flagValue{k: &ks[i], v: &flagged[i], refused: &refused}, ks[i].path, ks[i].help)
	}
	args = JoinBoolValues(fs, args)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return Config{}, flag.ErrHelp
		}
		if name, ok := strings.CutPrefix(err.Error(), "flag provided but not defined: -"); ok {
			return Config{}, fmt.Errorf("flags: %s", unknownFlag(ks, name))
		}
		// The flag package quotes the value it refused.
		return Config{}, fmt.Errorf("flags: %w", redact.SecretsIn(refused).HideError(err))
	}
	if rest := fs.Args(); len(rest) > 0 {
		i := len(args) - len(rest)
		if i > 0 && isBareBool(fs, args[i-1]) {
			b := args[i-1]
			return Config{}, fmt.Errorf("flags: unexpected argument %q after %s, a boolean: write %s or %s true to turn it on, %s=false or %s false to turn it off",
				shownArg(ks, args, i), b, b, b, b, b)
		}
		return Config{}, fmt.Errorf("flags: unexpected argument %q: settings are given as --key value", shownArg(ks, args, i))
	}

	cfg := Default()
	if !fileFlag {
		file = getenv(configEnv)
	}
	if file != "" {
		data, err := os.ReadFile(file)
		if err != nil {
			return Config{}, fmt.Errorf("config file: %w (pass --config or %s the path of a YAML config file; hyperplane config --defaults prints one)", err, configEnv)
		}
		if err := decodeYAML(file, data, &cfg); err != nil {
			return Config{}, err
		}
	}
	root := reflect.ValueOf(&cfg).Elem()
	for _, k := range ks {
		s := getenv(k.env)
		if s == "" {
			continue
		}
		v, err := k.parse(s)
		if err != nil {
			return Config{}, fmt.Errorf("%s: %w", k.env, err)
		}
		root.FieldByIndex(k.index).Set(v)
	}
	for i, k := range ks {
		if flagged[i].IsValid() {
			root.FieldByIndex(k.index).Set(flagged[i])
		}
	}
	cfg.Model.Learner.Drift = cfg.Model.Drift
	return cfg, nil
}

// JoinBoolValues returns args with every boolean flag of fs that is
// followed by the word true or false joined to it: --serve.nats true
// becomes --serve.nats=true. The flag package takes a boolean's value
// only after '=' (alone, the flag is true), and would read the "true" as
// the first positional argument, which ends the flags. args are walked as
// the flag package walks them: a non-boolean flag takes the next word as
// its value, and the first positional argument or "--" ends the flags.
func JoinBoolValues(fs *flag.FlagSet, args []string) []string {
	out := make([]string, 0, len(args))
	for i := 0; i < len(args); i++ {
		a := args[i]
		out = append(out, a)
		if len(a) < 2 || a[0] != '-' || a == "--" {
			return append(out, args[i+1:]...)
		}
		name, _, hasValue := strings.Cut(strings.TrimPrefix(a[1:], "-"), "=")
		f := fs.Lookup(name)
		if hasValue || f == nil {
			continue
		}
		switch {
		case !IsBoolFlag(f):
			if i+1 < len(args) {
				i++
				out = append(out, args[i])
			}
		case i+1 < len(args) && (args[i+1] == "true" || args[i+1] == "false"):
			i++
			out[len(out)-1] = a + "=" + args[i]
		}
	}
	return out
}

// IsBoolFlag reports whether f is a boolean flag: one that stands alone
// for true, and takes a value only as -f=value (or, here, a next word
// that is exactly true or false).
func IsBoolFlag(f *flag.Flag) bool {
	b, ok := f.Value.(interface{ IsBoolFlag() bool })
	return ok && b.IsBoolFlag()
}

// isBareBool reports whether arg is a boolean flag of fs without a value.
func isBareBool(fs *flag.FlagSet, arg string) bool {
	if len(arg) < 2 || arg[0] != '-' || strings.Contains(arg, "=") {
		return false
	}
	f := fs.Lookup(strings.TrimPrefix(arg[1:], "-"))
	return f != nil && IsBoolFlag(f)
}

// unknownFlag says that --name is no flag, and names the flag probably
// meant: the same in lower case; or the keys that end as it does (the
// section left out: --brokers for --kafka.brokers); or else the nearest
// by edit distance, as for a variable that is no key (nearest).
func unknownFlag(ks []key, name string) string {
	known := []string{"config"}
	for _, k := range ks {
		known = append(known, k.path)
	}
	var ends []string
	for _, k := range known {
		if k == strings.ToLower(name) {
			return fmt.Sprintf("unknown flag --%s: flags are lower case, did you mean --%s?", name, k)
		}
		if strings.HasSuffix(k, "."+name) {
			ends = append(ends, "--"+k)
		}
	}
	if len(ends) > 0 {
		return fmt.Sprintf("unknown flag --%s; did you mean %s?", name, strings.Join(ends, " or "))
	}
	if best, ok := nearest(name, known, len(name)); ok {
		return fmt.Sprintf("unknown flag --%s; did you mean --%s?", name, best)
	}
	return fmt.Sprintf("unknown flag --%s (every key is a flag: hyperplane config --defaults lists them)", name)
}

// shownArg is args[i], a stray positional argument, as an error may
// quote it: hidden if it follows a secret's value (a secret with a space
// in it, not quoted, or given after --key= and a space), and with the
// credentials of any URL in it hidden.
func shownArg(ks []key, args []string, i int) string {
	secretFlag := func(arg string) (secret, withValue bool) {
		if !strings.HasPrefix(arg, "-") {
			return false, false
		}
		name, _, withValue := strings.Cut(strings.TrimLeft(arg, "-"), "=")
		for _, k := range ks {
			if k.path == name {
				return k.secret == secretValue, withValue
			}
		}
		return false, false
	}
	if i >= 1 {
		if secret, withValue := secretFlag(args[i-1]); secret && withValue {
			return redactedText
		}
	}
	if i >= 2 {
		if secret, withValue := secretFlag(args[i-2]); secret && !withValue {
			return redactedText
		}
	}
	return redact.URLs(args[i])
}

// flagValue is the flag of one key. Set parses its text at once, so a bad
// value is reported by the flag package with the flag's name, and keeps it
// in *v until the file and the environment have been applied beneath it.
// The text of a key with URLs that does not parse is kept in *refused, for
// its credentials to be hidden from the flag package's error.
type flagValue struct {
	k       *key
	v       *reflect.Value
	refused *string
}

func (f *flagValue) Set(s string) error {
	v, err := f.k.parse(s)
	if err != nil {
		if f.k.secret == secretInURLs && f.refused != nil {
			*f.refused = s
		}
		return err
	}
	if f.k.typ.Kind() == reflect.Slice && f.v.IsValid() {
		v = reflect.AppendSlice(*f.v, v)
	}
	*f.v = v
	return nil
}

func (f *flagValue) String() string {
	if f == nil || f.v == nil || !f.v.IsValid() || f.k.secret == secretValue {
		return ""
	}
	if f.k.secret == secretInURLs {
		return redact.URLs(formatText(*f.v))
	}
	return formatText(*f.v)
}

// IsBoolFlag lets a bool key be given as a bare --key.
func (f *flagValue) IsBoolFlag() bool {
	return f != nil && f.k != nil && f.k.typ.Kind() == reflect.Bool
}

// decodeYAML applies the YAML document data, read from the file name, onto
// cfg. Keys are matched against Config's yaml tags by walking the node tree
// rather than by yaml.v3's KnownFields, so that an error names the dotted
// key (source.colour) and not a Go type; values are parsed by parseText,
// the same parser as variables and flags, so that one text means one
// value everywhere.
func decodeYAML(name string, data []byte, cfg *Config) error {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return nil // an empty file sets nothing
		}
		return fmt.Errorf("%s: %w (the file is not valid YAML)", name, err)
	}
	var extra yaml.Node
	switch err := dec.Decode(&extra); {
	case err == nil:
		return fmt.Errorf("%s: line %d: a second YAML document; the configuration is one document", name, extra.Line)
	case !errors.Is(err, io.EOF):
		return fmt.Errorf("%s: %w", name, err)
	}
	if len(doc.Content) == 0 {
		return nil
	}
	d := yamlDecoder{file: name, secret: make(map[string]secrecy)}
	for _, k := range keys() {
		d.secret[k.path] = k.secret
	}
	return d.decodeStruct(doc.Content[0], reflect.ValueOf(cfg).Elem(), "")
}

// yamlDecoder decodes the nodes of one file.
type yamlDecoder struct {
	file   string
	secret map[string]secrecy // by dotted path, so that no error quotes a secret
}

func (d yamlDecoder) errorf(n *yaml.Node, format string, args ...any) error {
	return fmt.Errorf("%s: line %d: %s", d.file, n.Line, fmt.Sprintf(format, args...))
}

// resolve follows aliases (*anchor) to the node they stand for.
func resolve(n *yaml.Node) *yaml.Node {
	for i := 0; n.Kind == yaml.AliasNode && n.Alias != nil && i < 100; i++ {
		n = n.Alias
	}
	return n
}

func isNull(n *yaml.Node) bool { return n.Kind == yaml.ScalarNode && n.Tag == "!!null" }

// decodeStruct applies mapping node n onto struct v, whose dotted path is
// path ("" for the top).
func (d yamlDecoder) decodeStruct(n *yaml.Node, v reflect.Value, path string) error {
	n = resolve(n)
	if isNull(n) {
		return nil
	}
	what := path
	if what == "" {
		what = "the configuration"
	}
	if n.Kind != yaml.MappingNode {
		return d.errorf(n, "%s must be a mapping of keys, not %s", what, nodeKind(n))
	}
	t := v.Type()
	seen := make(map[string]int, len(n.Content)/2)
	for i := 0; i+1 < len(n.Content); i += 2 {
		kn, vn := resolve(n.Content[i]), n.Content[i+1]
		full := kn.Value
		if path != "" {
			full = path + "." + kn.Value
		}
		if kn.Kind != yaml.ScalarNode {
			return d.errorf(kn, "a key of %s is %s, not a name", what, nodeKind(kn))
		}
		if first, dup := seen[kn.Value]; dup {
			return d.errorf(kn, "key %s is given twice (first at line %d)", full, first)
		}
		seen[kn.Value] = kn.Line
		fi, ok := fieldByYAMLName(t, kn.Value)
		if !ok {
			hint := ""
			if meant := meantKeys(full, kn.Value); len(meant) > 0 {
				hint = "; did you mean " + strings.Join(meant, " or ") + "?"
			}
			return d.errorf(kn, "unknown key %s%s (%s has %s)", full, hint, what, strings.Join(yamlNames(t), ", "))
		}
		fv := v.Field(fi)
		var err error
		if isSection(fv.Type()) {
			err = d.decodeStruct(vn, fv, full)
		} else {
			err = d.decodeLeaf(vn, fv, full)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// decodeLeaf sets the key v, whose dotted path is path, from node n.
func (d yamlDecoder) decodeLeaf(n *yaml.Node, v reflect.Value, path string) error {
	n = resolve(n)
	switch {
	case isNull(n):
		return nil
	case v.Type() == reflect.TypeFor[Challengers]():
		return d.decodeChallengers(n, v, path)
	case n.Kind == yaml.SequenceNode && v.Kind() == reflect.Slice:
		list := reflect.MakeSlice(v.Type(), 0, len(n.Content))
		for _, item := range n.Content {
			item = resolve(item)
			if item.Kind != yaml.ScalarNode || isNull(item) {
				return d.errorf(item, "%s: an element is %s, not a string", path, nodeKind(item))
			}
			list = reflect.Append(list, reflect.ValueOf(item.Value).Convert(v.Type().Elem()))
		}
		if list.Len() == 0 {
			list = reflect.Zero(v.Type())
		}
		v.Set(list)
		return nil
	case v.Kind() == reflect.Slice:
		what := nodeKind(n)
		if d.secret[path] != public && n.Kind == yaml.ScalarNode {
			what = "a single value" // not quoted: it may hold credentials
		}
		return d.errorf(n, "%s: want a YAML list such as [a, b], not %s", path, what)
	case n.Kind != yaml.ScalarNode:
		return d.errorf(n, "%s: want a single value, not %s", path, nodeKind(n))
	}
	val, err := parseText(v.Type(), n.Value)
	if err != nil {
		return d.errorf(n, "%s: %v", path, err)
	}
	v.Set(val)
	return nil
}

// meantKeys are the keys or sections of the file probably meant by full,
// the dotted path of an unknown key whose last segment is name, as for a
// mistyped flag: the same in lower case; or those that end in name (the
// key put in the wrong section: model.hash_bits for
// model.learner.hash_bits); or else the nearest by edit distance.
func meantKeys(full, name string) []string {
	var known []string
	seen := make(map[string]bool)
	for _, k := range keys() {
		segs := strings.Split(k.path, ".")
		for i := range segs {
			if p := strings.Join(segs[:i+1], "."); !seen[p] {
				seen[p] = true
				known = append(known, p)
			}
		}
	}
	var ends []string
	for _, k := range known {
		if k == strings.ToLower(full) {
			return []string{k}
		}
		if k == name || strings.HasSuffix(k, "."+name) {
			ends = append(ends, k)
		}
	}
	if len(ends) > 0 {
		return ends
	}
	if best, ok := nearest(full, known, len(name)); ok {
		return []string{best}
	}
	return nil
}

func nodeKind(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.AliasNode:
		return "an alias"
	}
	if isNull(n) {
		return "null"
	}
	return fmt.Sprintf("the value %q", n.Value)
}
