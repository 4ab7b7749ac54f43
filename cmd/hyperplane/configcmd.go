package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"

	"github.com/hyperplane-ml/hyperplane/config"
)

// runConfig prints a configuration as a commented config file: with
// --defaults, every key at its default (the configuration reference);
// otherwise the one that run would use with the same arguments and
// environment, validated, secrets redacted.
func runConfig(_ context.Context, e *env, args []string) error {
	fs := newFlagSet("config", "", e)
	defaults := fs.Bool("defaults", false, "print every key at its default")
	fs.Usage = func() {
		fmt.Fprintln(e.stdout, "Usage: hyperplane config --defaults")
		fmt.Fprintln(e.stdout, "       hyperplane config [--config FILE] [--key value ...]")
		fmt.Fprintln(e.stdout)
		fmt.Fprintln(e.stdout, "Prints every key at its default, or the configuration run would use with the same")
		fmt.Fprintln(e.stdout, "file, HYPERPLANE_* variables and flags, as a commented YAML config file.")
	}
	own, rest := splitOwnFlags(fs, args)
	if err := parseFlags(fs, own); err != nil {
		return ignoreHelp(err)
	}
	if *defaults {
		if len(rest) > 0 {
			return usagef("config: --defaults takes no other arguments")
		}
		return config.WriteYAML(e.stdout, config.Default())
	}
	cfg, err := loadCommandConfig(e, fs, rest)
	if errors.Is(err, flag.ErrHelp) {
		fs.Usage()
		return nil
	}
	if err != nil {
		return &usageError{msg: err.Error()}
	}
	if err := cfg.Validate(); err != nil {
		return invalidConfig(e, args, err)
	}
	return config.WriteYAML(e.stdout, cfg)
}

// invalidConfig is the usage error of err, the configuration's that a
// command's args and environment make. When neither --config nor
// HYPERPLANE_CONFIG names a file, the likely mistake is the missing file,
// not the key: the error says how to give one.
func invalidConfig(e *env, args []string, err error) error {
	msg := "config: " + err.Error()
	if !configFileGiven(e, args) {
		msg += " (no config file given: pass --config FILE or set HYPERPLANE_CONFIG; hyperplane config --defaults prints one to fill in)"
	}
	return &usageError{msg: msg}
}

// configFileGiven says whether args or the environment name a config
// file, as config.Load reads them.
func configFileGiven(e *env, args []string) bool {
	if e.getenv("HYPERPLANE_CONFIG") != "" {
		return true
	}
	for _, a := range args {
		if a == "--" {
			break
		}
		name, _, _ := strings.Cut(strings.TrimPrefix(strings.TrimPrefix(a, "-"), "-"), "=")
		if strings.HasPrefix(a, "-") && name == "config" {
			return true
		}
	}
	return false
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
