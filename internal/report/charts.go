package report

import (
	"bytes"
	"fmt"
	"image/color"
	"math"
	"sort"
	"strconv"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgsvg"

	"github.com/erplab/erplab/internal/sampler"
)

// Chart is one rendered chart: an id for the page, a title and the SVG
// markup (an <svg> element, without XML prolog) as gonum.org/v1/plot's
// vgsvg backend draws it.
type Chart struct {
	ID    string
	Title string
	SVG   string
}

// Chart size, points.
const (
	chartW = 7.5 * vg.Inch
	chartH = 3.2 * vg.Inch
)

// okabeIto is the colour-blind-safe palette of Okabe and Ito ("Color
// Universal Design", 2008) without its yellow (too light on white) and
// with vermillion last: runs are told apart by blue, orange, bluish
// green, reddish purple, sky blue and black, never by red against green.
var okabeIto = []color.Color{
	color.RGBA{R: 0x00, G: 0x72, B: 0xB2, A: 255}, // blue
	color.RGBA{R: 0xE6, G: 0x9F, B: 0x00, A: 255}, // orange
	color.RGBA{R: 0x00, G: 0x9E, B: 0x73, A: 255}, // bluish green
	color.RGBA{R: 0xCC, G: 0x79, B: 0xA7, A: 255}, // reddish purple
	color.RGBA{R: 0x56, G: 0xB4, B: 0xE9, A: 255}, // sky blue
	color.RGBA{R: 0x00, G: 0x00, B: 0x00, A: 255}, // black
	color.RGBA{R: 0xD5, G: 0x5E, B: 0x00, A: 255}, // vermillion
}

// stormColor marks storms: vermillion, the palette's last colour.
var stormColor = okabeIto[len(okabeIto)-1]

// palette gives the i-th colour of a chart (runs in the APDEX bars,
// percentiles in the latency charts, wait events in the stacked chart):
// Okabe-Ito, then the same colours half-way to white, then again.
func palette(i int) color.Color {
	c := okabeIto[i%len(okabeIto)].(color.RGBA)
	if (i/len(okabeIto))%2 == 1 {
		c = color.RGBA{R: c.R/2 + 128, G: c.G/2 + 128, B: c.B/2 + 128, A: 255}
	}
	return c
}

// hexColor is c as a CSS colour, "#0072b2".
func hexColor(c color.Color) string {
	r, g, b, _ := c.RGBA()
	return fmt.Sprintf("#%02x%02x%02x", r>>8, g>>8, b>>8)
}

// render draws p into an SVG element.
func render(p *plot.Plot, w, h vg.Length) (string, error) {
	return renderWith(p.Title.Text, w, h, p.Draw)
}

// renderWith draws on a w x h canvas with drawFn and returns the SVG
// element; title names the chart in errors.
func renderWith(title string, w, h vg.Length, drawFn func(draw.Canvas)) (string, error) {
	c := vgsvg.New(w, h)
	drawFn(draw.New(c))
	var buf bytes.Buffer
	if _, err := c.WriteTo(&buf); err != nil {
		return "", fmt.Errorf("report: render chart %q: %w", title, err)
	}
	s := buf.String()
	i := bytes.Index(buf.Bytes(), []byte("<svg"))
	if i < 0 {
		return "", fmt.Errorf("report: render chart %q: no <svg> element", title)
	}
	return s[i:], nil
}

func newPlot(title, ylabel string) *plot.Plot {
	p := plot.New()
	p.Title.Text = title
	p.X.Label.Text = "time since start (s)"
	p.Y.Label.Text = ylabel
	p.Legend.Top = true
	p.Add(plotter.NewGrid())
	return p
}

// addLine adds a line with a legend entry; empty point sets are skipped.
func addLine(p *plot.Plot, name string, pts plotter.XYs, clr color.Color, dashes []vg.Length) error {
	if len(pts) == 0 {
		return nil
	}
	l, err := plotter.NewLine(pts)
	if err != nil {
		return fmt.Errorf("report: %s: %w", name, err)
	}
	l.Color = clr
	l.Width = vg.Points(1.2)
	l.Dashes = dashes
	p.Add(l)
	p.Legend.Add(name, l)
	return nil
}

