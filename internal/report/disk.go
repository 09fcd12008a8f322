package report

import (
	"fmt"
	"html/template"
	"io"
	"math"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"

	"github.com/erplab/erplab/internal/disk"
)

// DiskCharts draws the storage comparison of `erplab disk`: per micro
// pattern a bar chart of the median operations per second by path, per
// macro operation one of the median time (less is better), both on a
// linear axis from 0 with the repeats' range (min-max) as an error bar and
// the median printed above each bar, and the temp-file churn's create
// rate as the directory fills (the median run of each path).
func DiskCharts(c disk.Comparison) ([]Chart, error) {
	var out []Chart
	add := chartAdder(&out)
	label := func(path string) string {
		if pr, ok := c.PathResultOf(path); ok {
			return path + " (" + pr.FSType + ")"
		}
		return path
	}
	for i, pat := range disk.Patterns() {
		var names []string
		var spreads []disk.Spread
		for _, m := range c.Micro {
			if r, ok := m.Result(pat); ok {
				names, spreads = append(names, label(m.Path)), append(spreads, r.OpsPerS)
			}
		}
		if len(spreads) == 0 {
			continue
		}
		p, err := pathBars(fmt.Sprintf("%s: operations per second, median of %d repeats, whisker = range (more is better)", pat, c.Repeats), "ops/s", "%.0f", names, spreads)
		if err := add(fmt.Sprintf("micro-%d", i), p, err); err != nil {
			return nil, err
		}
	}
	for i, pat := range disk.Patterns() {
		p := plot.New()
		p.Title.Text = pat + ": files created per second as the directory fills (median run)"
		p.X.Label.Text = "tenth of the files created"
		p.Y.Label.Text = "files/s"
		p.Legend.Top = true
		p.Add(plotter.NewGrid())
		lines := 0
		for j, m := range c.Micro {
			r, ok := m.Result(pat)
			if !ok {
				continue
			}
			rate := r.MedianRun().RateOverTime
			if len(rate) == 0 {
				continue
			}
			pts := make(plotter.XYs, len(rate))
			for k, v := range rate {
				pts[k].X, pts[k].Y = float64(k+1), v
			}
			if err := addLine(p, label(m.Path), pts, palette(j), nil); err != nil {
				return nil, err
			}
			lines++
		}
		if lines == 0 {
			continue
		}
		if err := add(fmt.Sprintf("churn-%d", i), p, nil); err != nil {
			return nil, err
		}
	}
	for i, op := range disk.MacroOps() {
		var names []string
		var spreads []disk.Spread
		for _, m := range c.Macro {
			if o, ok := m.Op(op); ok {
				names, spreads = append(names, m.Path), append(spreads, o.Ms)
			}
		}
		if len(spreads) == 0 {
			continue
		}
		p, err := pathBars(fmt.Sprintf("%s: time, median of %d repeats, whisker = range (less is better)", op, c.Repeats), "ms", "%.1f", names, spreads)
		if err := add(fmt.Sprintf("macro-%d", i), p, err); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// rangeBars are the medians with their min-max as y errors.
type rangeBars struct {
	plotter.XYs
	plotter.YErrors
}

// pathBars is a bar chart of the median per path on a linear axis from
// 0, the range of the repeats as error bars and the median printed
// (with verb) above each bar.
func pathBars(title, ylabel, verb string, paths []string, spreads []disk.Spread) (*plot.Plot, error) {
	p := plot.New()
	p.Title.Text = title
	p.Y.Label.Text = ylabel
	p.Add(plotter.NewGrid())
	vals := make(plotter.Values, len(spreads))
	rb := rangeBars{XYs: make(plotter.XYs, len(spreads)), YErrors: make(plotter.YErrors, len(spreads))}
	lbl := plotter.XYLabels{XYs: make(plotter.XYs, len(spreads)), Labels: make([]string, len(spreads))}
	top := 0.0
	for i, s := range spreads {
		vals[i] = s.Median
		rb.XYs[i] = plotter.XY{X: float64(i), Y: s.Median}
		rb.YErrors[i].Low, rb.YErrors[i].High = s.Median-s.Min, s.Max-s.Median
		lbl.XYs[i] = plotter.XY{X: float64(i), Y: math.Max(s.Max, s.Median)}
		lbl.Labels[i] = fmt.Sprintf(verb, s.Median)
		top = math.Max(top, math.Max(s.Max, s.Median))
	}
	bc, err := plotter.NewBarChart(vals, vg.Points(40))
	if err != nil {
		return nil, fmt.Errorf("report: %s: %w", title, err)
	}
	bc.Color = palette(0)
	bc.LineStyle.Width = 0
	p.Add(bc)
	eb, err := plotter.NewYErrorBars(rb)
	if err != nil {
		return nil, fmt.Errorf("report: %s: %w", title, err)
	}
	p.Add(eb)
	labels, err := plotter.NewLabels(lbl)
	if err != nil {
		return nil, fmt.Errorf("report: %s: %w", title, err)
	}
	for i := range labels.TextStyle {
		labels.TextStyle[i].XAlign = draw.XCenter
	}
	labels.Offset = vg.Point{Y: vg.Points(3)}
	p.Add(labels)
	p.Y.Min = 0
	if top > 0 {
		p.Y.Max = top * 1.15 // room for the labels
	}
	p.NominalX(paths...)
	p.X.Min, p.X.Max = -0.6, float64(len(paths))-0.4
	p.X.Tick.Label.Rotation = math.Pi / 12
	p.X.Tick.Label.XAlign = draw.XRight
	return p, nil
}

// diskPage is the self-contained page of `erplab disk --html`.
const diskPage = `<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>erplab disk</title>
<link rel="icon" href="data:,">
<style>
body{font-family:sans-serif;margin:2em;color:#222}
table{border-collapse:collapse;margin:0.5em 0 1.5em}
th,td{border:1px solid #ccc;padding:3px 8px;text-align:right}
th:first-child,td:first-child{text-align:left}
th{background:#f0f0f0}
.chart{margin:1em 0}
</style></head><body>
<h1>erplab disk: storage compared by database operations</h1>
<p>Raw device speed does not predict database speed: compare the real operations (macro) as well as the patterns (micro).
Every figure is the median of {{.Repeats}} repeats interleaved across the paths, with their range [min-max].</p>
<p>{{.RuleNote}}.</p>
{{if .Macro}}<h2>Macro: ERP operations on a tablespace per path (ms, less is better; rank in brackets, = tied)</h2>
<table><tr><th>path</th><th>tablespace MiB</th>{{range .MacroOps}}<th>{{.}}</th>{{end}}<th>rank</th></tr>
{{range .MacroRows}}<tr><td>{{.Path}}</td><td>{{printf "%.1f" .MiB}}</td>{{range .Cells}}<td>{{.}}</td>{{end}}<td>{{.Rank}}</td></tr>{{end}}
</table>
<p>Rank: by the sum of the operations' ranks (data load not counted). {{.WALNote}}.</p>{{end}}
{{if .Micro}}<h2>Micro: PostgreSQL I/O patterns (ops/s, more is better)</h2>
<table><tr><th>pattern</th><th>rank</th><th>path</th><th>fs</th><th>ops/s [min-max]</th><th>p50 µs</th><th>p99 µs</th><th>vs next</th><th>note</th></tr>
{{range .MicroRows}}<tr><td>{{.Pattern}}</td><td>{{.Rank}}</td><td>{{.Path}}</td><td>{{.FS}}</td><td>{{.Ops}}</td><td>{{printf "%.0f" .P50}}</td><td>{{printf "%.0f" .P99}}</td><td>{{.Versus}}</td><td>{{.Note}}</td></tr>{{end}}
</table>{{end}}
<h2>Charts</h2>
<p>Linear axes from 0; each bar is the median, the whisker the range of the repeats, the number the median.</p>
{{range .Charts}}<div class="chart" id="{{.ID}}">{{.SVG}}</div>
{{end}}
</body></html>
`

type diskMicroRow struct {
	Pattern, Rank, Path, FS, Ops, Versus, Note string
	P50, P99                                   float64
}

type diskMacroRow struct {
	Path  string
	MiB   float64
	Cells []string
	Rank  string
}

// WriteDiskHTML writes the storage comparison as one self-contained HTML
// page (inline CSS and SVG, no scripts, nothing fetched): the macro
// ranking table like the field's, the micro table in ranking order, the
// tie rule, and DiskCharts. Errors come from drawing and the template.
func WriteDiskHTML(w io.Writer, c disk.Comparison) error {
	charts, err := DiskCharts(c)
	if err != nil {
		return err
	}
	data := struct {
		Micro, Macro      bool
		Repeats           int
		RuleNote, WALNote string
		MacroOps          []string
		MacroRows         []diskMacroRow
		MicroRows         []diskMicroRow
		Charts            []struct {
			ID  string
			SVG template.HTML
		}
	}{Micro: len(c.Micro) > 0, Macro: len(c.Macro) > 0, Repeats: c.Repeats, RuleNote: disk.RuleNote(c.Rule, c.Repeats),
		WALNote: c.WALNote(), MacroOps: disk.MacroOps()}
	for _, ov := range c.MacroOverall {
		m, _ := c.MacroResultOf(ov.Path)
		row := diskMacroRow{Path: m.Path, MiB: float64(m.TablespaceBytes) / (1 << 20), Rank: disk.RankLabel(ov.Rank, ov.Tied)}
		for _, op := range disk.MacroOps() {
			row.Cells = append(row.Cells, c.MacroCell(m.Path, op))
		}
		data.MacroRows = append(data.MacroRows, row)
	}
	for _, rk := range c.MicroRanking {
		for k, pl := range rk.Places {
			pr, _ := c.PathResultOf(pl.Path)
			r, _ := pr.Result(rk.Measure)
			data.MicroRows = append(data.MicroRows, diskMicroRow{Pattern: rk.Measure, Rank: disk.RankLabel(pl.Rank, pl.Tied), Path: pl.Path,
				FS: pr.FSType, Ops: disk.FormatSpread("%.0f", r.OpsPerS), Versus: rk.VersusNext(k), Note: r.Note, P50: r.P50us, P99: r.P99us})
		}
	}
	for _, ch := range charts {
		data.Charts = append(data.Charts, struct {
			ID  string
			SVG template.HTML
		}{ch.ID, template.HTML(ch.SVG)}) // SVG drawn by gonum/plot, not user input
	}
	t, err := template.New("disk").Parse(diskPage)
	if err != nil {
		return fmt.Errorf("report: disk page: %w", err)
	}
	if err := t.Execute(w, data); err != nil {
		return fmt.Errorf("report: disk page: %w", err)
	}
	return nil
}
