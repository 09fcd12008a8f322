package report

import (
	"errors"
	"fmt"
	"html/template"
	"io"
	"math"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"

	"github.com/erplab/erplab/internal/capacity"
)

// CapacitySide is one curve group of an overlay chart: a side's name,
// its searches (one curve each, the side's colour), the capacity to
// mark (the median over its searches; 0: none) and whether it is a lower
// bound (a search reached its maximum good).
type CapacitySide struct {
	Name     string
	Searches []*capacity.Document
	Capacity float64
	AtLeast  bool
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
			cs.Capacity, cs.AtLeast = s.Capacity.Median, s.Capacity.AtLeast
		}
		out = append(out, cs)
	}
	return out
}

// Sizes of the overlay chart: wider than the other charts (a 1200 px
// page), its legend in a column right of the plot, never over a curve.
const (
	overlayW       = 12 * vg.Inch
	overlayH       = 5 * vg.Inch
	overlayLegendW = 3.5 * vg.Inch
)

// roundStyles are the line dashes and point glyphs of rounds 1, 2, ...
// (cycling): each round of a side its own, so four rounds stay apart.
var roundStyles = []struct {
	dashes []vg.Length
	glyph  draw.GlyphDrawer
}{
	{nil, draw.CircleGlyph{}},
	{[]vg.Length{vg.Points(7), vg.Points(3)}, draw.BoxGlyph{}},
	{[]vg.Length{vg.Points(1.5), vg.Points(2.5)}, draw.TriangleGlyph{}},
	{[]vg.Length{vg.Points(8), vg.Points(2.5), vg.Points(1.5), vg.Points(2.5)}, draw.CrossGlyph{}},
	{[]vg.Length{vg.Points(3), vg.Points(3)}, draw.RingGlyph{}},
	{[]vg.Length{vg.Points(12), vg.Points(4)}, draw.PlusGlyph{}},
}

// meanByLoad is one point per load of pts (sorted by load): the mean
// of its attempts, what decided a repeated step, so a line through it
// has no vertical spike where a load ran twice.
func meanByLoad(pts plotter.XYs) plotter.XYs {
	var line plotter.XYs
	for k := 0; k < len(pts); {
		j, sum := k, 0.0
		for ; j < len(pts) && pts[j].X == pts[k].X; j++ {
			sum += pts[j].Y
		}
		line = append(line, plotter.XY{X: pts[k].X, Y: sum / float64(j-k)})
		k = j
	}
	return line
}

