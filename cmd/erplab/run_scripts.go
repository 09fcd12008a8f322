package main

import (
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/erplab/erplab/internal/engine"
	"github.com/erplab/erplab/internal/loadtest"
	wpgbench "github.com/erplab/erplab/internal/pgbench"
	"github.com/erplab/erplab/internal/pgbench/script"
	"github.com/erplab/erplab/internal/workload"
)

// scriptFlags are pgbench's run options, accepted by `erplab run` when it
// runs pgbench scripts (pgbench's reference page names them).
type scriptFlags struct {
	clients, jobs, timeS, transactions, maxTries int
	rate, latencyLimitMs                         float64
	rateStages, defines                          []string
	targets                                      []string
	protocol, randomSeed                         string
	noVacuum, perCommand, continueOnError        bool
	// scripts in command-line order, as pgbench numbers them: -f FILE,
	// -b NAME, -S (select-only), -N (simple-update).
	scripts []scriptArg
}

// scriptArg is one script option: a file (-f) or a built-in (-b, -S, -N).
type scriptArg struct {
	file bool
	spec string
}

// scriptValue appends -f/-b/-S/-N to one ordered list (pflag keeps each
// flag's values apart, which would lose pgbench's command-line order).
type scriptValue struct {
	list  *[]scriptArg
	file  bool
	fixed string // -S/-N: the built-in they stand for
}

func (v scriptValue) String() string { return "" }
func (v scriptValue) Type() string {
	if v.fixed != "" {
		return "bool"
	}
	return "string"
}
func (v scriptValue) Set(s string) error {
	if v.fixed != "" {
		if s != "true" {
			return fmt.Errorf("takes no value")
		}
		s = v.fixed
	}
	*v.list = append(*v.list, scriptArg{file: v.file, spec: s})
	return nil
}

func addScriptFlags(fl *pflag.FlagSet, s *scriptFlags) {
	fl.VarP(scriptValue{list: &s.scripts, file: true}, "file", "f", "pgbench script file to run, FILE[@WEIGHT] (- reads standard input); repeatable (runs pgbench scripts)")
	fl.VarP(scriptValue{list: &s.scripts}, "builtin", "b", "pgbench built-in script NAME[@WEIGHT]: tpcb-like, simple-update, select-only (a unique prefix will do); repeatable")
	fl.VarPF(scriptValue{list: &s.scripts, fixed: "select-only"}, "select-only", "S", "pgbench: run the built-in select-only script (-b select-only)").NoOptDefVal = "true"
	fl.VarPF(scriptValue{list: &s.scripts, fixed: "simple-update"}, "skip-some-updates", "N", "pgbench: run the built-in simple-update script (-b simple-update)").NoOptDefVal = "true"
	fl.IntVarP(&s.clients, "client", "c", 0, "pgbench: number of clients (VUs, each with its own connection); default 1")
	fl.IntVarP(&s.jobs, "jobs", "j", 1, "pgbench: number of threads: the OS threads running the clients' goroutines (GOMAXPROCS); not given: every CPU")
	fl.IntVarP(&s.timeS, "time", "T", 0, "pgbench: duration of the run in seconds")
	fl.IntVarP(&s.transactions, "transactions", "t", 0, "pgbench: transactions per client (default 10 when no duration is given)")
	fl.Float64VarP(&s.rate, "rate", "R", 0, "open model: arrivals per second, a Poisson process like pgbench -R; latency runs from the scheduled start")
	fl.StringArrayVar(&s.rateStages, "rate-stage", nil, "open model: rate profile step DURATION:RATE, the rate moving linearly to RATE (e.g. --rate-stage 60s:100 --rate-stage 5m:500); repeatable")
	fl.Float64VarP(&s.latencyLimitMs, "latency-limit", "L", 0, "pgbench: latency limit in ms; with a rate, arrivals already later than this are skipped; transactions above it are counted as late")
	fl.StringVarP(&s.protocol, "protocol", "M", "simple", "pgbench: query mode: simple, extended or prepared")
	fl.BoolVarP(&s.noVacuum, "no-vacuum", "n", false, "pgbench: do not vacuum the tables before the run")
	fl.BoolVar(&s.continueOnError, "continue-on-error", false, "pgbench 18: a client goes on after a failed transaction instead of stopping (pgbench 15-17 abort it)")
	fl.BoolVarP(&s.perCommand, "report-per-command", "r", false, "pgbench: report each command's latency, failures and retries")
	fl.IntVar(&s.maxTries, "max-tries", 1, "pgbench: tries of a transaction after a serialization failure or a deadlock (0 = unlimited)")
	fl.StringVar(&s.randomSeed, "random-seed", "time", "pgbench: seed of the scripts' random functions: time, rand or an unsigned integer")
	fl.StringArrayVarP(&s.defines, "define", "D", nil, "pgbench: define a script variable NAME=VALUE; repeatable")
	fl.StringArrayVar(&s.targets, "target", nil, "APDEX target time T of a script's key operation, NAME=DURATION (e.g. select-only=5ms; default 50ms); repeatable")
}

