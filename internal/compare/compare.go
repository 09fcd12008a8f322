// Package compare compares erplab run results (docs/results-format.md):
// a baseline run against a variant, per key operation and for the
// integral, plus the recorded observations, with a verdict per row that
// separates a real difference from noise using only what a results file
// keeps (per-interval series, APDEX zone counts, sampler series).
//
// Methods (see stats.go for the sources):
//   - APDEX of an operation: a large-sample z-test of the mean per-sample
//     APDEX score (1 satisfied, 0.5 tolerating, 0 frustrated) from the zone
//     counts; with no tolerating samples it is the unpooled two-proportion
//     z-test. The integral APDEX uses the same variances combined with the
//     priority weights of package apdex (delta method).
//   - Error rate: the unpooled two-proportion z-test on errors/count.
//   - p50/p95/p99: Mann-Whitney U test over the per-interval percentiles
//     of the operation (series[].ops[op].p50_ms ...).
//   - Throughput: Welch's t-test over the per-interval execution counts.
//   - Observations: Mann-Whitney U over the per-sample share of active
//     sessions in a wait event; Welch's t-test over per-sample host CPU %,
//     catalog growth (bytes/s) and temp files (files/s).
//
// A row is better or worse only when its test is significant after Holm's
// correction over all tested rows of the comparison (family-wise error
// rate Options.Alpha) and the relative difference is at least
// Options.MinEffect; otherwise it is "no significant difference". Warm-up
// intervals and a last partial interval are left out of the series tests.
package compare

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"sort"

	"github.com/erplab/erplab/internal/apdex"
	"github.com/erplab/erplab/internal/results"
	"github.com/erplab/erplab/internal/sampler"
)

// Direction says which way of a metric is good.
type Direction int

const (
	// LowerBetter metrics (latency, errors, CPU) improve when they fall.
	LowerBetter Direction = iota
	// HigherBetter metrics (APDEX, throughput) improve when they rise.
	HigherBetter
	// Neutral metrics (the CPU share of active sessions) are only higher
	// or lower.
	Neutral
)

// Verdict is the outcome of one row.
type Verdict string

// Verdicts.
const (
	Better        Verdict = "better"
	Worse         Verdict = "worse"
	Higher        Verdict = "higher"
	Lower         Verdict = "lower"
	NoDifference  Verdict = "no significant difference"
	NotApplicable Verdict = "n/a"
)

// Methods, as named in Row.Method.
const (
	MethodMannWhitney = "mann-whitney-u"
	MethodWelch       = "welch-t"
	MethodZ           = "two-proportion-z"
)

// Defaults of Options.
const (
	DefaultAlpha     = 0.05
	DefaultMinEffect = 0.05
	// MinPoints is the fewest series points per run a series test needs.
	MinPoints = 5
)

// Options tune the verdicts. The zero value uses the defaults.
type Options struct {
	// Alpha is the family-wise significance level over all tested rows of
	// one comparison (Holm), default DefaultAlpha (0.05).
	Alpha float64
	// MinEffect is the smallest relative difference |B-A|/|A| that counts
	// as better or worse, default DefaultMinEffect (0.05 = 5 %).
	MinEffect float64
}

func (o Options) norm() (Options, error) {
	if o.Alpha == 0 {
		o.Alpha = DefaultAlpha
	}
	if o.MinEffect == 0 {
		o.MinEffect = DefaultMinEffect
	}
	if !(o.Alpha > 0 && o.Alpha < 1) {
		return o, fmt.Errorf("compare: alpha must be in (0, 1), got %g", o.Alpha)
	}
	if !(o.MinEffect >= 0) {
		return o, fmt.Errorf("compare: min effect must be >= 0, got %g", o.MinEffect)
	}
	return o, nil
}

