// Package loadtest runs one `erplab run`: it finds or starts the server,
// sets up the workload, drives the engine, streams the time series to disk,
// writes the final results document and prints the summary. The CLI only
// parses flags into Options.
package loadtest

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/erplab/erplab/internal/conninfo"
	"github.com/erplab/erplab/internal/engine"
	"github.com/erplab/erplab/internal/exitcode"
	"github.com/erplab/erplab/internal/hostfacts"
	"github.com/erplab/erplab/internal/record"
	"github.com/erplab/erplab/internal/results"
	"github.com/erplab/erplab/internal/runenv"
	"github.com/erplab/erplab/internal/safefile"
	"github.com/erplab/erplab/internal/stress"
	"github.com/erplab/erplab/internal/workload"
)

// Options are the parameters of one run. Durations are wall time.
type Options struct {
	// DSN of the server under test; "" with EnvGiven=false starts the
	// embedded throwaway cluster.
	DSN      string
	EnvGiven bool
	// Force allows writing to a database that holds tables erplab did not
	// create.
	Force bool
	// Embedded cluster options.
	OSUser string
	Keep   bool

	Workload workload.Workload
	Mix      string // --mix override, "" for the workload's roles
	Scale    float64
	Seed     uint64

	Stages []engine.Stage
	// Rate, when not nil, switches to the open model (engine.Config.Rate):
	// arrivals at this rate profile, the VUs of Stages as workers.
	Rate []engine.RateStage
	// LatencyLimit counts late executions and, with Rate, skips arrivals
	// already later than it (engine.Config.LatencyLimit; pgbench
	// --latency-limit).
	LatencyLimit time.Duration
	// TxPerVU stops each VU after that many operations (pgbench -t); 0 =
	// no limit.
	TxPerVU      int
	Warmup       time.Duration
	Think        engine.ThinkTime
	Connections  int // pool size; 0 = a connection per VU
	MaxErrors    int64
	GracefulStop time.Duration
	// ServerGoneAfter (--server-gone-after) aborts the run when the
	// server has been gone (connection errors only) or has answered
	// nothing for this long; 0 = engine.DefaultServerGone (30 s).
	ServerGoneAfter time.Duration
	Interval        time.Duration // time-series resolution
	Progress        time.Duration // progress line period; 0 = none

	// Observe runs the samplers (sessions by state and wait event,
	// pg_stat_database, catalog, host) during the run and records them in
	// the results as extra.observations; ObserveInterval is their period
	// (default: Interval).
	Observe         bool
	ObserveInterval time.Duration
	// Stress, when set, runs stress workers beside the load for the whole
	// test (stress.ParseSpec syntax, e.g. "vm=2"), so their effect on
	// APDEX shows; their report goes into the results as extra.stress.
	Stress *stress.Spec

	// Soak, when set, cuts the run into windows with trends, early
	// warnings and the collapse limits (run --soak; soakattach.go).
	Soak *SoakOptions

	// MetricsAddr, when set, serves Prometheus metrics there (host:port)
	// during the run.
	MetricsAddr string

	// Profile samples the server's CPU with perf for the load test
	// (internal/profile) and records the profile as extra.profile; when
	// it cannot run, one warning line says why and the run goes on.
	Profile bool
	// Probes counts the server's shared-invalidation events with perf
	// uprobes for the load test (catalog cache resets, catch-up
	// interrupts, queue clean-ups, messages inserted and read; per
	// second, per backend, per key operation) into extra.invalidation,
	// with Observe; when they cannot run (not root, no perf, a remote
	// server), one line says why and the estimate of the observations
	// stays.
	Probes bool
	// ProbeReads adds the probe of messages read (SIGetDataEntries'
	// return), at every relation lock a backend takes: costly.
	ProbeReads bool
	// OnSample, when set, sees every recorded execution
	// (engine.Config.OnSample), e.g. for pgbench's progress lines and logs.
	OnSample func(record.Sample)
	// OnSkip, when set, sees every arrival skipped under the latency
	// limit (engine.Config.OnSkip), e.g. for pgbench's "skipped" log
	// lines and progress counts.
	OnSkip func(engine.Skip)
	// RateFromFirstArrival starts the open model's schedule with its
	// first worker (engine.Config.RateFromFirstArrival; pgbench's way).
	RateFromFirstArrival bool
	// PoolOptions adjust the connections of the run's pool (e.g. a notice
	// handler), after erplab's own.
	PoolOptions []conninfo.PoolOption

	// Segment, when set, runs this agent's piece of a run split over
	// several load machines (engine.Config.Segment; the profile, rate and
	// Connections stay the whole run's). A segmented run needs a shared
	// server (DSN or EnvGiven), does not set up data (erplab init does,
	// once, before the agents start), checks its clock against the
	// server's (MaxClockOffset), waits for StartAt, and writes
	// <Out dir>/<RunID>-<I>of<N>.json (see segmentPath).
	Segment *engine.Segment
	// RunID names the run in the results (all agents of a segmented run
	// share it; "" = a fresh random id).
	RunID string
	// StartAt is the start barrier (--start-at): the load begins then;
	// an agent that arrives later than StartGrace after it runs at once
	// but marks its segment incomplete.
	StartAt time.Time
	// MaxClockOffset bounds the segmented agent's clock offset against
	// the server's (0 = DefaultMaxClockOffset).
	MaxClockOffset time.Duration
	// SkipSetup leaves out the workload's set-up: an earlier run on the
	// same server and database set the data up (erplab capacity's steps
	// after the first).
	SkipSetup bool
	// PoolRule says, in the error of a pool that cannot be opened, where
	// its size came from; "" = "with --connections <Connections>"
	// (erplab capacity gives its rule and the step's users).
	PoolRule string

	// AbortedBy, when set, is asked at the end of a run that would be
	// "completed" whether it was aborted after all (e.g. "2 of 8 clients
	// aborted": pgbench counts a run whose clients aborted as aborted);
	// a non-empty answer makes the results' Status "aborted: <answer>".
	AbortedBy func() string

	// Out is the results file; "" or an existing directory (then OutDir)
	// = <OutDir>/<time>-<workload>.json.
	Out string
	// OutDir is the directory of the default, time-stamped results file
	// ("" = ./erplab-results, refused when it is a symbolic link or
	// another user's: ResultsDir); it is made when missing.
	OutDir string
	// OutRoot, when set, is the directory the results go into, held open
	// by the caller (capacity's steps directory, ab's round directory):
	// Out is then a file name in it (its last element is taken) or ""
	// for the time-stamped default, OutDir is not used, and nothing is
	// resolved through the directory's path. The caller closes it.
	OutRoot *safefile.Root
	// OutMode is the mode of the results files (0 = results.DefaultPerm).
	OutMode fs.FileMode
	// ReplaceOut replaces Out's files (X.json, X.jsonl) when they exist
	// as regular files, instead of refusing to start (erplab pgbench, as
	// pgbench's -l logs are overwritten).
	ReplaceOut bool
	// NoResults keeps the results in memory only: no document, no
	// stream; Result.Path and StreamPath are "".
	NoResults bool
	// OnNoResults, when set, makes results files that cannot be reserved
	// (an unwritable directory) no failure: it is called once with the
	// reason and the run goes on as with NoResults (erplab pgbench must
	// run where pgbench runs). Not for segmented runs.
	OnNoResults func(error)
	CommandLine []string
	Version     string
}

