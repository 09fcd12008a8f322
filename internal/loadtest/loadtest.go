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
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/erplab/erplab/internal/conninfo"
	"github.com/erplab/erplab/internal/engine"
	"github.com/erplab/erplab/internal/exitcode"
	"github.com/erplab/erplab/internal/hostfacts"
	"github.com/erplab/erplab/internal/metrics"
	"github.com/erplab/erplab/internal/opmap"
	"github.com/erplab/erplab/internal/pgcluster"
	"github.com/erplab/erplab/internal/record"
	"github.com/erplab/erplab/internal/results"
	"github.com/erplab/erplab/internal/runenv"
	"github.com/erplab/erplab/internal/safefile"
	"github.com/erplab/erplab/internal/sampler"
	"github.com/erplab/erplab/internal/storm"
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

	// MetricsAddr, when set, serves Prometheus metrics there (host:port)
	// during the run.
	MetricsAddr string

	// Profile samples the server's CPU with perf for the load test
	// (internal/profile) and records the profile as extra.profile; when
	// it cannot run, one warning line says why and the run goes on.
	Profile bool
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
// engine.Outcome.LostAtEnd), or ErrResultsIncomplete (which wins when
// several apply).
func Run(ctx context.Context, opts Options, out io.Writer) (*Result, error) {
	if err := workload.Validate(opts.Workload); err != nil {
		return nil, err
	}
	roles := opts.Workload.Roles()
	if opts.Mix != "" {
		var err error
		if roles, err = workload.OverrideMix(opts.Workload, opts.Mix); err != nil {
			return nil, err
		}
	}
	if len(opts.Stages) == 0 {
		return nil, errors.New("no load profile: give --users/--duration or --stage")
	}
	driver, driven := opts.Workload.(workload.Driver)
	if driven {
		if err := checkDriven(opts); err != nil {
			return nil, err
		}
	}
	maxVUs := engine.MaxTarget(opts.Stages)
	if maxVUs < 1 {
		return nil, errors.New("the load profile never starts a virtual user")
	}
	if opts.Interval <= 0 {
		opts.Interval = time.Second
	}
	segmented := !opts.Segment.Whole()
	if segmented && opts.DSN == "" && !opts.EnvGiven {
		return nil, errors.New("--segment needs the server all agents share: give --dsn (or the PG* environment)")
	}
	if err := opts.Segment.CheckShare(maxVUs, opts.Connections); err != nil {
		return nil, err
	}
	if opts.RunID == "" {
		if segmented {
			return nil, errors.New("--segment needs --run-id: every agent of the run must be given the same one")
		}
		opts.RunID = NewRunID()
	}
	poolSize := opts.Segment.Scale(opts.Connections)
	if poolSize == 0 {
		poolSize = opts.Segment.Scale(maxVUs)
	}

	// The results files, checked and reserved before anything starts.
	var (
		path, streamPath, restarted string
		streamFile                  *os.File
		loc                         resultsLoc
		attempt                     int
		err                         error
	)
	perm := cmp.Or(opts.OutMode, results.DefaultPerm)
	if st, serr := os.Stat(opts.Out); opts.OutRoot == nil && opts.Out != "" && !segmented && serr == nil && st.IsDir() {
		opts.OutDir, opts.Out = opts.Out, "" // --out DIR: DIR/<time>-<workload>.json
	}
	if opts.Out != "" && opts.OutRoot == nil && !opts.NoResults {
		// A typo in --out must not create directories: only the default
		// ./erplab-results (or OutDir) is made on demand.
		if dir := filepath.Dir(opts.Out); dir != "." {
			if st, serr := os.Stat(dir); serr != nil || !st.IsDir() {
				err = fmt.Errorf("--out %s: directory %s does not exist", opts.Out, dir)
			}
		}
	}
	noResults := opts.NoResults
	switch {
	case noResults || err != nil:
	case segmented:
		loc, streamFile, restarted, attempt, err = segmentPath(opts.Out, opts.OutRoot, opts.RunID, opts.Segment, perm)
	default:
		loc, streamFile, err = reserveResults(opts.Out, opts.OutDir, opts.OutRoot, opts.Workload.Name(), time.Now(), opts.ReplaceOut, perm)
	}
	defer loc.close()
	if streamFile != nil {
		path, streamPath = loc.path(), loc.dir.Join(loc.streamName())
	}
	if err != nil && opts.OnNoResults != nil && !segmented {
		opts.OnNoResults(err)
		noResults, err = true, nil
	}
	if err != nil {
		return nil, err
	}
	streaming := false
	defer func() {
		if !streaming && streamPath != "" {
			// The run ended before its stream began: give the name back.
			streamFile.Close()
			loc.dir.Remove(loc.streamName())
		}
	}()

	// The server.
	dsn, serverDesc := opts.DSN, conninfo.Redact(opts.DSN)
	embedded := opts.DSN == "" && !opts.EnvGiven
	force := opts.Force
	if embedded {
		c, err := StartEmbedded(ctx, out, opts.OSUser, poolSize+20, opts.Keep)
		if err != nil {
			if ctx.Err() != nil {
				return nil, ErrInterrupted
			}
			return nil, err
		}
		defer func() {
			if opts.Keep {
				fmt.Fprintln(out, c.Keep("erplab"))
				return
			}
			if err := c.Stop(); err != nil {
				fmt.Fprintf(out, "warning: stopping the embedded server: %v\n", err)
			}
		}()
		dsn, serverDesc, force = c.DSN("erplab"), "embedded", true
	} else if opts.DSN == "" {
		serverDesc = "from PG* environment"
	}

	poolOpts := opts.PoolOptions
	if opts.Observe {
		poolOpts = append(poolOpts[:len(poolOpts):len(poolOpts)], traceStatements)
	}
	pool, err := conninfo.OpenPool(ctx, dsn, poolSize, poolOpts...)
	if err != nil {
		return nil, err
	}
	defer closePool(pool, poolCloseBound)

	setupStart := time.Now()
	if segmented {
		fmt.Fprintf(out, "segment %s: data set-up skipped (a segmented run uses the data set made once before the agents start: erplab init)\n", opts.Segment)
	} else if opts.SkipSetup {
		// set up by an earlier run on this server
	} else if err := opts.Workload.Setup(ctx, pool, workload.SetupOptions{
		Scale: opts.Scale, Seed: opts.Seed, Force: force,
		Progress: func(f string, a ...any) { fmt.Fprintf(out, f+"\n", a...) },
	}); err != nil {
		if errors.Is(err, workload.ErrForeignDatabase) {
			return nil, err
		}
		if ctx.Err() != nil {
			return nil, ErrInterrupted
		}
		return nil, fmt.Errorf("workload set-up: %s", strings.Join(strings.Fields(err.Error()), " "))
	}
	if d := time.Since(setupStart); d > time.Second {
		fmt.Fprintf(out, "set-up took %s\n", d.Round(100*time.Millisecond))
	}
	if driven {
		// The driver may copy the database: no session of ours stays on it.
		pool.Close()
		streaming = true
		if noResults {
			streamFile = nil
		}
		return drive(ctx, opts, driver, dsn, streamFile, loc, perm, out)
	}

	env, err := readEnvironment(ctx, pool, embedded)
	if err != nil {
		return nil, err
	}
	// Open every connection the run will need before it starts: connection
	// set-up is not part of any operation, and a server that cannot take
	// them all is refused now rather than leaving VUs without one.
	if err := warmPool(ctx, pool, poolSize); err != nil {
		rule := opts.PoolRule
		if rule == "" {
			rule = fmt.Sprintf("with --connections %d", opts.Connections)
		}
		return nil, fmt.Errorf("open %d connections: %s (%s)", poolSize, conninfo.Describe(err), rule)
	}

	segInfo := segmentInfo(opts)
	if segmented {
		bound := cmp.Or(opts.MaxClockOffset, DefaultMaxClockOffset)
		offset, rtt, err := measureClock(ctx, pool, 7)
		if err != nil {
			return nil, err
		}
		if offset.Abs() > bound {
			return nil, fmt.Errorf("%w: this agent's clock is %+.1fms off the server's (round trip %.1fms), more than --max-clock-offset %s: synchronise the clocks (chrony, NTP)",
				ErrClockOffset, float64(offset)/1e6, float64(rtt)/1e6, bound)
		}
		segInfo.ClockOffsetMs, segInfo.ClockRTTMs = round3(float64(offset)/1e6), round3(float64(rtt)/1e6)
		if restarted != "" {
			segInfo.Restart = attempt
			segInfo.Incomplete = append(segInfo.Incomplete, fmt.Sprintf("restarted: an earlier attempt of this segment left %s", restarted))
			fmt.Fprintf(out, "segment %s: an earlier attempt left %s; this attempt runs into %s and marks the segment incomplete\n", opts.Segment, restarted, path)
		}
	}

	stream := results.DiscardStream()
	if !noResults {
		stream = results.NewStreamNamed(streamFile, streamPath)
	}
	streaming = true
	defer stream.Close()

	ops := opts.Workload.Operations()
	recOps := make([]record.OpInfo, len(ops))
	params := Parameters{
		Workload: opts.Workload.Name(), Scale: opts.Scale, Seed: opts.Seed, MaxVUs: maxVUs,
		WarmupS: opts.Warmup.Seconds(), Think: opts.Think.String(), Connections: opts.Connections,
		MaxErrors: opts.MaxErrors, IntervalS: opts.Interval.Seconds(), Server: serverDesc,
	}
	for _, r := range roles {
		params.Roles = append(params.Roles, roleJSON{r.Name, r.Share, r.Mix})
	}
	for i, op := range ops {
		recOps[i] = record.OpInfo{Name: op.Name, Target: op.Target, Priority: op.Priority}
		params.Operations = append(params.Operations, opJSON{op.Name, float64(op.Target) / 1e6, op.Priority, op.Description})
	}
	for _, s := range opts.Stages {
		params.Stages = append(params.Stages, stageJSON{s.Duration.Seconds(), s.Target})
	}
	for _, r := range opts.Rate {
		params.RateStages = append(params.RateStages, rateJSON{r.Duration.Seconds(), r.Rate})
	}
	params.LatencyLimitMs = float64(opts.LatencyLimit) / float64(time.Millisecond)
	params.TxPerVU = opts.TxPerVU
	doc := &results.Document{
		Format: results.Format, Schema: results.SchemaVersion, Version: opts.Version, CommandLine: conninfo.RedactArgs(opts.CommandLine),
		Workload: opts.Workload.Name(), Status: results.StatusRunning,
	}
	doc.Environment, _ = json.Marshal(env)
	doc.Parameters, _ = json.Marshal(params)
	doc.RunID, doc.ConfigHash, doc.Segment = opts.RunID, configHash(params, opts), segInfo

	// perf first: its start-up (reading every process's maps, seconds on
	// a busy host) must not eat the run's schedule, and it starts before
	// the --start-at barrier so that it does not delay the segment.
	prof := startProfile(ctx, opts.Profile, dsn, func(format string, args ...any) { fmt.Fprintf(out, format+"\n", args...) })
	defer prof.abort()
	late, err := waitStart(ctx, opts.StartAt, func(f string, a ...any) { fmt.Fprintf(out, f+"\n", a...) })
	if err != nil {
		stream.Close()
		if streamPath != "" {
			loc.dir.Remove(loc.streamName()) // nothing ran: no attempt to report
		}
		return nil, err
	}
	if late > StartGrace {
		reason := fmt.Sprintf("late start: began %s after --start-at %s", late.Round(time.Millisecond), opts.StartAt.Format(time.RFC3339Nano))
		fmt.Fprintf(out, "warning: %s; the run goes on and its segment is marked incomplete\n", reason)
		if segInfo != nil {
			segInfo.Incomplete = append(segInfo.Incomplete, reason)
		}
	}
	start := time.Now()
	doc.StartedAt = start
	if err := stream.Write(results.StreamLine{Type: "header", Header: doc}); err != nil {
		return nil, err
	}
	rec := record.New(recOps, start, opts.Warmup, opts.Interval)
	cpu := newCPUMeter(start)

	// Metrics and observations, on the run's time base.
	var (
		outMu sync.Mutex // serialises lines from the progress and sampler goroutines
		exp   *metrics.Exporter
		obs   *sampler.Session
		opm   *opmap.Map // backend PID -> key operation, for the samplers
	)
	say := func(format string, args ...any) {
		outMu.Lock()
		defer outMu.Unlock()
		fmt.Fprintf(out, format+"\n", args...)
	}
	if opts.MetricsAddr != "" {
		if exp, err = metrics.New(metrics.Options{}); err != nil {
			return nil, fmt.Errorf("metrics: %w", err)
		}
		exp.SetOpSource(metrics.RecorderSource(rec))
		msrv, err := metrics.Serve(ctx, opts.MetricsAddr, exp.Handler())
		if err != nil {
			return nil, err
		}
		defer msrv.Close()
		say("metrics: http://%s/metrics", msrv.Addr())
	}
	if opts.Observe {
		names := make([]string, len(ops))
		for i, op := range ops {
			names[i] = op.Name
		}
		opm = opmap.New(names)
		so := sampler.SessionOptions{Interval: cmp.Or(opts.ObserveInterval, opts.Interval), Options: sampler.Options{Ops: opm}}
		so.OnStorm = func(e storm.Event) {
			if e.EndT == nil {
				say("storm at %.0f s: %s", e.T, e.Message)
			}
			if exp != nil {
				exp.ObserveStorm(e)
			}
		}
		if exp != nil {
			so.OnSample = exp.ObserveSample
		}
		// Sampling goes on through the graceful stop; Stop ends it.
		if obs, err = sampler.Start(context.WithoutCancel(ctx), dsn, start, so); err != nil {
			say("warning: observations off: %v", err)
			obs, opm = nil, nil
		}
	}
	opm = profileOpMap(opts.Profile, opm, ops)

	fmt.Fprintf(out, "erplab run: workload %s, %d VUs max on %s, %s, server %s (PostgreSQL %s)\n",
		opts.Workload.Name(), maxVUs, poolDesc(opts.Connections), profileDesc(opts), serverDesc, shortVersion(env.Server.Version))
	if segmented {
		fmt.Fprintf(out, "run %s, segment %s (%s:%s of %s): this agent runs %d of the %d VUs max on %s, %.4g of the arrival rate\n",
			opts.RunID, opts.Segment, segInfo.From, segInfo.To, segInfo.Sequence, opts.Segment.Scale(maxVUs), maxVUs, poolDesc(opts.Segment.Scale(opts.Connections)), opts.Segment.Length())
	}
	if !noResults {
		fmt.Fprintf(out, "streaming results to %s\n", streamPath)
	}

	health := &engine.Health{}
	cfg := engine.Config{
		Workload: opts.Workload, Roles: roles, Stages: opts.Stages, Warmup: opts.Warmup,
		Think: opts.Think, Connections: opts.Connections, MaxErrors: opts.MaxErrors,
		Seed: opts.Seed, GracefulStop: opts.GracefulStop, ServerGone: opts.ServerGoneAfter, Health: health,
		Rate: opts.Rate, LatencyLimit: opts.LatencyLimit, TxPerVU: opts.TxPerVU, Ops: opm, OnSample: opts.OnSample, OnSkip: opts.OnSkip,
		RateFromFirstArrival: opts.RateFromFirstArrival, Segment: opts.Segment,
		OnInterval: func(iv results.Interval) {
			cpu.interval(time.Now())
			if stream.Err() != nil {
				return // reported when it failed
			}
			if err := stream.Write(results.StreamLine{Type: "interval", Interval: &iv}); err != nil {
				// At once, whatever the progress period: the run goes on
				// and the final document will hold everything.
				say("warning: at t=%.1f s: %v; the stream stops here (intervals up to t=%s s kept), the run goes on and the final document will hold everything",
					iv.T, err, fmtSeconds(stream.LastT()))
			}
		},
	}
	progressDone := make(chan struct{})
	var progressWG sync.WaitGroup
	if opts.Progress > 0 {
		progressWG.Add(1)
		go func() {
			defer progressWG.Done()
			printProgress(say, rec, obs, health, stream, opts, progressDone)
		}()
	}
	catBefore := catalogSizes(ctx, pool)
	var stressRun *stress.Run
	if opts.Stress != nil {
		if stressRun, err = stress.Start(ctx, *opts.Stress); err != nil {
			return nil, err
		}
		say("stress workers started beside the load: %s", stressDesc(*opts.Stress))
	}
	prof.follow(opm, say)
	outcome, runErr := engine.Run(ctx, pool, cfg, rec)
	// The load's own span ends here: what follows (perf's stop and its
	// parse, the stress workers, the samplers) must not count in the run's
	// duration, its rates or the generator's CPU.
	end := loadEnd(start, outcome)
	agent := cpu.finish(end)
	profSum := prof.end(ctx, say)
	var stressRep *stress.Report
	if stressRun != nil {
		r := stressRun.Stop()
		stressRep = &r
	}
	close(progressDone)
	progressWG.Wait()
	var storms []storm.Event
	if obs != nil {
		obs.Stop()
		storms = obs.Storms()
	}
	// A server that is not answering would hold every clean-up query for
	// its whole timeout: skip them.
	frozen := outcome.NotAnsweringAtEnd() || errors.Is(runErr, engine.ErrNotAnswering) || outcome.StuckClosed > 0

	doc.EndedAt = end
	doc.Status = outcome.Status
	doc.ServerUnresponsive = outcome.Unresponsive
	if outcome.NotAnsweringAtEnd() && outcome.Status == results.StatusCompleted {
		sp := outcome.Unresponsive[len(outcome.Unresponsive)-1]
		doc.Status = results.StatusStalled.Because(fmt.Sprintf("the server answered nothing from t=%s s to the end (%d operations waiting)", fmtSeconds(sp.FromS), sp.MaxWaiting))
	}
	if l := outcome.LostAtEnd; l != nil && doc.Status == results.StatusCompleted {
		doc.Status = results.StatusLost.Because(fmt.Sprintf("no operation succeeded from t=%s s to the end (%s)", fmtSeconds(l.FromS), l.Condition.Gone()))
	}
	if opts.AbortedBy != nil && doc.Status == results.StatusCompleted {
		if why := opts.AbortedBy(); why != "" {
			doc.Status = results.StatusAborted.Because(why)
		}
	}
	scored := end.Sub(start) - opts.Warmup
	if scored < 0 {
		scored = 0
	}
	doc.Operations = rec.Results(scored)
	if d, ok := opts.Workload.(workload.Describer); ok {
		params.WorkloadDetails = d.Describe()
		doc.Parameters, _ = json.Marshal(params)
	}
	v, ok := results.Integral(doc.Operations)
	doc.Integral = results.NewIntegralScore(v, ok)
	doc.Totals = rec.Totals(scored)
	doc.Series = rec.Series()
	doc.Agent = agent
	if segInfo != nil {
		segInfo.Incomplete = append(segInfo.Incomplete, incompleteReasons(doc, outcome)...)
	}
	if doc.Stages, err = results.StageFigures(doc); err != nil {
		say("warning: per-stage figures: %v", err)
	}
	cat := CatalogGrowth{Before: catBefore}
	if !frozen {
		cat.After = catalogSizes(context.WithoutCancel(ctx), pool)
	}
	doc.Extra = map[string]json.RawMessage{}
	if cat.Before != nil && cat.After != nil {
		doc.Extra["catalog"], _ = json.Marshal(cat)
	}
	if obs != nil {
		doc.Extra["observations"] = obs.Observations()
	}
	if stressRep != nil {
		doc.Extra["stress"], _ = json.Marshal(stressRep)
	}
	if profSum != nil {
		doc.Extra["profile"], _ = json.Marshal(profSum)
	}

	if err := stream.Err(); err != nil {
		doc.StreamError = err.Error()
	}
	// The summary first: nothing the run measured depends on the disk.
	PrintSummary(out, doc, outcome)
	printAgent(out, doc)
	if r, ok := opts.Workload.(workload.Reporter); ok {
		fmt.Fprintln(out)
		r.Report(out, doc)
	}
	fmt.Fprintln(out)
	printCatalog(out, cat)
	printStorms(out, storms)
	PrintObservations(out, doc)
	if stressRep != nil {
		fmt.Fprintln(out, "\nstress workers beside the load:")
		stress.WriteTable(out, *stressRep)
	}
	printProfile(out, profSum)
	res := &Result{Doc: doc, Path: path, StreamPath: streamPath}
	var writeErr error
	if noResults {
		stream.Close()
	} else if writeErr = writeResults(out, doc, stream, loc, opts.ReplaceOut && opts.Out != "", perm); writeErr != nil {
		res.Path = ""
	}
	switch {
	case writeErr != nil:
		return res, writeErr
	case runErr != nil:
		return res, runErr
	case outcome.NotAnsweringAtEnd() && outcome.Status == results.StatusCompleted:
		return res, fmt.Errorf("%w at t=%s s and had not answered by the end of the run%s",
			engine.ErrNotAnswering, fmtSeconds(outcome.Unresponsive[len(outcome.Unresponsive)-1].FromS), resultsAt(path))
	case doc.Status.Kind() == results.StatusLost:
		return res, fmt.Errorf("%w: no operation succeeded from t=%s s to the end of the run (%s)%s",
			engine.ErrServerGone, fmtSeconds(outcome.LostAtEnd.FromS), outcome.LostAtEnd.Condition.Gone(), resultsAt(path))
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

// StartEmbedded starts erplab's throwaway server for a command that was
// given no server: it first removes clusters left by killed erplab
// processes, then starts one sized for maxConnections, creates database
// "erplab" (see its DSN with c.DSN("erplab")) and says so on out. keep
// tells whether the cluster will be handed to the user at the end; if
// not, it dies with this process even when erplab is killed outright.
func StartEmbedded(ctx context.Context, out io.Writer, osUser string, maxConnections int, keep bool) (*pgcluster.Cluster, error) {
	return startEmbedded(ctx, out, pgcluster.Options{OSUser: osUser, MaxConnections: maxConnections, StopWithParent: !keep})
}

// StartEmbeddedWaits is StartEmbedded (not kept) with pg_wait_sampling
// preloaded beside pg_stat_statements when it is installed
// (pgcluster.Options.WaitSampling): erplab ab's server, whose run
// databases get both extensions.
func StartEmbeddedWaits(ctx context.Context, out io.Writer, osUser string, maxConnections int) (*pgcluster.Cluster, error) {
	return startEmbedded(ctx, out, pgcluster.Options{OSUser: osUser, MaxConnections: maxConnections, StopWithParent: true, WaitSampling: true})
}

func startEmbedded(ctx context.Context, out io.Writer, opts pgcluster.Options) (*pgcluster.Cluster, error) {
	if _, err := pgcluster.ReapOrphans(ctx, out); err != nil {
		return nil, err
	}
	fmt.Fprintf(out, "no --dsn: starting a throwaway PostgreSQL (initdb into a temporary directory)...\n")
	t0 := time.Now()
	c, err := pgcluster.Start(ctx, opts)
	if err != nil {
		return nil, err
	}
	if err := c.CreateDatabase(ctx, "erplab"); err != nil {
		c.Stop()
		return nil, fmt.Errorf("embedded server: %w", err)
	}
	// Statement statistics for doctor and diagnosis, when the contrib
	// library is preloaded (pgcluster does so when it is installed).
	if conn, err := pgx.Connect(ctx, c.DSN("erplab")); err == nil {
		var libs string
		if conn.QueryRow(ctx, `SELECT current_setting('shared_preload_libraries')`).Scan(&libs) == nil && strings.Contains(libs, "pg_stat_statements") {
			conn.Exec(ctx, `CREATE EXTENSION IF NOT EXISTS pg_stat_statements`) //nolint:errcheck // optional
		}
		conn.Close(ctx)
	}
	fmt.Fprintf(out, "PostgreSQL %s ready in %s (data %s, port %d, Unix socket only)\n", c.Version(), time.Since(t0).Round(10*time.Millisecond), c.Dir(), c.Port())
	return c, nil
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

// CatalogGrowth is the size of the system catalogs that temp tables grow,
// before and after the run (bytes by catalog name; see
// runenv.CatalogTables). It goes into the results as extra.catalog.
type CatalogGrowth struct {
	Before map[string]int64 `json:"before_bytes"`
	After  map[string]int64 `json:"after_bytes"`
}

// catalogSizes measures the catalogs, or returns nil if it cannot (a
// server gone mid-run): the results are written without them.
func catalogSizes(ctx context.Context, pool *pgxpool.Pool) map[string]int64 {
	cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	conn, err := pool.Acquire(cctx)
	if err != nil {
		return nil
	}
	defer conn.Release()
	m, err := runenv.CatalogSizes(cctx, conn.Conn())
	if err != nil {
		return nil
	}
	return m
}

func printCatalog(w io.Writer, c CatalogGrowth) {
	if c.Before == nil || c.After == nil {
		return
	}
	parts := make([]string, 0, len(c.Before))
	for _, name := range runenv.CatalogTables() {
		parts = append(parts, fmt.Sprintf("%s %s -> %s", name, fmtBytes(c.Before[name]), fmtBytes(c.After[name])))
	}
	fmt.Fprintf(w, "catalog size before -> after: %s\n", strings.Join(parts, ", "))
}

// fmtBytes prints a size in binary units (kB = 1024 bytes, as PostgreSQL's
// pg_size_pretty does).
func fmtBytes(b int64) string {
	switch {
	case b >= 1<<30:
		return fmt.Sprintf("%.1f GB", float64(b)/(1<<30))
	case b >= 1<<20:
		return fmt.Sprintf("%.1f MB", float64(b)/(1<<20))
	default:
		return fmt.Sprintf("%d kB", b>>10)
	}
}

// printStorms lists the storms the samplers saw, with their times.
func printStorms(w io.Writer, storms []storm.Event) {
	if len(storms) == 0 {
		return
	}
	fmt.Fprintf(w, "storms (%d):\n", len(storms))
	for _, e := range storms {
		end := "until the end"
		if e.EndT != nil {
			end = fmt.Sprintf("to %.0f s", *e.EndT)
		}
		fmt.Fprintf(w, "  at %.0f s %s, peak %d active: %s\n", e.T, end, e.Peak, e.Message)
	}
}

func stressDesc(s stress.Spec) string {
	var parts []string
	for _, kv := range []struct {
		name string
		n    int
	}{{"cpu", s.CPU}, {"io", s.IO}, {"vm", s.VM}} {
		if kv.n > 0 {
			parts = append(parts, fmt.Sprintf("%s=%d", kv.name, kv.n))
		}
	}
	if s.VM > 0 && s.VMBytes > 0 {
		parts = append(parts, fmt.Sprintf("vm-bytes=%d", s.VMBytes))
	}
	return strings.Join(parts, ",")
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
