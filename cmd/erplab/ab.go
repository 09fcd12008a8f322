package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/erplab/erplab/internal/compare"
	"github.com/erplab/erplab/internal/experiment"
	"github.com/erplab/erplab/internal/loadtest"
	"github.com/erplab/erplab/internal/pgcluster"
	"github.com/erplab/erplab/internal/remedy"
	_ "github.com/erplab/erplab/internal/remedy/all"
	"github.com/erplab/erplab/internal/results"
	"github.com/erplab/erplab/internal/safefile"
	"github.com/erplab/erplab/internal/workload"
)

// newABCmd is `erplab ab`: baseline and variants on one embedded server,
// each run from a fresh copy of a template database, then compared.
func newABCmd() *cobra.Command {
	var (
		f            runFlags
		variants     []string
		outDir       string
		interleave   bool
		order        string
		budget       time.Duration
		aa           int
		hook         string
		cold         bool
		rounds       int
		alpha        float64
		minEffect    float64
		maxForeign   float64
		noiseGuard   bool
		primary      []string
		dryRun       bool
		templateDB   string
		allowRestart bool
		age          time.Duration
	)
	var remedies strings.Builder
	_ = remedy.WriteHelp(&remedies) // a strings.Builder does not fail
	var remedyParams map[string]*string
	cmd := &cobra.Command{
		Use:   "ab --variant NAME=remedy[,remedy] [--variant ...]",
		Short: "A/B experiment: baseline and variants with remedies, same data and load, then compare",
		Long: `ab starts a throwaway PostgreSQL, builds the workload's data once into a template database
(` + experiment.DefaultTemplate + `) and runs the baseline and every --variant back to back with the same seed,
load profile and data: each run starts from CREATE DATABASE run_x TEMPLATE ` + experiment.DefaultTemplate + `
(dropped afterwards), so postings of one run cannot change the next one's data. The server is
not restarted between runs (warm cache after the first run) unless --cold: then the server is
restarted before every run and, as root, the OS page cache is dropped.

The thp remedy (thp:never|madvise|always, root only, with --cold only) sets the host's transparent
huge pages mode (transparent_hugepage/enabled; defrag and shmem_enabled with --thp-defrag and
--thp-shmem) for its runs: each run copies the template and restarts the server (--cold), then the
remedy writes the mode and restarts the server again, so the postmaster, shared memory and every
backend are mapped under it (the kernel applies a mode to memory faulted in after the change); after
the run the previous modes are written back (also by the next erplab command after a kill -9), and
the next run's restart starts the server under them. THP is host-wide: other processes on the host
run under the variant's mode too. E.g. --variant never=thp:never --variant always=thp:always --cold.

Your own server: --dsn (or --dsn-file) runs everything there instead. The workload's data is built
once into erplab_ab_<id>_template (or --template-db NAME: your database, copied, never written) and
every run is CREATE DATABASE erplab_ab_<id>_run_x TEMPLATE it, dropped after; CREATE DATABASE ...
TEMPLATE needs no other session on the template. settings:FILE is ALTER SYSTEM SET + reload and
ALTER SYSTEM RESET after. Every database made and setting changed is in erplab's leftover record:
after a kill -9 the next erplab command drops and resets them (or prints what to run by hand).
Refused before any run: a role without CREATEDB; settings the role may not ALTER SYSTEM, that need
a restart (without --allow-restart) or that ALTER SYSTEM already sets; --cold without --allow-restart;
the tmpfs remedy unless erplab is root, the role a superuser and the server on this host (Unix socket
or localhost, data directory visible): then its tablespace erplab_ab_<id>_run_x_tmpfs is on a tmpfs
beside the data directory, owned by the server's OS user, temp_tablespaces set for the run database
only, and all of it undone after the run (also after a kill -9, by the next erplab command: the
mount, the tablespace, its directory and the remedy's state file). The thp remedy needs
--allow-restart and a server on this host, and restarts it again after the undo.

--allow-restart lets ab restart your server: settings of context postmaster (shared_buffers,
max_locks_per_transaction ...) are ALTER SYSTEM SET + restart and ALTER SYSTEM RESET + restart
after, and --cold restarts it before every run (and drops the OS page cache as root). Only a server
on this host: reached through a Unix socket or localhost, its data directory (SHOW data_directory)
visible here, erplab running as root or as that directory's owner; the restart is pg_ctl restart -D
DATADIR -m fast -w (the pg_ctl beside the running postmaster, as the owner; the server's output
goes to erplab-pg_ctl-*.log in the temporary directory), and ab waits until the server accepts
connections. After a kill -9 the next erplab command resets and restarts it.

Your own traffic as the load: --workload replay --replay-source CAPTURE --replay-template DSN
replays a capture (erplab proxy --capture, a server log, a 1C journal: as erplab replay's
SOURCE) in every run, --users-x copies of each captured session at --replay-speed. The
database as it was before the capture, given as a connection string, is copied into ab's
server with pg_dump; every round replays onto a fresh copy of it. The load profile flags
(--users, --duration, --connections, --think ...) do not apply; --rounds defaults to 3.
See docs/replay.md.

A/B of capacity (does a remedy move the knee: how many users each variant carries at
APDEX >= target) is erplab capacity --variant NAME=remedy: ab compares one load profile.

Aged state: --age D runs the load (its peak users, --think as given) for D in every run
database after the remedies are applied and before the measured run, so a remedy whose
benefit shows only on an aged catalog or file system is measured as in production. The aging
is a run of its own that writes no results, observes nothing and is not profiled: every
figure of the measured run (operations, observations, statement and wait deltas, churn,
starvation, the perf profile) starts after it. Each results file records age_s and what the
aging did (extra.experiment.aging: operations, catalog sizes before and after).

Rounds: every configuration runs --rounds times (default: as many as fit --budget, at least 3),
in the order A B B A A B ... (--order balanced), so a drift of the machine meets every
configuration alike. The verdicts come from the per-round values (APDEX, percentiles, throughput,
observation rates and per-round deltas), Welch's t over rounds, Holm within each family (below);
with --rounds 1 from a block bootstrap of the two runs, which decides nothing (one line says how
many rounds would). Every tested row gives B-A with its 95 % interval; better/worse needs rounds,
significance after Holm and the whole interval beyond the minimum effect (--min-effect of A, and
a floor per metric). A row that does not vary (the same value in
every round) has no test; one constant within each side but different between them has only a
permutation p-value and no interval: neither is ever better or worse. A noise line gives the
starvation of each side (the time the server's processes and erplab's threads waited for a CPU
per ms they ran: schedstat run delay, with steal); decided rows read "inconclusive: starvation
differed" when their B/A (or A/B) is within the square of the sides' contention ratio, or a
latency moved by no more than the more starved side's extra run delay per operation
(--noise-guard=false turns this off; internal/compare/doc.go, "Noise guard").

Primary rows: each remedy declares, before any run, the row(s) that answer whether it worked:
` + declaredPrimaries() + `
The verdict line of a variant is decided by Holm over its primary rows alone; every other row
is printed as exploratory, with a Holm family of its own, and never decides the verdict (ICH E9
§2.2.2, §2.2.5; internal/compare/doc.go). The verdict: "inconclusive: starvation differed" when
the noise guard withheld a primary row; better/worse (higher/lower) when at least one primary
row is and every decided primary row says the same; "mixed: primary rows disagree" when they say
different things; n/a when every primary row is missing or n/a (no value on a side, too few
points or rounds); otherwise "no significant difference" ("inconclusive: one round each" with
--rounds 1).
The line names the primary rows Holm ran over, those that could not be tested and why (or that
none could), and the exploratory rows listed and tested.
--primary [VARIANT=]SUBJECT[:METRIC[:AIM]] (repeatable) declares them instead, for VARIANT or
for every variant (and the A/A comparisons), e.g. --primary temp_table_storm or
--primary tmpfs=integral:apdex; AIM (lower or higher) says which way a metric without a good
direction of its own (a CPU or wait share) should move: that change is better, the other worse
(--primary 'cpu file system:share_pct:lower'). ab ends with a line "VERDICT NAME: primary verdict: ..." per
variant and its primary rows (A -> B, delta with its 95 % interval and p, or why it has none).

Plan: before the first run ab prints what the experiment can decide, from its configuration
alone: the rounds a side, the order and the runs; per variant Holm's count k over its primary
rows and, per row, the smallest p-value its test reaches (Welch's t has no floor; a row constant
within each side has only the permutation p 2/C(2n,n): 0.33 with 2 rounds, 0.1 with 3, 0.029
with 4; an operation's APDEX is so when each side's executions stay in one APDEX zone),
the executions of its operation a run (an upper bound: VU time after the warm-up over the mean
think time, times the operation's share of the mix) and the smallest APDEX change they resolve.
A primary row that cannot reach alpha/k gets one line saying so and the change that would
decide it (--rounds N, --primary VARIANT=OP:p95_ms, more executions). --dry-run prints the plan
and exits: no server, no files.

--aa N runs the baseline against itself N times (each an experiment with the same rounds) and
reports the false-verdict rate: how many of the N primary verdicts (default row: integral APDEX)
were better, worse, higher, lower or mixed, with its 95 % Clopper-Pearson interval, and how many
comparisons showed any better/worse (higher/lower) row in either family.
--run-hook CMD runs CMD with sh -c before every run (env ERPLAB_AB_VARIANT, ERPLAB_AB_ROUND,
ERPLAB_AB_RUN, ERPLAB_AB_DIR: the experiment's results directory, with --aa that of the
comparison), e.g. to start or stop a neighbour load.

Remedies (each records what it changed in the run's results file, extra.remedies):
` + strings.TrimRight(remedies.String(), "\n"),
		Example: `  erplab ab --workload erp --scale 0.1 --users 20 --duration 60s --variant proxy=rewrite-proxy
  erplab ab --workload erp --variant tuned=settings:examples/erp-profile.conf --rounds 4
  erplab ab --workload erp --duration 20s --aa 10 --rounds 3
  erplab ab --workload erp --temp-style 1c --variant tmpfs=tmpfs-temp-tablespace --out-dir ab-tmpfs
  erplab ab --workload replay --replay-source erp.erpcap.gz --replay-template 'host=db1 dbname=erp_before' --variant tuned=settings:erp-profile.conf --rounds 4`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if len(variants) == 0 && aa == 0 {
				return withCode(exitUsage, errors.New("ab needs at least one --variant NAME=remedy[,remedy] (or --aa N)"))
			}
			if len(variants) > 0 && aa > 0 {
				return withCode(exitUsage, errors.New("--aa runs the baseline against itself: give no --variant"))
			}
			if aa < 0 {
				return withCode(exitUsage, fmt.Errorf("--aa must be >= 1, got %d", aa))
			}
			if interleave {
				if cmd.Flags().Changed("order") && order != "interleaved" {
					return withCode(exitUsage, fmt.Errorf("--interleave contradicts --order %s", order))
				}
				order = "interleaved"
			}
			if order != "balanced" && order != "interleaved" && order != "blocked" {
				return withCode(exitUsage, fmt.Errorf("--order must be balanced, interleaved or blocked, got %q", order))
			}
			if budget <= 0 {
				return withCode(exitUsage, fmt.Errorf("--budget must be > 0, got %s", budget))
			}
			var vs []experiment.Variant
			for _, s := range variants {
				v, err := experiment.ParseVariant(s)
				if err != nil {
					return withCode(exitUsage, err)
				}
				vs = append(vs, v)
			}
			vs, aaPrimary, err := experiment.SetPrimary(vs, primary)
			if err != nil {
				return withCode(exitUsage, err)
			}
			if rounds < 0 || rounds == 0 && cmd.Flags().Changed("rounds") {
				return withCode(exitUsage, fmt.Errorf("--rounds must be >= 1 (leave it out to fill --budget), got %d", rounds))
			}
			if !(alpha > 0 && alpha < 1) || !(minEffect >= 0) {
				return withCode(exitUsage, fmt.Errorf("--alpha must be in (0, 1) and --min-effect >= 0 (got %g, %g)", alpha, minEffect))
			}
			f.ignoreEnv = "ab" // its own server unless --dsn
			opts, err := f.options(cmd)
			if err != nil {
				return withCode(exitUsage, err)
			}
			if err := checkPrimaryRows(primary, opts.Workload, opts.Profile); err != nil {
				return withCode(exitUsage, err)
			}
			if _, driven := opts.Workload.(workload.Driver); driven && age != 0 {
				return withCode(exitUsage, fmt.Errorf("--age: --workload %s drives its own load and cannot be aged", opts.Workload.Name()))
			} else if age < 0 {
				return withCode(exitUsage, fmt.Errorf("--age must not be negative, got %s", age))
			}
			if _, driven := opts.Workload.(workload.Driver); driven {
				if cmd.Flags().Changed("budget") {
					return withCode(exitUsage, fmt.Errorf("--workload %s drives its own load, whose length --budget cannot plan: give --rounds", opts.Workload.Name()))
				}
				if rounds == 0 {
					rounds = experiment.MinRounds // a replay lasts as long as its capture, not --duration
				}
			}
			roundsFrom := "--rounds"
			if rounds == 0 {
				roundsFrom = "as fit --budget " + budget.String()
				if aa > 0 {
					rounds = experiment.RoundsFor(budget/time.Duration(aa), 2, opts, age)
				} else {
					rounds = experiment.RoundsFor(budget, 1+len(vs), opts, age)
				}
			}
			for _, v := range vs {
				if err := remedy.CheckRunnable("ab", v.Remedies, remedyParamValues(remedyParams), os.Geteuid() == 0); err != nil {
					return withCode(exitUsage, fmt.Errorf("--variant %s: %w", v.Name, err))
				}
			}
			baseFlags, newW, err := variantWorkload(cmd, f.workload, vs)
			if err != nil {
				return withCode(exitUsage, err)
			}
			ecfg := experiment.Config{
				NewWorkload: newW, Flags: baseFlags, Load: opts, Variants: vs,
				Rounds: rounds, Balanced: order == "balanced", Interleave: order == "interleaved",
				Params: remedyParamValues(remedyParams), Cold: cold, Age: age,
				Compare:   compare.Options{Alpha: alpha, MinEffect: minEffect, MaxForeignDiff: maxForeign, NoiseGuardOff: !noiseGuard},
				AAPrimary: aaPrimary,
			}
			if err := checkABFlags(opts.DSN, templateDB, outDir, cold, allowRestart, vs); err != nil {
				return err
			}
			for _, v := range vs {
				if err := remedy.CheckCold(v.Remedies, cold); err != nil {
					return withCode(exitUsage, fmt.Errorf("--variant %s: %w: add --cold", v.Name, err))
				}
			}
			tw, err := newW(baseFlags)
			if err != nil {
				return withCode(exitUsage, err)
			}
			if err := writeABPlan(cmd.OutOrStdout(), ecfg, aa, roundsFrom); err != nil || dryRun {
				return err // --dry-run: the plan alone, no server, no directory
			}
			var base *safefile.Root // ./erplab-results held open when it takes the runs
			if outDir == "" {
				// ./erplab-results: made when missing, refused when a link or another user's
				if base, err = loadtest.ResultsDir(""); err != nil {
					return withCode(exitUsage, err)
				}
				defer base.Close()
				outDir = base.Join("ab-" + time.Now().Format("20060102-150405"))
			}
			if aa > 0 {
				if _, err := os.Lstat(filepath.Join(outDir, "aa-01")); err == nil {
					return withCode(exitUsage, fmt.Errorf("%s exists; choose another --out-dir", filepath.Join(outDir, "aa-01")))
				}
			}
			for _, v := range append([]experiment.Variant{{Name: experiment.BaselineName}}, vs...) {
				for r := 1; r <= rounds; r++ {
					p := filepath.Join(outDir, fmt.Sprintf("%s-%d.json", v.Name, r))
					if _, err := os.Lstat(p); err == nil {
						return withCode(exitUsage, fmt.Errorf("results file %s exists; choose another --out-dir", p))
					}
				}
			}
			out := cmd.OutOrStdout()
			ctx := cmd.Context()
			pool := opts.Connections
			if pool == 0 {
				pool = opts.Stages[0].Target
				for _, s := range opts.Stages {
					pool = max(pool, s.Target)
				}
			}
			var c *pgcluster.Cluster
			var ext *experiment.External
			template := experiment.DefaultTemplate
			if opts.DSN != "" { // the user's server: abdsn.go
				local, err := checkABServer(ctx, opts.DSN, templateDB, cold, allowRestart, vs)
				if err != nil {
					return err
				}
				var done func()
				if ext, template, done, err = startABServer(ctx, out, opts.DSN, templateDB, local, tw, opts.Scale, opts.Seed); err != nil {
					return err
				}
				defer done()
			} else {
				if c, err = startTemplate(ctx, out, f.osUser, pool+30, tw, opts.Scale, opts.Seed); err != nil {
					return err
				}
				defer stopEmbedded(c, out)
			}
			var outRoot *safefile.Root
			if base != nil {
				// made through the directory checked above, and held open
				if outRoot, err = base.Dir(filepath.Base(outDir), 0o755); err != nil {
					return err
				}
				defer outRoot.Close()
			}
			ecfg.Cluster, ecfg.External, ecfg.Template, ecfg.OutDir, ecfg.OutRoot = c, ext, template, outDir, outRoot
			if hook != "" {
				ecfg.BeforeRun = func(ctx context.Context, ri experiment.RunInfo) error {
					hc := exec.CommandContext(ctx, "sh", "-c", hook)
					hc.Stdout, hc.Stderr = out, cmd.ErrOrStderr()
					hc.Env = append(os.Environ(), "ERPLAB_AB_VARIANT="+ri.Variant, fmt.Sprintf("ERPLAB_AB_ROUND=%d", ri.Round),
						fmt.Sprintf("ERPLAB_AB_RUN=%d", ri.Seq), "ERPLAB_AB_DIR="+ri.Dir)
					if err := hc.Run(); err != nil {
						return fmt.Errorf("--run-hook: %w", err)
					}
					return nil
				}
			}
			if aa > 0 {
				res, err := experiment.RunAA(ctx, ecfg, aa, out)
				if err != nil {
					return err
				}
				fmt.Fprintf(out, "\n=== erplab ab --aa %d in %s\n", aa, outDir)
				for i, cp := range res.Comparisons {
					fmt.Fprintf(out, "  A/A %2d: %s; %s (starvation %.2f / %.2f, foreign CPU %.1f / %.1f %%)\n", i+1, primaryShort(cp), cp.Summary(),
						cp.Noise.A.Contention, cp.Noise.B.Contention, cp.Noise.A.ForeignPct, cp.Noise.B.ForeignPct)
					for _, r := range cp.Rows {
						if r.Verdict.Decided() {
							fmt.Fprintf(out, "          %s %s\n", r.Role, r.Brief())
						}
					}
				}
				fmt.Fprintln(out, res.Line())
				return nil
			}
			oc, err := experiment.Run(ctx, ecfg, out)
			if err != nil {
				return err
			}
			fmt.Fprintf(out, "\n=== erplab ab: %d runs (%d rounds per configuration, %s order) in %s\n", len(oc.Runs), oc.Rounds, order, outDir)
			for _, r := range oc.Runs {
				fmt.Fprintf(out, "  %s round %d: integral APDEX %s, %s\n", r.Variant, r.Round, fmtIntegral(r.Doc), r.Path)
			}
			for _, cp := range oc.Comparisons {
				fmt.Fprintln(out)
				if err := cp.WriteText(out); err != nil {
					return err
				}
			}
			fmt.Fprintln(out)
			for i, cp := range oc.Comparisons {
				writeVerdict(out, vs[i].Name, cp)
			}
			return nil
		},
	}
	fl := cmd.Flags()
	fl.StringArrayVar(&variants, "variant", nil, "variant NAME=remedy[,remedy...], repeatable (remedies: "+remedy.Known()+")")
	fl.StringVar(&outDir, "out-dir", "", "directory of the results files <variant>-<round>.json (default ./erplab-results/ab-<time>)")
	fl.BoolVar(&interleave, "interleave", false, "same as --order interleaved (A B A B)")
	fl.StringVar(&order, "order", "balanced", "run order: balanced (A B B A ...), interleaved (A B A B) or blocked (A A B B)")
	fl.DurationVar(&age, "age", 0, "age every run database: run the load for this long before the measured run, unmeasured (0 = no aging)")
	fl.DurationVar(&budget, "budget", 10*time.Minute, "total wall time the default --rounds fills (each run: --age + its load profile + 5s)")
	fl.IntVar(&aa, "aa", 0, "A/A calibration: run the baseline against itself N times and report the false-verdict rate")
	fl.StringVar(&hook, "run-hook", "", "shell command run before every run (env ERPLAB_AB_VARIANT, ERPLAB_AB_ROUND, ERPLAB_AB_RUN, ERPLAB_AB_DIR)")
	fl.BoolVar(&cold, "cold", false, "restart the server before every run (and drop the OS page cache as root): cold-cache runs")
	fl.IntVar(&rounds, "rounds", 0, "runs of each configuration (default: as many as fit --budget, at least 3)")
	fl.StringArrayVar(&primary, "primary", nil, "primary row [VARIANT=]SUBJECT[:METRIC[:lower|higher]] deciding the verdict (repeatable; default: the remedies' declared rows)")
	fl.BoolVar(&dryRun, "dry-run", false, "print the plan (rounds, order, what each primary row can reach) and exit: no server, no files")
	remedyParams = addRemedyParamFlags(fl) // each remedy's parameters, e.g. --tmpfs-size
	fl.Float64Var(&alpha, "alpha", compare.DefaultAlpha, "compare: family-wise significance level (Holm)")
	fl.Float64Var(&minEffect, "min-effect", compare.DefaultMinEffect, "compare: smallest relative difference that counts (0.05 = 5 %)")
	fl.BoolVar(&noiseGuard, "noise-guard", true, "compare: withhold decided rows the sides' difference in starvation could explain")
	fl.Float64Var(&maxForeign, "max-foreign-diff", compare.DefaultMaxForeignDiff, "compare: former foreign CPU guard: negative turns the noise guard off, other values are ignored")
	_ = fl.MarkDeprecated("max-foreign-diff", "the noise guard judges starvation now; use --noise-guard=false")
	cmd.SetUsageFunc(groupedUsage) // own flags, then each set's
	// The shared sets (flagsets.go), less what ab has no use for.
	f.loadFlags.register(fl, "workload", "scale", "seed", "mix", "users", "ramp", "duration", "stage", "warmup", "think",
		"connections", "max-errors", "graceful-stop")
	f.serverFlags.register(fl, "dsn", "dsn-file", "os-user", "server-gone-after")
	f.outputFlags.register(fl, "out-mode", "progress", "interval")
	f.observeFlags.register(fl, "observe", "observe-interval", "profile")
	fl.Lookup("dsn").Usage = "your server (libpq key=value or URL) instead of a throwaway one: runs on copies, settings reset after (see above)"
	fl.Lookup("seed").Usage = "seed of data generation and of the VUs' random choices (same in every run)"
	fl.Lookup("temp-style").Usage = "erp: the baseline's temp-table style, 1c or lsfusion"
	fl.Lookup("separator").Usage = "erp: build the data with the data-separator column"
	fl.Lookup("profile").Usage = "sample the server's CPU with perf in every run (see erplab profile); compare puts the subsystem shares side by side"
	fl.BoolVar(&allowRestart, "allow-restart", false, "with --dsn on a server on this host: settings of context postmaster and --cold restart it (pg_ctl restart -m fast, see above)")
	fl.StringVar(&templateDB, "template-db", "", "with --dsn: copy your database NAME for every run instead of building the workload's data")
	cmd.SetFlagErrorFunc(flagError(func(err error) string {
		for _, name := range capacitySearchFlags {
			if strings.Contains(err.Error(), "unknown flag: --"+name) {
				return fmt.Sprintf("; --%s is a flag of erplab capacity: an A/B of capacity is erplab capacity --variant", name)
			}
		}
		return ""
	}))
	return cmd
}

