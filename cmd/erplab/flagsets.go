package main

import (
	"errors"
	"fmt"
	"io/fs"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/erplab/erplab/internal/engine"
	"github.com/erplab/erplab/internal/loadtest"
	"github.com/erplab/erplab/internal/soak"
	"github.com/erplab/erplab/internal/workload"
)

// The flag sets that erplab run, ab, capacity and replay share. Each set
// declares its flags once, with one default and one usage line; a command
// composes a set with register, taking all its flags or the ones it names
// (a command may reword a flag's usage for its context after registering,
// never its default). runFlags embeds the four sets and reads them into
// loadtest.Options (run.go: options); ab and capacity use runFlags too,
// replay its own replayFlags. run, ab and capacity answer a flag error
// with flagError: one of pgbench's options (-c, -T, ...) is named with
// the flag that takes its place, or erplab pgbench.

// flagGroup is what every set keeps of a command: the flags it put there,
// so that a set answers "was my --NAME given" even where the command has
// a flag of its own by that name (capacity's --rate and --ramp).
type flagGroup struct{ flags map[string]*pflag.Flag }

// add puts on fl the flags of decl (a set's declarations) that names
// lists, every one when names is empty. A name decl lacks is a
// programming error of the command composing the set.
func (g *flagGroup) add(fl, decl *pflag.FlagSet, names []string) {
	g.flags = map[string]*pflag.Flag{}
	pick := func(f *pflag.Flag) {
		markSet(f, decl.Name())
		fl.AddFlag(f)
		g.flags[f.Name] = f
	}
	if len(names) == 0 {
		decl.VisitAll(pick)
		return
	}
	for _, n := range names {
		f := decl.Lookup(n)
		if f == nil {
			panic("flag set " + decl.Name() + " has no --" + n)
		}
		pick(f)
	}
}

// changed reports whether the set's --name was registered and given.
func (g *flagGroup) changed(name string) bool {
	f := g.flags[name]
	return f != nil && f.Changed
}

// setAnnotation is the pflag annotation naming the set a flag came from:
// the command pages list each set's flags under its own heading.
const setAnnotation = "erplab/flagset"

// setNames are the sets in the order the command pages list them.
var setNames = []string{"load", "server", "output", "observe", "soak"}

func markSet(f *pflag.Flag, set string) {
	if f.Annotations == nil {
		f.Annotations = map[string][]string{}
	}
	f.Annotations[setAnnotation] = []string{set}
}

// flagSections splits fl into the command's own flags (key "") and one
// flag set per shared set that has flags there.
func flagSections(fl *pflag.FlagSet) map[string]*pflag.FlagSet {
	out := map[string]*pflag.FlagSet{}
	fl.VisitAll(func(f *pflag.Flag) {
		set := ""
		if v := f.Annotations[setAnnotation]; len(v) == 1 {
			set = v[0]
		}
		if out[set] == nil {
			out[set] = pflag.NewFlagSet(set, pflag.ContinueOnError)
		}
		out[set].AddFlag(f)
	})
	return out
}

// setLacks lists the flags of the shared set name (every flag its
// register declares, the workloads' own included) that have does not
// hold: what a command composing a part of the set leaves out, "--rate,
// --stress" (nil when it takes them all); a flag of that name the
// command has of its own (own: its flags) is "--rate (its own)".
func setLacks(name string, have, own *pflag.FlagSet) []string {
	all := pflag.NewFlagSet("all", pflag.ContinueOnError)
	var f runFlags
	f.loadFlags.register(all)
	f.serverFlags.register(all)
	f.outputFlags.register(all)
	f.observeFlags.register(all)
	f.soakFlags.register(all)
	var out []string
	if set := flagSections(all)[name]; set != nil {
		set.VisitAll(func(fl *pflag.Flag) {
			switch {
			case have.Lookup(fl.Name) != nil:
			case own != nil && own.Lookup(fl.Name) != nil:
				out = append(out, "--"+fl.Name+" (its own)")
			default:
				out = append(out, "--"+fl.Name)
			}
		})
	}
	return out
}

// setHeading is the line after "Flags of the NAME set" of a command
// that takes a part of it: "(not: --rate, --stress)"; "" when it takes
// the whole set (own: the command's flags, see setLacks).
func setHeading(name string, have, own *pflag.FlagSet) string {
	if lacks := setLacks(name, have, own); len(lacks) > 0 {
		return "(not: " + strings.Join(lacks, ", ") + ")"
	}
	return ""
}

