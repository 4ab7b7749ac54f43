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

	"github.com/hyperplane-ml/hyperplane/learner"
)

// defaultCurveWindow is how many labeled examples a point of train's
// learning curve measures by default.
const defaultCurveWindow = 10000

// curve is the learning curve of a train's first pass, measured
// prequentially: a point every window labeled examples, with the
// accuracy over that window and over the stream so far.
type curve struct {
	window  uint64
	labeled uint64 // labeled examples learned
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
}

func newCurve(window uint64) *curve { return &curve{window: window} }

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
	c.points = append(c.points, curvePoint{examples: mt.Examples, labeled: mt.Labeled, drifts: c.pending, window: window, accuracy: mt.Accuracy})
	c.at, c.pending = mt, 0
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

// csv writes a header and a line per point: examples, labeled,
// window_accuracy, accuracy, drifts (the changes of concept found in the
// window).
func (c *curve) csv(f *os.File) error {
	w := bufio.NewWriter(f)
	fmt.Fprintln(w, "examples,labeled,window_accuracy,accuracy,drifts")
	for _, p := range c.points {
		fmt.Fprintf(w, "%d,%d,%s,%s,%d\n", p.examples, p.labeled,
			strconv.FormatFloat(p.window, 'f', 6, 64), strconv.FormatFloat(p.accuracy, 'f', 6, 64), p.drifts)
	}
	return w.Flush()
}

// svg draws the window's accuracy and the stream's over the labeled
// examples learned.
func (c *curve) svg(f *os.File) error {
	p := plot.New()
	p.Title.Text = fmt.Sprintf("Prequential accuracy, windows of %d labeled examples", c.window)
	p.X.Label.Text = "labeled examples"
	p.Y.Label.Text = "accuracy"
	p.Add(plotter.NewGrid())
	window, overall := make(plotter.XYs, len(c.points)), make(plotter.XYs, len(c.points))
	for i, pt := range c.points {
		window[i] = plotter.XY{X: float64(pt.labeled), Y: pt.window}
		overall[i] = plotter.XY{X: float64(pt.labeled), Y: pt.accuracy}
	}
	for _, s := range []struct {
		name  string
		xys   plotter.XYs
		color color.Color
	}{
		{"window", window, color.RGBA{R: 31, G: 119, B: 180, A: 255}},
		{"so far", overall, color.RGBA{R: 255, G: 127, B: 14, A: 255}},
	} {
		l, err := plotter.NewLine(s.xys)
		if err != nil {
			return err
		}
		l.Color = s.color
		l.Width = vg.Points(1.5)
		p.Add(l)
		p.Legend.Add(s.name, l)
	}
	// A change of concept the detector found: a dashed line at the
	// labeled examples learned when it did.
	for i, at := range c.driftsLabeled() {
		l, err := plotter.NewLine(plotter.XYs{{X: at, Y: 0}, {X: at, Y: 1}})
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
	p.Y.Min, p.Y.Max = 0, 1
	p.Legend.Top, p.Legend.Left = false, false
	w, err := p.WriterTo(8*vg.Inch, 4*vg.Inch, "svg")
	if err != nil {
		return err
	}
	_, err = w.WriteTo(f)
	return err
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
