package soak

import (
	"math"
	"sort"
	"strings"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"

	"github.com/erplab/erplab/internal/apdex"
	"github.com/erplab/erplab/internal/results"
)

// Op is a key operation as the windows score it: its name, target time T
// and priority (the integral APDEX's weight).
type Op struct {
	Name     string
	Target   time.Duration
	Priority int
}

// Window is one window of a soak: the load's figures and the server's
// over it. Values holds every metric it has, by key (Metrics): a key is
// missing when nothing measured it (no sample of an operation, no
// samplers).
type Window struct {
	// I numbers the windows from 0; FromS and ToS bound it in seconds
	// since the run's start (ToS of the last one is the run's end).
	I     int     `json:"i"`
	FromS float64 `json:"from_s"`
	ToS   float64 `json:"to_s"`
	// Steady: the window counts in trends: not the first (a cold start),
	// not cut short by the end, no warm-up in it and the same number of
	// VUs throughout (no ramp).
	Steady bool  `json:"steady"`
	VUs    int64 `json:"vus"`
	// Count and Errors are the key operations executed and failed in it.
	Count  int64              `json:"n"`
	Errors int64              `json:"err"`
	Values map[string]float64 `json:"values"`
}

// MinP95Samples is how many executions an operation needs in a window
// for its p95 to be a metric of the window: fewer give a p95 that is one
// of a handful of values.
const MinP95Samples = 20

// Builder cuts a run's intervals into windows of a fixed length and
// averages the resource figures (AddPoint) over each. It is not safe for
// concurrent use.
type Builder struct {
	window time.Duration
	ops    []Op
	cur    acc
	next   int
}

// acc is the open window.
type acc struct {
	from       float64
	intervals  int
	warm       bool
	vuMin      int64
	vuMax      int64
	n, errs    int64
	zones      map[string]apdex.Counts
	hists      map[string]*hdrhistogram.Histogram
	sums, cnts map[string]float64
	points     float64 // readings added (AddPoint)
}

// NewBuilder is a builder of windows of length window over ops.
func NewBuilder(window time.Duration, ops []Op) *Builder {
	b := &Builder{window: window, ops: ops}
	b.cur = newAcc(0)
	return b
}

func newAcc(from float64) acc {
	return acc{from: from, vuMin: math.MaxInt64, vuMax: -1, zones: map[string]apdex.Counts{},
		hists: map[string]*hdrhistogram.Histogram{}, sums: map[string]float64{}, cnts: map[string]float64{}}
}

// WindowS is the window's length in seconds.
func (b *Builder) WindowS() float64 { return b.window.Seconds() }

// end is the open window's end, seconds.
func (b *Builder) end() float64 { return float64(b.next+1) * b.window.Seconds() }

// AddInterval adds one closed interval of the load to the open window
// and reports whether the window is now complete (the interval reaches
// its end): the caller then closes it with Close.
func (b *Builder) AddInterval(iv results.Interval) bool {
	a := &b.cur
	a.intervals++
	a.warm = a.warm || iv.Warmup
	a.vuMin, a.vuMax = min(a.vuMin, iv.VUs), max(a.vuMax, iv.VUs)
	if !iv.Warmup {
		a.n += iv.Count
		a.errs += iv.Errors
		for name, op := range iv.Ops {
			z := a.zones[name]
			z.Merge(op.Zones)
			a.zones[name] = z
			addHist(a.hists, name, op.Histogram)
		}
	}
	return iv.T >= b.end()-1e-6
}

// addHist merges the encoded histogram enc into hs[name]; an encoding
// that does not decode is left out (the window's p95 then lacks it).
func addHist(hs map[string]*hdrhistogram.Histogram, name, enc string) {
	if enc == "" {
		return
	}
	h, err := hdrhistogram.Decode([]byte(enc))
	if err != nil {
		return
	}
	if hs[name] == nil {
		hs[name] = h
		return
	}
	hs[name].Merge(h)
}

// AddPoint adds one reading of resource figures (metric key -> value) to
// the open window: each key's window value is the mean of its readings,
// a wait event's (KeyWait) over every sample reading (those without it
// saw no session in it).
func (b *Builder) AddPoint(values map[string]float64) {
	if _, ok := values[KeyActive]; ok {
		b.cur.points++
	}
	for k, v := range values {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			continue
		}
		b.cur.sums[k] += v
		b.cur.cnts[k]++
	}
}

// OpenFrom is the open window's start, seconds.
func (b *Builder) OpenFrom() float64 { return b.cur.from }

// Pending reports whether the open window holds any interval.
func (b *Builder) Pending() bool { return b.cur.intervals > 0 }

// Close closes the open window at toS (its end, or the run's end for the
// last, partial one) and opens the next.
func (b *Builder) Close(toS float64) Window {
	a := b.cur
	w := Window{I: b.next, FromS: a.from, ToS: toS, Count: a.n, Errors: a.errs, Values: map[string]float64{}}
	if a.vuMax >= 0 {
		w.VUs = a.vuMax
	}
	full := toS >= b.end()-1e-6
	w.Steady = b.next > 0 && full && !a.warm && a.vuMin == a.vuMax && a.vuMax > 0
	if d := toS - a.from; d > 0 && !a.warm {
		w.Values[KeyTPS] = float64(a.n) / d
		w.Values[KeyErrorsPerS] = float64(a.errs) / d
	}
	ws := make([]apdex.Weighted, 0, len(b.ops))
	for _, op := range b.ops {
		ws = append(ws, apdex.Weighted{Score: a.zones[op.Name].Score(op.Target), Priority: op.Priority})
		if h := a.hists[op.Name]; h != nil && h.TotalCount() >= MinP95Samples {
			w.Values[KeyP95+op.Name] = float64(h.ValueAtQuantile(95)) / 1000
		}
	}
	if v, ok := apdex.Integral(ws); ok {
		w.Values[KeyApdex] = v
	}
	for k, s := range a.sums {
		n := a.cnts[k]
		if strings.HasPrefix(k, KeyWait) && a.points > n {
			n = a.points
		}
		w.Values[k] = s / n
	}
	b.next++
	b.cur = newAcc(toS)
	return w
}

// Keys are the metric keys present in any of ws, sorted.
func Keys(ws []Window) []string {
	seen := map[string]bool{}
	for _, w := range ws {
		for k := range w.Values {
			seen[k] = true
		}
	}
	out := make([]string, 0, len(seen))
	for k := range seen {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
