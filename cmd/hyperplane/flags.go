package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/hyperplane-ml/hyperplane/learner"
)

// newFlagSet returns a flag set whose errors come back to the caller
// instead of being printed. Its Usage prints the usage to standard output;
// parseFlags calls it once for -h, and nothing else calls it.
func newFlagSet(name, usage string, e *env) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {
		fmt.Fprintf(e.stdout, "Usage: hyperplane %s %s\n\nFlags:\n", name, usage)
		fs.SetOutput(e.stdout)
		fs.PrintDefaults()
		fs.SetOutput(io.Discard)
	}
	return fs
}

// parseFlags parses args; -h prints the usage once and gives errHelp. A
// mistake gives a usageError and prints nothing: main prints the error.
func parseFlags(fs *flag.FlagSet, args []string) error {
	// The flag package calls Usage itself on -h and on every mistake;
	// silence it while parsing, so that the usage is printed once, here,
	// and only when asked for.
	usage := fs.Usage
	fs.Usage = func() {}
	err := fs.Parse(args)
	fs.Usage = usage
	if errors.Is(err, flag.ErrHelp) {
		usage()
		return errHelp
	}
	if err != nil {
		return &usageError{msg: err.Error()}
	}
	return nil
}

// errHelp ends a command that printed its usage on request.
var errHelp = errors.New("help requested")

// learnerFlags binds the model's hyperparameters to flags on fs. The
// defaults that -h shows are c's values when it is called: a command that
// changes a default (the demo's averaged perceptron) changes c first.
func learnerFlags(fs *flag.FlagSet, c *learner.Config) {
	fs.Var(stringFlag[learner.Algorithm]{&c.Algorithm}, "algorithm", "learning `rule`: perceptron, averaged, margin, pa, pa1, pa2, pegasos, arow or kernel")
	fs.Var(stringFlag[learner.BiasRule]{&c.Bias}, "bias", "bias `rule`: standard (b += η·y), r2 (b += η·y·R²) or none")
	fs.Float64Var(&c.Eta, "eta", c.Eta, "learning rate η of the perceptron family and the kernel perceptron")
	fs.Var(stringFlag[learner.Schedule]{&c.Schedule}, "schedule", "learning-rate `schedule`: constant, inverse (η/t) or inverse_sqrt (η/√t)")
	fs.IntVar(&c.HashBits, "hash-bits", c.HashBits, "feature hashing into 2^`N` weights per class")
	fs.Uint64Var(&c.HashSeed, "hash-seed", c.HashSeed, "seed of the feature hash")
	fs.Var(classesFlag{&c.Classes}, "classes", "class `names`, comma-separated, or their number N (names 0..N-1); none: binary labels 1/-1, two: binary (negative,positive), three or more: multiclass")
	fs.BoolVar(&c.Normalize, "normalize", c.Normalize, "scale every example to unit L2 norm")
	fs.IntVar(&c.Batch, "batch", c.Batch, "mini-batch size in labeled examples; 1 is on-line learning")
	fs.Float64Var(&c.Tau, "tau", c.Tau, "margin below which the margin perceptron updates")
	fs.Float64Var(&c.C, "c", c.C, "aggressiveness C of pa1 and pa2")
	fs.Float64Var(&c.Lambda, "lambda", c.Lambda, "L2 regularisation λ of pegasos")
	fs.Float64Var(&c.AROWR, "arow-r", c.AROWR, "regularisation r of arow")
	fs.Var(stringFlag[learner.KernelFunc]{&c.Kernel}, "kernel", "`kernel` of the kernel algorithm: linear, poly or rbf")
	fs.IntVar(&c.Degree, "degree", c.Degree, "degree of the poly kernel")
	fs.Float64Var(&c.Gamma, "gamma", c.Gamma, "scale γ of the poly and rbf kernels")
	fs.Float64Var(&c.Coef0, "coef0", c.Coef0, "constant term of the poly kernel")
	fs.IntVar(&c.Budget, "budget", c.Budget, "most support vectors the kernel model keeps (the oldest goes first)")
	fs.IntVar(&c.Window, "window", c.Window, "labeled examples behind the rolling accuracy")
}

// stringFlag is a flag over a string-valued setting such as
// learner.Algorithm. Its String is the setting's value, which -h shows as
// the default; the value is checked later, with the rest of the config.
type stringFlag[T ~string] struct{ p *T }

func (f stringFlag[T]) String() string {
	if f.p == nil { // the zero value the flag package makes to find defaults
		return ""
	}
	return string(*f.p)
}

func (f stringFlag[T]) Set(s string) error {
	*f.p = T(s)
	return nil
}

// classesFlag is -classes: names, or their number (see parseClasses).
type classesFlag struct{ p *[]string }

func (f classesFlag) String() string {
	if f.p == nil {
		return ""
	}
	return strings.Join(*f.p, ",")
}

func (f classesFlag) Set(s string) error {
	classes, err := parseClasses(s)
	*f.p = classes
	return err
}

func parseClasses(s string) ([]string, error) {
	if s == "" {
		return nil, nil
	}
	if n, err := strconv.Atoi(s); err == nil {
		if n < 0 || n > 1<<16 {
			return nil, fmt.Errorf("%d classes is out of range", n)
		}
		classes := make([]string, n)
		for i := range classes {
			classes[i] = strconv.Itoa(i)
		}
		return classes, nil
	}
	return strings.Split(s, ","), nil
}

// validateLearner checks c and names the flag of a wrong field.
func validateLearner(c learner.Config) error {
	err := c.Validate()
	var fe *learner.FieldError
	if errors.As(err, &fe) {
		return usagef("-%s: %s", strings.ReplaceAll(fe.Field, "_", "-"), fe.Problem)
	}
	return err
}
