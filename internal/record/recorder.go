// Package record keeps the measurements of a load test: per key operation
// an HdrHistogram of response time in microseconds (bounded memory however
// long the run), the time spent waiting for a pooled connection and the
// time spent in the database, counts of errors by SQLSTATE, APDEX zone
// counts, and a per-interval time series. For the open model (arrivals at
// a rate, engine.Config.Rate) it also keeps the schedule lag (actual start
// minus scheduled start, its own HdrHistogram), arrivals skipped under a
// latency limit, executions late above that limit, retries, and the
// backlog of due arrivals not yet started. It also streams intervals to disk
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
	// for a connection); in the closed model it decides warm-up
	// membership.
	Start time.Time
	// Scheduled is, in the open model, when the arrival was scheduled to
	// start; zero in the closed model. When set, it decides warm-up
	// membership, and Start - Scheduled is the schedule lag, which is part
	// of the response time (latency is measured from the scheduled start,
	// as pgbench does with --rate, so a stalled server cannot hide the
	// arrivals it delayed: no coordinated omission).
	Scheduled time.Time
	// Wait is the time spent waiting for a pooled connection.
	Wait time.Duration
	// DB is the time spent executing the operation on the connection.
	DB time.Duration
	// SQLState is "" on success, else the error's SQLSTATE (or one of the
	// client-side codes of package engine, e.g. "08006" for a lost
	// connection).
	SQLState string
	// Retries is how many times the workload retried the operation within
	// this execution (e.g. after a serialization failure, like pgbench
	// --max-tries); summed per operation.
	Retries int
}

// Lag is the schedule lag, Start - Scheduled (0 in the closed model, and
// never negative).
func (s Sample) Lag() time.Duration {
	if s.Scheduled.IsZero() {
		return 0
	}
	return max(s.Start.Sub(s.Scheduled), 0)
}

// Response is the response time the user sees: schedule lag (open model)
// plus connection wait plus time in the database, i.e. from the scheduled
// (open model) or actual (closed model) start to the end. APDEX scores
// this value.
func (s Sample) Response() time.Duration { return s.Lag() + s.Wait + s.DB }