// Row is one compared figure.
type Row struct {
	// Section is "operation", "integral" or "observations"; Subject the
	// operation name, "integral", or the observed quantity's name
	// ("wait IO:DataFileRead", "host CPU").
	Section string `json:"section"`
	Subject string `json:"subject"`
	// Metric names the figure ("apdex", "p95_ms", "per_second",
	// "error_pct", "share_pct", "user_pct", ...); Unit its unit.
	Metric string `json:"metric"`
	Unit   string `json:"unit,omitempty"`
	// A and B are the baseline's and the variant's values; Delta is B-A
	// and DeltaPct 100·(B-A)/|A| (NaN when A is 0).
	A        float64 `json:"a"`
	B        float64 `json:"b"`
	Delta    float64 `json:"delta"`
	DeltaPct float64 `json:"delta_pct"`
	// Method is the test used (Method* constants) and P its two-sided
	// p-value before Holm's correction; NaN when not tested.
	Method    string    `json:"method,omitempty"`
	P         float64   `json:"p"`
	Direction Direction `json:"-"`
	Verdict   Verdict   `json:"verdict"`
	// Note says why a row was not tested ("too few intervals").
	Note string `json:"note,omitempty"`
}

// MarshalJSON writes NaN numbers as null.
func (r Row) MarshalJSON() ([]byte, error) {
	type plain Row
	num := func(v float64) any {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return nil
		}
		return v
	}
	return json.Marshal(struct {
		plain
		A        any `json:"a"`
		B        any `json:"b"`
		Delta    any `json:"delta"`
		DeltaPct any `json:"delta_pct"`
		P        any `json:"p"`
	}{plain(r), num(r.A), num(r.B), num(r.Delta), num(r.DeltaPct), num(r.P)})
}

// Comparison is a baseline run against one variant.
type Comparison struct {
	Baseline string  `json:"baseline"`
	Variant  string  `json:"variant"`
	Alpha    float64 `json:"alpha"`
	// MinEffect is the relative threshold (0.05 = 5 %).
	MinEffect float64 `json:"min_effect"`
	Rows      []Row   `json:"rows"`
}

// Count returns how many rows have verdict v.
func (c *Comparison) Count(v Verdict) int {
	n := 0
	for _, r := range c.Rows {
		if r.Verdict == v {
			n++
		}
	}
	return n
}

// Find returns the row of subject and metric, or nil.
func (c *Comparison) Find(subject, metric string) *Row {
	for i := range c.Rows {
		if c.Rows[i].Subject == subject && c.Rows[i].Metric == metric {
			return &c.Rows[i]
		}
	}
	return nil
}

// Compare compares variant b against baseline a; names label them (file
// names). Operations present in only one run are compared with the
// other side's values as NaN and verdict n/a. It returns an error when an
// observations section cannot be decoded or opts are out of range.
func Compare(nameA string, a *results.Document, nameB string, b *results.Document, opts Options) (*Comparison, error) {
	opts, err := opts.norm()
	if err != nil {
		return nil, err
	}
	if a == nil || b == nil {
		return nil, errors.New("compare: missing document")
	}
	c := &Comparison{Baseline: nameA, Variant: nameB, Alpha: opts.Alpha, MinEffect: opts.MinEffect}
	c.Rows = append(c.Rows, operationRows(a, b)...)
	c.Rows = append(c.Rows, integralRows(a, b)...)
	obs, err := observationRows(a, b)
	if err != nil {
		return nil, err
	}
	c.Rows = append(c.Rows, obs...)
	decide(c.Rows, opts)
	return c, nil
}

// decide fills Delta, DeltaPct and Verdict of every row.
func decide(rows []Row, opts Options) {
	ps := make([]float64, len(rows))
	for i, r := range rows {
		ps[i] = r.P
	}
	sig := holm(ps, opts.Alpha)
	for i := range rows {
		r := &rows[i]
		r.Delta = r.B - r.A
		r.DeltaPct = math.NaN()
		if r.A != 0 {
			r.DeltaPct = 100 * r.Delta / math.Abs(r.A)
		}
		switch {
		case math.IsNaN(r.A) || math.IsNaN(r.B):
			r.Verdict = NotApplicable
			continue
		case math.IsNaN(r.P):
			if r.Note != "" {
				r.Verdict = NotApplicable
			} else {
				r.Verdict = NoDifference
			}
			continue
		}
		effect := math.Inf(1)
		if r.A != 0 {
			effect = math.Abs(r.Delta) / math.Abs(r.A)
		} else if r.Delta == 0 {
			effect = 0
		}
		if !sig[i] || effect < opts.MinEffect {
			r.Verdict = NoDifference
			continue
		}
		up := r.Delta > 0
		switch r.Direction {
		case HigherBetter:
			r.Verdict = map[bool]Verdict{true: Better, false: Worse}[up]
		case LowerBetter:
			r.Verdict = map[bool]Verdict{true: Worse, false: Better}[up]
		default:
			r.Verdict = map[bool]Verdict{true: Higher, false: Lower}[up]
		}
	}
}

