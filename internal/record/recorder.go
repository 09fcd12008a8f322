// Package record keeps the measurements of a load test: per key operation
// an HdrHistogram of response time in microseconds (bounded memory however
// long the run), the time spent waiting for a pooled connection and the
// time spent in the database, counts of errors by SQLSTATE, APDEX zone
// counts, and a per-interval time series. It also streams intervals to disk
// as the run goes and writes the final results document (see
// docs/results-format.md for the format).
package record

import (
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"

	"github.com/erplab/erplab/internal/apdex"
)

// Histogram range: 1 µs to 1 hour at 3 significant digits (HdrHistogram's
// usual precision: every recorded value within 0.1 %). Larger values are
// clamped to the maximum, so a pathological operation still counts.
const (
	histMinMicros = 1
	histMaxMicros = int64(time.Hour / time.Microsecond)
	histDigits    = 3
)

func newHist() *hdrhistogram.Histogram {
	return hdrhistogram.New(histMinMicros, histMaxMicros, histDigits)
}

func recordMicros(h *hdrhistogram.Histogram, d time.Duration) {
	us := d.Microseconds()
	if us < histMinMicros {
		us = histMinMicros
	}
	if us > histMaxMicros {
		us = histMaxMicros
	}
	_ = h.RecordValue(us) // cannot fail inside the clamped range
}

// OpInfo describes a key operation to the recorder.
type OpInfo struct {
	Name     string
	Target   time.Duration // APDEX target time T
	Priority int           // 1 = most important
}

// Sample is one finished execution of a key operation.
type Sample struct {
	// Op indexes the recorder's operations.
	Op int
	// Start is when the virtual user began the operation (before waiting
	// for a connection); it decides warm-up membership and the interval.
	Start time.Time
	// Wait is the time spent waiting for a pooled connection.
	Wait time.Duration
	// DB is the time spent executing the operation on the connection.
	DB time.Duration
	// SQLState is "" on success, else the error's SQLSTATE (or one of the
	// client-side codes of package engine, e.g. "08006" for a lost
	// connection).
	SQLState string
}

// Response is the response time the user sees: connection wait plus time
// in the database. APDEX scores this value.
func (s Sample) Response() time.Duration { return s.Wait + s.DB }

// opStats is guarded by its own mutex so virtual users recording different
// operations do not contend.
type opStats struct {
	mu       sync.Mutex
	info     OpInfo
	resp     *hdrhistogram.Histogram // response time, µs, scored samples only
	wait     *hdrhistogram.Histogram // pool wait, µs
	db       *hdrhistogram.Histogram // time in the database, µs
	ivResp   *hdrhistogram.Histogram // response time in the current interval
	ivCount  int64
	ivErrors int64
	count    int64 // scored samples, errors included
	errors   int64
	byState  map[string]int64
	apdex    apdex.Counts
	warmN    int64
	warmErr  int64
}

// Recorder accumulates samples. Record, SetGauges, Gauges, Snapshot,
// VisitOps and Results are safe for concurrent use (each operation has its
// own lock); Tick, Finish and Series must be called from one goroutine
// (the engine's controller).
type Recorder struct {
	ops      []*opStats
	start    time.Time
	warmup   time.Duration
	interval time.Duration

	ivIndex   int // number of intervals closed so far
	series    []Interval
	vus       atomic.Int64
	inflight  atomic.Int64
	waiters   atomic.Int64
	maxWaiter atomic.Int64
}

// New returns a recorder for ops, for a run that starts at start. Samples
// whose Start falls before start+warmup are counted apart and not scored.
// interval is the time-series resolution (1 s unless a caller has reason).
func New(ops []OpInfo, start time.Time, warmup, interval time.Duration) *Recorder {
	if interval <= 0 {
		interval = time.Second
	}
	r := &Recorder{start: start, warmup: warmup, interval: interval}
	for _, op := range ops {
		r.ops = append(r.ops, &opStats{
			info: op, resp: newHist(), wait: newHist(), db: newHist(), ivResp: newHist(),
			byState: map[string]int64{},
		})
	}
	return r
}

