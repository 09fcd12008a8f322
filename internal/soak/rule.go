package soak

import (
	"fmt"
	"math"
	"sort"
	"strings"
	"time"
)

// RuleParams are the early-warning rule's thresholds, as the results
// record them. A metric's trend is real when, over the last Windows
// steady windows (at least MinWindows), the Confidence interval of its
// slope lies wholly on its bad side and the line's change over them
// reaches the metric's floors (Metric.MinRel of its mean and
// Metric.MinAbs). DefaultRule's values are calibrated on steady runs
// (testdata/steady-*.json, TestSteadyNoWarning): none of their trends is
// real, with the margin that test states.
type RuleParams struct {
	Windows    int     `json:"windows"`
	MinWindows int     `json:"min_windows"`
	Confidence float64 `json:"confidence"`
	// ApdexFloor is the APDEX the projection counts down to (the lower
	// bound of "good").
	ApdexFloor float64 `json:"apdex_floor"`
	// OpenModel: the load's arrival rate is fixed (run --rate). Its
	// throughput then follows the arrival schedule (a Poisson process:
	// ±11 % in 2 s windows at 40/s), not the server, so its trend is shown
	// but never warns; a server falling behind shows in p95, APDEX and the
	// sessions instead.
	OpenModel bool `json:"open_model,omitempty"`
}

// DefaultRule is the calibrated rule.
func DefaultRule() RuleParams {
	return RuleParams{Windows: 24, MinWindows: 5, Confidence: 0.99, ApdexFloor: 0.85}
}

// Real reports whether t is a real trend of metric m in its bad
// direction under the rule.
func (p RuleParams) Real(m Metric, t Trend) bool {
	if m.Bad == 0 || t.N < p.MinWindows || p.OpenModel && m.Key == KeyTPS {
		return false
	}
	if m.Bad > 0 && t.LoPerMin <= 0 || m.Bad < 0 && t.HiPerMin >= 0 {
		return false
	}
	change := math.Abs(t.Change())
	rel := change / math.Abs(t.Mean)
	if t.Log {
		rel = math.Expm1(math.Abs(t.SlopePerMin) * t.SpanMin)
	}
	return change >= m.MinAbs && (m.MinRel == 0 || rel >= m.MinRel)
}

// Trends fits every metric of ws over the rule's last steady windows,
// sorted by key, each marked Real or not.
func (p RuleParams) Trends(ws []Window) []Trend {
	var steady []Window
	for _, w := range ws {
		if w.Steady {
			steady = append(steady, w)
		}
	}
	if len(steady) > p.Windows {
		steady = steady[len(steady)-p.Windows:]
	}
	var out []Trend
	for _, k := range Keys(steady) {
		t, ok := Fit(k, steady, p.Confidence, strings.HasPrefix(k, KeyP95))
		if !ok {
			continue
		}
		t.Real = p.Real(MetricOf(k), t)
		out = append(out, t)
	}
	return out
}

// Limits are --stop-on-collapse's: a window whose APDEX is below Apdex,
// or whose mean of active sessions reaches Active, is a collapse (0 =
// that limit off).
type Limits struct {
	Apdex  float64 `json:"apdex,omitempty"`
	Active float64 `json:"active,omitempty"`
}

// Collapse is the reason window w crosses lim, "" when it does not.
func (lim Limits) Collapse(w Window) string {
	if v, ok := w.Values[KeyApdex]; ok && lim.Apdex > 0 && v < lim.Apdex {
		return fmt.Sprintf("window APDEX %.2f below --collapse-apdex %g", v, lim.Apdex)
	}
	if v, ok := w.Values[KeyActive]; ok && lim.Active > 0 && v >= lim.Active {
		return fmt.Sprintf("%.1f active sessions on average, at --collapse-active %g", v, lim.Active)
	}
	return ""
}

// Warning is one early warning: at the end of window Window (TS seconds
// since the start), the metrics whose trends had just become real (New)
// and all those real then (Metrics), what they project and the line
// printed.
type Warning struct {
	TS         float64  `json:"t_s"`
	Window     int      `json:"window"`
	New        []string `json:"new"`
	Metrics    []string `json:"metrics"`
	Projection string   `json:"projection,omitempty"`
	Line       string   `json:"line"`
}

// Context is what the projection needs besides the trends: the key
// operations' targets and max_connections (0 when unknown).
type Context struct {
	Ops            []Op
	MaxConnections int
}

// Detector applies the rule window after window and remembers which
// metrics it has warned of, so that each warns once.
type Detector struct {
	Rule   RuleParams
	Ctx    Context
	warned map[string]bool
}

// Next judges the windows so far (the last one just closed): the trends,
// and a warning when a metric's trend has become real since the last
// one (nil otherwise).
func (d *Detector) Next(ws []Window) ([]Trend, *Warning) {
	if d.warned == nil {
		d.warned = map[string]bool{}
	}
	trends := d.Rule.Trends(ws)
	var real, fresh []Trend
	for _, t := range trends {
		if t.Real {
			real = append(real, t)
			if !d.warned[t.Metric] {
				fresh = append(fresh, t)
			}
		}
	}
	if len(fresh) == 0 || len(ws) == 0 {
		return trends, nil
	}
	for _, t := range fresh {
		d.warned[t.Metric] = true
	}
	last := ws[len(ws)-1]
	wn := &Warning{TS: last.ToS, Window: last.I, Projection: d.project(trends, real)}
	// the new ones first, then the others, each by how fast it moves
	sort.SliceStable(real, func(i, j int) bool {
		ni, nj := contains(fresh, real[i].Metric), contains(fresh, real[j].Metric)
		if ni != nj {
			return ni
		}
		return math.Abs(real[i].PctPer10Min) > math.Abs(real[j].PctPer10Min)
	})
	parts := make([]string, 0, len(real))
	for _, t := range real {
		wn.Metrics = append(wn.Metrics, t.Metric)
		parts = append(parts, Describe(t, UnitOf(last)))
	}
	for _, t := range fresh {
		wn.New = append(wn.New, t.Metric)
	}
	if flatCPU(trends) && anySessions(real) {
		parts[len(parts)-1] += " at flat CPU"
	}
	wn.Line = fmt.Sprintf("degrading at %s: %s", fmtMin(last.ToS), strings.Join(parts, ", "))
	if wn.Projection != "" {
		wn.Line += ": " + wn.Projection
	}
	return trends, wn
}