// scoredIntervals returns the intervals that count for series tests: not
// warm-up and not a last partial interval (shorter than the run's
// interval by more than 10 %).
func scoredIntervals(d *results.Document) []results.Interval {
	step := intervalSeconds(d)
	var out []results.Interval
	prev := 0.0
	for i, iv := range d.Series {
		length := iv.T - prev
		prev = iv.T
		if iv.Warmup {
			continue
		}
		if i == len(d.Series)-1 && length < 0.9*step {
			continue
		}
		out = append(out, iv)
	}
	return out
}

func intervalSeconds(d *results.Document) float64 {
	var p struct {
		IntervalS float64 `json:"interval_s"`
	}
	if len(d.Parameters) > 0 && json.Unmarshal(d.Parameters, &p) == nil && p.IntervalS > 0 {
		return p.IntervalS
	}
	return 1
}

func opNames(a, b *results.Document) []string {
	seen := map[string]bool{}
	var names []string
	for _, d := range []*results.Document{a, b} {
		for _, op := range d.Operations {
			if !seen[op.Name] {
				seen[op.Name] = true
				names = append(names, op.Name)
			}
		}
	}
	return names
}

func findOp(d *results.Document, name string) *results.OpResult {
	for i := range d.Operations {
		if d.Operations[i].Name == name {
			return &d.Operations[i]
		}
	}
	return nil
}

// apdexMoments returns the mean per-sample APDEX score and the variance
// of that mean (σ²/n) from zone counts; ok false with no samples.
func apdexMoments(z apdex.Counts) (mean, varMean float64, ok bool) {
	n := float64(z.Satisfied + z.Tolerating + z.Frustrated)
	if n == 0 {
		return 0, 0, false
	}
	mean = (float64(z.Satisfied) + 0.5*float64(z.Tolerating)) / n
	second := (float64(z.Satisfied) + 0.25*float64(z.Tolerating)) / n
	v := second - mean*mean
	if v < 0 {
		v = 0
	}
	return mean, v / n, true
}

func proportionMoments(k, n int64) (p, varMean float64) {
	if n == 0 {
		return 0, 0
	}
	p = float64(k) / float64(n)
	return p, p * (1 - p) / float64(n)
}

var nan = math.NaN()