// groupedUsage is the usage (the end of --help) of a command composing
// the shared sets: cobra's, with the command's own flags first and then
// each set's under its name, as the command pages list them.
func groupedUsage(c *cobra.Command) error {
	w := c.OutOrStderr()
	fmt.Fprintf(w, "Usage:\n  %s\n", c.UseLine())
	if c.HasExample() {
		fmt.Fprintf(w, "\nExamples:\n%s\n", strings.TrimRight(c.Example, "\n"))
	}
	secs := flagSections(c.LocalFlags())
	if own := secs[""]; own != nil && own.HasAvailableFlags() {
		fmt.Fprintf(w, "\nFlags:\n%s", own.FlagUsages())
	}
	for _, name := range setNames {
		if set := secs[name]; set != nil && set.HasAvailableFlags() {
			part := ""
			if h := setHeading(name, set, c.LocalFlags()); h != "" {
				part = " " + h
			}
			fmt.Fprintf(w, "\nFlags of the %s set%s:\n%s", name, part, set.FlagUsages())
		}
	}
	if c.HasAvailableInheritedFlags() {
		fmt.Fprintf(w, "\nGlobal Flags:\n%s", c.InheritedFlags().FlagUsages())
	}
	return nil
}

// loadFlags is the load set: what runs (--workload with its own options,
// --scale, --seed, --mix), how many (--users, --ramp, --duration, --stage,
// --connections), how they pace (--think; the open model's --rate,
// --rate-stage, --latency-limit), what is scored (--warmup), how a run
// ends (--max-errors, --graceful-stop) and --stress beside it. Every
// registered workload's own flags (erp's --temp-style, pgbench's
// --protocol ...) come with it.
type loadFlags struct {
	flagGroup
	workload, mix, think, stress string
	users, connections           int
	ramp, duration, warmup       time.Duration
	gracefulStop                 time.Duration
	stages, rateStages           []string
	scale, rate, latencyLimitMs  float64
	seed                         uint64
	maxErrors                    int64
}

func (s *loadFlags) register(fl *pflag.FlagSet, names ...string) {
	d := pflag.NewFlagSet("load", pflag.ContinueOnError)
	d.StringVar(&s.workload, "workload", "smoke", workload.Help("workload to run:"))
	d.Float64VarP(&s.scale, "scale", "s", 0, "data scale factor of the workload (0 = the workload's default: smoke 1, erp 0.1 = about 130 MB; erp 1 = about 1.4 GB; pgbench 1 = 100,000 accounts)")
	d.Uint64Var(&s.seed, "seed", 1, "seed of data generation and of the VUs' random choices (and of pgbench scripts' random functions)")
	d.StringVar(&s.mix, "mix", "", "override the roles' operation mix: op=weight,op=weight")
	d.IntVar(&s.users, "users", 10, "virtual users to ramp up to (ignored with --stage)")
	d.DurationVar(&s.ramp, "ramp", 0, "ramp-up time from 0 to --users (ignored with --stage)")
	d.DurationVar(&s.duration, "duration", time.Minute, "time to hold --users after the ramp-up (ignored with --stage)")
	d.StringArrayVar(&s.stages, "stage", nil, "load profile step DURATION:VUS, repeatable (e.g. --stage 30s:100 --stage 10m:100 --stage 30s:0)")
	d.DurationVar(&s.warmup, "warmup", 0, "operations started in this first part of the run are recorded apart and not scored")
	d.StringVar(&s.think, "think", "500ms-1500ms", "think time between a VU's operations: 2s (fixed), 1s-5s (uniform), exp:3s (exponential), 0; pgbench scripts think 0 unless given")
	d.IntVar(&s.connections, "connections", -1, "database connections shared by the VUs; 0 = one per VU; -1 = min(max VUs, 100); pgbench scripts take 0 unless given")
	d.Float64Var(&s.rate, "rate", 0, "open model: arrivals per second, a Poisson process like pgbench -R; latency runs from the scheduled start")
	d.StringArrayVar(&s.rateStages, "rate-stage", nil, "open model: rate profile step DURATION:RATE, the rate moving linearly to RATE (e.g. --rate-stage 60s:100 --rate-stage 5m:500); repeatable")
	d.Float64Var(&s.latencyLimitMs, "latency-limit", 0, "latency limit in ms: with a rate, arrivals already later than this are skipped; operations above it are counted as late")
	d.Int64Var(&s.maxErrors, "max-errors", 0, "stop the run after this many failed operations (0 = never)")
	d.DurationVar(&s.gracefulStop, "graceful-stop", 10*time.Second, "at the end, how long VUs may finish their current operation")
	d.StringVar(&s.stress, "stress", "", "run stress workers beside the load: vm=2, cpu=1, io=1, vm-bytes=512M, thp=huge|nohuge (see erplab stress)")
	s.add(fl, d, names)
	workload.AddFlags(fl) // erp's --temp-style and --separator, pgbench's --protocol
	w := pflag.NewFlagSet("", pflag.ContinueOnError)
	workload.AddFlags(w)
	w.VisitAll(func(f *pflag.Flag) { markSet(fl.Lookup(f.Name), d.Name()) })
}

