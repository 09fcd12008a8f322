package main

import (
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/erplab/erplab/internal/conninfo"
	"github.com/erplab/erplab/internal/engine"
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

// runFlags are erplab run's flags: the four shared sets (flagsets.go),
// which ab and capacity compose too, and run's own.
type runFlags struct {
	loadFlags
	serverFlags
	outputFlags
	observeFlags
	soakFlags
	// ignoreEnv names a command (ab) that starts its own server unless
	// --dsn or --dsn-file is given: the PG* variables name no server.
	ignoreEnv string
	apdexMin  float64
	listOps   bool
	scripts   scriptFlags
	segments  segmentFlags
}

func newRunCmd() *cobra.Command {
	cmd, _ := newRunCmdFlags()
	return cmd
}

// newRunCmdFlags is the run command and the values its flags fill in;
// erplab k8s render parses run flags with it (k8s.go).
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

--soak holds the load for hours and watches it window by window (--window): each window's
line, each trend's slope with its interval, a "degrading" line as soon as a trend is real
(calibrated on steady runs) with what it projects, and with --stop-on-collapse the run
ended when a window's APDEX or active sessions cross a limit; a lost terminal (SIGHUP)
does not stop it. All of it goes into the results as extra.soak.

pgbench scripts: -f FILE[@W] and -b NAME[@W] run them as key operations (--workload
pgbench, APDEX T by --target), a VU being a client with its own connection that does not
think (unless --connections, --think); --protocol sets their query mode, --seed their
random functions, the load flags their profile. pgbench's own command line (-c, -t, -T,
-D, -M, -j, -n, -r ...) with pgbench's exit codes is 'erplab pgbench'.