// CapacityOverlay draws the integral APDEX against the load of every
// search of every side on one chart: a side's colour for its searches,
// each round its own dash and point glyph (a point per attempt, the
// line through the mean of a repeated load's attempts), the target, and
// each side's capacity as a large downward triangle of its colour on the
// target line, labelled with its value ("≥ 16 →" for a lower bound: a
// search reached its maximum good). unit names the load; the legend is
// a column right of the plot. Errors come from drawing.
func CapacityOverlay(unit string, target float64, sides []CapacitySide) (Chart, error) {
	p := newPlot("Integral APDEX against load, by side", "APDEX")
	p.X.Label.Text = unit
	p.X.Min, p.Y.Min, p.Y.Max = 0, 0, 1
	maxX := 0.0
	var err error
	for i, s := range sides {
		for r, d := range s.Searches {
			var pts plotter.XYs
			for _, st := range byLoad(d) {
				pts = append(pts, plotter.XY{X: st.Load, Y: st.Apdex.Value})
				maxX = math.Max(maxX, st.Load)
			}
			if len(pts) == 0 {
				continue
			}
			name := s.Name
			if len(s.Searches) > 1 {
				name = fmt.Sprintf("%s round %d", s.Name, r+1)
			}
			style := roundStyles[r%len(roundStyles)]
			l, lerr := plotter.NewLine(meanByLoad(pts))
			sc, serr := plotter.NewScatter(pts)
			if err = errors.Join(lerr, serr); err != nil {
				err = fmt.Errorf("report: %s: %w", name, err)
				break
			}
			l.Color, l.Width, l.Dashes = palette(i), vg.Points(1.4), style.dashes
			sc.Color, sc.Shape, sc.Radius = palette(i), style.glyph, vg.Points(3)
			p.Add(l, sc)
			p.Legend.Add(name, l, sc)
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
		label := "capacity " + fmtLoadR(s.Capacity)
		if s.AtLeast {
			label = "capacity ≥ " + fmtLoadR(s.Capacity) + " →" // a lower bound: the capacity is there or beyond
		}
		mark, merr := plotter.NewScatter(plotter.XYs{{X: s.Capacity, Y: target}})
		lab, lerr := plotter.NewLabels(plotter.XYLabels{XYs: plotter.XYs{{X: s.Capacity, Y: target}}, Labels: []string{label}})
		if err = errors.Join(merr, lerr); err != nil {
			err = fmt.Errorf("report: %s capacity: %w", s.Name, err)
			break
		}
		mark.Color, mark.Shape, mark.Radius = palette(i), downTriangle{}, vg.Points(5)
		for k := range lab.TextStyle {
			lab.TextStyle[k].Color = palette(i)
			lab.TextStyle[k].XAlign = draw.XRight
		}
		// left of the triangle, under the target line (APDEX curves fall
		// to the right of their knee), the sides' labels stacked
		lab.Offset = vg.Point{X: -vg.Points(8), Y: -vg.Points(14 + 12*float64(i))}
		p.Add(mark, lab)
		name := fmt.Sprintf("%s capacity %s", s.Name, fmtLoadR(s.Capacity))
		if s.AtLeast {
			name = fmt.Sprintf("%s capacity %s or more (≥)", s.Name, fmtLoadR(s.Capacity))
		}
		p.Legend.Add(name, mark)
	}
	if err != nil {
		return Chart{}, err
	}
	// The legend beside the plot: moved off p, drawn in its own column.
	leg := p.Legend
	leg.Top, leg.Left = true, true
	p.Legend = plot.NewLegend()
	svg, err := renderWith(p.Title.Text, overlayW, overlayH, func(c draw.Canvas) {
		p.Draw(draw.Crop(c, 0, -overlayLegendW, 0, 0))
		leg.Draw(draw.Crop(c, overlayW-overlayLegendW+vg.Points(10), 0, 0, -vg.Points(30)))
	})
	if err != nil {
		return Chart{}, err
	}
	return Chart{ID: "capacity-ab-apdex", Title: p.Title.Text, SVG: svg}, nil
}

// downTriangle is a filled triangle pointing down at its point: a
// side's capacity on the target line.
type downTriangle struct{}

// DrawGlyph implements draw.GlyphDrawer.
func (downTriangle) DrawGlyph(c *draw.Canvas, sty draw.GlyphStyle, pt vg.Point) {
	c.SetColor(sty.Color)
	r := sty.Radius
	var path vg.Path
	path.Move(vg.Point{X: pt.X - r, Y: pt.Y + 1.6*r})
	path.Line(vg.Point{X: pt.X + r, Y: pt.Y + 1.6*r})
	path.Line(pt)
	path.Close()
	c.Fill(path)
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
			t := fmt.Sprintf("round %d: capacity %s", x.Round, res.CapacityText(d.Unit))
			if res.Apdex != nil {
				t += " at APDEX " + res.Apdex.String()
			}
			if res.FirstBad > 0 {
				t += fmt.Sprintf("; at %s: %s", fmtLoadR(res.FirstBad), strings.Join(res.Reasons, ", "))
			}
			stop := res.Stop.Kind
			if res.Stop.Detail != "" && res.Stop.Kind != capacity.StopConverged {
				stop += ": " + res.Stop.Detail // why it ended: the failure's reason
			}
			if res.Stop.Kind == "" {
				stop = x.Doc.StatusText()
			}
			t += fmt.Sprintf(" (%d steps, %s)", len(x.Doc.Steps), stop)
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
			r.Cells = append(r.Cells, s.Text()) // "r1 0.91 [...], r2 0.84 [...] then 0.86 [...]"
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
{{range .Doc.Verdicts}}<p class="verdict">{{.Variant}}: {{.Line}}{{if .Starvation}}<br><span class="muted">{{.Starvation.Line}}</span>{{end}}</p>
{{end}}{{if not .Doc.Order}}<p class="verdict">Separate searches: not an A/B experiment (their servers, data and times may differ), so no verdict; <code>erplab capacity --variant</code> runs one.</p>
{{end}}{{if .Doc.ForeignLoad}}<p class="verdict">Warning: {{.Doc.ForeignText}}.</p>
{{end}}<p>Status: {{.Doc.StatusText}}.{{if .Doc.Order}} {{.Doc.Rounds}} round(s) per side, {{.Doc.Order}} order.{{end}} Target: integral APDEX &ge; {{.Doc.Target.Apdex}}, errors &le; {{.Doc.Target.ErrorRatePct}} %{{range $op, $ms := .Doc.Target.P95Ms}}, p95 {{$op}} &le; {{$ms}} ms{{end}}.
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

// WriteCapacityABMarkdown writes the verdicts, the status, the sides'
// table (each search's capacity and, for one that did not finish, why)
// and the APDEX at the loads every side ran.
func WriteCapacityABMarkdown(w io.Writer, d *capacity.ABDocument) error {
	var b strings.Builder
	fmt.Fprintf(&b, "## erplab capacity A/B: %s (%s model)\n\nStatus: %s.\n\n", d.Workload, d.Model, d.StatusText())
	for _, v := range d.Verdicts {
		fmt.Fprintf(&b, "**%s: %s**\n\n", v.Variant, v.Line)
		if v.Starvation != nil {
			fmt.Fprintf(&b, "%s\n\n", v.Starvation.Line())
		}
	}
	if len(d.ForeignLoad) > 0 {
		fmt.Fprintf(&b, "Warning: %s.\n\n", d.ForeignText())
	}
	fmt.Fprintf(&b, "| side | remedies | capacity (%s) | searches | limiting resource |\n|---|---|---:|---|---|\n", d.Unit)
	for _, r := range abSideRows(d) {
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s |\n", mdEscape(r.Name), mdEscape(r.Remedies), r.Capacity, mdEscape(strings.Join(r.Rounds, "; ")), mdEscape(strings.Join(r.Limits, "; ")))
	}
	if rows := abCommonRows(d); len(rows) > 0 {
		fmt.Fprintf(&b, "\nAPDEX at the loads every side ran (95 %% interval of each search's step):\n\n| %s |", d.Unit)
		for _, s := range d.Sides {
			fmt.Fprintf(&b, " %s |", mdEscape(s.Name))
		}
		b.WriteString("\n|---:|" + strings.Repeat("---|", len(d.Sides)) + "\n")
		for _, r := range rows {
			cells := make([]string, len(r.Cells))
			for i, c := range r.Cells {
				cells[i] = mdEscape(c)
			}
			fmt.Fprintf(&b, "| %s | %s |\n", r.Load, strings.Join(cells, " | "))
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}
