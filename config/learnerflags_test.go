package config

import (
	"flag"
	"io"
	"reflect"
	"strings"
	"testing"

	"github.com/hyperplane-ml/hyperplane/learner"
)

// TestLearnerFlags: every key of model.learner is a flag of train and
// demo under its key's name and a short alias, with the key's help, the
// command's defaults, and the key's parsing (classes by number too).
func TestLearnerFlags(t *testing.T) {
	c := learner.DefaultConfig()
	c.Algorithm = learner.Averaged
	fs := flag.NewFlagSet("train", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	LearnerFlags(fs, &c)

	n := 0
	for _, k := range keys() {
		if !strings.HasPrefix(k.path, learnerPrefix) {
			continue
		}
		n++
		short := strings.ReplaceAll(strings.TrimPrefix(k.path, learnerPrefix), "_", "-")
		long, alias := fs.Lookup(k.path), fs.Lookup(short)
		if long == nil || alias == nil {
			t.Fatalf("%s: flags %v and %v, want both", k.path, long, alias)
		}
		if long.Usage != k.help || alias.Usage != k.help {
			t.Errorf("%s: help %q and %q, want the key's %q", k.path, long.Usage, alias.Usage, k.help)
		}
	}
	fields := 0
	for f := range reflect.TypeFor[learner.Config]().Fields() {
		if f.Tag.Get("yaml") != "-" { // Drift is model.drift, not model.learner.drift
			fields++
		}
	}
	if n != fields {
		t.Errorf("%d flags for the %d keys of learner.Config", n, fields)
	}
	if d := fs.Lookup("algorithm").DefValue; d != "averaged" {
		t.Errorf("-algorithm shows the default %q, want the command's, averaged", d)
	}
	if d := fs.Lookup("classes").DefValue; d != "" {
		t.Errorf("-classes shows the default %q, want none", d)
	}

	err := fs.Parse([]string{"-hash-bits", "12", "--model.learner.eta=0.5", "-classes", "3", "-algorithm", "pa1", "-normalize", "-kernel", "rbf"})
	if err != nil {
		t.Fatal(err)
	}
	want := learner.DefaultConfig()
	want.Algorithm, want.HashBits, want.Eta, want.Classes, want.Normalize, want.Kernel = learner.PA1, 12, 0.5, []string{"0", "1", "2"}, true, learner.RBFKernel
	if !reflect.DeepEqual(c, want) {
		t.Errorf("parsed into\n%+v\nwant\n%+v", c, want)
	}
	if err := fs.Parse([]string{"--model.learner.classes", "neg, pos"}); err != nil || !reflect.DeepEqual(c.Classes, []string{"neg", "pos"}) {
		t.Errorf("classes by name: %v, %v", c.Classes, err)
	}
	if err := fs.Parse([]string{"-eta", "fast"}); err == nil {
		t.Error("-eta fast parsed")
	}
}
