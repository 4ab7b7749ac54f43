package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/hyperplane-ml/hyperplane/config"
	"github.com/hyperplane-ml/hyperplane/learner"
)

// newFlagSet returns a flag set whose errors come back to the caller
// instead of being printed. Its Usage prints the usage to standard output;
// parseFlags calls it once for -h, and nothing else calls it.
//
// The usage leaves out the flags named after a configuration key
// (--model.learner.eta, defined by learnerFlags beside their short names):
// "hyperplane run -h" lists the keys.
func newFlagSet(name, usage string, e *env) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	if e.flagSet != nil {
		e.flagSet(fs)
	}
	fs.Usage = func() {
		shown := flag.NewFlagSet(name, flag.ContinueOnError)
		keys, flags := false, 0
		fs.VisitAll(func(f *flag.Flag) {
			if strings.Contains(f.Name, ".") {
				keys = true
				return
			}
			shown.Var(f.Value, f.Name, f.Usage)
			shown.Lookup(f.Name).DefValue = f.DefValue
			flags++
		})
		fmt.Fprintln(e.stdout, strings.TrimSpace("Usage: hyperplane "+name+" "+usage))
		if flags > 0 {
			fmt.Fprint(e.stdout, "\nFlags:\n")
		}
		shown.SetOutput(e.stdout)
		shown.PrintDefaults()
		if keys {
			fmt.Fprintln(e.stdout, "\nEach model flag is also the flag of its configuration key, as run takes it: -hash-bits is --model.learner.hash_bits.")
		}
	}
	return fs
}

// parseFlags parses args; -h prints the usage once and gives errHelp. A
// mistake gives a usageError and prints nothing: main prints the error.
// A boolean flag takes the next word as its value when it is true or
// false (config.JoinBoolValues), as the configuration's keys do.
func parseFlags(fs *flag.FlagSet, args []string) error {
	// The flag package calls Usage itself on -h and on every mistake;
	// silence it while parsing, so that the usage is printed once, here,
	// and only when asked for.
	usage := fs.Usage
	fs.Usage = func() {}
	restore := describeValues(fs)
	err := fs.Parse(config.JoinBoolValues(fs, args))
	restore()
	fs.Usage = usage
	if errors.Is(err, flag.ErrHelp) {
		usage()
		return errHelp
	}
	if err != nil {
		if name, ok := strings.CutPrefix(err.Error(), "flag provided but not defined: -"); ok {
			return &usageError{msg: unknownOwnFlag(fs, "-"+name)}
		}
		return &usageError{msg: err.Error()}
	}
	return nil
}

// unknownOwnFlag says that arg, a flag as the user wrote it, is none of
// fs's, and names the one of fs probably meant, or else where the flags
// are listed.
func unknownOwnFlag(fs *flag.FlagSet, arg string) string {
	var known []string
	fs.VisitAll(func(f *flag.Flag) { known = append(known, f.Name) })
	name, _, _ := strings.Cut(strings.TrimLeft(arg, "-"), "=")
	if best, ok := config.Nearest(name, known); ok {
		return fmt.Sprintf("unknown flag %s; did you mean %s%s?", arg, arg[:len(arg)-len(strings.TrimLeft(arg, "-"))], best)
	}
	return fmt.Sprintf("unknown flag %s (hyperplane %s -h lists the flags)", arg, fs.Name())
}

// loadCommandConfig loads the configuration from args as loadConfig does,
// for a command whose own flags are those of fs: a flag that is no key,
// refused and near no key but near one of fs's (setup --partitons), is
// named as a typo of that flag.
func loadCommandConfig(e *env, fs *flag.FlagSet, args []string) (config.Config, error) {
	cfg, err := loadConfig(e, args)
	if err == nil || errors.Is(err, flag.ErrHelp) {
		return cfg, err
	}
	msg := err.Error()
	if strings.Contains(msg, "did you mean") {
		return cfg, err // a key's typo
	}
	for _, a := range args {
		name, _, _ := strings.Cut(strings.TrimLeft(a, "-"), "=")
		if !strings.HasPrefix(a, "-") || name == "" {
			continue
		}
		i := strings.Index(msg, "unknown flag --"+name)
		if i < 0 {
			continue
		}
		if rest := msg[i+len("unknown flag --"+name):]; rest != "" && !strings.ContainsAny(rest[:1], ":; ") {
			continue
		}
		var known []string
		fs.VisitAll(func(f *flag.Flag) { known = append(known, f.Name) })
		if best, ok := config.Nearest(name, known); ok {
			return cfg, fmt.Errorf("flags: unknown flag %s; did you mean %s%s?", strings.SplitN(a, "=", 2)[0], a[:len(a)-len(strings.TrimLeft(a, "-"))], best)
		}
	}
	return cfg, err
}

