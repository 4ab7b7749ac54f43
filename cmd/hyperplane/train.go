package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"time"

	"github.com/hyperplane-ml/hyperplane/config"
	"github.com/hyperplane-ml/hyperplane/internal/train"
	"github.com/hyperplane-ml/hyperplane/learner"
	"github.com/hyperplane-ml/hyperplane/learner/curve"
	"github.com/hyperplane-ml/hyperplane/snapshot"
	"github.com/hyperplane-ml/hyperplane/wire"
)

// inputFlags are the flags of commands that read examples.
type inputFlags struct {
	input       string
	format      wire.Format
	workers     int
	maxFeatures int
	maxBytes    int
}

func (f *inputFlags) bind(fs *flag.FlagSet) {
	fs.StringVar(&f.input, "input", "", "file of examples, JSON lines or msgpack maps; - for stdin (required)")
	fs.TextVar(&f.format, "format", wire.FormatAuto, "input `format`: jsonl, msgpack or auto (by the first byte)")
	fs.IntVar(&f.workers, "workers", 0, "decoding goroutines; 0 uses every core")
	fs.IntVar(&f.maxFeatures, "max-features", wire.DefaultMaxFeatures, "most features an example may have")
	fs.IntVar(&f.maxBytes, "max-bytes", wire.DefaultMaxBytes, "largest example in bytes")
}

func (f *inputFlags) check() (wire.ReadOptions, error) {
	if f.input == "" {
		return wire.ReadOptions{}, usagef("-input: required (a file, or - for stdin)")
	}
	switch {
	case f.workers < 0:
		return wire.ReadOptions{}, usagef("-workers: must be 0 or more, got %d", f.workers)
	case f.maxFeatures < 1:
		return wire.ReadOptions{}, usagef("-max-features: must be at least 1, got %d", f.maxFeatures)
	case f.maxBytes < 1:
		return wire.ReadOptions{}, usagef("-max-bytes: must be at least 1, got %d", f.maxBytes)
	}
	return wire.ReadOptions{Format: f.format, Workers: f.workers}, nil
}

func (f *inputFlags) decoders(cfg learner.Config) func() *wire.Decoder {
	opts := wire.DecoderOptions{MaxFeatures: f.maxFeatures, MaxBytes: f.maxBytes}
	return func() *wire.Decoder { return wire.NewDecoder(cfg, opts) }
}

// open opens the input; the size is 0 when unknown.
func (f *inputFlags) open(e *env) (io.ReadCloser, int64, error) {
	if f.input == "-" {
		return io.NopCloser(e.stdin), 0, nil
	}
	file, err := os.Open(f.input)
	if err != nil {
		return nil, 0, err
	}
	var size int64
	if st, err := file.Stat(); err == nil && st.Mode().IsRegular() {
		size = st.Size()
	}
	return file, size, nil
}

// invalidReporter prints the first few bad records and counts them all.
type invalidReporter struct {
	w     io.Writer
	input string
	count int
}

func (r *invalidReporter) report(rec *wire.Record) {
	r.count++
	if r.count <= 10 {
		fmt.Fprintf(r.w, "hyperplane: %s: record %d: %v (skipped)\n", r.input, rec.N, rec.Err)
	}
}

func (r *invalidReporter) summary() {
	if r.count > 10 {
		fmt.Fprintf(r.w, "hyperplane: %s: %d invalid records skipped in all\n", r.input, r.count)
	}
}