// serverFlags is the server set: the server to test (--dsn, --dsn-file,
// else the PG* environment, else a throwaway embedded one), the embedded
// server's --os-user and --keep, --force to write into a database that
// holds objects erplab did not make, and --server-gone-after.
type serverFlags struct {
	flagGroup
	dsn, dsnFile, osUser string
	force, keep          bool
	serverGoneAfter      time.Duration
}

func (s *serverFlags) register(fl *pflag.FlagSet, names ...string) {
	d := pflag.NewFlagSet("server", pflag.ContinueOnError)
	d.StringVar(&s.dsn, "dsn", "", "server to test (libpq key=value or URL); default: PG* environment, else a throwaway embedded server")
	addDSNFileFlag(d, &s.dsnFile, "dsn")
	d.BoolVar(&s.force, "force", false, "allow writing into a database that holds objects (tables, views, functions...) erplab did not create")
	d.StringVar(&s.osUser, "os-user", "", "embedded server: OS user to run PostgreSQL as when erplab runs as root (default postgres)")
	d.BoolVar(&s.keep, "keep", false, "embedded server: leave it running at the end and print how to connect and stop it")
	addServerGoneFlag(d, &s.serverGoneAfter)
	s.add(fl, d, names)
}

// outputFlags is the output set: where results go (--out), their
// permission bits (--out-mode), the time series' resolution (--interval)
// and the progress line (--progress).
type outputFlags struct {
	flagGroup
	out                string
	outMode            fs.FileMode
	progress, interval time.Duration
}

func (s *outputFlags) register(fl *pflag.FlagSet, names ...string) {
	d := pflag.NewFlagSet("output", pflag.ContinueOnError)
	d.StringVar(&s.out, "out", "", "results file, or an existing directory for <time>-<workload>.json (default ./erplab-results/<time>-<workload>.json); never an existing file")
	addOutModeFlag(d, &s.outMode)
	d.DurationVar(&s.progress, "progress", 5*time.Second, "progress line period (0 = none)")
	d.DurationVar(&s.interval, "interval", time.Second, "time-series resolution of the results")
	s.add(fl, d, names)
}

// observeFlags is the observe set: what is sampled beside the load
// (--observe, --observe-interval, --probes), served (--metrics-addr) and
// profiled (--profile).
type observeFlags struct {
	flagGroup
	observe         bool
	observeInterval time.Duration
	metricsAddr     string
	profile         bool
	probes          bool
	probeReads      bool
}

func (s *observeFlags) register(fl *pflag.FlagSet, names ...string) {
	d := pflag.NewFlagSet("observe", pflag.ContinueOnError)
	d.BoolVar(&s.observe, "observe", true, "sample sessions, wait events, relation locks per key operation (pg_locks), pg_stat_database, catalogs and host CPU during the run and record them (--observe=false to skip)")
	d.DurationVar(&s.observeInterval, "observe-interval", 0, "sampling period of the observations (default: --interval; at least 100ms)")
	d.StringVar(&s.metricsAddr, "metrics-addr", "", "serve Prometheus metrics (server, host, per-operation latency and APDEX) at host:port during the run")
	d.BoolVar(&s.profile, "profile", false, "sample the server's CPU with perf during the load (local server; see erplab profile) and record it in the results")
	d.BoolVar(&s.probes, "probes", true, "with --observe, count the server's shared-invalidation events (catalog cache resets, catch-up interrupts, queue clean-ups, messages inserted and read) per second, backend and key operation with perf uprobes on its binary, removed afterwards (root and a local server; otherwise one line says why and the estimate stays; --probes=false to skip)")
	d.BoolVar(&s.probeReads, "probe-reads", false, "with --probes, also count the messages each backend reads (SIGetDataEntries' return): a uprobe at every relation lock a backend takes, which costs the erp workload about 15 % of its throughput on a 2-core host (docs/observe.md)")
	s.add(fl, d, names)
}

