package curve

import (
	"fmt"
	"image/color"
	"io"
	"math"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgsvg"

	"github.com/hyperplane-ml/hyperplane/learner/compare"
)

// palette colours the challengers of a comparison chart in turn.
var palette = []color.RGBA{
	{R: 31, G: 119, B: 180, A: 255}, {R: 255, G: 127, B: 14, A: 255}, {R: 44, G: 160, B: 44, A: 255},
	{R: 214, G: 39, B: 40, A: 255}, {R: 148, G: 103, B: 189, A: 255}, {R: 140, G: 86, B: 75, A: 255},
}

// WriteComparisonSVG draws each challenger's running difference from the
// model over the paired labeled examples, with its confidence sequence's
// band as thin dashed lines of the same colour: above, the model's mean
// log-loss minus the challenger's; below, the challenger's accuracy minus
// the model's. Both are positive when the challenger is better; a band
// that leaves zero is a verdict. names[i] is traces[i]'s challenger.
func WriteComparisonSVG(w io.Writer, alpha float64, names []string, traces []*compare.Trace) error {
	title := func(what string) string {
		return fmt.Sprintf("%s, with its %g%% confidence sequence", what, 100*(1-alpha))
	}
	ll := newPanel(title("Log-loss: the model's minus the challenger's"), "difference in mean log-loss")
	acc := newPanel(title("Accuracy: the challenger's minus the model's"), "difference in accuracy")
	type pick func(compare.TracePoint) float64
	spans := [2]float64{1e-3, 1e-3}
	for i, tr := range traces {
		pts := tr.Points()
		c := palette[i%len(palette)]
		series := func(y pick) plotter.XYs {
			xys := make(plotter.XYs, len(pts))
			for j, p := range pts {
				xys[j] = plotter.XY{X: float64(p.Examples), Y: y(p)}
			}
			return xys
		}
		for _, panel := range []struct {
			p               *plot.Plot
			span            *float64
			diff, low, high pick
		}{
			{ll, &spans[0], func(p compare.TracePoint) float64 { return p.LogLossDiff }, func(p compare.TracePoint) float64 { return p.LogLossLow }, func(p compare.TracePoint) float64 { return p.LogLossHigh }},
			{acc, &spans[1], func(p compare.TracePoint) float64 { return p.AccuracyDiff }, func(p compare.TracePoint) float64 { return p.AccuracyLow }, func(p compare.TracePoint) float64 { return p.AccuracyHigh }},
		} {
			if len(pts) == 0 {
				continue
			}
			// The first examples' bands span the whole range of a loss:
			// the chart shows the differences and the bands from a
			// twentieth of the stream on.
			from := pts[len(pts)-1].Examples / 20
			for _, p := range pts {
				*panel.span = max(*panel.span, 1.2*math.Abs(panel.diff(p)))
				if p.Examples >= from {
					*panel.span = max(*panel.span, math.Abs(panel.low(p)), math.Abs(panel.high(p)))
				}
			}
			if err := addLines(panel.p, []line{{names[i], series(panel.diff), c}}); err != nil {
				return err
			}
			for _, b := range []pick{panel.low, panel.high} {
				l, err := plotter.NewLine(series(b))
				if err != nil {
					return err
				}
				l.Color = c
				l.Width = vg.Points(0.75)
				l.Dashes = []vg.Length{vg.Points(3), vg.Points(2)}
				panel.p.Add(l)
			}
		}
	}
	for _, p := range []*plot.Plot{ll, acc} {
		zero := plotter.NewFunction(func(float64) float64 { return 0 })
		zero.Color = color.Gray{Y: 80}
		p.Add(zero)
		p.Legend.Top, p.Legend.Left = true, false
		p.X.Label.Text = "paired labeled examples"
	}
	for i, p := range []*plot.Plot{ll, acc} {
		p.Y.Min, p.Y.Max = -spans[i], spans[i]
	}
	canvas := vgsvg.New(8*vg.Inch, 8*vg.Inch)
	tiles := draw.Tiles{Rows: 2, Cols: 1, PadY: vg.Points(12)}
	panels := [][]*plot.Plot{{ll}, {acc}}
	for i, row := range plot.Align(panels, tiles, draw.New(canvas)) {
		panels[i][0].Draw(row[0])
	}
	_, err := canvas.WriteTo(w)
	return err
}