func runTrain(ctx context.Context, e *env, args []string) error {
	cfg := learner.DefaultConfig()
	var in inputFlags
	var passes, curveWindow int
	var out, name, curvePath, predictionsPath string
	fs := newFlagSet("train", "-input PATH [flags]", e)
	in.bind(fs)
	learnerFlags(fs, &cfg)
	fs.IntVar(&passes, "passes", 1, "passes over the input (more than one needs a file)")
	fs.StringVar(&out, "out", "", "write the model to this `file`")
	fs.StringVar(&name, "name", config.Default().Model.Name, "the model's name, recorded in the model file")
	fs.StringVar(&curvePath, "curve", "", "write the learning curve of the first pass to this `file`: the prequential accuracy over each window of labeled examples and over the stream so far, as CSV, or as an SVG chart when the file ends in .svg")
	fs.IntVar(&curveWindow, "curve-window", 10000, "labeled examples in a window of -curve")
	fs.StringVar(&predictionsPath, "predictions", "", "write each example's prediction of the first pass, made before learning it, to this `file` as JSON lines: id (the example's, or its record number), label, predicted, score, probability and, multiclass, probabilities")
	fs.Float64Var(&cfg.Drift.Threshold, "drift-threshold", cfg.Drift.Threshold, "evidence of a rise of the error rate that reports a change of concept, after which the model starts afresh (Page-Hinkley's lambda, model.drift.threshold); 0: no detection")
	fs.Float64Var(&cfg.Drift.Delta, "drift-delta", cfg.Drift.Delta, "rise of the error rate the change detector ignores (model.drift.delta)")
	if err := parseFlags(fs, args); err != nil {
		return ignoreHelp(err)
	}
	if err := noArgs(fs); err != nil {
		return err
	}
	if curveWindow < 1 {
		return usagef("-curve-window: must be at least 1, got %d", curveWindow)
	}
	if !(cfg.Drift.Threshold >= 0) || !(cfg.Drift.Delta >= 0 && cfg.Drift.Delta < 1) {
		return usagef("-drift-threshold and -drift-delta: must be 0 or more (delta below 1), got %v and %v", cfg.Drift.Threshold, cfg.Drift.Delta)
	}
	if cfg.Drift.Threshold == 0 {
		// No detection: the model's detector is off, its settings the
		// defaults.
		cfg.Drift = learner.DefaultDrift()
		cfg.Drift.Enabled = false
	}
	ropts, err := in.check()
	if err != nil {
		return err
	}
	if passes < 1 {
		return usagef("-passes: must be at least 1, got %d", passes)
	}
	if passes > 1 && in.input == "-" {
		return usagef("-passes: %d passes need a file to read again, not stdin", passes)
	}
	// -out and -curve are written when the learning ends: a directory
	// that is not there is said now, not after the whole input.
	for _, f := range []struct{ flag, path string }{{"-out", out}, {"-curve", curvePath}} {
		if err := checkOutputDir(f.flag, f.path); err != nil {
			return err
		}
	}
	if err := validateLearner(cfg); err != nil {
		return err
	}
	model, err := learner.New(cfg)
	if err != nil {
		return err
	}

	invalid := &invalidReporter{w: e.stderr, input: in.input}
	o := train.Options{Input: in.input, Decoders: in.decoders(cfg), Read: ropts, Passes: passes}
	if curvePath != "" {
		o.CurveWindow = uint64(curveWindow) // no points without -curve
	}
	var bar *progress
	o.Open = func() (io.ReadCloser, error) {
		f, size, err := in.open(e)
		if err != nil {
			return nil, err
		}
		var read atomic.Int64
		bar = newProgress(e.stderr, size, &read)
		return barReader{countingReader{f, &read}, f, bar}, nil
	}
	o.Invalid = func(rec *wire.Record) {
		bar.end()
		invalid.report(rec)
	}
	var pass int
	status := func() string {
		m := model.Metrics()
		return fmt.Sprintf("pass %d/%d  mistakes %d  rolling accuracy %.4f", pass, passes, m.Mistakes, m.RollingAccuracy)
	}
	o.Learned = func(p int, n uint64) {
		pass = p
		bar.update(n, status)
	}
	if predictionsPath != "" {
		predictions, err := createBacktest(predictionsPath, cfg.Labels())
		if err != nil {
			return err
		}
		defer predictions.close()
		o.Predicted, o.FirstPassDone = predictions.write, predictions.close
	}
	res, lc, err := train.Run(ctx, model, o)
	if err != nil {
		return err
	}
	if curvePath != "" {
		if err := writeCurve(curvePath, lc); err != nil {
			return err
		}
	}
	invalid.summary()

	learned := res.Labeled > 0
	if out != "" && learned {
		s := &snapshot.Snapshot{Model: name, Generation: 1, Created: time.Now(), Writer: "hyperplane train", State: model.State()}
		if err := snapshot.WriteFile(out, s); err != nil {
			return err
		}
	}
	if err := json.NewEncoder(e.stdout).Encode(res); err != nil {
		return err
	}
	if !learned {
		return nothingLearned(in.input, out, res)
	}
	return nil
}

// checkOutputDir is a usage error naming flag when path, a file a command
// writes at its end, is in a directory that does not exist.
func checkOutputDir(flag, path string) error {
	if path == "" {
		return nil
	}
	dir := filepath.Dir(path)
	if fi, err := os.Stat(dir); err != nil {
		return usagef("%s %s: directory %s: %v", flag, path, dir, errors.Unwrap(err))
	} else if !fi.IsDir() {
		return usagef("%s %s: %s is not a directory", flag, path, dir)
	}
	return nil
}

// nothingLearned is the error of a train whose input held no labeled
// example: the model is as it began, so no model file is written and the
// command fails rather than pass an untrained model off as trained.
func nothingLearned(input, out string, res train.Result) error {
	var why string
	switch {
	case res.Examples == 0 && res.Invalid == 0:
		why = "it holds no example"
	case res.Examples == 0 && res.Invalid == 1:
		why = "its one record is not a valid example (see the error above)"
	case res.Examples == 0:
		why = fmt.Sprintf("none of its %d records is a valid example (see the errors above)", res.Invalid)
	case res.Examples == 1:
		why = "its one example has no label"
	default:
		why = fmt.Sprintf("none of its %d valid examples has a label", res.Examples)
	}
	if input == "-" {
		input = "standard input"
	}
	msg := fmt.Sprintf("train: nothing learned from %s: %s", input, why)
	if out != "" {
		msg += "; no model written to " + out
	}
	return errors.New(msg)
}

// writeCurve writes -curve: an SVG chart when path ends in .svg, CSV
// otherwise.
func writeCurve(path string, lc *learner.Curve) error {
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("-curve: %w", err)
	}
	if strings.HasSuffix(strings.ToLower(path), ".svg") {
		err = curve.WriteSVG(f, lc)
	} else {
		err = curve.WriteCSV(f, lc)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("-curve: %s: %w", path, err)
	}
	return nil
}

// barReader is a pass's input, read through a progress bar: closing it
// clears the bar.
type barReader struct {
	countingReader
	f   io.Closer
	bar *progress
}

func (r barReader) Close() error {
	r.bar.done()
	return r.f.Close()
}

func ignoreHelp(err error) error {
	if err == errHelp {
		return nil
	}
	return err
}
