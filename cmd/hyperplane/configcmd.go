package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
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
	cfg, err := loadConfig(e, args)
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

// loadConfig is config.Load for the commands that take the configuration
// (config, run, replay, setup): it also warns on stderr about every
// HYPERPLANE_* variable that is not a setting, which Load ignores
// (config.UnknownEnv), unless help was asked for. The variables' names
// come from the process, their values only from e.getenv: a variable
// counts only if getenv gives it a value, so a test that passes its own
// getenv sees no warning about the environment it runs in.
func loadConfig(e *env, args []string) (config.Config, error) {
	cfg, err := config.Load(args, e.getenv)
	if errors.Is(err, flag.ErrHelp) {
		return cfg, err
	}
	for _, w := range config.UnknownEnv(os.Environ(), e.getenv) {
		fmt.Fprintln(e.stderr, "hyperplane: warning:", w)
	}
	return cfg, err
}
