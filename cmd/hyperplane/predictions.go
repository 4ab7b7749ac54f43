package main

import (
	"bufio"
	"fmt"
	"os"

	"github.com/hyperplane-ml/hyperplane/learner"
	"github.com/hyperplane-ml/hyperplane/wire"
)

// backtestWriter writes -predictions: a JSON line per example of the
// first pass (see wire.Backtest).
type backtestWriter struct {
	path   string
	f      *os.File
	w      *bufio.Writer
	labels learner.Labels
	line   []byte
}

func createBacktest(path string, labels learner.Labels) (*backtestWriter, error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("-predictions: %w", err)
	}
	return &backtestWriter{path: path, f: f, w: bufio.NewWriterSize(f, 1<<16), labels: labels}, nil
}

func (b *backtestWriter) write(rec *wire.Record, o *learner.Outcome) error {
	l := wire.Backtest{Meta: rec.Meta, N: rec.N, Labeled: o.Labeled, Label: rec.Example.Label, Prediction: o.Prediction}
	b.line = append(l.AppendJSON(b.line[:0], b.labels), '\n')
	if _, err := b.w.Write(b.line); err != nil {
		return fmt.Errorf("-predictions: %s: %w", b.path, err)
	}
	return nil
}

// close flushes and closes the file; it is safe to call twice.
func (b *backtestWriter) close() error {
	if b.f == nil {
		return nil
	}
	err := b.w.Flush()
	if cerr := b.f.Close(); err == nil {
		err = cerr
	}
	b.f = nil
	if err != nil {
		return fmt.Errorf("-predictions: %s: %w", b.path, err)
	}
	return nil
}
