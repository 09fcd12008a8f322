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
package engine

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
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
		return Outcome{}, fmt.Errorf("latency limit must not be negative, got %s", cfg.LatencyLimit)
	}
	if cfg.TxPerVU < 0 {
		return Outcome{}, fmt.Errorf("transactions per VU must not be negative, got %d", cfg.TxPerVU)
	}
	mixes, err := buildMixes(cfg.Workload.Operations(), cfg.Roles)
	if err != nil {
		return Outcome{}, err
	}
	e := &run{cfg: cfg, pool: pool, rec: rec, mixes: mixes, wake: make(chan struct{}, 1)}
	if cfg.Rate != nil {
		if err := ValidateRate(cfg.Rate); err != nil {
			return Outcome{}, err
		}
		if cfg.Segment.Scale(MaxTarget(cfg.Stages)) < 1 {
			return Outcome{}, errors.New("the open model (a rate) needs at least one VU to run the arrivals")
		}
		rate := cfg.Rate
		if !cfg.Segment.Whole() {
			rate = make([]RateStage, len(cfg.Rate))
			for i, r := range cfg.Rate {
				rate[i] = RateStage{Duration: r.Duration, Rate: r.Rate * cfg.Segment.Length()}
			}
		}
		e.sched = newSchedule(rate, rec.Start(), TotalDuration(cfg.Stages), cfg.Segment.Seed(cfg.Seed))
		e.sched.lazy = cfg.RateFromFirstArrival
	}
	e.retries, _ = cfg.Workload.(RetryCounter)
	if cfg.LatencyLimit > 0 {
		rec.SetLatencyLimit(cfg.LatencyLimit)
	}
	e.lastOK.Store(rec.Start().UnixNano())
	return e.loop(ctx)
}

type mix struct {
	role string
	ops  []int
	cum  []float64 // cumulative weights
}

func (m *mix) pick(r *rand.Rand) int {
	if len(m.ops) == 1 {
		// one operation: no draw (pgbench's chooseScript with one script)
		return m.ops[0]
	}
	x := r.Float64() * m.cum[len(m.cum)-1]
	for i, c := range m.cum {
		if x < c {
			return m.ops[i]
		}
	}
	return m.ops[len(m.ops)-1]
}

func buildMixes(ops []workload.Operation, roles []workload.Role) ([]*mix, error) {
	idx := map[string]int{}
	for i, op := range ops {
		idx[op.Name] = i
	}
	var out []*mix
	for _, r := range roles {
		m := &mix{role: r.Name}
		total := 0.0
		// iterate in operation order so the mix is deterministic
		for i, op := range ops {
			w, ok := r.Mix[op.Name]
			if !ok || w <= 0 {
				continue
			}
			total += w
			m.ops = append(m.ops, i)
			m.cum = append(m.cum, total)
		}
		for name := range r.Mix {
			if _, ok := idx[name]; !ok {
				return nil, fmt.Errorf("role %s: unknown operation %q", r.Name, name)
			}
		}
		if total <= 0 {
			return nil, fmt.Errorf("role %s: no operation with positive weight", r.Name)
		}
		out = append(out, m)
	}
	if len(out) == 0 {
		return nil, errors.New("no roles to run")
	}
	return out, nil
}

type vuHandle struct {
	stop chan struct{}
	done chan struct{}
	// self is set when the VU stopped on its own (TxPerVU done or
	// workload.ErrStopVU), before it exits.
	self atomic.Bool
}

// vuEnd is why a VU's loop returned.
type vuEnd int

const (
	endStopped vuEnd = iota // told to stop, or the run is ending
	endDone                 // ran its TxPerVU operations
	endAborted              // an operation failed with workload.ErrStopVU
)

// step is what a VU does after an operation.
type step int

const (
	stepNext    step = iota // go on
	stepEnding              // the run is ending: the operation was cut short
	stepAborted             // the operation failed with workload.ErrStopVU: stop the VU
)

