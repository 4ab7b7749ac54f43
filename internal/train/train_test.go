package train_test

import (
	"bytes"
	"context"
	"io"
	"strings"
	"testing"

	"github.com/hyperplane-ml/hyperplane/internal/train"
	"github.com/hyperplane-ml/hyperplane/learner"
	"github.com/hyperplane-ml/hyperplane/learner/synth"
	"github.com/hyperplane-ml/hyperplane/wire"
)

// TestRun: the first pass is prequential and measured as a model that
// learns the valid examples in order measures itself; every pass learns;
// the invalid records and the predictions are of the first pass only.
func TestRun(t *testing.T) {
	const n = 3000
	cfg := learner.DefaultConfig()
	s := synth.New(synth.DefaultOptions())
	var input []byte
	var examples []*learner.Example
	dec := wire.NewDecoder(cfg, wire.DecoderOptions{})
	for i := range n {
		line := synth.AppendJSON(nil, s.Next())
		x := new(learner.Example)
		if _, err := dec.DecodeJSON(bytes.TrimSpace(line), x); err != nil {
			t.Fatal(err)
		}
		examples = append(examples, x)
		input = append(input, line...)
		if i%1000 == 0 {
			input = append(input, "{not json}\n"...)
		}
	}
	want, err := learner.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	for _, x := range examples {
		want.Learn(x)
	}

	model, err := learner.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	var opened, invalid, predicted, firstDone int
	var learned [3]uint64
	res, lc, err := train.Run(context.Background(), model, train.Options{
		Input:    "examples",
		Open:     func() (io.ReadCloser, error) { opened++; return io.NopCloser(bytes.NewReader(input)), nil },
		Decoders: func() *wire.Decoder { return wire.NewDecoder(cfg, wire.DecoderOptions{}) },
		Read:     wire.ReadOptions{Format: wire.FormatJSON, Workers: 2},
		Passes:   2,
		Invalid:  func(*wire.Record) { invalid++ },
		Predicted: func(rec *wire.Record, o *learner.Outcome) error {
			if !o.Labeled {
				t.Errorf("record %d: not labeled", rec.N)
			}
			predicted++
			return nil
		},
		FirstPassDone: func() error { firstDone++; return nil },
		Learned:       func(pass int, k uint64) { learned[pass] = k },
	})
	if err != nil {
		t.Fatal(err)
	}
	m := want.Metrics()
	if res.Examples != n || res.Labeled != m.Labeled || res.Mistakes != m.Mistakes || res.Accuracy != m.Accuracy || res.LogLoss != m.LogLoss {
		t.Errorf("result %+v, want the first pass's metrics %+v", res, m)
	}
	if res.Invalid != 3 || invalid != 3 {
		t.Errorf("invalid: %d in the result, %d reported; want 3", res.Invalid, invalid)
	}
	if opened != 2 || firstDone != 1 || predicted != n || learned != [3]uint64{0, n, n} {
		t.Errorf("opened %d, first pass done %d, predicted %d, learned %v; want 2, 1, %d, [0 %d %d]", opened, firstDone, predicted, learned, n, n, n)
	}
	if res.Updates != model.Metrics().Updates || res.Updates <= m.Updates {
		t.Errorf("updates %d, want the model's after two passes, more than one pass's %d", res.Updates, m.Updates)
	}
	if res.AUC == nil || *res.AUC <= 0.5 || res.Drifts == nil || lc == nil {
		t.Errorf("AUC %v, drifts %v, curve %v: want an AUC above chance, a list, a curve", res.AUC, res.Drifts, lc)
	}
}

// TestRunNamesTheInput: an error reading the input names it.
func TestRunNamesTheInput(t *testing.T) {
	cfg := learner.DefaultConfig()
	model, err := learner.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	_, _, err = train.Run(context.Background(), model, train.Options{
		Input:    "examples.mp",
		Open:     func() (io.ReadCloser, error) { return io.NopCloser(strings.NewReader("\xc1")), nil },
		Decoders: func() *wire.Decoder { return wire.NewDecoder(cfg, wire.DecoderOptions{}) },
		Read:     wire.ReadOptions{Format: wire.FormatMsgpack},
		Passes:   1,
	})
	if err == nil || !strings.HasPrefix(err.Error(), "examples.mp: ") {
		t.Errorf("error %v, want one that names examples.mp", err)
	}
}
