package config

import (
	"errors"
	"flag"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hyperplane-ml/hyperplane/learner"
	"github.com/hyperplane-ml/hyperplane/wire"
)

// writeConfig writes a config file for one test and returns its path.
func writeConfig(t *testing.T, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "config.yaml")
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// envOf is a getenv over a map.
func envOf(m map[string]string) func(string) string {
	return func(k string) string { return m[k] }
}

func TestLoadPrecedence(t *testing.T) {
	cases := []struct {
		name    string
		yaml    string // sets the key in the file
		env     string // the key's variable
		envVal  string
		flag    string // the key's flag, with its value
		get     func(Config) any
		def     any // the default
		file    any // after the file
		fromEnv any // after the variable
		flagged any // after the flag
	}{
		{
			name: "string", yaml: "model:\n  name: from-file\n",
			env: "HYPERPLANE_MODEL_NAME", envVal: "from-env", flag: "--model.name=from-flag",
			get: func(c Config) any { return c.Model.Name },
			def: "default", file: "from-file", fromEnv: "from-env", flagged: "from-flag",
		},
		{
			name: "int", yaml: "source:\n  batch: 10\n",
			env: "HYPERPLANE_SOURCE_BATCH", envVal: "20", flag: "--source.batch=30",
			get: func(c Config) any { return c.Source.Batch },
			def: Default().Source.Batch, file: 10, fromEnv: 20, flagged: 30,
		},
		{
			name: "float", yaml: "model:\n  learner:\n    eta: 0.25\n",
			env: "HYPERPLANE_MODEL_LEARNER_ETA", envVal: "0.5", flag: "--model.learner.eta=0.75",
			get: func(c Config) any { return c.Model.Learner.Eta },
			def: 1.0, file: 0.25, fromEnv: 0.5, flagged: 0.75,
		},
		{
			name: "uint64", yaml: "model:\n  learner:\n    hash_seed: 7\n",
			env: "HYPERPLANE_MODEL_LEARNER_HASH_SEED", envVal: "8", flag: "--model.learner.hash_seed=18446744073709551615",
			get: func(c Config) any { return c.Model.Learner.HashSeed },
			def: uint64(0), file: uint64(7), fromEnv: uint64(8), flagged: uint64(18446744073709551615),
		},
		{
			// Each level flips the value, so a level that is skipped shows.
			name: "bool", yaml: "kafka:\n  tls:\n    enabled: true\n",
			env: "HYPERPLANE_KAFKA_TLS_ENABLED", envVal: "false", flag: "--kafka.tls.enabled",
			get: func(c Config) any { return c.Kafka.TLS.Enabled },
			def: false, file: true, fromEnv: false, flagged: true,
		},
		{
			name: "list", yaml: "kafka:\n  brokers: [f1:9092, f2:9092]\n",
			env: "HYPERPLANE_KAFKA_BROKERS", envVal: "e1:9092, e2:9092,e3:9092", flag: "--kafka.brokers=g1:9092",
			get: func(c Config) any { return c.Kafka.Brokers },
			def: []string(nil), file: []string{"f1:9092", "f2:9092"}, fromEnv: []string{"e1:9092", "e2:9092", "e3:9092"}, flagged: []string{"g1:9092"},
		},
		{
			name: "learner algorithm", yaml: "model:\n  learner:\n    algorithm: pa1\n",
			env: "HYPERPLANE_MODEL_LEARNER_ALGORITHM", envVal: "pegasos", flag: "--model.learner.algorithm=averaged",
			get: func(c Config) any { return c.Model.Learner.Algorithm },
			def: learner.AROW, file: learner.PA1, fromEnv: learner.Pegasos, flagged: learner.Averaged,
		},
		{
			name: "learner classes", yaml: "model:\n  learner:\n    classes:\n      - neg\n      - pos\n",
			env: "HYPERPLANE_MODEL_LEARNER_CLASSES", envVal: "a,b,c", flag: "--model.learner.classes=x,y",
			get: func(c Config) any { return c.Model.Learner.Classes },
			def: []string(nil), file: []string{"neg", "pos"}, fromEnv: []string{"a", "b", "c"}, flagged: []string{"x", "y"},
		},
		{
			name: "learner kernel", yaml: "model:\n  learner:\n    kernel: rbf\n",
			env: "HYPERPLANE_MODEL_LEARNER_KERNEL", envVal: "poly", flag: "--model.learner.kernel=linear",
			get: func(c Config) any { return c.Model.Learner.Kernel },
			def: learner.LinearKernel, file: learner.RBFKernel, fromEnv: learner.PolynomialKernel, flagged: learner.LinearKernel,
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			path := writeConfig(t, tc.yaml)
			env := map[string]string{tc.env: tc.envVal}
			levels := []struct {
				name string
				args []string
				env  map[string]string
				want any
			}{
				{"default", nil, nil, tc.def},
				{"file over default", []string{"--config", path}, nil, tc.file},
				{"env over file", []string{"--config", path}, env, tc.fromEnv},
				{"flag over env", []string{"--config", path, tc.flag}, env, tc.flagged},
				{"flag over file", []string{tc.flag, "--config", path}, nil, tc.flagged},
				{"env over default", nil, env, tc.fromEnv},
			}
			for _, l := range levels {
				t.Run(l.name, func(t *testing.T) {
					c, err := Load(l.args, envOf(l.env))
					if err != nil {
						t.Fatal(err)
					}
					if got := tc.get(c); !reflect.DeepEqual(got, l.want) {
						t.Errorf("got %#v, want %#v", got, l.want)
					}
				})
			}
		})
	}
}

