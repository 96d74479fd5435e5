package sweep

import (
	"fmt"
	"image/color"
	"math"
	"path/filepath"
	"sort"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// PlotFormats are the files each plot is written as.
var PlotFormats = []string{"png", "svg"}

// Plot draws the sweep's plots into dir, each as PNG and SVG, and returns
// the files written:
//   - throughput: samples/s against ranks, a line per strategy;
//   - efficiency-weak, efficiency-strong: scaling efficiency against ranks;
//   - breakdown: each run's step time as stacked bars (compute, comm outside
//     waiting, waiting);
//   - accuracy: test accuracy against wall time, a line per run at the
//     largest rank count.
//
// Only runs that ended OK are drawn.
func Plot(rows []Row, dir string) ([]string, error) {
	var ok []Row
	for _, r := range rows {
		if r.Status == OK {
			ok = append(ok, r)
		}
	}
	allKeys, _ := seriesKeys(ok)
	st := styles{}
	for i, k := range allKeys {
		st[k] = i
	}
	type plotFn func([]Row) (*plot.Plot, vg.Length, error)
	var files []string
	for _, p := range []struct {
		name string
		fn   plotFn
	}{
		{"throughput", st.throughputPlot},
		{"efficiency-weak", func(rs []Row) (*plot.Plot, vg.Length, error) {
			return st.efficiencyPlot(rs, "Weak scaling: step time at the baseline / step time", func(r Row) float64 { return r.WeakEff })
		}},
		{"efficiency-strong", func(rs []Row) (*plot.Plot, vg.Length, error) {
			return st.efficiencyPlot(rs, "Strong scaling: baseline time × ranks / (time × ranks)", func(r Row) float64 { return r.StrongEff })
		}},
		{"breakdown", breakdownPlot},
		{"accuracy", st.accuracyPlot},
	} {
		pl, width, err := p.fn(ok)
		if err != nil {
			return files, fmt.Errorf("%s: %w", p.name, err)
		}
		for _, ext := range PlotFormats {
			path := filepath.Join(dir, p.name+"."+ext)
			if err := pl.Save(width, 10*vg.Centimeter, path); err != nil {
				return files, fmt.Errorf("%s: %w", path, err)
			}
			files = append(files, path)
		}
	}
	return files, nil
}

// styles is the colour, dash and marker index of each line's key, the
// same in every plot of a sweep.
type styles map[string]int

// seriesKeys names a line: the strategy, with the model and batch when the
// sweep has several.
func seriesKeys(rows []Row) (keys []string, of func(Row) string) {
	models, batches := map[string]bool{}, map[int]bool{}
	for _, r := range rows {
		models[r.Model] = true
		batches[r.Batch] = true
	}
	of = func(r Row) string {
		k := r.Strategy
		if len(models) > 1 {
			k = r.Model + " " + k
		}
		if len(batches) > 1 {
			k += fmt.Sprintf(" b%d", r.Batch)
		}
		return k
	}
	seen := map[string]bool{}
	for _, r := range rows {
		if k := of(r); !seen[k] {
			seen[k] = true
			keys = append(keys, k)
		}
	}
	return keys, of
}

func (st styles) linesByRanks(p *plot.Plot, rows []Row, y func(Row) float64) error {
	keys, of := seriesKeys(rows)
	for _, k := range keys {
		i := st[k]
		var xy plotter.XYs
		for _, r := range rows {
			if of(r) == k && !math.IsNaN(y(r)) && !math.IsInf(y(r), 0) {
				xy = append(xy, plotter.XY{X: float64(r.Ranks), Y: y(r)})
			}
		}
		if len(xy) == 0 {
			continue
		}
		sort.Slice(xy, func(a, b int) bool { return xy[a].X < xy[b].X })
		l, pts, err := plotter.NewLinePoints(xy)
		if err != nil {
			return err
		}
		l.Color, pts.Color = plotutil.Color(i), plotutil.Color(i)
		l.Dashes = plotutil.Dashes(i)
		pts.Shape = plotutil.Shape(i)
		p.Add(l, pts)
		p.Legend.Add(k, l, pts)
	}
	p.X.Label.Text = "ranks"
	p.X.Tick.Marker = rankTicks(rows)
	p.Legend.Top = true
	legendRoom(p)
	p.Add(plotter.NewGrid())
	return nil
}

// legendRoom widens p's x range by 40% on the right, where the legend
// (top or bottom right) then covers no line.
func legendRoom(p *plot.Plot) {
	if p.X.Max > p.X.Min {
		p.X.Max += 0.4 * (p.X.Max - p.X.Min)
	}
}

// rankTicks marks the rank counts the sweep ran.
func rankTicks(rows []Row) plot.Ticker {
	seen := map[int]bool{}
	var ticks plot.ConstantTicks
	for _, r := range rows {
		if !seen[r.Ranks] {
			seen[r.Ranks] = true
			ticks = append(ticks, plot.Tick{Value: float64(r.Ranks), Label: fmt.Sprint(r.Ranks)})
		}
	}
	sort.Slice(ticks, func(a, b int) bool { return ticks[a].Value < ticks[b].Value })
	return ticks
}

func (st styles) throughputPlot(rows []Row) (*plot.Plot, vg.Length, error) {
	p := plot.New()
	p.Title.Text = "Training throughput"
	p.Y.Label.Text = "samples/s"
	p.Y.Min = 0
	return p, 16 * vg.Centimeter, st.linesByRanks(p, rows, func(r Row) float64 { return r.SamplesPerSec })
}

func (st styles) efficiencyPlot(rows []Row, title string, eff func(Row) float64) (*plot.Plot, vg.Length, error) {
	p := plot.New()
	p.Title.Text = title
	p.Y.Label.Text = "efficiency (1 = ideal)"
	p.Y.Min = 0
	if err := st.linesByRanks(p, rows, eff); err != nil {
		return nil, 0, err
	}
	ideal := plotter.NewFunction(func(float64) float64 { return 1 })
	ideal.Color = color.Gray{Y: 128}
	ideal.Dashes = []vg.Length{vg.Points(2), vg.Points(2)}
	p.Add(ideal)
	p.Y.Max = math.Max(p.Y.Max, 1.1)
	return p, 16 * vg.Centimeter, nil
}

func breakdownPlot(rows []Row) (*plot.Plot, vg.Length, error) {
	p := plot.New()
	p.Title.Text = "Time per step"
	p.Y.Label.Text = "ms per step"
	var compute, comm, wait plotter.Values
	var names []string
	_, of := seriesKeys(rows)
	for _, r := range rows {
		w := r.WaitMs
		if math.IsNaN(w) {
			w = 0
		}
		compute = append(compute, math.Max(0, r.ComputeMs))
		comm = append(comm, math.Max(0, r.CommMs-w))
		wait = append(wait, w)
		names = append(names, fmt.Sprintf("%s\nn=%d", of(r), r.Ranks))
	}
	width := vg.Points(14)
	if len(rows) > 0 {
		bc, err := plotter.NewBarChart(compute, width)
		if err != nil {
			return nil, 0, err
		}
		bm, err := plotter.NewBarChart(comm, width)
		if err != nil {
			return nil, 0, err
		}
		bw, err := plotter.NewBarChart(wait, width)
		if err != nil {
			return nil, 0, err
		}
		bc.Color, bm.Color, bw.Color = plotutil.Color(0), plotutil.Color(1), plotutil.Color(2)
		bc.LineStyle.Width, bm.LineStyle.Width, bw.LineStyle.Width = 0, 0, 0
		bm.StackOn(bc)
		bw.StackOn(bm)
		p.Add(bc, bm, bw)
		p.Legend.Add("compute", bc)
		p.Legend.Add("communication (allreduce: waits included)", bm)
		p.Legend.Add("waiting for peers (ps, dpsgd, adpsgd)", bw)
		p.Legend.Top = true
		p.NominalX(names...)
		p.X.Tick.Label.Rotation = math.Pi / 4
		p.X.Tick.Label.XAlign = draw.XRight
		p.X.Tick.Label.YAlign = draw.YCenter
	}
	return p, vg.Length(math.Max(16, 1.6*float64(len(rows))+4)) * vg.Centimeter, nil
}

func (st styles) accuracyPlot(rows []Row) (*plot.Plot, vg.Length, error) {
	p := plot.New()
	most := 0
	for _, r := range rows {
		most = max(most, r.Ranks)
	}
	p.Title.Text = fmt.Sprintf("Test accuracy against wall time (%d ranks)", most)
	p.X.Label.Text = "wall time since the start of training (s)"
	p.Y.Label.Text = "test accuracy"
	var last []Row
	for _, r := range rows {
		if r.Ranks == most && len(r.Accuracy) > 0 {
			last = append(last, r)
		}
	}
	keys, of := seriesKeys(last)
	for _, k := range keys {
		i := st[k]
		for _, r := range last {
			if of(r) != k {
				continue
			}
			var xy plotter.XYs
			for _, a := range r.Accuracy {
				xy = append(xy, plotter.XY{X: a.WallSec, Y: a.Accuracy})
			}
			l, pts, err := plotter.NewLinePoints(xy)
			if err != nil {
				return nil, 0, err
			}
			l.Color, pts.Color = plotutil.Color(i), plotutil.Color(i)
			l.Dashes = plotutil.Dashes(i)
			pts.Shape = plotutil.Shape(i)
			p.Add(l, pts)
			p.Legend.Add(k, l, pts)
		}
	}
	legendRoom(p)
	p.Add(plotter.NewGrid())
	return p, 16 * vg.Centimeter, nil
}