// fmtIntegral prints a run's integral APDEX with its rating, rounded as
// the run summary and the report round it (IntegralScore.String).
func fmtIntegral(d *results.Document) string {
	if d.Integral.NS() {
		return "NS (no samples: no execution was scored)"
	}
	return fmt.Sprintf("%s (%s)", d.Integral.String(), d.Integral.Rating)
}

// VerdictPrefix starts ab's verdict line of a variant.
const VerdictPrefix = "VERDICT "

// writeVerdict prints the verdict line of variant name and its primary
// rows (compare.Comparison.VerdictLines, which erplab report shows too):
// "VERDICT tmpfs: primary verdict: better (Holm over ...)", then one line
// per primary row (A -> B, the effect, its interval and p, or why it has
// none), rounded as the comparison's tables.
func writeVerdict(w io.Writer, name string, cp *compare.Comparison) {
	for i, l := range cp.VerdictLines() {
		if i == 0 {
			fmt.Fprintf(w, "%s%s: %s\n", VerdictPrefix, name, l)
		} else {
			fmt.Fprintf(w, "  %s\n", l)
		}
	}
}

// primaryShort is "primary verdict: V" of an A/A comparison.
func primaryShort(cp *compare.Comparison) string {
	if cp.Primary == nil {
		return "no primary rows"
	}
	return "primary verdict " + string(cp.Primary.Verdict)
}