func TestLoadConfigFile(t *testing.T) {
	path := writeConfig(t, "model:\n  name: from-file\n")
	other := writeConfig(t, "model:\n  name: from-other\n")
	cases := []struct {
		name string
		args []string
		env  map[string]string
		want string
	}{
		{"--config PATH", []string{"--config", path}, nil, "from-file"},
		{"-config PATH", []string{"-config", path}, nil, "from-file"},
		{"--config=PATH", []string{"--config=" + path}, nil, "from-file"},
		{"HYPERPLANE_CONFIG", nil, map[string]string{"HYPERPLANE_CONFIG": path}, "from-file"},
		{"flag over HYPERPLANE_CONFIG", []string{"--config", path}, map[string]string{"HYPERPLANE_CONFIG": other}, "from-file"},
		{"no file", nil, nil, "default"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c, err := Load(tc.args, envOf(tc.env))
			if err != nil {
				t.Fatal(err)
			}
			if c.Model.Name != tc.want {
				t.Errorf("model.name = %q, want %q", c.Model.Name, tc.want)
			}
		})
	}
}

func TestLoadValues(t *testing.T) {
	cases := []struct {
		name string
		yaml string
		file bool // pass a file even when yaml is empty
		args []string
		env  map[string]string
		get  func(Config) any
		want any
	}{
		{
			name: "a list flag given twice collects both",
			args: []string{"--source.topics", "a", "--source.topics=b,c"},
			get:  func(c Config) any { return c.Source.Topics }, want: []string{"a", "b", "c"},
		},
		{
			name: "a list flag replaces the file's list",
			yaml: "source:\n  topics: [x, y]\n", args: []string{"--source.topics", "a"},
			get: func(c Config) any { return c.Source.Topics }, want: []string{"a"},
		},
		{
			name: "an empty list flag clears the list",
			yaml: "source:\n  topics: [x, y]\n", args: []string{"--source.topics="},
			get: func(c Config) any { return c.Source.Topics }, want: []string(nil),
		},
		{
			name: "a bool flag set false",
			yaml: "model:\n  learner:\n    normalize: true\n", args: []string{"--model.learner.normalize=false"},
			get: func(c Config) any { return c.Model.Learner.Normalize }, want: false,
		},
		{
			name: "a value flag with a separate argument",
			args: []string{"--model.learner.eta", "0.5"},
			get:  func(c Config) any { return c.Model.Learner.Eta }, want: 0.5,
		},
		{
			name: "YAML null keeps the default",
			yaml: "http:\n  addr:\nlog:\n",
			get:  func(c Config) any { return c.HTTP.Addr }, want: ":8080",
		},
		{
			name: "YAML empty string clears",
			yaml: "http:\n  addr: \"\"\n",
			get:  func(c Config) any { return c.HTTP.Addr }, want: "",
		},
		{
			name: "a key absent from the file keeps the default",
			yaml: "model:\n  learner:\n    eta: 2\n",
			get:  func(c Config) any { return c.Model.Learner.HashBits }, want: 18,
		},
		{
			name: "YAML numbers as strings of a string key",
			yaml: "model:\n  name: 2024\n  learner:\n    classes: [0, 1, 2]\n",
			get:  func(c Config) any { return []any{c.Model.Name, c.Model.Learner.Classes} }, want: []any{"2024", []string{"0", "1", "2"}},
		},
		{
			name: "YAML anchors and aliases",
			yaml: "kafka:\n  brokers: &b [k:9092]\n  tls:\n    enabled: &on true\nnats:\n  tls:\n    enabled: *on\n",
			get:  func(c Config) any { return []any{c.Kafka.Brokers, c.NATS.TLS.Enabled} }, want: []any{[]string{"k:9092"}, true},
		},
		{
			name: "an empty file sets nothing",
			yaml: "", file: true,
			get: func(c Config) any { return c.Model.Name }, want: "default",
		},
		{
			name: "a file of comments sets nothing",
			yaml: "# nothing here\n",
			get:  func(c Config) any { return c.Model.Name }, want: "default",
		},
		{
			name: "a hexadecimal integer",
			env:  map[string]string{"HYPERPLANE_MODEL_LEARNER_HASH_SEED": "0xff"},
			get:  func(c Config) any { return c.Model.Learner.HashSeed }, want: uint64(255),
		},
		{
			name: "a password from the environment",
			env:  map[string]string{"HYPERPLANE_KAFKA_SASL_PASSWORD": "hunter2"},
			get:  func(c Config) any { return c.Kafka.SASL.Password }, want: "hunter2",
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			args := tc.args
			if tc.yaml != "" || tc.file {
				args = append([]string{"--config", writeConfig(t, tc.yaml)}, args...)
			}
			c, err := Load(args, envOf(tc.env))
			if err != nil {
				t.Fatal(err)
			}
			if got := tc.get(c); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got %#v, want %#v", got, tc.want)
			}
		})
	}
}