func operationRows(a, b *results.Document) []Row {
	ia, ib := scoredIntervals(a), scoredIntervals(b)
	var rows []Row
	for _, name := range opNames(a, b) {
		oa, ob := findOp(a, name), findOp(b, name)
		base := Row{Section: "operation", Subject: name, P: nan}
		if oa == nil || ob == nil {
			r := base
			r.Metric, r.A, r.B, r.Note = "apdex", nan, nan, "operation missing in one run"
			rows = append(rows, r)
			continue
		}
		// APDEX.
		r := base
		r.Metric, r.Direction = "apdex", HigherBetter
		ma, va, okA := apdexMoments(oa.Zones)
		mb, vb, okB := apdexMoments(ob.Zones)
		r.A, r.B = oa.Apdex.Value, ob.Apdex.Value
		if okA && okB {
			r.Method, r.P = MethodZ, zTest(ma, va, mb, vb)
		} else {
			r.A, r.B, r.Note = orNaN(r.A, okA), orNaN(r.B, okB), "NS (no samples)"
		}
		rows = append(rows, r)
		// Percentiles over the interval series.
		for _, q := range []struct {
			metric string
			whole  func(results.Latency) float64
			iv     func(results.OpInterval) float64
		}{
			{"p50_ms", func(l results.Latency) float64 { return l.P50 }, func(o results.OpInterval) float64 { return o.P50 }},
			{"p95_ms", func(l results.Latency) float64 { return l.P95 }, func(o results.OpInterval) float64 { return o.P95 }},
			{"p99_ms", func(l results.Latency) float64 { return l.P99 }, func(o results.OpInterval) float64 { return o.P99 }},
		} {
			r := base
			r.Metric, r.Unit, r.Direction = q.metric, "ms", LowerBetter
			r.A, r.B = q.whole(oa.Response), q.whole(ob.Response)
			xa, xb := opSeries(ia, name, q.iv), opSeries(ib, name, q.iv)
			if len(xa) >= MinPoints && len(xb) >= MinPoints {
				r.Method, r.P = MethodMannWhitney, mannWhitney(xa, xb)
			} else {
				r.Note = fmt.Sprintf("too few intervals with executions (%d, %d; need %d)", len(xa), len(xb), MinPoints)
			}
			rows = append(rows, r)
		}
		// Throughput.
		r = base
		r.Metric, r.Unit, r.Direction = "per_second", "1/s", HigherBetter
		r.A, r.B = oa.PerSecond, ob.PerSecond
		ca, cb := opCounts(ia, name), opCounts(ib, name)
		r.Method, r.P, r.Note = seriesTest(welch, MethodWelch, ca, cb)
		rows = append(rows, r)
		// Errors.
		r = base
		r.Metric, r.Unit, r.Direction = "error_pct", "%", LowerBetter
		pa, vpa := proportionMoments(oa.Errors, oa.Count)
		pb, vpb := proportionMoments(ob.Errors, ob.Count)
		r.A, r.B = 100*pa, 100*pb
		if oa.Count > 0 && ob.Count > 0 {
			r.Method, r.P = MethodZ, zTest(pa, vpa, pb, vpb)
		}
		rows = append(rows, r)
	}
	return rows
}

func orNaN(v float64, ok bool) float64 {
	if ok {
		return v
	}
	return nan
}

func seriesTest(test func(a, b []float64) float64, method string, a, b []float64) (string, float64, string) {
	if len(a) < MinPoints || len(b) < MinPoints {
		return "", nan, fmt.Sprintf("too few points (%d, %d; need %d)", len(a), len(b), MinPoints)
	}
	return method, test(a, b), ""
}

func opSeries(ivs []results.Interval, name string, f func(results.OpInterval) float64) []float64 {
	var out []float64
	for _, iv := range ivs {
		if o, ok := iv.Ops[name]; ok && o.Count-o.Errors > 0 {
			out = append(out, f(o))
		}
	}
	return out
}

func opCounts(ivs []results.Interval, name string) []float64 {
	out := make([]float64, 0, len(ivs))
	for _, iv := range ivs {
		out = append(out, float64(iv.Ops[name].Count))
	}
	return out
}

// integralMoments is the integral APDEX and the variance of it by the
// delta method: Σ wᵢ² Var(scoreᵢ) / (Σ wᵢ)², weights as apdex.Integral.
func integralMoments(d *results.Document) (value, varMean float64, ok bool) {
	maxP := 1
	for _, op := range d.Operations {
		maxP = max(maxP, op.Priority)
	}
	var sw, sv float64
	for _, op := range d.Operations {
		_, v, has := apdexMoments(op.Zones)
		if !has {
			continue
		}
		w := apdex.Weight(op.Priority, maxP)
		sw += w
		sv += w * w * v
	}
	if sw == 0 {
		return 0, 0, false
	}
	return d.Integral.Value, sv / (sw * sw), true
}