// Parameters is what the results document keeps of Options.
type Parameters struct {
	Workload    string      `json:"workload"`
	Scale       float64     `json:"scale"`
	Seed        uint64      `json:"seed"`
	Stages      []stageJSON `json:"stages"`
	MaxVUs      int         `json:"max_vus"`
	WarmupS     float64     `json:"warmup_s"`
	Think       string      `json:"think_time"`
	Connections int         `json:"connections"`
	MaxErrors   int64       `json:"max_errors"`
	IntervalS   float64     `json:"interval_s"`
	Server      string      `json:"server"` // redacted DSN or "embedded"
	Roles       []roleJSON  `json:"roles"`
	// RateStages is the open model's arrival-rate profile (empty in the
	// closed model); LatencyLimitMs and TxPerVU are pgbench's
	// --latency-limit and -t.
	RateStages     []rateJSON `json:"rate_stages,omitempty"`
	LatencyLimitMs float64    `json:"latency_limit_ms,omitempty"`
	TxPerVU        int        `json:"transactions_per_vu,omitempty"`
	// WorkloadDetails is what the workload says it ran on
	// (workload.Describer), e.g. the installed data set's scale.
	WorkloadDetails map[string]any `json:"workload_details,omitempty"`
	Operations      []opJSON       `json:"operations"`
}

type roleJSON struct {
	Name  string             `json:"name"`
	Share float64            `json:"share"`
	Mix   map[string]float64 `json:"mix"`
}

type stageJSON struct {
	DurationS float64 `json:"duration_s"`
	Target    int     `json:"target_vus"`
}

type rateJSON struct {
	DurationS float64 `json:"duration_s"`
	Rate      float64 `json:"rate_per_s"`
}

type opJSON struct {
	Name        string  `json:"name"`
	TargetMs    float64 `json:"target_ms"`
	Priority    int     `json:"priority"`
	Description string  `json:"description"`
}

// Environment is what the results document keeps of the machine and server.
type Environment struct {
	Host     runenv.Host   `json:"host"`
	Server   runenv.Server `json:"server"`
	Embedded bool          `json:"embedded"`
}

// ErrInterrupted is returned when ctx was cancelled before the load test
// started (e.g. Ctrl-C during initdb or set-up); nothing is left behind.
// It carries exitcode.Interrupted.
var ErrInterrupted = exitcode.New(exitcode.Interrupted, "interrupted before the load test started; nothing was left behind")

// ErrResultsIncomplete is wrapped by Run's error when a results file
// could not be written (a full disk): the stream stopped mid-run, or the
// final document failed. The summary was printed all the same, and what
// was written is valid (results.Validate). It carries
// exitcode.ResultsIncomplete.
var ErrResultsIncomplete = exitcode.New(exitcode.ResultsIncomplete, "results incomplete")

// ErrRunFailed is wrapped by Run's error when every attempt of every
// key operation failed while the server answered (results.AllFailed; the
// results' Status "failed: ..."): the data set missing, a role without
// rights. It carries exitcode.RunFailed.
var ErrRunFailed = exitcode.New(exitcode.RunFailed, "the run failed")

// Result is what Run returns: the document and where it was written.
// Path is "" when the document could not be written (see
// ErrResultsIncomplete; StreamPath then holds what was kept).
type Result struct {
	Doc        *results.Document
	Path       string
	StreamPath string
}

// Run performs the load test. Progress and the summary go to out. On
// interrupt (ctx cancelled) it still writes results and returns them with
// Doc.Status "interrupted". Errors are one line, without passwords. After
// the load ran, the Result is returned with the errors too: one wrapping
// engine.ErrAborted (max errors, server gone), engine.ErrNotAnswering,
// engine.ErrServerGone (also for a run that ended with its server lost,
// engine.Outcome.LostAtEnd), ErrRunFailed (every attempt failed), or
// ErrResultsIncomplete (which wins when several apply).
//
// It is a sequence: the plan, the results files reserved, the server
// (embedded or given), its pool and the workload's set-up, then the
// load test proper (loadTest): the attachments started, the engine, the
// attachments stopped, the summary, the results written.
func Run(ctx context.Context, opts Options, out io.Writer) (*Result, error) {
	p, err := newPlan(opts)
	if err != nil {
		return nil, err
	}
	files, err := reserve(p)
	if err != nil {
		return nil, err
	}
	defer files.release()
	srv, err := openServer(ctx, p.opts, p.poolSize, out)
	if err != nil {
		return nil, err
	}
	defer srv.close(out)
	pool, err := openPool(ctx, p.opts, srv.dsn, p.poolSize)
	if err != nil {
		return nil, err
	}
	defer closePool(pool, poolCloseBound)
	if err := setUp(ctx, p.opts, pool, srv.force, out); err != nil {
		return nil, err
	}
	if p.driver != nil {
		// The driver may copy the database: no session of ours stays on it.
		pool.Close()
		return drive(ctx, p.opts, p.driver, srv.dsn, files.handOver(), files.loc, files.perm, out)
	}
	r, err := prepare(ctx, p, srv, pool, files, out)
	if err != nil {
		return nil, err
	}
	defer r.closeAttachments()
	return r.loadTest(ctx)
}