func TestLoadErrors(t *testing.T) {
	cases := []struct {
		name string
		yaml string // written to a file and passed with --config when set
		args []string
		env  map[string]string
		want []string // substrings of the error
	}{
		{
			name: "unknown YAML key",
			yaml: "model:\n  name: m\nsource:\n  kind: kafka\n  colour: red\n",
			want: []string{"config.yaml: line 5: ", "unknown key source.colour", "kind, topics"},
		},
		{
			name: "unknown top-level YAML key",
			yaml: "modle:\n  name: m\n",
			want: []string{"line 1: ", "unknown key modle; did you mean model?"},
		},
		{
			name: "unknown learner key",
			yaml: "model:\n  learner:\n    etta: 1\n",
			want: []string{"line 3: ", "unknown key model.learner.etta; did you mean model.learner.eta?"},
		},
		{
			name: "YAML key in the wrong section",
			yaml: "model:\n  hash_bits: 20\n",
			want: []string{"line 2: ", "unknown key model.hash_bits; did you mean model.learner.hash_bits?", "model has name"},
		},
		{
			name: "YAML key out of its section",
			yaml: "kind: kafka\n",
			want: []string{"line 1: ", "unknown key kind; did you mean source.kind or labels.kind?"},
		},
		{
			name: "YAML key in upper case",
			yaml: "snapshot:\n  URL: file:///tmp\n",
			want: []string{"line 2: ", "unknown key snapshot.URL; did you mean snapshot.url?"},
		},
		{
			name: "repeated YAML key",
			yaml: "log:\n  level: info\n  level: debug\n",
			want: []string{"line 3: ", "key log.level is given twice (first at line 2)"},
		},
		{
			name: "YAML value not a number",
			yaml: "model:\n  learner:\n    eta: abc\n",
			want: []string{"line 3: ", `model.learner.eta: "abc" is not a number`},
		},
		{
			name: "YAML value not an integer",
			yaml: "source:\n  batch: 1.5\n",
			want: []string{"line 2: ", `source.batch: "1.5" is not an integer`},
		},
		{
			name: "YAML value not a boolean",
			yaml: "kafka:\n  tls:\n    enabled: maybe\n",
			want: []string{"line 3: ", `kafka.tls.enabled: "maybe" is not a boolean`},
		},
		{
			name: "YAML scalar for a list",
			yaml: "kafka:\n  brokers: k:9092\n",
			want: []string{"line 2: ", "kafka.brokers: want a YAML list"},
		},
		{
			name: "YAML list for a scalar",
			yaml: "model:\n  name: [a, b]\n",
			want: []string{"line 2: ", "model.name: want a single value, not a list"},
		},
		{
			name: "YAML scalar for a section",
			yaml: "kafka: k:9092\n",
			want: []string{"line 1: ", "kafka must be a mapping of keys"},
		},
		{
			name: "YAML mapping for a leaf",
			yaml: "log:\n  level:\n    x: 1\n",
			want: []string{"line 3: ", "log.level: want a single value, not a mapping"},
		},
		{
			name: "YAML list element not a string",
			yaml: "source:\n  topics: [a, [b]]\n",
			want: []string{"line 2: ", "source.topics: an element is a list"},
		},
		{
			name: "YAML not a mapping",
			yaml: "- a\n- b\n",
			want: []string{"line 1: ", "the configuration must be a mapping"},
		},
		{
			name: "second YAML document",
			yaml: "model:\n  name: a\n---\nmodel:\n  name: b\n",
			want: []string{"config.yaml: line 3: a second YAML document"},
		},
		{
			name: "YAML syntax error",
			yaml: "model:\n  name: a\n    b: c\n",
			want: []string{"config.yaml: ", "line 3"},
		},
		{
			name: "missing file",
			args: []string{"--config", "/nonexistent/hyperplane.yaml"},
			want: []string{"config file: ", "/nonexistent/hyperplane.yaml", "no such file"},
		},
		{
			name: "missing file from HYPERPLANE_CONFIG",
			env:  map[string]string{"HYPERPLANE_CONFIG": "/nonexistent/h.yaml"},
			want: []string{"config file: ", "/nonexistent/h.yaml"},
		},
		{
			name: "bad env float",
			env:  map[string]string{"HYPERPLANE_MODEL_LEARNER_ETA": "abc"},
			want: []string{`HYPERPLANE_MODEL_LEARNER_ETA: "abc" is not a number`},
		},
		{
			name: "bad env int",
			env:  map[string]string{"HYPERPLANE_SOURCE_MAX_BYTES": "1MB"},
			want: []string{`HYPERPLANE_SOURCE_MAX_BYTES: "1MB" is not an integer`},
		},
		{
			name: "bad env bool",
			env:  map[string]string{"HYPERPLANE_NATS_TLS_ENABLED": "yes please"},
			want: []string{`HYPERPLANE_NATS_TLS_ENABLED: "yes please" is not a boolean`},
		},
		{
			name: "negative env uint",
			env:  map[string]string{"HYPERPLANE_MODEL_LEARNER_HASH_SEED": "-1"},
			want: []string{`HYPERPLANE_MODEL_LEARNER_HASH_SEED: "-1" is not a non-negative integer`},
		},
		{
			name: "env int out of range",
			env:  map[string]string{"HYPERPLANE_SOURCE_BATCH": "99999999999999999999"},
			want: []string{`HYPERPLANE_SOURCE_BATCH: "99999999999999999999" is out of range`},
		},
		{
			name: "unknown flag",
			args: []string{"--model.name=m", "--colour=red"},
			want: []string{"flags: ", "-colour"},
		},
		{
			name: "unknown flag that is a section",
			args: []string{"--kafka", "x"},
			want: []string{"flags: ", "-kafka"},
		},
		{
			name: "bad flag value",
			args: []string{"--source.batch", "many"},
			want: []string{"flags: ", "-source.batch", `"many" is not an integer`},
		},
		{
			name: "bad bool flag value",
			args: []string{"--kafka.tls.enabled=perhaps"},
			want: []string{"flags: ", "-kafka.tls.enabled", `"perhaps" is not a boolean`},
		},
		{
			name: "flag without its value",
			args: []string{"--model.name"},
			want: []string{"flags: ", "-model.name"},
		},
		{
			name: "positional argument",
			args: []string{"--model.name=m", "extra"},
			want: []string{"flags: ", `unexpected argument "extra"`},
		},
		{
			name: "an empty element of a list flag",
			args: []string{"--model.learner.classes", "a,,b"},
			want: []string{"-model.learner.classes", `"a,,b" has an empty element (element 2`},
		},
		{
			name: "an empty element of a list variable",
			env:  map[string]string{"HYPERPLANE_SOURCE_TOPICS": "examples,"},
			want: []string{"HYPERPLANE_SOURCE_TOPICS", `"examples," has an empty element (element 2`},
		},
		{
			name: "the flag error comes before the file is read",
			args: []string{"--config", "/nonexistent/x.yaml", "--nope"},
			want: []string{"-nope"},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			args := tc.args
			if tc.yaml != "" {
				args = append([]string{"--config", writeConfig(t, tc.yaml)}, args...)
			}
			c, err := Load(args, envOf(tc.env))
			if err == nil {
				t.Fatalf("no error; config %v", c)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
			if !reflect.DeepEqual(c, Config{}) {
				t.Errorf("config on error is not the zero Config: %v", c)
			}
		})
	}
}