func integralRows(a, b *results.Document) []Row {
	base := Row{Section: "integral", Subject: "integral", P: nan}
	var rows []Row
	r := base
	r.Metric, r.Direction = "apdex", HigherBetter
	ma, va, okA := integralMoments(a)
	mb, vb, okB := integralMoments(b)
	r.A, r.B = orNaN(a.Integral.Value, okA), orNaN(b.Integral.Value, okB)
	if okA && okB {
		r.Method, r.P = MethodZ, zTest(ma, va, mb, vb)
	}
	rows = append(rows, r)

	r = base
	r.Metric, r.Unit, r.Direction = "per_second", "1/s", HigherBetter
	r.A, r.B = a.Totals.PerSecond, b.Totals.PerSecond
	totals := func(ivs []results.Interval) []float64 {
		out := make([]float64, 0, len(ivs))
		for _, iv := range ivs {
			out = append(out, float64(iv.Count))
		}
		return out
	}
	r.Method, r.P, r.Note = seriesTest(welch, MethodWelch, totals(scoredIntervals(a)), totals(scoredIntervals(b)))
	rows = append(rows, r)

	r = base
	r.Metric, r.Unit, r.Direction = "error_pct", "%", LowerBetter
	pa, vpa := proportionMoments(a.Totals.Errors, a.Totals.Count)
	pb, vpb := proportionMoments(b.Totals.Errors, b.Totals.Count)
	r.A, r.B = 100*pa, 100*pb
	if a.Totals.Count > 0 && b.Totals.Count > 0 {
		r.Method, r.P = MethodZ, zTest(pa, vpa, pb, vpb)
	}
	rows = append(rows, r)
	return rows
}

// Observations returns the decoded observations section of d, nil
// when the run kept none.
func Observations(d *results.Document) (*sampler.Observations, error) {
	raw, ok := d.Extra["observations"]
	if !ok || len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	return sampler.ReadObservations(raw)
}

// ratePoints are the observation points that carry rates (not the
// baseline point).
func ratePoints(o *sampler.Observations) []sampler.Sample {
	var out []sampler.Sample
	for _, s := range o.Series {
		if s.Elapsed > 0 {
			out = append(out, s)
		}
	}
	return out
}

// TopWaits is how many wait events (besides CPU) observation rows list.
const TopWaits = 5

