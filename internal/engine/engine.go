// Package engine drives a load test. In the closed model (the default)
// virtual users (VUs) follow a staged profile, each repeatedly picks a key
// operation from its role's mix, borrows a database connection from a pool
// for the length of that one operation (like a call into a 1C application
// server), runs it, returns the connection and thinks. Time waiting for a
// connection and time in the database are measured apart and handed to a
// record.Recorder.
//
// In the open model (Config.Rate, like pgbench --rate and k6's
// ramping-arrival-rate) operations arrive at a rate, as a Poisson process,
// whatever the server does; the VUs are the workers (pgbench -c clients)
// that take the arrivals in order, and latency is measured from each
// arrival's scheduled start, so a stalled server shows in the percentiles
// instead of silently slowing the load down (coordinated omission).
//
// Each load model is an executor (executor.go), chosen once by Run: the
// closed model (closed.go) and the open model (open.go, with pgbench's
// catch-up under a latency limit in catchup.go). What they share is the
// run: the controller that starts and stops the VUs the stages ask for,
// ticks the intervals, judges the server and ends the run (control.go),
// one key operation on the pool, recorded (operation.go), the roles'
// mixes (mix.go), the server's health (health.go), segment shares
// (segment.go) and the statement tracer (trace.go).
package engine

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/erplab/erplab/internal/exitcode"
	"github.com/erplab/erplab/internal/opmap"
	"github.com/erplab/erplab/internal/record"
	"github.com/erplab/erplab/internal/results"
	"github.com/erplab/erplab/internal/workload"
)

// Client-side error codes recorded where the server sent no SQLSTATE. They
// reuse PostgreSQL's codes of the same meaning (Appendix A, "PostgreSQL
// Error Codes").
const (
	// CodeConnectionFailure: the connection was lost or could not be made.
	CodeConnectionFailure = "08006"
	// CodeClient: any other error raised on the client side.
	CodeClient = "client"
)