// plan is what Run makes of its Options before anything starts.
type plan struct {
	opts      Options // with the defaults filled in
	roles     []workload.Role
	driver    workload.Driver // nil unless the workload drives its own load
	maxVUs    int
	poolSize  int
	segmented bool
}

// newPlan checks opts and fills in their defaults: the interval, the run
// id, --out naming a directory.
func newPlan(opts Options) (plan, error) {
	p := plan{opts: opts, segmented: !opts.Segment.Whole()}
	if err := workload.Validate(opts.Workload); err != nil {
		return p, err
	}
	p.roles = opts.Workload.Roles()
	if opts.Mix != "" {
		var err error
		if p.roles, err = workload.OverrideMix(opts.Workload, opts.Mix); err != nil {
			return p, err
		}
	}
	if len(opts.Stages) == 0 {
		return p, errors.New("no load profile: give --users/--duration or --stage")
	}
	if d, ok := opts.Workload.(workload.Driver); ok {
		if err := checkDriven(opts); err != nil {
			return p, err
		}
		p.driver = d
	}
	if p.maxVUs = engine.MaxTarget(opts.Stages); p.maxVUs < 1 {
		return p, errors.New("the load profile never starts a virtual user")
	}
	if p.opts.Interval <= 0 {
		p.opts.Interval = time.Second
	}
	if err := checkSegment(opts, p.maxVUs); err != nil {
		return p, err
	}
	if p.opts.RunID == "" {
		p.opts.RunID = NewRunID()
	}
	if p.poolSize = opts.Segment.Scale(opts.Connections); p.poolSize == 0 {
		p.poolSize = opts.Segment.Scale(p.maxVUs)
	}
	if st, err := os.Stat(opts.Out); opts.OutRoot == nil && opts.Out != "" && !p.segmented && err == nil && st.IsDir() {
		p.opts.OutDir, p.opts.Out = opts.Out, "" // --out DIR: DIR/<time>-<workload>.json
	}
	return p, nil
}

// openPool opens the run's pool on dsn (with the statement tracer for
// runs with observations).
func openPool(ctx context.Context, opts Options, dsn string, size int) (*pgxpool.Pool, error) {
	poolOpts := opts.PoolOptions
	if opts.Observe {
		poolOpts = append(poolOpts[:len(poolOpts):len(poolOpts)], traceStatements)
	}
	return conninfo.OpenPool(ctx, dsn, size, poolOpts...)
}

// setUp sets the workload's data up (not for a segmented run, nor with
// SkipSetup: then a workload.DataVerifier is asked whether the data is
// there, and a run without it refused) and says how long that took when
// it took long.
func setUp(ctx context.Context, opts Options, pool *pgxpool.Pool, force bool, out io.Writer) error {
	setupStart := time.Now()
	if !opts.Segment.Whole() || opts.SkipSetup {
		if !opts.Segment.Whole() {
			fmt.Fprintf(out, "segment %s: data set-up skipped (a segmented run uses the data set made once before the agents start: erplab init)\n", opts.Segment)
		} // else set up by an earlier run on this server
		return verifyData(ctx, opts.Workload, pool)
	} else if err := opts.Workload.Setup(ctx, pool, workload.SetupOptions{
		Scale: opts.Scale, Seed: opts.Seed, Force: force,
		Progress: func(f string, a ...any) { fmt.Fprintf(out, f+"\n", a...) },
	}); err != nil {
		if errors.Is(err, workload.ErrForeignDatabase) {
			return err
		}
		if ctx.Err() != nil {
			return ErrInterrupted
		}
		return fmt.Errorf("workload set-up: %s", strings.Join(strings.Fields(err.Error()), " "))
	}
	if d := time.Since(setupStart); d > time.Second {
		fmt.Fprintf(out, "set-up took %s\n", d.Round(100*time.Millisecond))
	}
	return nil
}

// verifyData refuses a run whose set-up is skipped on a database without
// the workload's data set (workload.DataVerifier), before the load: its
// every operation would fail.
func verifyData(ctx context.Context, w workload.Workload, pool *pgxpool.Pool) error {
	v, ok := w.(workload.DataVerifier)
	if !ok {
		return nil
	}
	if err := v.VerifyData(ctx, pool); err != nil {
		if ctx.Err() != nil {
			return ErrInterrupted
		}
		return fmt.Errorf("%w: refused before the load", err)
	}
	return nil
}

// prepare readies the load test on a set-up server: the environment read,
// every connection opened, a segmented agent's clock checked, the
// document's head made and the attachments made (perf starts here).
func prepare(ctx context.Context, p plan, srv *server, pool *pgxpool.Pool, files *runFiles, out io.Writer) (*runState, error) {
	env, err := readEnvironment(ctx, pool, srv.embedded)
	if err != nil {
		return nil, err
	}
	// Open every connection the run will need before it starts: connection
	// set-up is not part of any operation, and a server that cannot take
	// them all is refused now rather than leaving VUs without one.
	if err := warmPool(ctx, pool, p.poolSize); err != nil {
		rule := p.opts.PoolRule
		if rule == "" {
			rule = fmt.Sprintf("with --connections %d", p.opts.Connections)
		}
		return nil, fmt.Errorf("open %d connections: %s (%s)", p.poolSize, conninfo.Describe(err), rule)
	}
	seg, err := checkAgent(ctx, p.opts, pool, files, out)
	if err != nil {
		return nil, err
	}
	r := &runState{opts: p.opts, out: out, roles: p.roles, maxVUs: p.maxVUs, srv: srv, pool: pool, files: files,
		env: env, seg: seg, health: &engine.Health{}, ops: p.opts.Workload.Operations()}
	r.document()
	r.attachments(ctx)
	return r, nil
}

