package main

import (
	"errors"
	"fmt"
	"math"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/erplab/erplab/internal/capacity"
	"github.com/erplab/erplab/internal/compare"
	"github.com/erplab/erplab/internal/experiment"
	"github.com/erplab/erplab/internal/workload"
)

type capacityFlags struct {
	apdex, resolution, start, max, errorRate float64
	errorRateS, resolutionS                  string
	step, out                                string
	p95                                      []string
	hold, ramp                               time.Duration
	opsPerHour                               float64
	require                                  float64
	open                                     bool
	workers                                  int
	// A/B of capacity (--variant)
	variants     []string
	rounds       int
	order        string
	alpha        float64
	remedyParams map[string]*string
}

func newCapacityCmd() *cobra.Command {
	rf := &runFlags{}
	var f capacityFlags
	cmd := &cobra.Command{
		Use:   "capacity",
		Short: "Find how many users the server carries at APDEX >= target, and what stops it",
		Long: `Find the capacity: run the workload at a growing number of users (--start, grown by --step
up to --max-users), each step a load test of --hold after --ramp from 0 (the ramp and --warmup
are not scored), until a step misses the target; then bisect between the last good and the
first bad step down to --resolution. A step is bad when its integral APDEX is below --apdex,
its errors exceed --error-rate, a --p95 limit is breached or the server refuses connections; a
step whose APDEX confidence interval holds the target (or a p95 interval its --p95 limit) is run
once more and decided by the means.
A step where erplab itself saturates (its CPU) ends the search as "load generator saturated":
it is not the server's capacity.

The verdict names the limiting resource from the observations of the last good and the first
bad step (top wait events, server CPU, iowait, pool wait), e.g. "capacity 46 users at APDEX
0.86 [0.83-0.88]; at 64 users APDEX 0.74 < 0.85; limited by LWLock:LockManager (38 % of
active time, 9 % at 32 users), server CPU 97 %".

--user-ops-per-hour N sets the think time to a user's pace: exponential with mean 3600/N s,
so that a VU is one of the field's users performing N key operations per hour.

One server for the whole search (without --dsn a throwaway one, removed at the end); the data
is set up by the first step. The capacity document (--out) is rewritten after every step;
each step's own results (and its output, .log) are in <out>-steps/. erplab report draws it.

A/B of capacity: --variant NAME=remedy[,remedy] (repeatable; the remedies of erplab ab) runs the
same search for the baseline and each variant on one embedded server, --rounds times each in
--order (balanced: A B B A ...). The data is built once into a template database; every search
starts from a fresh copy of it with its variant's remedies applied for the whole search and
undone after it (also on failure and Ctrl-C). It prints each side's capacity (median and range
over rounds) and limiting resource, the APDEX of the sides at the loads all of them ran, and
"VERDICT NAME: capacity 23 -> 31 users (+35 %); better: ..." per variant: better or worse only
when the exact rank-sum test over the rounds' capacities reaches --alpha (every round of one
side above every round of the other needs 4 rounds each at 0.05); one round each is
"inconclusive: one round each". The A/B document (--out) holds every search with its steps;
erplab report draws the sides' APDEX curves on one chart with each side's capacity marked.

Your own traffic as the load: --workload replay --replay-source CAPTURE --replay-template DB
replays a capture in every step onto a fresh copy of DB (a database on the --dsn server; a
connection string without --dsn: copied into the throwaway server with pg_dump). The step is
--users-x, the copies of every captured session (--start defaults to 1; give --max-users),
each step as long as the replay; --ramp, --hold and the think time do not apply. See
docs/replay.md.

Exit codes: 0 done, 1 error (a server that failed during the search: the finished steps are
kept and the capacity known so far printed), 2 bad usage, 99 capacity below --require, 130
interrupted (finished steps kept, capacity so far printed).`,
		Example: `  erplab capacity --workload smoke --start 4 --max-users 64 --hold 30s --ramp 5s
  erplab capacity --workload erp --user-ops-per-hour 120 --start 50 --step x2 --max-users 2000 --hold 2m --ramp 30s
  erplab capacity --rate --start 50 --step +50 --max-users 1000 --hold 1m --p95 post_invoice=500ms
  erplab capacity --workload erp --start 8 --max-users 128 --hold 1m --variant tuned=settings:examples/erp-profile.conf --rounds 4
  erplab capacity --workload replay --replay-source erp.erpcap.gz --replay-template erp_before --dsn 'host=db2 dbname=postgres' --max-users 16`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := f.config(cmd, rf)
			if err != nil {
				return withCode(exitUsage, err)
			}
			if len(f.variants) > 0 {
				return f.runAB(cmd, cfg, rf)
			}
			if err := f.noABFlags(cmd); err != nil {
				return withCode(exitUsage, err)
			}
			doc, err := capacity.Run(cmd.Context(), cfg, cmd.OutOrStdout())
			if err != nil {
				return err // interrupted: capacity.ErrInterrupted or loadtest's, which carry their code
			}
			if cmd.Flags().Changed("require") && doc.Result.Capacity < f.require {
				return withCode(exitThreshold, fmt.Errorf("%w: capacity %s is below --require %g", capacity.ErrBelowRequired, doc.Result.CapacityText(doc.Unit), f.require))
			}
			return nil
		},
	}
	cmd.SetFlagErrorFunc(flagError(nil)) // pgbench's options named with their equivalents
	fl := cmd.Flags()
	// The shared sets (flagsets.go): the workload, the server, the
	// observations. The load profile is the search's (--start, --step,
	// --max-users, --hold, --ramp, --rate, --workers).
	cmd.SetUsageFunc(groupedUsage) // own flags, then each set's
	rf.loadFlags.register(fl, "workload", "scale", "seed", "mix", "think", "connections", "max-errors", "graceful-stop", "warmup", "stress")
	rf.serverFlags.register(fl, "dsn", "dsn-file", "force", "os-user", "server-gone-after")
	rf.outputFlags.register(fl, "out", "out-mode", "interval")
	rf.observeFlags.register(fl, "observe", "observe-interval")
	fl.Lookup("out").Usage = "capacity document, a new file, or an existing directory for the default name (default ./erplab-results/<time>-capacity-<workload>.json; with --variant <time>-capacity-ab-<workload>.json)"
	fl.Float64Var(&f.apdex, "apdex", 0.85, "target integral APDEX of a good step, in (0, 1]")
	fl.StringArrayVar(&f.p95, "p95", nil, "a good step's highest p95 of an operation, OP=DURATION (e.g. post_invoice=500ms); repeatable")
	fl.StringVar(&f.errorRateS, "error-rate", "1%", "a good step's highest share of failed operations (e.g. 1%, 0.5%)")
	fl.Float64Var(&f.start, "start", 10, "users (arrivals/s with --rate) of the first step")
	fl.StringVar(&f.step, "step", "x2", "growth from one step to the next: xF (geometric, e.g. x2) or +N")
	fl.Float64Var(&f.max, "max-users", 1000, "highest load to try (users; arrivals/s with --rate)")
	fl.StringVar(&f.resolutionS, "resolution", "5%", "bisect until the last good and first bad step are this close (relative to the good one)")
	fl.DurationVar(&f.hold, "hold", time.Minute, "time each step holds its load, scored (after --ramp and --warmup)")
	fl.DurationVar(&f.ramp, "ramp", 10*time.Second, "each step's ramp-up from 0 to its load (not scored)")
	fl.Float64Var(&f.opsPerHour, "user-ops-per-hour", 0, "a user's pace: N key operations per hour (think time exponential with mean 3600/N s; replaces --think)")
	fl.Float64Var(&f.require, "require", 0, "exit with code 99 when the capacity is below this")
	fl.BoolVar(&f.open, "rate", false, "open model: the load is arrivals per second (Poisson) served by --workers VUs, not users")
	fl.IntVar(&f.workers, "workers", 200, "open model (--rate): VUs serving the arrivals")
	fl.StringArrayVar(&f.variants, "variant", nil, "A/B of capacity: search the baseline and this variant NAME=remedy[,remedy...] (repeatable; remedies as in erplab ab)")
	fl.IntVar(&f.rounds, "rounds", 1, "with --variant: searches per side (a verdict needs 4 or more)")
	fl.StringVar(&f.order, "order", "balanced", "with --variant: order of the searches: balanced (A B B A ...), interleaved (A B A B) or blocked (A A B B)")
	fl.Float64Var(&f.alpha, "alpha", compare.DefaultAlpha, "with --variant: significance level of the rank-sum test over rounds")
	f.remedyParams = addRemedyParamFlags(fl)
	return cmd
}