type run struct {
	cfg     Config
	pool    *pgxpool.Pool
	rec     *record.Recorder
	mixes   []*mix
	sched   *schedule    // open model; nil in the closed model
	retries RetryCounter // nil unless the workload reports retries
	watch   watch        // the server's answers, in-flight connections, probe

	waiters   atomic.Int64
	active    atomic.Int64
	inflight  atomic.Int64 // VUs inside an operation (waiting or executing)
	errors    atomic.Int64
	cancelled atomic.Int64
	lastOK    atomic.Int64  // unix ns of the last successful operation
	failSince atomic.Int64  // unix ns of the first failure for want of a server since the last success (0: none)
	lastErr   atomic.Value  // string: last connection error text
	unfinish  atomic.Int64  // VUs that stopped short of TxPerVU, not aborted
	aborted   atomic.Int64  // VUs stopped by workload.ErrStopVU
	wake      chan struct{} // a VU exited: the controller looks

	assigned []float64 // VUs assigned per role (smooth weighted round robin)
	roleN    int       // ids roleFor has seen (a segment skips others' ids)
	lastRole *mix
}

// roleOf is the role of the VU of run-wide id (ids ascending): roleFor
// replayed over every id up to it, those of other segments included, so
// that a segment's VUs get the roles one machine would have given them.
func (e *run) roleOf(id int) *mix {
	for e.roleN < id {
		e.roleN++
		e.lastRole = e.roleFor(e.roleN)
	}
	return e.lastRole
}

// roleFor assigns the next VU's role so that the counts follow the roles'
// shares as closely as possible at every VU count (deficit round robin).
func (e *run) roleFor(n int) *mix {
	if e.assigned == nil {
		e.assigned = make([]float64, len(e.mixes))
	}
	total := 0.0
	for _, r := range e.cfg.Roles {
		total += r.Share
	}
	best, bestDef := 0, -1e18
	for i, r := range e.cfg.Roles {
		def := r.Share/total*float64(n) - e.assigned[i]
		if def > bestDef {
			best, bestDef = i, def
		}
	}
	e.assigned[best]++
	return e.mixes[best]
}

