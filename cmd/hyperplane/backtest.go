package main

import (
	"context"
	"errors"
	"fmt"

	"github.com/hyperplane-ml/hyperplane/backtest"
	"github.com/hyperplane-ml/hyperplane/config"
	"github.com/hyperplane-ml/hyperplane/learner/compare"
	"github.com/hyperplane-ml/hyperplane/wire"
)

// runBacktest learns the model of --config and its model.challengers
// over the examples of --input, or of the source's log from --from to
// --to, in one pass and prints how each challenger compares with the
// model.
func runBacktest(ctx context.Context, e *env, args []string) error {
	var in inputFlags
	var jsonOut bool
	var curvePath string
	from, to := wire.Start{Kind: wire.StartEarliest}, wire.Start{Kind: wire.StartLatest}
	fs := newFlagSet("backtest", "--config FILE (--input PATH | [--from START] [--to END]) [--json] [--curve FILE.svg] [--key value ...]", e)
	in.bind(fs)
	fs.Lookup("input").Usage = "file of examples, JSON lines or msgpack maps; - for stdin (default: the source's log)"
	fs.Lookup("max-features").Usage = "most features an example of -input may have; when not given, source.max_features"
	fs.Lookup("max-bytes").Usage = "largest example of -input in bytes; when not given, source.max_bytes"
	fs.TextVar(&from, "from", from, "without -input, where in the source's log to begin, `START`: earliest, offset:N or time:RFC3339")
	fs.TextVar(&to, "to", to, "without -input, where to end, `END`: latest or offset:N, exclusive")
	fs.BoolVar(&jsonOut, "json", false, "print one JSON line per challenger instead of the table")
	fs.StringVar(&curvePath, "curve", "", "write the running differences and their confidence sequences to this SVG `file`")
	cfg, err := commandConfig(e, fs, args)
	if err != nil {
		return ignoreHelp(err)
	}
	if err := cfg.ValidateModel(); err != nil {
		return invalidConfig(e, args, err)
	}
	if len(cfg.Model.Challengers) == 0 {
		return invalidConfig(e, args, errors.New("model.challengers: none to compare with the model (add a name and the model.learner keys it changes)"))
	}
	// The curve is written once every example is learned: a directory
	// that is not there is said now, not after the whole input or log.
	if err := checkOutputDir("-curve", curvePath); err != nil {
		return err
	}
	// A file is read with the source's limits, as the worker reads the
	// same records, unless the command's own flags say otherwise.
	for _, l := range []struct {
		flag, key string
		from      int
		to        *int
	}{
		{"max-features", "source.max_features", cfg.Source.MaxFeatures, &in.maxFeatures},
		{"max-bytes", "source.max_bytes", cfg.Source.MaxBytes, &in.maxBytes},
	} {
		if flagGiven(fs, l.flag) {
			continue
		}
		if l.from < 1 {
			return invalidConfig(e, args, &config.FieldError{Field: l.key, Problem: fmt.Sprintf("must be at least 1, got %d", l.from)})
		}
		*l.to = l.from
	}
	opts := backtest.Options{Model: compare.Entrant{Name: cfg.Model.Name, Config: cfg.Model.Learner}, Alpha: cfg.Model.Compare.Alpha}
	opts.Decoder.MaxFeatures, opts.Decoder.MaxBytes = in.maxFeatures, in.maxBytes
	for _, c := range cfg.Model.Challengers {
		opts.Challengers = append(opts.Challengers, compare.Entrant{Name: c.Name, Config: c.Learner(cfg.Model.Learner)})
	}
	invalid := &invalidReporter{w: e.stderr, input: in.input}
	opts.Invalid = invalid.report
	var contest *compare.Contest
	if in.input == "" {
		invalid.input = "the log"
		contest, err = backtestLog(ctx, e, cfg, from, to, opts)
	} else {
		contest, err = backtestFile(ctx, e, &in, from, to, opts)
	}
	if err != nil {
		return err
	}
	invalid.summary()
	if contest.Standings()[0].Examples == 0 {
		return nothingCompared(invalid)
	}
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

// nothingCompared is the error of a backtest whose input held no labeled
// example: every configuration is as it began, and a table of verdicts
// over nothing would pass for a comparison.
func nothingCompared(invalid *invalidReporter) error {
	input := invalid.input
	if input == "-" {
		input = "standard input"
	}
	msg := fmt.Sprintf("backtest: nothing compared: %s holds no labeled example", input)
	switch invalid.count {
	case 0:
	case 1:
		msg += " (1 record is not a valid example, see the error above)"
	default:
		msg += fmt.Sprintf(" (%d records are not valid examples, see the errors above)", invalid.count)
	}
	return errors.New(msg)
}
