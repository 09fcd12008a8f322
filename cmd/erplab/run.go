package main

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"runtime"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/erplab/erplab/internal/conninfo"
	"github.com/erplab/erplab/internal/engine"
	"github.com/erplab/erplab/internal/exitcode"
	"github.com/erplab/erplab/internal/loadtest"
	wpgbench "github.com/erplab/erplab/internal/pgbench"
	"github.com/erplab/erplab/internal/results"
	"github.com/erplab/erplab/internal/stress"
	"github.com/erplab/erplab/internal/workload"
	_ "github.com/erplab/erplab/internal/workload/all" // every built-in workload
)

// workloadByName builds the registered workload name with its own options
// (e.g. erp's --temp-style) as given on fs; errors are usage errors.
func workloadByName(name string, fs *pflag.FlagSet) (workload.Workload, error) {
	m, err := workload.Find(name)
	if err != nil {
		return nil, err
	}
	if flag, owner, foreign := m.ForeignFlag(fs); foreign {
		return nil, fmt.Errorf("--%s applies to --workload %s only", flag, owner)
	}
	return workload.Build(name, m.Values(fs))
}

type runFlags struct {
	// ignoreEnv names a command (ab) that starts its own server unless
	// --dsn or --dsn-file is given: the PG* variables name no server.
	ignoreEnv                              string
	dsn, workload, mix, think, out, osUser string
	dsnFile                                string
	users, connections                     int
	ramp, duration, warmup, progress       time.Duration
	gracefulStop, interval                 time.Duration
	serverGoneAfter                        time.Duration
	stages                                 []string
	scale, apdexMin                        float64
	seed                                   uint64
	maxErrors                              int64
	force, keep, observe                   bool
	observeInterval                        time.Duration
	metricsAddr                            string
	listOps                                bool
	stress                                 string
	scripts                                scriptFlags
	segments                               segmentFlags
	outMode                                fs.FileMode
}

func newRunCmd() *cobra.Command {
	cmd, _ := newRunCmdFlags()
	return cmd
}

