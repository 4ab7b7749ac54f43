package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"

	"go.uber.org/zap"

	"github.com/hyperplane-ml/hyperplane/backtest"
	"github.com/hyperplane-ml/hyperplane/config"
	"github.com/hyperplane-ml/hyperplane/consumer"
	"github.com/hyperplane-ml/hyperplane/epochlog"
	"github.com/hyperplane-ml/hyperplane/learner"
	"github.com/hyperplane-ml/hyperplane/learner/compare"
	"github.com/hyperplane-ml/hyperplane/snapshot"
	"github.com/hyperplane-ml/hyperplane/wire"
)

func runPredict(ctx context.Context, e *env, args []string) error {
	var in inputFlags
	var modelPath string
	fs := newFlagSet("predict", "-model MODEL_FILE -input PATH [flags]", e)
	fs.StringVar(&modelPath, "model", "", "model `file` written by train, a model's snapshot directory (hyperplane-data/demo), or a snapshot URL such as file:///dir/MODEL (required)")
	in.bind(fs)
	if err := parseFlags(fs, args); err != nil {
		return ignoreHelp(err)
	}
	if err := noArgs(fs); err != nil {
		return err
	}
	if modelPath == "" {
		return usagef("-model: required (a model file written by train, a snapshot directory or URL)")
	}
	ropts, err := in.check()
	if err != nil {
		return err
	}
	// Each example is answered as it comes from a pipe, not once a chunk
	// of input has filled.
	ropts.Live = true
	s, err := snapshot.LoadLogged(ctx, modelPath, loadLogger(e))
	if err != nil {
		return err
	}
	model, err := learner.Restore(s.State)
	if err != nil {
		return fmt.Errorf("%s: %w", modelPath, err)
	}
	cfg := model.Config()
	labels := cfg.Labels()
	source := "file:" + in.input
	version := model.Version()

	f, _, err := in.open(e)
	if err != nil {
		return err
	}
	defer f.Close()
	w := bufio.NewWriterSize(e.stdout, 1<<16)
	invalid := &invalidReporter{w: e.stderr, input: in.input}
	var line []byte
	// The predictions of each run of records are flushed as it ends.
	err = wire.ReadRecords(ctx, f, in.decoders(cfg), ropts, func(recs []wire.Record) error {
		for i := range recs {
			rec := &recs[i]
			if rec.Err != nil {
				invalid.report(rec)
				continue
			}
			x := rec.Example
			p := model.Predict(x)
			ev := wire.Prediction{
				Position: wire.Position{Source: source, Offset: int64(rec.N)},
				Meta:     rec.Meta,
				Outcome:  learner.Outcome{Prediction: p, Labeled: x.Labeled, Correct: x.Labeled && p.Label == x.Label},
				Label:    x.Label,
				Model:    s.Model,
				Version:  version,
			}
			line = ev.AppendJSON(line[:0], labels)
			line = append(line, '\n')
			if _, err := w.Write(line); err != nil {
				return err
			}
		}
		return w.Flush()
	})
	invalid.summary()
	// Every line is written whole to w: flushed, even on an interrupt,
	// the output ends with a whole line.
	ferr := w.Flush()
	if err != nil {
		return fmt.Errorf("%s: %w", in.input, err)
	}
	return ferr
}

func runInspect(ctx context.Context, e *env, args []string) error {
	var top int
	fs := newFlagSet("inspect", "[flags] MODEL_FILE|SNAPSHOT_DIR|SNAPSHOT_URL", e)
	fs.IntVar(&top, "top", 20, "how many of the largest weights to list")
	if err := parseFlags(fs, args); err != nil {
		return ignoreHelp(err)
	}
	if fs.NArg() > 1 && strings.HasPrefix(fs.Arg(1), "-") {
		return usagef("inspect: %s after the model is not read as a flag: flags go before it (hyperplane inspect %s %s)",
			fs.Arg(1), strings.Join(fs.Args()[1:], " "), fs.Arg(0))
	}
	if fs.NArg() != 1 {
		return usagef("inspect: want one model file, snapshot directory or snapshot URL, got %d arguments", fs.NArg())
	}
	if top < 0 {
		return usagef("-top: must be 0 or more, got %d", top)
	}
	s, err := snapshot.LoadLogged(ctx, fs.Arg(0), loadLogger(e))
	if err != nil {
		return logObject(fs.Arg(0), err)
	}
	out := struct {
		snapshot.Summary
		Join *consumer.JoinSummary `json:"join,omitempty"`
		// Comparisons are the challengers' at model.compare.alpha's
		// default (hyperplane compare takes the configured one).
		Comparisons []backtest.Line `json:"comparisons,omitempty"`
	}{Summary: snapshot.Summarize(s, top)}
	if len(s.State.Challengers) > 0 {
		standings, err := compare.Standings(s.Model, s.State, 0.05)
		if err != nil {
			return err
		}
		out.Comparisons = backtest.Lines(standings)
	}
	if s.Join != nil {
		st, err := consumer.DecodeJoinState(s.Join)
		if err != nil {
			return err
		}
		out.Join = st.Summary()
	}
	if s.Joins != nil {
		// A model learned in epochs: its shards' joins, summed.
		joins, err := consumer.DecodeJoins(s.Joins)
		if err != nil {
			return err
		}
		out.Join = consumer.SummarizeJoins(joins)
	}
	enc := json.NewEncoder(e.stdout)
	enc.SetIndent("", "  ")
	return enc.Encode(out)
}

// loadLogger is the logger inspect and predict load a model with: its
// warnings, such as a damaged newest generation skipped for the one
// before, go to standard error.
func loadLogger(e *env) *zap.Logger {
	return newLogger(config.Log{Level: config.LevelWarn, Format: config.LogAuto}, e.stderr)
}

// logObject is err, which loading path as a generation gave, or, when
// path is a file that holds an object of an epoch log, an error that says
// so: inspect reads generations, and a boundary or a shard's result read
// as one would look damaged.
func logObject(path string, err error) error {
	data, rerr := os.ReadFile(path)
	if rerr != nil {
		return err
	}
	switch epochlog.Kind(data) {
	case "boundary":
		return fmt.Errorf("%s is a boundary of an epoch log, not a generation: inspect reads a model's generations (a <generation>.msgpack in the model's directory, or the directory itself; docs/scale-out.md, section 2)", path)
	case "shard":
		return fmt.Errorf("%s is a shard's result in an epoch log, not a generation: inspect reads a model's generations (a <generation>.msgpack in the model's directory, or the directory itself; docs/scale-out.md, section 2)", path)
	}
	return err
}
