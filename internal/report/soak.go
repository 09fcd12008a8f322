package report

import (
	"encoding/json"
	"fmt"
	"image/color"
	"math"
	"sort"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"

	"github.com/erplab/erplab/internal/results"
	"github.com/erplab/erplab/internal/soak"
)

// Soak chart size, points: small, two to a row of the page.
const (
	soakChartW = 5 * vg.Inch
	soakChartH = 2.4 * vg.Inch
)

// Soak marker colours: the fitted line vermillion when the rule finds its
// trend real (grey dashed when not), warnings orange, a collapse black.
var (
	soakFitColor      = okabeIto[6]
	soakFlatFitColor  = color.RGBA{R: 0x88, G: 0x88, B: 0x88, A: 255}
	soakWarningColor  = okabeIto[1]
	soakCollapseColor = okabeIto[5]
)

// soakOf decodes d's extra.soak, nil when it has none.
func soakOf(d *results.Document) (*soak.Section, error) {
	raw, ok := d.Extra["soak"]
	if !ok || len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	var s soak.Section
	if err := json.Unmarshal(raw, &s); err != nil {
		return nil, fmt.Errorf("extra.soak: %w", err)
	}
	if s.Format != soak.Format {
		return nil, fmt.Errorf("extra.soak: format %q, this erplab reads %q", s.Format, soak.Format)
	}
	return &s, nil
}

// soakSection is one soak run's section of the page: its trends as small
// charts with captions and a table, its warnings and its collapse.
type soakSection struct {
	Run, About string
	Warnings   []string // the warnings' lines, numbered as on the charts
	Collapse   string
	Charts     []soakChart
	Rows       []soakRow
	// Flat are the metrics at 0 in every window (no chart).
	Flat string
}

type soakChart struct {
	Chart
	Caption string
}

// soakRow is one trend in the table: its label, the slope with its
// interval as the warnings print it, and whether the rule finds it real.
type soakRow struct {
	Metric, Slope, N, Mean, Now, Real string
}

// soakTrends are the section's trends at the run's end; a section whose
// trends were not kept (a trimmed recording) gets them fitted as the run
// fits them (soak.RuleParams.Trends).
func soakTrends(s *soak.Section) []soak.Trend {
	if len(s.Trends) > 0 {
		return s.Trends
	}
	return s.Rule.Trends(s.Windows)
}

// soakRank orders the metrics: APDEX, throughput, errors, the p95s,
// sessions and wait events, then the server's figures by key.
func soakRank(key string) int {
	for i, p := range []string{soak.KeyApdex, soak.KeyTPS, soak.KeyErrorsPerS, soak.KeyP95, soak.KeyActive,
		soak.KeyWaiting, soak.KeyWait, soak.KeyIdleInTx, soak.KeyCatalogBytes, soak.KeyCatalogDead,
		soak.KeyDeadTuples, soak.KeyXminAge, soak.KeyWAL} {
		if key == p || strings.HasSuffix(p, "/") && strings.HasPrefix(key, p) {
			return i
		}
	}
	return 100
}

// soakKeys are the metrics of s's windows in page order, and those at 0
// in every window apart.
func soakKeys(s *soak.Section) (keys, flat []string) {
	all := soak.Keys(s.Windows)
	sort.SliceStable(all, func(i, j int) bool { return soakRank(all[i]) < soakRank(all[j]) })
	for _, k := range all {
		zero := true
		for _, w := range s.Windows {
			if v, ok := w.Values[k]; ok && v != 0 {
				zero = false
				break
			}
		}
		if zero {
			flat = append(flat, k)
		} else {
			keys = append(keys, k)
		}
	}
	return keys, flat
}

// soakAxis is a soak's time axis: hours for runs of three hours or more,
// minutes for runs of ten minutes or more, seconds for shorter ones (X
// values are seconds divided by Div).
type soakAxis struct {
	Div   float64
	Label string
}

