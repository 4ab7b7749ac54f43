package main

import (
	"context"
	"errors"
	"flag"
	"fmt"

	"github.com/hyperplane-ml/hyperplane/backtest"
	"github.com/hyperplane-ml/hyperplane/learner/compare"
)

// runBacktest learns the model of --config and its model.challengers
// over the examples of --input in one pass and prints how each challenger
// compares with the model.
func runBacktest(ctx context.Context, e *env, args []string) error {
	var in inputFlags
	var jsonOut bool
	var curvePath string
	fs := newFlagSet("backtest", "--config FILE --input PATH [--json] [--curve FILE.svg] [--key value ...]", e)
	in.bind(fs)
	fs.BoolVar(&jsonOut, "json", false, "print one JSON line per challenger instead of the table")
	fs.StringVar(&curvePath, "curve", "", "write the running differences and their confidence sequences to this SVG `file`")
	own, cfgArgs := splitOwnFlags(fs, args)
	if err := parseFlags(fs, own); err != nil {
		return ignoreHelp(err)
	}
	cfg, err := loadConfig(e, cfgArgs)
	if errors.Is(err, flag.ErrHelp) {
		fs.Usage()
		return nil
	}
	if err != nil {
		return &usageError{msg: err.Error()}
	}
	if err := cfg.ValidateModel(); err != nil {
		return &usageError{msg: "config: " + err.Error()}
	}
	if len(cfg.Model.Challengers) == 0 {
		return usagef("config: model.challengers: none to compare with the model (add a name and the model.learner keys it changes)")
	}
	ropts, err := in.check()
	if err != nil {
		return err
	}
	opts := backtest.Options{Model: compare.Entrant{Name: cfg.Model.Name, Config: cfg.Model.Learner}, Alpha: cfg.Model.Compare.Alpha, Read: ropts}
	opts.Decoder.MaxFeatures, opts.Decoder.MaxBytes = in.maxFeatures, in.maxBytes
	for _, c := range cfg.Model.Challengers {
		opts.Challengers = append(opts.Challengers, compare.Entrant{Name: c.Name, Config: c.Learner(cfg.Model.Learner)})
	}
	invalid := &invalidReporter{w: e.stderr, input: in.input}
	opts.Invalid = invalid.report
	f, _, err := in.open(e)
	if err != nil {
		return err
	}
	defer f.Close()
	contest, err := backtest.Run(ctx, f, opts)
	if err != nil {
		return fmt.Errorf("%s: %w", in.input, err)
	}
	invalid.summary()
	if curvePath != "" {
		if err := backtest.WriteCurve(curvePath, contest, opts.Alpha); err != nil {
			return fmt.Errorf("-curve: %w", err)
		}
	}
	if jsonOut {
		return backtest.WriteJSON(e.stdout, contest.Standings())
	}
	return backtest.WriteTable(e.stdout, contest.Standings(), opts.Alpha)
}