// Config describes one load test.
type Config struct {
	Workload workload.Workload
	// Roles of the virtual users (the workload's unless --mix overrode
	// them).
	Roles []workload.Role
	// Stages is the VU profile; its total length is the run length (with
	// TxPerVU, an upper bound of it). In the open model (Rate) the VUs are
	// the workers that run the arrivals.
	Stages []Stage
	// Warmup: operations started (open model: scheduled) in the first
	// Warmup of the run are recorded apart and not scored.
	Warmup time.Duration
	// Think is the think time between operations of one VU (closed model
	// only; the open model's pace is its arrival rate).
	Think ThinkTime
	// Connections is the pool size M; 0 gives every VU its own connection
	// for its whole life (no pool wait).
	Connections int
	// MaxErrors stops the run once this many operations have failed
	// (0 = never).
	MaxErrors int64
	// Stop, when set, is asked at every tick whether the run must end
	// now (run --soak --stop-on-collapse): an error ends it as aborted,
	// Run's error wrapping ErrAborted and it (its exit code with it).
	Stop func() error
	// Seed makes the VUs' random choices, and the open model's arrival
	// times, repeatable.
	Seed uint64
	// GracefulStop is how long VUs may finish their current operation at
	// the end of the run before it is cancelled. A cancelled (cut-short)
	// operation that has run longer than 4T is scored frustrated, the
	// others are only counted (record.Recorder.RecordCutShort,
	// results.OpResult.CutShort).
	GracefulStop time.Duration
	// ServerGone (--server-gone-after, default DefaultServerGone = 30 s):
	// the run is aborted when every operation has failed with a connection
	// error for this long (ErrServerGone; refusals of a server shutting
	// down count), or when the server has answered nothing (not even the
	// probe) for this long while operations were in flight
	// (ErrNotAnswering). Refusals with SQLSTATE 57P03 ("starting up", "in
	// recovery": see ComingBack) mean the server is coming back and do
	// not count; a run that ends in them is Outcome.LostAtEnd.
	ServerGone time.Duration
	// Health, when set, receives the server's state on every tick (for a
	// progress line: not answering, starting up, unreachable).
	Health *Health
	// OnInterval receives every closed interval of the time series (from
	// the controller goroutine), e.g. to stream it to disk.
	OnInterval func(results.Interval)
	// Tick is how often the controller adjusts VUs and closes intervals
	// (default 100 ms).
	Tick time.Duration

	// Rate switches to the open model: the arrival-rate profile (see
	// RateStage; ConstantRate for pgbench's -R). Arrivals are a Poisson
	// process at the current rate (seeded from Seed), scheduled from the
	// start of the run up to its end (the end of Stages; the last rate
	// stage's rate holds until then, a longer profile is cut there). The
	// VUs of Stages are the workers: each free VU picks its key operation
	// from its role's mix, takes the next arrival of one shared schedule,
	// waits for its scheduled time when that lies ahead, and runs it; there
	// is no think time (after a failed connect a VU still pauses 1 s, while
	// the arrivals wait). Response time runs from the scheduled start, and
	// the schedule lag (actual start - scheduled) is recorded apart. Due
	// arrivals that no VU has started yet are the backlog (a gauge in
	// every interval); those never started by the end of the run are
	// reported in Outcome.BacklogLeft. Nil keeps the closed model.
	Rate []RateStage
	// LatencyLimit (pgbench --latency-limit), 0 = none: successful
	// executions whose response time exceeds it are counted as late; in
	// the open model an arrival whose lag already exceeds it when a VU
	// takes it is skipped, not run, and counted as skipped for the
	// operation the VU picked for it. A VU catches up as pgbench does:
	// it reads the clock once and skips every arrival later than the
	// limit by that reading, taking them from the schedule skipBatch (64)
	// at a time under one lock and counting them in the recorder per
	// batch, then takes the next arrival. A skipped arrival is a user who
	// got no service: it counts in that operation's APDEX as frustrated, like
	// a failed execution, but not in its Count or latency histograms
	// (record.Recorder.RecordSkipped). Arrivals left in the backlog at the
	// end (Outcome.BacklogLeft) had no operation picked yet and are in no
	// APDEX.
	LatencyLimit time.Duration
	// TxPerVU (pgbench -t), 0 = no limit: each VU stops after that many
	// operations (errors and skipped arrivals count; operations cut short
	// at the end do not). Stages still give the VU count and bound the
	// run's time; VUs stopped by that bound or by a ramp-down before their
	// count are in Outcome.Unfinished. A VU that has finished is not
	// replaced.
	//
	// A VU also stops on its own, whatever TxPerVU, after an operation
	// whose Execute error wraps workload.ErrStopVU (the failure is
	// recorded as usual; the VU is counted in Outcome.AbortedVUs, not in
	// Unfinished, and not replaced). The run ends early, as completed,
	// once every VU it runs has stopped on its own (TxPerVU done or
	// ErrStopVU) and the rest of the profile asks for no more VUs than
	// it has (a VU stopped by a ramp-down is not "on its own": a later
	// ramp-up starts new VUs).
	TxPerVU int
	// OnSample, when set, receives every recorded execution (not the
	// skipped arrivals), from the VU's goroutine right after recording,
	// e.g. for a per-transaction log like pgbench --log. It must be safe
	// for concurrent use and cheap.
	OnSample func(record.Sample)
	// OnSkip, when set, receives every arrival skipped under
	// LatencyLimit (open model), warm-up included, in each worker's
	// schedule order, from the worker's goroutine right after the recorder
	// counted its batch (see LatencyLimit), e.g. for pgbench's "skipped"
	// log lines and the skipped count of its progress lines.
	// It must be safe for concurrent use and cheap (a Skip is passed by
	// value: the skip path allocates nothing).
	OnSkip func(Skip)
	// Ops, when set, is told which key operation runs on which backend:
	// Begin with the connection's backend PID before each Execute, End
	// after it (package opmap; the samplers attribute wait events and
	// statements through it). With Ops, each virtual user's context also
	// carries what Tracer needs to count the statement texts each
	// operation sends into Ops.Texts().
	Ops *opmap.Map
	// RateFromFirstArrival starts the open model's schedule when the
	// first worker asks for an arrival instead of at the run's start, as
	// pgbench's schedule starts with its threads: the workers' start-up
	// is not schedule lag.
	RateFromFirstArrival bool
	// Segment, when set, runs this agent's share of the run (see
	// Segment): Stages, Rate and Connections are the whole run's; at
	// every moment the engine runs Segment.Scale of the VUs the stages
	// ask for, the arrivals at Segment.Length times the rate from a seed
	// of its own (Segment.Seed), and its VUs carry run-wide ids
	// (Segment.Global + 1) that seed their random sources and pick their
	// roles, so that the pieces together run the VUs one machine would
	// have started. nil is the whole run.
	Segment *Segment
}

