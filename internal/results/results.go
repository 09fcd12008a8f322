package results

import (
	"encoding/json"
	"fmt"
	"sort"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"

	"github.com/erplab/erplab/internal/apdex"
)

// Format names the results document and stream (the "format" field).
const Format = "erplab-run/1"

// SchemaVersion counts the additive changes within Format that this
// package writes and reads (the "schema" field; a file without it is
// version 1). Version 2 added per-operation zones, histogram_us,
// errors_by_sqlstate, retries and retried to the intervals. Version 3
// added the operations cut short at the end of the run (cut_short: those
// already past 4T are scored frustrated, so the zones total count +
// skipped + cut_short.frustrated) and the per-stage figures (stages).
// Version 4 added the spans during which the server answered nothing
// (server_unresponsive) and the stream's write failure (stream_error).
// Version 5 added the run id and configuration hash (run_id,
// config_hash), a segment's place in a run split over several load
// machines (segment), the agent's own CPU use (agent), the merge of the
// segments (merged), and the pool-wait, database and lag histograms of
// every operation (pool_wait_histogram_us, db_histogram_us,
// lag_histogram_us), so that a merge recomputes those exactly too.
// Version 6 added the coarse points of a thinned series (span_s: a
// soak's intervals older than its horizon folded into one point per
// window).
const SchemaVersion = 6

// IntegralScore is the integral APDEX of a run, as written to the results.
type IntegralScore struct {
	// Value is the priority-weighted mean of the per-operation scores.
	Value float64 `json:"value"`
	// Rating is the APDEX band of Value ("excellent" ... "unacceptable"),
	// or "ns" when no operation had samples.
	Rating string `json:"rating"`
}

// NS reports that no operation had samples.
func (i IntegralScore) NS() bool { return i.Rating == apdex.NoSample.String() }

// String prints the value as the run summary, compare and report show
// it: truncated to two decimals (apdex.FormatValue), "NS" when no
// operation had samples.
func (i IntegralScore) String() string {
	if i.NS() {
		return "NS"
	}
	return apdex.FormatValue(i.Value)
}

// FormatMs prints a latency in ms with a unit that keeps 3 significant
// digits, as every erplab table shows latencies: "-" for 0, "381µs",
// "2.57ms", "17ms", "1.25s", and whole seconds from a minute ("1m5s").
func FormatMs(v float64) string {
	switch {
	case v == 0:
		return "-"
	case v < 1:
		return fmt.Sprintf("%.0fµs", v*1000)
	case v < 10:
		return fmt.Sprintf("%.2fms", v)
	case v < 1000:
		return fmt.Sprintf("%.0fms", v)
	case v >= 60000:
		return (time.Duration(v*1e6) / time.Second * time.Second).String()
	default:
		return fmt.Sprintf("%.2fs", v/1000)
	}
}

// NewIntegralScore wraps an integral value for the document.
func NewIntegralScore(v float64, ok bool) IntegralScore {
	if !ok {
		return IntegralScore{Rating: apdex.NoSample.String()}
	}
	return IntegralScore{Value: v, Rating: apdex.RatingOf(v).String()}
}

// Totals sums a run over all operations.
type Totals struct {
	Count  int64 `json:"count"`
	Errors int64 `json:"errors"`
	// PerSecond is executions per second over the scored duration (the
	// load test's "tps" for key operations).
	PerSecond float64 `json:"per_second"`
	// ScoredSeconds is the run length minus warm-up, in seconds.
	ScoredSeconds float64 `json:"scored_seconds"`
	// Skipped, Late and Retries sum the operations' figures (see
	// OpResult).
	Skipped int64 `json:"skipped,omitempty"`
	Late    int64 `json:"late,omitempty"`
	Retries int64 `json:"retries,omitempty"`
	Retried int64 `json:"retried,omitempty"`
	// BacklogLeft (open model) counts the arrivals that were due by the
	// end of the run and never started: neither executed nor skipped. No
	// operation was picked for them, so they are in no operation's APDEX.
	BacklogLeft int64 `json:"backlog_left,omitempty"`
	// AbortedVUs counts the virtual users that stopped themselves for the
	// rest of the run after an operation failed with workload.ErrStopVU
	// (like pgbench's aborted clients); that failure is in Errors.
	AbortedVUs int `json:"aborted_vus,omitempty"`
}

