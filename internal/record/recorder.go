// Package record keeps the measurements of a load test: per key operation
// an HdrHistogram of response time in microseconds (bounded memory however
// long the run), the time spent waiting for a pooled connection and the
// time spent in the database, counts of errors by SQLSTATE, APDEX zone
// counts, and a per-interval time series. For the open model (arrivals at
// a rate, engine.Config.Rate) it also keeps the schedule lag (actual start
// minus scheduled start, its own HdrHistogram), arrivals skipped under a
// latency limit, executions late above that limit, retries, and the
// backlog of due arrivals not yet started. It produces the types of package
// results (results.Interval per closed interval, results.OpResult and
// results.Totals at the end); writing, streaming and reading them belong to
// package results (docs/results-format.md).
package record

import (
	"maps"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/HdrHistogram/hdrhistogram-go"

	"github.com/erplab/erplab/internal/apdex"
	"github.com/erplab/erplab/internal/results"
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
	// Message is the server's error message of a failed execution
	// (PgError.Message; "" for client-side errors): the first one per
	// SQLSTATE is kept as OpResult.ErrorExamples.
	Message string
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
	mu        sync.Mutex
	info      OpInfo
	resp      *hdrhistogram.Histogram // response time, µs, scored samples only
	wait      *hdrhistogram.Histogram // pool wait, µs
	db        *hdrhistogram.Histogram // time in the database, µs
	lag       *hdrhistogram.Histogram // schedule lag, µs, open-model samples only
	ivResp    *hdrhistogram.Histogram // response time in the current interval
	ivCount   int64
	ivErrors  int64
	ivSkip    int64
	ivLate    int64
	ivRetries int64
	ivRetried int64
	ivApdex   apdex.Counts
	ivState   map[string]int64
	count     int64 // scored samples, errors included
	errors    int64
	skipped   int64 // scored arrivals skipped under the latency limit
	late      int64 // successful scored executions above the latency limit
	retries   int64
	retried   int64 // scored executions with at least one retry
	byState   map[string]int64
	examples  map[string]string // SQLSTATE -> first server message
	apdex     apdex.Counts
	warmN     int64
	warmErr   int64
	warmSkip  int64
	ivCut     int64 // cut-short executions scored frustrated in the interval
	cut       results.CutShort
	// win* cover the window since the last TakeWindow (progress line).
	winResp  *hdrhistogram.Histogram
	winApdex apdex.Counts
	winCount int64
	winErr   int64
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
	series      []results.Interval
	thin        thinning
	keepMu      sync.Mutex
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
			info: op, resp: newHist(), wait: newHist(), db: newHist(), lag: newHist(), ivResp: newHist(), winResp: newHist(),
			byState: map[string]int64{}, ivState: map[string]int64{},
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
	if failed && s.Message != "" {
		if _, ok := o.examples[s.SQLState]; !ok {
			if o.examples == nil {
				o.examples = map[string]string{}
			}
			o.examples[s.SQLState] = truncate(s.Message, maxExample)
		}
	}
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
		o.ivRetries += int64(s.Retries)
		o.ivRetried++
	}
	if !s.Scheduled.IsZero() {
		recordMicros(o.lag, s.Lag())
	}
	if failed {
		o.errors++
		o.ivErrors++
		o.byState[s.SQLState]++
		o.ivState[s.SQLState]++
	} else {
		// Latency histograms hold successful executions only: a fast
		// error must not make the percentiles look better.
		recordMicros(o.resp, resp)
		recordMicros(o.ivResp, resp)
		recordMicros(o.winResp, resp)
		recordMicros(o.wait, s.Wait)
		recordMicros(o.db, s.DB)
		if limit := r.limit.Load(); limit > 0 && resp > time.Duration(limit) {
			o.late++
			o.ivLate++
		}
	}
	o.apdex.Add(resp, o.info.Target, failed)
	o.ivApdex.Add(resp, o.info.Target, failed)
	o.winApdex.Add(resp, o.info.Target, failed)
	o.winCount++
	if failed {
		o.winErr++
	}
}