func (e *run) loop(ctx context.Context) (Outcome, error) {
	start := e.rec.Start()
	runCtx, cancelOps := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelOps()
	var (
		vus    []*vuHandle
		wg     sync.WaitGroup
		nextID = 1
		out    = Outcome{Status: results.StatusCompleted}
		abort  error
	)
	stopLast := func() {
		h := vus[len(vus)-1]
		vus = vus[:len(vus)-1]
		close(h.stop)
	}
	ticker := time.NewTicker(e.cfg.Tick)
	defer ticker.Stop()
	probeCtx, stopProbe := context.WithCancel(context.WithoutCancel(ctx))
	probeDone := make(chan struct{})
	go func() { defer close(probeDone); e.watch.probe(probeCtx, e.pool) }()
	defer func() { stopProbe(); <-probeDone }()
	// notAnswering is the server's state at the last flush when it was
	// not answering (zero Since otherwise); lastState is that state
	// whatever it was.
	var notAnswering, lastState ServerState
	// stopAt is when the VUs were told to stop: no arrival after it is
	// due.
	stopAt := start.Add(TotalDuration(e.cfg.Stages))
	backlog := func(now time.Time) {
		if e.sched != nil {
			e.rec.SetBacklog(e.sched.gauge(now))
		}
	}
	flush := func(now time.Time) {
		e.rec.SetGauges(int(e.active.Load()), int(e.waiters.Load()), int(e.inflight.Load()))
		backlog(minTime(now, stopAt)) // no arrival is due after stopAt
		for _, iv := range e.rec.Tick(now) {
			if e.cfg.OnInterval != nil {
				e.cfg.OnInterval(iv)
			}
		}
		lastOK := time.Unix(0, e.lastOK.Load())
		msg, _ := e.lastErr.Load().(string)
		unreachable := e.errors.Load() > 0 && msg != "" && now.Sub(lastOK) > 2*e.cfg.Tick+time.Second
		st := e.watch.judge(now, start, e.inflight.Load(), lastOK, unreachable)
		e.cfg.Health.set(st)
		lastState = st
		notAnswering = ServerState{}
		if st.Condition == ServerNotAnswering {
			notAnswering = st
		}
	}
control:
	for {
		now := time.Now()
		target, done := TargetAt(e.cfg.Stages, now.Sub(start))
		if done {
			break
		}
		target = e.cfg.Segment.Scale(target)
		for len(vus) < target {
			h := &vuHandle{stop: make(chan struct{}), done: make(chan struct{})}
			vus = append(vus, h)
			id := e.cfg.Segment.Global(nextID-1) + 1
			vu := &workload.VU{
				ID:   id,
				Rand: rand.New(rand.NewPCG(e.cfg.Seed, uint64(id))),
			}
			m := e.roleOf(id)
			vu.Role = m.role
			nextID++
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer close(h.done)
				var (
					n   int
					end vuEnd
				)
				vctx := e.traceContext(runCtx)
				if e.sched != nil {
					n, end = e.openLoop(vctx, vu, m, h.stop)
				} else {
					n, end = e.vuLoop(vctx, vu, m, h.stop)
				}
				switch {
				case end == endAborted:
					e.aborted.Add(1)
				case e.cfg.TxPerVU > 0 && n < e.cfg.TxPerVU:
					e.unfinish.Add(1)
				}
				if end != endStopped {
					h.self.Store(true)
				}
				select {
				case e.wake <- struct{}{}:
				default:
				}
			}()
		}
		for len(vus) > target {
			stopLast()
		}
		if len(vus) > out.MaxVUs {
			out.MaxVUs = len(vus)
		}
		flush(now)
		if allStopped(vus) && e.cfg.Segment.Scale(maxTargetFrom(e.cfg.Stages, now.Sub(start))) <= len(vus) {
			// Every VU has stopped on its own (run its transactions,
			// pgbench -t, or aborted) and none would be started.
			stopAt = now
			break
		}
		if e.cfg.MaxErrors > 0 && e.errors.Load() >= e.cfg.MaxErrors {
			abort = fmt.Errorf("%w: %d operations failed (--max-errors %d)", ErrAborted, e.errors.Load(), e.cfg.MaxErrors)
			break
		}
		if st := notAnswering; !st.Since.IsZero() && now.Sub(st.Since) > e.cfg.ServerGone {
			abort = fmt.Errorf("%w: %w at t=%.1f s: no answer for %s with %d operations waiting", ErrAborted, ErrNotAnswering,
				st.Since.Sub(start).Seconds(), now.Sub(st.Since).Round(time.Second), st.Waiting)
			break
		}
		if last := e.lastAlive(); e.errors.Load() > 0 && now.Sub(last) > e.cfg.ServerGone {
			if msg, _ := e.lastErr.Load().(string); msg != "" {
				abort = fmt.Errorf("%w: %w: no operation succeeded for %s; last error: %s", ErrAborted, ErrServerGone, now.Sub(last).Round(time.Second), msg)
				break
			}
		}
		select {
		case <-ctx.Done():
			out.Status = results.StatusInterrupted
			cancelOps()
			break control
		case <-ticker.C:
		case <-e.wake:
		}
	}
	// Stop all VUs; let in-flight operations finish within the grace
	// period unless interrupted.
	for len(vus) > 0 {
		stopLast()
	}
	// A VU that checked its stop channel before this point started its
	// arrival before it.
	stopAt = minTime(stopAt, time.Now())
	finished := make(chan struct{})
	go func() { wg.Wait(); close(finished) }()
	grace := time.NewTimer(e.cfg.GracefulStop)
	defer grace.Stop()
	// hard fires hardStopAfter after the operations were cancelled: the
	// sockets of those still in flight are closed under them.
	hard := time.NewTimer(time.Hour)
	hard.Stop()
	defer hard.Stop()
	cancelled := false
	cancel := func() {
		cancelOps()
		if !cancelled {
			cancelled = true
			hard.Reset(hardStopAfter)
		}
	}
	if abort != nil || out.Status == results.StatusInterrupted {
		cancel()
	}
	interrupt := ctx.Done() // nil once seen