func contains(ts []Trend, metric string) bool {
	for _, t := range ts {
		if t.Metric == metric {
			return true
		}
	}
	return false
}

// UnitOf is the time unit slopes are printed in, minutes: per 10 min for
// windows of a minute or more, per min for shorter ones (a test's 5 s
// windows).
func UnitOf(w Window) float64 {
	if w.ToS-w.FromS >= 60 {
		return 10
	}
	return 1
}

// Describe is one trend as a warning and the report's captions print it:
// "post_goods_receipt p95 +18 %/10 min [+12, +24]" (the slope per per
// minutes with its interval), sizes also in bytes per minute.
func Describe(t Trend, per float64) string {
	m := MetricOf(t.Metric)
	unit := fmt.Sprintf("%g min", per)
	if per == 1 {
		unit = "min"
	}
	if t.Mean == 0 || m.Key == KeyApdex {
		return fmt.Sprintf("%s %+.3g/%s [%+.3g, %+.3g]", m.Label, t.SlopePerMin*per, unit, t.LoPerMin*per, t.HiPerMin*per)
	}
	s := fmt.Sprintf("%s %+.0f %%/%s [%+.0f, %+.0f]", m.Label, t.Pct(t.SlopePerMin, per), unit, t.Pct(t.LoPerMin, per), t.Pct(t.HiPerMin, per))
	if m.Unit == "B" {
		s += fmt.Sprintf(" (%+.1f MB/min)", t.SlopePerMin/(1<<20))
	}
	return s
}

// project says where the real trends lead at their slope: APDEX below
// the floor when its own trend is real, else the first operation whose
// p95 trend is real at its T (where its APDEX starts to fall); active
// sessions at max_connections.
func (d *Detector) project(all, real []Trend) string {
	var out []string
	floor := d.Rule.ApdexFloor
	a, ok := find(real, KeyApdex)
	switch {
	case ok && a.Now <= floor:
		out = append(out, fmt.Sprintf("APDEX is %.2f, below %.2f already", a.Now, floor))
	case ok:
		out = append(out, fmt.Sprintf("at this slope APDEX falls below %.2f in ~%s", floor, fmtMinutes(a.MinutesTo(floor))))
	default:
		if s := d.p95AtTarget(real); s != "" {
			out = append(out, s)
		}
	}
	if a, ok := find(real, KeyActive); ok && d.Ctx.MaxConnections > 0 && a.Now < float64(d.Ctx.MaxConnections) {
		out = append(out, fmt.Sprintf("at this slope active sessions reach max_connections %d in ~%s", d.Ctx.MaxConnections,
			fmtMinutes(a.MinutesTo(float64(d.Ctx.MaxConnections)))))
	}
	return strings.Join(out, "; ")
}

// p95AtTarget is when the first real p95 trend below its operation's T
// reaches it; "" when none.
func (d *Detector) p95AtTarget(real []Trend) string {
	for _, t := range real {
		name, ok := strings.CutPrefix(t.Metric, KeyP95)
		if !ok {
			continue
		}
		for _, op := range d.Ctx.Ops {
			target := float64(op.Target) / float64(time.Millisecond)
			switch {
			case op.Name != name:
			case t.Now >= target:
				return fmt.Sprintf("%s p95 is past its T %s already: APDEX falls", name, fmtMs(target))
			default:
				return fmt.Sprintf("at this slope %s p95 reaches its T %s in ~%s and APDEX starts to fall", name, fmtMs(target), fmtMinutes(t.MinutesTo(target)))
			}
		}
	}
	return ""
}

func find(ts []Trend, metric string) (Trend, bool) {
	for _, t := range ts {
		if t.Metric == metric {
			return t, true
		}
	}
	return Trend{}, false
}

// flatCPU: the host's CPU has no real trend (measured, not real).
func flatCPU(ts []Trend) bool {
	t, ok := find(ts, KeyCPU)
	return ok && t.LoPerMin <= 0 && t.HiPerMin >= 0
}

func anySessions(ts []Trend) bool {
	for _, t := range ts {
		if t.Metric == KeyActive || t.Metric == KeyWaiting {
			return true
		}
	}
	return false
}

// fmtMin is seconds since the start as "41m05s" (or "35s").
func fmtMin(s float64) string {
	d := time.Duration(math.Round(s)) * time.Second
	if d < time.Minute {
		return d.String()
	}
	return fmt.Sprintf("%dm%02ds", int(d.Minutes()), int(d.Seconds())%60)
}

// fmtMinutes is a projected time: "25 min", "40 s", "3.5 h".
func fmtMinutes(m float64) string {
	switch {
	case m < 1:
		return fmt.Sprintf("%.0f s", math.Max(m*60, 1))
	case m < 120:
		return fmt.Sprintf("%.0f min", m)
	default:
		return fmt.Sprintf("%.1f h", m/60)
	}
}

func fmtMs(v float64) string {
	if v >= 1000 {
		return fmt.Sprintf("%gs", v/1000)
	}
	return fmt.Sprintf("%gms", v)
}
