package curve_test

import (
	"bytes"
	"encoding/csv"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"

	"github.com/hyperplane-ml/hyperplane/learner"
	"github.com/hyperplane-ml/hyperplane/learner/curve"
)

// learned is the curve, in windows of 250 labeled examples, of a model of
// the given classes (0: binary) over 1,000 examples of a linear concept
// that changes at the 500th, a tenth unlabeled, the detector on.
func learned(t *testing.T, classes int) *learner.Curve {
	t.Helper()
	cfg := learner.DefaultConfig()
	cfg.HashBits = 8
	for c := range classes {
		cfg.Classes = append(cfg.Classes, strconv.Itoa(c))
	}
	cfg.Drift = learner.DefaultDrift()
	cfg.Drift.Enabled = true
	cfg.Drift.Threshold = 5
	cfg.Drift.MinExamples = 100
	m, err := learner.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(7, uint64(classes)))
	outputs := max(classes, 1)
	hidden := make([]float64, 20*outputs)
	for i := range hidden {
		hidden[i] = rng.NormFloat64()
	}
	c := learner.NewCurve(m, 250)
	for i := range 1000 {
		if i == 500 {
			for j := range hidden {
				hidden[j] = -hidden[j]
			}
		}
		x := learner.Example{Labeled: rng.Float64() >= 0.1}
		score := make([]float64, outputs)
		for range 5 {
			f := rng.IntN(20)
			x.Index = append(x.Index, uint32(f))
			x.Value = append(x.Value, 1)
			for o := range outputs {
				score[o] += hidden[f*outputs+o]
			}
		}
		if classes == 0 {
			x.Label = -1
			if score[0] >= 0 {
				x.Label = 1
			}
		} else {
			for o := range score {
				if score[o] > score[x.Label] {
					x.Label = o
				}
			}
		}
		c.Learn(&x)
	}
	c.End()
	return c
}

// TestWriteCSV: a header, then a line per point with its figures to 6
// decimals; a multiclass model's AUC columns are empty.
func TestWriteCSV(t *testing.T) {
	for _, classes := range []int{0, 3} {
		c := learned(t, classes)
		var b bytes.Buffer
		if err := curve.WriteCSV(&b, c); err != nil {
			t.Fatal(err)
		}
		rows, err := csv.NewReader(&b).ReadAll()
		if err != nil {
			t.Fatal(err)
		}
		if got := strings.Join(rows[0], ","); got != curve.CSVHeader {
			t.Fatalf("header %q", got)
		}
		pts := c.Points()
		if len(rows) != len(pts)+1 || len(pts) < 3 {
			t.Fatalf("classes %d: %d rows for %d points", classes, len(rows), len(pts))
		}
		num := func(v float64) string { return strconv.FormatFloat(v, 'f', 6, 64) }
		for i, p := range pts {
			auc, windowAUC := "", ""
			if classes == 0 {
				windowAUC, auc = num(p.WindowAUC), num(p.AUC)
			}
			want := []string{strconv.FormatUint(p.Examples, 10), strconv.FormatUint(p.Labeled, 10), num(p.WindowAccuracy), num(p.Accuracy),
				strconv.Itoa(p.Drifts), num(p.WindowLogLoss), num(p.LogLoss), num(p.WindowBrier), num(p.Brier),
				num(p.WindowCalibrationError), num(p.CalibrationError), windowAUC, auc}
			if got := strings.Join(rows[i+1], ","); got != strings.Join(want, ",") {
				t.Errorf("classes %d: row %d is %s, want %s", classes, i, got, strings.Join(want, ","))
			}
		}
	}
}

// TestWriteSVG: an SVG chart of both panels, with the AUC for a binary
// model only, and a line for the change of concept found.
func TestWriteSVG(t *testing.T) {
	for _, classes := range []int{0, 3} {
		c := learned(t, classes)
		var b bytes.Buffer
		if err := curve.WriteSVG(&b, c); err != nil {
			t.Fatal(err)
		}
		s := b.String()
		if !strings.HasPrefix(s, "<?xml") || !strings.Contains(s, "<svg") || !strings.Contains(s, "Prequential accuracy, windows of 250") ||
			!strings.Contains(s, "Probabilities") || !strings.Contains(s, "calibration error") {
			t.Errorf("classes %d: not an SVG chart of the curve: %.200s", classes, s)
		}
		if strings.Contains(s, "ROC AUC") != (classes == 0) {
			t.Errorf("classes %d: the chart shows an AUC: %v", classes, strings.Contains(s, "ROC AUC"))
		}
		if len(c.DriftsLabeled()) == 0 || !strings.Contains(s, "change found") {
			t.Errorf("classes %d: changes found at %v, placed at %v: the chart shows none", classes, c.Drifts(), c.DriftsLabeled())
		}
	}
}
