package report

import (
	"fmt"
	"html/template"
	"io"
	"math"
	"sort"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"

	"github.com/erplab/erplab/internal/capacity"
	"github.com/erplab/erplab/internal/results"
)

// capacityTopWaits is how many wait events the capacity chart draws.
const capacityTopWaits = 5

// byLoad is the judged steps of d (not the ones that ended the search
// without a verdict on the server) in load order, attempts in run order.
func byLoad(d *capacity.Document) []capacity.Step {
	var steps []capacity.Step
	for _, s := range d.Steps {
		if s.Outcome == capacity.OutcomeGood || s.Outcome == capacity.OutcomeBad {
			steps = append(steps, s)
		}
	}
	sort.SliceStable(steps, func(i, j int) bool { return steps[i].Load < steps[j].Load })
	return steps
}

// loadPlot is a chart against the load with the knee marked: a dashed
// vertical line at the capacity, a dotted one at the first bad load.
func loadPlot(d *capacity.Document, title, ylabel string) *plot.Plot {
	p := newPlot(title, ylabel)
	p.X.Label.Text = d.Unit
	p.X.Min = 0
	p.Y.Min = 0
	// Throughput, p95 and waits grow with the load: the top left is where
	// the data is not (the APDEX chart puts its legend bottom left).
	p.Legend.Top, p.Legend.Left = true, true
	return p
}

// markKnee draws the capacity and first-bad lines over p's Y range.
func markKnee(p *plot.Plot, d *capacity.Document) error {
	if math.IsInf(p.Y.Max, 0) || p.Y.Max <= p.Y.Min {
		p.Y.Max = p.Y.Min + 1 // no data
	}
	if math.IsInf(p.X.Max, 0) || p.X.Max <= p.X.Min {
		// no data: the loads the steps ran, as on the other charts
		p.X.Max = p.X.Min + 1
		for _, st := range byLoad(d) {
			p.X.Max = math.Max(p.X.Max, st.Load)
		}
	}
	if p.Y.Max != 1 && p.Y.Max != 100 && !isLog(p) {
		headroom(p) // room for the legend; APDEX and shares keep their scales
	}
	p.X.Max *= 1.08 // the knee off the frame
	marks := []struct {
		x      float64
		name   string
		dashes []vg.Length
	}{
		{d.Result.Capacity, capacityLabel(d), []vg.Length{vg.Points(6), vg.Points(3)}},
		{d.Result.FirstBad, fmt.Sprintf("first bad %s", fmtLoadR(d.Result.FirstBad)), []vg.Length{vg.Points(2), vg.Points(2)}},
	}
	for _, m := range marks {
		if m.x <= 0 {
			continue
		}
		if err := addLine(p, m.name, plotter.XYs{{X: m.x, Y: p.Y.Min}, {X: m.x, Y: p.Y.Max}}, stormColor, m.dashes); err != nil {
			return err
		}
	}
	return nil
}

// capacityLabel is the legend of the capacity line: "capacity 46", or
// "capacity ≥ 64 (--max-users good)" when the search reached its maximum
// good (a lower bound).
func capacityLabel(d *capacity.Document) string {
	if d.Result.Stop.Kind == capacity.StopMaxReached {
		return fmt.Sprintf("capacity ≥ %s (--max-users good)", fmtLoadR(d.Result.Capacity))
	}
	return fmt.Sprintf("capacity %s", fmtLoadR(d.Result.Capacity))
}

// logScale puts p's Y axis on a log scale when its data spans more than
// a factor of 20 (batch operations of seconds beside lookups of
// milliseconds), vals the values drawn (p95s and limits), from half the
// lowest; the legend keeps its room by a factor of 3 on top.
func logScale(p *plot.Plot, vals []float64) {
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, v := range vals {
		if v > 0 {
			lo, hi = math.Min(lo, v), math.Max(hi, v)
		}
	}
	if math.IsInf(lo, 0) || math.IsInf(hi, 0) || hi/lo <= 20 {
		return
	}
	p.Y.Scale, p.Y.Tick.Marker = plot.LogScale{}, plot.LogTicks{Prec: -1}
	p.Y.Min, p.Y.Max = lo/2, hi*3
	p.Y.Label.Text += " (log scale)"
}

func isLog(p *plot.Plot) bool { _, ok := p.Y.Scale.(plot.LogScale); return ok }

func fmtLoadR(v float64) string { return fmt.Sprintf("%g", v) }

// addPoints adds pts (sorted by load) as points and the line through
// each load's mean of them (meanByLoad).
func addPoints(p *plot.Plot, name string, pts plotter.XYs, i int) error {
	if len(pts) == 0 {
		return nil
	}
	if err := addLine(p, name, meanByLoad(pts), palette(i), nil); err != nil {
		return err
	}
	s, err := plotter.NewScatter(pts)
	if err != nil {
		return fmt.Errorf("report: %s: %w", name, err)
	}
	s.Color = palette(i)
	p.Add(s)
	return nil
}

