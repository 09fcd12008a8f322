package compare

import (
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"sort"

	"github.com/HdrHistogram/hdrhistogram-go"

	"github.com/erplab/erplab/internal/apdex"
	"github.com/erplab/erplab/internal/profile"
	"github.com/erplab/erplab/internal/results"
	"github.com/erplab/erplab/internal/sampler"
)

// runData is one run prepared for the statistics: its scored intervals,
// its observation samples after the warm-up and the intervals'
// histograms as sparse counts.
type runData struct {
	doc    *results.Document
	step   float64 // interval length, s
	ivs    []results.Interval
	obs    []sampler.Sample
	hasObs bool
	prof   *profile.Summary    // extra.profile, nil when not recorded
	stmts  *sampler.Statements // observations' pg_stat_statements, nil without
	hists  map[string]*opHist
	// bIv and bObs are the moving-block lengths (blockLength).
	bIv, bObs int
	allSel    sel
	// pcID and pc cache the percentiles of the selection pcID.
	pcID int
	pc   map[string][3]float64
}

// sel selects intervals and observation samples by index (with
// repetition for a resample); id tells selections apart for caching (0 is
// the whole run).
type sel struct {
	id      int
	iv, obs []int
}

// opHist is an operation's interval histograms: values are the distinct
// recorded values (µs, highest equivalent value of each bucket),
// ascending; iv[i] the bins of interval i; ok false when an interval with
// successful executions has no histogram (schema 1).
type opHist struct {
	values []int64
	iv     [][]bin
	ok     bool
	counts []int64 // scratch
}

type bin struct {
	idx int32
	n   int64
}

func (rd *runData) all() *sel { return &rd.allSel }

func (rd *runData) resample(rng *rand.Rand, s *sel, id int) {
	s.id = id
	s.iv = blockIndices(rng, len(rd.ivs), rd.bIv, s.iv)
	s.obs = blockIndices(rng, len(rd.obs), rd.bObs, s.obs)
}

func prepare(d *results.Document) (*runData, error) {
	rd := &runData{doc: d, step: intervalSeconds(d), ivs: scoredIntervals(d), hists: map[string]*opHist{}, pcID: -1}
	o, err := Observations(d)
	if err != nil {
		return nil, err
	}
	if rd.prof, err = profile.Read(d.Extra["profile"]); err != nil {
		return nil, err
	}
	if o != nil {
		rd.hasObs = true
		rd.stmts = o.Statements
		warm := paramFloat(d, "warmup_s")
		for _, s := range o.Series {
			if s.Elapsed > 0 && s.T > warm && s.SpanS == 0 { // resampled: a thinned series' full samples only

				rd.obs = append(rd.obs, s)
			}
		}
	}
	rd.allSel = sel{iv: seq(len(rd.ivs)), obs: seq(len(rd.obs))}
	// Block lengths: from the pooled per-interval APDEX score (it moves
	// with latency, which is what a neighbour's load changes), or the
	// counts for intervals without zones; from the active sessions for
	// the observation samples.
	score := make([]float64, 0, len(rd.ivs))
	counts := make([]float64, 0, len(rd.ivs))
	zoned := true
	for _, iv := range rd.ivs {
		var z apdex.Counts
		for _, oi := range iv.Ops {
			z.Merge(oi.Zones)
		}
		counts = append(counts, float64(iv.Count))
		if z.Total() == 0 {
			zoned = false
			continue
		}
		score = append(score, (float64(z.Satisfied)+0.5*float64(z.Tolerating))/float64(z.Total()))
	}
	if zoned {
		rd.bIv = blockLength(score)
	} else {
		rd.bIv = blockLength(counts)
	}
	active := make([]float64, len(rd.obs))
	for i, s := range rd.obs {
		active[i] = float64(s.Sessions.Active)
	}
	rd.bObs = blockLength(active)
	// Interval histograms.
	for _, op := range d.Operations {
		h := &opHist{ok: true, iv: make([][]bin, len(rd.ivs))}
		raw := make([][]hdrhistogram.Bar, len(rd.ivs))
		distinct := map[int64]bool{}
		for i, iv := range rd.ivs {
			oi, ok := iv.Ops[op.Name]
			if !ok || oi.Count-oi.Errors <= 0 {
				continue
			}
			if oi.Histogram == "" {
				h.ok = false
				break
			}
			hh, err := hdrhistogram.Decode([]byte(oi.Histogram))
			if err != nil {
				return nil, fmt.Errorf("series interval t=%g %s histogram: %w", iv.T, op.Name, err)
			}
			for _, b := range hh.Distribution() {
				if b.Count > 0 {
					raw[i] = append(raw[i], b)
					distinct[b.To] = true
				}
			}
		}
		if h.ok {
			for v := range distinct {
				h.values = append(h.values, v)
			}
			sort.Slice(h.values, func(i, j int) bool { return h.values[i] < h.values[j] })
			index := make(map[int64]int32, len(h.values))
			for i, v := range h.values {
				index[v] = int32(i)
			}
			for i, bars := range raw {
				for _, b := range bars {
					h.iv[i] = append(h.iv[i], bin{index[b.To], b.Count})
				}
			}
			h.counts = make([]int64, len(h.values))
		}
		rd.hists[op.Name] = h
	}
	return rd, nil
}

