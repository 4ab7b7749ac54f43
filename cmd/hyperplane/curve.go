package main

import (
	"bufio"
	"fmt"
	"image/color"
	"os"
	"strconv"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgsvg"

	"github.com/hyperplane-ml/hyperplane/learner"
)

// defaultCurveWindow is how many labeled examples a point of train's
// learning curve measures by default.
const defaultCurveWindow = 10000

// curve is the learning curve of a train's first pass, measured
// prequentially: a point every window labeled examples, with the
// accuracy and the measures of the probabilities over that window and
// over the stream so far.
type curve struct {
	window  uint64
	labeled uint64 // labeled examples learned
	// prob sums the probabilities' scores since the last point; auc holds
	// a binary model's probabilities (nil for a multiclass model). Train's
	// first pass adds to both (see firstPassProbabilities).
	prob *probabilityWindow
	auc  *aucSet
	// drifts are the examples (counted from 0) at which the detector
	// found a change of concept, and pending those since the last point.
	drifts  []uint64
	pending int
	// at is the model's counters at the last point.
	at     learner.Metrics
	points []curvePoint
}

// curvePoint is one point of a learning curve.
type curvePoint struct {
	examples, labeled uint64
	drifts            int // changes of concept found in the window
	// window is the accuracy over the labeled examples since the point
	// before (a full window but for the last point); accuracy over every
	// labeled example so far.
	window, accuracy float64
	// The probabilities' log-loss, Brier score, expected calibration
	// error and ROC AUC over the same window, and over the stream so far
	// (the learner's Metrics but the AUC, exact here). hasAUC says the
	// model is binary, the only one with an AUC.
	windowLogLoss, logLoss         float64
	windowBrier, brier             float64
	windowCalibration, calibration float64
	windowAUC, auc                 float64
	hasAUC                         bool
}

func newCurve(window uint64, auc *aucSet) *curve {
	return &curve{window: window, prob: &probabilityWindow{}, auc: auc}
}

// learned counts an example the model just learned (o its outcome),
// noting whether the detector found a change of concept at it, and adds a
// point when a window is full. m is the model.
func (c *curve) learned(o learner.Outcome, drift bool, m *learner.Model) {
	if drift {
		c.drifts = append(c.drifts, m.Metrics().Examples-1)
		c.pending++
	}
	if !o.Labeled {
		return
	}
	if c.labeled++; c.labeled%c.window == 0 {
		c.point(m.Metrics())
	}
}

// end adds the point of a last window that is not full.
func (c *curve) end(mt learner.Metrics) {
	if mt.Labeled > c.at.Labeled {
		c.point(mt)
	}
}

func (c *curve) point(mt learner.Metrics) {
	n := mt.Labeled - c.at.Labeled
	window := 1 - float64(mt.Mistakes-c.at.Mistakes)/float64(n)
	p := curvePoint{examples: mt.Examples, labeled: mt.Labeled, drifts: c.pending, window: window, accuracy: mt.Accuracy,
		logLoss: mt.LogLoss, brier: mt.Brier, calibration: mt.CalibrationError}
	p.windowLogLoss, p.windowBrier, p.windowCalibration = c.prob.means()
	if c.auc != nil {
		p.hasAUC = true
		p.windowAUC, p.auc = c.auc.window()
	}
	c.points = append(c.points, p)
	c.at, c.pending, *c.prob = mt, 0, probabilityWindow{}
}

// write writes the curve to path: an SVG chart when path ends in .svg,
// CSV otherwise.
func (c *curve) write(path string) error {
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("-curve: %w", err)
	}
	if strings.HasSuffix(strings.ToLower(path), ".svg") {
		err = c.svg(f)
	} else {
		err = c.csv(f)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("-curve: %s: %w", path, err)
	}
	return nil
}

// csvHeader names the columns of the CSV curve.
const csvHeader = "examples,labeled,window_accuracy,accuracy,drifts," +
	"window_log_loss,log_loss,window_brier,brier,window_calibration_error,calibration_error,window_auc,auc"

// csv writes a header and a line per point: examples, labeled,
// window_accuracy, accuracy, drifts (the changes of concept found in the
// window), then the probabilities' log-loss, Brier score, expected
// calibration error and ROC AUC, each over the window and over the
// stream so far; the AUC's are empty for a multiclass model.
func (c *curve) csv(f *os.File) error {
	w := bufio.NewWriter(f)
	fmt.Fprintln(w, csvHeader)
	num := func(v float64) string { return strconv.FormatFloat(v, 'f', 6, 64) }
	for _, p := range c.points {
		windowAUC, auc := "", ""
		if p.hasAUC {
			windowAUC, auc = num(p.windowAUC), num(p.auc)
		}
		fmt.Fprintf(w, "%d,%d,%s,%s,%d,%s,%s,%s,%s,%s,%s,%s,%s\n", p.examples, p.labeled, num(p.window), num(p.accuracy), p.drifts,
			num(p.windowLogLoss), num(p.logLoss), num(p.windowBrier), num(p.brier), num(p.windowCalibration), num(p.calibration), windowAUC, auc)
	}
	return w.Flush()
}