// scriptOnlyFlags are the flags that mean nothing outside script runs
// (the open model's --rate, --rate-stage and --latency-limit apply to
// every workload).
var scriptOnlyFlags = []string{"client", "jobs", "time", "transactions", "protocol", "no-vacuum", "continue-on-error",
	"report-per-command", "max-tries", "random-seed", "define", "target"}

// scriptMode reports whether the run is a pgbench script run: --workload
// pgbench, or a script chosen with -f, -b, -S or -N.
func (f *runFlags) scriptMode() bool {
	return f.workload == wpgbench.Name || len(f.scripts.scripts) > 0
}

// checkNotScripts refuses pgbench options in a run of another workload.
func (f *runFlags) checkNotScripts(cmd *cobra.Command) error {
	for _, name := range scriptOnlyFlags {
		if cmd.Flags().Changed(name) {
			return fmt.Errorf("--%s is a pgbench option: it applies only when running scripts (-f, -b, -S, -N or --workload pgbench)", name)
		}
	}
	return nil
}

// scriptProfile resolves the script run's load profile from pgbench's
// options: -c clients for -T seconds (or --duration / --stage), or -t
// transactions per client (pgbench's default: 10).
func (f *runFlags) scriptProfile(cmd *cobra.Command) (stages []engine.Stage, txPerVU int, err error) {
	s := &f.scripts
	changed := cmd.Flags().Changed
	if changed("client") && (changed("users") || changed("stage")) {
		return nil, 0, errors.New("-c/--client gives the number of clients: drop --users/--stage, or drop -c")
	}
	if s.clients < 0 || (changed("client") && s.clients == 0) {
		return nil, 0, fmt.Errorf("invalid number of clients: %d", s.clients)
	}
	if s.jobs < 1 {
		return nil, 0, fmt.Errorf("invalid number of threads: %d", s.jobs)
	}
	if changed("time") && changed("transactions") {
		return nil, 0, errors.New("specify either a number of transactions (-t) or a duration (-T), not both")
	}
	if changed("time") && (changed("duration") || changed("stage")) {
		return nil, 0, errors.New("-T gives the duration: drop --duration/--stage, or drop -T")
	}
	if s.transactions < 0 || (changed("transactions") && s.transactions == 0) {
		return nil, 0, fmt.Errorf("invalid number of transactions: %d", s.transactions)
	}
	if s.timeS < 0 || (changed("time") && s.timeS == 0) {
		return nil, 0, fmt.Errorf("invalid duration: %d", s.timeS)
	}
	clients := max(s.clients, 1)
	if len(f.stages) > 0 {
		for _, st := range f.stages {
			stage, err := engine.ParseStage(st)
			if err != nil {
				return nil, 0, fmt.Errorf("--stage: %w", err)
			}
			stages = append(stages, stage)
		}
	} else {
		if changed("users") {
			clients = f.users
		}
		hold := f.duration
		switch {
		case changed("time"):
			hold = time.Duration(s.timeS) * time.Second
		case !changed("duration") && len(s.rateStages) == 0:
			// -t N (default 10, as pgbench): the run ends when every
			// client has done its transactions; the stage only bounds it.
			txPerVU = cmp(s.transactions, 10)
			hold = 365 * 24 * time.Hour
		}
		if stages, err = engine.SimpleStages(clients, f.ramp, hold); err != nil {
			return nil, 0, err
		}
	}
	if changed("transactions") {
		txPerVU = s.transactions
	}
	return stages, txPerVU, nil
}

func cmp(v, def int) int {
	if v == 0 {
		return def
	}
	return v
}

