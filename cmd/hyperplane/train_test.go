package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hyperplane-ml/hyperplane/internal/train"
	"github.com/hyperplane-ml/hyperplane/learner"
	"github.com/hyperplane-ml/hyperplane/wire"
)

// TestTrainCountsInvalidAndFailsWhenNothingLearned: the JSON line counts
// the records skipped as invalid, and an input with no labeled example
// (none at all, none valid, none labeled) is an error, exit status 1,
// with the line still printed and no model file written.
func TestTrainCountsInvalidAndFailsWhenNothingLearned(t *testing.T) {
	cases := []struct {
		name, input       string
		examples, invalid float64
		why               string
	}{
		{"some invalid", "{\"label\":1,\"features\":{\"a\":1}}\nnot json\n{\"label\":7,\"features\":{\"a\":1}}\n{\"label\":-1,\"features\":{\"b\":1}}\n", 2, 2, ""},
		{"empty", "", 0, 0, "it holds no example"},
		{"none valid", "not json\n{\"label\":7,\"features\":{\"a\":1}}\n{\"label\":1,\"features\":{\"b\":[1]}}\n", 0, 3, "none of its 3 records is a valid example"},
		{"none labeled", "{\"features\":{\"a\":1}}\n{\"features\":{\"b\":1}}\n", 2, 0, "none of its 2 valid examples has a label"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			in := filepath.Join(t.TempDir(), "in.jsonl")
			if err := os.WriteFile(in, []byte(c.input), 0o644); err != nil {
				t.Fatal(err)
			}
			modelPath := filepath.Join(t.TempDir(), "m.model")
			out, stderr, err := runCmd(t, "", "train", "-input", in, "-out", modelPath)
			var got struct{ Examples, Invalid float64 }
			if jerr := json.Unmarshal([]byte(out), &got); jerr != nil || strings.Count(out, "\n") != 1 {
				t.Fatalf("want one JSON line, got %q (%v)\n%s", out, jerr, stderr)
			}
			if got.Examples != c.examples || got.Invalid != c.invalid {
				t.Errorf("examples %v, invalid %v; want %v, %v: %s", got.Examples, got.Invalid, c.examples, c.invalid, out)
			}
			_, statErr := os.Stat(modelPath)
			if c.why == "" {
				if err != nil || statErr != nil {
					t.Fatalf("train: %v; model file: %v", err, statErr)
				}
				return
			}
			var u *usageError
			if err == nil || errors.As(err, &u) {
				t.Fatalf("train learned nothing and returned %v, want an error (exit status 1)", err)
			}
			for _, want := range []string{"nothing learned from " + in, c.why, "no model written to " + modelPath} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q does not say %q", err, want)
				}
			}
			if !errors.Is(statErr, os.ErrNotExist) {
				t.Errorf("a model file was written for a model that learned nothing (%v)", statErr)
			}
		})
	}
}

// backtestLine is a line of train -predictions.
type backtestLine struct {
	ID            any                `json:"id"`
	Label         any                `json:"label"`
	Predicted     any                `json:"predicted"`
	Score         any                `json:"score"`
	Probability   *float64           `json:"probability"`
	Probabilities map[string]float64 `json:"probabilities"`
}

// readBacktest reads the lines of a -predictions file, which holds no
// other key.
func readBacktest(t *testing.T, path string) []backtestLine {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []backtestLine
	for i, line := range strings.Split(strings.TrimSuffix(string(b), "\n"), "\n") {
		d := json.NewDecoder(strings.NewReader(line))
		d.DisallowUnknownFields()
		var l backtestLine
		if err := d.Decode(&l); err != nil {
			t.Fatalf("line %d: %v: %s", i+1, err, line)
		}
		if l.Probability == nil || !(*l.Probability >= 0 && *l.Probability <= 1) {
			t.Fatalf("line %d: probability not in [0, 1]: %s", i+1, line)
		}
		out = append(out, l)
	}
	return out
}