wait:
	for {
		select {
		case <-finished:
			break wait
		case <-grace.C:
			cancel()
		case <-hard.C:
			out.StuckClosed += e.watch.closeInFlight()
		case <-interrupt:
			if out.Status == results.StatusCompleted {
				out.Status = results.StatusInterrupted
			}
			cancel()
			interrupt = nil
		case now := <-ticker.C:
			// Intervals go on closing in the graceful stop, so what
			// completes in it lies in the interval it completed in.
			flush(now)
		}
	}
	end := time.Now()
	if e.sched != nil {
		out.Arrivals, out.BacklogLeft = e.sched.final(stopAt)
		e.rec.SetBacklog(out.BacklogLeft, out.BacklogLeft)
		e.rec.SetBacklogLeft(out.BacklogLeft)
	}
	out.Unfinished = int(e.unfinish.Load())
	out.AbortedVUs = int(e.aborted.Load())
	e.rec.SetAbortedVUs(out.AbortedVUs)
	// Close the last, possibly partial, interval so nothing recorded is
	// left out of the series.
	e.rec.SetGauges(0, 0, 0)
	for _, iv := range e.rec.Finish(end) {
		if e.cfg.OnInterval != nil {
			e.cfg.OnInterval(iv)
		}
	}
	out.Elapsed = end.Sub(start)
	out.Cancelled = e.cancelled.Load()
	out.Unresponsive = e.watch.finish(end, start)
	if abort == nil && out.Status == results.StatusCompleted {
		out.LostAtEnd = e.lostAtEnd(end, start, lastState)
	}
	if abort != nil {
		out.Status = results.StatusAborted.Because(abortReason(abort))
		return out, abort
	}
	return out, nil
}

// lostAtEnd returns how the run ended without its server when every
// operation has failed for want of one (failSince) for LostAtEndAfter at
// end, nil otherwise; st is the server's last judged state.
func (e *run) lostAtEnd(end, start time.Time, st ServerState) *Lost {
	since := e.failSince.Load()
	if since == 0 || end.Sub(time.Unix(0, since)) < LostAtEndAfter {
		return nil
	}
	c := st.Condition
	if c != ServerShuttingDown && c != ServerComingBack {
		c = ServerUnreachable
	}
	return &Lost{Condition: c, FromS: round3(max(time.Unix(0, e.lastOK.Load()).Sub(start), 0).Seconds())}
}

// lastAlive is the last time the server answered an operation or said
// it was coming back (starting up, in recovery).
func (e *run) lastAlive() time.Time {
	last := time.Unix(0, e.lastOK.Load())
	if b := time.Unix(0, e.watch.lastBack.Load()); b.After(last) {
		return b
	}
	return last
}

// allStopped reports whether there are VUs and every one has stopped on
// its own.
func allStopped(vus []*vuHandle) bool {
	for _, h := range vus {
		if !h.self.Load() {
			return false
		}
	}
	return len(vus) > 0
}

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

func abortReason(err error) string {
	s := err.Error()
	prefix := ErrAborted.Error() + ": "
	if len(s) > len(prefix) && s[:len(prefix)] == prefix {
		return s[len(prefix):]
	}
	return s
}

// vuLoop is a VU of the closed model; it returns the number of operations
// it ran and why it stopped.
func (e *run) vuLoop(ctx context.Context, vu *workload.VU, m *mix, stop <-chan struct{}) (done int, end vuEnd) {
	e.active.Add(1)
	defer e.active.Add(-1)
	// A random first pause spreads VUs that start together, so they do
	// not march in lock step.
	if mean := e.cfg.Think.Mean(); mean > 0 {
		if !sleep(ctx, stop, time.Duration(vu.Rand.Int64N(int64(mean)+1))) {
			return 0, endStopped
		}
	}
	// own is the VU's own connection when Connections == 0.
	var own *pgxpool.Conn
	defer func() {
		if own != nil {
			own.Release()
		}
	}()
	for e.cfg.TxPerVU == 0 || done < e.cfg.TxPerVU {
		if stopped(ctx, stop) {
			return done, endStopped
		}
		var pause time.Duration
		var next step
		own, pause, next = e.operation(ctx, vu, m.pick(vu.Rand), own, time.Time{})
		switch next {
		case stepEnding:
			return done, endStopped
		case stepAborted:
			return done + 1, endAborted
		}
		done++
		if e.cfg.TxPerVU > 0 && done >= e.cfg.TxPerVU {
			return done, endDone
		}
		if pause == 0 {
			pause = e.cfg.Think.Draw(vu.Rand)
		}
		// no think time: the stop check at the top of the loop is the
		// only one needed (one select per operation instead of two)
		if pause > 0 && !sleep(ctx, stop, pause) {
			return done, endStopped
		}
	}
	return done, endDone
}