func seq(n int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = i
	}
	return out
}

// scoredIntervals returns the intervals that count: not warm-up, not a
// last partial interval (shorter than the run's interval by more than
// 10 %) and not a coarse point of a thinned series (span_s: a soak's
// intervals older than its horizon, folded into one point per window),
// since the statistics resample equal intervals; the operations' totals
// still cover the whole run.
func scoredIntervals(d *results.Document) []results.Interval {
	step := intervalSeconds(d)
	var out []results.Interval
	prev := 0.0
	for i, iv := range d.Series {
		length := iv.T - prev
		prev = iv.T
		if iv.Warmup || iv.SpanS > 0 {
			continue
		}
		if i == len(d.Series)-1 && length < 0.9*step {
			continue
		}
		out = append(out, iv)
	}
	return out
}

func paramFloat(d *results.Document, key string) float64 {
	var p map[string]any
	if len(d.Parameters) == 0 || json.Unmarshal(d.Parameters, &p) != nil {
		return 0
	}
	v, _ := p[key].(float64)
	return v
}

func intervalSeconds(d *results.Document) float64 {
	if v := paramFloat(d, "interval_s"); v > 0 {
		return v
	}
	return 1
}

// spec is one row to compute: its labels and direction, its statistic
// of a selection of one run (NaN when undefined), the metric's absolute
// floor of the minimum effect, whether it reads observation samples
// rather than intervals, and a note when it cannot be tested at all
// (note) or not by resampling (bootNote).
type spec struct {
	row      Row
	stat     func(rd *runData, s *sel) float64
	floor    float64
	obs      bool
	note     string
	bootNote string
}

// Absolute floors of the minimum effect, per metric (see the package doc).
const (
	floorApdex     = 0.01
	floorMs        = 1.0
	floorPerSecond = 0.1
	floorErrorPct  = 0.5
	floorSharePct  = 2.0
	floorCPUPct    = 1.0
	floorPerS      = 0.1
	floorBytesPerS = 64 << 10
	floorBytes     = 64 << 10
)

func findOp(d *results.Document, name string) *results.OpResult {
	for i := range d.Operations {
		if d.Operations[i].Name == name {
			return &d.Operations[i]
		}
	}
	return nil
}

