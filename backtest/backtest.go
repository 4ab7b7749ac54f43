// Package backtest runs a model and its challengers over a file of
// examples, or a range of a source's log, in one pass, each predicting every example before learning it,
// and reports how each challenger compares with the model
// (learner/compare), as a table or as JSON lines.
package backtest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"text/tabwriter"

	"github.com/hyperplane-ml/hyperplane/consumer"
	"github.com/hyperplane-ml/hyperplane/learner"
	"github.com/hyperplane-ml/hyperplane/learner/compare"
	"github.com/hyperplane-ml/hyperplane/learner/curve"
	"github.com/hyperplane-ml/hyperplane/wire"
)

// Options are what Run needs besides its input.
type Options struct {
	Model       compare.Entrant
	Challengers []compare.Entrant
	// Alpha is the level of the confidence sequences, in (0, 1).
	Alpha   float64
	Read    wire.ReadOptions
	Decoder wire.DecoderOptions
	// Invalid, if set, is called with every record that one of the
	// entrants' hashings cannot decode; such a record is learned by none,
	// so that every comparison pairs the same examples.
	Invalid func(*wire.Record)
}

// Run reads the examples of r once, in order, and has the model and every
// challenger predict, then learn, each one (compare.Contest), a chunk of
// the reader's at a time (Contest.LearnChunk). An example
// is decoded once, on ReadExamples' workers, into one example per hashing
// among them (ReadOptions.Also): for a challenger that changes hash_bits
// or hash_seed, the names read for the model's are hashed with its
// hashing in the same pass; the others share the model's example.
// Run stops at the end of r, at the first error reading it, or when ctx
// is done, and returns the contest as it stands then, with the error.
func Run(ctx context.Context, r io.Reader, opts Options) (*compare.Contest, error) {
	c, err := compare.NewContest(opts.Model, opts.Challengers, opts.Alpha)
	if err != nil {
		return nil, err
	}
	hashings := c.Hashings()
	read := opts.Read
	read.Also = nil
	for _, h := range hashings[1:] {
		read.Also = append(read.Also, func() *wire.Decoder { return wire.NewDecoder(h, opts.Decoder) })
	}
	newDecoder := func() *wire.Decoder { return wire.NewDecoder(hashings[0], opts.Decoder) }
	var b batch
	err = wire.ReadRecords(ctx, r, newDecoder, read, func(recs []wire.Record) error {
		b.reset()
		for i := range recs {
			rec := &recs[i]
			if rec.Err != nil {
				if opts.Invalid != nil {
					opts.Invalid(rec)
				}
				continue
			}
			b.add(rec.Example, rec.Also)
		}
		c.LearnChunk(b.chunk(len(hashings)))
		return nil
	})
	return c, err
}

// RunSource is Run over the messages of src, a consumer.Range over the
// recorded log of a source, until its Fetch reports
// consumer.ErrRangeDone: each message is decoded once, on the calling
// goroutine, into one example per hashing (wire.Decoder.DecodeHashings),
// and a message that does not decode reaches opts.Invalid as a Record
// numbered by its place in the range (from 1), ReadOptions unused. Messages from several partitions are learned in
// the order Fetch returns them.
func RunSource(ctx context.Context, src consumer.Source, opts Options) (*compare.Contest, error) {
	c, err := compare.NewContest(opts.Model, opts.Challengers, opts.Alpha)
	if err != nil {
		return nil, err
	}
	hashings := c.Hashings()
	decoders := make([]*wire.Decoder, len(hashings))
	for k := range hashings {
		decoders[k] = wire.NewDecoder(hashings[k], opts.Decoder)
	}
	errs := make([]error, len(hashings)-1)
	// examples holds a fetch's messages decoded, one run of len(hashings)
	// per message, reused from fetch to fetch.
	var examples []learner.Example
	var b batch
	n := 0
	for {
		msgs, err := src.Fetch(ctx, 1000)
		if errors.Is(err, consumer.ErrRangeDone) {
			return c, nil
		}
		if err != nil {
			return c, err
		}
		if want := len(msgs) * len(hashings); len(examples) < want {
			examples = append(examples, make([]learner.Example, want-len(examples))...)
		}
		b.reset()
		used := 0
		for i := range msgs {
			n++
			xs := b.ptrs(examples[used : used+len(hashings)])
			_, derr := decoders[0].DecodeHashings(msgs[i].Value, wire.FormatAuto, xs[0], decoders[1:], xs[1:], errs)
			for _, err := range errs {
				if derr == nil {
					derr = err
				}
			}
			if derr != nil {
				b.drop(len(hashings))
				if opts.Invalid != nil {
					opts.Invalid(&wire.Record{N: n, Err: fmt.Errorf("%s/%d: %w", msgs[i].Position.Source, msgs[i].Position.Offset, derr), Payload: msgs[i].Value})
				}
				continue
			}
			used += len(hashings)
		}
		c.LearnChunk(b.chunk(len(hashings)))
	}
}

// batch gathers a chunk of examples for Contest.LearnChunk, each as
// one run of pointers, one per hashing, in buffers reused from chunk to
// chunk.
type batch struct {
	flat []*learner.Example
	runs [][]*learner.Example
}