// stormMark is a storm on the time axis.
// t is when it fired, t0 its baseline point, t1 its end (the run's end
// while it lasted); runIndex the run it belongs to.
type stormMark struct {
	t, t0, t1 float64
	runIndex  int
}

func stormsOf(runs []Run) []stormMark {
	var out []stormMark
	for i, r := range runs {
		if r.Obs == nil {
			continue
		}
		for _, s := range r.Obs.Storms {
			m := stormMark{t: s.T, t0: s.StartT, t1: r.end(), runIndex: i}
			if s.EndT != nil {
				m.t1 = *s.EndT
			}
			out = append(out, m)
		}
	}
	return out
}

// headroom raises the Y maximum by a third so the legend (top right)
// sits above the data.
func headroom(p *plot.Plot) {
	if p.Y.Max > p.Y.Min {
		p.Y.Max = p.Y.Min + (p.Y.Max-p.Y.Min)*4/3
	}
}

// addStorms marks storms on p's time axis: a shaded span from the
// storm's baseline point to its end and a red line when it fired. Call
// after the data is added (it uses the data's Y range).
func addStorms(p *plot.Plot, storms []stormMark) error {
	if len(storms) == 0 {
		return nil
	}
	ymin, ymax := p.Y.Min, p.Y.Max
	if ymax <= ymin {
		ymax = ymin + 1
	}
	for i, s := range storms {
		span, err := plotter.NewPolygon(plotter.XYs{{X: s.t0, Y: ymin}, {X: s.t1, Y: ymin}, {X: s.t1, Y: ymax}, {X: s.t0, Y: ymax}})
		if err != nil {
			return fmt.Errorf("report: storm span: %w", err)
		}
		span.Color = color.NRGBA{R: 0xD5, G: 0x5E, B: 0x00, A: 40}
		span.LineStyle.Width = 0
		l, err := plotter.NewLine(plotter.XYs{{X: s.t, Y: ymin}, {X: s.t, Y: ymax}})
		if err != nil {
			return fmt.Errorf("report: storm line: %w", err)
		}
		l.Color = stormColor
		l.Width = vg.Points(1.5)
		p.Add(span, l)
		if i == 0 {
			p.Legend.Add("storm", l)
		}
	}
	return nil
}

func apdexChart(runs []Run, ops []string) (*plot.Plot, error) {
	p := plot.New()
	p.Title.Text = "APDEX per key operation"
	p.Y.Label.Text = "APDEX"
	p.Y.Min, p.Y.Max = 0, 1 // APDEX's own range; the legend goes beside (legendBeside)
	p.Y.Tick.Marker = plot.ConstantTicks(apdexTicks())
	p.Legend.Top = true
	p.Add(plotter.NewGrid())
	n := len(runs)
	// 320 pt of bars over the plot's width left of the legend column
	w := vg.Points(math.Max(3, math.Min(18, 320/float64(len(ops)*n))))
	for i, r := range runs {
		vals := make(plotter.Values, len(ops))
		for j, name := range ops {
			if op := r.op(name); op != nil && !op.Apdex.NS() {
				vals[j] = op.Apdex.Value
			}
		}
		bc, err := plotter.NewBarChart(vals, w)
		if err != nil {
			return nil, fmt.Errorf("report: APDEX bars: %w", err)
		}
		bc.Color = palette(i)
		bc.LineStyle.Width = 0
		bc.Offset = vg.Length(float64(i)-float64(n-1)/2) * w
		p.Add(bc)
		p.Legend.Add(r.Name, bc)
	}
	p.NominalX(ops...)
	p.X.Tick.Label.Rotation = math.Pi / 5
	p.X.Tick.Label.XAlign = draw.XRight
	p.X.Tick.Label.YAlign = draw.YCenter
	return p, nil
}