// document makes the results document's head: parameters, environment,
// run id.
func (r *runState) document() {
	opts := r.opts
	r.params = Parameters{
		Workload: opts.Workload.Name(), Scale: opts.Scale, Seed: opts.Seed, MaxVUs: r.maxVUs,
		WarmupS: opts.Warmup.Seconds(), Think: opts.Think.String(), Connections: opts.Connections,
		MaxErrors: opts.MaxErrors, IntervalS: opts.Interval.Seconds(), Server: r.srv.desc,
	}
	for _, role := range r.roles {
		r.params.Roles = append(r.params.Roles, roleJSON{role.Name, role.Share, role.Mix})
	}
	for _, op := range r.ops {
		r.params.Operations = append(r.params.Operations, opJSON{op.Name, float64(op.Target) / 1e6, op.Priority, op.Description})
	}
	for _, s := range opts.Stages {
		r.params.Stages = append(r.params.Stages, stageJSON{s.Duration.Seconds(), s.Target})
	}
	for _, rs := range opts.Rate {
		r.params.RateStages = append(r.params.RateStages, rateJSON{rs.Duration.Seconds(), rs.Rate})
	}
	r.params.LatencyLimitMs = float64(opts.LatencyLimit) / float64(time.Millisecond)
	r.params.TxPerVU = opts.TxPerVU
	doc := &results.Document{
		Format: results.Format, Schema: results.SchemaVersion, Version: opts.Version, CommandLine: conninfo.RedactArgs(opts.CommandLine),
		Workload: opts.Workload.Name(), Status: results.StatusRunning,
	}
	doc.Environment, _ = json.Marshal(r.env)
	doc.Parameters, _ = json.Marshal(r.params)
	doc.RunID, doc.ConfigHash, doc.Segment = opts.RunID, configHash(r.params, opts), r.seg
	r.doc = doc
}

// attachments makes the run's attachments in start order: those that
// observe the run (stream, metrics, catalog, samplers), then those beside
// the load (progress, stress, profile: the last to start, the first to
// stop). The profile's perf starts here, before the --start-at barrier.
func (r *runState) attachments(ctx context.Context) {
	st := newStream(r.files)
	r.stream = st.stream
	r.atts = []attachment{st}
	if r.opts.MetricsAddr != "" {
		r.atts = append(r.atts, &metricsAttachment{})
	}
	r.atts = append(r.atts, &catalogAttachment{})
	if r.opts.Observe {
		r.atts = append(r.atts, &samplersAttachment{})
	}
	if r.opts.Soak != nil {
		r.atts = append(r.atts, newSoak(*r.opts.Soak))
	}
	r.observers = len(r.atts)
	if n := crowdSize(r.opts.Workload); n > 0 {
		r.atts = append(r.atts, &crowdAttachment{n: n})
	}
	if r.opts.Progress > 0 {
		r.atts = append(r.atts, &progressAttachment{})
	}
	if r.opts.Stress != nil {
		r.atts = append(r.atts, &stressAttachment{spec: *r.opts.Stress})
	}
	if r.opts.Observe && r.opts.Probes {
		r.atts = append(r.atts, startInval(ctx, r.srv.dsn, r.opts.ProbeReads, r.say))
	}
	if r.opts.Profile {
		r.atts = append(r.atts, startProfile(ctx, r.srv.dsn, r.say))
	}
}

// loadTest waits for the start, runs the load between the attachments'
// start and stop, prints the summary and writes the results.
func (r *runState) loadTest(ctx context.Context) (*Result, error) {
	if err := r.begin(ctx); err != nil {
		return nil, err
	}
	if err := r.attach(ctx); err != nil {
		return nil, err
	}
	outcome, runErr := r.load(ctx)
	r.finish(ctx, outcome, runErr)
	r.summary()
	return r.write(runErr)
}

// begin waits for the --start-at barrier and sets the run's time base.
func (r *runState) begin(ctx context.Context) error {
	late, err := waitStart(ctx, r.opts.StartAt, r.say)
	if err != nil {
		return err // nothing ran: the stream is removed, no attempt to report
	}
	r.files.began = true
	if late > StartGrace {
		reason := fmt.Sprintf("late start: began %s after --start-at %s", late.Round(time.Millisecond), r.opts.StartAt.Format(time.RFC3339Nano))
		fmt.Fprintf(r.out, "warning: %s; the run goes on and its segment is marked incomplete\n", reason)
		if r.seg != nil {
			r.seg.Incomplete = append(r.seg.Incomplete, reason)
		}
	}
	r.start = time.Now()
	r.doc.StartedAt = r.start
	recOps := make([]record.OpInfo, len(r.ops))
	for i, op := range r.ops {
		recOps[i] = record.OpInfo{Name: op.Name, Target: op.Target, Priority: op.Priority}
	}
	r.rec = record.New(recOps, r.start, r.opts.Warmup, r.opts.Interval)
	if r.opts.Soak != nil {
		r.rec.SetThinning(r.opts.Soak.Horizon, r.opts.Soak.Window)
	}
	r.cpu = newCPUMeter(r.start)
	return nil
}