// closeTo says a and b agree but for the rounding of sums taken in
// another order.
func closeTo(a, b float64) bool { return math.Abs(a-b) <= 1e-12*max(1, math.Abs(b)) }

// TestTrainPredictions: -predictions writes a line per example of the
// first pass (of two), in order: the example's id, or its record number
// when it has none; its label when it has one; the prediction train made
// before learning it, score and probability bit for bit those of a model
// of the same configuration that learned the examples before it. Scored
// from the file alone, the log-loss, Brier score and ROC AUC (counted
// over every pair) are train's.
func TestTrainPredictions(t *testing.T) {
	dir := t.TempDir()
	raw, err := os.ReadFile(genFile(t, dir, "gen.jsonl", "-examples", "3000", "-seed", "9", "-unlabeled", "0.1", "-vocab", "300"))
	if err != nil {
		t.Fatal(err)
	}
	// Every third example without its id.
	lines := strings.Split(strings.TrimSuffix(string(raw), "\n"), "\n")
	for i := range lines {
		if i%3 == 1 {
			if !strings.HasPrefix(lines[i], `{"id":`) {
				t.Fatalf("line %d does not begin with its id: %s", i+1, lines[i])
			}
			lines[i] = `{` + lines[i][strings.Index(lines[i], ",")+1:]
		}
	}
	data := filepath.Join(dir, "ex.jsonl")
	if err := os.WriteFile(data, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "predictions.jsonl")
	var res train.Result
	if err := json.Unmarshal([]byte(mustRun(t, "", "train", "-input", data, "-predictions", path, "-passes", "2")), &res); err != nil {
		t.Fatal(err)
	}
	got := readBacktest(t, path)
	if uint64(len(got)) != res.Examples || len(got) != len(lines) {
		t.Fatalf("%d lines for %d examples (%d in the input), want one each, of the first pass", len(got), res.Examples, len(lines))
	}

	model, err := learner.New(learner.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	dec := wire.NewDecoder(model.Config(), wire.DecoderOptions{})
	var x learner.Example
	var logLoss, brier float64
	var pos, neg []float64
	for i, l := range got {
		meta, err := dec.Decode([]byte(lines[i]), &x)
		if err != nil {
			t.Fatal(err)
		}
		switch id := l.ID.(type) {
		case string:
			if !meta.HasID || id != string(meta.ID) {
				t.Fatalf("line %d: id %q, the example's is %q", i+1, id, meta.ID)
			}
		case float64:
			if meta.HasID || id != float64(i+1) {
				t.Fatalf("line %d: id %v, want the record number %d for an example without one", i+1, id, i+1)
			}
		default:
			t.Fatalf("line %d: id %v", i+1, l.ID)
		}
		want := model.Learn(&x)
		score, _ := l.Score.(float64)
		if score != want.Score || *l.Probability != want.Probability || l.Probabilities != nil {
			t.Fatalf("line %d: score %v, probability %v; the model predicted %v, %v before learning it", i+1, l.Score, *l.Probability, want.Score, want.Probability)
		}
		if (l.Label != nil) != x.Labeled {
			t.Fatalf("line %d: label %v, the example labeled %v", i+1, l.Label, x.Labeled)
		}
		if l.Label == nil {
			continue
		}
		p := *l.Probability
		if l.Label == 1.0 {
			logLoss -= math.Log(max(p, 1e-15))
			brier += (1 - p) * (1 - p)
			pos = append(pos, p)
		} else {
			logLoss -= math.Log(max(1-p, 1e-15))
			brier += p * p
			neg = append(neg, p)
		}
	}
	n := float64(len(pos) + len(neg))
	if n != float64(res.Labeled) || res.AUC == nil {
		t.Fatalf("%v labeled lines, train counts %d; auc %v", n, res.Labeled, res.AUC)
	}
	for _, c := range []struct {
		name        string
		file, train float64
	}{
		{"log-loss", logLoss / n, res.LogLoss},
		{"Brier score", brier / n, res.Brier},
		{"ROC AUC", pairwiseAUC(pos, neg), *res.AUC},
	} {
		if !closeTo(c.file, c.train) {
			t.Errorf("%s: %v from the file, train reports %v", c.name, c.file, c.train)
		}
	}
	if res.LogLoss <= 0 || res.LogLoss >= math.Log(2) || *res.AUC < 0.75 || res.CalibrationError <= 0 || res.CalibrationError > 0.1 {
		t.Errorf("log-loss %v, AUC %v, calibration error %v: want better than chance and calibrated", res.LogLoss, *res.AUC, res.CalibrationError)
	}
}

// TestTrainPredictionsMulticlass: a multiclass model's lines hold every
// class's probability by name, summing to 1, the predicted class's as
// probability; the log-loss and Brier score scored from the file are
// train's, and its summary has no AUC.
func TestTrainPredictionsMulticlass(t *testing.T) {
	dir := t.TempDir()
	data := genFile(t, dir, "ex.jsonl", "-examples", "3000", "-seed", "10", "-classes", "3", "-unlabeled", "0.1")
	path := filepath.Join(dir, "predictions.jsonl")
	out := mustRun(t, "", "train", "-input", data, "-classes", "3", "-predictions", path)
	var res train.Result
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatal(err)
	}
	if res.AUC != nil || strings.Contains(out, `"auc"`) {
		t.Errorf("a multiclass model's summary has an AUC: %s", out)
	}
	got := readBacktest(t, path)
	if uint64(len(got)) != res.Examples {
		t.Fatalf("%d lines for %d examples", len(got), res.Examples)
	}
	var logLoss, brier, n float64
	for i, l := range got {
		var sum float64
		for _, p := range l.Probabilities {
			if !(p >= 0 && p <= 1) {
				t.Fatalf("line %d: probabilities %v", i+1, l.Probabilities)
			}
			sum += p
		}
		predicted, _ := l.Predicted.(string)
		if len(l.Probabilities) != 3 || math.Abs(sum-1) > 1e-9 || l.Probabilities[predicted] != *l.Probability {
			t.Fatalf("line %d: predicted %v with probability %v, probabilities %v: want 3 summing to 1, the predicted one's the probability", i+1, l.Predicted, *l.Probability, l.Probabilities)
		}
		if l.Label == nil {
			continue
		}
		label, _ := l.Label.(string)
		py, ok := l.Probabilities[label]
		if !ok {
			t.Fatalf("line %d: label %v is no class of %v", i+1, l.Label, l.Probabilities)
		}
		logLoss -= math.Log(max(py, 1e-15))
		for c, p := range l.Probabilities {
			if c == label {
				p--
			}
			brier += p * p
		}
		n++
	}
	if n != float64(res.Labeled) || !closeTo(logLoss/n, res.LogLoss) || !closeTo(brier/n, res.Brier) {
		t.Errorf("from the file: %v labeled, log-loss %v, Brier %v; train: %d, %v, %v", n, logLoss/n, brier/n, res.Labeled, res.LogLoss, res.Brier)
	}
	if _, _, err := runCmd(t, "", "train", "-input", data, "-predictions", filepath.Join(dir, "no", "such", "dir", "p.jsonl")); err == nil || !strings.Contains(err.Error(), "-predictions") {
		t.Errorf("-predictions into a missing directory: %v, want an error naming the flag", err)
	}
}

