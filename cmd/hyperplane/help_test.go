package main

import (
	"errors"
	"flag"
	"io"
	"os"
	"reflect"
	"regexp"
	"strings"
	"testing"

	"github.com/hyperplane-ml/hyperplane/config"
	"github.com/hyperplane-ml/hyperplane/learner"
)

// TestHelpPrintsUsageOnce: every command's -h prints its usage once, on
// standard output, and succeeds.
func TestHelpPrintsUsageOnce(t *testing.T) {
	for _, c := range commands() {
		for _, h := range []string{"-h", "--help"} {
			t.Run(c.name+h, func(t *testing.T) {
				out, stderr, err := runCmd(t, "", c.name, h)
				if err != nil {
					t.Fatalf("hyperplane %s %s: %v\n%s", c.name, h, err, stderr)
				}
				if n := strings.Count(out, "Usage: hyperplane "+c.name); n != 1 {
					t.Errorf("the usage is printed %d times:\n%s", n, out)
				}
				// A Flags: heading has a flag under it, and a line ends
				// at its last word.
				if i := strings.Index(out, "Flags:\n"); i >= 0 && !strings.HasPrefix(out[i+len("Flags:\n"):], "  -") {
					t.Errorf("a Flags: heading with no flag under it:\n%s", out)
				}
				if first, _, _ := strings.Cut(out, "\n"); strings.HasSuffix(first, " ") {
					t.Errorf("the usage line %q ends in a space", first)
				}
				if stderr != "" {
					t.Errorf("stderr: %q", stderr)
				}
			})
		}
	}
}

// TestSetupHelpNamesEveryOutput: setup creates a topic or stream for every
// key of outputs (internal/provision), and its -h names each.
func TestSetupHelpNamesEveryOutput(t *testing.T) {
	out := mustRun(t, "", "setup", "-h")
	for _, d := range (config.Outputs{}).Destinations() {
		if !strings.Contains(out, d.Key) {
			t.Errorf("setup -h does not name %s:\n%s", d.Key, out)
		}
	}
}

// TestHelpShowsTheCommandsDefaults: the defaults -h shows are the ones the
// command uses, the demo's and train's learner the default (arow) as run's.
func TestHelpShowsTheCommandsDefaults(t *testing.T) {
	cases := []struct {
		command string
		want    []string
	}{
		{"demo", []string{"-algorithm rule", "(default arow)", "(default standard)", "(default constant)", "(default linear)", "-examples int", "(default 200000)"}},
		{"train", []string{"(default arow)", "(default standard)", "(default constant)", "(default linear)", "(default 18)"}},
	}
	for _, c := range cases {
		out := mustRun(t, "", c.command, "-h")
		for _, want := range c.want {
			if !strings.Contains(out, want) {
				t.Errorf("%s -h lacks %q:\n%s", c.command, want, out)
			}
		}
		// A default named once, by the flag package.
		if n := len(regexp.MustCompile(`default \w+\) \(default`).FindAllString(out, -1)); n != 0 {
			t.Errorf("%s -h names a default twice:\n%s", c.command, out)
		}
		if strings.Contains(out, "(default perceptron)") {
			t.Errorf("%s -h says perceptron, the default learner is arow:\n%s", c.command, out)
		}
	}
}

// TestCommandsPageNamesEveryFlag: docs/commands.md names every flag a
// command's -h lists, but the model's flags of demo and train, which the
// page documents as the model.learner keys they set.
func TestCommandsPageNamesEveryFlag(t *testing.T) {
	page, err := os.ReadFile("../../docs/commands.md")
	if err != nil {
		t.Fatal(err)
	}
	model := map[string]bool{}
	fs := flag.NewFlagSet("model", flag.ContinueOnError)
	config.LearnerFlags(fs, &learner.Config{})
	fs.VisitAll(func(f *flag.Flag) { model[f.Name] = true })
	listed := regexp.MustCompile(`(?m)^  -([a-z][a-z0-9-]*)`)
	for _, c := range commands() {
		out, _, err := runCmd(t, "", c.name, "-h")
		if err != nil {
			t.Fatalf("%s -h: %v", c.name, err)
		}
		for _, m := range listed.FindAllStringSubmatch(out, -1) {
			name := m[1]
			if model[name] {
				continue
			}
			if !regexp.MustCompile(`(^|[^a-z.-])--?` + regexp.QuoteMeta(name) + `($|[^a-z0-9-])`).Match(page) {
				t.Errorf("docs/commands.md does not name %s's flag -%s", c.name, name)
			}
		}
	}
}