// CapacityCharts draws a capacity document against the load: integral
// APDEX with its 95 % interval and the target, throughput, p95 per key
// operation, and the top wait events' share of active time, the knee
// (capacity and first bad load) marked on each. Errors come from drawing.
func CapacityCharts(d *capacity.Document) ([]Chart, error) {
	steps := byLoad(d)
	var out []Chart
	add := chartAdder(&out)

	// APDEX: a point per attempt with its 95 % interval as an error
	// bar, the line through each load's mean.
	p := loadPlot(d, "Integral APDEX against load", "APDEX")
	var pts plotter.XYs
	var bars struct {
		plotter.XYs
		plotter.YErrors
	}
	for _, s := range steps {
		pts = append(pts, plotter.XY{X: s.Load, Y: s.Apdex.Value})
		if s.Apdex.Lo != nil && s.Apdex.Hi != nil {
			bars.XYs = append(bars.XYs, plotter.XY{X: s.Load, Y: s.Apdex.Value})
			bars.YErrors = append(bars.YErrors, struct{ Low, High float64 }{s.Apdex.Value - *s.Apdex.Lo, *s.Apdex.Hi - s.Apdex.Value})
		}
	}
	err := addPoints(p, "integral APDEX", pts, 0)
	if err == nil && len(bars.XYs) > 0 {
		var eb *plotter.YErrorBars
		if eb, err = plotter.NewYErrorBars(bars); err == nil {
			eb.Color, eb.Width, eb.CapWidth = palette(4), vg.Points(1.2), vg.Points(6)
			p.Add(eb)
			// the legend's thumbnail: a line of the bars' style
			p.Legend.Add("95 % interval", &plotter.Line{LineStyle: eb.LineStyle})
		}
	}
	if err == nil && len(steps) > 0 {
		err = addLine(p, fmt.Sprintf("target %s", fmtApdexR(d.Target.Apdex)),
			plotter.XYs{{X: 0, Y: d.Target.Apdex}, {X: steps[len(steps)-1].Load, Y: d.Target.Apdex}}, palette(1), []vg.Length{vg.Points(4), vg.Points(2)})
	}
	p.Y.Max = 1
	p.Legend.Top = false // APDEX is high at low load: the bottom left is free
	if err == nil {
		err = markKnee(p, d)
	}
	if err := add("capacity-apdex", p, err); err != nil {
		return nil, err
	}

	// Throughput.
	p = loadPlot(d, "Throughput against load", "key operations / s")
	pts = nil
	for _, s := range steps {
		pts = append(pts, plotter.XY{X: s.Load, Y: s.Throughput})
	}
	err = addPoints(p, "throughput", pts, 0)
	if err == nil {
		err = markKnee(p, d)
	}
	if err := add("capacity-throughput", p, err); err != nil {
		return nil, err
	}

	// p95 per operation.
	p = loadPlot(d, "p95 response time against load", "ms")
	ops := map[string]bool{}
	for _, s := range steps {
		for op := range s.P95Ms {
			ops[op] = true
		}
	}
	names := sortedKeys(ops)
	var p95vals []float64
	err = nil
	for i, op := range names {
		pts = nil
		for _, s := range steps {
			if v, ok := s.P95Ms[op]; ok {
				pts = append(pts, plotter.XY{X: s.Load, Y: v.Value})
				p95vals = append(p95vals, v.Value)
			}
		}
		if err = addPoints(p, op, pts, i); err != nil {
			break
		}
		if limit, ok := d.Target.P95Ms[op]; ok && err == nil && len(steps) > 0 {
			p95vals = append(p95vals, limit)
			// the --p95 limit, in the operation's colour
			err = addLine(p, fmt.Sprintf("%s limit %s", op, results.FormatMs(limit)),
				plotter.XYs{{X: 0, Y: limit}, {X: steps[len(steps)-1].Load, Y: limit}}, palette(i), []vg.Length{vg.Points(1), vg.Points(3)})
		}
	}
	logScale(p, p95vals)
	if err == nil {
		err = markKnee(p, d)
	}
	if err := add("capacity-p95", p, err); err != nil {
		return nil, err
	}

	// Top waits.
	p = loadPlot(d, "Wait events against load (share of active time)", "%")
	total := map[string]float64{}
	for _, s := range steps {
		for _, w := range s.Resources.Waits {
			total[w.Event] += w.Pct
		}
	}
	events := sortedKeys(total)
	sort.SliceStable(events, func(i, j int) bool { return total[events[i]] > total[events[j]] })
	if len(events) > capacityTopWaits {
		events = events[:capacityTopWaits]
	}
	err = nil
	for i, ev := range events {
		pts = nil
		for _, s := range steps {
			v := 0.0
			for _, w := range s.Resources.Waits {
				if w.Event == ev {
					v = w.Pct
				}
			}
			pts = append(pts, plotter.XY{X: s.Load, Y: v})
		}
		if err = addPoints(p, ev, pts, i); err != nil {
			break
		}
	}
	if len(events) == 0 {
		p.Title.Text += ": none observed"
	}
	p.Y.Max = 100 // shares of active time, %
	if err == nil {
		err = markKnee(p, d)
	}
	if err := add("capacity-waits", p, err); err != nil {
		return nil, err
	}
	return out, nil
}

