// Package train learns a model from a file of examples, for hyperplane
// train: in passes over the file, the first of them prequential (each
// example predicted before it is learned, the learning curve and the
// probabilities measured on those predictions), and sums the passes up in
// the Result train prints.
package train

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/hyperplane-ml/hyperplane/learner"
	"github.com/hyperplane-ml/hyperplane/wire"
)

// Result is what a training learned, as train prints it on one JSON
// line. Examples, Invalid, Labeled, Mistakes and Accuracy are of the first
// pass, prequential; Updates and ExamplesPerSecond count every pass.
// Examples are the valid ones, learned; Invalid are the records that
// could not be decoded, skipped.
type Result struct {
	Examples          uint64  `json:"examples"`
	Invalid           uint64  `json:"invalid"`
	Labeled           uint64  `json:"labeled"`
	Mistakes          uint64  `json:"mistakes"`
	Accuracy          float64 `json:"accuracy"`
	Updates           uint64  `json:"updates"`
	Seconds           float64 `json:"seconds"`
	ExamplesPerSecond float64 `json:"examples_per_second"`
	// Drifts are the examples (counted from 0) of the first pass at which
	// the detector found a change of concept.
	Drifts []uint64 `json:"drifts"`
	// The first pass's prequential probabilities: the learner's log-loss,
	// Brier score and expected calibration error (see learner.Metrics),
	// and, for a binary model only, the exact ROC AUC over the stream,
	// from the probabilities of the first pass kept for it (0 without a
	// positive and a negative example).
	LogLoss          float64  `json:"log_loss"`
	Brier            float64  `json:"brier"`
	CalibrationError float64  `json:"calibration_error"`
	AUC              *float64 `json:"auc,omitempty"`
}

// Options say what Run reads and what it tells as it goes.
type Options struct {
	// Input names the input in errors.
	Input string
	// Open opens the input, once for each pass; Run closes it at the end
	// of the pass.
	Open     func() (io.ReadCloser, error)
	Decoders func() *wire.Decoder
	Read     wire.ReadOptions
	// Passes over the input, at least 1.
	Passes int
	// CurveWindow is the number of labeled examples in a window of the
	// learning curve; 0 draws no points (the curve still measures the
	// first pass).
	CurveWindow uint64
	// Invalid, if not nil, is given each record of the first pass that
	// could not be decoded; the record is skipped.
	Invalid func(*wire.Record)
	// Predicted, if not nil, is given each example of the first pass
	// with its outcome, predicted before the example was learned; an
	// error stops Run. FirstPassDone, if not nil, is called once the first
	// pass has ended; an error stops Run.
	Predicted     func(*wire.Record, *learner.Outcome) error
	FirstPassDone func() error
	// Learned, if not nil, is called after each example learned, with
	// the pass (from 1) and the examples learned in it so far.
	Learned func(pass int, n uint64)
}

// Run learns model from o's input in o.Passes passes, the first
// prequential, and returns the result and the learning curve of the first
// pass. It stops at the first error: the input's, with its name, or one
// of o's funcs'.
func Run(ctx context.Context, model *learner.Model, o Options) (Result, *learner.Curve, error) {
	start := time.Now()
	lc := learner.NewCurve(model, o.CurveWindow)
	var total, invalid uint64
	var first learner.Metrics
	for pass := 1; pass <= o.Passes; pass++ {
		n, err := learnPass(ctx, model, lc, &o, pass, &invalid)
		total += n
		if err != nil {
			return Result{}, lc, err
		}
		if pass == 1 {
			first = model.Metrics()
			lc.End()
			if o.FirstPassDone != nil {
				if err := o.FirstPassDone(); err != nil {
					return Result{}, lc, err
				}
			}
		}
	}
	secs := time.Since(start).Seconds()
	res := Result{
		Examples:          first.Examples,
		Invalid:           invalid,
		Labeled:           first.Labeled,
		Mistakes:          first.Mistakes,
		Accuracy:          first.Accuracy,
		Updates:           model.Metrics().Updates,
		Seconds:           secs,
		ExamplesPerSecond: float64(total) / secs,
		Drifts:            lc.Drifts(),
		LogLoss:           first.LogLoss,
		Brier:             first.Brier,
		CalibrationError:  first.CalibrationError,
	}
	if auc, ok := lc.AUC(); ok {
		res.AUC = &auc
	}
	if res.Drifts == nil {
		res.Drifts = []uint64{}
	}
	return res, lc, nil
}

// learnPass learns the input once: through the curve, which measures it,
// on the first pass, the one that predicts every example before learning
// it; straight into the model on the others.
func learnPass(ctx context.Context, model *learner.Model, lc *learner.Curve, o *Options, pass int, invalid *uint64) (uint64, error) {
	f, err := o.Open()
	if err != nil {
		return 0, err
	}
	defer f.Close()
	var n uint64
	// out is reused from example to example: declared in the callback,
	// its address given to o.Predicted would move it to the heap once an
	// example.
	var out learner.Outcome
	err = wire.ReadExamples(ctx, f, o.Decoders, o.Read, func(rec *wire.Record) error {
		if rec.Err != nil {
			if pass == 1 {
				*invalid++
				if o.Invalid != nil {
					o.Invalid(rec)
				}
			}
			return nil
		}
		if pass > 1 {
			model.Learn(rec.Example)
		} else {
			out = lc.Learn(rec.Example)
			if o.Predicted != nil {
				if err := o.Predicted(rec, &out); err != nil {
					return err
				}
			}
		}
		n++
		if o.Learned != nil {
			o.Learned(pass, n)
		}
		return nil
	})
	if err != nil {
		return n, fmt.Errorf("%s: %w", o.Input, err)
	}
	return n, nil
}