// Start is the time the run started.
func (r *Recorder) Start() time.Time { return r.start }

// Ops returns the operations in recording order.
func (r *Recorder) Ops() []OpInfo {
	out := make([]OpInfo, len(r.ops))
	for i, o := range r.ops {
		out[i] = o.info
	}
	return out
}

// Record adds one finished operation. Warm-up samples count only in the
// warm-up counters; all others go into the histograms, APDEX counts and the
// current interval.
func (r *Recorder) Record(s Sample) {
	o := r.ops[s.Op]
	failed := s.SQLState != ""
	o.mu.Lock()
	defer o.mu.Unlock()
	if s.Start.Sub(r.start) < r.warmup {
		o.warmN++
		if failed {
			o.warmErr++
		}
		return
	}
	resp := s.Response()
	o.count++
	o.ivCount++
	if failed {
		o.errors++
		o.ivErrors++
		o.byState[s.SQLState]++
	} else {
		// Latency histograms hold successful executions only: a fast
		// error must not make the percentiles look better.
		recordMicros(o.resp, resp)
		recordMicros(o.ivResp, resp)
		recordMicros(o.wait, s.Wait)
		recordMicros(o.db, s.DB)
	}
	o.apdex.Add(resp, o.info.Target, failed)
}

// SetGauges stores the current number of active virtual users, of those
// waiting for a connection, and of those inside an operation (waiting or
// executing); the interval keeps the last values and the maximum of
// waiters seen.
func (r *Recorder) SetGauges(vus, poolWaiters, inFlight int) {
	r.vus.Store(int64(vus))
	r.inflight.Store(int64(inFlight))
	r.waiters.Store(int64(poolWaiters))
	for {
		m := r.maxWaiter.Load()
		if int64(poolWaiters) <= m || r.maxWaiter.CompareAndSwap(m, int64(poolWaiters)) {
			break
		}
	}
}

// OpInterval is one operation's figures in one interval. Latencies in ms.
type OpInterval struct {
	Count  int64   `json:"n"`
	Errors int64   `json:"err"`
	P50    float64 `json:"p50_ms"`
	P95    float64 `json:"p95_ms"`
	P99    float64 `json:"p99_ms"`
	Max    float64 `json:"max_ms"`
}

// Interval is one point of the time series.
type Interval struct {
	// T is the end of the interval in seconds since the run started.
	T float64 `json:"t"`
	// Warmup is true while the interval lies in the warm-up period.
	Warmup bool `json:"warmup,omitempty"`
	// VUs is the number of active virtual users at the end of the interval.
	VUs int64 `json:"vus"`
	// PoolWaiters is the number of VUs waiting for a connection at the end
	// of the interval; PoolWaitersMax the largest number seen during it.
	PoolWaiters    int64 `json:"pool_waiters"`
	PoolWaitersMax int64 `json:"pool_waiters_max"`
	// InFlight is the number of VUs inside an operation at the end of the
	// interval (a stall shows as InFlight high and Count low).
	InFlight int64 `json:"in_flight"`
	// Ops holds per-operation figures by operation name; operations with
	// no sample in the interval are left out.
	Ops map[string]OpInterval `json:"ops"`
	// Count and Errors sum all operations.
	Count  int64 `json:"n"`
	Errors int64 `json:"err"`
}

func ms(us int64) float64 { return float64(us) / 1000 }