// openLoop is a worker of the open model: it picks an operation, takes
// the next arrival, waits for its scheduled time if that lies ahead, and
// runs it (or skips it under the latency limit). It returns the number of
// operations run or skipped and why it stopped.
func (e *run) openLoop(ctx context.Context, vu *workload.VU, m *mix, stop <-chan struct{}) (done int, end vuEnd) {
	e.active.Add(1)
	defer e.active.Add(-1)
	var own *pgxpool.Conn
	defer func() {
		if own != nil {
			own.Release()
		}
	}()
	limit := e.cfg.LatencyLimit
	var cu *catchUp
	if limit > 0 {
		cu = newCatchUp(len(e.cfg.Workload.Operations()), e.rec.WarmupEnd())
	}
	for e.cfg.TxPerVU == 0 || done < e.cfg.TxPerVU {
		if stopped(ctx, stop) {
			return done, endStopped
		}
		now := time.Now()
		if cu != nil {
			// Skip every arrival already later than the limit, judged by
			// this one reading of the clock (pgbench's catch-up).
			var more bool
			if done, more = e.catchUp(ctx, vu, m, stop, cu, now, done); !more {
				return done, endStopped
			}
			if e.cfg.TxPerVU > 0 && done >= e.cfg.TxPerVU {
				break
			}
		}
		op := m.pick(vu.Rand)
		a, ok := e.sched.take(now)
		if !ok {
			// No arrival is left before the end of the run.
			select {
			case <-stop:
			case <-ctx.Done():
			}
			return done, endStopped
		}
		if a.at.After(now) {
			if !waitUntil(ctx, stop, a.at) {
				e.sched.giveBack(a)
				return done, endStopped
			}
		} else if limit > 0 && now.Sub(a.at) > limit {
			// Handed back late since the catch-up (a stopped worker's):
			// too late to meet the limit even if it ran at once.
			e.skip(vu, op, a.at, now)
			done++
			continue
		}
		var pause time.Duration
		var next step
		own, pause, next = e.operation(ctx, vu, op, own, a.at)
		switch next {
		case stepEnding:
			return done, endStopped
		case stepAborted:
			return done + 1, endAborted
		}
		done++
		if pause > 0 && !sleep(ctx, stop, pause) {
			return done, endStopped
		}
	}
	return done, endDone
}

// catchUp is a worker's state for skipping arrivals in batches: the
// batch's scheduled times and operations, and its skip counts per
// operation (scored, warm-up) until they are handed to the recorder.
type catchUp struct {
	off     [skipBatch]float64 // scheduled, s since the schedule's start
	op      [skipBatch]int
	counts  []int64 // 2*op: scored, 2*op+1: warm-up
	touched []int   // operations with counts
	warmEnd time.Time
}

func newCatchUp(ops int, warmEnd time.Time) *catchUp {
	return &catchUp{counts: make([]int64, 2*ops), touched: make([]int, 0, ops), warmEnd: warmEnd}
}

// catchUp skips, as vu, every arrival later than the latency limit at
// now (those due by now - limit), skipBatch at a time: a batch is taken
// from the schedule under one lock, counted in the recorder under one
// lock per operation, and then handed to Config.OnSkip one arrival at a
// time. Each skipped arrival gets its operation from the mix, as a run
// one would. done counts the worker's operations so far (TxPerVU caps
// the skips); it returns the new count and false when the worker must
// stop (looked at between batches).
func (e *run) catchUp(ctx context.Context, vu *workload.VU, m *mix, stop <-chan struct{}, cu *catchUp, now time.Time, done int) (int, bool) {
	var skipped int64 // in this catch-up
	for {
		n := skipBatch
		if e.cfg.TxPerVU > 0 {
			n = min(n, e.cfg.TxPerVU-done)
		}
		if n <= 0 {
			return done, true
		}
		k, start := e.sched.takeLate(now, e.cfg.LatencyLimit, cu.off[:n], skipped)
		warmOff := cu.warmEnd.Sub(start).Seconds()
		for i := range k {
			op := m.pick(vu.Rand)
			cu.op[i] = op
			c := 2 * op
			if cu.off[i] < warmOff {
				c++
			}
			if cu.counts[2*op] == 0 && cu.counts[2*op+1] == 0 {
				cu.touched = append(cu.touched, op)
			}
			cu.counts[c]++
		}
		for _, op := range cu.touched {
			e.rec.RecordSkips(op, cu.counts[2*op], cu.counts[2*op+1])
			cu.counts[2*op], cu.counts[2*op+1] = 0, 0
		}
		cu.touched = cu.touched[:0]
		if e.cfg.OnSkip != nil {
			for i := range k {
				at := start.Add(time.Duration(cu.off[i] * float64(time.Second)))
				e.cfg.OnSkip(Skip{VU: vu.ID, Op: cu.op[i], Scheduled: at, At: now})
			}
		}
		done += k
		skipped += int64(k)
		if k < n {
			return done, true
		}
		if stopped(ctx, stop) {
			return done, false
		}
	}
}