func buildSpecs(ra, rb []*runData) []spec {
	var specs []spec
	// Operations, in order of first appearance.
	seen := map[string]bool{}
	var names []string
	for _, side := range [][]*runData{ra, rb} {
		for _, rd := range side {
			for _, op := range rd.doc.Operations {
				if !seen[op.Name] {
					seen[op.Name] = true
					names = append(names, op.Name)
				}
			}
		}
	}
	has := func(side []*runData, name string) bool {
		for _, rd := range side {
			if findOp(rd.doc, name) != nil {
				return true
			}
		}
		return false
	}
	histOK := func(name string) bool {
		for _, side := range [][]*runData{ra, rb} {
			for _, rd := range side {
				if h := rd.hists[name]; h == nil || !h.ok {
					return false
				}
			}
		}
		return true
	}
	for _, name := range names {
		base := Row{Section: "operation", Subject: name}
		if !has(ra, name) || !has(rb, name) {
			r := base
			r.Metric = "apdex"
			specs = append(specs, spec{row: r, note: "operation missing in one run", stat: func(*runData, *sel) float64 { return nan }})
			continue
		}
		add := func(metric, unit string, dir Direction, floor float64, f func(rd *runData, s *sel) float64) *spec {
			r := base
			r.Metric, r.Unit, r.Direction = metric, unit, dir
			specs = append(specs, spec{row: r, stat: f, floor: floor})
			return &specs[len(specs)-1]
		}
		add("apdex", "", HigherBetter, floorApdex, func(rd *runData, s *sel) float64 { return opScore(rd, s, name) })
		least := leastExecutions(name, ra, rb)
		for q, metric := range []string{"p50_ms", "p95_ms", "p99_ms"} {
			sp := add(metric, "ms", LowerBetter, floorMs, func(rd *runData, s *sel) float64 { return rd.percentile(s, name, q) })
			if !histOK(name) {
				sp.bootNote = "no interval histograms (results schema 1)"
			}
			if need := quantileExecutions[q]; least < need {
				sp.note = fmt.Sprintf("fewer than %d executions in a run (%d): its %s is its slowest execution, not tested", need, least, metric[:3])
			}
		}
		add("per_second", "1/s", HigherBetter, floorPerSecond, func(rd *runData, s *sel) float64 {
			var n int64
			for _, i := range s.iv {
				n += rd.ivs[i].Ops[name].Count
			}
			return perSecond(rd, s, n)
		})
		add("error_pct", "%", LowerBetter, floorErrorPct, func(rd *runData, s *sel) float64 {
			var n, e int64
			for _, i := range s.iv {
				o := rd.ivs[i].Ops[name]
				n, e = n+o.Count, e+o.Errors
			}
			return pct(e, n)
		})
	}
	// Integral.
	ib := Row{Section: "integral", Subject: "integral"}
	r := ib
	r.Metric, r.Direction = "apdex", HigherBetter
	specs = append(specs, spec{row: r, floor: floorApdex, stat: integralScore})
	r = ib
	r.Metric, r.Unit, r.Direction = "per_second", "1/s", HigherBetter
	specs = append(specs, spec{row: r, floor: floorPerSecond, stat: func(rd *runData, s *sel) float64 {
		var n int64
		for _, i := range s.iv {
			n += rd.ivs[i].Count
		}
		return perSecond(rd, s, n)
	}})
	r = ib
	r.Metric, r.Unit, r.Direction = "error_pct", "%", LowerBetter
	specs = append(specs, spec{row: r, floor: floorErrorPct, stat: func(rd *runData, s *sel) float64 {
		var n, e int64
		for _, i := range s.iv {
			n, e = n+rd.ivs[i].Count, e+rd.ivs[i].Errors
		}
		return pct(e, n)
	}})
	specs = append(specs, statementSpecs(ra, rb)...)
	specs = append(specs, observationSpecs(ra, rb)...)
	return append(specs, profileSpecs(ra, rb)...)
}

func pct(k, n int64) float64 {
	if n == 0 {
		return nan
	}
	return 100 * float64(k) / float64(n)
}

func perSecond(rd *runData, s *sel, n int64) float64 {
	if len(s.iv) == 0 {
		return nan
	}
	return float64(n) / (float64(len(s.iv)) * rd.step)
}

// zoneScore is the APDEX score of zone counts, NaN without samples.
func zoneScore(z apdex.Counts) float64 {
	if z.Total() == 0 {
		return nan
	}
	return (float64(z.Satisfied) + 0.5*float64(z.Tolerating)) / float64(z.Total())
}

func opZones(rd *runData, s *sel, name string) apdex.Counts {
	var z apdex.Counts
	for _, i := range s.iv {
		z.Merge(rd.ivs[i].Ops[name].Zones)
	}
	return z
}

func opScore(rd *runData, s *sel, name string) float64 {
	if s.id == 0 && !zonedIntervals(rd) {
		if op := findOp(rd.doc, name); op != nil && op.Apdex.Samples > 0 {
			return op.Apdex.Value // schema 1: the whole run's score
		}
	}
	return zoneScore(opZones(rd, s, name))
}

func zonedIntervals(rd *runData) bool {
	for _, iv := range rd.ivs {
		for _, oi := range iv.Ops {
			if oi.Zones.Total() > 0 {
				return true
			}
		}
	}
	return false
}