func soakAxisOf(s *soak.Section) soakAxis {
	end := 0.0
	if n := len(s.Windows); n > 0 {
		end = s.Windows[n-1].ToS
	}
	switch {
	case end >= 3*3600:
		return soakAxis{Div: 3600, Label: "hours since start"}
	case end >= 600:
		return soakAxis{Div: 60, Label: "minutes since start"}
	}
	return soakAxis{Div: 1, Label: "seconds since start"}
}

// soakScale is how a metric's values are drawn: bytes in MiB.
func soakScale(key string) (div float64, unit string) {
	switch soak.MetricOf(key).Unit {
	case "B":
		return 1 << 20, "MiB"
	case "ms":
		return 1, "ms"
	}
	return 1, ""
}

// soakSections builds the soak section of every run that has one; with
// draw, the charts too (the Markdown page has none).
func soakSections(runs []Run, drawCharts bool) ([]soakSection, error) {
	var out []soakSection
	for ri, r := range runs {
		if r.Soak == nil {
			continue
		}
		sec, err := buildSoakSection(ri, r.Name, r.Soak, drawCharts)
		if err != nil {
			return nil, err
		}
		out = append(out, sec)
	}
	return out, nil
}

func buildSoakSection(ri int, name string, s *soak.Section, drawCharts bool) (soakSection, error) {
	per := 1.0
	if len(s.Windows) > 0 {
		per = soak.UnitOf(s.Windows[0])
	}
	out := soakSection{Run: name, About: fmt.Sprintf("%d windows of %s; each trend is fitted over the last %d steady windows (at least %d) with its %g %% interval.",
		len(s.Windows), fmtSeconds(s.WindowS), s.Rule.Windows, s.Rule.MinWindows, 100*s.Rule.Confidence)}
	for i, w := range s.Warnings {
		out.Warnings = append(out.Warnings, fmt.Sprintf("warning %d (window %d): %s", i+1, w.Window, w.Line))
	}
	if c := s.Collapse; c != nil {
		out.Collapse = fmt.Sprintf("collapse at %s (window %d): %s; the run stopped (--stop-on-collapse)", fmtSeconds(c.TS), c.Window, c.Reason)
	}
	trends := map[string]soak.Trend{}
	for _, t := range soakTrends(s) {
		trends[t.Metric] = t
	}
	keys, flat := soakKeys(s)
	out.Flat = strings.Join(flat, ", ")
	ax := soakAxisOf(s)
	for i, k := range keys {
		t, ok := trends[k]
		row := soakRow{Metric: soak.MetricOf(k).Label, Slope: "fewer than 3 steady windows", N: "-", Mean: "-", Now: "-", Real: "-"}
		if ok {
			row = soakRow{Metric: row.Metric, Slope: strings.TrimPrefix(soak.Describe(t, per), row.Metric+" "), Mean: fmtSoakValue(k, t.Mean), Now: fmtSoakValue(k, t.Now), Real: yesNo(t.Real), N: fmt.Sprint(t.N)}
		}
		out.Rows = append(out.Rows, row)
		if !drawCharts {
			continue
		}
		var tp *soak.Trend
		if ok {
			tp = &t
		}
		p, err := soakPlot(s, k, tp, ax)
		if err != nil {
			return soakSection{}, err
		}
		svg, err := render(p, soakChartW, soakChartH)
		if err != nil {
			return soakSection{}, err
		}
		out.Charts = append(out.Charts, soakChart{Chart: Chart{ID: fmt.Sprintf("soak-%d-%d", ri, i), Title: p.Title.Text, SVG: svg},
			Caption: soakCaption(s, k, tp, per)})
	}
	return out, nil
}