func TestLoadHelp(t *testing.T) {
	for _, args := range [][]string{{"-h"}, {"--help"}, {"-help"}, {"--model.name=m", "-h"}} {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			_, err := Load(args, envOf(nil))
			if !errors.Is(err, flag.ErrHelp) {
				t.Fatalf("err = %v, want flag.ErrHelp", err)
			}
		})
	}
}

// TestEveryKeyFromEveryLevel sets every key, each from the file, the
// environment and a flag, and checks that each reaches its field: a key
// that one level does not reach fails here.
func TestEveryKeyFromEveryLevel(t *testing.T) {
	for _, k := range keys() {
		t.Run(k.path, func(t *testing.T) {
			text, yamlText := sampleValue(k.typ, reflect.ValueOf(Default()).FieldByIndex(k.index))
			want, err := parseText(k.typ, text)
			if err != nil {
				t.Fatal(err)
			}
			segs := strings.Split(k.path, ".")
			var y strings.Builder
			for i, s := range segs[:len(segs)-1] {
				y.WriteString(strings.Repeat("  ", i) + s + ":\n")
			}
			y.WriteString(strings.Repeat("  ", len(segs)-1) + segs[len(segs)-1] + ": " + yamlText + "\n")
			path := writeConfig(t, y.String())
			for _, l := range []struct {
				name string
				args []string
				env  map[string]string
			}{
				{"file", []string{"--config", path}, nil},
				{"env", nil, map[string]string{k.env: text}},
				{"flag", []string{"--" + k.path + "=" + text}, nil},
			} {
				c, err := Load(l.args, envOf(l.env))
				if err != nil {
					t.Fatalf("%s: %v", l.name, err)
				}
				got := reflect.ValueOf(c).FieldByIndex(k.index)
				if !reflect.DeepEqual(got.Interface(), want.Interface()) {
					t.Errorf("%s: got %#v, want %#v", l.name, got.Interface(), want.Interface())
				}
				def := reflect.ValueOf(Default()).FieldByIndex(k.index)
				if reflect.DeepEqual(got.Interface(), def.Interface()) {
					t.Errorf("%s: the sample value is the default; the test proves nothing", l.name)
				}
			}
		})
	}
}