// opStats is guarded by its own mutex so virtual users recording different
// operations do not contend.
type opStats struct {
	mu       sync.Mutex
	info     OpInfo
	resp     *hdrhistogram.Histogram // response time, µs, scored samples only
	wait     *hdrhistogram.Histogram // pool wait, µs
	db       *hdrhistogram.Histogram // time in the database, µs
	lag      *hdrhistogram.Histogram // schedule lag, µs, open-model samples only
	ivResp   *hdrhistogram.Histogram // response time in the current interval
	ivCount  int64
	ivErrors int64
	ivSkip   int64
	ivLate   int64
	count    int64 // scored samples, errors included
	errors   int64
	skipped  int64 // scored arrivals skipped under the latency limit
	late     int64 // successful scored executions above the latency limit
	retries  int64
	retried  int64 // scored executions with at least one retry
	byState  map[string]int64
	apdex    apdex.Counts
	warmN    int64
	warmErr  int64
	warmSkip int64
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

	ivIndex     int // number of intervals closed so far
	series      []Interval
	vus         atomic.Int64
	inflight    atomic.Int64
	waiters     atomic.Int64
	maxWaiter   atomic.Int64
	limit       atomic.Int64 // latency limit, ns; 0 = none
	backlog     atomic.Int64
	maxBacklog  atomic.Int64
	backlogLeft atomic.Int64
	abortedVUs  atomic.Int64
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
			info: op, resp: newHist(), wait: newHist(), db: newHist(), lag: newHist(), ivResp: newHist(),
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

// SetLatencyLimit sets the latency limit (pgbench --latency-limit):
// successful executions whose response time exceeds it are counted as late
// (OpResult.Late). 0, the default, counts none. Safe to call at any time;
// package engine calls it from Config.LatencyLimit.
func (r *Recorder) SetLatencyLimit(limit time.Duration) { r.limit.Store(int64(max(limit, 0))) }

// Record adds one finished operation. Warm-up samples count only in the
// warm-up counters; all others go into the histograms, APDEX counts and the
// current interval. An open-model sample (Scheduled set) also adds its
// schedule lag to the lag histogram, errors included.
func (r *Recorder) Record(s Sample) {
	o := r.ops[s.Op]
	failed := s.SQLState != ""
	at := s.Start
	if !s.Scheduled.IsZero() {
		at = s.Scheduled
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if at.Sub(r.start) < r.warmup {
		o.warmN++
		if failed {
			o.warmErr++
		}
		return
	}
	resp := s.Response()
	o.count++
	o.ivCount++
	if s.Retries > 0 {
		o.retries += int64(s.Retries)
		o.retried++
	}
	if !s.Scheduled.IsZero() {
		recordMicros(o.lag, s.Lag())
	}
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
		if limit := r.limit.Load(); limit > 0 && resp > time.Duration(limit) {
			o.late++
			o.ivLate++
		}
	}
	o.apdex.Add(resp, o.info.Target, failed)
}

// RecordSkipped counts an arrival of operation op, scheduled at scheduled,
// that was not run because its schedule lag already exceeded the latency
// limit when a virtual user took it (pgbench --latency-limit with --rate).
// A skipped arrival is a user who got no service: it is scored in the
// operation's APDEX as frustrated, like a failed execution (the Apdex
// specification v1.1 scores failed transactions frustrated), so
// OpResult.Apdex.Samples is Count + Skipped. It is in no histogram and
// not in Count (as pgbench leaves skipped transactions out of its
// latencies); read OpResult.Skipped next to them. Arrivals scheduled in
// the warm-up are counted apart (OpResult.WarmupSkipped) and not scored.
func (r *Recorder) RecordSkipped(op int, scheduled time.Time) {
	o := r.ops[op]
	o.mu.Lock()
	defer o.mu.Unlock()
	if scheduled.Sub(r.start) < r.warmup {
		o.warmSkip++
		return
	}
	o.skipped++
	o.ivSkip++
	o.apdex.Add(0, o.info.Target, true)
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

// SetBacklog stores the open model's backlog, the number of arrivals due
// (scheduled at or before now) and not yet started, and peak, the largest
// backlog seen since the last call; the interval keeps the last value and
// the maximum. The engine calls it on every controller tick.
func (r *Recorder) SetBacklog(current, peak int64) {
	r.backlog.Store(current)
	peak = max(peak, current)
	for {
		m := r.maxBacklog.Load()
		if peak <= m || r.maxBacklog.CompareAndSwap(m, peak) {
			break
		}
	}
}

// Backlog returns the last backlog given to SetBacklog (arrivals due and
// not yet started; 0 in the closed model).
func (r *Recorder) Backlog() int64 { return r.backlog.Load() }

// SetBacklogLeft stores the number of arrivals that were due by the end of
// the run and never started (the engine's Outcome.BacklogLeft), for
// Totals.
func (r *Recorder) SetBacklogLeft(n int64) { r.backlogLeft.Store(n) }

// SetAbortedVUs stores the number of virtual users that stopped themselves
// for the rest of the run after an operation failed with
// workload.ErrStopVU (the engine's Outcome.AbortedVUs), for Totals.
func (r *Recorder) SetAbortedVUs(n int) { r.abortedVUs.Store(int64(n)) }

// OpInterval is one operation's figures in one interval. Latencies in ms.
type OpInterval struct {
	Count  int64   `json:"n"`
	Errors int64   `json:"err"`
	P50    float64 `json:"p50_ms"`
	P95    float64 `json:"p95_ms"`
	P99    float64 `json:"p99_ms"`
	Max    float64 `json:"max_ms"`
	// Skipped counts arrivals skipped under the latency limit, by their
	// skip time; Late successful executions above the limit.
	Skipped int64 `json:"skipped,omitempty"`
	Late    int64 `json:"late,omitempty"`
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
	// Backlog (open model) is the number of arrivals due and not yet
	// started at the end of the interval; BacklogMax the largest number
	// seen during it (sampled whenever a VU takes an arrival and on every
	// engine tick).
	Backlog    int64 `json:"backlog,omitempty"`
	BacklogMax int64 `json:"backlog_max,omitempty"`
	// Skipped sums the operations' skipped arrivals, Late their late
	// executions.
	Skipped int64 `json:"skipped,omitempty"`
	Late    int64 `json:"late,omitempty"`
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
			Backlog:        r.backlog.Load(),
			BacklogMax:     r.maxBacklog.Swap(r.backlog.Load()),
			Ops:            map[string]OpInterval{},
		}
		for _, o := range r.ops {
			o.mu.Lock()
			if o.ivCount > 0 || o.ivSkip > 0 {
				oi := OpInterval{Count: o.ivCount, Errors: o.ivErrors, Skipped: o.ivSkip, Late: o.ivLate}
				if o.ivResp.TotalCount() > 0 {
					q := o.ivResp.ValueAtPercentilesSlice([]float64{50, 95, 99})
					oi.P50, oi.P95, oi.P99 = ms(q[0]), ms(q[1]), ms(q[2])
					oi.Max = ms(o.ivResp.Max())
				}
				iv.Ops[o.info.Name] = oi
				iv.Count += o.ivCount
				iv.Errors += o.ivErrors
				iv.Skipped += o.ivSkip
				iv.Late += o.ivLate
			}
			o.ivResp.Reset()
			o.ivCount, o.ivErrors, o.ivSkip, o.ivLate = 0, 0, 0, 0
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
	// StdDev is the standard deviation (pgbench's "latency stddev"); left
	// out of the JSON when 0.
	StdDev float64 `json:"stddev_ms,omitempty"`
}

func summarize(h *hdrhistogram.Histogram) Latency {
	if h.TotalCount() == 0 {
		return Latency{}
	}
	q := h.ValueAtPercentilesSlice([]float64{50, 95, 99})
	return Latency{Mean: h.Mean() / 1000, P50: ms(q[0]), P95: ms(q[1]), P99: ms(q[2]), Max: ms(h.Max()), StdDev: h.StdDev() / 1000}
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
	// APDEX of the operation against its target time, over its scored
	// executions and skipped arrivals (Apdex.Samples = Count + Skipped).
	Apdex apdex.Score `json:"apdex"`
	// Zones are the APDEX zone counts: errors and skipped arrivals are
	// frustrated, so their total is Count + Skipped.
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
	// Lag (open model only) is the schedule lag of scored executions,
	// errors included: actual start minus scheduled start (pgbench's
	// "schedule lag"). It is part of Response.
	Lag Latency `json:"lag,omitzero"`
	// Skipped counts scored arrivals not run because their lag exceeded
	// the latency limit: not in Count or the histograms, but in the APDEX
	// as frustrated (Zones); WarmupSkipped those scheduled in the warm-up
	// (not scored).
	Skipped       int64 `json:"skipped,omitempty"`
	WarmupSkipped int64 `json:"warmup_skipped,omitempty"`
	// Late counts successful scored executions whose response time
	// exceeded the latency limit (pgbench's "above the latency limit").
	Late int64 `json:"late,omitempty"`
	// Retries sums the retries the workload reported (Sample.Retries);
	// Retried counts the executions that were retried at least once
	// (pgbench's "total number of retries" and "transactions retried").
	Retries int64 `json:"retries,omitempty"`
	Retried int64 `json:"retried,omitempty"`
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
			Lag: summarize(o.lag), Skipped: o.skipped, WarmupSkipped: o.warmSkip, Late: o.late, Retries: o.retries, Retried: o.retried,
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

// Totals sums the operations' scored figures over scored (the run length
// minus warm-up, for PerSecond) and adds the backlog left at the end
// (SetBacklogLeft) and the aborted VUs (SetAbortedVUs).
func (r *Recorder) Totals(scored time.Duration) Totals {
	t := Totals{ScoredSeconds: scored.Seconds(), BacklogLeft: r.backlogLeft.Load(), AbortedVUs: int(r.abortedVUs.Load())}
	for _, o := range r.ops {
		o.mu.Lock()
		t.Count += o.count
		t.Errors += o.errors
		t.Skipped += o.skipped
		t.Late += o.late
		t.Retries += o.retries
		t.Retried += o.retried
		o.mu.Unlock()
	}
	if scored > 0 {
		t.PerSecond = float64(t.Count) / scored.Seconds()
	}
	return t
}

// VisitOps calls fn for each operation in order, under that operation's
// lock: resp is the live response-time histogram (µs; fn must not keep or
// change it), zones the APDEX zone counts (errors and skipped arrivals
// frustrated, so their total may exceed count). Safe beside concurrent Record
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
	// Skipped and Late are the scored arrivals skipped and executions
	// late under the latency limit; Backlog is the last backlog gauge
	// (open model).
	Skipped, Late int64
	Backlog       int64
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
		s.Skipped += o.skipped
		s.Late += o.late
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
	s.Backlog = r.backlog.Load()
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