// pairwiseAUC is the ROC AUC of probabilities pos (of positives) and neg
// (of negatives) by its definition: the share of pairs a positive ranks
// above, ties counting a half; 0 without both.
func pairwiseAUC(pos, neg []float64) float64 {
	if len(pos) == 0 || len(neg) == 0 {
		return 0
	}
	var wins float64
	for _, p := range pos {
		for _, q := range neg {
			switch {
			case p > q:
				wins++
			case p == q:
				wins += 0.5
			}
		}
	}
	return wins / float64(len(pos)*len(neg))
}

// TestFlagsOnlyCommandsRefuseArguments: train, predict, demo and version
// take flags only. The flag package stops at the first argument that is
// not a flag, so each flag after a stray argument would be ignored (train
// -input F stray -out M learned, exit status 0, and wrote no model): the
// stray argument is a usage error that names it.
func TestFlagsOnlyCommandsRefuseArguments(t *testing.T) {
	dir := t.TempDir()
	data, model := trainedOn(t, dir, 50)
	out := filepath.Join(dir, "stray.msgpack")
	for _, args := range [][]string{
		{"train", "-input", data, "stray", "-out", out},
		{"predict", "-model", model, "-input", data, "stray"},
		{"demo", "-examples", "10", "-data", filepath.Join(dir, "demo"), "-http", "", "stray"},
		{"version", "stray"},
	} {
		_, _, err := runCmd(t, "", args...)
		var u *usageError
		if !errors.As(err, &u) || !strings.Contains(err.Error(), `unexpected argument "stray"`) {
			t.Errorf("%s: %v, want a usage error naming the argument", strings.Join(args, " "), err)
		}
	}
	if _, err := os.Stat(out); err == nil {
		t.Errorf("train with a stray argument wrote %s", out)
	}
}

