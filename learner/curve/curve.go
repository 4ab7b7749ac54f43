// Package curve writes a learning curve (learner.Curve): as CSV, a line
// per point, or as an SVG chart of two panels, the accuracy and the
// probabilities' measures.
package curve

import (
	"bufio"
	"fmt"
	"image/color"
	"io"
	"strconv"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgsvg"

	"github.com/hyperplane-ml/hyperplane/learner"
)

// CSVHeader names the columns of WriteCSV.
const CSVHeader = "examples,labeled,window_accuracy,accuracy,drifts," +
	"window_log_loss,log_loss,window_brier,brier,window_calibration_error,calibration_error,window_auc,auc"

// WriteCSV writes CSVHeader and a line per point of c: examples, labeled,
// window_accuracy, accuracy, drifts (the changes of concept found in the
// window), then the probabilities' log-loss, Brier score, expected
// calibration error and ROC AUC, each over the window and over the
// stream so far, with 6 decimals; the AUC's are empty for a multiclass
// model.
func WriteCSV(w io.Writer, c *learner.Curve) error {
	b := bufio.NewWriter(w)
	fmt.Fprintln(b, CSVHeader)
	num := func(v float64) string { return strconv.FormatFloat(v, 'f', 6, 64) }
	for _, p := range c.Points() {
		windowAUC, auc := "", ""
		if p.HasAUC {
			windowAUC, auc = num(p.WindowAUC), num(p.AUC)
		}
		fmt.Fprintf(b, "%d,%d,%s,%s,%d,%s,%s,%s,%s,%s,%s,%s,%s\n", p.Examples, p.Labeled, num(p.WindowAccuracy), num(p.Accuracy), p.Drifts,
			num(p.WindowLogLoss), num(p.LogLoss), num(p.WindowBrier), num(p.Brier), num(p.WindowCalibrationError), num(p.CalibrationError), windowAUC, auc)
	}
	return b.Flush()
}

// WriteSVG draws two panels over the labeled examples learned: the
// window's accuracy and the stream's; below, the window's log-loss, Brier
// score, expected calibration error and (binary) ROC AUC. A dashed line
// marks each change of concept found.
func WriteSVG(w io.Writer, c *learner.Curve) error {
	points := c.Points()
	acc := newPanel(fmt.Sprintf("Prequential accuracy, windows of %d labeled examples", c.Window()), "accuracy")
	series := func(y func(learner.CurvePoint) float64) plotter.XYs {
		xys := make(plotter.XYs, len(points))
		for i, pt := range points {
			xys[i] = plotter.XY{X: float64(pt.Labeled), Y: y(pt)}
		}
		return xys
	}
	if err := addLines(acc, []line{
		{"window", series(func(p learner.CurvePoint) float64 { return p.WindowAccuracy }), color.RGBA{R: 31, G: 119, B: 180, A: 255}},
		{"so far", series(func(p learner.CurvePoint) float64 { return p.Accuracy }), color.RGBA{R: 255, G: 127, B: 14, A: 255}},
	}); err != nil {
		return err
	}

	prob := newPanel(fmt.Sprintf("Probabilities, windows of %d labeled examples", c.Window()), "window's measure")
	lines := []line{
		{"log-loss", series(func(p learner.CurvePoint) float64 { return p.WindowLogLoss }), color.RGBA{R: 148, G: 103, B: 189, A: 255}},
		{"Brier score", series(func(p learner.CurvePoint) float64 { return p.WindowBrier }), color.RGBA{R: 44, G: 160, B: 44, A: 255}},
		{"calibration error", series(func(p learner.CurvePoint) float64 { return p.WindowCalibrationError }), color.RGBA{R: 140, G: 86, B: 75, A: 255}},
	}
	if len(points) > 0 && points[0].HasAUC {
		lines = append(lines, line{"ROC AUC", series(func(p learner.CurvePoint) float64 { return p.WindowAUC }), color.RGBA{R: 23, G: 190, B: 207, A: 255}})
	}
	if err := addLines(prob, lines); err != nil {
		return err
	}
	// The log-loss can pass 1; the other measures are within [0, 1].
	top := 1.0
	for _, p := range points {
		top = max(top, p.WindowLogLoss)
	}

	drifts := c.DriftsLabeled()
	for _, panel := range []struct {
		p   *plot.Plot
		top float64
	}{{acc, 1}, {prob, top}} {
		p := panel.p
		for i, at := range drifts {
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
	_, err := canvas.WriteTo(w)
	return err
}

// newPanel is a panel of the chart, with a grid.
func newPanel(title, y string) *plot.Plot {
	p := plot.New()
	p.Title.Text = title
	p.X.Label.Text = "labeled examples"
	p.Y.Label.Text = y
	p.Add(plotter.NewGrid())
	return p
}

// line is one line of a panel of the chart.
type line struct {
	name  string
	xys   plotter.XYs
	color color.Color
}

// addLines draws the lines on p, each in the legend.
func addLines(p *plot.Plot, lines []line) error {
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