// abOnly are the flags that apply to capacity --variant only.
var abOnly = []string{"rounds", "order", "alpha"}

// noABFlags refuses the A/B flags (and remedy parameters) without --variant.
func (f *capacityFlags) noABFlags(cmd *cobra.Command) error {
	names := append([]string(nil), abOnly...)
	for name := range f.remedyParams {
		names = append(names, name)
	}
	for _, name := range names {
		if cmd.Flags().Changed(name) {
			return fmt.Errorf("--%s applies to an A/B of capacity (--variant) only", name)
		}
	}
	return nil
}

// runAB is capacity --variant: the search of cfg for the baseline and
// each variant, --rounds times each, on one embedded server from one
// template database (capacity.RunAB).
func (f *capacityFlags) runAB(cmd *cobra.Command, cfg capacity.Config, rf *runFlags) error {
	fl := cmd.Flags()
	switch {
	case fl.Changed("dsn") || fl.Changed("dsn-file") || cfg.Base.EnvGiven || cfg.Base.DSN != "":
		given := "--dsn"
		switch {
		case fl.Changed("dsn-file"):
			given = "--dsn-file"
		case !fl.Changed("dsn"):
			given = "the PG* environment (PGHOST, PGPORT ...)"
		}
		return withCode(exitUsage, fmt.Errorf("--variant needs the embedded server (remedies change its configuration): drop %s", given))
	case fl.Changed("require"):
		return withCode(exitUsage, errors.New("--require applies to a single search: drop it with --variant"))
	case f.rounds < 1:
		return withCode(exitUsage, fmt.Errorf("--rounds must be >= 1, got %d", f.rounds))
	case f.order != "balanced" && f.order != "interleaved" && f.order != "blocked":
		return withCode(exitUsage, fmt.Errorf("--order must be balanced, interleaved or blocked, got %q", f.order))
	case !(f.alpha > 0 && f.alpha < 1):
		return withCode(exitUsage, fmt.Errorf("--alpha must be in (0, 1), got %g", f.alpha))
	}
	var vs []experiment.Variant
	for _, s := range f.variants {
		v, err := experiment.ParseVariant(s)
		if err != nil {
			return withCode(exitUsage, err)
		}
		vs = append(vs, v)
	}
	baseFlags, newW, err := variantWorkload(cmd, rf.workload, vs)
	if err != nil {
		return withCode(exitUsage, err)
	}
	acfg := capacity.ABConfig{
		Search: cfg, Out: f.out, Alpha: f.alpha,
		Experiment: experiment.Config{NewWorkload: newW, Flags: baseFlags, Variants: vs, Rounds: f.rounds,
			Balanced: f.order == "balanced", Interleave: f.order == "interleaved", Params: remedyParamValues(f.remedyParams)},
	}
	// Everything the runs could refuse is checked before the server
	// starts: a remedy this process cannot apply, a bad remedy parameter,
	// an existing --out.
	path, _, _, err := acfg.Check(os.Geteuid() == 0)
	if err != nil {
		return withCode(exitUsage, err)
	}
	acfg.Out = path
	out, ctx := cmd.OutOrStdout(), cmd.Context()
	pool := capacity.PoolFor(cfg.Connections, int(cfg.Plan.Max))
	if cfg.Open {
		pool = capacity.PoolFor(cfg.Connections, cfg.Workers)
	}
	c, err := startTemplate(ctx, out, rf.osUser, pool+30, cfg.Base.Workload, cfg.Base.Scale, cfg.Base.Seed)
	if err != nil {
		return err
	}
	defer stopEmbedded(c, out)
	acfg.Experiment.Cluster = c
	_, err = capacity.RunAB(ctx, acfg, out)
	return err
}