// skip records an arrival scheduled at sched that vu skipped at now, as
// op, and hands it to Config.OnSkip.
func (e *run) skip(vu *workload.VU, op int, sched, now time.Time) {
	e.rec.RecordSkipped(op, sched)
	if e.cfg.OnSkip != nil {
		e.cfg.OnSkip(Skip{VU: vu.ID, Op: op, Scheduled: sched, At: now})
	}
}

// skipBatch is how many arrivals a worker skips in a row (one batch of
// its catch-up) between two looks at its stop channel.
const skipBatch = 64

// stopped reports, without waiting, whether the VU must stop.
func stopped(ctx context.Context, stop <-chan struct{}) bool {
	select {
	case <-stop:
		return true
	case <-ctx.Done():
		return true
	default:
		return false
	}
}

// operation runs one key operation for vu and records it; sched is the
// arrival's scheduled start in the open model, zero in the closed model.
// It returns the VU's own connection (Connections == 0; nil when it was
// lost), a pause to take instead of the think time (after a failed
// connect, so that VUs do not spin on a dead server), and what to do
// next: stepEnding when the run is ending (the operation was cut short
// and counted as cancelled), stepAborted when Execute's error wraps
// workload.ErrStopVU (the failure is recorded; the VU must stop).
func (e *run) operation(ctx context.Context, vu *workload.VU, op int, own *pgxpool.Conn, sched time.Time) (*pgxpool.Conn, time.Duration, step) {
	e.inflight.Add(1)
	defer e.inflight.Add(-1)
	start := time.Now()
	began := start // kept for a cut-short operation's elapsed time
	t0 := start    // start of the execution proper; t0 - start is the pool wait
	conn, wait := own, time.Duration(0)
	if conn == nil {
		var err error
		e.waiters.Add(1)
		conn, err = e.pool.Acquire(ctx)
		e.waiters.Add(-1)
		t0 = time.Now()
		wait = t0.Sub(start)
		if e.cfg.Connections == 0 {
			// A VU's own connection is its log-in, not a queue: the
			// operation starts afresh (in the open model the log-in
			// counts in the schedule lag).
			wait, start = 0, t0
		}
		if err != nil {
			if ctx.Err() != nil {
				e.cutShort(op, began, sched)
				return nil, 0, stepEnding
			}
			e.fail(op, start, sched, wait, 0, 0, err)
			return nil, time.Second, stepNext
		}
	}
	keep := func(c *pgxpool.Conn) *pgxpool.Conn {
		if e.cfg.Connections == 0 {
			return c
		}
		c.Release()
		return nil
	}
	pc := conn.Conn().PgConn()
	pid := pc.PID()
	e.watch.enter(pc)
	e.cfg.Ops.Begin(pid, op)
	var vt *vuTrace
	if e.cfg.Ops != nil {
		if vt = traceOf(ctx); vt != nil {
			vt.op = op
		}
	}
	vu.Scheduled = sched
	err := e.cfg.Workload.Execute(ctx, conn.Conn(), vu, op)
	if vt != nil {
		vt.op = opmap.Idle
	}
	e.cfg.Ops.End(pid)
	e.watch.leave(pc)
	db := time.Since(t0)
	retries := 0
	if e.retries != nil {
		retries = e.retries.LastRetries(vu)
	}
	switch {
	case ctx.Err() != nil:
		// The run is ending: the operation was cut short, not failed.
		e.cutShort(op, began, sched)
		conn.Conn().Close(context.Background()) //nolint:errcheck // discarded either way
		conn.Release()
		return nil, 0, stepEnding
	case err != nil:
		e.fail(op, start, sched, wait, db, retries, err)
		next := stepNext
		if errors.Is(err, workload.ErrStopVU) {
			next = stepAborted
		}
		if !healthy(ctx, conn.Conn()) {
			conn.Conn().Close(ctx) //nolint:errcheck // the pool drops closed connections
			conn.Release()
			return nil, 0, next
		}
		return keep(conn), 0, next
	default:
		now := time.Now()
		e.lastOK.Store(now.UnixNano())
		e.failSince.Store(0)
		e.watch.event(now)
		e.record(record.Sample{Op: op, Start: start, Scheduled: sched, Wait: wait, DB: db, Retries: retries})
		return keep(conn), 0, stepNext
	}
}

