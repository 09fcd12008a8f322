package main

import (
	"fmt"
	"io/fs"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/erplab/erplab/internal/engine"
	"github.com/erplab/erplab/internal/workload"
)

// The flag sets that erplab run, ab, capacity and replay share. Each set
// declares its flags once, with one default and one usage line; a command
// composes a set with register, taking all its flags or the ones it names
// (a command may reword a flag's usage for its context after registering,
// never its default). runFlags embeds the four sets and reads them into
// loadtest.Options (run.go: options); ab and capacity use runFlags too,
// replay its own replayFlags.

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
var setNames = []string{"load", "server", "output", "observe"}

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
			fmt.Fprintf(w, "\nFlags of the %s set:\n%s", name, set.FlagUsages())
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

// addServerGoneFlag registers --server-gone-after into d.
func addServerGoneFlag(fl *pflag.FlagSet, d *time.Duration) {
	fl.DurationVar(d, "server-gone-after", engine.DefaultServerGone,
		"abort the run when the server has been gone (connection errors, \"shutting down\" refusals) or has answered nothing for this long; \"starting up\" / \"in recovery\" refusals do not count, but a run that ends in them ends \"lost\", not \"completed\"")
}