// scriptRate resolves -R / --rate-stage into the open model's profile (nil:
// the closed model).
func (f *runFlags) scriptRate(cmd *cobra.Command) ([]engine.RateStage, error) {
	s := &f.scripts
	if cmd.Flags().Changed("rate") && len(s.rateStages) > 0 {
		return nil, errors.New("--rate gives a constant rate, --rate-stage a profile: use one of them")
	}
	if cmd.Flags().Changed("rate") {
		return engine.ConstantRate(s.rate)
	}
	var out []engine.RateStage
	for _, r := range s.rateStages {
		st, err := engine.ParseRateStage(r)
		if err != nil {
			return nil, fmt.Errorf("--rate-stage: %w", err)
		}
		out = append(out, st)
	}
	return out, nil
}

// scriptWorkload builds the pgbench workload from the options: scripts,
// query mode, variables, seed, targets.
func (f *runFlags) scriptWorkload(cmd *cobra.Command, stages []engine.Stage, txPerVU int) (*wpgbench.Workload, error) {
	s := &f.scripts
	var scripts []*script.Script
	for _, a := range s.scripts {
		var sc *script.Script
		var err error
		if a.file {
			sc, err = script.ParseFile(a.spec, readScript)
		} else {
			sc, err = script.Builtin(a.spec)
		}
		if err != nil {
			return nil, err
		}
		scripts = append(scripts, sc)
	}
	if len(scripts) == 0 {
		sc, _ := script.Builtin("tpcb-like")
		scripts = append(scripts, sc)
	}
	mode, err := script.ParseMode(s.protocol)
	if err != nil {
		return nil, err
	}
	defines := map[string]string{}
	for _, d := range s.defines {
		name, value, err := script.ParseDefine(d)
		if err != nil {
			return nil, err
		}
		defines[name] = value
	}
	seed, err := parseRandomSeed(s.randomSeed)
	if err != nil {
		return nil, err
	}
	targets := map[string]time.Duration{}
	for _, t := range s.targets {
		name, v, ok := strings.Cut(t, "=")
		if !ok || name == "" {
			return nil, fmt.Errorf("--target %q: want NAME=DURATION, e.g. select-only=5ms", t)
		}
		d, err := parseTarget(v)
		if err != nil {
			return nil, fmt.Errorf("--target %q: %w", t, err)
		}
		targets[name] = d
	}
	if s.maxTries < 0 {
		return nil, fmt.Errorf("invalid number of maximum tries: %d", s.maxTries)
	}
	if s.maxTries == 0 && s.latencyLimitMs == 0 && !cmd.Flags().Changed("time") && !cmd.Flags().Changed("duration") && len(f.stages) == 0 {
		return nil, errors.New("an unlimited number of transaction tries can only be used with --latency-limit or a duration (-T)")
	}
	scale := 1
	if cmd.Flags().Changed("scale") {
		if f.scale < 1 || f.scale != math.Trunc(f.scale) || f.scale > math.MaxInt32 {
			return nil, fmt.Errorf("invalid scaling factor: %g (pgbench scales are whole numbers >= 1)", f.scale)
		}
		scale = int(f.scale)
	}
	maxTries := s.maxTries
	if maxTries == 0 {
		maxTries = -1 // pgbench --max-tries=0: unlimited
	}
	return wpgbench.New(wpgbench.Options{
		Scripts: scripts, Targets: targets, Mode: mode, Defines: defines, RandomSeed: seed,
		MaxTries: maxTries, ContinueOnError: s.continueOnError, PerCommand: s.perCommand, NoVacuum: s.noVacuum,
		Scale: scale, ScaleGiven: cmd.Flags().Changed("scale"), Clients: engine.MaxTarget(stages), Threads: s.jobs,
		Duration: engine.TotalDuration(stages), TxPerClient: txPerVU,
		LatencyLimit: time.Duration(s.latencyLimitMs * float64(time.Millisecond)),
		Rate:         cmd.Flags().Changed("rate") || len(s.rateStages) > 0,
		Debug:        os.Stderr,
	})
}

