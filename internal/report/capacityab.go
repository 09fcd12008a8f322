package report

import (
	"fmt"
	"html/template"
	"io"
	"math"
	"strings"

	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"

	"github.com/erplab/erplab/internal/capacity"
)

// CapacitySide is one curve group of an overlay chart: a side's name,
// its searches (one curve each, the side's colour) and the capacity to
// mark (the median over its searches; 0: none).
type CapacitySide struct {
	Name     string
	Searches []*capacity.Document
	Capacity float64
}

// SidesOfAB are the sides of a capacity A/B document.
func SidesOfAB(d *capacity.ABDocument) []CapacitySide {
	var out []CapacitySide
	for _, s := range d.Sides {
		cs := CapacitySide{Name: s.Name}
		for _, x := range s.Searches {
			if x.Doc != nil {
				cs.Searches = append(cs.Searches, x.Doc)
			}
		}
		if s.Capacity != nil {
			cs.Capacity = s.Capacity.Median
		}
		out = append(out, cs)
	}
	return out
}

// CapacityOverlay draws the integral APDEX against the load of every
// search of every side on one chart (a side's colour for its searches,
// dashed from its second round on; a point per attempt, the line through
// the mean of a repeated load's attempts), the target, and each side's
// capacity as a vertical line of its colour. unit names the load; the
// legend sits at the bottom left, where APDEX curves (high at low load)
// leave the chart empty. Errors come from drawing.
func CapacityOverlay(unit string, target float64, sides []CapacitySide) (Chart, error) {
	var out []Chart
	add := chartAdder(&out)
	p := newPlot("Integral APDEX against load, by side", "APDEX")
	p.X.Label.Text = unit
	p.X.Min, p.Y.Min, p.Y.Max = 0, 0, 1
	p.Legend.Top, p.Legend.Left = false, true
	maxX := 0.0
	var err error
	for i, s := range sides {
		for r, d := range s.Searches {
			// every attempt a point; the line through each load's mean
			// over its attempts (what decided a repeated step)
			var pts, line plotter.XYs
			for _, st := range byLoad(d) {
				pts = append(pts, plotter.XY{X: st.Load, Y: st.Apdex.Value})
				maxX = math.Max(maxX, st.Load)
			}
			if len(pts) == 0 {
				continue
			}
			for k := 0; k < len(pts); {
				j, sum := k, 0.0
				for ; j < len(pts) && pts[j].X == pts[k].X; j++ {
					sum += pts[j].Y
				}
				line = append(line, plotter.XY{X: pts[k].X, Y: sum / float64(j-k)})
				k = j
			}
			name := s.Name
			if len(s.Searches) > 1 {
				name = fmt.Sprintf("%s round %d", s.Name, r+1)
			}
			var dashes []vg.Length
			if r > 0 {
				dashes = []vg.Length{vg.Points(4), vg.Points(2)}
			}
			if err = addLine(p, name, line, palette(i), dashes); err != nil {
				break
			}
			sc, serr := plotter.NewScatter(pts)
			if serr != nil {
				err = fmt.Errorf("report: %s: %w", name, serr)
				break
			}
			sc.Color = palette(i)
			p.Add(sc)
		}
	}
	if maxX == 0 {
		maxX = 1
	}
	p.X.Max = maxX * 1.08
	if err == nil {
		err = addLine(p, fmt.Sprintf("target %s", fmtApdexR(target)), plotter.XYs{{X: 0, Y: target}, {X: maxX, Y: target}}, palette(5), []vg.Length{vg.Points(1), vg.Points(3)})
	}
	for i, s := range sides {
		if err != nil || s.Capacity <= 0 {
			continue
		}
		err = addLine(p, fmt.Sprintf("%s capacity %s", s.Name, fmtLoadR(s.Capacity)), plotter.XYs{{X: s.Capacity, Y: 0}, {X: s.Capacity, Y: 1}}, palette(i), []vg.Length{vg.Points(6), vg.Points(3)})
	}
	if err := add("capacity-ab-apdex", p, err); err != nil {
		return Chart{}, err
	}
	return out[0], nil
}

// abSideRow is one side of the page's table.
type abSideRow struct {
	Name, Remedies, Capacity string
	Rounds, Limits           []string
}

// abCommonRow is one load every side ran.
type abCommonRow struct {
	Load  string
	Cells []string
}