// healthy reports whether conn can serve the next operation: open, and
// outside any transaction (a failed transaction is rolled back here).
func healthy(ctx context.Context, conn *pgx.Conn) bool {
	if conn.IsClosed() {
		return false
	}
	switch conn.PgConn().TxStatus() {
	case 'I':
		return true
	case 'T', 'E':
		rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		_, err := conn.Exec(rctx, "ROLLBACK")
		return err == nil
	default:
		return false
	}
}

// cutShort counts an operation that the end of the run cut short and
// hands it to the recorder, which scores it frustrated when it has
// already run longer than 4T (record.Recorder.RecordCutShort).
func (e *run) cutShort(op int, start, sched time.Time) {
	e.cancelled.Add(1)
	e.rec.RecordCutShort(op, start, sched, time.Now())
}

func (e *run) record(s record.Sample) {
	e.rec.Record(s)
	if e.cfg.OnSample != nil {
		e.cfg.OnSample(s)
	}
}

func (e *run) fail(op int, start, sched time.Time, wait, db time.Duration, retries int, err error) {
	code := SQLState(err)
	e.errors.Add(1)
	now := time.Now()
	e.watch.event(now)
	switch {
	case ComingBack(err):
		// Starting up or in recovery: not gone, on its way back.
		e.watch.comingBack(now)
		e.failSince.CompareAndSwap(0, now.UnixNano())
	case ConnectionFailure(err):
		if ShuttingDown(err) {
			e.watch.shuttingDown(now)
		}
		e.lastErr.Store(strings.Join(strings.Fields(err.Error()), " "))
		e.failSince.CompareAndSwap(0, now.UnixNano())
	default:
		// The server answered: it is there.
		e.lastOK.Store(now.UnixNano())
		e.failSince.Store(0)
	}
	e.record(record.Sample{Op: op, Start: start, Scheduled: sched, Wait: wait, DB: db, SQLState: code, Retries: retries})
}

// SQLState classifies an operation error: the server's SQLSTATE when it
// sent one (also when it refused a new connection, e.g. 53300 too many
// clients, 28P01 bad password, 55000 database not accepting connections),
// CodeConnectionFailure for network errors and connects that got no
// answer, CodeClient otherwise.
func SQLState(err error) string {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		return pgErr.Code
	}
	if ConnectionFailure(err) {
		return CodeConnectionFailure
	}
	return CodeClient
}

// ConnectionFailure reports whether err means the VU had or got no
// working connection: a failed connect (whatever the server said) or a
// network error on an open one. Such errors, and only they, count towards
// deciding that the server is gone.
func ConnectionFailure(err error) bool {
	var connErr *pgconn.ConnectError
	if errors.As(err, &connErr) {
		return true
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		// Class 08 (connection exception) and 57P01..57P03 (admin
		// shutdown, crash shutdown, cannot connect now): Appendix A.
		return strings.HasPrefix(pgErr.Code, "08") || pgErr.Code == "57P01" || pgErr.Code == "57P02" || pgErr.Code == "57P03"
	}
	var netErr net.Error
	if errors.As(err, &netErr) || pgconn.SafeToRetry(err) || errors.Is(err, net.ErrClosed) {
		return true
	}
	return errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE)
}

// sleep waits d unless stop or ctx ends first; it reports whether the VU
// should go on.
func sleep(ctx context.Context, stop <-chan struct{}, d time.Duration) bool {
	if d <= 0 {
		select {
		case <-stop:
			return false
		case <-ctx.Done():
			return false
		default:
			return true
		}
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-stop:
		return false
	case <-ctx.Done():
		return false
	}
}
