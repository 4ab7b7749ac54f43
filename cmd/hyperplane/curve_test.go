package main

import (
	"encoding/csv"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/hyperplane-ml/hyperplane/internal/train"
)

// TestTrainCurve: -curve writes the first pass's learning curve as CSV: a
// point per window of labeled examples (the last one partial), the
// window's prequential accuracy and the stream's, whose last value is the
// accuracy train reports, and the changes of concept found in the window.
// Over a stream whose concept changes at example 20,000, the window after
// the change scores below the one before it, and the detector finds one
// change, within 5,000 examples of it, which train's summary lists too.
// A file ending in .svg gets a chart of the same curve.
func TestTrainCurve(t *testing.T) {
	dir := t.TempDir()
	data := genFile(t, dir, "ex.jsonl", "-examples", "30000", "-seed", "6", "-unlabeled", "0.1", "-drift-at", "20000")
	path := filepath.Join(dir, "curve.csv")
	out := mustRun(t, "", "train", "-input", data, "-algorithm", "perceptron", "-curve", path, "-curve-window", "1000", "-passes", "2")
	var res train.Result
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rows, err := csv.NewReader(f).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(rows[0], ","); got != "examples,labeled,window_accuracy,accuracy,drifts,window_log_loss,log_loss,window_brier,brier,window_calibration_error,calibration_error,window_auc,auc" {
		t.Fatalf("header %q", got)
	}
	rows0 := rows[0]
	rows = rows[1:]
	if want := int((res.Labeled + 999) / 1000); len(rows) != want {
		t.Fatalf("%d points for %d labeled examples in windows of 1000, want %d (the first pass only)", len(rows), res.Labeled, want)
	}
	num := func(r []string, i int) float64 {
		v, err := strconv.ParseFloat(r[i], 64)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	var drift, found int
	for i, r := range rows {
		if labeled := num(r, 1); i < len(rows)-1 && labeled != float64(1000*(i+1)) {
			t.Fatalf("point %d at %v labeled examples, want %d", i, labeled, 1000*(i+1))
		}
		if w := num(r, 2); w < 0 || w > 1 {
			t.Fatalf("point %d: window accuracy %v", i, w)
		}
		// The window's and the stream's Brier score, calibration error
		// and AUC; log-losses above 0.
		for c := 7; c <= 12; c++ {
			if v := num(r, c); v < 0 || v > 1 {
				t.Fatalf("point %d: %s %v", i, rows0[c], v)
			}
		}
		if num(r, 5) <= 0 || num(r, 6) <= 0 {
			t.Fatalf("point %d: log-losses %v, %v", i, num(r, 5), num(r, 6))
		}
		if drift == 0 && num(r, 0) > 20000 {
			drift = i
		}
		found += int(num(r, 4))
	}
	if len(res.Drifts) != 1 || res.Drifts[0] < 20000 || res.Drifts[0] > 25000 || found != 1 {
		t.Errorf("changes found at %v (%d on the curve), want one within 5,000 examples after 20,000", res.Drifts, found)
	}
	last := rows[len(rows)-1]
	for _, c := range []struct {
		column int
		train  float64
	}{{3, res.Accuracy}, {6, res.LogLoss}, {8, res.Brier}, {10, res.CalibrationError}, {12, *res.AUC}} {
		if got := last[c.column]; got != strconv.FormatFloat(c.train, 'f', 6, 64) {
			t.Errorf("the curve ends at %s %v, train reports %v", rows0[c.column], got, c.train)
		}
	}
	if before, after := num(rows[drift-1], 2), num(rows[drift], 2); after >= before {
		t.Errorf("the window after the change scores %v, the one before %v: want lower", after, before)
	}
	// The first window wholly after the change: its probabilities rank
	// worse and lose more.
	if before, after := num(rows[drift-1], 11), num(rows[drift+1], 11); after >= before {
		t.Errorf("the window after the change has an AUC of %v, the one before %v: want lower", after, before)
	}
	if before, after := num(rows[drift-1], 5), num(rows[drift+1], 5); after <= before {
		t.Errorf("the window after the change has a log-loss of %v, the one before %v: want higher", after, before)
	}

	svg := filepath.Join(dir, "curve.svg")
	mustRun(t, "", "train", "-input", data, "-curve", svg, "-curve-window", "1000")
	b, err := os.ReadFile(svg)
	if err != nil {
		t.Fatal(err)
	}
	if s := string(b); !strings.HasPrefix(s, "<?xml") || !strings.Contains(s, "<svg") || !strings.Contains(s, "Prequential accuracy") ||
		!strings.Contains(s, "Probabilities") || !strings.Contains(s, "calibration error") || !strings.Contains(s, "ROC AUC") {
		t.Errorf("%s is not an SVG chart of the curve and of the probabilities: %.200s", svg, s)
	}
	if _, _, err := runCmd(t, "", "train", "-input", data, "-curve", svg, "-curve-window", "0"); err == nil || !strings.Contains(err.Error(), "-curve-window") {
		t.Errorf("-curve-window 0: %v, want an error naming it", err)
	}
}