// declaredPrimaries lists each registered remedy's primary rows
// (remedy.Kind.Primary), one indented line per remedy, e.g.
// "  rewrite-proxy: or_subquery_report:p95_ms and or_subquery_report:apdex".
func declaredPrimaries() string {
	var lines []string
	for _, k := range remedy.Kinds() {
		rows := k.Primary
		if len(rows) == 0 {
			rows = []string{compare.IntegralApdex.String()}
		}
		lines = append(lines, "  "+k.Name+": "+strings.Join(rows, " and "))
	}
	return strings.Join(lines, "\n")
}

// checkPrimaryRows refuses, before the first run, a --primary row no
// comparison of w's runs can have (compare.ImpossibleKey): an operation w
// lacks, a metric no row of its section has. Such a row could never be
// tested, and the experiment would end with "primary verdict n/a".
// Observation rows' subjects exist only once the runs observe them and
// are not checked; nor are the rows remedies declare. A profile row
// ("cpu <subsystem>") needs --profile (profiled).
func checkPrimaryRows(specs []string, w workload.Workload, profiled bool) error {
	if w == nil {
		return nil
	}
	var ops []string
	if _, driven := w.(workload.Driver); !driven {
		ops = []string{}
		for _, op := range w.Operations() {
			ops = append(ops, op.Name)
		}
	}
	for _, s := range specs {
		row := s
		if _, r, scoped := strings.Cut(s, "="); scoped {
			row = r
		}
		k, err := compare.ParseKey(row)
		if err != nil {
			continue
		}
		if strings.HasPrefix(k.Subject, compare.ProfileSubject) && !profiled {
			return fmt.Errorf("--primary %q: the rows 'cpu <subsystem>' exist only in runs made with --profile: add --profile", s)
		}
		if why := compare.ImpossibleKey(k, ops); why != "" {
			return fmt.Errorf("--primary %q: workload %s: %s", s, w.Name(), why)
		}
	}
	return nil
}