// Tick closes every interval that has ended by now and returns them in
// order (usually one). Warm-up samples are not in intervals; intervals
// that lie in the warm-up period are marked.
func (r *Recorder) Tick(now time.Time) []Interval {
	var out []Interval
	for {
		end := r.start.Add(time.Duration(r.ivIndex+1) * r.interval)
		if now.Before(end) {
			return out
		}
		r.ivIndex++
		iv := Interval{
			T:              end.Sub(r.start).Seconds(),
			Warmup:         end.Sub(r.start) <= r.warmup,
			VUs:            r.vus.Load(),
			PoolWaiters:    r.waiters.Load(),
			InFlight:       r.inflight.Load(),
			PoolWaitersMax: r.maxWaiter.Swap(r.waiters.Load()),
			Ops:            map[string]OpInterval{},
		}
		for _, o := range r.ops {
			o.mu.Lock()
			if o.ivCount > 0 {
				q := o.ivResp.ValueAtPercentilesSlice([]float64{50, 95, 99})
				oi := OpInterval{Count: o.ivCount, Errors: o.ivErrors, P50: ms(q[0]), P95: ms(q[1]), P99: ms(q[2])}
				if o.ivResp.TotalCount() > 0 {
					oi.Max = ms(o.ivResp.Max())
				}
				iv.Ops[o.info.Name] = oi
				iv.Count += o.ivCount
				iv.Errors += o.ivErrors
			}
			o.ivResp.Reset()
			o.ivCount, o.ivErrors = 0, 0
			o.mu.Unlock()
		}
		r.series = append(r.series, iv)
		out = append(out, iv)
	}
}

// Finish closes every interval up to now, then the last partial one (its
// T is the real end, not a whole interval) when it holds any sample or time.
func (r *Recorder) Finish(now time.Time) []Interval {
	out := r.Tick(now)
	last := r.start.Add(time.Duration(r.ivIndex) * r.interval)
	if now.After(last) {
		// Close one more interval ending at now.
		saved := r.interval
		full := r.Tick(last.Add(saved)) // closes the partial interval
		if len(full) == 1 {
			full[0].T = now.Sub(r.start).Seconds()
			r.series[len(r.series)-1].T = full[0].T
			out = append(out, full[0])
		}
	}
	return out
}

// Gauges returns the last values given to SetGauges: active VUs, VUs
// waiting for a connection, VUs inside an operation.
func (r *Recorder) Gauges() (vus, poolWaiters, inFlight int64) {
	return r.vus.Load(), r.waiters.Load(), r.inflight.Load()
}

// Series returns the intervals closed so far.
func (r *Recorder) Series() []Interval { return r.series }

// Latency is a latency distribution summary in ms.
type Latency struct {
	Mean float64 `json:"mean_ms"`
	P50  float64 `json:"p50_ms"`
	P95  float64 `json:"p95_ms"`
	P99  float64 `json:"p99_ms"`
	Max  float64 `json:"max_ms"`
}

func summarize(h *hdrhistogram.Histogram) Latency {
	if h.TotalCount() == 0 {
		return Latency{}
	}
	q := h.ValueAtPercentilesSlice([]float64{50, 95, 99})
	return Latency{Mean: h.Mean() / 1000, P50: ms(q[0]), P95: ms(q[1]), P99: ms(q[2]), Max: ms(h.Max())}
}

// OpResult is the final result of one key operation.
type OpResult struct {
	Name     string  `json:"name"`
	TargetMs float64 `json:"target_ms"`
	Priority int     `json:"priority"`
	// Count is the number of scored executions, errors included.
	Count  int64 `json:"count"`
	Errors int64 `json:"errors"`
	// Response is the response time (pool wait + database) of successful
	// executions; PoolWait and DB split it.
	Response Latency `json:"response"`
	PoolWait Latency `json:"pool_wait"`
	DB       Latency `json:"db"`
	// PerSecond is Count divided by the scored duration.
	PerSecond float64 `json:"per_second"`
	// APDEX of the operation against its target time.
	Apdex apdex.Score `json:"apdex"`
	// Zones are the APDEX zone counts (errors are frustrated).
	Zones apdex.Counts `json:"zones"`
	// ErrorsBySQLState counts failed executions by SQLSTATE.
	ErrorsBySQLState map[string]int64 `json:"errors_by_sqlstate,omitempty"`
	// WarmupCount and WarmupErrors count executions started during warm-up
	// (not scored).
	WarmupCount  int64 `json:"warmup_count"`
	WarmupErrors int64 `json:"warmup_errors"`
	// Histogram is the response-time HdrHistogram in µs, in the
	// HdrHistogram V2 compressed encoding, base64 (hdrhistogram-go Encode),
	// so later tools can merge or re-query it.
	Histogram string `json:"histogram_us"`
}

