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
	// at is the model's counters at the last point.
	at     learner.Metrics
	points []curvePoint
}

// curvePoint is one point of a learning curve.
type curvePoint struct {
	examples, labeled uint64
	// window is the accuracy over the labeled examples since the point
	// before (a full window but for the last point); accuracy over every
	// labeled example so far.
	window, accuracy float64
}

func newCurve(window uint64) *curve { return &curve{window: window} }

// learned counts an example the model just learned, and adds a point when
// a window is full. m is the model.
func (c *curve) learned(x *learner.Example, m *learner.Model) {
	if !x.Labeled {
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
	c.points = append(c.points, curvePoint{examples: mt.Examples, labeled: mt.Labeled, window: window, accuracy: mt.Accuracy})
	c.at = mt
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
// window_accuracy, accuracy.
func (c *curve) csv(f *os.File) error {
	w := bufio.NewWriter(f)
	fmt.Fprintln(w, "examples,labeled,window_accuracy,accuracy")
	for _, p := range c.points {
		fmt.Fprintf(w, "%d,%d,%s,%s\n", p.examples, p.labeled,
			strconv.FormatFloat(p.window, 'f', 6, 64), strconv.FormatFloat(p.accuracy, 'f', 6, 64))
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
	p.Legend.Top, p.Legend.Left = false, false
	w, err := p.WriterTo(8*vg.Inch, 4*vg.Inch, "svg")
	if err != nil {
		return err
	}
	_, err = w.WriteTo(f)
	return err
}