// TestFlagMistakePrintsNoUsage: a mistake on the command line is one error
// line, printed by main; the usage is only for -h.
func TestFlagMistakePrintsNoUsage(t *testing.T) {
	out, stderr, err := runCmd(t, "", "gen", "-nope")
	if err == nil || !strings.Contains(err.Error(), "-nope") {
		t.Fatalf("got %v", err)
	}
	if out != "" || stderr != "" {
		t.Errorf("printed %q and %q besides the error", out, stderr)
	}
}

// TestFlagBadValueSaysWhatItIsNot: a command's own flag given a value it
// cannot parse says what the value is not, as a key does, and not the flag
// package's bare "parse error"; its -h still names the flags' types.
func TestFlagBadValueSaysWhatItIsNot(t *testing.T) {
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"demo", "-label-delay", "5"}, `"5" is not a duration such as 30s or 5m`},
		{[]string{"gen", "-examples", "abc"}, `"abc" is not an integer`},
		{[]string{"gen", "-seed", "-1"}, `"-1" is not a non-negative integer`},
		{[]string{"gen", "-noise", "x"}, `"x" is not a number`},
		{[]string{"gen", "-examples", "99999999999999999999"}, `"99999999999999999999" is out of range`},
		{[]string{"train", "-input", "-", "-normalize=maybe"}, `"maybe" is not a boolean (want true or false)`},
		{[]string{"train", "-input", "-", "-eta", "fast"}, `"fast" is not a number`},
		{[]string{"setup", "--retention", "7"}, `"7" is not a duration such as 30s or 5m`},
	}
	for _, c := range cases {
		_, _, err := runCmd(t, "", c.args...)
		var ue *usageError
		if !errors.As(err, &ue) {
			t.Errorf("%q: got %v, want a usage error", c.args, err)
			continue
		}
		if msg := err.Error(); !strings.Contains(msg, c.want) || strings.Contains(msg, "parse error") {
			t.Errorf("%q: %q, want it to say %s", c.args, msg, c.want)
		}
	}
	out := mustRun(t, "", "gen", "-h")
	for _, want := range []string{"-examples int", "-noise float", "-label-delay duration", "-seed uint"} {
		if !strings.Contains(out, want) {
			t.Errorf("gen -h lacks %q after a bad value:\n%s", want, out)
		}
	}
}

// TestUnknownFlagNamesTheCommandsFlag: a typo of a command's own flag is
// refused naming that flag, whether the command takes configuration keys
// beside its flags (setup, gen, replay, compare, backtest) or not (train,
// inspect, predict), and a typo of a key still names the key.
func TestUnknownFlagNamesTheCommandsFlag(t *testing.T) {
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"setup", "--partitons", "3"}, "unknown flag --partitons; did you mean --partitions?"},
		{[]string{"gen", "-exmples", "3"}, "unknown flag -exmples; did you mean -examples?"},
		{[]string{"gen", "--label-dely=3s"}, "unknown flag --label-dely; did you mean --label-delay?"},
		{[]string{"replay", "--publsh"}, "unknown flag --publsh; did you mean --publish?"},
		{[]string{"compare", "--jsno"}, "unknown flag --jsno; did you mean --json?"},
		{[]string{"backtest", "--inptu", "x"}, "unknown flag --inptu; did you mean --input?"},
		{[]string{"train", "-inptu", "x"}, "unknown flag -inptu; did you mean -input?"},
		{[]string{"inspect", "-tp", "3", "x"}, "unknown flag -tp; did you mean -top?"},
		{[]string{"predict", "-modle", "x"}, "unknown flag -modle; did you mean -model?"},
		{[]string{"train", "-zzzzzz"}, "unknown flag -zzzzzz (hyperplane train -h lists the flags)"},
		{[]string{"setup", "--brokers", "x"}, "unknown flag --brokers; did you mean --kafka.brokers?"},
		{[]string{"setup", "--nats.ulr", "x"}, "unknown flag --nats.ulr; did you mean --nats.url?"},
	}
	for _, c := range cases {
		_, _, err := runCmd(t, "", c.args...)
		var ue *usageError
		if !errors.As(err, &ue) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: got %v, want a usage error saying %s", c.args, err, c.want)
		}
	}
}