// Skip is one arrival of the open model skipped under
// Config.LatencyLimit (Config.OnSkip).
type Skip struct {
	// VU is the run-wide id (from 1) of the worker that took the arrival
	// (workload.VU.ID).
	VU int
	// Op is the key operation the worker picked for it.
	Op int
	// Scheduled is the arrival's scheduled start; At is the clock it was
	// judged by (later than Scheduled by more than the limit). A run of
	// skips that catches up with the schedule is judged by one reading
	// of the clock, as pgbench does, so they share At.
	Scheduled, At time.Time
}

// RetryCounter is implemented by workloads whose Execute retries an
// operation itself (like pgbench --max-tries after a serialization failure
// or a deadlock): after each Execute the engine asks how many retries that
// execution took on vu and records them (record.Sample.Retries, summed per
// key operation in results.OpResult.Retries).
type RetryCounter interface {
	LastRetries(vu *workload.VU) int
}

// Outcome says how the run ended.
type Outcome struct {
	// Status is completed, interrupted or aborted (with its reason).
	Status results.Status
	// Elapsed is the wall time from start to the last VU's exit.
	Elapsed time.Duration
	// Cancelled counts operations cut short by the end of the run or by
	// an interrupt; the results' OpResult.CutShort splits them into those
	// scored frustrated (past 4T) and those not scored.
	Cancelled int64
	// MaxVUs is the largest number of VUs that ran at once.
	MaxVUs int
	// Arrivals (open model) counts the arrivals scheduled from the start
	// to the end of the run (or to the moment the VUs stopped, when that
	// came earlier): each was executed (warm-up included), skipped, cut
	// short (Cancelled) or left in the backlog (BacklogLeft).
	Arrivals int64
	// BacklogLeft (open model) counts the arrivals that were due by the
	// end of the run and never started; also given to the recorder
	// (results.Totals.BacklogLeft).
	BacklogLeft int64
	// Unfinished (TxPerVU) counts the VUs that stopped before running
	// their TxPerVU operations, the aborted ones excepted.
	Unfinished int
	// AbortedVUs counts the VUs that stopped themselves for the rest of
	// the run after an operation failed with workload.ErrStopVU (like
	// pgbench's aborted clients). The run's Status is unaffected
	// ("completed" when it ran to its end or every VU stopped); a caller
	// reports them, e.g. as pgbench's "the run was aborted". Also given to
	// the recorder (results.Totals.AbortedVUs).
	AbortedVUs int
	// Unresponsive lists the spans during which the server answered
	// nothing while operations were in flight, for NotAnsweringAfter or
	// more (results.Document.ServerUnresponsive); the last one has
	// UntilEnd set when no answer came before the end of the run.
	Unresponsive []results.Unresponsive
	// StuckClosed counts the operations still stuck 2 s after they were
	// cancelled at the end (a server that does not answer, or a workload
	// waiting on it with a context of its own): their connections were
	// closed under them, and they count in Cancelled.
	StuckClosed int
	// LostAtEnd is set when a run that was not aborted nor interrupted
	// ended with every operation failing for want of a server for
	// LostAtEndAfter or more: lost less than ServerGone before the end,
	// or a server that kept saying it was coming back (starting up, in
	// recovery), which ServerGone does not count. Nothing measured in
	// that time says how the server performs: a caller does not call
	// such a run completed (ErrServerGone).
	LostAtEnd *Lost
}

// Lost is how a run ended without its server (Outcome.LostAtEnd).
type Lost struct {
	// Condition is the server's state then: ServerUnreachable,
	// ServerShuttingDown or ServerComingBack.
	Condition ServerCondition
	// FromS is the last successful operation (or the start), seconds
	// since the start.
	FromS float64
}

// NotAnsweringAtEnd reports whether the server was not answering when the
// run ended (the last Unresponsive span lasts until the end).
func (o Outcome) NotAnsweringAtEnd() bool {
	return len(o.Unresponsive) > 0 && o.Unresponsive[len(o.Unresponsive)-1].UntilEnd
}

// ErrAborted is wrapped by Run's error when the run stopped early on its
// own (max errors reached, server gone, server not answering).
var ErrAborted = errors.New("run aborted")