// AddOp adds an operation's Count, Errors, Skipped, Late, Retries and
// Retried to the totals' (not PerSecond, ScoredSeconds, BacklogLeft or
// AbortedVUs, which are the run's).
func (t *Totals) AddOp(op OpResult) {
	t.Count += op.Count
	t.Errors += op.Errors
	t.Skipped += op.Skipped
	t.Late += op.Late
	t.Retries += op.Retries
	t.Retried += op.Retried
}

// Document is the final results file of `erplab run` (docs/results-format.md).
type Document struct {
	Format string `json:"format"`
	// Schema is the SchemaVersion the file was written with (absent, read
	// as 1, in files written before the field existed).
	Schema      int       `json:"schema,omitempty"`
	Version     string    `json:"erplab_version"`
	CommandLine []string  `json:"command_line"`
	Workload    string    `json:"workload"`
	StartedAt   time.Time `json:"started_at"`
	EndedAt     time.Time `json:"ended_at"`
	// Status is "completed", "interrupted" (Ctrl-C), or "aborted: <why>";
	// "running" in the stream's header; "killed: <why>" when Read rebuilt
	// the document from the stream of a run that left no summary.
	Status      Status          `json:"status"`
	Environment json.RawMessage `json:"environment,omitempty"`
	Parameters  json.RawMessage `json:"parameters,omitempty"`
	Operations  []OpResult      `json:"operations"`
	Integral    IntegralScore   `json:"apdex_integral"`
	Totals      Totals          `json:"totals"`
	Series      []Interval      `json:"series,omitempty"`
	// Stages are the figures of each step of a load profile of several
	// steps (StageFigures), absent for a single step.
	Stages []StageResult `json:"stages,omitempty"`
	// ServerUnresponsive lists the spans during which the server answered
	// nothing while operations were in flight (schema 4); absent when
	// there were none.
	ServerUnresponsive []Unresponsive `json:"server_unresponsive,omitempty"`
	// StreamError is the error that stopped the stream (X.jsonl) mid-run,
	// e.g. a full disk (schema 4): the stream then holds the intervals
	// up to the failure only, and this document is the complete record.
	StreamError string `json:"stream_error,omitempty"`
	// Extra holds sections other packages add (observations, remedies).
	Extra map[string]json.RawMessage `json:"extra,omitempty"`

	// RunID names the run (schema 5): every agent of a segmented run
	// carries the same one, an unsegmented run a fresh random one.
	RunID string `json:"run_id,omitempty"`
	// ConfigHash is the hash of everything that must be equal across the
	// agents of one run (workload, scale, seed, stages, rate, think time,
	// mix, connections, T values, interval, the segment sequence; not
	// the piece, the server's address or the host): "sha256:" and 16 hex
	// digits (schema 5).
	ConfigHash string `json:"config_hash,omitempty"`
	// Segment is this agent's piece of a run split over several load
	// machines (erplab run --segment); nil for a whole run.
	Segment *SegmentInfo `json:"segment,omitempty"`
	// Agent is the load generator's own CPU use during the run (schema 5).
	Agent *AgentCPU `json:"agent,omitempty"`
	// Merged describes the segments an `erplab merge` document was made
	// from; nil in an agent's own document.
	Merged *MergeInfo `json:"merged,omitempty"`
}

// SegmentInfo is an agent's piece of a segmented run (schema 5).
type SegmentInfo struct {
	// Index is the piece's number from 1 (I of --segment I/N), Count the
	// number of pieces (N).
	Index int `json:"index"`
	Count int `json:"count"`
	// From and To bound the piece as rationals ("1/3", "2/3"); Sequence
	// is the whole sequence's points ("0,1/3,2/3,1").
	From     string `json:"from"`
	To       string `json:"to"`
	Sequence string `json:"sequence"`
	// StartAt is the barrier (--start-at) the agent waited for; zero
	// when none was given.
	StartAt time.Time `json:"start_at,omitzero"`
	// ClockOffsetMs is the agent's clock against the server's
	// (server - local, from the round trip with the shortest time), and
	// ClockRTTMs that round trip.
	ClockOffsetMs float64 `json:"clock_offset_ms"`
	ClockRTTMs    float64 `json:"clock_rtt_ms"`
	// Host is the agent's host name.
	Host string `json:"host,omitempty"`
	// Incomplete lists why the piece does not hold its full share of the
	// run (a late start, a restart, a lost server, an interrupt, an
	// abort); empty when it ran its share. `erplab merge` refuses an
	// incomplete piece unless --allow-partial.
	Incomplete []string `json:"incomplete,omitempty"`
	// Restart is the attempt's number K (>= 2) when an agent restarted
	// for the same run and segment wrote this <stem>-restart-K.json
	// beside an earlier attempt's file; 0 for a first attempt.
	Restart int `json:"restart,omitempty"`
}