// TestOwnBoolFlagTakesTrueOrFalse: a command's own boolean flag, like a
// key, takes the next word as its value when it is true or false, and
// leaves the keys after it to the configuration.
func TestOwnBoolFlagTakesTrueOrFalse(t *testing.T) {
	e := &env{stdout: io.Discard}
	fs := newFlagSet("t", "", e)
	publish := fs.Bool("publish", false, "")
	own, rest := splitOwnFlags(fs, []string{"-publish", "true", "--serve.nats", "false", "--model.name", "m"})
	if want := []string{"-publish", "true"}; !reflect.DeepEqual(own, want) {
		t.Errorf("own flags %q, want %q", own, want)
	}
	if want := []string{"--serve.nats", "false", "--model.name", "m"}; !reflect.DeepEqual(rest, want) {
		t.Errorf("the rest %q, want %q", rest, want)
	}
	if err := parseFlags(fs, own); err != nil || !*publish {
		t.Fatalf("-publish true: %v, %v", *publish, err)
	}
	if err := parseFlags(fs, []string{"-publish", "false"}); err != nil || *publish || fs.NArg() != 0 {
		t.Fatalf("-publish false: %v, %v, args %q", *publish, err, fs.Args())
	}
}

// TestCommandsPageListsEveryCommand: docs/commands.md's table has a row
// for every command the binary has, and for no other.
func TestCommandsPageListsEveryCommand(t *testing.T) {
	page, err := os.ReadFile("../../docs/commands.md")
	if err != nil {
		t.Fatal(err)
	}
	row := regexp.MustCompile("(?m)^\\| `hyperplane ([a-z]+)")
	documented := map[string]bool{}
	for _, m := range row.FindAllStringSubmatch(string(page), -1) {
		documented[m[1]] = true
	}
	for _, c := range commands() {
		if !documented[c.name] {
			t.Errorf("docs/commands.md has no row for %q", c.name)
		}
		delete(documented, c.name)
	}
	for name := range documented {
		t.Errorf("docs/commands.md has a row for %q, which is no command", name)
	}
}

// TestHelpOfACommand: `hyperplane help CMD` prints what `hyperplane CMD
// -h` prints, for every command, where it printed the list of commands;
// a command that does not exist is a usage error naming it.
func TestHelpOfACommand(t *testing.T) {
	t.Parallel()
	for _, c := range commands() {
		want, _, err := runCmd(t, "", c.name, "-h")
		if err != nil || want == "" {
			t.Fatalf("%s -h: %v, printed %q", c.name, err, want)
		}
		got, _, err := runCmd(t, "", "help", c.name)
		if err != nil || got != want {
			t.Errorf("help %s: %v\n%s\nwant what %s -h prints:\n%s", c.name, err, got, c.name, want)
		}
	}
	_, _, err := runCmd(t, "", "help", "rnu")
	var ue *usageError
	if !errors.As(err, &ue) || !strings.Contains(err.Error(), `unknown command "rnu"`) {
		t.Errorf("help rnu: %v, want a usage error naming the command", err)
	}
}