// ErrServerGone is wrapped, with ErrAborted, by Run's error when every
// operation failed with a connection error (the server unreachable or
// shutting down) for Config.ServerGone; callers wrap it too when the run
// ended with the server lost (Outcome.LostAtEnd). It carries
// exitcode.ServerNotAnswering: a server fault, as not answering.
var ErrServerGone = exitcode.New(exitcode.ServerNotAnswering, "lost the server")

// ErrNotAnswering is wrapped, with ErrAborted, by Run's error when the
// server answered nothing for Config.ServerGone while operations were in
// flight (see ServerNotAnswering); callers wrap it too when the run ended
// with the server not answering (Outcome.NotAnsweringAtEnd). It carries
// exitcode.ServerNotAnswering.
var ErrNotAnswering = exitcode.New(exitcode.ServerNotAnswering, "the server stopped answering")

// Run executes the load profile against pool until the stages end (or
// every VU has stopped on its own: cfg.TxPerVU done, workload.ErrStopVU)
// or ctx is cancelled (an interrupt: Outcome.Status "interrupted", nil
// error). The pool must allow at least cfg.Connections connections, or
// the maximum VU count when cfg.Connections is 0. rec must have been
// created with the workload's operations, in order; Run sets its latency
// limit from cfg.LatencyLimit, its aborted VUs and, in the open model, its
// backlog gauges and backlog left. Errors: a bad role mix, a negative
// LatencyLimit or TxPerVU, a bad rate profile or a rate without VUs
// (before anything runs), or ErrAborted wrapped.
func Run(ctx context.Context, pool *pgxpool.Pool, cfg Config, rec *record.Recorder) (Outcome, error) {
	cfg, err := withDefaults(cfg)
	if err != nil {
		return Outcome{}, err
	}
	mixes, err := buildMixes(cfg.Workload.Operations(), cfg.Roles)
	if err != nil {
		return Outcome{}, err
	}
	e := &run{cfg: cfg, pool: pool, rec: rec, mixes: mixes, wake: make(chan struct{}, 1)}
	x, err := e.executor()
	if err != nil {
		return Outcome{}, err
	}
	e.retries, _ = cfg.Workload.(RetryCounter)
	if cfg.LatencyLimit > 0 {
		rec.SetLatencyLimit(cfg.LatencyLimit)
	}
	e.lastOK.Store(rec.Start().UnixNano())
	return e.loop(ctx, x)
}

// withDefaults fills in cfg's zero durations and checks the counts that
// must not be negative.
func withDefaults(cfg Config) (Config, error) {
	if cfg.Tick <= 0 {
		cfg.Tick = 100 * time.Millisecond
	}
	if cfg.ServerGone <= 0 {
		cfg.ServerGone = DefaultServerGone
	}
	if cfg.GracefulStop <= 0 {
		cfg.GracefulStop = 10 * time.Second
	}
	if cfg.LatencyLimit < 0 {
		return cfg, fmt.Errorf("latency limit must not be negative, got %s", cfg.LatencyLimit)
	}
	if cfg.TxPerVU < 0 {
		return cfg, fmt.Errorf("transactions per VU must not be negative, got %d", cfg.TxPerVU)
	}
	return cfg, nil
}

// run is what every executor shares: the configuration, the pool, the
// recorder, the roles' mixes, the server's watch and the counters the
// controller reads; the executors embed it.
type run struct {
	cfg     Config
	pool    *pgxpool.Pool
	rec     *record.Recorder
	mixes   []*mix
	retries RetryCounter // nil unless the workload reports retries
	watch   watch        // the server's answers, in-flight connections, probe

	waiters   atomic.Int64
	active    atomic.Int64
	inflight  atomic.Int64 // VUs inside an operation (waiting or executing)
	errors    atomic.Int64
	cancelled atomic.Int64
	lastOK    atomic.Int64   // unix ns of the last successful operation
	failSince atomic.Int64   // unix ns of the first failure for want of a server since the last success (0: none)
	lastErr   atomic.Value   // string: last connection error text
	unfinish  atomic.Int64   // VUs that stopped short of TxPerVU, not aborted
	aborted   atomic.Int64   // VUs stopped by workload.ErrStopVU
	wake      chan struct{}  // a VU ended: the controller looks
	live      sync.WaitGroup // VUs started and not yet ended

	assigned []float64 // VUs assigned per role (smooth weighted round robin)
	roleN    int       // ids roleFor has seen (a segment skips others' ids)
	lastRole *mix
}