// banner is the run's opening lines: what runs where, the segment, the
// stream.
func (r *runState) banner() {
	opts := r.opts
	fmt.Fprintf(r.out, "erplab run: workload %s, %d VUs max on %s, %s, server %s (PostgreSQL %s)\n",
		opts.Workload.Name(), r.maxVUs, poolDesc(opts.Connections), profileDesc(opts), r.srv.desc, shortVersion(r.env.Server.Version))
	if r.seg != nil {
		printSegmentBanner(r.out, opts, r.seg, r.maxVUs)
	}
	if !r.files.none {
		fmt.Fprintf(r.out, "streaming results to %s\n", r.files.streamPath)
	}
}

// load runs the engine. The load's own span ends with it: what follows
// (perf's stop and its parse, the stress workers, the samplers) must not
// count in the run's duration, its rates or the generator's CPU.
func (r *runState) load(ctx context.Context) (engine.Outcome, error) {
	opts := r.opts
	cfg := engine.Config{
		Workload: opts.Workload, Roles: r.roles, Stages: opts.Stages, Warmup: opts.Warmup,
		Think: opts.Think, Connections: opts.Connections, MaxErrors: opts.MaxErrors,
		Seed: opts.Seed, GracefulStop: opts.GracefulStop, ServerGone: opts.ServerGoneAfter, Health: r.health,
		Rate: opts.Rate, LatencyLimit: opts.LatencyLimit, TxPerVU: opts.TxPerVU, Ops: r.opm, OnSample: opts.OnSample, OnSkip: opts.OnSkip,
		RateFromFirstArrival: opts.RateFromFirstArrival, Segment: opts.Segment,
		OnInterval: r.onInterval, Stop: r.stopRun,
	}
	outcome, err := engine.Run(ctx, r.pool, cfg, r.rec)
	r.end = loadEnd(r.start, outcome)
	r.doc.Agent = r.cpu.finish(r.end)
	return outcome, err
}

// finish stops the attachments and completes the document: status,
// figures, the segment's completeness, the attachments' extras.
func (r *runState) finish(ctx context.Context, outcome engine.Outcome, runErr error) {
	opts, doc := r.opts, r.doc
	r.outcome = outcome
	// A server that is not answering would hold every clean-up query for
	// its whole timeout: skip them.
	r.frozen = outcome.NotAnsweringAtEnd() || errors.Is(runErr, engine.ErrNotAnswering) || outcome.StuckClosed > 0
	doc.Extra = map[string]json.RawMessage{}
	r.detach(ctx, doc)

	doc.EndedAt = r.end
	doc.ServerUnresponsive = outcome.Unresponsive
	scored := max(r.end.Sub(r.start)-opts.Warmup, 0)
	doc.Operations = r.rec.Results(scored)
	doc.Status = runStatus(outcome, doc.Operations, opts.AbortedBy)
	if d, ok := opts.Workload.(workload.Describer); ok {
		r.params.WorkloadDetails = d.Describe()
		doc.Parameters, _ = json.Marshal(r.params)
	}
	v, ok := results.Integral(doc.Operations)
	doc.Integral = results.NewIntegralScore(v, ok)
	doc.Totals = r.rec.Totals(scored)
	doc.Series = r.rec.Series()
	if r.seg != nil {
		r.seg.Incomplete = append(r.seg.Incomplete, incompleteReasons(doc, outcome)...)
	}
	var err error
	if doc.Stages, err = results.StageFigures(doc); err != nil {
		r.say("warning: per-stage figures: %v", err)
	}
}

// runStatus is the document's status of a run with this outcome and
// these operations' figures: a run that would be "completed" is
// "stalled", "lost", "aborted" (abortedBy) or, when every attempt of
// every key operation failed, "failed".
func runStatus(outcome engine.Outcome, ops []results.OpResult, abortedBy func() string) results.Status {
	status := outcome.Status
	if outcome.NotAnsweringAtEnd() && status == results.StatusCompleted {
		sp := outcome.Unresponsive[len(outcome.Unresponsive)-1]
		status = results.StatusStalled.Because(fmt.Sprintf("the server answered nothing from t=%s s to the end (%d operations waiting)", fmtSeconds(sp.FromS), sp.MaxWaiting))
	}
	if l := outcome.LostAtEnd; l != nil && status == results.StatusCompleted {
		status = results.StatusLost.Because(fmt.Sprintf("no operation succeeded from t=%s s to the end (%s)", fmtSeconds(l.FromS), l.Condition.Gone()))
	}
	if abortedBy != nil && status == results.StatusCompleted {
		if why := abortedBy(); why != "" {
			status = results.StatusAborted.Because(why)
		}
	}
	if why, failed := results.AllFailed(ops); failed && status == results.StatusCompleted {
		status = results.StatusFailed.Because(why)
	}
	return status
}

// summary prints the summary: nothing the run measured depends on the
// disk, so it comes before the results are written.
func (r *runState) summary() {
	out, doc := r.out, r.doc
	PrintSummary(out, doc, r.outcome)
	printAgent(out, doc)
	if rep, ok := r.opts.Workload.(workload.Reporter); ok {
		fmt.Fprintln(out)
		rep.Report(out, doc)
	}
	fmt.Fprintln(out)
	r.report(out, doc)
}

