package config

import (
	"flag"
	"io"
	"reflect"
	"strings"
	"testing"
)

// TestBoolFlagTakesTrueOrFalse: a boolean key is on given alone or with
// the value true, after '=' or as the next word, and off with false
// either way; the next word is its value only when it is true or false.
func TestBoolFlagTakesTrueOrFalse(t *testing.T) {
	cases := []struct {
		args []string
		want bool
	}{
		{[]string{"--serve.nats"}, true},
		{[]string{"--serve.nats=true"}, true},
		{[]string{"--serve.nats", "true"}, true},
		{[]string{"-serve.nats", "true", "--model.name", "m"}, true},
		{[]string{"--serve.nats=false"}, false},
		{[]string{"--serve.nats", "false"}, false},
		{[]string{"--serve.nats", "false", "--model.name", "m"}, false},
		{[]string{"--model.name", "true", "--serve.nats", "--log.level", "warn"}, true},
	}
	for _, c := range cases {
		t.Run(strings.Join(c.args, " "), func(t *testing.T) {
			cfg, err := Load(c.args, envOf(nil))
			if err != nil {
				t.Fatal(err)
			}
			if cfg.Serve.NATS != c.want {
				t.Errorf("serve.nats = %v, want %v", cfg.Serve.NATS, c.want)
			}
		})
	}
	// A value of a string key is never taken for a boolean's.
	cfg, err := Load([]string{"--model.name", "true"}, envOf(nil))
	if err != nil || cfg.Model.Name != "true" {
		t.Fatalf("--model.name true: %q, %v", cfg.Model.Name, err)
	}
	// Another word after a boolean: the error says how to write one.
	_, err = Load([]string{"--serve.nats", "yes"}, envOf(nil))
	if err == nil || !strings.Contains(err.Error(), `unexpected argument "yes" after --serve.nats, a boolean`) ||
		!strings.Contains(err.Error(), "--serve.nats=false") {
		t.Fatalf("--serve.nats yes: %v", err)
	}
}

// TestJoinBoolValues walks the arguments as the flag package does: a
// non-boolean flag's value is not a flag, and the flags end at the first
// positional argument or "--".
func TestJoinBoolValues(t *testing.T) {
	fs := flag.NewFlagSet("t", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Bool("on", false, "")
	fs.String("name", "", "")
	cases := []struct{ args, want []string }{
		{[]string{"-on", "true"}, []string{"-on=true"}},
		{[]string{"--on", "false", "x"}, []string{"--on=false", "x"}},
		{[]string{"-on", "yes"}, []string{"-on", "yes"}},
		{[]string{"-on=true", "false"}, []string{"-on=true", "false"}},
		{[]string{"-name", "-on", "true"}, []string{"-name", "-on", "true"}},
		{[]string{"x", "-on", "true"}, []string{"x", "-on", "true"}},
		{[]string{"--", "-on", "true"}, []string{"--", "-on", "true"}},
		{[]string{"-nope", "-on", "false"}, []string{"-nope", "-on=false"}},
	}
	for _, c := range cases {
		if got := JoinBoolValues(fs, c.args); !reflect.DeepEqual(got, c.want) {
			t.Errorf("JoinBoolValues(%q) = %q, want %q", c.args, got, c.want)
		}
	}
}

// TestUnknownFlagNamesTheKeyMeant: a mistyped flag is named with the
// key probably meant, found as for a mistyped variable.
func TestUnknownFlagNamesTheKeyMeant(t *testing.T) {
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"--serve.nat"}, "unknown flag --serve.nat; did you mean --serve.nats?"},
		{[]string{"--serve.nat=true"}, "unknown flag --serve.nat; did you mean --serve.nats?"},
		{[]string{"--snapshot.ur", "file:///x"}, "unknown flag --snapshot.ur; did you mean --snapshot.url?"},
		{[]string{"--Model.Name", "m"}, "unknown flag --Model.Name: flags are lower case, did you mean --model.name?"},
		{[]string{"--brokers", "h:9092"}, "unknown flag --brokers; did you mean --kafka.brokers?"},
		{[]string{"--confg", "x.yaml"}, "unknown flag --confg; did you mean --config?"},
		{[]string{"--colour=red"}, "unknown flag --colour (every key is a flag: hyperplane config --defaults lists them)"},
	}
	for _, c := range cases {
		t.Run(strings.Join(c.args, " "), func(t *testing.T) {
			_, err := Load(c.args, envOf(nil))
			if err == nil || err.Error() != "flags: "+c.want {
				t.Fatalf("got %v, want flags: %s", err, c.want)
			}
		})
	}
}