// Label is "I/N".
func (s *SegmentInfo) Label() string { return fmt.Sprintf("%d/%d", s.Index, s.Count) }

// AgentCPU is the CPU use of the erplab process that generated the load
// (schema 5): what tells a saturated load generator from a slow server.
type AgentCPU struct {
	// CPUSeconds is the process's user + system CPU time over the run,
	// WallSeconds the run's wall time, Cores the CPUs the process could
	// use; Utilization is CPUSeconds / (WallSeconds * Cores), in [0, 1].
	CPUSeconds  float64 `json:"cpu_seconds"`
	WallSeconds float64 `json:"wall_seconds"`
	Cores       int     `json:"cores"`
	Utilization float64 `json:"utilization"`
	// PerInterval is the utilization in each interval of the series, in
	// order (the same share of the cores).
	PerInterval []float64 `json:"per_interval,omitempty"`
	// Saturated is set when the agent's CPU was near its cores' capacity
	// (Utilization >= 0.85, or a fifth of the intervals at 0.95 or more):
	// its latencies may be the generator's, not the server's.
	Saturated bool `json:"saturated"`
}

// MergeInfo describes the pieces a merged document was made from
// (schema 5).
type MergeInfo struct {
	// Count is the number of pieces of the run (N); Segments the pieces
	// merged, in sequence order.
	Count    int             `json:"count"`
	Segments []MergedSegment `json:"segments"`
	// Partial is set when the document was written with --allow-partial
	// from an incomplete set: Missing lists the pieces that were not
	// there, and the segments' own Incomplete reasons stay in Segments.
	Partial bool     `json:"partial,omitempty"`
	Missing []string `json:"missing,omitempty"`
	// Notes say what the merge chose (e.g. which attempt of a restarted
	// segment it used, --allow-partial).
	Notes []string `json:"notes,omitempty"`
}

// MergedSegment is one piece of a merged run.
type MergedSegment struct {
	SegmentInfo
	File   string    `json:"file,omitempty"`
	Status Status    `json:"status"`
	Agent  *AgentCPU `json:"agent,omitempty"`
	// Extra holds the segment's own sections of extra, those that were
	// not the same in every segment (its machine's stress, its view of
	// the server's observations, profile and catalog, a section the
	// merge does not know); see the "Merge" section of the package doc.
	Extra map[string]json.RawMessage `json:"extra,omitempty"`
	// HostFacts is the segment's environment.host (its machine: host
	// name, kernel, CPUs, memory, THP) when the segments' are not all
	// equal (the merged environment is the first segment's).
	HostFacts json.RawMessage `json:"host_facts,omitempty"`
}

// Unresponsive is one span of a run during which the server answered
// nothing, neither to the operations in flight nor to the engine's probe,
// for 5 s or more (a frozen or stopped server, a dead network path).
// Times in seconds since the start of the run.
type Unresponsive struct {
	// FromS is the last answer before the span; ToS the first answer
	// after it, or the end of the run when UntilEnd.
	FromS float64 `json:"from_s"`
	ToS   float64 `json:"to_s"`
	// UntilEnd: no answer came before the run ended; the operations
	// still waiting were cut short (operations[].cut_short).
	UntilEnd bool `json:"until_end,omitempty"`
	// MaxWaiting is the largest number of operations in flight during
	// the span.
	MaxWaiting int64 `json:"max_waiting"`
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
	// ErrorExamples is the first server error message seen per SQLSTATE,
	// warm-up included (at most 512 bytes; absent before erplab kept it),
	// e.g. "53100": "could not extend file \"pg_tblspc/16385/PG_15_202209061/5/t3_16389\": No space left on device".
	ErrorExamples map[string]string `json:"error_examples,omitempty"`
	// WarmupCount and WarmupErrors count executions started during warm-up
	// (not scored).
	WarmupCount  int64 `json:"warmup_count"`
	WarmupErrors int64 `json:"warmup_errors"`
	// Histogram is the response-time HdrHistogram in µs, in the
	// HdrHistogram V2 compressed encoding, base64 (hdrhistogram-go Encode),
	// so later tools can merge or re-query it.
	Histogram string `json:"histogram_us"`
	// PoolWaitHistogram, DBHistogram and LagHistogram are the
	// histograms behind PoolWait, DB and Lag, encoded as Histogram
	// (schema 5; absent before, and LagHistogram in the closed model).
	PoolWaitHistogram string `json:"pool_wait_histogram_us,omitempty"`
	DBHistogram       string `json:"db_histogram_us,omitempty"`
	LagHistogram      string `json:"lag_histogram_us,omitempty"`
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
	// CutShort counts the executions still running when the run ended
	// (after the graceful stop, or at an interrupt); nil when there were
	// none.
	CutShort *CutShort `json:"cut_short,omitempty"`
}