// integralScore is the integral APDEX of the selection: the priority-
// weighted mean of the operations' scores (apdex.Integral's weights).
func integralScore(rd *runData, s *sel) float64 {
	ws := make([]apdex.Weighted, 0, len(rd.doc.Operations))
	for _, op := range rd.doc.Operations {
		v := opScore(rd, s, op.Name)
		sc := apdex.Score{}
		if !math.IsNaN(v) {
			sc = apdex.Score{Value: v, Samples: 1}
		}
		ws = append(ws, apdex.Weighted{Score: sc, Priority: op.Priority})
	}
	v, ok := apdex.Integral(ws)
	if !ok {
		return nan
	}
	return v
}

// percentile is the q-th of p50, p95, p99 (ms) of operation name's
// successful executions in the selection, from the merged interval
// histograms (HdrHistogram's rank rule); for the whole run of a file
// without interval histograms the run's own figure.
func (rd *runData) percentile(s *sel, name string, q int) float64 {
	h := rd.hists[name]
	if h == nil || !h.ok {
		if s.id != 0 {
			return nan
		}
		op := findOp(rd.doc, name)
		if op == nil || op.Count-op.Errors <= 0 {
			return nan
		}
		return [3]float64{op.Response.P50, op.Response.P95, op.Response.P99}[q]
	}
	if rd.pcID != s.id {
		rd.pcID, rd.pc = s.id, map[string][3]float64{}
	}
	if v, ok := rd.pc[name]; ok {
		return v[q]
	}
	clear(h.counts)
	var total int64
	for _, i := range s.iv {
		for _, b := range h.iv[i] {
			h.counts[b.idx] += b.n
			total += b.n
		}
	}
	out := [3]float64{nan, nan, nan}
	if total > 0 {
		ranks := [3]int64{}
		for j, p := range []float64{50, 95, 99} {
			ranks[j] = max(1, min(total, int64(p/100*float64(total)+0.5)))
		}
		var cum int64
		j := 0
		for idx, c := range h.counts {
			cum += c
			for j < 3 && cum >= ranks[j] {
				out[j] = float64(h.values[idx]) / 1000
				j++
			}
			if j == 3 {
				break
			}
		}
	}
	rd.pc[name] = out
	return out[q]
}

// TopWaits is how many wait events (besides CPU) observation rows list.
const TopWaits = 5