// apdexTicks label APDEX's axis every 0.2 from 0.0 to 1.0.
func apdexTicks() []plot.Tick {
	var ts []plot.Tick
	for i := 0; i <= 10; i++ {
		t := plot.Tick{Value: float64(i) / 10}
		if i%2 == 0 {
			t.Label = strconv.FormatFloat(t.Value, 'f', 1, 64)
		}
		ts = append(ts, t)
	}
	return ts
}

// tallLegend reports whether p's legend would cover more than a third
// of the chart's height (several runs' percentiles): it goes beside.
func tallLegend(p *plot.Plot) bool {
	return p.Legend.Rectangle(draw.Canvas{}).Size().Y > chartH/3
}

// legendBeside renders p with its legend in a column of its own at the
// right, off the data (a chart whose axis leaves no room above it).
func legendBeside(p *plot.Plot, w, h vg.Length) (string, error) {
	leg := p.Legend
	leg.Top, leg.Left = true, true
	p.Legend = plot.NewLegend()
	lw := leg.Rectangle(draw.Canvas{}).Size().X + vg.Points(16)
	return renderWith(p.Title.Text, w, h, func(c draw.Canvas) {
		p.Draw(draw.Crop(c, 0, -lw, 0, 0))
		leg.Draw(draw.Crop(c, w-lw+vg.Points(8), 0, 0, -vg.Points(24)))
	})
}

func latencyChart(runs []Run, op string, storms []stormMark) (*plot.Plot, error) {
	p := newPlot("Response time of "+op+" per interval", "ms")
	for ri, r := range runs {
		for qi, q := range []string{"p50", "p95", "p99"} {
			var pts plotter.XYs
			for _, iv := range r.Doc.Series {
				o, ok := iv.Ops[op]
				if !ok || o.Count-o.Errors <= 0 {
					continue
				}
				v := []float64{o.P50, o.P95, o.P99}[qi]
				pts = append(pts, plotter.XY{X: iv.T, Y: v})
			}
			name := q
			if len(runs) > 1 {
				name = r.Name + " " + q
			}
			if err := addLine(p, name, pts, palette(qi), plotutil.Dashes(ri)); err != nil {
				return nil, err
			}
		}
	}
	p.Y.Min = 0
	headroom(p)
	return p, addStorms(p, storms)
}

func vusChart(runs []Run, storms []stormMark) (*plot.Plot, error) {
	p := newPlot("Virtual users", "VUs")
	for i, r := range runs {
		var pts plotter.XYs
		for _, iv := range r.Doc.Series {
			pts = append(pts, plotter.XY{X: iv.T, Y: float64(iv.VUs)})
		}
		if err := addLine(p, r.Name, pts, palette(i), nil); err != nil {
			return nil, err
		}
	}
	p.Y.Min = 0
	headroom(p)
	return p, addStorms(p, storms)
}

func throughputChart(runs []Run, storms []stormMark) (*plot.Plot, error) {
	p := newPlot("Throughput (key operations completed)", "executions/s")
	for i, r := range runs {
		if err := addLine(p, r.Name, throughputPoints(r), palette(i), nil); err != nil {
			return nil, err
		}
	}
	p.Y.Min = 0
	headroom(p)
	return p, addStorms(p, storms)
}

// throughputPoints are r's executions per second at each point of its
// series: its executions over the time since the previous point (a
// thinned series' coarse point covers span_s, that time); the last,
// partial interval is left out.
func throughputPoints(r Run) plotter.XYs {
	var pts plotter.XYs
	prev, step := 0.0, r.intervalSeconds()
	for _, iv := range r.Doc.Series {
		dt := iv.T - prev
		prev = iv.T
		if dt < 0.9*step { // the last, partial interval
			continue
		}
		pts = append(pts, plotter.XY{X: iv.T, Y: float64(iv.Count) / dt})
	}
	return pts
}

// maxWaitLayers is how many wait events the stacked chart shows; the
// rest is summed as "other".
const maxWaitLayers = 8