// newRunCmdFlags is the run command and the values its flags fill in;
// erplab capacity borrows its flags (capacity.go).
func newRunCmdFlags() (*cobra.Command, *runFlags) {
	f := &runFlags{}
	cmd := &cobra.Command{
		Use:   "run",
		Short: "Run a load test and score it with APDEX",
		Long: `Run a load test: virtual users (VUs) follow a load profile, each repeatedly picks a key
operation from its role's mix, borrows a connection from a pool for that one operation (like
an application server), then thinks. Every operation's response time is recorded in an
HdrHistogram and scored with APDEX against its target time T; the integral APDEX is the
priority-weighted mean of the operations' scores.

Without --dsn (and no PG* environment) erplab starts a throwaway PostgreSQL from the
installed server binaries and removes it at the end.

Exit codes: 0 done, 1 error, 2 bad usage, 6 a results file could not be written (full
disk; the summary is printed and one line says where everything so far is), 7 the server
stopped answering or was lost (every operation failing: unreachable, shutting down, or not
back from start-up / recovery) and had not come back by the end (or for
--server-gone-after), 99
integral APDEX below --apdex-min, 130 interrupted (results so far are written; a second
Ctrl-C exits at once).`,
		Example: `  erplab run --workload smoke --duration 30s
  erplab run --dsn 'host=db1 dbname=erp user=bench' --users 200 --ramp 2m --duration 10m --warmup 2m
  erplab run --stage 30s:100 --stage 10m:100 --stage 30s:0 --connections 40 --think 1s-5s`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if f.listOps {
				w, err := f.listWorkload(cmd)
				if err != nil {
					return withCode(exitUsage, err)
				}
				listOperations(cmd.OutOrStdout(), w)
				return nil
			}
			scripts := f.scriptMode()
			opts, err := f.buildOptions(cmd)
			opts.Profile, _ = cmd.Flags().GetBool("profile")
			if err != nil {
				if scripts {
					// pgbench exits 1 for script and option errors.
					return exitcode.Override(exitcode.Error, err)
				}
				return withCode(exitUsage, err)
			}
			if scripts && cmd.Flags().Changed("jobs") {
				// pgbench -j N runs the clients on N threads: so do we.
				prev := runtime.GOMAXPROCS(f.scripts.jobs)
				defer runtime.GOMAXPROCS(prev)
			}
			// Its error carries its exit code (interrupted, results
			// incomplete, not answering or lost: loadtest and engine).
			res, err := loadtest.Run(cmd.Context(), opts, cmd.OutOrStdout())
			if err != nil && res != nil && !errors.Is(err, loadtest.ErrResultsIncomplete) && !errors.Is(err, engine.ErrNotAnswering) {
				if errors.Is(err, engine.ErrAborted) {
					err = fmt.Errorf("%w; results so far: %s", err, res.Path)
				}
				if scripts && (errors.Is(err, engine.ErrAborted) || errors.Is(err, engine.ErrServerGone)) {
					return exitcode.Override(exitcode.ScriptRun, err) // pgbench's clients aborted, a lost server too
				}
			}
			if err != nil {
				return err
			}
			if res.Doc.Status == results.StatusInterrupted {
				return withCode(exitInterrupted, fmt.Errorf("interrupted; results so far: %s", res.Path))
			}
			if scripts {
				if err := scriptFailures(res, opts.Workload); err != nil {
					return withCode(exitScriptRun, err)
				}
			}
			if cmd.Flags().Changed("apdex-min") {
				return checkApdexMin(res.Doc.Integral, f.apdexMin)
			}
			return nil
		},
	}
	cmd.SetFlagErrorFunc(func(c *cobra.Command, err error) error {
		err = fmt.Errorf("%w (see '%s --help')", err, c.CommandPath())
		if looksLikeScriptRun(os.Args[1:]) {
			return withCode(exitError, err) // pgbench: 1 for option errors
		}
		return withCode(exitUsage, err)
	})
	fl := cmd.Flags()
	fl.StringVar(&f.dsn, "dsn", "", "server to test (libpq key=value or URL); default: PG* environment, else a throwaway embedded server")
	addDSNFileFlag(fl, &f.dsnFile, "dsn")
	fl.StringVar(&f.workload, "workload", "smoke", workload.Help("workload to run:"))
	fl.Float64VarP(&f.scale, "scale", "s", 0, "data scale factor of the workload (0 = the workload's default: smoke 1, erp 0.1 = about 130 MB; erp 1 = about 1.4 GB; pgbench 1 = 100,000 accounts)")
	workload.AddFlags(fl) // erp's --temp-style and --separator
	fl.Uint64Var(&f.seed, "seed", 1, "seed of data generation and of the VUs' random choices")
	fl.BoolVar(&f.force, "force", false, "allow writing into a database that holds objects (tables, views, functions...) erplab did not create")
	fl.BoolVar(&f.listOps, "list-ops", false, "list the workload's key operations (T, priority, what they do) and roles, and exit")
	fl.StringVar(&f.mix, "mix", "", "override the roles' operation mix: op=weight,op=weight")
	fl.IntVar(&f.users, "users", 10, "virtual users to ramp up to (ignored with --stage)")
	fl.DurationVar(&f.ramp, "ramp", 0, "ramp-up time from 0 to --users (ignored with --stage)")
	fl.DurationVar(&f.duration, "duration", time.Minute, "time to hold --users after the ramp-up (ignored with --stage)")
	fl.StringArrayVar(&f.stages, "stage", nil, "load profile step DURATION:VUS, repeatable (e.g. --stage 30s:100 --stage 10m:100 --stage 30s:0)")
	fl.DurationVar(&f.warmup, "warmup", 0, "operations started in this first part of the run are recorded apart and not scored")
	fl.StringVar(&f.think, "think", "500ms-1500ms", "think time between a VU's operations: 2s (fixed), 1s-5s (uniform), exp:3s (exponential), 0")
	fl.IntVar(&f.connections, "connections", -1, "database connections shared by the VUs; 0 = one per VU; -1 = min(max VUs, 100)")
	fl.Int64Var(&f.maxErrors, "max-errors", 0, "stop the run after this many failed operations (0 = never)")
	fl.Float64Var(&f.apdexMin, "apdex-min", 0, "exit with code 99 when the integral APDEX is below this")
	fl.StringVar(&f.out, "out", "", "results file, or an existing directory for <time>-<workload>.json (default ./erplab-results/<time>-<workload>.json); never an existing file")
	addOutModeFlag(fl, &f.outMode)
	f.progress = 5 * time.Second
	fl.VarP(progressValue{&f.progress}, "progress", "P", "progress line period, a duration or whole seconds as pgbench -P (0 = none)")
	fl.DurationVar(&f.interval, "interval", time.Second, "time-series resolution of the results")
	fl.DurationVar(&f.gracefulStop, "graceful-stop", 10*time.Second, "at the end, how long VUs may finish their current operation")
	addServerGoneFlag(fl, &f.serverGoneAfter)
	fl.BoolVar(&f.observe, "observe", true, "sample sessions, wait events, pg_stat_database, catalogs and host CPU during the run and record them (--observe=false to skip)")
	fl.DurationVar(&f.observeInterval, "observe-interval", 0, "sampling period of the observations (default: --interval; at least 100ms)")
	fl.StringVar(&f.stress, "stress", "", "run stress workers beside the load: vm=2, cpu=1, io=1, vm-bytes=512M, thp=huge|nohuge (see erplab stress)")
	fl.StringVar(&f.metricsAddr, "metrics-addr", "", "serve Prometheus metrics (server, host, per-operation latency and APDEX) at host:port during the run")
	fl.StringVar(&f.osUser, "os-user", "", "embedded server: OS user to run PostgreSQL as when erplab runs as root (default postgres)")
	fl.BoolVar(&f.keep, "keep", false, "embedded server: leave it running at the end and print how to connect and stop it")
	addScriptFlags(fl, &f.scripts)
	addSegmentFlags(fl, &f.segments)
	fl.Bool("profile", false, "sample the server's CPU with perf during the load (local server; see erplab profile) and record it in the results")
	return cmd, f
}