// describeValues has every flag of fs whose value the flag package parses
// (an int, a float, a duration, a boolean) say what a bad value is not,
// as the configuration's keys do, instead of the package's bare "parse
// error"; the function it returns puts the values back, so that the usage
// still names their types.
func describeValues(fs *flag.FlagSet) (restore func()) {
	var wrapped []*flag.Flag
	var values []flag.Value
	fs.VisitAll(func(f *flag.Flag) {
		g, ok := f.Value.(flag.Getter)
		if !ok {
			return
		}
		var what string
		switch g.Get().(type) {
		case int, int64:
			what = "an integer"
		case uint, uint64:
			what = "a non-negative integer"
		case float64:
			what = "a number"
		case time.Duration:
			what = "a duration such as 30s or 5m"
		case bool:
			what = "a boolean (want true or false)"
		default:
			return
		}
		wrapped, values = append(wrapped, f), append(values, f.Value)
		d := describedValue{Value: f.Value, what: what}
		if config.IsBoolFlag(f) {
			f.Value = describedBool{d}
		} else {
			f.Value = d
		}
	})
	return func() {
		for i, f := range wrapped {
			f.Value = values[i]
		}
	}
}

// describedValue is a flag value of the flag package whose Set says what
// a value it cannot parse is not.
type describedValue struct {
	flag.Value
	what string
}

func (v describedValue) Set(s string) error {
	err := v.Value.Set(s)
	if err == nil {
		return nil
	}
	switch err.Error() {
	case "parse error":
		return fmt.Errorf("%q is not %s", s, v.what)
	case "value out of range":
		return fmt.Errorf("%q is out of range", s)
	}
	return err
}

// describedBool is a describedValue of a boolean flag, which stands alone
// for true.
type describedBool struct{ describedValue }

func (describedBool) IsBoolFlag() bool { return true }

// noArgs is a usage error naming the first argument left on fs after its
// flags, if any, for a command that takes flags only: the flag package
// stops at the first argument that is not a flag, so every flag after it
// would be ignored without a word (train -input F stray -out M wrote no
// model).
func noArgs(fs *flag.FlagSet) error {
	if fs.NArg() == 0 {
		return nil
	}
	return usagef("%s: unexpected argument %q: it takes flags only, and would ignore every flag after it", fs.Name(), fs.Arg(0))
}

// errHelp ends a command that printed its usage on request.
var errHelp = errors.New("help requested")

// splitOwnFlags separates the flags defined on fs (and -h) from the rest of
// args, the configuration's keys, which go to config.Load as for run. A
// boolean of fs keeps a true or false that follows it.
func splitOwnFlags(fs *flag.FlagSet, args []string) (own, rest []string) {
	for i := 0; i < len(args); i++ {
		a := args[i]
		name, _, hasValue := strings.Cut(strings.TrimLeft(a, "-"), "=")
		f := fs.Lookup(name)
		switch {
		case !strings.HasPrefix(a, "-"):
			rest = append(rest, a)
		case name == "h" || name == "help":
			own = append(own, a)
		case f == nil:
			rest = append(rest, a)
		default:
			own = append(own, a)
			isBool := config.IsBoolFlag(f)
			if !hasValue && i+1 < len(args) && (!isBool || args[i+1] == "true" || args[i+1] == "false") {
				i++
				own = append(own, args[i])
			}
		}
	}
	return own, rest
}

// learnerFlags defines on fs the flags of the model's keys, which set the
// fields of c (config.LearnerFlags: -hash-bits, or --model.learner.hash_bits
// as run takes it), and names the argument of those whose help has a word
// for it, as -h shows them: -algorithm rule, -hash-bits N.
func learnerFlags(fs *flag.FlagSet, c *learner.Config) {
	config.LearnerFlags(fs, c)
	for name, arg := range map[string]string{"algorithm": "rule", "bias": "rule", "schedule": "schedule", "hash-bits": "N", "classes": "names", "kernel": "kernel"} {
		if f := fs.Lookup(name); f != nil {
			f.Usage = strings.Replace(f.Usage, arg, "`"+arg+"`", 1)
		}
	}
}

// validateLearner checks c and names the flag of a wrong field.
func validateLearner(c learner.Config) error {
	err := c.ValidateNew()
	var fe *learner.FieldError
	if errors.As(err, &fe) {
		return usagef("-%s: %s", strings.ReplaceAll(fe.Field, "_", "-"), fe.Problem)
	}
	return err
}

// commandConfig parses the args of a command that takes flags of its own
// (those of fs) beside the configuration's keys, which it loads as run
// does. A -h prints the usage and returns errHelp.
func commandConfig(e *env, fs *flag.FlagSet, args []string) (config.Config, error) {
	own, cfgArgs := splitOwnFlags(fs, args)
	if err := parseFlags(fs, own); err != nil {
		return config.Config{}, err
	}
	cfg, err := loadCommandConfig(e, fs, cfgArgs)
	if errors.Is(err, flag.ErrHelp) {
		fs.Usage()
		return config.Config{}, errHelp
	}
	if err != nil {
		return config.Config{}, &usageError{msg: err.Error()}
	}
	return cfg, nil
}