// RecordCutShort counts an execution of operation op that the end of the
// run (the graceful stop's end, or an interrupt) cut short at end: it
// began at start, or was scheduled at scheduled in the open model (then
// its elapsed time runs from there, as its response time would have).
// When its elapsed time already exceeds 4T it could only have ended
// frustrated, so it is scored frustrated (in the zones and APDEX of the
// operation and of the current interval, not in Count or the histograms)
// and counted in results.CutShort.Frustrated; otherwise, or when it
// began in the warm-up, it is counted in CutShort.NotScored. Both keep
// their longest elapsed time.
func (r *Recorder) RecordCutShort(op int, start, scheduled, end time.Time) {
	o := r.ops[op]
	at := start
	if !scheduled.IsZero() {
		at = scheduled
	}
	elapsed := max(end.Sub(at), 0)
	ms := float64(elapsed) / float64(time.Millisecond)
	o.mu.Lock()
	defer o.mu.Unlock()
	if at.Sub(r.start) >= r.warmup && apdex.Classify(elapsed, o.info.Target) == apdex.Frustrated {
		o.cut.Frustrated++
		o.cut.FrustratedMaxMs = max(o.cut.FrustratedMaxMs, ms)
		o.ivCut++
		o.apdex.Add(elapsed, o.info.Target, true)
		o.ivApdex.Add(elapsed, o.info.Target, true)
		o.winApdex.Add(elapsed, o.info.Target, true)
		return
	}
	o.cut.NotScored++
	o.cut.NotScoredMaxMs = max(o.cut.NotScoredMaxMs, ms)
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
	if scheduled.Sub(r.start) < r.warmup {
		r.RecordSkips(op, 0, 1)
		return
	}
	r.RecordSkips(op, 1, 0)
}

// RecordSkips is RecordSkipped for a batch of skipped arrivals of
// operation op, counted by the caller: scored of them scheduled at or
// after WarmupEnd, warm before it. One lock for the batch (the open
// model's catch-up skips arrivals in runs).
func (r *Recorder) RecordSkips(op int, scored, warm int64) {
	o := r.ops[op]
	o.mu.Lock()
	defer o.mu.Unlock()
	o.warmSkip += warm
	o.skipped += scored
	o.ivSkip += scored
	// a skipped arrival is failed: frustrated whatever its time (apdex.Counts.Add)
	o.apdex.Frustrated += scored
	o.ivApdex.Frustrated += scored
	o.winApdex.Frustrated += scored
}

// WarmupEnd is the end of the warm-up: arrivals and operations scheduled
// (started) before it are counted apart and not scored.
func (r *Recorder) WarmupEnd() time.Time { return r.start.Add(r.warmup) }

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

// encode is h in the HdrHistogram V2 compressed encoding, base64, as
// results.OpResult.Histogram holds it ("" if encoding fails, which it does
// not for a histogram of this package's range).
func encode(h *hdrhistogram.Histogram) string {
	enc, err := h.Encode(hdrhistogram.V2CompressedEncodingCookieBase)
	if err != nil {
		return ""
	}
	return string(enc)
}

// Tick closes every interval that has ended by now and returns them in
// order (usually one). Warm-up samples are not in intervals; intervals
// that lie in the warm-up period are marked.
func (r *Recorder) Tick(now time.Time) []results.Interval {
	var out []results.Interval
	for {
		end := r.start.Add(time.Duration(r.ivIndex+1) * r.interval)
		if now.Before(end) {
			r.thinSeries()
			return out
		}
		r.ivIndex++
		iv := results.Interval{
			T:              end.Sub(r.start).Seconds(),
			Warmup:         end.Sub(r.start) <= r.warmup,
			VUs:            r.vus.Load(),
			PoolWaiters:    r.waiters.Load(),
			InFlight:       r.inflight.Load(),
			PoolWaitersMax: r.maxWaiter.Swap(r.waiters.Load()),
			Backlog:        r.backlog.Load(),
			BacklogMax:     r.maxBacklog.Swap(r.backlog.Load()),
			Ops:            map[string]results.OpInterval{},
		}
		for _, o := range r.ops {
			o.mu.Lock()
			if o.ivCount > 0 || o.ivSkip > 0 || o.ivCut > 0 {
				oi := results.OpInterval{
					Count: o.ivCount, Errors: o.ivErrors, Skipped: o.ivSkip, Late: o.ivLate,
					Zones: o.ivApdex, Retries: o.ivRetries, Retried: o.ivRetried, CutShort: o.ivCut,
				}
				if o.ivResp.TotalCount() > 0 {
					l := results.Summarize(o.ivResp)
					oi.P50, oi.P95, oi.P99, oi.Max = l.P50, l.P95, l.P99, l.Max
					oi.Histogram = encode(o.ivResp)
				}
				if len(o.ivState) > 0 {
					oi.ErrorsBySQLState = maps.Clone(o.ivState)
				}
				iv.Ops[o.info.Name] = oi
				iv.Count += o.ivCount
				iv.Errors += o.ivErrors
				iv.Skipped += o.ivSkip
				iv.Late += o.ivLate
			}
			o.ivResp.Reset()
			o.ivCount, o.ivErrors, o.ivSkip, o.ivLate = 0, 0, 0, 0
			o.ivRetries, o.ivRetried, o.ivApdex, o.ivCut = 0, 0, apdex.Counts{}, 0
			clear(o.ivState)
			o.mu.Unlock()
		}
		r.series = append(r.series, iv)
		out = append(out, iv)
	}
}