func (b *batch) reset() { b.flat = b.flat[:0] }

// add appends an example: x under the first hashing, also under the
// others.
func (b *batch) add(x *learner.Example, also []*learner.Example) {
	b.flat = append(b.flat, x)
	b.flat = append(b.flat, also...)
}

// ptrs appends pointers to xs, one example per hashing, and returns them.
func (b *batch) ptrs(xs []learner.Example) []*learner.Example {
	start := len(b.flat)
	for k := range xs {
		b.flat = append(b.flat, &xs[k])
	}
	return b.flat[start:]
}

// drop takes back the last example appended, of h hashings.
func (b *batch) drop(h int) { b.flat = b.flat[:len(b.flat)-h] }

// chunk is the examples added since reset, each h pointers long.
func (b *batch) chunk(h int) [][]*learner.Example {
	b.runs = b.runs[:0]
	for j := 0; j+h <= len(b.flat); j += h {
		b.runs = append(b.runs, b.flat[j:j+h:j+h])
	}
	return b.runs
}

// Line is one challenger's JSON line (WriteJSON).
type Line struct {
	Name string `json:"name"`
	// Examples are the labeled examples compared.
	Examples int `json:"examples"`
	// The challenger's accuracy and mean log-loss over them.
	Accuracy float64 `json:"accuracy"`
	LogLoss  float64 `json:"log_loss"`
	// LogLossDiff is the model's mean log-loss minus the challenger's,
	// positive when the challenger is better; Low and High bound it: the
	// confidence sequence's band at the end.
	LogLossDiff float64 `json:"log_loss_diff"`
	Low         float64 `json:"low"`
	High        float64 `json:"high"`
	// AccuracyDiff is the challenger's accuracy minus the model's, with
	// its band.
	AccuracyDiff float64         `json:"accuracy_diff"`
	AccuracyLow  float64         `json:"accuracy_low"`
	AccuracyHigh float64         `json:"accuracy_high"`
	Verdict      compare.Verdict `json:"verdict"`
}

// Lines are the challengers' lines of standings (the model's first, as
// compare.Contest.Standings gives them).
func Lines(standings []compare.Standing) []Line {
	var lines []Line
	for _, s := range standings[1:] {
		r := s.Result
		lines = append(lines, Line{
			Name: s.Name, Examples: r.Examples, Accuracy: r.ChallengerAccuracy, LogLoss: r.ChallengerLogLoss,
			LogLossDiff: r.LogLossDiff, Low: r.LogLossLow, High: r.LogLossHigh,
			AccuracyDiff: r.AccuracyDiff, AccuracyLow: r.AccuracyLow, AccuracyHigh: r.AccuracyHigh,
			Verdict: r.Verdict(),
		})
	}
	return lines
}

// WriteJSON writes one JSON object per challenger, a line each.
func WriteJSON(w io.Writer, standings []compare.Standing) error {
	enc := json.NewEncoder(w)
	for _, l := range Lines(standings) {
		if err := enc.Encode(l); err != nil {
			return err
		}
	}
	return nil
}

// WriteTable writes the standings as a table: the model's row, then each
// challenger's, with its difference in log-loss from the model, the band
// around it and the verdict; with several challengers, the chance that
// any verdict is wrong, up to alpha for each.
func WriteTable(w io.Writer, standings []compare.Standing, alpha float64) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "name\texamples\taccuracy\tlog-loss\tlog_loss_diff\tlow\thigh\tverdict\t")
	m := standings[0]
	fmt.Fprintf(tw, "%s\t%d\t%.4f\t%.4f\t\t\t\t(model)\t\n", m.Name, m.Examples, m.Accuracy, m.LogLoss)
	for _, l := range Lines(standings) {
		fmt.Fprintf(tw, "%s\t%d\t%.4f\t%.4f\t%+.4f\t%+.4f\t%+.4f\t%s\t\n", l.Name, l.Examples, l.Accuracy, l.LogLoss, l.LogLossDiff, l.Low, l.High, l.Verdict)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	_, err := fmt.Fprintf(w, "log_loss_diff is the model's mean log-loss minus the challenger's (positive: the challenger is better);\n"+
		"[low, high] is its %g%% confidence sequence, valid however often it is looked at.\n", 100*(1-alpha))
	if k := len(standings) - 1; err == nil && k > 1 {
		// Each band is at level alpha on its own: no correction is made
		// for looking at several.
		_, err = fmt.Fprintf(w, "Each verdict is at level %g on its own: with %d challengers, the chance that any of them is wrong is up to %.4g%%.\n",
			alpha, k, 100*min(1, float64(k)*alpha))
	}
	return err
}

// WriteCurve writes the challengers' running differences from the model
// and their bands to the file path, an SVG chart
// (curve.WriteComparisonSVG).
func WriteCurve(path string, c *compare.Contest, alpha float64) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	var names []string
	for _, e := range c.Entrants()[1:] {
		names = append(names, e.Name)
	}
	err = curve.WriteComparisonSVG(f, alpha, names, c.Traces())
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return nil
}