func observationSpecs(ra, rb []*runData) []spec {
	var specs []spec
	obsA, obsB := false, false
	for _, rd := range ra {
		obsA = obsA || rd.hasObs
	}
	for _, rd := range rb {
		obsB = obsB || rd.hasObs
	}
	if !obsA || !obsB {
		return nil
	}
	// Catalog growth: the sum of the sampled increments (a cumulative
	// series is compared by its delta per round, never point by point).
	specs = append(specs, spec{obs: true, floor: floorBytes,
		row: Row{Section: "observations", Subject: "catalog", Metric: "growth_bytes", Unit: "bytes", Direction: LowerBetter},
		stat: func(rd *runData, s *sel) float64 {
			if len(s.obs) == 0 {
				return nan
			}
			var g float64
			for _, i := range s.obs {
				p := &rd.obs[i]
				g += p.CatalogGrowth() * p.Elapsed
			}
			return g
		}})
	// Wait events: CPU plus the top non-CPU events by total count.
	tot := map[string]float64{}
	for _, side := range [][]*runData{ra, rb} {
		for _, rd := range side {
			for _, p := range rd.obs {
				for k, v := range p.Waits {
					tot[k] += float64(v)
				}
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
	keys = keys[:min(len(keys), TopWaits)]
	if _, ok := tot["CPU"]; ok {
		keys = append([]string{"CPU"}, keys...)
	}
	for _, ev := range keys {
		r := Row{Section: "observations", Subject: "wait " + ev, Metric: "share_pct", Unit: "%", Direction: LowerBetter}
		if ev == "CPU" {
			r.Direction = Neutral
		}
		specs = append(specs, spec{obs: true, row: r, floor: floorSharePct, stat: func(rd *runData, s *sel) float64 {
			var sum float64
			n := 0
			for _, i := range s.obs {
				p := &rd.obs[i]
				if p.Sessions.Active > 0 {
					sum += 100 * float64(p.Waits[ev]) / float64(p.Sessions.Active)
					n++
				}
			}
			if n == 0 {
				return nan
			}
			return sum / float64(n)
		}})
	}
	// CPU: the server's own (postmaster tree), never the host total.
	noise := true
	for _, side := range [][]*runData{ra, rb} {
		for _, rd := range side {
			noise = noise && rd.noiseRecorded()
		}
	}
	for _, m := range []struct {
		metric string
		server func(*sampler.Noise) float64
		host   func(sampler.CPU) float64
	}{
		{"user_pct", func(n *sampler.Noise) float64 { return n.ServerUser }, func(c sampler.CPU) float64 { return c.User }},
		{"system_pct", func(n *sampler.Noise) float64 { return n.ServerSystem }, func(c sampler.CPU) float64 { return c.System }},
	} {
		r := Row{Section: "observations", Subject: "host CPU", Metric: m.metric, Unit: "%", Direction: LowerBetter}
		sp := spec{obs: true, row: r, floor: floorCPUPct}
		if noise {
			sp.stat = func(rd *runData, s *sel) float64 {
				return obsMean(rd, s, func(p *sampler.Sample) (float64, bool) {
					if p.Noise == nil {
						return 0, false
					}
					return m.server(p.Noise), true
				})
			}
		} else {
			sp.note = "host total, not the server's own CPU (no process-tree figures recorded): not tested"
			sp.stat = func(rd *runData, s *sel) float64 {
				return obsMean(rd, s, func(p *sampler.Sample) (float64, bool) {
					if p.Host == nil {
						return 0, false
					}
					return m.host(p.Host.CPU), true
				})
			}
		}
		specs = append(specs, sp)
	}
	// Temp files: rates over the sampled time (Σ rate·dt / Σ dt).
	for _, m := range []struct {
		metric, unit string
		floor        float64
		f            func(*sampler.DBRates) float64
	}{
		{"temp_files_per_s", "1/s", floorPerS, func(d *sampler.DBRates) float64 { return d.TempFiles }},
		{"temp_bytes_per_s", "bytes/s", floorBytesPerS, func(d *sampler.DBRates) float64 { return d.TempBytes }},
	} {
		r := Row{Section: "observations", Subject: "database", Metric: m.metric, Unit: m.unit, Direction: LowerBetter}
		specs = append(specs, spec{obs: true, row: r, floor: m.floor, stat: func(rd *runData, s *sel) float64 {
			var sum, dt float64
			for _, i := range s.obs {
				p := &rd.obs[i]
				if p.DB != nil {
					sum += m.f(p.DB) * p.Elapsed
				}
				dt += p.Elapsed
			}
			if dt == 0 {
				return nan
			}
			return sum / dt
		}})
	}
	return specs
}

// obsMean is the mean of f over the selected samples where it is defined.
func obsMean(rd *runData, s *sel, f func(*sampler.Sample) (float64, bool)) float64 {
	var sum float64
	n := 0
	for _, i := range s.obs {
		if v, ok := f(&rd.obs[i]); ok {
			sum += v
			n++
		}
	}
	if n == 0 {
		return nan
	}
	return sum / float64(n)
}

func (rd *runData) noiseRecorded() bool {
	for _, p := range rd.obs {
		if p.Noise != nil {
			return true
		}
	}
	return false
}

// quantileExecutions are the executions a run needs for its p50, p95
// and p99 to be tested: 1/(1-q) (2, 20, 100). With fewer, the quantile
// is the run's slowest execution (HdrHistogram's, as PostgreSQL's
// pgbench and k6 report it), a maximum: one stall of a shared host
// decides it, so a row of maxima compares the hosts' worst moments, not
// the configurations (package doc, "Percentiles of few executions").
var quantileExecutions = [3]int64{2, 20, 100}

// QuantileExecutions is the executions a run needs for a row of metric
// (p50_ms, p95_ms, p99_ms) to be tested (quantileExecutions); 0 for a
// metric that is no quantile.
func QuantileExecutions(metric string) int64 {
	for q, m := range []string{"p50_ms", "p95_ms", "p99_ms"} {
		if m == metric {
			return quantileExecutions[q]
		}
	}
	return 0
}

// leastExecutions is the fewest successful scored executions of
// operation name in any run of either side.
func leastExecutions(name string, sides ...[]*runData) int64 {
	least := int64(math.MaxInt64)
	for _, side := range sides {
		for _, rd := range side {
			n := int64(0)
			if op := findOp(rd.doc, name); op != nil {
				n = op.Count - op.Errors
			}
			least = min(least, n)
		}
	}
	return least
}