// addServerGoneFlag registers --server-gone-after into d.
func addServerGoneFlag(fl *pflag.FlagSet, d *time.Duration) {
	fl.DurationVar(d, "server-gone-after", engine.DefaultServerGone,
		"abort the run when the server has been gone (connection errors, \"shutting down\" refusals) or has answered nothing for this long; \"starting up\" / \"in recovery\" refusals do not count, but a run that ends in them ends \"lost\", not \"completed\"")
}

// checkApdexMin fails with exit code 99 when the integral APDEX is below
// min or has no samples.
func checkApdexMin(i results.IntegralScore, min float64) error {
	switch {
	case i.NS():
		return withCode(exitThreshold, fmt.Errorf("integral APDEX is NS (no samples); --apdex-min %g not met", min))
	case i.Value < min:
		return withCode(exitThreshold, fmt.Errorf("integral APDEX %.3f (%s) is below --apdex-min %g", i.Value, i.Rating, min))
	}
	return nil
}

// buildOptions is the run's options from its parsed flags, segment
// options included: every check erplab run makes before it connects
// (erplab k8s render checks its run flags with it). Errors are one-line
// usage errors.
func (f *runFlags) buildOptions(cmd *cobra.Command) (loadtest.Options, error) {
	opts, err := f.options(cmd)
	if err != nil {
		return opts, err
	}
	return opts, f.segments.apply(cmd, &opts)
}