// Finish closes every interval up to now, then the last partial one (its
// T is the real end, not a whole interval) when it holds any sample or time.
func (r *Recorder) Finish(now time.Time) []results.Interval {
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

// Series returns the intervals closed so far (thinned past the horizon
// when SetThinning is set).
func (r *Recorder) Series() []results.Interval { return r.series }

// Results computes per-operation results; scored is the scored duration
// (run length minus warm-up) used for rates.
func (r *Recorder) Results(scored time.Duration) []results.OpResult {
	out := make([]results.OpResult, 0, len(r.ops))
	for _, o := range r.ops {
		o.mu.Lock()
		res := results.OpResult{
			Name: o.info.Name, TargetMs: float64(o.info.Target) / float64(time.Millisecond), Priority: o.info.Priority,
			Count: o.count, Errors: o.errors,
			Response: results.Summarize(o.resp), PoolWait: results.Summarize(o.wait), DB: results.Summarize(o.db),
			Apdex: o.apdex.Score(o.info.Target), Zones: o.apdex,
			WarmupCount: o.warmN, WarmupErrors: o.warmErr,
			Lag: results.Summarize(o.lag), Skipped: o.skipped, WarmupSkipped: o.warmSkip, Late: o.late, Retries: o.retries, Retried: o.retried,
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
		if len(o.examples) > 0 {
			res.ErrorExamples = maps.Clone(o.examples)
		}
		res.Histogram = encode(o.resp)
		res.PoolWaitHistogram, res.DBHistogram = encode(o.wait), encode(o.db)
		if o.lag.TotalCount() > 0 {
			res.LagHistogram = encode(o.lag)
		}
		if o.cut.Total() > 0 {
			c := o.cut
			res.CutShort = &c
		}
		o.mu.Unlock()
		out = append(out, res)
	}
	return out
}

// Totals sums the operations' scored figures over scored (the run length
// minus warm-up, for PerSecond) and adds the backlog left at the end
// (SetBacklogLeft) and the aborted VUs (SetAbortedVUs).
func (r *Recorder) Totals(scored time.Duration) results.Totals {
	t := results.Totals{ScoredSeconds: scored.Seconds(), BacklogLeft: r.backlogLeft.Load(), AbortedVUs: int(r.abortedVUs.Load())}
	for _, o := range r.ops {
		o.mu.Lock()
		t.AddOp(results.OpResult{Count: o.count, Errors: o.errors, Skipped: o.skipped, Late: o.late, Retries: o.retries, Retried: o.retried})
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

// Window holds the scored figures of the window since the previous
// TakeWindow (or the start): executions and errors completed in it, the
// operation whose p95 in the window is worst relative to its T, and the
// integral APDEX of the window's zone counts (errors, skipped arrivals
// and cut-short executions past 4T frustrated). ApdexOK is false when no
// operation had a sample in the window.
type Window struct {
	Count, Errors int64
	WorstOp       string
	WorstP95      time.Duration
	WorstTarget   time.Duration
	Apdex         float64
	ApdexOK       bool
}

// TakeWindow returns the figures since the previous call and starts a new
// window. It is meant for one consumer (the progress line); it is safe
// beside concurrent Record calls.
func (r *Recorder) TakeWindow() Window {
	var w Window
	worst := -1.0
	ws := make([]apdex.Weighted, 0, len(r.ops))
	for _, o := range r.ops {
		o.mu.Lock()
		w.Count += o.winCount
		w.Errors += o.winErr
		if o.winResp.TotalCount() > 0 {
			p95 := time.Duration(o.winResp.ValueAtQuantile(95)) * time.Microsecond
			if ratio := float64(p95) / float64(o.info.Target); ratio > worst {
				worst = ratio
				w.WorstOp, w.WorstP95, w.WorstTarget = o.info.Name, p95, o.info.Target
			}
		}
		ws = append(ws, apdex.Weighted{Score: o.winApdex.Score(o.info.Target), Priority: o.info.Priority})
		o.winResp.Reset()
		o.winApdex, o.winCount, o.winErr = apdex.Counts{}, 0, 0
		o.mu.Unlock()
	}
	w.Apdex, w.ApdexOK = apdex.Integral(ws)
	return w
}

// maxExample bounds an error example's length, bytes.
const maxExample = 512

// truncate cuts s to at most n bytes on a rune boundary.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}
