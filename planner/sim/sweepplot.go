package sim

import (
	"fmt"
	"image/color"
	"io"
	"slices"

	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// sizeColors tells the cluster sizes of a sweep apart.
var sizeColors = []color.RGBA{
	{R: 0xd6, G: 0x27, B: 0x28, A: 0xff},
	{R: 0x2c, G: 0xa0, B: 0x2c, A: 0xff},
	{R: 0x1f, G: 0x77, B: 0xb4, A: 0xff},
	{R: 0x94, G: 0x67, B: 0xbd, A: 0xff},
}

// WriteSweepPlot draws elastic's average JCT over Tiresias' against load:
// one dot per workload and size (held-out workloads as crosses), and per
// size factor the median (solid) and worst (dashed) over the workloads.
func WriteSweepPlot(w io.Writer, title string, ps []SweepPoint) error {
	p := newPlot(title, "load (arrival rate x the trace's, log scale)", "elastic / tiresias average JCT")
	p.X.Tick.Marker = valueTicks{}
	var sizes, loads []float64
	for _, pt := range ps {
		if !slices.Contains(sizes, pt.SizeFactor) {
			sizes = append(sizes, pt.SizeFactor)
		}
		if !slices.Contains(loads, pt.Load) {
			loads = append(loads, pt.Load)
		}
	}
	slices.Sort(sizes)
	slices.Sort(loads)
	for i, sf := range sizes {
		c := sizeColors[i%len(sizeColors)]
		var med, worst plotter.XYs
		for _, l := range loads {
			var v []float64
			var tune, held plotter.XYs
			for _, pt := range ps {
				if pt.SizeFactor != sf || pt.Load != l {
					continue
				}
				v = append(v, pt.VsTiresias)
				// Spread the dots of one load a little by size.
				xy := plotter.XY{X: l * (1 + 0.04*float64(i-len(sizes)/2)), Y: pt.VsTiresias}
				if pt.Set == "heldout" {
					held = append(held, xy)
				} else {
					tune = append(tune, xy)
				}
			}
			if len(v) == 0 {
				continue
			}
			s := Summarize(pointsOf(v), "")
			med = append(med, plotter.XY{X: l, Y: s.MedianVsTiresias})
			worst = append(worst, plotter.XY{X: l, Y: s.WorstVsTiresias})
			for k, set := range []plotter.XYs{tune, held} {
				if len(set) == 0 {
					continue
				}
				sc, err := plotter.NewScatter(set)
				if err != nil {
					return fmt.Errorf("plot: %w", err)
				}
				sc.Color = c
				sc.Radius = vg.Points(2.5)
				sc.Shape = []draw.GlyphDrawer{draw.CircleGlyph{}, draw.CrossGlyph{}}[k]
				p.Add(sc)
			}
		}
		for k, line := range []plotter.XYs{med, worst} {
			if len(line) == 0 {
				continue
			}
			l, err := plotter.NewLine(line)
			if err != nil {
				return fmt.Errorf("plot: %w", err)
			}
			l.Color = c
			l.Width = vg.Points(2)
			if k == 1 {
				l.Dashes = []vg.Length{vg.Points(6), vg.Points(3)}
			}
			p.Add(l)
			p.Legend.Add(fmt.Sprintf("%gx natural size, %s", sf, []string{"median", "worst"}[k]), l)
		}
	}
	aim, err := plotter.NewLine(plotter.XYs{{X: loads[0], Y: 0.8}, {X: loads[len(loads)-1], Y: 0.8}})
	if err != nil {
		return fmt.Errorf("plot: %w", err)
	}
	aim.Color = color.RGBA{A: 0xff}
	aim.Dashes = []vg.Length{vg.Points(2), vg.Points(2)}
	p.Add(aim)
	p.Legend.Add("0.8 (aim)", aim)
	return writePNG(w, p)
}

// pointsOf wraps ratios to Tiresias as points, to summarise them.
func pointsOf(v []float64) []SweepPoint {
	out := make([]SweepPoint, len(v))
	for i, x := range v {
		out[i].VsTiresias = x
	}
	return out
}
