package sim

import (
	"fmt"
	"image/color"
	"io"
	"math"
	"strconv"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// policyColors keeps each policy's colour the same across plots.
var policyColors = map[Policy]color.RGBA{
	FIFO:           {R: 0x99, G: 0x99, B: 0x99, A: 0xff},
	Tiresias:       {R: 0x1f, G: 0x77, B: 0xb4, A: 0xff},
	ElasticRestart: {R: 0xff, G: 0x7f, B: 0x0e, A: 0xff},
	Elastic:        {R: 0x2c, G: 0xa0, B: 0x2c, A: 0xff},
}

// policyColor is the policy's colour, black for one policyColors lacks.
func policyColor(p Policy) color.RGBA {
	if c, ok := policyColors[p]; ok {
		return c
	}
	return color.RGBA{A: 0xff}
}

// newPlot is a plot of the given title and axis labels, its X axis on a
// log scale, with a grid and its legend in the top left corner.
func newPlot(title, xLabel, yLabel string) *plot.Plot {
	p := plot.New()
	p.Title.Text = title
	p.X.Label.Text = xLabel
	p.Y.Label.Text = yLabel
	p.X.Scale = plot.LogScale{}
	p.Add(plotter.NewGrid())
	p.Legend.Top = true
	p.Legend.Left = true
	p.Legend.XOffs = vg.Points(8)
	p.Legend.YOffs = -vg.Points(8)
	return p
}

// WriteJCTPlot draws the CDF of job completion time (hours, log scale) of
// each result as a PNG of the given title.
func WriteJCTPlot(w io.Writer, title string, rs []Result) error {
	p := newPlot(title, "job completion time (hours, log scale)", "fraction of jobs completed within")
	p.X.Tick.Marker = plot.LogTicks{Prec: -1}
	p.Y.Min, p.Y.Max = 0, 1
	for i, r := range rs {
		if len(r.JCTs) == 0 {
			continue
		}
		pts := make(plotter.XYs, len(r.JCTs))
		for k, v := range r.JCTs {
			pts[k].X = max(v/3600, 1e-3)
			pts[k].Y = float64(k+1) / float64(len(r.JCTs))
		}
		l, err := plotter.NewLine(pts)
		if err != nil {
			return fmt.Errorf("plot %s: %w", r.Policy, err)
		}
		l.Color = policyColor(r.Policy)
		l.Width = vg.Points(2)
		l.Dashes = [][]vg.Length{nil, {vg.Points(6), vg.Points(3)}}[i%2]
		p.Add(l)
		p.Legend.Add(fmt.Sprintf("%s (avg %.1f h)", r.Policy, r.AvgJCT/3600), l)
	}
	return writePNG(w, p)
}

// WriteLoadPlot draws average JCT (hours, log scale) against the load
// factor, one line per policy, as a PNG of the given title.
func WriteLoadPlot(w io.Writer, title string, rs []Result) error {
	p := newPlot(title, "load (arrival rate x the trace's, log scale)", "average job completion time (hours, log scale)")
	p.Y.Scale = plot.LogScale{}
	p.X.Tick.Marker, p.Y.Tick.Marker = valueTicks{}, valueTicks{}
	var order []Policy
	byPolicy := map[Policy]plotter.XYs{}
	for _, r := range rs {
		if _, ok := byPolicy[r.Policy]; !ok {
			order = append(order, r.Policy)
		}
		byPolicy[r.Policy] = append(byPolicy[r.Policy], plotter.XY{X: r.Load, Y: max(r.AvgJCT/3600, 1e-3)})
	}
	for _, pol := range order {
		pts := byPolicy[pol]
		l, s, err := plotter.NewLinePoints(pts)
		if err != nil {
			return fmt.Errorf("plot %s: %w", pol, err)
		}
		c := policyColor(pol)
		l.Color, s.Color = c, c
		l.Width = vg.Points(2)
		s.Shape = draw.CircleGlyph{}
		s.Radius = vg.Points(3)
		p.Add(l, s)
		p.Legend.Add(string(pol), l, s)
	}
	return writePNG(w, p)
}

// writePNG writes p as a 9 x 5.5 inch PNG, its legend's samples 30 points wide.
func writePNG(w io.Writer, p *plot.Plot) error {
	p.Legend.ThumbnailWidth = vg.Points(30)
	wt, err := p.WriterTo(9*vg.Inch, 5.5*vg.Inch, "png")
	if err != nil {
		return fmt.Errorf("plot: %w", err)
	}
	if _, err := wt.WriteTo(w); err != nil {
		return fmt.Errorf("plot: %w", err)
	}
	return nil
}

// valueTicks labels 1, 2 and 5 times each power of ten in range, and the
// range's ends, so that a log axis spanning less than a decade still reads.
type valueTicks struct{}

func (valueTicks) Ticks(lo, hi float64) []plot.Tick {
	var ts []plot.Tick
	if lo <= 0 || hi <= lo {
		return ts
	}
	for e := math.Floor(math.Log10(lo)); e <= math.Ceil(math.Log10(hi)); e++ {
		for _, m := range []float64{1, 2, 5} {
			v := m * math.Pow(10, e)
			if v >= lo*0.999 && v <= hi*1.001 {
				ts = append(ts, plot.Tick{Value: v, Label: strconv.FormatFloat(v, 'g', 4, 64)})
			}
		}
	}
	for _, v := range []float64{lo, hi} {
		near := false
		for _, t := range ts {
			near = near || math.Abs(math.Log10(t.Value/v)) < 0.08
		}
		if !near {
			ts = append(ts, plot.Tick{Value: v, Label: strconv.FormatFloat(v, 'g', 3, 64)})
		}
	}
	return ts
}