func (f *runFlags) options(cmd *cobra.Command) (loadtest.Options, error) {
	var (
		w       workload.Workload
		stages  []engine.Stage
		txPerVU int
		err     error
	)
	if err := checkListenAddr("--metrics-addr", f.metricsAddr); err != nil {
		return loadtest.Options{}, err
	}
	rate, err := f.scriptRate(cmd)
	if err != nil {
		return loadtest.Options{}, err
	}
	if d := engine.TotalRateDuration(rate); d > 0 && !cmd.Flags().Changed("duration") {
		// A rate profile with no explicit length runs to its end.
		f.duration = d - f.ramp
	}
	scripts := f.scriptMode()
	if scripts {
		if cmd.Flags().Changed("workload") && f.workload != wpgbench.Name {
			return loadtest.Options{}, fmt.Errorf("--workload %s does not run pgbench scripts; drop -f/-b/-S/-N or use --workload pgbench", f.workload)
		}
		f.workload = wpgbench.Name
		if stages, txPerVU, err = f.scriptProfile(cmd); err != nil {
			return loadtest.Options{}, err
		}
		if w, err = f.scriptWorkload(cmd, stages, txPerVU); err != nil {
			return loadtest.Options{}, err
		}
		if !cmd.Flags().Changed("think") {
			f.think = "0"
		}
		if !cmd.Flags().Changed("connections") {
			f.connections = 0
		}
		if !cmd.Flags().Changed("progress") {
			f.progress = 0 // pgbench prints progress only with -P
		}
	} else {
		if err := f.checkNotScripts(cmd); err != nil {
			return loadtest.Options{}, err
		}
		if w, err = workloadByName(f.workload, cmd.Flags()); err != nil {
			return loadtest.Options{}, err
		}
	}
	driver, driven := w.(workload.Driver)
	if driven {
		if err := refuseDriven(cmd, f.workload); err != nil {
			return loadtest.Options{}, err
		}
	}
	m, err := workload.Find(f.workload)
	if err != nil {
		return loadtest.Options{}, err
	}
	if !cmd.Flags().Changed("scale") {
		f.scale = m.DefaultScale
	}
	if !scripts && m.MaxScale > 0 && (!(f.scale > 0) || f.scale > m.MaxScale) {
		return loadtest.Options{}, fmt.Errorf("--scale must be in (0, %g] for %s, got %g", m.MaxScale, m.Name, f.scale)
	}
	if f.mix != "" {
		if _, err := workload.OverrideMix(w, f.mix); err != nil {
			return loadtest.Options{}, err
		}
	}
	if f.apdexMin < 0 || f.apdexMin > 1 {
		return loadtest.Options{}, fmt.Errorf("--apdex-min must be between 0 and 1, got %g", f.apdexMin)
	}
	if scripts {
		// the profile came from pgbench's options
	} else if len(f.stages) > 0 {
		for _, name := range []string{"users", "ramp", "duration"} {
			if cmd.Flags().Changed(name) {
				return loadtest.Options{}, fmt.Errorf("--stage replaces --users, --ramp and --duration; drop --%s", name)
			}
		}
		for _, s := range f.stages {
			st, err := engine.ParseStage(s)
			if err != nil {
				return loadtest.Options{}, fmt.Errorf("--stage: %w", err)
			}
			stages = append(stages, st)
		}
		if engine.TotalDuration(stages) <= 0 {
			return loadtest.Options{}, errors.New("--stage: the stages last no time; give a duration > 0")
		}
	} else if stages, err = engine.SimpleStages(f.users, f.ramp, f.duration); err != nil {
		return loadtest.Options{}, err
	}
	if driven {
		// The load is the driver's own (a replay: the captured sessions,
		// --users-x copies of each): one "user", connections as it opens.
		stages = []engine.Stage{{Duration: f.duration, Target: 1}}
		f.connections = driver.Connections(1)
	}
	maxVUs := engine.MaxTarget(stages)
	if maxVUs < 1 {
		return loadtest.Options{}, errors.New("--stage: no stage has VUs > 0")
	}
	think, err := engine.ParseThinkTime(f.think)
	if err != nil {
		return loadtest.Options{}, fmt.Errorf("--think: %w", err)
	}
	conns := f.connections
	switch {
	case conns < -1:
		return loadtest.Options{}, fmt.Errorf("--connections must be -1 (min(max VUs, 100)), 0 (one per VU) or a count > 0, got %d", conns)
	case conns == -1:
		conns = min(maxVUs, 100)
	}
	if f.warmup < 0 || f.progress < 0 || f.gracefulStop < 0 {
		return loadtest.Options{}, errors.New("--warmup, --progress and --graceful-stop must not be negative")
	}
	if f.serverGoneAfter < time.Second {
		return loadtest.Options{}, fmt.Errorf("--server-gone-after must be at least 1s, got %s", f.serverGoneAfter)
	}
	if f.warmup >= engine.TotalDuration(stages) {
		return loadtest.Options{}, fmt.Errorf("--warmup %s covers the whole run (%s): nothing would be scored", f.warmup, engine.TotalDuration(stages))
	}
	if f.observeInterval != 0 && f.observeInterval < 100*time.Millisecond {
		return loadtest.Options{}, fmt.Errorf("--observe-interval must be at least 100ms, got %s", f.observeInterval)
	}
	if f.interval < 100*time.Millisecond {
		return loadtest.Options{}, fmt.Errorf("--interval must be at least 100ms, got %s", f.interval)
	}
	if !(f.scale > 0) {
		return loadtest.Options{}, fmt.Errorf("--scale must be > 0, got %g", f.scale)
	}
	if f.maxErrors < 0 {
		return loadtest.Options{}, fmt.Errorf("--max-errors must be >= 0, got %d", f.maxErrors)
	}
	var stressSpec *stress.Spec
	if f.stress != "" {
		sp, err := stress.ParseSpec(f.stress)
		if err != nil {
			return loadtest.Options{}, fmt.Errorf("--stress: %w", err)
		}
		stressSpec = &sp
	}
	dsn, envGiven, err := f.resolveDSN(cmd)
	if err != nil {
		return loadtest.Options{}, err
	}
	if fl := cmd.Flags().Lookup("replay-template"); fl != nil {
		if w := conninfo.ArgvWarning("--replay-template", fl.Value.String(), "--replay-template-file", ""); w != "" {
			fmt.Fprintln(cmd.ErrOrStderr(), w)
		}
	}
	if (dsn != "" || envGiven) && (f.keep || f.osUser != "") {
		return loadtest.Options{}, errors.New("--keep and --os-user apply to the embedded server only; drop them or drop --dsn")
	}
	if d := engine.TotalRateDuration(rate); d > engine.TotalDuration(stages) {
		return loadtest.Options{}, fmt.Errorf("the rate profile lasts %s but the run only %s: make the run at least as long (--duration, -T) or shorten --rate-stage", d, engine.TotalDuration(stages))
	}
	if f.scripts.latencyLimitMs < 0 || math.IsNaN(f.scripts.latencyLimitMs) {
		return loadtest.Options{}, fmt.Errorf("invalid latency limit: %g", f.scripts.latencyLimitMs)
	}
	return loadtest.Options{
		Rate: rate, LatencyLimit: time.Duration(f.scripts.latencyLimitMs * float64(time.Millisecond)), TxPerVU: txPerVU,
		DSN: dsn, EnvGiven: envGiven, Force: f.force, OSUser: f.osUser, Keep: f.keep,
		Workload: w, Mix: f.mix, Scale: f.scale, Seed: f.seed,
		Stages: stages, Warmup: f.warmup, Think: think, Connections: conns,
		MaxErrors: f.maxErrors, GracefulStop: f.gracefulStop, ServerGoneAfter: f.serverGoneAfter, Interval: f.interval, Progress: f.progress,
		Stress: stressSpec, Observe: f.observe, ObserveInterval: f.observeInterval, MetricsAddr: f.metricsAddr,
		Out: f.out, OutMode: f.outMode, CommandLine: conninfo.RedactArgs(append([]string{"erplab"}, os.Args[1:]...)), Version: version,
	}, nil
}