Exit codes (scripts too): 0 done, 1 error (pgbench scripts: clients stopped on errors), 2
bad usage (a bad script too), 6 a results file could not be written (full
disk; the summary is printed and one line says where everything so far is), 7 the server
stopped answering or was lost (every operation failing: unreachable, shutting down, or not
back from start-up / recovery) and had not come back by the end (or for
--server-gone-after), 8 the run failed: every attempt of every key operation failed, the
server answering with errors (results written, status failed; a segment on a database
without the workload's data set is refused before the load, exit 1), 9
--soak --stop-on-collapse ended the run at a collapse (results so far written), 99
integral APDEX below --apdex-min, 130 interrupted (results so far are written; a second
Ctrl-C exits at once).`,
		Example: `  erplab run --workload smoke --duration 30s
  erplab run --dsn 'host=db1 dbname=erp user=bench' --users 200 --ramp 2m --duration 10m --warmup 2m
  erplab run --stage 30s:100 --stage 10m:100 --stage 30s:0 --connections 40 --think 1s-5s
  erplab run -f my.sql@3 -b select-only@1 --users 8 --duration 30s --protocol prepared --target my=20ms`,
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
			opts, err := f.buildOptions(cmd)
			if err != nil {
				return withCode(exitUsage, err)
			}
			if pw, ok := opts.Workload.(*wpgbench.Workload); ok && f.scriptMode() {
				// clients stopped on errors: the run says "aborted", not
				// "completed" (exit 1: scriptFailures)
				opts.AbortedBy = func() string { return scriptsAborted(pw, opts.Stages) }
			}
			if opts.Soak != nil {
				// A soak outlives its terminal: the stream and the
				// lines go on (writes to a lost terminal fail and
				// are dropped), Ctrl-C and SIGTERM still stop it.
				ignoreHangup(cmd.Context())
			}
			// Its error carries its exit code (interrupted, results
			// incomplete, not answering or lost: loadtest and engine).
			res, err := loadtest.Run(cmd.Context(), opts, cmd.OutOrStdout())
			if err != nil && res != nil && errors.Is(err, engine.ErrAborted) && !errors.Is(err, loadtest.ErrResultsIncomplete) && !errors.Is(err, engine.ErrNotAnswering) {
				err = fmt.Errorf("%w; results so far: %s", err, res.Path)
			}
			if err != nil {
				return err
			}
			if res.Doc.Status == results.StatusInterrupted {
				return withCode(exitInterrupted, fmt.Errorf("interrupted; results so far: %s", res.Path))
			}
			if f.scriptMode() {
				// scripts whose clients stopped on an error: the run failed
				if err := scriptFailures(res, opts.Workload); err != nil {
					return err
				}
			}
			if cmd.Flags().Changed("apdex-min") {
				return checkApdexMin(res.Doc.Integral, f.apdexMin)
			}
			return nil
		},
	}
	cmd.SetFlagErrorFunc(flagError(nil)) // pgbench's options named with their equivalents
	fl := cmd.Flags()
	cmd.SetUsageFunc(groupedUsage) // own flags, then each set's
	f.loadFlags.register(fl)
	f.serverFlags.register(fl)
	f.outputFlags.register(fl)
	f.observeFlags.register(fl)
	f.soakFlags.register(fl)
	fl.BoolVar(&f.listOps, "list-ops", false, "list the workload's key operations (T, priority, what they do) and roles, and exit")
	fl.Float64Var(&f.apdexMin, "apdex-min", 0, "exit with code 99 when the integral APDEX is below this")
	addScriptFlags(fl, &f.scripts)
	addSegmentFlags(fl, &f.segments)
	return cmd, f
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
	if opts.Soak, err = f.soakFlags.options(opts.Interval, opts.Observe); err != nil {
		return opts, err
	}
	return opts, f.segments.apply(cmd, &opts)
}

// options is the run's options from the four sets and run's own flags
// (segments aside); ab and capacity call it on their commands, which
// compose a part of the sets. Errors are one-line usage errors.
func (f *runFlags) options(cmd *cobra.Command) (loadtest.Options, error) {
	if err := f.observeFlags.check(); err != nil {
		return loadtest.Options{}, err
	}
	rate, err := f.rateProfile()
	if err != nil {
		return loadtest.Options{}, err
	}
	if d := engine.TotalRateDuration(rate); d > 0 && !f.loadFlags.changed("duration") {
		// A rate profile with no explicit length runs to its end.
		f.duration = d - f.ramp
	}
	stages, err := f.stagesOf()
	if err != nil {
		return loadtest.Options{}, err
	}
	w, err := f.workloadOf(cmd, stages)
	if err != nil {
		return loadtest.Options{}, err
	}
	driver, driven := w.(workload.Driver)
	if driven {
		if err := f.refuseDriven(); err != nil {
			return loadtest.Options{}, err
		}
		// The load is the driver's own (a replay: the captured sessions,
		// --users-x copies of each): one "user", connections as it opens.
		stages = []engine.Stage{{Duration: f.duration, Target: 1}}
		f.connections = driver.Connections(1)
	}
	if f.mix != "" {
		if _, err := workload.OverrideMix(w, f.mix); err != nil {
			return loadtest.Options{}, err
		}
	}
	if f.apdexMin < 0 || f.apdexMin > 1 {
		return loadtest.Options{}, fmt.Errorf("--apdex-min must be between 0 and 1, got %g", f.apdexMin)
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
	if f.warmup >= engine.TotalDuration(stages) {
		return loadtest.Options{}, fmt.Errorf("--warmup %s covers the whole run (%s): nothing would be scored", f.warmup, engine.TotalDuration(stages))
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
	opts := loadtest.Options{
		Rate: rate, LatencyLimit: time.Duration(f.latencyLimitMs * float64(time.Millisecond)),
		Workload: w, Mix: f.mix, Scale: f.scale, Seed: f.seed,
		Stages: stages, Warmup: f.warmup, Think: think, Connections: conns,
		MaxErrors: f.maxErrors, GracefulStop: f.gracefulStop, Stress: stressSpec,
		CommandLine: conninfo.RedactArgs(append([]string{"erplab"}, os.Args[1:]...)), Version: version,
	}
	if err := f.serverFlags.apply(cmd, f.ignoreEnv, &opts); err != nil {
		return loadtest.Options{}, err
	}
	if fl := cmd.Flags().Lookup("replay-template"); fl != nil {
		if w := conninfo.ArgvWarning("--replay-template", fl.Value.String(), "--replay-template-file", ""); w != "" {
			fmt.Fprintln(cmd.ErrOrStderr(), w)
		}
	}
	if d := engine.TotalRateDuration(rate); d > engine.TotalDuration(stages) {
		return loadtest.Options{}, fmt.Errorf("the rate profile lasts %s but the run only %s: make the run at least as long (--duration) or shorten --rate-stage", d, engine.TotalDuration(stages))
	}
	if f.latencyLimitMs < 0 || math.IsNaN(f.latencyLimitMs) {
		return loadtest.Options{}, fmt.Errorf("invalid latency limit: %g", f.latencyLimitMs)
	}
	f.outputFlags.apply(&opts)
	f.observeFlags.apply(&opts)
	return opts, nil
}

// workloadOf is the workload of the run: the pgbench scripts of -f/-b
// (or --workload pgbench), else the registered workload with its own
// options; it settles --scale (the workload's default when not given)
// and, for scripts, the pgbench defaults of --think and --connections.
func (f *runFlags) workloadOf(cmd *cobra.Command, stages []engine.Stage) (workload.Workload, error) {
	var (
		w   workload.Workload
		err error
	)
	scripts := f.scriptMode()
	if scripts {
		if f.loadFlags.changed("workload") && f.workload != wpgbench.Name {
			return nil, fmt.Errorf("--workload %s does not run pgbench scripts; drop -f/-b or use --workload pgbench", f.workload)
		}
		f.workload = wpgbench.Name
		if w, err = f.scriptWorkload(cmd, stages); err != nil {
			return nil, err
		}
		if !f.loadFlags.changed("think") {
			f.think = "0" // pgbench's clients do not think
		}
		if !f.loadFlags.changed("connections") {
			f.connections = 0 // and each has its own connection
		}
	} else {
		if err := f.checkNotScripts(cmd); err != nil {
			return nil, err
		}
		if w, err = workloadByName(f.workload, cmd.Flags()); err != nil {
			return nil, err
		}
	}
	m, err := workload.Find(f.workload)
	if err != nil {
		return nil, err
	}
	if !f.loadFlags.changed("scale") {
		f.scale = m.DefaultScale
	}
	if !scripts && m.MaxScale > 0 && (!(f.scale > 0) || f.scale > m.MaxScale) {
		return nil, fmt.Errorf("--scale must be in (0, %g] for %s, got %g", m.MaxScale, m.Name, f.scale)
	}
	return w, nil
}

// stagesOf is the closed model's load profile: the --stage steps, else
// --users after --ramp for --duration.
func (f *runFlags) stagesOf() ([]engine.Stage, error) {
	if len(f.stages) == 0 {
		return engine.SimpleStages(f.users, f.ramp, f.duration)
	}
	for _, name := range []string{"users", "ramp", "duration"} {
		if f.loadFlags.changed(name) {
			return nil, fmt.Errorf("--stage replaces --users, --ramp and --duration; drop --%s", name)
		}
	}
	var stages []engine.Stage
	for _, s := range f.stages {
		st, err := engine.ParseStage(s)
		if err != nil {
			return nil, fmt.Errorf("--stage: %w", err)
		}
		stages = append(stages, st)
	}
	if engine.TotalDuration(stages) <= 0 {
		return nil, errors.New("--stage: the stages last no time; give a duration > 0")
	}
	return stages, nil
}

// rateProfile resolves --rate / --rate-stage into the open model's
// profile (nil: the closed model).
func (f *loadFlags) rateProfile() ([]engine.RateStage, error) {
	if f.changed("rate") && len(f.rateStages) > 0 {
		return nil, errors.New("--rate gives a constant rate, --rate-stage a profile: use one of them")
	}
	if f.changed("rate") {
		return engine.ConstantRate(f.rate)
	}
	var out []engine.RateStage
	for _, r := range f.rateStages {
		st, err := engine.ParseRateStage(r)
		if err != nil {
			return nil, fmt.Errorf("--rate-stage: %w", err)
		}
		out = append(out, st)
	}
	return out, nil
}

// apply is the server set read into opts: where to connect (--dsn,
// --dsn-file, the PG* environment unless the command ignoreEnv ignores
// it), the embedded server's options, --force and --server-gone-after.
func (s *serverFlags) apply(cmd *cobra.Command, ignoreEnv string, opts *loadtest.Options) error {
	if s.serverGoneAfter < time.Second {
		return fmt.Errorf("--server-gone-after must be at least 1s, got %s", s.serverGoneAfter)
	}
	dsn, envGiven, err := s.resolveDSN(cmd, ignoreEnv)
	if err != nil {
		return err
	}
	if (dsn != "" || envGiven) && (s.keep || s.osUser != "") {
		return errors.New("--keep and --os-user apply to the embedded server only; drop them or drop --dsn")
	}
	opts.DSN, opts.EnvGiven, opts.Force, opts.OSUser, opts.Keep = dsn, envGiven, s.force, s.osUser, s.keep
	opts.ServerGoneAfter = s.serverGoneAfter
	return nil
}

// resolveDSN is resolveDSN of --dsn and --dsn-file, except for a command
// that ignores the environment (ignoreEnv: ab) given neither: it says in
// one line that the PG* variables set are ignored.
func (s *serverFlags) resolveDSN(cmd *cobra.Command, ignoreEnv string) (string, bool, error) {
	if ignoreEnv == "" || s.dsn != "" || s.dsnFile != "" {
		return resolveDSN(cmd, s.dsn, s.dsnFile)
	}
	if set := conninfo.EnvVarsSet(); len(set) > 0 {
		fmt.Fprintf(cmd.ErrOrStderr(), "PG* variables are ignored by %s (%s set): give --dsn to use that server\n", ignoreEnv, strings.Join(set, ", "))
	}
	return "", false, nil
}

// apply is the output set read into opts.
func (s *outputFlags) apply(opts *loadtest.Options) {
	opts.Out, opts.OutMode, opts.Progress, opts.Interval = s.out, s.outMode, s.progress, s.interval
}

// check refuses an observe set's bad values (one line).
func (s *observeFlags) check() error {
	if err := checkListenAddr("--metrics-addr", s.metricsAddr); err != nil {
		return err
	}
	if s.observeInterval != 0 && s.observeInterval < 100*time.Millisecond {
		return fmt.Errorf("--observe-interval must be at least 100ms, got %s", s.observeInterval)
	}
	return nil
}

// apply is the observe set read into opts.
func (s *observeFlags) apply(opts *loadtest.Options) {
	opts.Observe, opts.ObserveInterval, opts.MetricsAddr, opts.Profile, opts.Probes, opts.ProbeReads = s.observe, s.observeInterval, s.metricsAddr, s.profile, s.probes, s.probeReads
}

// drivenRefused are the flags of a load profile that a workload driving
// its own load (workload.Driver: a replay) refuses.
var drivenRefused = []string{"users", "ramp", "duration", "stage", "connections", "think", "mix", "warmup", "scale", "rate"}

// refuseDriven refuses, in one line, a load-profile flag given with a
// workload that drives its own load.
func (f *runFlags) refuseDriven() error {
	for _, flag := range drivenRefused {
		if f.loadFlags.changed(flag) {
			return fmt.Errorf("--workload %s drives its own load (the captured sessions at their pace, --users-x copies of each): --%s does not apply", f.workload, flag)
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
	stages, err := f.stagesOf()
	if err != nil {
		return nil, err
	}
	return f.scriptWorkload(cmd, stages)
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