// waitColors gives every wait event one color across all runs' charts,
// in order of total sessions over all runs; "other" gets the next one.
func waitColors(runs []Run) map[string]color.Color {
	tot := map[string]int{}
	for _, r := range runs {
		if r.Obs == nil {
			continue
		}
		for _, s := range r.Obs.Series {
			for k, v := range s.Waits {
				tot[k] += v
			}
		}
	}
	keys := make([]string, 0, len(tot))
	for k := range tot {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		if tot[keys[i]] != tot[keys[j]] {
			return tot[keys[i]] > tot[keys[j]]
		}
		return keys[i] < keys[j]
	})
	out := map[string]color.Color{}
	for i, k := range keys {
		out[k] = palette(i)
	}
	out["other"] = palette(len(keys))
	return out
}

func waitsChart(r Run, colors map[string]color.Color, storms []stormMark) (*plot.Plot, error) {
	p := newPlot("Active sessions by wait event: "+r.Name, "active sessions")
	tot := map[string]int{}
	for _, s := range r.Obs.Series {
		for k, v := range s.Waits {
			tot[k] += v
		}
	}
	keys := make([]string, 0, len(tot))
	for k := range tot {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		if tot[keys[i]] != tot[keys[j]] {
			return tot[keys[i]] > tot[keys[j]]
		}
		return keys[i] < keys[j]
	})
	layers := keys
	other := false
	if len(keys) > maxWaitLayers {
		layers, other = keys[:maxWaitLayers], true
	}
	names := append([]string{}, layers...)
	if other {
		names = append(names, "other")
	}
	// cum[k][i] is the top of layer k at point i.
	cum := make([]plotter.XYs, len(names))
	for _, s := range r.Obs.Series {
		acc := 0.0
		for k, name := range names {
			v := 0
			if name == "other" {
				for _, key := range keys[maxWaitLayers:] {
					v += s.Waits[key]
				}
			} else {
				v = s.Waits[name]
			}
			acc += float64(v)
			cum[k] = append(cum[k], plotter.XY{X: s.T, Y: acc})
		}
	}
	// Draw the top layer first so lower layers paint over it.
	for k := len(names) - 1; k >= 0; k-- {
		if len(cum[k]) == 0 {
			continue
		}
		l, err := plotter.NewLine(cum[k])
		if err != nil {
			return nil, fmt.Errorf("report: wait layer %s: %w", names[k], err)
		}
		l.FillColor = colors[names[k]]
		l.Color = colors[names[k]]
		l.Width = vg.Points(0.5)
		p.Add(l)
	}
	for _, name := range names {
		sw, err := plotter.NewLine(plotter.XYs{{X: 0, Y: 0}, {X: 0, Y: 0}})
		if err != nil {
			return nil, err
		}
		sw.Color = colors[name]
		sw.Width = vg.Points(6)
		p.Legend.Add(name, sw)
	}
	p.Y.Min = 0
	headroom(p)
	return p, addStorms(p, storms)
}

func cpuChart(r Run, storms []stormMark) (*plot.Plot, error) {
	p := newPlot("Host CPU: "+r.Name, "% of all CPUs")
	parts := []struct {
		name string
		f    func(sampler.CPU) float64
	}{
		{"user", func(c sampler.CPU) float64 { return c.User }},
		{"system", func(c sampler.CPU) float64 { return c.System }},
		{"iowait", func(c sampler.CPU) float64 { return c.Iowait }},
		{"softirq", func(c sampler.CPU) float64 { return c.SoftIRQ }},
	}
	for i, part := range parts {
		var pts plotter.XYs
		for _, s := range r.Obs.Series {
			if s.Host != nil && s.Elapsed > 0 {
				pts = append(pts, plotter.XY{X: s.T, Y: part.f(s.Host.CPU)})
			}
		}
		if err := addLine(p, part.name, pts, palette(i), nil); err != nil {
			return nil, err
		}
	}
	p.Y.Min = 0
	headroom(p)
	return p, addStorms(p, storms)
}