// CutShort describes the executions of one operation that the end of the
// run cut short. Those whose elapsed time (from the start, or the
// scheduled start in the open model) already exceeded 4T could only have
// ended frustrated: they are scored frustrated (in Zones and the APDEX,
// not in Count or the histograms), so a saturated pool cannot hide its
// longest waits. The others could still have ended in any zone and are
// not scored. Elapsed times in ms.
type CutShort struct {
	// Frustrated counts the scored ones (elapsed > 4T); FrustratedMaxMs
	// is the longest elapsed time among them.
	Frustrated      int64   `json:"frustrated"`
	FrustratedMaxMs float64 `json:"frustrated_max_elapsed_ms,omitempty"`
	// NotScored counts the others (elapsed <= 4T, or started in the
	// warm-up); NotScoredMaxMs is the longest elapsed time among them.
	NotScored      int64   `json:"not_scored"`
	NotScoredMaxMs float64 `json:"not_scored_max_elapsed_ms,omitempty"`
}

// Total is Frustrated + NotScored (nil-safe).
func (c *CutShort) Total() int64 {
	if c == nil {
		return 0
	}
	return c.Frustrated + c.NotScored
}

// Scored is the number of cut-short executions in the APDEX zones
// (Frustrated; nil-safe).
func (c *CutShort) Scored() int64 {
	if c == nil {
		return 0
	}
	return c.Frustrated
}

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
	// Zones are the operation's APDEX zone counts in the interval (errors
	// and skipped arrivals frustrated); Histogram its response-time
	// HdrHistogram of successful executions in µs, encoded as
	// OpResult.Histogram. Summed and merged over the intervals they give
	// the operation's OpResult.Zones and OpResult.Histogram exactly.
	// Absent in files of schema 1.
	Zones     apdex.Counts `json:"zones,omitzero"`
	Histogram string       `json:"histogram_us,omitempty"`
	// ErrorsBySQLState counts the interval's failed executions by
	// SQLSTATE; Retries and Retried as in OpResult (schema 2).
	ErrorsBySQLState map[string]int64 `json:"errors_by_sqlstate,omitempty"`
	Retries          int64            `json:"retries,omitempty"`
	Retried          int64            `json:"retried,omitempty"`
	// CutShort counts the executions cut short by the end of the run and
	// scored frustrated (CutShort.Frustrated), in the interval in which
	// the run ended (schema 3); they are in Zones, not in Count.
	CutShort int64 `json:"cut_short,omitempty"`
}

// Interval is one point of the time series.
type Interval struct {
	// T is the end of the interval in seconds since the run started.
	T float64 `json:"t"`
	// SpanS marks a coarse point of a thinned series (schema 6): the
	// seconds it covers, several intervals folded into one (Fold; a
	// soak keeps full resolution only for its recent horizon and the
	// minutes before a warning). Absent on a point of one --interval.
	SpanS float64 `json:"span_s,omitempty"`
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

// Integral is the integral APDEX over the operations' scores, weighted by
// priority (see apdex.Integral). ok is false when no operation has samples.
func Integral(results []OpResult) (value float64, ok bool) {
	ws := make([]apdex.Weighted, 0, len(results))
	for _, r := range results {
		ws = append(ws, apdex.Weighted{Score: r.Apdex, Priority: r.Priority})
	}
	return apdex.Integral(ws)
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

// Summarize is the latency summary (ms) of a histogram of microseconds;
// the zero Latency for an empty one.
func Summarize(h *hdrhistogram.Histogram) Latency {
	if h.TotalCount() == 0 {
		return Latency{}
	}
	q := h.ValueAtPercentilesSlice([]float64{50, 95, 99})
	return Latency{Mean: h.Mean() / 1000, P50: ms(q[0]), P95: ms(q[1]), P99: ms(q[2]), Max: ms(h.Max()), StdDev: h.StdDev() / 1000}
}

func ms(us int64) float64 { return float64(us) / 1000 }
