// Command hyperplane learns on-line perceptrons from streams of labeled
// examples. Run "hyperplane help" for its commands.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Getenv, os.Stdin, os.Stdout, os.Stderr)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "hyperplane:", err)
		var u *usageError
		if errors.As(err, &u) {
			os.Exit(2)
		}
		os.Exit(1)
	}
}

// env is what a command gets from the process: tests pass their own.
type env struct {
	getenv func(string) string
	stdin  io.Reader
	stdout io.Writer
	stderr io.Writer
	// flagSet, if set, is given every flag set newFlagSet makes: the
	// completion scripts read the commands' flags from them.
	flagSet func(*flag.FlagSet)
}

type command struct {
	name    string
	summary string
	run     func(ctx context.Context, e *env, args []string) error
}

func commands() []command {
	return []command{
		{"demo", "stream generated examples through the worker on an embedded NATS server", runDemo},
		{"setup", "create the topics and streams a config names that are missing", runSetup},
		{"run", "run the worker: consume examples, publish predictions, learn", runRun},
		{"replay", "rebuild a model from a range of the source, apart from the live model", runReplay},
		{"train", "learn a model from a file of examples", runTrain},
		{"backtest", "compare the model with its challengers over a file of examples", runBacktest},
		{"compare", "compare the live model with its challengers, as its store records them", runCompare},
		{"promote", "make a challenger of the live model the model, from its next generation on", runPromote},
		{"predict", "predict a file of examples with a saved model", runPredict},
		{"inspect", "print a model file as readable JSON", runInspect},
		{"gen", "generate a reproducible example stream", runGen},
		{"config", "print the configuration reference (--defaults) or the effective configuration", runConfig},
		{"version", "print the version (also hyperplane --version)", runVersion},
		{"completion", "print a shell completion script: bash, zsh or fish", runCompletion},
	}
}

// run is the whole program: main only adds the process around it.
func run(ctx context.Context, args []string, getenv func(string) string, stdin io.Reader, stdout, stderr io.Writer) error {
	e := &env{getenv: getenv, stdin: stdin, stdout: stdout, stderr: stderr}
	if len(args) == 0 {
		printUsage(stderr)
		return usagef("no command given")
	}
	name := args[0]
	switch name {
	case "help", "-h", "-help", "--help":
		if name == "help" && len(args) > 1 {
			// help CMD is CMD -h.
			for _, c := range commands() {
				if c.name == args[1] {
					return c.run(ctx, e, []string{"-h"})
				}
			}
			return usagef("help: unknown command %q (run hyperplane help)", args[1])
		}
		printUsage(stdout)
		return nil
	case "--version", "-version", "-v":
		return runVersion(ctx, e, args[1:])
	}
	for _, c := range commands() {
		if c.name == name {
			err := c.run(ctx, e, args[1:])
			// run and demo stop on the interrupt, cleanly (nil): an error
			// they return then says what their shutdown could not do (a
			// snapshot not written, outputs not published), and is kept.
			worker := name == "run" || name == "demo"
			if err != nil && !worker && ctx.Err() != nil && errors.Is(err, context.Canceled) {
				// Stopped by the interrupt before the end of its work: say
				// so, rather than the "context canceled" of that work.
				return fmt.Errorf("%s: interrupted (SIGINT or SIGTERM) before its end", name)
			}
			return err
		}
	}
	return usagef("unknown command %q (run hyperplane help)", name)
}

func printUsage(w io.Writer) {
	fmt.Fprintln(w, "Usage: hyperplane <command> [flags]")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Commands:")
	for _, c := range commands() {
		fmt.Fprintf(w, "  %-10s %s\n", c.name, c.summary)
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, `Run "hyperplane <command> -h" (or "hyperplane help <command>") for a command's flags.`)
}

// usageError is a mistake in the command line: the process exits 2.
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

func usagef(format string, args ...any) error {
	return &usageError{msg: fmt.Sprintf(format, args...)}
}