// soakFlags is the soak set: --soak (hold the load for hours, watching
// its trend window by window), --window, and --stop-on-collapse with its
// limits --collapse-apdex and --collapse-active.
type soakFlags struct {
	flagGroup
	soak, stopOnCollapse bool
	window, horizon      time.Duration
	collapseApdex        float64
	collapseActive       int
}

func (s *soakFlags) register(fl *pflag.FlagSet, names ...string) {
	d := pflag.NewFlagSet("soak", pflag.ContinueOnError)
	d.BoolVar(&s.soak, "soak", false, "soak test: per --window a line of the load's and the server's figures (APDEX, p95 per key operation, tps, sessions by wait event, catalog size, dead tuples, xmin and xid age, temp files, WAL, autovacuum, host memory), each trend's slope with its interval, an early warning when a trend is real, extra.soak in the results; a lost terminal (SIGHUP) does not stop it")
	d.DurationVar(&s.window, "window", 5*time.Minute, "with --soak, the window the trends are measured over (at least 2 --interval)")
	d.DurationVar(&s.horizon, "soak-horizon", loadtest.DefaultSoakHorizon, "with --soak, keep the time series and the observations' samples at full resolution (--interval) for this last part of the run and the minutes before each warning; older intervals and samples are folded into one point per --window in memory and in the results (the stream X.jsonl keeps every one); 0 keeps every interval")
	d.BoolVar(&s.stopOnCollapse, "stop-on-collapse", false, "with --soak, end the run (results so far written, exit code 9) when a window's APDEX falls below --collapse-apdex or its active sessions reach --collapse-active")
	d.Float64Var(&s.collapseApdex, "collapse-apdex", 0.5, "with --stop-on-collapse, the window APDEX below which the run ends (0 = off)")
	d.IntVar(&s.collapseActive, "collapse-active", 0, "with --stop-on-collapse, the mean active sessions of a window at which the run ends (0 = off; needs --observe)")
	s.add(fl, d, names)
}

// options is the soak set read into loadtest's soak options, nil without
// --soak; interval is the time series' (--interval). Errors are one-line
// usage errors.
func (s *soakFlags) options(interval time.Duration, observe bool) (*loadtest.SoakOptions, error) {
	if !s.soak {
		for _, n := range []string{"window", "soak-horizon", "stop-on-collapse", "collapse-apdex", "collapse-active"} {
			if s.changed(n) {
				return nil, fmt.Errorf("--%s applies with --soak only", n)
			}
		}
		return nil, nil
	}
	switch {
	case s.window < 2*interval:
		return nil, fmt.Errorf("--window %s must be at least twice --interval %s", s.window, interval)
	case s.horizon < 0:
		return nil, fmt.Errorf("--soak-horizon must be >= 0, got %s", s.horizon)
	case s.collapseApdex < 0 || s.collapseApdex > 1:
		return nil, fmt.Errorf("--collapse-apdex must be between 0 and 1, got %g", s.collapseApdex)
	case s.collapseActive < 0:
		return nil, fmt.Errorf("--collapse-active must be >= 0, got %d", s.collapseActive)
	case s.collapseActive > 0 && !observe:
		return nil, errors.New("--collapse-active needs --observe (the samplers count the active sessions)")
	case !s.stopOnCollapse && (s.changed("collapse-apdex") || s.changed("collapse-active")):
		return nil, errors.New("--collapse-apdex and --collapse-active apply with --stop-on-collapse only")
	}
	return &loadtest.SoakOptions{Window: s.window, StopOnCollapse: s.stopOnCollapse, Horizon: s.horizon,
		Limits: soak.Limits{Apdex: s.collapseApdex, Active: float64(s.collapseActive)}}, nil
}

// addServerGoneFlag registers --server-gone-after into d.
func addServerGoneFlag(fl *pflag.FlagSet, d *time.Duration) {
	fl.DurationVar(d, "server-gone-after", engine.DefaultServerGone,
		"abort the run when the server has been gone (connection errors, \"shutting down\" refusals) or has answered nothing for this long; \"starting up\" / \"in recovery\" refusals do not count, but a run that ends in them ends \"lost\", not \"completed\"")
}