// waitingStdin is standard input that says, by closing waiting, when a
// command calls its Read again after the first: with the writer idle,
// that Read waits for bytes that do not come.
type waitingStdin struct {
	io.Reader
	reads   int // only the one goroutine reading calls Read
	waiting chan struct{}
}

func (r *waitingStdin) Read(p []byte) (int, error) {
	if r.reads++; r.reads == 2 {
		close(r.waiting)
	}
	return r.Reader.Read(p)
}

// TestInterruptStopsCommandsReadingStdin has a command reading examples
// from standard input stopped while a read waits for bytes that never come
// (a terminal, or a pipe whose writer is idle): the interrupt ends it at
// once, not when the writer closes its end.
func TestInterruptStopsCommandsReadingStdin(t *testing.T) {
	dir := t.TempDir()
	_, model := trainedOn(t, dir, 50)
	for _, args := range [][]string{
		{"train", "-input", "-", "-out", filepath.Join(dir, "stdin.msgpack")},
		{"predict", "-model", model, "-input", "-"},
		{"backtest", "--input", "-", "--model.challengers", "p:algorithm=perceptron"},
	} {
		t.Run(args[0], func(t *testing.T) {
			r, w, err := os.Pipe()
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			defer w.Close() // held open until the command has returned
			if _, err := w.WriteString("{\"label\":1,\"features\":{\"a\":1}}\n"); err != nil {
				t.Fatal(err)
			}
			stdin := &waitingStdin{Reader: r, waiting: make(chan struct{})}
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error, 1)
			go func() {
				var out, errOut bytes.Buffer
				done <- run(ctx, args, func(string) string { return "" }, stdin, &out, &errOut)
			}()
			select {
			case <-stdin.waiting:
			case err := <-done:
				t.Fatalf("%s: returned %v before reading standard input to its idle end", strings.Join(args, " "), err)
			case <-time.After(time.Minute):
				t.Fatalf("%s: no second read of standard input in a minute", strings.Join(args, " "))
			}
			cancel()
			select {
			case err := <-done:
				if err == nil {
					t.Errorf("%s: interrupted and returned no error", strings.Join(args, " "))
				}
			case <-time.After(20 * time.Second):
				t.Fatalf("%s: still reading standard input 20s after the interrupt", strings.Join(args, " "))
			}
		})
	}
}

// linesWriter is a standard output that sends each whole line written
// to it on lines.
type linesWriter struct {
	mu      sync.Mutex
	partial []byte
	lines   chan string
}

func (w *linesWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.partial = append(w.partial, p...)
	for {
		i := bytes.IndexByte(w.partial, '\n')
		if i < 0 {
			return len(p), nil
		}
		w.lines <- string(w.partial[:i])
		w.partial = w.partial[i+1:]
	}
}