// parseRandomSeed reads pgbench's --random-seed: "time" (the current time
// in µs, pgbench's default), "rand" (a strong random number) or an
// unsigned integer (pgbench.c set_random_seed).
func parseRandomSeed(s string) (uint64, error) {
	switch s {
	case "time":
		return uint64(time.Now().UnixMicro()), nil
	case "rand":
		var b [8]byte
		f, err := os.Open("/dev/urandom")
		if err != nil {
			return 0, fmt.Errorf("--random-seed rand: %w", err)
		}
		defer f.Close()
		if _, err := f.Read(b[:]); err != nil {
			return 0, fmt.Errorf("--random-seed rand: %w", err)
		}
		var v uint64
		for _, x := range b {
			v = v<<8 | uint64(x)
		}
		return v, nil
	}
	v, err := strconv.ParseUint(s, 0, 64)
	if err != nil {
		return 0, fmt.Errorf("unrecognized random seed option \"%s\": expecting an unsigned integer, \"time\" or \"rand\"", s)
	}
	return v, nil
}

// parseTarget reads a target time: a Go duration ("5ms", "1.5s") or a bare
// number of milliseconds.
func parseTarget(s string) (time.Duration, error) {
	d, err := time.ParseDuration(s)
	if err != nil {
		ms, err2 := strconv.ParseFloat(s, 64)
		if err2 != nil {
			return 0, fmt.Errorf("bad duration %q (e.g. 50ms, 1.5s)", s)
		}
		d = time.Duration(ms * float64(time.Millisecond))
	}
	if d <= 0 {
		return 0, fmt.Errorf("target time must be > 0, got %s", s)
	}
	return d, nil
}

// progressValue is --progress/-P: a Go duration, or pgbench's whole
// seconds ("-P 5").
type progressValue struct{ d *time.Duration }

func (p progressValue) String() string { return p.d.String() }
func (p progressValue) Type() string   { return "duration" }
func (p progressValue) Set(s string) error {
	if n, err := strconv.Atoi(s); err == nil {
		if n < 0 {
			return fmt.Errorf("invalid thread progress delay: %d", n)
		}
		*p.d = time.Duration(n) * time.Second
		return nil
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return fmt.Errorf("want a duration (5s) or whole seconds (5), got %q", s)
	}
	*p.d = d
	return nil
}

// scriptFailures reports transactions that failed with an error other
// than a serialization failure or deadlock, and clients that aborted
// (e.g. at the end of a script left inside a transaction block): pgbench
// 15 exits 2 then, and so does erplab.
func scriptFailures(res *loadtest.Result, w workload.Workload) error {
	var n int64
	codes := map[string]int64{}
	for _, op := range res.Doc.Operations {
		for code, c := range op.ErrorsBySQLState {
			if code == script.SerializationFailure || code == script.DeadlockDetected {
				continue
			}
			n += c
			codes[code] += c
		}
	}
	if n == 0 {
		if pw, ok := w.(*wpgbench.Workload); ok && pw.AbortedClients() > 0 {
			return fmt.Errorf("%d clients aborted; results: %s", pw.AbortedClients(), res.Path)
		}
		return nil
	}
	parts := make([]string, 0, len(codes))
	for code, c := range codes {
		parts = append(parts, fmt.Sprintf("%s x%d", code, c))
	}
	sort.Strings(parts)
	if a := res.Doc.Totals.AbortedVUs; a > 0 {
		return fmt.Errorf("%d transactions failed (%s), %d clients aborted; results: %s", n, strings.Join(parts, ", "), a, res.Path)
	}
	return fmt.Errorf("%d transactions failed (%s); results: %s", n, strings.Join(parts, ", "), res.Path)
}

// readScript reads a -f script; "-" is standard input, as for pgbench.
func readScript(path string) ([]byte, error) {
	if path == "-" {
		return io.ReadAll(os.Stdin)
	}
	return os.ReadFile(path)
}

// looksLikeScriptRun tells from the raw arguments whether a `run` command
// line asks for pgbench scripts, so that a flag error there exits 1 as
// pgbench does (the flags are not parsed yet when cobra reports it).
func looksLikeScriptRun(args []string) bool {
	for i, a := range args {
		switch {
		case a == "--":
			return false
		case a == "--select-only" || a == "--skip-some-updates" || a == "--workload="+wpgbench.Name,
			strings.HasPrefix(a, "--file") || strings.HasPrefix(a, "--builtin"),
			a == "--workload" && i+1 < len(args) && args[i+1] == wpgbench.Name:
			return true
		case len(a) > 1 && a[0] == '-' && a[1] != '-':
			// short flags, possibly combined (-nS); a value-taking
			// letter ends the flags of the argument
			for _, c := range a[1:] {
				if strings.ContainsRune("SNfb", c) {
					return true
				}
				if strings.ContainsRune("cjTtRPMDsL", c) {
					break
				}
			}
		}
	}
	return false
}