func fmtApdexR(v float64) string { return fmt.Sprintf("%.2f", math.Floor(v*100+1e-9)/100) }

// capacityRow is one step of the page's table.
type capacityRow struct {
	Index, Attempt         int
	Load, Outcome, Apdex   string
	Throughput, Errors     string
	P95, Reasons, Waits    string
	ServerCPU, PoolWait    string
	GeneratorCPU, Path     string
	Class                  string
	Straddles, Connections string
}

func capacityRows(d *capacity.Document) []capacityRow {
	rows := make([]capacityRow, 0, len(d.Steps))
	for _, s := range d.Steps {
		r := capacityRow{Index: s.Index, Attempt: s.Attempt, Load: fmtLoadR(s.Load), Outcome: string(s.Outcome), Apdex: s.Apdex.String(),
			Throughput: fmt.Sprintf("%.1f", s.Throughput), Errors: fmt.Sprintf("%.1f %%", s.ErrorPct), Reasons: strings.Join(s.Reasons, "; "),
			PoolWait: fmt.Sprintf("%.0f %%", s.Resources.PoolWaitShare), Path: s.Path, ServerCPU: "-", GeneratorCPU: "-",
			Connections: fmt.Sprintf("%.0f", s.Resources.Connections), Class: "r-good"}
		if s.Outcome != capacity.OutcomeGood {
			r.Class = "r-poor"
		}
		if s.Straddles {
			r.Straddles = "interval holds the target"
		}
		var p95 []string
		for _, op := range sortedKeys(s.P95Ms) {
			p95 = append(p95, op+" "+results.FormatMs(s.P95Ms[op].Value))
		}
		r.P95 = strings.Join(p95, ", ")
		var waits []string
		for i, w := range s.Resources.Waits {
			if i == 3 {
				break
			}
			waits = append(waits, fmt.Sprintf("%s %.0f %%", w.Event, w.Pct))
		}
		r.Waits = strings.Join(waits, ", ")
		if s.Resources.ServerCPU != nil {
			r.ServerCPU = fmt.Sprintf("%.0f %%", *s.Resources.ServerCPU)
		}
		if s.GeneratorCPU != nil {
			r.GeneratorCPU = fmt.Sprintf("%.2f", *s.GeneratorCPU)
		}
		rows = append(rows, r)
	}
	return rows
}