// write writes the results (unless the run keeps none) and returns them
// with the run's error: the results' failure first, then the engine's,
// then a server that stopped answering or was lost at the end.
func (r *runState) write(runErr error) (*Result, error) {
	opts, doc, outcome, files := r.opts, r.doc, r.outcome, r.files
	res := &Result{Doc: doc, Path: files.path, StreamPath: files.streamPath}
	var writeErr error
	if files.none {
		r.stream.Close()
	} else if writeErr = writeResults(r.out, doc, r.stream, files.loc, opts.ReplaceOut && opts.Out != "", files.perm); writeErr != nil {
		res.Path = ""
	}
	switch {
	case writeErr != nil:
		return res, writeErr
	case runErr != nil:
		return res, runErr
	case outcome.NotAnsweringAtEnd() && outcome.Status == results.StatusCompleted:
		return res, fmt.Errorf("%w at t=%s s and had not answered by the end of the run%s",
			engine.ErrNotAnswering, fmtSeconds(outcome.Unresponsive[len(outcome.Unresponsive)-1].FromS), resultsAt(files.path))
	case doc.Status.Kind() == results.StatusLost:
		return res, fmt.Errorf("%w: no operation succeeded from t=%s s to the end of the run (%s)%s",
			engine.ErrServerGone, fmtSeconds(outcome.LostAtEnd.FromS), outcome.LostAtEnd.Condition.Gone(), resultsAt(files.path))
	case doc.Status.Kind() == results.StatusFailed:
		why, _ := doc.Status.Reason(results.StatusFailed)
		return res, fmt.Errorf("%w: %s%s", ErrRunFailed, why, resultsAt(files.path))
	}
	return res, nil
}

// loadEnd is the end of the load's own span: the engine's recorded
// span from start (the recorder's time base, the one the series' last
// interval ends at), or now when the engine did not run.
func loadEnd(start time.Time, outcome engine.Outcome) time.Time {
	if outcome.Elapsed > 0 {
		return start.Add(outcome.Elapsed)
	}
	return time.Now()
}

// resultsAt is " (results: PATH)", "" without a path.
func resultsAt(path string) string {
	if path == "" {
		return ""
	}
	return " (results: " + path + ")"
}

// writeResults appends the summary line to the stream, closes it, and
// writes the document to loc with mode perm (a new file; with replace
// it may replace a regular file of this user), then says on out where
// the results are: one line "results: PATH (time series: STREAM)", or on
// a failure one line naming what failed and where everything so far is.
// The error wraps ErrResultsIncomplete.
func writeResults(out io.Writer, doc *results.Document, stream *results.Stream, loc resultsLoc, replace bool, perm fs.FileMode) error {
	path := loc.path()
	summary := *doc
	summary.Series = nil
	stream.Write(results.StreamLine{Type: "summary", Summary: &summary}) //nolint:errcheck // Err below
	serr := stream.Close()
	streamPath := stream.Path()
	if serr != nil {
		// Written after the stream failed, so it holds the failure.
		doc.StreamError = serr.Error()
	}
	var derr error
	if replace {
		derr = results.ReplaceJSONIn(loc.dir, loc.name, doc, perm)
	} else {
		derr = doc.WriteFileIn(loc.dir, loc.name, perm)
	}
	switch {
	case derr != nil && serr != nil:
		fmt.Fprintf(out, "NOT WRITTEN: %v; the stream %s holds the intervals up to t=%s s only (it failed too: %v)\n", derr, streamPath, fmtSeconds(stream.LastT()), serr)
		return fmt.Errorf("%w: %v; the stream %s holds the intervals up to t=%s s", ErrResultsIncomplete, derr, streamPath, fmtSeconds(stream.LastT()))
	case derr != nil:
		fmt.Fprintf(out, "NOT WRITTEN: %v; everything is in the stream %s (erplab report and compare read it)\n", derr, streamPath)
		return fmt.Errorf("%w: %v; everything is in the stream %s", ErrResultsIncomplete, derr, streamPath)
	case serr != nil:
		fmt.Fprintf(out, "results: %s (complete); the stream %s stopped at t=%s s: %v\n", path, streamPath, fmtSeconds(stream.LastT()), serr)
		return fmt.Errorf("%w: the stream %s stopped at t=%s s: %v; the document %s is complete", ErrResultsIncomplete, streamPath, fmtSeconds(stream.LastT()), serr, path)
	}
	fmt.Fprintf(out, "results: %s (time series: %s)\n", path, streamPath)
	return nil
}

// poolCloseBound bounds the wait for the pool's connections to close at
// the end of a run.
const poolCloseBound = 3 * time.Second

// closePool closes pool, waiting at most bound: pgx cleans up a broken
// connection with a cancel request and a drain of up to 15 s each, which a
// server that is not answering never ends. What is left closes in the
// background (and dies with the process).
// traceStatements sets the engine's query tracer on the run's
// connections (unless an option set one), for runs with observations:
// the engine counts the statement texts each key operation sends, by
// which the sampler attributes pg_stat_statements to operations exactly.
func traceStatements(c *pgxpool.Config) {
	if c.ConnConfig.Tracer == nil {
		c.ConnConfig.Tracer = engine.Tracer{}
	}
}

func closePool(pool *pgxpool.Pool, bound time.Duration) {
	done := make(chan struct{})
	go func() { pool.Close(); close(done) }()
	t := time.NewTimer(bound)
	defer t.Stop()
	select {
	case <-done:
	case <-t.C:
	}
}

// warmPool opens n connections up front so that connection set-up is not
// counted as pool wait in the first seconds.
func warmPool(ctx context.Context, pool *pgxpool.Pool, n int) error {
	if n <= 0 {
		return nil
	}
	conns := make([]*pgxpool.Conn, 0, n)
	defer func() {
		for _, c := range conns {
			c.Release()
		}
	}()
	for i := 0; i < n; i++ {
		c, err := pool.Acquire(ctx)
		if err != nil {
			return err
		}
		conns = append(conns, c)
	}
	return nil
}

func readEnvironment(ctx context.Context, pool *pgxpool.Pool, embedded bool) (Environment, error) {
	env := Environment{Embedded: embedded}
	host, err := runenv.ReadHost(hostfacts.DefaultProcRoot, hostfacts.DefaultSysRoot)
	if err == nil {
		env.Host = host
	}
	conn, err := pool.Acquire(ctx)
	if err != nil {
		return env, fmt.Errorf("%s", conninfo.Describe(err))
	}
	defer conn.Release()
	srv, err := runenv.ReadServer(ctx, conn.Conn())
	if err != nil {
		return env, fmt.Errorf("read server settings: %w", err)
	}
	env.Server = srv
	if env.Host.CPUs == 0 {
		env.Host.CPUs = runtime.NumCPU()
	}
	return env, nil
}