func abSideRows(d *capacity.ABDocument) []abSideRow {
	var rows []abSideRow
	for _, s := range d.Sides {
		r := abSideRow{Name: s.Name, Remedies: strings.Join(s.Remedies, ", "), Capacity: "-", Limits: s.Limits}
		switch {
		case s.Remedies == nil:
			r.Remedies = "-" // a separate search (capacity.Separate)
		case len(s.Remedies) == 0:
			r.Remedies = "none"
		}
		if s.Capacity != nil {
			r.Capacity = fmtLoadR(s.Capacity.Median)
			if s.Capacity.N > 1 {
				r.Capacity += fmt.Sprintf(" (%s-%s)", fmtLoadR(s.Capacity.Min), fmtLoadR(s.Capacity.Max))
			}
			if s.Capacity.AtLeast {
				r.Capacity = "at least " + r.Capacity
			}
		}
		for _, x := range s.Searches {
			if x.Doc == nil {
				continue
			}
			res := x.Doc.Result
			t := fmt.Sprintf("round %d: capacity %s", x.Round, fmtLoadR(res.Capacity))
			if res.Apdex != nil {
				t += " at APDEX " + res.Apdex.String()
			}
			if res.FirstBad > 0 {
				t += fmt.Sprintf("; at %s: %s", fmtLoadR(res.FirstBad), strings.Join(res.Reasons, ", "))
			}
			t += fmt.Sprintf(" (%d steps, %s)", len(x.Doc.Steps), res.Stop.Kind)
			r.Rounds = append(r.Rounds, t)
		}
		rows = append(rows, r)
	}
	return rows
}

func abCommonRows(d *capacity.ABDocument) []abCommonRow {
	var rows []abCommonRow
	for _, c := range d.Common {
		r := abCommonRow{Load: fmtLoadR(c.Load)}
		for _, s := range c.Sides {
			var vals []string
			for _, a := range s.Apdex {
				vals = append(vals, a.String())
			}
			r.Cells = append(r.Cells, strings.Join(vals, ", "))
		}
		rows = append(rows, r)
	}
	return rows
}

const capacityABPage = `<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><link rel="icon" href="data:,">
<title>erplab capacity{{if .Doc.Order}} A/B{{end}}: {{.Doc.Workload}}</title>
<style>
body { font-family: sans-serif; margin: 1.5em auto; max-width: 1200px; color: #222; padding: 0 1em; }
h1 { font-size: 1.5em; } h2 { font-size: 1.2em; border-bottom: 1px solid #ccc; padding-bottom: .2em; margin-top: 2em; }
table { border-collapse: collapse; margin: .5em 0; font-size: .85em; table-layout: fixed; width: 100%; }
th, td { border: 1px solid #ddd; padding: .25em .5em; text-align: right; overflow-wrap: anywhere; } th { background: #f3f3f3; } td.l, th.l { text-align: left; }
.verdict { border: 2px solid #0072b2; padding: .6em 1em; font-size: 1.05em; }
figure { margin: 1em 0; } figure svg { max-width: 100%; height: auto; border: 1px solid #eee; }
.muted { color: #777; font-size: .85em; } code { background: #f6f6f6; padding: .1em .3em; } ul { margin: 0; padding-left: 1.2em; }
</style></head><body>
<h1>erplab capacity{{if .Doc.Order}} A/B{{end}}: {{.Doc.Workload}} ({{.Doc.Model}} model)</h1>
{{range .Doc.Verdicts}}<p class="verdict">{{.Variant}}: {{.Line}}</p>
{{end}}{{if not .Doc.Order}}<p class="verdict">Separate searches: not an A/B experiment (their servers, data and times may differ), so no verdict; <code>erplab capacity --variant</code> runs one.</p>
{{end}}{{if .Doc.ForeignLoad}}<p class="verdict">Warning: {{.Doc.ForeignText}}.</p>
{{end}}<p>Status: {{.Doc.Status}}.{{if .Doc.Order}} {{.Doc.Rounds}} round(s) per side, {{.Doc.Order}} order.{{end}} Target: integral APDEX &ge; {{.Doc.Target.Apdex}}, errors &le; {{.Doc.Target.ErrorRatePct}} %{{range $op, $ms := .Doc.Target.P95Ms}}, p95 {{$op}} &le; {{$ms}} ms{{end}}.
Search{{if not .Doc.Order}} (of {{(index .Doc.Sides 0).Name}}){{end}}: from {{.Doc.Search.Start}} {{.Doc.Unit}} by {{.Doc.Search.Step}} up to {{.Doc.Search.Max}}, bisection to {{.Doc.Search.ResolutionPct}} %; each step {{.Doc.Search.RampS}} s ramp, {{.Doc.Search.HoldS}} s hold.
{{if .Doc.Order}}A verdict is better or worse only when the exact rank-sum test over the rounds' capacities reaches its level (4 rounds each at 0.05).{{end}}</p>
<h2>Sides</h2>
<table><tr><th class="l" style="width:10%">side</th><th class="l" style="width:20%">remedies</th><th style="width:12%">capacity ({{.Doc.Unit}})</th><th class="l">searches</th><th class="l" style="width:25%">limiting resource</th></tr>
{{range .Sides}}<tr><td class="l">{{.Name}}</td><td class="l">{{.Remedies}}</td><td>{{.Capacity}}</td><td class="l"><ul>{{range .Rounds}}<li>{{.}}</li>{{end}}</ul></td><td class="l"><ul>{{range .Limits}}<li>{{.}}</li>{{end}}</ul></td></tr>
{{end}}</table>
{{if .Common}}<h2>APDEX at the loads every side ran</h2>
<table><tr><th>{{.Doc.Unit}}</th>{{range .Doc.Sides}}<th>{{.Name}} [95 %]</th>{{end}}</tr>
{{range .Common}}<tr><td>{{.Load}}</td>{{range .Cells}}<td>{{.}}</td>{{end}}</tr>
{{end}}</table>{{end}}
<h2>Chart</h2>
<figure id="chart-{{.Chart.ID}}">{{.Chart.SVG}}</figure>
{{if .Command}}<p class="muted">Command line: <code>{{.Command}}</code></p>{{end}}
</body></html>
`