// pgbenchOption is one of pgbench's options and what a command composing
// the load set takes instead: a flag (flags[0], e.g. --users for -c),
// another command (-i: erplab init), or only erplab pgbench.
type pgbenchOption struct {
	short, long, what string
	flags             []string
	// instead is what to type in its place, e.g. "--duration here (a
	// duration: --duration 5s)", or without flags another command.
	instead string
}

// pgbenchOptions are the options of pgbench a user of run, ab or
// capacity may type out of habit (erplab pgbench takes them all).
func pgbenchOptions() []pgbenchOption {
	return []pgbenchOption{
		{"c", "client", "clients", []string{"users"}, "--users here (and --connections: the connections they share)"},
		{"T", "time", "seconds to run", []string{"duration"}, "--duration here (a duration: --duration 5s)"},
		{"R", "rate", "transactions per second", []string{"rate"}, "--rate here"},
		{"L", "latency-limit", "latency limit", []string{"latency-limit"}, "--latency-limit here"},
		{"P", "progress", "progress period", []string{"progress"}, "--progress here (a duration: --progress 5s)"},
		{"M", "protocol", "query mode", []string{"protocol"}, "--protocol here"},
		{"f", "file", "script file", []string{"file"}, "-f here"},
		{"b", "builtin", "built-in script", []string{"builtin"}, "-b here"},
		{"S", "select-only", "select-only script", []string{"builtin"}, "-b select-only here"},
		{"N", "skip-some-updates", "simple-update script", []string{"builtin"}, "-b simple-update here"},
		{"p", "port", "port", []string{"dsn"}, "--dsn 'host=H port=P user=U dbname=D' here"},
		{"U", "username", "user", []string{"dsn"}, "--dsn 'host=H port=P user=U dbname=D' here"},
		{"", "random-seed", "random seed", []string{"seed"}, "--seed here"},
		{"i", "initialize", "initialization", nil, "erplab init --workload pgbench -s N"},
		{"t", "transactions", "transactions per client", nil, ""},
		{"j", "jobs", "threads", nil, ""},
		{"D", "define", "script variables", nil, ""},
		{"n", "no-vacuum", "no vacuum", nil, ""},
		{"r", "report-per-command", "per-command report", nil, ""},
		{"l", "log", "transaction log", nil, ""},
		{"C", "connect", "a new connection per transaction", nil, ""},
	}
}

// pgbenchHint is what the flag error err of command c adds when the
// unknown flag is one of pgbench's options: the flag of c that takes its
// place, or that erplab pgbench takes pgbench's command line; "" for
// any other error.
func pgbenchHint(c *cobra.Command, err error) string {
	var ne *pflag.NotExistError
	if !errors.As(err, &ne) || ne.GetSpecifiedName() == "" {
		return ""
	}
	name, short := ne.GetSpecifiedName(), ne.GetSpecifiedShortnames() != ""
	if short {
		name = name[:1]
	}
	for _, o := range pgbenchOptions() {
		if short && o.short != name || !short && o.long != name {
			continue
		}
		given := "-" + o.short
		if !short {
			given = "--" + o.long
		}
		switch {
		case len(o.flags) > 0 && c.Flags().Lookup(o.flags[0]) != nil:
			return fmt.Sprintf("; pgbench's %s (%s) is %s; pgbench's own command line is 'erplab pgbench'", given, o.what, o.instead)
		case len(o.flags) == 0 && o.instead != "":
			return fmt.Sprintf("; pgbench's %s (%s) is '%s'; pgbench's own command line is 'erplab pgbench'", given, o.what, o.instead)
		}
		return fmt.Sprintf("; pgbench's %s (%s) is not an option of %s: pgbench's own command line is 'erplab pgbench'", given, o.what, c.CommandPath())
	}
	return ""
}

// flagError is the flag-error function of a command composing the
// shared sets: the error with exit code 2, a pgbench option named with
// its equivalent (pgbenchHint), then hint's own words (ab: capacity's
// flags) and where help is.
func flagError(hint func(error) string) func(*cobra.Command, error) error {
	return func(c *cobra.Command, err error) error {
		more := pgbenchHint(c, err)
		if hint != nil && more == "" {
			more = hint(err)
		}
		return withCode(exitUsage, fmt.Errorf("%w%s (see '%s --help')", err, more, c.CommandPath()))
	}
}