func poolDesc(connections int) string {
	if connections == 0 {
		return "a connection per VU"
	}
	return fmt.Sprintf("%d pooled connections", connections)
}

func profileDesc(opts Options) string {
	parts := make([]string, 0, len(opts.Stages))
	for _, s := range opts.Stages {
		parts = append(parts, fmt.Sprintf("%s:%d", s.Duration, s.Target))
	}
	d := "stages " + strings.Join(parts, " ")
	if opts.TxPerVU > 0 && engine.TotalDuration(opts.Stages) >= 24*time.Hour {
		// -t without a duration: the stages only bound the run
		d = fmt.Sprintf("%d VUs", engine.MaxTarget(opts.Stages))
	}
	if len(opts.Rate) > 0 {
		rs := make([]string, 0, len(opts.Rate))
		for _, r := range opts.Rate {
			rs = append(rs, fmt.Sprintf("%s:%g/s", r.Duration, r.Rate))
		}
		d += ", open model: arrival rate " + strings.Join(rs, " ") + " (Poisson)"
	}
	if opts.TxPerVU > 0 {
		d += fmt.Sprintf(", %d transactions per VU", opts.TxPerVU)
	}
	if opts.LatencyLimit > 0 {
		d += fmt.Sprintf(", latency limit %s", opts.LatencyLimit)
	}
	if opts.Warmup > 0 {
		d += fmt.Sprintf(", warm-up %s not scored", opts.Warmup)
	}
	if len(opts.Rate) > 0 {
		return d
	}
	return d + ", think " + opts.Think.String()
}

// shortVersion keeps the version number of a server_version such as
// "15.18 (Debian 15.18-0+deb12u1)".
func shortVersion(v string) string {
	if i := strings.IndexByte(v, ' '); i > 0 {
		return v[:i]
	}
	return v
}

// resultsLoc is where a run's results go: the file name (X.json; the
// stream is X.jsonl) in a directory held open (safefile.Root), through
// which every file of the run is made.
type resultsLoc struct {
	dir  *safefile.Root
	name string
	own  bool // dir opened for this run: closed at its end
}

// path is the document's path, for messages; "" without a directory.
func (l resultsLoc) path() string {
	if l.dir == nil {
		return ""
	}
	return l.dir.Join(l.name)
}

// streamName is the stream's file name.
func (l resultsLoc) streamName() string { return strings.TrimSuffix(l.name, ".json") + ".jsonl" }

// close closes a directory opened for the run.
func (l resultsLoc) close() {
	if l.own && l.dir != nil {
		l.dir.Close()
	}
}

// runFiles is a run's results files, reserved before anything starts:
// the document's name and the stream, created empty, in a directory held
// open; none when the run keeps no results.
type runFiles struct {
	loc              resultsLoc
	file             *os.File // the stream; nil without results
	path, streamPath string
	perm             fs.FileMode
	none             bool
	// restarted names the file an earlier attempt of a segment left (its
	// attempt number is attempt), "" for the first.
	restarted string
	attempt   int
	// began is set once the load test is under way (past --start-at) or
	// handed to a driver: the stream then stays.
	began bool
}

// reserve checks and reserves the run's results files (segmentPath for a
// segmented run, else reserveResults). With OnNoResults, files that
// cannot be reserved are said there and the run keeps no results.
func reserve(p plan) (*runFiles, error) {
	opts := p.opts
	f := &runFiles{perm: cmp.Or(opts.OutMode, results.DefaultPerm), none: opts.NoResults}
	var err error
	if opts.Out != "" && opts.OutRoot == nil && !opts.NoResults {
		// A typo in --out must not create directories: only the default
		// ./erplab-results (or OutDir) is made on demand.
		if dir := filepath.Dir(opts.Out); dir != "." {
			if st, serr := os.Stat(dir); serr != nil || !st.IsDir() {
				err = fmt.Errorf("--out %s: directory %s does not exist", opts.Out, dir)
			}
		}
	}
	switch {
	case f.none || err != nil:
	case p.segmented:
		f.loc, f.file, f.restarted, f.attempt, err = segmentPath(opts.Out, opts.OutRoot, opts.RunID, opts.Segment, f.perm)
	default:
		f.loc, f.file, err = reserveResults(opts.Out, opts.OutDir, opts.OutRoot, opts.Workload.Name(), time.Now(), opts.ReplaceOut, f.perm)
	}
	if f.file != nil {
		f.path, f.streamPath = f.loc.path(), f.loc.dir.Join(f.loc.streamName())
	}
	if err != nil && opts.OnNoResults != nil && !p.segmented {
		opts.OnNoResults(err)
		f.none, err = true, nil
	}
	if err != nil {
		f.release()
		return nil, err
	}
	return f, nil
}

// handOver gives the stream to a workload that drives its own load
// (nil without results).
func (f *runFiles) handOver() *os.File {
	f.began = true
	if f.none {
		return nil
	}
	return f.file
}

// release gives the stream's name back when the run ended before its
// load began, and closes the directory opened for the run.
func (f *runFiles) release() {
	if !f.began && f.streamPath != "" {
		f.file.Close()
		f.loc.dir.Remove(f.loc.streamName())
	}
	f.loc.close()
}