// Results computes per-operation results; scored is the scored duration
// (run length minus warm-up) used for rates.
func (r *Recorder) Results(scored time.Duration) []OpResult {
	out := make([]OpResult, 0, len(r.ops))
	for _, o := range r.ops {
		o.mu.Lock()
		res := OpResult{
			Name: o.info.Name, TargetMs: float64(o.info.Target) / float64(time.Millisecond), Priority: o.info.Priority,
			Count: o.count, Errors: o.errors,
			Response: summarize(o.resp), PoolWait: summarize(o.wait), DB: summarize(o.db),
			Apdex: o.apdex.Score(o.info.Target), Zones: o.apdex,
			WarmupCount: o.warmN, WarmupErrors: o.warmErr,
		}
		if scored > 0 {
			res.PerSecond = float64(o.count) / scored.Seconds()
		}
		if len(o.byState) > 0 {
			res.ErrorsBySQLState = make(map[string]int64, len(o.byState))
			for k, v := range o.byState {
				res.ErrorsBySQLState[k] = v
			}
		}
		if enc, err := o.resp.Encode(hdrhistogram.V2CompressedEncodingCookieBase); err == nil {
			res.Histogram = string(enc)
		}
		o.mu.Unlock()
		out = append(out, res)
	}
	return out
}

// VisitOps calls fn for each operation in order, under that operation's
// lock: resp is the live response-time histogram (µs; fn must not keep or
// change it), zones the APDEX zone counts. Safe beside concurrent Record
// calls, and cheap enough for a metrics scrape (no copies, no encoding).
func (r *Recorder) VisitOps(fn func(info OpInfo, resp *hdrhistogram.Histogram, zones apdex.Counts, count, errors int64)) {
	for _, o := range r.ops {
		o.mu.Lock()
		fn(o.info, o.resp, o.apdex, o.count, o.errors)
		o.mu.Unlock()
	}
}

// Integral is the integral APDEX over the operations' scores, weighted by
// priority (see apdex.Integral). ok is false when no operation has samples.
func Integral(results []OpResult) (value float64, ok bool) {
	ws := make([]apdex.Weighted, 0, len(results))
	for _, r := range results {
		ws = append(ws, apdex.Weighted{Score: r.Apdex, Priority: r.Priority})
	}
	return apdex.Integral(ws)
}

// Snapshot is a running view for progress lines: totals since the start
// of scoring and the operation whose p95 is worst relative to its T.
type Snapshot struct {
	Count, Errors int64
	WorstOp       string
	WorstP95      time.Duration
	WorstTarget   time.Duration
	Apdex         float64
	ApdexOK       bool
	Warmup        int64 // executions during warm-up
}

// Snapshot returns running figures without closing an interval.
func (r *Recorder) Snapshot() Snapshot {
	var s Snapshot
	worst := -1.0
	ws := make([]apdex.Weighted, 0, len(r.ops))
	for _, o := range r.ops {
		o.mu.Lock()
		s.Count += o.count
		s.Errors += o.errors
		s.Warmup += o.warmN
		if o.resp.TotalCount() > 0 {
			p95 := time.Duration(o.resp.ValueAtQuantile(95)) * time.Microsecond
			if ratio := float64(p95) / float64(o.info.Target); ratio > worst {
				worst = ratio
				s.WorstOp, s.WorstP95, s.WorstTarget = o.info.Name, p95, o.info.Target
			}
		}
		ws = append(ws, apdex.Weighted{Score: o.apdex.Score(o.info.Target), Priority: o.info.Priority})
		o.mu.Unlock()
	}
	s.Apdex, s.ApdexOK = apdex.Integral(ws)
	return s
}

// SQLStates returns all error codes seen, most frequent first.
func SQLStates(results []OpResult) []string {
	total := map[string]int64{}
	for _, r := range results {
		for k, v := range r.ErrorsBySQLState {
			total[k] += v
		}
	}
	keys := make([]string, 0, len(total))
	for k := range total {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		if total[keys[i]] != total[keys[j]] {
			return total[keys[i]] > total[keys[j]]
		}
		return keys[i] < keys[j]
	})
	return keys
}