func catalogChart(runs []Run, storms []stormMark) (*plot.Plot, error) {
	p := newPlot("System catalog size (pg_class, pg_attribute, pg_depend, pg_type, pg_index)", "MiB")
	for i, r := range runs {
		if r.Obs == nil {
			continue
		}
		var pts plotter.XYs
		for _, s := range r.Obs.Series {
			if len(s.Catalog) > 0 {
				pts = append(pts, plotter.XY{X: s.T, Y: float64(s.CatalogBytes()) / (1 << 20)})
			}
		}
		if err := addLine(p, r.Name, pts, palette(i), nil); err != nil {
			return nil, err
		}
	}
	p.Y.Min = 0
	headroom(p)
	return p, addStorms(p, storms)
}

func tempFilesChart(runs []Run, storms []stormMark) (*plot.Plot, error) {
	p := newPlot("Temporary files (pg_stat_database.temp_files)", "files/s")
	for i, r := range runs {
		if r.Obs == nil {
			continue
		}
		var pts plotter.XYs
		for _, s := range r.Obs.Series {
			if s.DB != nil {
				pts = append(pts, plotter.XY{X: s.T, Y: s.DB.TempFiles})
			}
		}
		if err := addLine(p, r.Name, pts, palette(i), nil); err != nil {
			return nil, err
		}
	}
	p.Y.Min = 0
	if p.Y.Max <= 0 {
		p.Y.Max = 1
	}
	headroom(p)
	return p, addStorms(p, storms)
}

// Charts renders every chart of the report for runs, in page order:
// APDEX bars; response-time percentiles per key operation (the union of
// the runs' operations, in the first run's order); VUs; throughput; per
// run with observations, active sessions by wait event (stacked) and,
// when the host was sampled, host CPU; when any run has observations,
// catalog size and temp files. Storms are marked on every time chart.
func Charts(runs []Run) ([]Chart, error) {
	ops := opNames(runs)
	storms := stormsOf(runs)
	var out []Chart
	add := chartAdder(&out)
	p, err := apdexChart(runs, ops)
	if err != nil {
		return nil, err
	}
	svg, err := legendBeside(p, chartW, chartH) // APDEX's axis ends at 1.0: no room above
	if err != nil {
		return nil, err
	}
	out = append(out, Chart{ID: "apdex", Title: p.Title.Text, SVG: svg})
	for i, op := range ops {
		p, err := latencyChart(runs, op, storms)
		if err := add(fmt.Sprintf("latency-%d", i), p, err); err != nil {
			return nil, err
		}
	}
	p, err = vusChart(runs, storms)
	if err := add("vus", p, err); err != nil {
		return nil, err
	}
	p, err = throughputChart(runs, storms)
	if err := add("throughput", p, err); err != nil {
		return nil, err
	}
	anyObs := false
	colors := waitColors(runs)
	for i, r := range runs {
		if r.Obs == nil {
			continue
		}
		anyObs = true
		own := runStorms(storms, i)
		p, err := waitsChart(r, colors, own)
		if err := add(fmt.Sprintf("waits-%d", i), p, err); err != nil {
			return nil, err
		}
		if r.Obs.Server.HostSampled {
			p, err := cpuChart(r, own)
			if err := add(fmt.Sprintf("cpu-%d", i), p, err); err != nil {
				return nil, err
			}
		}
	}
	if anyObs {
		p, err := catalogChart(runs, storms)
		if err := add("catalog", p, err); err != nil {
			return nil, err
		}
		p, err = tempFilesChart(runs, storms)
		if err := add("tempfiles", p, err); err != nil {
			return nil, err
		}
	}
	return out, nil
}

func runStorms(all []stormMark, run int) []stormMark {
	var out []stormMark
	for _, s := range all {
		if s.runIndex == run {
			out = append(out, s)
		}
	}
	return out
}

// chartAdder returns a function that renders a plot (or passes on the
// error that building it returned) and appends it to *out under id.
func chartAdder(out *[]Chart) func(id string, p *plot.Plot, err error) error {
	return func(id string, p *plot.Plot, err error) error {
		if err != nil {
			return err
		}
		render := render
		if tallLegend(p) {
			render = legendBeside
		}
		svg, err := render(p, chartW, chartH)
		if err != nil {
			return err
		}
		*out = append(*out, Chart{ID: id, Title: p.Title.Text, SVG: svg})
		return nil
	}
}