// sampleValue is a value of type t other than the key's default def, as
// text for a variable or flag and as YAML.
func sampleValue(t reflect.Type, def reflect.Value) (text, yamlText string) {
	switch t {
	case reflect.TypeFor[time.Duration]():
		return "42s", "42s"
	case reflect.TypeFor[wire.Start]():
		return "offset:42", "offset:42"
	case reflect.TypeFor[Destination]():
		return "nats:sample", "nats:sample"
	case reflect.TypeFor[Kind]():
		return "nats", "nats"
	case reflect.TypeFor[wire.Format](), reflect.TypeFor[wire.Encoding]():
		return "msgpack", "msgpack"
	case reflect.TypeFor[wire.Publish]():
		return "none", "none"
	case reflect.TypeFor[Mechanism]():
		return "plain", "plain"
	case reflect.TypeFor[Level]():
		return "debug", "debug"
	case reflect.TypeFor[LogFormat]():
		return "console", "console"
	case reflect.TypeFor[learner.MixWeights]():
		return "mistakes", "mistakes"
	case reflect.TypeFor[learner.MixRule]():
		return "touched", "touched"
	case reflect.TypeFor[Promote]():
		return "auto", "auto"
	case reflect.TypeFor[Scope]():
		return "partition", "partition"
	case reflect.TypeFor[Challengers]():
		return "seed:hash_seed=7,algorithm=pa1;small:hash_bits=12", "[{name: seed, hash_seed: 7, algorithm: pa1}, {name: small, hash_bits: 12}]"
	}
	switch t.Kind() {
	case reflect.Bool:
		v := strconv.FormatBool(!def.Bool())
		return v, v
	case reflect.Int, reflect.Uint64:
		return "4242", "4242"
	case reflect.Float64:
		return "0.125", "0.125"
	case reflect.Slice:
		return "s1,s2", "[s1, s2]"
	}
	return "sample-value", "sample-value"
}