// WriteCapacityABHTML writes a capacity A/B document as one
// self-contained HTML page: the verdicts, the sides (capacity per
// round, limiting resource), the APDEX at the common loads and
// CapacityOverlay. Errors come from drawing and the template.
func WriteCapacityABHTML(w io.Writer, d *capacity.ABDocument) error {
	ch, err := CapacityOverlay(d.Unit, d.Target.Apdex, SidesOfAB(d))
	if err != nil {
		return err
	}
	data := struct {
		Doc     *capacity.ABDocument
		Sides   []abSideRow
		Common  []abCommonRow
		Chart   struct{ ID, SVG template.HTML }
		Command string
	}{Doc: d, Sides: abSideRows(d), Common: abCommonRows(d), Command: commandLine(d.CommandLine)}
	data.Chart.ID, data.Chart.SVG = template.HTML(ch.ID), template.HTML(ch.SVG) // drawn by gonum/plot, not user input
	t, err := template.New("capacity-ab").Parse(capacityABPage)
	if err != nil {
		return fmt.Errorf("report: capacity A/B page: %w", err)
	}
	if err := t.Execute(w, data); err != nil {
		return fmt.Errorf("report: capacity A/B page: %w", err)
	}
	return nil
}

// WriteCapacityABMarkdown writes the verdicts and the sides' table.
func WriteCapacityABMarkdown(w io.Writer, d *capacity.ABDocument) error {
	var b strings.Builder
	fmt.Fprintf(&b, "## erplab capacity A/B: %s (%s model)\n\n", d.Workload, d.Model)
	for _, v := range d.Verdicts {
		fmt.Fprintf(&b, "**%s: %s**\n\n", v.Variant, v.Line)
	}
	if len(d.ForeignLoad) > 0 {
		fmt.Fprintf(&b, "Warning: %s.\n\n", d.ForeignText())
	}
	fmt.Fprintf(&b, "| side | remedies | capacity (%s) | searches | limiting resource |\n|---|---|---:|---|---|\n", d.Unit)
	for _, r := range abSideRows(d) {
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s |\n", mdEscape(r.Name), mdEscape(r.Remedies), r.Capacity, mdEscape(strings.Join(r.Rounds, "; ")), mdEscape(strings.Join(r.Limits, "; ")))
	}
	_, err := io.WriteString(w, b.String())
	return err
}