// TestPredictAnswersAsExamplesCome has predict read a pipe whose writer
// sends two examples and then waits: both predictions are written while
// the pipe is still open, not once a chunk of input has filled or the
// writer has closed it.
func TestPredictAnswersAsExamplesCome(t *testing.T) {
	dir := t.TempDir()
	_, model := trainedOn(t, dir, 50)
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	out := &linesWriter{lines: make(chan string, 16)}
	done := make(chan error, 1)
	go func() {
		var errOut bytes.Buffer
		done <- run(context.Background(), []string{"predict", "-model", model, "-input", "-"}, func(string) string { return "" }, r, out, &errOut)
	}()
	for i, ex := range []string{`{"label":1,"features":{"a":1}}`, `{"features":{"b":2}}`} {
		if _, err := w.WriteString(ex + "\n"); err != nil {
			t.Fatal(err)
		}
		select {
		case l := <-out.lines:
			var p struct {
				Position struct {
					Offset int64 `json:"offset"`
				} `json:"position"`
			}
			if err := json.Unmarshal([]byte(l), &p); err != nil || p.Position.Offset != int64(i+1) {
				t.Fatalf("prediction %d: %q (offset %d, %v), want the prediction of example %d", i+1, l, p.Position.Offset, err, i+1)
			}
		case err := <-done:
			t.Fatalf("predict returned %v with its input still open", err)
		case <-time.After(time.Minute):
			t.Fatalf("no prediction of example %d a minute after it was written, the pipe still open", i+1)
		}
	}
	w.Close()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("predict: %v", err)
		}
	case <-time.After(time.Minute):
		t.Fatal("predict still running a minute after its input closed")
	}
}

// interruptingWriter is a standard output that interrupts the command
// once it has received more than after bytes.
type interruptingWriter struct {
	bytes.Buffer
	after  int
	cancel context.CancelFunc
}

func (w *interruptingWriter) Write(p []byte) (int, error) {
	n, err := w.Buffer.Write(p)
	if w.Len() > w.after {
		w.cancel()
	}
	return n, err
}

// TestInterruptedOutputEndsOnAWholeLine interrupts the commands that
// write a JSON line per record to standard output while they write: what
// they wrote ends with a whole line, for the tools that read it.
func TestInterruptedOutputEndsOnAWholeLine(t *testing.T) {
	dir := t.TempDir()
	data, model := trainedOn(t, dir, 3000)
	for _, args := range [][]string{
		{"predict", "-model", model, "-input", data},
		{"gen", "-examples", "1000000", "-seed", "3"},
	} {
		t.Run(args[0], func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			out := &interruptingWriter{after: 1, cancel: cancel}
			var errOut bytes.Buffer
			err := run(ctx, args, func(string) string { return "" }, strings.NewReader(""), out, &errOut)
			if err == nil {
				t.Fatalf("%s: interrupted and returned no error", strings.Join(args, " "))
			}
			text := out.String()
			if text == "" || !strings.HasSuffix(text, "\n") {
				t.Fatalf("%s: interrupted output of %d bytes ends inside a line: ...%q", strings.Join(args, " "), len(text), text[max(0, len(text)-80):])
			}
			for i, l := range strings.Split(strings.TrimSuffix(text, "\n"), "\n") {
				if !json.Valid([]byte(l)) {
					t.Fatalf("%s: line %d is not JSON: %q", strings.Join(args, " "), i+1, l)
				}
			}
		})
	}
}

// trainedOn writes n generated examples (seed 2) to a file in dir and
// trains a model on them, returning both files.
func trainedOn(t *testing.T, dir string, n int) (data, model string) {
	t.Helper()
	data = genFile(t, dir, "g.jsonl", "-examples", strconv.Itoa(n), "-seed", "2")
	model = filepath.Join(dir, "m.msgpack")
	mustRun(t, "", "train", "-input", data, "-out", model)
	return data, model
}