// svg draws two panels over the labeled examples learned: the window's
// accuracy and the stream's; below, the window's log-loss, Brier score,
// expected calibration error and (binary) ROC AUC.
func (c *curve) svg(f *os.File) error {
	acc := newPanel(fmt.Sprintf("Prequential accuracy, windows of %d labeled examples", c.window), "accuracy")
	series := func(y func(curvePoint) float64) plotter.XYs {
		xys := make(plotter.XYs, len(c.points))
		for i, pt := range c.points {
			xys[i] = plotter.XY{X: float64(pt.labeled), Y: y(pt)}
		}
		return xys
	}
	if err := addLines(acc, []curveLine{
		{"window", series(func(p curvePoint) float64 { return p.window }), color.RGBA{R: 31, G: 119, B: 180, A: 255}},
		{"so far", series(func(p curvePoint) float64 { return p.accuracy }), color.RGBA{R: 255, G: 127, B: 14, A: 255}},
	}); err != nil {
		return err
	}

	prob := newPanel(fmt.Sprintf("Probabilities, windows of %d labeled examples", c.window), "window's measure")
	lines := []curveLine{
		{"log-loss", series(func(p curvePoint) float64 { return p.windowLogLoss }), color.RGBA{R: 148, G: 103, B: 189, A: 255}},
		{"Brier score", series(func(p curvePoint) float64 { return p.windowBrier }), color.RGBA{R: 44, G: 160, B: 44, A: 255}},
		{"calibration error", series(func(p curvePoint) float64 { return p.windowCalibration }), color.RGBA{R: 140, G: 86, B: 75, A: 255}},
	}
	if len(c.points) > 0 && c.points[0].hasAUC {
		lines = append(lines, curveLine{"ROC AUC", series(func(p curvePoint) float64 { return p.windowAUC }), color.RGBA{R: 23, G: 190, B: 207, A: 255}})
	}
	if err := addLines(prob, lines); err != nil {
		return err
	}
	// The log-loss can pass 1; the other measures are within [0, 1].
	top := 1.0
	for _, p := range c.points {
		top = max(top, p.windowLogLoss)
	}

	for _, panel := range []struct {
		p   *plot.Plot
		top float64
	}{{acc, 1}, {prob, top}} {
		p := panel.p
		// A change of concept the detector found: a dashed line at the
		// labeled examples learned when it did.
		for i, at := range c.driftsLabeled() {
			l, err := plotter.NewLine(plotter.XYs{{X: at, Y: 0}, {X: at, Y: panel.top}})
			if err != nil {
				return err
			}
			l.Color = color.RGBA{R: 214, G: 39, B: 40, A: 255}
			l.Dashes = []vg.Length{vg.Points(4), vg.Points(3)}
			p.Add(l)
			if i == 0 {
				p.Legend.Add("change found", l)
			}
		}
		p.Y.Min, p.Y.Max = 0, panel.top
		p.Legend.Top, p.Legend.Left = false, false
	}
	canvas := vgsvg.New(8*vg.Inch, 8*vg.Inch)
	tiles := draw.Tiles{Rows: 2, Cols: 1, PadY: vg.Points(12)}
	panels := [][]*plot.Plot{{acc}, {prob}}
	for i, row := range plot.Align(panels, tiles, draw.New(canvas)) {
		panels[i][0].Draw(row[0])
	}
	_, err := canvas.WriteTo(f)
	return err
}

// newPanel is a panel of the curve's chart, with a grid.
func newPanel(title, y string) *plot.Plot {
	p := plot.New()
	p.Title.Text = title
	p.X.Label.Text = "labeled examples"
	p.Y.Label.Text = y
	p.Add(plotter.NewGrid())
	return p
}

// curveLine is one line of a panel of the curve's chart.
type curveLine struct {
	name  string
	xys   plotter.XYs
	color color.Color
}

// addLines draws the lines on p, each in the legend.
func addLines(p *plot.Plot, lines []curveLine) error {
	for _, s := range lines {
		l, err := plotter.NewLine(s.xys)
		if err != nil {
			return err
		}
		l.Color = s.color
		l.Width = vg.Points(1.5)
		p.Add(l)
		p.Legend.Add(s.name, l)
	}
	return nil
}

// driftsLabeled places each change found on the curve's axis: the labeled
// examples learned when it was found, interpolated between the points
// around it.
func (c *curve) driftsLabeled() []float64 {
	var at []float64
	for _, ex := range c.drifts {
		prev := curvePoint{}
		for _, p := range c.points {
			if p.examples > ex {
				span := float64(p.examples - prev.examples)
				frac := float64(ex+1-prev.examples) / span
				at = append(at, float64(prev.labeled)+frac*float64(p.labeled-prev.labeled))
				break
			}
			prev = p
		}
	}
	return at
}
