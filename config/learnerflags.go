package config

import (
	"flag"
	"reflect"
	"strings"

	"github.com/hyperplane-ml/hyperplane/learner"
)

// learnerPrefix starts the path of every key of the model's
// hyperparameters.
const learnerPrefix = "model.learner."

// LearnerFlags defines on fs a flag for every key of model.learner that
// sets the field of *c at once, for the commands that take a model but
// not the rest of the configuration (train, demo). Each key has two
// names: its own flag, as run takes it (--model.learner.hash_bits), and a
// short alias, the key's last segment with '-' for '_' (-hash-bits). The
// help is the key's; -h shows c's values when LearnerFlags is called as
// the defaults. Numbers and booleans are the flag package's own flags, so
// that -h names their type; the other keys are read as Load reads them
// (model.learner.classes: names, or their number).
func LearnerFlags(fs *flag.FlagSet, c *learner.Config) {
	root := reflect.ValueOf(c).Elem()
	depth := strings.Count(learnerPrefix, ".") // the index of learner.Config's fields in Config
	for _, k := range keys() {
		if !strings.HasPrefix(k.path, learnerPrefix) {
			continue
		}
		field := root.FieldByIndex(k.index[depth:])
		short := strings.ReplaceAll(strings.TrimPrefix(k.path, learnerPrefix), "_", "-")
		for _, name := range []string{k.path, short} {
			switch p := field.Addr().Interface().(type) {
			case *float64:
				fs.Float64Var(p, name, *p, k.help)
			case *int:
				fs.IntVar(p, name, *p, k.help)
			case *uint64:
				fs.Uint64Var(p, name, *p, k.help)
			case *bool:
				fs.BoolVar(p, name, *p, k.help)
			default:
				fs.Var(&learnerValue{k: k, field: field}, name, k.help)
			}
		}
	}
}

// learnerValue is the flag of a key of model.learner that is neither a
// number nor a boolean.
type learnerValue struct {
	k     key
	field reflect.Value
}

func (v *learnerValue) Set(s string) error {
	val, err := v.k.parse(s)
	if err != nil {
		return err
	}
	v.field.Set(val)
	return nil
}

// String is the field's text, or "" for its zero value, which the flag
// package then leaves out of -h as it does its own flags' zero defaults.
func (v *learnerValue) String() string {
	if v == nil || !v.field.IsValid() || v.field.IsZero() {
		return ""
	}
	return formatText(v.field)
}
