package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"slices"

	"github.com/hyperplane-ml/hyperplane/config"
)

// runConfig prints a configuration as a commented config file: with
// --defaults, every key at its default (the configuration reference);
// otherwise the one that run would use with the same arguments and
// environment, validated, secrets redacted.
func runConfig(_ context.Context, e *env, args []string) error {
	if i := slices.Index(args, "--defaults"); i >= 0 {
		if len(args) > 1 {
			return usagef("config: --defaults takes no other arguments")
		}
		return config.WriteYAML(e.stdout, config.Default())
	}
	cfg, err := config.Load(args, e.getenv)
	if errors.Is(err, flag.ErrHelp) {
		fmt.Fprintln(e.stdout, "Usage: hyperplane config --defaults")
		fmt.Fprintln(e.stdout, "       hyperplane config [--config FILE] [--key value ...]")
		fmt.Fprintln(e.stdout)
		fmt.Fprintln(e.stdout, "Prints every key at its default, or the configuration run would use with the same")
		fmt.Fprintln(e.stdout, "file, HYPERPLANE_* variables and flags, as a commented YAML config file.")
		return nil
	}
	if err != nil {
		return &usageError{msg: err.Error()}
	}
	if err := cfg.Validate(); err != nil {
		return &usageError{msg: "config: " + err.Error()}
	}
	return config.WriteYAML(e.stdout, cfg)
}