const capacityPage = `<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><link rel="icon" href="data:,">
<title>erplab capacity: {{.Doc.Workload}}</title>
<style>
body { font-family: sans-serif; margin: 1.5em auto; max-width: 1200px; color: #222; padding: 0 1em; }
h1 { font-size: 1.5em; } h2 { font-size: 1.2em; border-bottom: 1px solid #ccc; padding-bottom: .2em; margin-top: 2em; }
table { border-collapse: collapse; margin: .5em 0; font-size: .85em; }
th, td { border: 1px solid #ddd; padding: .25em .5em; text-align: right; } th { background: #f3f3f3; } td.l, th.l { text-align: left; }
.r-good { background: #e1ecf6; } .r-poor { background: #fde0c2; }
.scroll { overflow-x: auto; } td.l { overflow-wrap: anywhere; min-width: 8em; }
.verdict { border: 2px solid #0072b2; padding: .6em 1em; font-size: 1.05em; }
figure { margin: 1em 0; } figure svg { max-width: 100%; height: auto; border: 1px solid #eee; }
.charts { display: flex; flex-wrap: wrap; gap: 1em; } .muted { color: #777; font-size: .85em; } code { background: #f6f6f6; padding: .1em .3em; }
</style></head><body>
<h1>erplab capacity: {{.Doc.Workload}} ({{.Doc.Model}} model)</h1>
<p class="verdict">{{.Doc.Result.Line}}</p>
<p>Status: {{.Doc.StatusText}}. Target: integral APDEX &ge; {{.Doc.Target.Apdex}}, errors &le; {{.Doc.Target.ErrorRatePct}} %{{range $op, $ms := .Doc.Target.P95Ms}}, p95 {{$op}} &le; {{$ms}} ms{{end}}.
Search: from {{.Doc.Search.Start}} {{.Doc.Unit}} by {{.Doc.Search.Step}} up to {{.Doc.Search.Max}}, bisection to {{.Doc.Search.ResolutionPct}} %; each step {{.Doc.Search.RampS}} s ramp, {{.Doc.Search.WarmupS}} s warm-up, {{.Doc.Search.HoldS}} s hold{{if .Doc.Search.Think}}, think {{.Doc.Search.Think}}{{end}}{{if .Doc.Search.UserOpsPerHour}} ({{.Doc.Search.UserOpsPerHour}} key operations per user and hour){{end}}. Stop: {{.Doc.Result.Stop.Kind}}{{if .Doc.Result.Stop.Detail}} ({{.Doc.Result.Stop.Detail}}){{end}}.</p>
<h2>Steps</h2>
<div class="scroll"><table><tr><th>step</th><th>{{.Doc.Unit}}</th><th class="l">outcome</th><th>integral APDEX [95 %]</th><th>ops/s</th><th>errors</th><th class="l">p95</th><th class="l">top waits (share of active time)</th><th>server CPU</th><th>pool wait</th><th title="mean client sessions on the server, erplab's observer session included">client sessions (incl. observer)</th><th>erplab CPU (cores)</th><th class="l">missed</th></tr>
{{range .Rows}}<tr class="{{.Class}}"><td>{{.Index}}{{if gt .Attempt 1}} (attempt {{.Attempt}}){{end}}</td><td>{{.Load}}</td><td class="l">{{.Outcome}}</td><td>{{.Apdex}}{{if .Straddles}} *{{end}}</td><td>{{.Throughput}}</td><td>{{.Errors}}</td><td class="l">{{.P95}}</td><td class="l">{{.Waits}}</td><td>{{.ServerCPU}}</td><td>{{.PoolWait}}</td><td>{{.Connections}}</td><td>{{.GeneratorCPU}}</td><td class="l">{{.Reasons}}</td></tr>
{{end}}</table></div>
<p class="muted">* the interval holds the target: the step was run again and decided by the mean. Pool wait: share of response time spent waiting for a connection. Each step's own results: {{.Dir}}.</p>
<h2>Charts</h2>
<div class="charts">{{range .Charts}}<figure id="chart-{{.ID}}">{{.SVG}}</figure>
{{end}}</div>
{{if .Doc.CommandLine}}<p class="muted">Command line: <code>{{.Command}}</code></p>{{end}}
</body></html>
`

// WriteCapacityHTML writes the capacity document as one self-contained
// HTML page: the verdict line, the steps table and CapacityCharts.
// Errors come from drawing and the template.
func WriteCapacityHTML(w io.Writer, d *capacity.Document) error {
	charts, err := CapacityCharts(d)
	if err != nil {
		return err
	}
	type svgChart struct {
		ID  string
		SVG template.HTML
	}
	data := struct {
		Doc          *capacity.Document
		Rows         []capacityRow
		Charts       []svgChart
		Dir, Command string
	}{Doc: d, Rows: capacityRows(d), Command: commandLine(d.CommandLine)}
	if len(d.Steps) > 0 && d.Steps[0].Path != "" {
		data.Dir = d.Steps[0].Path[:max(0, strings.LastIndex(d.Steps[0].Path, "/"))]
	}
	for _, c := range charts {
		data.Charts = append(data.Charts, svgChart{c.ID, template.HTML(c.SVG)}) // drawn by gonum/plot, not user input
	}
	t, err := template.New("capacity").Parse(capacityPage)
	if err != nil {
		return fmt.Errorf("report: capacity page: %w", err)
	}
	if err := t.Execute(w, data); err != nil {
		return fmt.Errorf("report: capacity page: %w", err)
	}
	return nil
}

// WriteCapacityMarkdown writes the verdict line and the steps table.
func WriteCapacityMarkdown(w io.Writer, d *capacity.Document) error {
	var b strings.Builder
	fmt.Fprintf(&b, "## erplab capacity: %s (%s model)\n\n**%s**\n\nStatus: %s.\n\n", d.Workload, d.Model, d.Result.Line, d.StatusText())
	fmt.Fprintf(&b, "| step | %s | outcome | integral APDEX [95 %%] | ops/s | errors | p95 | top waits | server CPU | pool wait | missed |\n", d.Unit)
	b.WriteString("|---:|---:|---|---:|---:|---:|---|---|---:|---:|---|\n")
	for _, r := range capacityRows(d) {
		fmt.Fprintf(&b, "| %d | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", r.Index, r.Load, r.Outcome, r.Apdex, r.Throughput, r.Errors,
			mdEscape(r.P95), mdEscape(r.Waits), r.ServerCPU, r.PoolWait, mdEscape(r.Reasons))
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func mdEscape(s string) string { return strings.ReplaceAll(s, "|", `\|`) }