// soakCaption is a chart's caption: the trend's slope with its interval
// (as the warnings print it) and the warnings that named the metric.
func soakCaption(s *soak.Section, key string, t *soak.Trend, per float64) string {
	if t == nil {
		return soak.MetricOf(key).Label + ": no trend (fewer than 3 steady windows)."
	}
	c := fmt.Sprintf("%s, over %d windows; now %s", soak.Describe(*t, per), t.N, fmtSoakValue(key, t.Now))
	if t.Real {
		c += "; a real trend in its bad direction"
	}
	for i, w := range s.Warnings {
		for _, m := range w.Metrics {
			if m == key {
				c += fmt.Sprintf("; named by warning %d at %s", i+1, fmtSeconds(w.TS))
			}
		}
	}
	return c + "."
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

// fmtSoakValue prints a metric's value: sizes in bytes, latencies in ms,
// the rest with three significant digits.
func fmtSoakValue(key string, v float64) string {
	switch soak.MetricOf(key).Unit {
	case "B":
		return fmtBytes(int64(v))
	case "ms":
		return fmtMs(v)
	}
	return fmt.Sprintf("%.3g", v)
}

// fmtSeconds prints seconds since the start: "45 s", "41 min 05 s".
func fmtSeconds(s float64) string {
	if s < 60 {
		return fmt.Sprintf("%.0f s", s)
	}
	m := int(math.Round(s))
	switch {
	case m < 3600 && m%60 == 0:
		return fmt.Sprintf("%d min", m/60)
	case m < 3600:
		return fmt.Sprintf("%d min %02d s", m/60, m%60)
	}
	return fmt.Sprintf("%d h %02d min", m/3600, m/60%60)
}

// soakPlot draws metric key over the windows (a line through every
// window, a dot on the steady ones that trends count), the fitted line of
// its trend t over the windows it was fitted on, and a vertical line at
// each warning and at the collapse, labelled.
func soakPlot(s *soak.Section, key string, t *soak.Trend, ax soakAxis) (*plot.Plot, error) {
	div, unit := soakScale(key)
	p := plot.New()
	p.Title.Text = soak.MetricOf(key).Label
	p.X.Label.Text = ax.Label
	p.Y.Label.Text = unit
	p.Add(plotter.NewGrid())
	var all, steady plotter.XYs
	for _, w := range s.Windows {
		v, ok := w.Values[key]
		if !ok {
			continue
		}
		pt := plotter.XY{X: (w.FromS + w.ToS) / 2 / ax.Div, Y: v / div}
		all = append(all, pt)
		if w.Steady {
			steady = append(steady, pt)
		}
	}
	if err := addLine(p, "per window", all, palette(0), nil); err != nil {
		return nil, err
	}
	if len(steady) > 0 {
		sc, err := plotter.NewScatter(steady)
		if err != nil {
			return nil, fmt.Errorf("report: soak %s: %w", key, err)
		}
		sc.Color, sc.Radius, sc.Shape = palette(0), vg.Points(1.6), draw.CircleGlyph{}
		if len(steady) > 60 { // a 10-hour soak's 120 windows: dots that do not touch
			sc.Radius = vg.Points(0.9)
		}
		p.Add(sc)
	}
	if t != nil {
		if err := addSoakFit(p, *t, div, ax); err != nil {
			return nil, err
		}
	}
	p.Legend = plot.NewLegend() // the section's text says what the lines are
	headroom(p)
	if key == soak.KeyApdex { // APDEX's range ends at 1 (and a flat 1.0 is not drawn on 0-2)
		top := 1.02
		if len(s.Warnings) > 0 || s.Collapse != nil {
			top = 1.12 // room for the markers' text
		}
		p.Y.Max = math.Min(p.Y.Max, top)
		p.Y.Min = math.Max(0, math.Min(p.Y.Min, p.Y.Max-0.3))
	}
	for i, w := range s.Warnings {
		if err := addSoakMarker(p, w.TS/ax.Div, fmt.Sprintf("warning %d", i+1), soakWarningColor, i); err != nil {
			return nil, err
		}
	}
	if c := s.Collapse; c != nil {
		if err := addSoakMarker(p, c.TS/ax.Div, "collapse", soakCollapseColor, len(s.Warnings)); err != nil {
			return nil, err
		}
	}
	return p, nil
}

// addSoakFit draws t's line over the windows it was fitted on (an
// exponential for a trend fitted to logarithms).
func addSoakFit(p *plot.Plot, t soak.Trend, div float64, ax soakAxis) error {
	var pts plotter.XYs
	const steps = 24
	for i := 0; i <= steps; i++ {
		m := t.NowMin - t.SpanMin*float64(steps-i)/steps // minutes
		y := t.Now + t.SlopePerMin*(m-t.NowMin)
		if t.Log {
			y = t.Now * math.Exp(t.SlopePerMin*(m-t.NowMin))
		}
		pts = append(pts, plotter.XY{X: m * 60 / ax.Div, Y: y / div})
	}
	l, err := plotter.NewLine(pts)
	if err != nil {
		return fmt.Errorf("report: soak fit %s: %w", t.Metric, err)
	}
	l.Color, l.Width = soakFlatFitColor, vg.Points(1.2)
	l.Dashes = []vg.Length{vg.Points(4), vg.Points(3)}
	if t.Real {
		l.Color, l.Width, l.Dashes = soakFitColor, vg.Points(1.8), nil
	}
	p.Add(l)
	return nil
}

// addSoakMarker draws a vertical line at x over the plot's Y range with
// text at its top, the i-th marker's text one line lower than the
// previous one's so that close markers stay legible. Call after the
// data and headroom: it uses the Y range.
func addSoakMarker(p *plot.Plot, x float64, text string, clr color.Color, i int) error {
	ymin, ymax := p.Y.Min, p.Y.Max
	if ymax <= ymin {
		ymin, ymax = ymin-1, ymin+1
		p.Y.Min, p.Y.Max = ymin, ymax
	}
	l, err := plotter.NewLine(plotter.XYs{{X: x, Y: ymin}, {X: x, Y: ymax}})
	if err != nil {
		return fmt.Errorf("report: soak marker: %w", err)
	}
	l.Color, l.Width = clr, vg.Points(1.4)
	lb, err := plotter.NewLabels(plotter.XYLabels{XYs: plotter.XYs{{X: x, Y: ymax}}, Labels: []string{text}})
	if err != nil {
		return fmt.Errorf("report: soak marker: %w", err)
	}
	lb.TextStyle[0].Color = clr
	lb.TextStyle[0].XAlign, lb.TextStyle[0].YAlign = draw.XRight, draw.YTop
	lb.Offset = vg.Point{X: -vg.Points(2), Y: -vg.Points(2 + 11*float64(i%4))}
	p.Add(l, lb)
	return nil
}

// writeSoakMarkdown writes each soak section: the warnings' lines, the
// collapse and a table of the trends.
func writeSoakMarkdown(b *strings.Builder, secs []soakSection) {
	for _, s := range secs {
		fmt.Fprintf(b, "\n### Soak trends: %s\n\n%s\n\n", md(s.Run), md(s.About))
		if len(s.Warnings) == 0 {
			b.WriteString("No early warning.\n\n")
		}
		for _, w := range s.Warnings {
			fmt.Fprintf(b, "- **%s**\n", md(w))
		}
		if s.Collapse != "" {
			fmt.Fprintf(b, "- **%s**\n", md(s.Collapse))
		}
		if len(s.Warnings) > 0 || s.Collapse != "" {
			b.WriteString("\n")
		}
		b.WriteString("| metric | slope [interval] | windows | mean | now | real |\n|---|---|---:|---:|---:|---|\n")
		for _, r := range s.Rows {
			fmt.Fprintf(b, "| %s | %s | %s | %s | %s | %s |\n", md(r.Metric), md(r.Slope), r.N, r.Mean, r.Now, r.Real)
		}
		if s.Flat != "" {
			fmt.Fprintf(b, "\nAt 0 in every window: %s.\n", md(s.Flat))
		}
	}
}