// reserveResults chooses the run's results files and reserves them before
// any server is started: the file is out (in its directory, or in in
// when the caller holds one open), or by default
// <time>-<workload>.json, YYYYMMDD-HHMMSS, (runs started in the same
// second get -2, -3, ...) in in, or in dir (dir "" = ./erplab-results,
// see ResultsDir), and the stream the same with .jsonl, created empty
// with mode perm and O_EXCL (safefile.Root.Create) so that two runs
// started together never take the same name, and returned open (the
// stream writes into it). The directory is held open: the document is
// written through it too, never by its path. It fails when out names
// existing results, a symbolic link, or a directory that takes no
// files; with replace, out's files may be regular files of this user,
// replaced. The caller closes and removes the stream if the run ends
// before streaming, and closes loc.
func reserveResults(out, dir string, in *safefile.Root, workload string, now time.Time, replace bool, perm fs.FileMode) (loc resultsLoc, stream *os.File, err error) {
	loc.dir = in
	stem := strings.TrimSuffix(filepath.Base(out), ".json")
	switch {
	case out == "":
		stem = now.Format("20060102-150405") + "-" + workload
		if in == nil {
			if loc.dir, err = ResultsDir(dir); err != nil {
				return resultsLoc{}, nil, err
			}
			loc.own = true
		}
	case in == nil:
		var name string
		if loc.dir, name, err = safefile.Parent(out); err != nil {
			return resultsLoc{}, nil, fmt.Errorf("results: %w", err)
		}
		loc.own, stem = true, strings.TrimSuffix(name, ".json")
	}
	replace = replace && out != ""
	create := loc.dir.Create
	if replace {
		create = loc.dir.Overwrite
	}
	for i := 1; ; i++ {
		loc.name = stem + ".json"
		if i > 1 {
			loc.name = fmt.Sprintf("%s-%d.json", stem, i)
		}
		err := checkFree(replace, loc.dir, loc.name)
		if err == nil {
			if stream, err = create(loc.streamName(), perm); err == nil {
				return loc, stream, nil
			}
			if !errors.Is(err, fs.ErrExist) {
				loc.close()
				return resultsLoc{}, nil, fmt.Errorf("results: %w", err)
			}
			err = resultsExistError{loc.dir.Join(loc.streamName()), err}
		}
		var taken resultsExistError
		if out != "" || !errors.As(err, &taken) {
			loc.close()
			return resultsLoc{}, nil, err
		}
	}
}

// DefaultDir is the directory of the results files when none is given.
const DefaultDir = "erplab-results"

// ResultsDir opens the directory of time-stamped results, held open
// (every results file is made through it): dir given by the user
// (--out DIR, ERPLAB_PGBENCH_OUT=DIR/), made when missing, a symbolic
// link followed only when it and the directory it reaches are this
// user's or root's (safefile.UserDir), or "" = ./erplab-results, made
// 0755 when missing and refused when it is a symbolic link or not a
// directory of this user (safefile.Dir: a link planted in a shared
// current directory would take the results elsewhere). The caller
// closes it.
func ResultsDir(dir string) (*safefile.Root, error) {
	var (
		d   *safefile.Root
		err error
	)
	if dir != "" {
		d, err = safefile.UserDir(dir, 0o755)
	} else {
		d, err = safefile.Dir(DefaultDir, 0o755)
	}
	if err != nil {
		return nil, fmt.Errorf("results directory: %w", err)
	}
	return d, nil
}

// resultsExistError says that a results file exists already.
type resultsExistError struct {
	path  string
	cause error // safefile's refusal, or nil: it exists
}

func (e resultsExistError) Error() string {
	what := "exists"
	if r := (*safefile.RefusedError)(nil); errors.As(e.cause, &r) {
		what = r.What
	}
	return fmt.Sprintf("results file %s %s; choose another --out or remove it", e.path, what)
}

// checkFree refuses a results document name in dir that exists, a
// symbolic link included; with replace, anything but a regular file of
// this user (safefile.Root.CheckReplace).
func checkFree(replace bool, dir *safefile.Root, name string) error {
	path := dir.Join(name)
	if replace {
		if err := dir.CheckReplace(name); err != nil {
			return resultsExistError{path, err}
		}
		return nil
	}
	if st, err := dir.Lstat(name); err == nil {
		if st.Mode()&fs.ModeSymlink != 0 {
			return resultsExistError{path, &safefile.RefusedError{Path: path, What: "is a symbolic link"}}
		}
		return resultsExistError{path, nil}
	}
	return nil
}

// Reservation is the results files ReserveResults reserved: the
// document's name and the stream, in a directory held open.
type Reservation struct {
	loc    resultsLoc
	Stream *results.Stream
}

// Path is the document's path, for messages.
func (r *Reservation) Path() string { return r.loc.path() }

// Discard removes the empty stream (nothing ran) and closes the
// directory.
func (r *Reservation) Discard() {
	_ = r.Stream.Close()
	_ = r.loc.dir.Remove(r.loc.streamName())
	r.loc.close()
}

// ReserveResults reserves the results files of a command that writes a
// results document of its own (erplab replay) by `erplab run`'s rules:
// out is --out (a file X.json, an existing directory, or "" for
// ./erplab-results/<time>-<workload>.json), the stream beside it created
// empty with mode perm. The caller writes the stream's header and
// intervals, then WriteResults; or Discard when nothing runs.
func ReserveResults(out, workload string, perm fs.FileMode) (*Reservation, error) {
	dir := ""
	if st, serr := os.Stat(out); out != "" && serr == nil && st.IsDir() {
		dir, out = out, ""
	}
	if out != "" {
		if d := filepath.Dir(out); d != "." {
			if st, serr := os.Stat(d); serr != nil || !st.IsDir() {
				return nil, fmt.Errorf("--out %s: directory %s does not exist", out, d)
			}
		}
	}
	loc, f, err := reserveResults(out, dir, nil, workload, time.Now(), false, perm)
	if err != nil {
		return nil, err
	}
	return &Reservation{loc: loc, Stream: results.NewStream(f)}, nil
}

// WriteResults ends a reserved stream with the summary line and writes
// the document beside it, through the held directory, as `erplab run`
// does (one line on out naming both, or what could not be written;
// ErrResultsIncomplete then), and closes the directory.
func WriteResults(out io.Writer, doc *results.Document, r *Reservation, perm fs.FileMode) error {
	defer r.loc.close()
	return writeResults(out, doc, r.Stream, r.loc, false, perm)
}