// parsePct reads "5%", "0.5 %" or a bare fraction "0.05" as a fraction.
func parsePct(flag, s string) (float64, error) {
	t := strings.TrimSpace(s)
	pct := strings.HasSuffix(t, "%")
	v, err := strconv.ParseFloat(strings.TrimSpace(strings.TrimSuffix(t, "%")), 64)
	if err != nil || math.IsNaN(v) || math.IsInf(v, 0) || v < 0 {
		return 0, fmt.Errorf("--%s %q: want a percentage such as 5%%", flag, s)
	}
	if pct {
		v /= 100
	}
	return v, nil
}

// config turns the flags into the search's Config; errors are usage
// errors in one line.
func (f *capacityFlags) config(cmd *cobra.Command, rf *runFlags) (capacity.Config, error) {
	var cfg capacity.Config
	f.out = rf.out // the output set's --out: the capacity document
	if cmd.Flags().Changed("user-ops-per-hour") {
		if cmd.Flags().Changed("think") {
			return cfg, errors.New("--user-ops-per-hour sets the think time: drop --think")
		}
		think, err := capacity.ThinkForPace(f.opsPerHour)
		if err != nil {
			return cfg, err
		}
		rf.think = think.String()
	}
	// The run's flags are checked as the run checks them; the load
	// profile is the search's.
	base, err := rf.options(cmd)
	if err != nil {
		return cfg, err
	}
	driver, driven := base.Workload.(workload.Driver)
	if driven {
		if err := f.drivenSearch(cmd); err != nil {
			return cfg, err
		}
	}
	errRate, err := parsePct("error-rate", f.errorRateS)
	if err != nil {
		return cfg, err
	}
	res, err := parsePct("resolution", f.resolutionS)
	if err != nil {
		return cfg, err
	}
	growth, err := capacity.ParseGrowth(f.step)
	if err != nil {
		return cfg, err
	}
	target := capacity.Target{Apdex: f.apdex, ErrorRate: errRate}
	names := map[string]bool{}
	for _, op := range base.Workload.Operations() {
		names[op.Name] = true
	}
	for _, p := range f.p95 {
		op, d, ok := strings.Cut(p, "=")
		dur, derr := time.ParseDuration(strings.TrimSpace(d))
		if !ok || derr != nil {
			return cfg, fmt.Errorf("--p95 %q: want OP=DURATION, e.g. post_invoice=500ms", p)
		}
		if !names[op] {
			return cfg, fmt.Errorf("--p95 %q: workload %s has no operation %q (see --list-ops of erplab run)", p, base.Workload.Name(), op)
		}
		if target.P95 == nil {
			target.P95 = map[string]time.Duration{}
		}
		if prev, dup := target.P95[op]; dup {
			return cfg, fmt.Errorf("--p95 %q: operation %s already has the limit %s (give each operation once)", p, op, prev)
		}
		target.P95[op] = dur
	}
	if err := target.Validate(); err != nil {
		return cfg, err
	}
	plan := capacity.Plan{Start: f.start, Max: f.max, Step: growth, Resolution: res, Integer: !f.open}
	if !f.open && (f.start != math.Trunc(f.start) || f.max != math.Trunc(f.max)) {
		return cfg, fmt.Errorf("--start and --max-users count users: whole numbers, got %g and %g", f.start, f.max)
	}
	if err := plan.Validate(); err != nil {
		return cfg, err
	}
	if cmd.Flags().Changed("require") && !(f.require > 0 && f.require <= f.max) {
		// above --max-users the search can only find "at least --max-users",
		// which never decides the requirement
		return cfg, fmt.Errorf("--require must be > 0 and at most --max-users %g, got %g", f.max, f.require)
	}
	if f.hold <= 0 || f.ramp < 0 {
		return cfg, fmt.Errorf("--hold must be > 0 and --ramp >= 0, got %s and %s", f.hold, f.ramp)
	}
	if rf.warmup >= f.hold {
		return cfg, fmt.Errorf("--warmup %s covers the whole --hold %s: nothing would be scored", rf.warmup, f.hold)
	}
	if f.open && f.workers < 1 {
		return cfg, fmt.Errorf("--workers must be >= 1, got %d", f.workers)
	}
	if f.open && cmd.Flags().Changed("user-ops-per-hour") {
		// arrivals per second set the pace of the open model: a user's
		// think time has no meaning there
		return cfg, errors.New("--user-ops-per-hour sets a user's think time, which the open model (--rate: arrivals per second) has none of: drop one")
	}
	if !f.open && cmd.Flags().Changed("workers") {
		return cfg, errors.New("--workers applies to the open model (--rate) only")
	}
	conns, unit := rf.connections, ""
	if driven {
		conns = driver.Connections(int(f.max)) // the server is sized for the last step
		unit = "users-x"
	}
	return capacity.Config{
		Base: base, Plan: plan, Target: target, Open: f.open, Workers: f.workers,
		Hold: f.hold, Ramp: f.ramp, Warmup: rf.warmup, Connections: conns,
		UserOpsPerHour: f.opsPerHour, Out: f.out, Unit: unit,
	}, nil
}

// drivenSearch checks the flags of a search whose workload drives its own
// load (a replay): the step's load is --users-x, the copies of every
// captured session, each step the replay's own length; --start defaults
// to 1 and --max-users must be given (the server is sized for it).
func (f *capacityFlags) drivenSearch(cmd *cobra.Command) error {
	fl := cmd.Flags()
	if fl.Changed("users-x") {
		return errors.New("capacity raises --users-x itself: --start, --step and --max-users count the copies of every captured session; drop --users-x")
	}
	for _, name := range []string{"ramp", "hold", "rate", "workers", "user-ops-per-hour"} {
		if fl.Changed(name) {
			return fmt.Errorf("--workload replay drives its own load (each step replays the captured sessions, --users-x copies of each): --%s does not apply", name)
		}
	}
	if !fl.Changed("max-users") {
		return errors.New("--workload replay: give --max-users N, the most copies of every captured session to try (the server is sized for them)")
	}
	if !fl.Changed("start") {
		f.start = 1
	}
	f.ramp = 0
	return nil
}