func observationRows(a, b *results.Document) ([]Row, error) {
	oa, err := Observations(a)
	if err != nil {
		return nil, fmt.Errorf("compare: baseline: %w", err)
	}
	ob, err := Observations(b)
	if err != nil {
		return nil, fmt.Errorf("compare: variant: %w", err)
	}
	var rows []Row
	// Catalog growth over the run from extra.catalog (bytes).
	ga, okA := catalogGrowth(a)
	gb, okB := catalogGrowth(b)
	if okA || okB {
		r := Row{Section: "observations", Subject: "catalog", Metric: "growth_bytes", Unit: "bytes", P: nan, Direction: LowerBetter}
		r.A, r.B = orNaN(ga, okA), orNaN(gb, okB)
		if oa != nil && ob != nil {
			r.Method, r.P, r.Note = seriesTest(welch, MethodWelch, obsSeries(oa, (*sampler.Sample).CatalogGrowth), obsSeries(ob, (*sampler.Sample).CatalogGrowth))
		}
		rows = append(rows, r)
	}
	if oa == nil || ob == nil {
		return rows, nil
	}
	pa, pb := ratePoints(oa), ratePoints(ob)
	// Wait events: CPU plus the top non-CPU events by mean share.
	share := func(pts []sampler.Sample, ev string) []float64 {
		var out []float64
		for _, s := range pts {
			if s.Sessions.Active > 0 {
				out = append(out, 100*float64(s.Waits[ev])/float64(s.Sessions.Active))
			}
		}
		return out
	}
	for _, ev := range topWaits(pa, pb) {
		r := Row{Section: "observations", Subject: "wait " + ev, Metric: "share_pct", Unit: "%", P: nan, Direction: LowerBetter}
		if ev == "CPU" {
			r.Direction = Neutral
		}
		xa, xb := share(pa, ev), share(pb, ev)
		r.A, r.B = mean(xa), mean(xb)
		r.Method, r.P, r.Note = seriesTest(mannWhitney, MethodMannWhitney, xa, xb)
		rows = append(rows, r)
	}
	// Host CPU.
	for _, m := range []struct {
		metric string
		f      func(sampler.CPU) float64
	}{
		{"user_pct", func(c sampler.CPU) float64 { return c.User }},
		{"system_pct", func(c sampler.CPU) float64 { return c.System }},
		{"iowait_pct", func(c sampler.CPU) float64 { return c.Iowait }},
		{"softirq_pct", func(c sampler.CPU) float64 { return c.SoftIRQ }},
	} {
		host := func(pts []sampler.Sample) []float64 {
			var out []float64
			for _, s := range pts {
				if s.Host != nil {
					out = append(out, m.f(s.Host.CPU))
				}
			}
			return out
		}
		xa, xb := host(pa), host(pb)
		if len(xa) == 0 && len(xb) == 0 {
			continue
		}
		r := Row{Section: "observations", Subject: "host CPU", Metric: m.metric, Unit: "%", P: nan, Direction: LowerBetter}
		r.A, r.B = mean(xa), mean(xb)
		r.Method, r.P, r.Note = seriesTest(welch, MethodWelch, xa, xb)
		rows = append(rows, r)
	}
	// Temp files.
	for _, m := range []struct {
		metric, unit string
		f            func(*sampler.DBRates) float64
	}{
		{"temp_files_per_s", "1/s", func(d *sampler.DBRates) float64 { return d.TempFiles }},
		{"temp_bytes_per_s", "bytes/s", func(d *sampler.DBRates) float64 { return d.TempBytes }},
	} {
		db := func(pts []sampler.Sample) []float64 {
			var out []float64
			for _, s := range pts {
				if s.DB != nil {
					out = append(out, m.f(s.DB))
				}
			}
			return out
		}
		xa, xb := db(pa), db(pb)
		r := Row{Section: "observations", Subject: "database", Metric: m.metric, Unit: m.unit, P: nan, Direction: LowerBetter}
		r.A, r.B = mean(xa), mean(xb)
		r.Method, r.P, r.Note = seriesTest(welch, MethodWelch, xa, xb)
		rows = append(rows, r)
	}
	return rows, nil
}

func obsSeries(o *sampler.Observations, f func(*sampler.Sample) float64) []float64 {
	var out []float64
	for _, s := range ratePoints(o) {
		out = append(out, f(&s))
	}
	return out
}

// catalogGrowth is Σ after - Σ before of extra.catalog, bytes.
func catalogGrowth(d *results.Document) (float64, bool) {
	raw, ok := d.Extra["catalog"]
	if !ok {
		return 0, false
	}
	var c struct {
		Before map[string]int64 `json:"before_bytes"`
		After  map[string]int64 `json:"after_bytes"`
	}
	if json.Unmarshal(raw, &c) != nil || c.After == nil {
		return 0, false
	}
	var g int64
	for k, v := range c.After {
		g += v - c.Before[k]
	}
	return float64(g), true
}

func topWaits(a, b []sampler.Sample) []string {
	tot := map[string]float64{}
	for _, pts := range [][]sampler.Sample{a, b} {
		for _, s := range pts {
			for k, v := range s.Waits {
				tot[k] += float64(v)
			}
		}
	}
	var keys []string
	for k := range tot {
		if k != "CPU" {
			keys = append(keys, k)
		}
	}
	sort.Slice(keys, func(i, j int) bool {
		if tot[keys[i]] != tot[keys[j]] {
			return tot[keys[i]] > tot[keys[j]]
		}
		return keys[i] < keys[j]
	})
	if len(keys) > TopWaits {
		keys = keys[:TopWaits]
	}
	if _, ok := tot["CPU"]; ok {
		keys = append([]string{"CPU"}, keys...)
	}
	return keys
}

func mean(x []float64) float64 {
	if len(x) == 0 {
		return nan
	}
	var s float64
	for _, v := range x {
		s += v
	}
	return s / float64(len(x))
}