func TestEnvNamesAreUnique(t *testing.T) {
	seen := map[string]string{}
	for _, k := range keys() {
		if other, ok := seen[k.env]; ok {
			t.Errorf("%s and %s share the variable %s", k.path, other, k.env)
		}
		seen[k.env] = k.path
	}
	if _, ok := seen[configEnv]; ok {
		t.Errorf("a key's variable is %s", configEnv)
	}
}

// yamlFor is a config file that sets the key at the dotted path to the
// YAML value.
func yamlFor(path, value string) string {
	segs := strings.Split(path, ".")
	var y strings.Builder
	for i, s := range segs[:len(segs)-1] {
		y.WriteString(strings.Repeat("  ", i) + s + ":\n")
	}
	y.WriteString(strings.Repeat("  ", len(segs)-1) + segs[len(segs)-1] + ": " + value + "\n")
	return y.String()
}

// TestLoadParsesTypedValues: a key of a type that reads text (a start, a
// destination, a kind, a format, a mode, a mechanism) or a duration is
// parsed once, as it is loaded, the same from the file, a variable or a
// flag; a text that is not such a value is an error there, naming the
// key (its variable, its flag) and quoting the text.
func TestLoadParsesTypedValues(t *testing.T) {
	cases := []struct {
		key, text string
		noFile    bool // the text is for variables and flags only
		get       func(Config) any
		want      any    // when valid
		err       string // a substring of the error; "" when valid
	}{
		{key: "source.start", text: "time:2024-05-01T12:00:00+02:00",
			get: func(c Config) any { return c.Source.Start.Time.UTC() }, want: time.Date(2024, 5, 1, 10, 0, 0, 0, time.UTC)},
		{key: "source.start", text: "offset:0", get: func(c Config) any { return c.Source.Start }, want: wire.Start{Kind: wire.StartOffset}},
		{key: "source.start", text: "yesterday", err: `unknown start "yesterday"`},
		{key: "source.start", text: "offset:ten", err: `"offset:ten": offset:N needs an integer N >= 0`},
		{key: "source.start", text: "offset:-1", err: `"offset:-1": offset:N needs an integer N >= 0`},
		{key: "source.start", text: "time:2024-13-01T00:00:00Z", err: "RFC 3339"},
		{key: "source.start", text: "time:2024-05-01T12:00:00", err: "RFC 3339"},
		{key: "source.format", text: "json", get: func(c Config) any { return c.Source.Format }, want: wire.FormatJSON},
		{key: "source.format", text: "xml", err: `unknown format "xml"`},
		{key: "source.kind", text: "jetstream", get: func(c Config) any { return c.Source.Kind }, want: KindJetStream},
		{key: "source.kind", text: "redis", err: `unknown kind "redis" (want kafka, jetstream or nats)`},
		{key: "outputs.predictions", text: "kafka:p", get: func(c Config) any { return c.Outputs.Predictions }, want: Destination{KindKafka, "p"}},
		{key: "outputs.predictions", text: "predictions", err: `"predictions" is not a destination`},
		{key: "outputs.dead_letter", text: "nats:a.>", err: "wildcard"},
		{key: "outputs.publish", text: "some", err: `unknown value "some"`},
		{key: "outputs.format", text: "avro", err: `unknown format "avro"`},
		{key: "kafka.sasl.mechanism", text: "scram-sha-512", get: func(c Config) any { return c.Kafka.SASL.Mechanism }, want: MechanismSCRAMSHA512},
		{key: "kafka.sasl.mechanism", text: "gssapi", err: `unknown mechanism "gssapi"`},
		{key: "log.level", text: "loud", err: `unknown level "loud" (want debug, info, warn or error)`},
		{key: "log.format", text: "text", err: `unknown format "text" (want auto, json or console)`},
		{key: "model.mixing.growth", text: "auto", get: func(c Config) any { return c.Model.Mixing.Growth }, want: GrowthAuto},
		{key: "model.mixing.growth", text: "0", get: func(c Config) any { return c.Model.Mixing.Growth }, want: Growth(0)},
		{key: "model.mixing.growth", text: "32", get: func(c Config) any { return c.Model.Mixing.Growth }, want: Growth(32)},
		{key: "model.mixing.growth", text: "-1", err: `growth "-1": want auto, 0 (epochs of epoch_examples) or a whole number more`},
		{key: "model.mixing.growth", text: "fast", err: `growth "fast": want auto`},
		{key: "snapshot.interval", text: "1m30s", get: func(c Config) any { return c.Snapshot.Interval }, want: 90 * time.Second},
		{key: "snapshot.interval", text: "often", err: `"often" is not a duration`},
		{key: "shutdown.timeout", text: "10s", get: func(c Config) any { return c.Shutdown.Timeout }, want: 10 * time.Second},
		{key: "model.learner.classes", text: "3", noFile: true, get: func(c Config) any { return c.Model.Learner.Classes }, want: []string{"0", "1", "2"}},
		{key: "model.learner.classes", text: "0", noFile: true, get: func(c Config) any { return c.Model.Learner.Classes }, want: []string(nil)},
		{key: "model.learner.classes", text: "70000", noFile: true, err: "70000 classes is out of range"},
	}
	for _, tc := range cases {
		t.Run(tc.key+"="+tc.text, func(t *testing.T) {
			var k key
			for _, kk := range keys() {
				if kk.path == tc.key {
					k = kk
				}
			}
			levels := []struct {
				name  string
				args  []string
				env   map[string]string
				where string // what the error names
			}{
				{"env", nil, map[string]string{k.env: tc.text}, k.env + ": "},
				{"flag", []string{"--" + k.path, tc.text}, nil, "flag -" + k.path + ": "},
			}
			if !tc.noFile {
				levels = append(levels, struct {
					name  string
					args  []string
					env   map[string]string
					where string
				}{"file", []string{"--config", writeConfig(t, yamlFor(k.path, strconv.Quote(tc.text)))}, nil, "line " + strconv.Itoa(strings.Count(k.path, ".")+1) + ": " + k.path + ": "})
			}
			for _, l := range levels {
				c, err := Load(l.args, envOf(l.env))
				if tc.err != "" {
					if err == nil || !strings.Contains(err.Error(), l.where) {
						t.Fatalf("%s: error %v, want one naming %q", l.name, err, l.where)
					}
					if !strings.Contains(err.Error(), tc.err) {
						t.Errorf("%s: error %q does not say %q", l.name, err, tc.err)
					}
					continue
				}
				if err != nil {
					t.Fatalf("%s: %v", l.name, err)
				}
				if got := tc.get(c); !reflect.DeepEqual(got, tc.want) {
					t.Errorf("%s: got %#v, want %#v", l.name, got, tc.want)
				}
			}
		})
	}
}

// TestFormatDuration: durations are written as they are usually given,
// and read back the same.
func TestFormatDuration(t *testing.T) {
	for _, tc := range []struct {
		d    time.Duration
		want string
	}{
		{0, "0s"},
		{25 * time.Second, "25s"},
		{60 * time.Second, "60s"},
		{90 * time.Second, "90s"},
		{5 * time.Minute, "5m"},
		{90 * time.Minute, "90m"},
		{2 * time.Hour, "2h"},
		{-30 * time.Second, "-30s"},
		{1500 * time.Millisecond, "1.5s"},
		{500 * time.Millisecond, "500ms"},
	} {
		got := formatDuration(tc.d)
		if got != tc.want {
			t.Errorf("formatDuration(%v) = %q, want %q", tc.d, got, tc.want)
		}
		if back, err := time.ParseDuration(got); err != nil || back != tc.d {
			t.Errorf("%q reads back as %v, %v", got, back, err)
		}
	}
}
