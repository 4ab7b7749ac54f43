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
// instead of being printed.
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

// parseFlags parses args; -h prints the usage and gives errHelp.
func parseFlags(fs *flag.FlagSet, args []string) error {
	err := fs.Parse(args)
	if errors.Is(err, flag.ErrHelp) {
		fs.Usage()
		return errHelp
	}
	if err != nil {
		return &usageError{msg: err.Error()}
	}
	return nil
}

// errHelp ends a command that printed its usage on request.
var errHelp = errors.New("help requested")

// learnerFlags binds the model's hyperparameters to flags on fs.
func learnerFlags(fs *flag.FlagSet, c *learner.Config) {
	fs.Func("algorithm", "learning `rule`: perceptron, averaged, margin, pa, pa1, pa2, pegasos, arow or kernel (default perceptron)", func(s string) error {
		c.Algorithm = learner.Algorithm(s)
		return nil
	})
	fs.Func("bias", "bias `rule`: standard (b += η·y), r2 (b += η·y·R²) or none (default standard)", func(s string) error {
		c.Bias = learner.BiasRule(s)
		return nil
	})
	fs.Float64Var(&c.Eta, "eta", c.Eta, "learning rate η of the perceptron family and the kernel perceptron")
	fs.Func("schedule", "learning-rate `schedule`: constant, inverse (η/t) or inverse_sqrt (η/√t) (default constant)", func(s string) error {
		c.Schedule = learner.Schedule(s)
		return nil
	})
	fs.IntVar(&c.HashBits, "hash-bits", c.HashBits, "feature hashing into 2^`N` weights per class")
	fs.Uint64Var(&c.HashSeed, "hash-seed", c.HashSeed, "seed of the feature hash")
	fs.Func("classes", "class `names`, comma-separated, or their number N (names 0..N-1); none: binary labels 1/-1, two: binary (negative,positive), three or more: multiclass", func(s string) error {
		classes, err := parseClasses(s)
		c.Classes = classes
		return err
	})
	fs.BoolVar(&c.Normalize, "normalize", c.Normalize, "scale every example to unit L2 norm")
	fs.IntVar(&c.Batch, "batch", c.Batch, "mini-batch size in labeled examples; 1 is on-line learning")
	fs.Float64Var(&c.Tau, "tau", c.Tau, "margin below which the margin perceptron updates")
	fs.Float64Var(&c.C, "c", c.C, "aggressiveness C of pa1 and pa2")
	fs.Float64Var(&c.Lambda, "lambda", c.Lambda, "L2 regularisation λ of pegasos")
	fs.Float64Var(&c.AROWR, "arow-r", c.AROWR, "regularisation r of arow")
	fs.Func("kernel", "`kernel` of the kernel algorithm: linear, poly or rbf (default linear)", func(s string) error {
		c.Kernel = learner.KernelFunc(s)
		return nil
	})
	fs.IntVar(&c.Degree, "degree", c.Degree, "degree of the poly kernel")
	fs.Float64Var(&c.Gamma, "gamma", c.Gamma, "scale γ of the poly and rbf kernels")
	fs.Float64Var(&c.Coef0, "coef0", c.Coef0, "constant term of the poly kernel")
	fs.IntVar(&c.Budget, "budget", c.Budget, "most support vectors the kernel model keeps (the oldest goes first)")
	fs.IntVar(&c.Window, "window", c.Window, "labeled examples behind the rolling accuracy")
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
