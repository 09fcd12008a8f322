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
// pattern a bar chart of log10 of operations per second by path (tmpfs
// and disks differ by orders of magnitude), the temp-file churn's create
// rate as the directory fills, and per macro operation a bar chart of the
// mean time by path (less is better).
func DiskCharts(micro []disk.PathResult, macro []disk.MacroResult) ([]Chart, error) {
	var out []Chart
	add := chartAdder(&out)
	paths := make([]string, len(micro))
	for i, m := range micro {
		paths[i] = m.Path + " (" + m.FSType + ")"
	}
	for i, pat := range disk.Patterns() {
		vals := make(plotter.Values, len(micro))
		any := false
		for j, m := range micro {
			if r, ok := m.Result(pat); ok && r.OpsPerS > 0 {
				vals[j], any = r.OpsPerS, true
			}
		}
		if !any {
			continue
		}
		p, err := pathBars(pat+": operations per second, log10 (more is better)", "ops/s", paths, vals, true)
		if err := add(fmt.Sprintf("micro-%d", i), p, err); err != nil {
			return nil, err
		}
	}
	for i, pat := range disk.Patterns() {
		p := plot.New()
		p.Title.Text = pat + ": files created per second as the directory fills"
		p.X.Label.Text = "tenth of the files created"
		p.Y.Label.Text = "files/s"
		p.Legend.Top = true
		p.Add(plotter.NewGrid())
		lines := 0
		for j, m := range micro {
			r, ok := m.Result(pat)
			if !ok || len(r.RateOverTime) == 0 {
				continue
			}
			pts := make(plotter.XYs, len(r.RateOverTime))
			for k, v := range r.RateOverTime {
				pts[k].X, pts[k].Y = float64(k+1), v
			}
			if err := addLine(p, paths[j], pts, palette(j), nil); err != nil {
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
	mpaths := make([]string, len(macro))
	for i, m := range macro {
		mpaths[i] = m.Path
	}
	for i, op := range disk.MacroOps() {
		vals := make(plotter.Values, len(macro))
		any := false
		for j, m := range macro {
			if o, ok := m.Op(op); ok {
				vals[j], any = o.MeanMs, true
			}
		}
		if !any {
			continue
		}
		p, err := pathBars(op+": mean time (less is better)", "ms", mpaths, vals, false)
		if err := add(fmt.Sprintf("macro-%d", i), p, err); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// pathBars is a bar chart of one value per path.
func pathBars(title, ylabel string, paths []string, vals plotter.Values, logY bool) (*plot.Plot, error) {
	p := plot.New()
	p.Title.Text = title
	p.Y.Label.Text = ylabel
	p.Add(plotter.NewGrid())
	if logY {
		// Bars grow from 0, which a log axis cannot show: draw
		// log10 of the values on a linear axis instead.
		for i, v := range vals {
			vals[i] = math.Log10(math.Max(v, 1))
		}
		p.Y.Label.Text = "log10(" + ylabel + ")"
	}
	bc, err := plotter.NewBarChart(vals, vg.Points(40))
	if err != nil {
		return nil, fmt.Errorf("report: %s: %w", title, err)
	}
	bc.Color = palette(0)
	bc.LineStyle.Width = 0
	p.Add(bc)
	p.NominalX(paths...)
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
<p>Raw device speed does not predict database speed: compare the real operations (macro) as well as the patterns (micro).</p>
{{if .Macro}}<h2>Macro: ERP operations on a tablespace per path (ms, less is better; rank in brackets)</h2>
<table><tr><th>path</th><th>tablespace MiB</th>{{range .MacroOps}}<th>{{.}}</th>{{end}}</tr>
{{range .MacroRows}}<tr><td>{{.Path}}</td><td>{{printf "%.1f" .MiB}}</td>{{range .Cells}}<td>{{.}}</td>{{end}}</tr>{{end}}
</table>{{end}}
{{if .Micro}}<h2>Micro: PostgreSQL I/O patterns</h2>
<table><tr><th>pattern</th><th>path</th><th>fs</th><th>ops/s</th><th>p50 µs</th><th>p99 µs</th><th>note</th></tr>
{{range .MicroRows}}<tr><td>{{.Pattern}}</td><td>{{.Path}}</td><td>{{.FS}}</td><td>{{printf "%.0f" .OpsPerS}}</td><td>{{printf "%.0f" .P50}}</td><td>{{printf "%.0f" .P99}}</td><td>{{.Note}}</td></tr>{{end}}
</table>{{end}}
<h2>Charts</h2>
{{range .Charts}}<div class="chart" id="{{.ID}}">{{.SVG}}</div>
{{end}}
</body></html>
`

type diskMicroRow struct {
	Pattern, Path, FS, Note string
	OpsPerS, P50, P99       float64
}

type diskMacroRow struct {
	Path  string
	MiB   float64
	Cells []string
}

// WriteDiskHTML writes the storage comparison as one self-contained HTML
// page (inline CSS and SVG, no scripts, nothing fetched): the macro
// ranking table like the field's, the micro table, and DiskCharts.
func WriteDiskHTML(w io.Writer, micro []disk.PathResult, macro []disk.MacroResult) error {
	charts, err := DiskCharts(micro, macro)
	if err != nil {
		return err
	}
	data := struct {
		Micro, Macro bool
		MacroOps     []string
		MacroRows    []diskMacroRow
		MicroRows    []diskMicroRow
		Charts       []struct {
			ID  string
			SVG template.HTML
		}
	}{Micro: len(micro) > 0, Macro: len(macro) > 0, MacroOps: disk.MacroOps()}
	// rank[op][i] is path i's place for op, 1 = fastest.
	ranks := map[string][]int{}
	for _, op := range disk.MacroOps() {
		r := make([]int, len(macro))
		for place, i := range disk.RankMacro(macro, op) {
			r[i] = place + 1
		}
		ranks[op] = r
	}
	for i, m := range macro {
		row := diskMacroRow{Path: m.Path, MiB: float64(m.TablespaceBytes) / (1 << 20)}
		for _, op := range disk.MacroOps() {
			cell := "-"
			if o, ok := m.Op(op); ok {
				cell = fmt.Sprintf("%.1f", o.MeanMs)
				if r := ranks[op]; i < len(r) && r[i] > 0 {
					cell += fmt.Sprintf(" (%d)", r[i])
				}
			}
			row.Cells = append(row.Cells, cell)
		}
		data.MacroRows = append(data.MacroRows, row)
	}
	for _, pat := range disk.Patterns() {
		for _, m := range micro {
			if r, ok := m.Result(pat); ok {
				data.MicroRows = append(data.MicroRows, diskMicroRow{pat, m.Path, m.FSType, r.Note, r.OpsPerS, r.P50us, r.P99us})
			}
		}
	}
	for _, c := range charts {
		data.Charts = append(data.Charts, struct {
			ID  string
			SVG template.HTML
		}{c.ID, template.HTML(c.SVG)}) // SVG drawn by gonum/plot, not user input
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