// capacitySearchFlags are erplab capacity's own search flags: given to
// ab, its error points to erplab capacity --variant.
var capacitySearchFlags = []string{"max-users", "start", "step", "resolution", "hold", "apdex", "p95", "error-rate", "require", "user-ops-per-hour", "workers"}

// addRemedyParamFlags adds each registered remedy's parameters as flags
// of fl (e.g. --tmpfs-size) and returns their values by name.
func addRemedyParamFlags(fl *pflag.FlagSet) map[string]*string {
	m := map[string]*string{}
	for _, k := range remedy.Kinds() {
		for _, p := range k.Params {
			m[p.Name] = fl.String(p.Name, p.Default, k.Name+": "+p.Usage)
		}
	}
	return m
}

// remedyParamValues reads the flags addRemedyParamFlags made.
func remedyParamValues(m map[string]*string) map[string]string {
	params := make(map[string]string, len(m))
	for name, v := range m {
		params[name] = *v
	}
	return params
}

// variantWorkload checks workload name's flags and the variants' remedies
// against it (usage errors, one line) and returns the baseline's
// workload flag values as given on cmd (defaults included; a remedy such
// as temp-style overrides one of them) and the builder of a run's
// workload from such values.
func variantWorkload(cmd *cobra.Command, name string, vs []experiment.Variant) (map[string]string, func(map[string]string) (workload.Workload, error), error) {
	meta, err := workload.Find(name)
	if err != nil {
		return nil, nil, err
	}
	if flag, owner, foreign := meta.ForeignFlag(cmd.Flags()); foreign {
		return nil, nil, fmt.Errorf("--%s applies to --workload %s only", flag, owner)
	}
	own := meta.FlagSet()
	if err := experiment.CheckVariants(meta.Name, vs, func(flag string) bool { return own.Lookup(flag) != nil }); err != nil {
		return nil, nil, err
	}
	baseFlags := map[string]string{}
	own.VisitAll(func(fl *pflag.Flag) {
		if g := cmd.Flags().Lookup(fl.Name); g != nil {
			baseFlags[fl.Name] = g.Value.String()
		}
	})
	newW := func(flags map[string]string) (workload.Workload, error) { return workload.Build(name, flags) }
	return baseFlags, newW, nil
}

// startTemplate starts the embedded server of an experiment (maxConns
// connections) and builds the template database from the baseline's
// workload tw with scale and seed. The caller stops the server
// (stopEmbedded). A start interrupted before the server runs is
// exitInterrupted.
func startTemplate(ctx context.Context, out io.Writer, osUser string, maxConns int, tw workload.Workload, scale float64, seed uint64) (*pgcluster.Cluster, error) {
	c, err := loadtest.StartEmbeddedWaits(ctx, out, osUser, maxConns)
	if err != nil {
		if ctx.Err() != nil {
			return nil, loadtest.ErrInterrupted
		}
		return nil, err
	}
	if err := experiment.BuildTemplate(ctx, c, experiment.DefaultTemplate, tw, scale, seed, out); err != nil {
		stopEmbedded(c, out)
		return nil, err
	}
	return c, nil
}

// stopEmbedded stops an embedded server, a failure a warning on out.
func stopEmbedded(c *pgcluster.Cluster, out io.Writer) {
	if err := c.Stop(); err != nil {
		fmt.Fprintf(out, "warning: stopping the embedded server: %v\n", err)
	}
}