// resolveDSN is resolveDSN of f's --dsn and --dsn-file, except for a
// command that ignores the environment (f.ignoreEnv) given neither: it
// says in one line that the PG* variables set are ignored.
func (f *runFlags) resolveDSN(cmd *cobra.Command) (string, bool, error) {
	if f.ignoreEnv == "" || f.dsn != "" || f.dsnFile != "" {
		return resolveDSN(cmd, f.dsn, f.dsnFile)
	}
	if set := conninfo.EnvVarsSet(); len(set) > 0 {
		fmt.Fprintf(cmd.ErrOrStderr(), "PG* variables are ignored by %s (%s set): give --dsn to use that server\n", f.ignoreEnv, strings.Join(set, ", "))
	}
	return "", false, nil
}

// drivenRefused are the flags of a load profile that a workload driving
// its own load (workload.Driver: a replay) refuses.
var drivenRefused = []string{"users", "ramp", "duration", "stage", "connections", "think", "mix", "warmup", "scale", "rate"}

// refuseDriven refuses, in one line, a load-profile flag given with a
// workload that drives its own load.
func refuseDriven(cmd *cobra.Command, name string) error {
	for _, flag := range drivenRefused {
		if fl := cmd.Flags().Lookup(flag); fl != nil && fl.Changed {
			return fmt.Errorf("--workload %s drives its own load (the captured sessions at their pace, --users-x copies of each): --%s does not apply", name, flag)
		}
	}
	return nil
}

// listWorkload is the workload --list-ops describes: the pgbench scripts
// of a script run, else the registered workload with its options.
func (f *runFlags) listWorkload(cmd *cobra.Command) (workload.Workload, error) {
	if !f.scriptMode() {
		return workloadByName(f.workload, cmd.Flags())
	}
	stages, txPerVU, err := f.scriptProfile(cmd)
	if err != nil {
		return nil, err
	}
	return f.scriptWorkload(cmd, stages, txPerVU)
}

// listOperations prints a workload's key operations and roles.
func listOperations(w io.Writer, wl workload.Workload) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "key operation\tT\tpriority\twhat it does\n")
	for _, op := range wl.Operations() {
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\n", op.Name, op.Target, op.Priority, op.Description)
	}
	tw.Flush()
	fmt.Fprintln(w, "\nroles (share of VUs: operation weights):")
	for _, r := range wl.Roles() {
		names := make([]string, 0, len(r.Mix))
		for n := range r.Mix {
			names = append(names, n)
		}
		sort.Strings(names)
		parts := make([]string, 0, len(names))
		for _, n := range names {
			parts = append(parts, fmt.Sprintf("%s %g", n, r.Mix[n]))
		}
		fmt.Fprintf(w, "  %s (%g): %s\n", r.Name, r.Share, strings.Join(parts, ", "))
	}
}
