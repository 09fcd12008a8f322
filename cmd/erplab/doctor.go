package main

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/erplab/erplab/internal/doctor"
	"github.com/erplab/erplab/internal/hostfacts"
	"github.com/erplab/erplab/internal/loadtest"
	tmpfsfix "github.com/erplab/erplab/internal/remedy/tmpfs"
	"github.com/erplab/erplab/internal/sampler"
)

type doctorFlags struct {
	dsn, format, osUser string
	dsnFile             string
	procRoot, sysRoot   string
	only, skip          []string
	sample, interval    time.Duration
	profile             time.Duration
	windows             int
	host, noHost, list  bool
	probes              bool
	catalogDBs          string
	results, at         string
	window              time.Duration
}

func newDoctorCmd() *cobra.Command {
	var f doctorFlags
	cmd := &cobra.Command{
		Use:   "doctor",
		Short: "Diagnose a PostgreSQL server and its host for ERP workloads, read-only, with evidence and fixes",
		Long: `Run every check against a server (and, when it runs on this machine, its host) and print the
findings grouped by severity: critical, warning, info, ok, not checked. Each finding gives the
evidence (numbers and where they were read), why it matters, the fix as exact commands, and the
source of the rule (PostgreSQL documentation, source file, kernel documentation).

Everything is read-only: the doctor's session runs with default_transaction_read_only = on and
reads statistics views, settings, pg_stat_statements and, for a local server, /proc and /sys.
Rate-based checks (temp files, catalog churn, lock-manager and invalidation waits, THP and swap
activity, new sessions) sample the server in --windows windows of --sample each (default 3 x 10s)
and judge the worst window, printing it beside the mean. A check whose prerequisite is missing
(pg_stat_statements, pgstattuple, pg_monitor, a local server) says "not checked: needs X".
Host checks run when the server is reached over a Unix socket or a loopback address, or with --host.

With no --dsn and no PG* environment, the doctor starts erplab's throwaway server and diagnoses
it and this host (what 'erplab run' would test against).

Exit codes: 0 nothing worse than info; 4 worst finding is a warning; 5 a critical finding;
6 nothing worse than info but checks could not run (the role lacks pg_monitor, a query failed:
one line says how many, which and why; 4 and 5 win over 6); 1 the doctor could not run; 2 bad usage. 'erplab doctor --list' prints every check with its rule.

With --results FILE --at T it diagnoses a run's results instead of a server (no --dsn, no server):
the window of --window (default 5m) before T, a time since the run's start (41m, 2h5m, 90s) or a
clock time (12:03:05) as top --play's --at. The window-* checks read what the run recorded per
sample and per interval (wait events, storms, catalog sizes, the xmin horizon, shared-invalidation
counts, disk_full errors, APDEX and p95 per key operation), quote the window's figures against the
run before it, and the header names the cause; what the results do not keep per time (relation
locks per key operation) is said so. FILE is a run's results (.json) or its stream (.jsonl),
also a killed run's, whose interval lines carry the samples up to the kill.

Subcommand: 'erplab doctor fix tmpfs-temp-tablespace' prints (or with --apply performs) the
procedure that moves temp-table files to tmpfs.`,
		Example: `  erplab doctor --dsn 'host=db1 dbname=erp user=postgres'
  erplab doctor --dsn 'dbname=erp' --sample 10s --format markdown > doctor.md   # samples 3 windows of 10s: 30 s
  erplab doctor --only temp-files,catalog-churn,temp-tablespace --windows 1 --sample 1m
  erplab doctor --format json | jq '.findings[] | select(.severity == "warning")'
  erplab doctor --results erplab-results/20261204-093000-erp.json --at 41m --window 5m`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return runDoctor(cmd, f) },
	}
	fl := cmd.Flags()
	fl.StringVar(&f.dsn, "dsn", "", "server to diagnose (libpq key=value or URL); default: PG* environment, else a throwaway embedded server")
	addDSNFileFlag(fl, &f.dsnFile, "dsn")
	fl.DurationVar(&f.sample, "sample", doctor.DefaultSample, "length of each sampling window of the rate-based checks (0 = skip them)")
	fl.IntVar(&f.windows, "windows", doctor.DefaultWindows, "number of sampling windows of --sample each (sampled checks judge the worst window and report the mean)")
	fl.DurationVar(&f.profile, "profile", 0, "record the server's CPU with perf for this long first (local server; e.g. 10s) for the profile-* checks")
	fl.BoolVar(&f.probes, "probes", true, "count shared-invalidation events (catalog cache resets, catch-ups, queue clean-ups, messages) with perf uprobes on the server's binary during the sample, removed afterwards, for the invalidation-chain check (root and a local server; --probes=false to skip)")
	fl.DurationVar(&f.interval, "interval", doctor.DefaultInterval, "sampling period within --sample")
	fl.StringVar(&f.catalogDBs, "catalog-databases", "all", "other databases whose catalog churn catalog-churn reads at each window bound: all (every database the role may connect to), none, or a comma-separated list (one connection each, opened and closed per reading)")
	fl.StringVar(&f.format, "format", doctor.FormatText, "output format: text, json or markdown")
	fl.StringSliceVar(&f.only, "only", nil, "run only these checks (comma-separated ids, see --list)")
	fl.StringSliceVar(&f.skip, "skip", nil, "skip these checks (comma-separated ids)")
	fl.BoolVar(&f.host, "host", false, "run host checks even when the server does not look local (e.g. a local container reached over a bridge address)")
	fl.BoolVar(&f.noHost, "no-host", false, "never run host checks")
	fl.BoolVar(&f.list, "list", false, "list the checks with their severity rules and sources, and exit")
	fl.StringVar(&f.osUser, "os-user", "", "embedded server: OS user to run PostgreSQL as when erplab runs as root (default postgres)")
	fl.StringVar(&f.procRoot, "proc-root", hostfacts.DefaultProcRoot, "proc tree host checks read")
	fl.StringVar(&f.sysRoot, "sys-root", hostfacts.DefaultSysRoot, "sys tree host checks read")
	fl.StringVar(&f.results, "results", "", "diagnose a window of this run's results (.json, or a killed run's .jsonl) instead of a server; needs --at")
	fl.StringVar(&f.at, "at", "", "with --results: the window's end, a time since the run's start (41m, 2h5m, 90s) or a clock time (12:03:05)")
	fl.DurationVar(&f.window, "window", doctor.DefaultResultsWindow, "with --results: the window's length before --at, compared with the run before it")
	_ = fl.MarkHidden("proc-root")
	_ = fl.MarkHidden("sys-root")
	cmd.AddCommand(newDoctorFixCmd())
	return cmd
}

func runDoctor(cmd *cobra.Command, f doctorFlags) error {
	out := cmd.OutOrStdout()
	if f.list {
		for _, c := range doctor.Checks() {
			kind := ""
			switch host, sampled := c.Needs.Has(doctor.NeedsHost), c.Needs.Has(doctor.NeedsSample); {
			case host && sampled:
				kind = " [host, sampled]"
			case host:
				kind = " [host]"
			case sampled:
				kind = " [sampled]"
			}
			fmt.Fprintf(out, "%s%s: %s\n    rule: %s\n    source: %s\n", c.ID, kind, c.Title, c.Rule, strings.Join(c.Sources, "\n            "))
		}
		return nil
	}
	if f.format != doctor.FormatText && f.format != doctor.FormatJSON && f.format != doctor.FormatMarkdown {
		return withCode(exitUsage, fmt.Errorf("--format must be text, json or markdown, got %q", f.format))
	}
	if f.results != "" {
		return runDoctorResults(cmd, f)
	}
	for _, n := range []string{"at", "window"} {
		if cmd.Flags().Changed(n) {
			return withCode(exitUsage, fmt.Errorf("--%s is for --results FILE", n))
		}
	}
	switch {
	case f.sample < 0:
		return withCode(exitUsage, fmt.Errorf("--sample must be >= 0, got %s", f.sample))
	case f.interval < sampler.MinInterval:
		return withCode(exitUsage, fmt.Errorf("--interval must be at least %s, got %s", sampler.MinInterval, f.interval))
	case f.host && f.noHost:
		return withCode(exitUsage, errors.New("--host and --no-host exclude each other"))
	case f.windows < 1:
		return withCode(exitUsage, fmt.Errorf("--windows must be >= 1, got %d", f.windows))
	case f.profile < 0:
		return withCode(exitUsage, errProfileNegative)
	}
	cats, err := parseCatalogDatabases(f.catalogDBs, sampler.DefaultCatalogsEvery)
	if err != nil {
		return withCode(exitUsage, err)
	}
	known := doctor.IDs()
	for _, id := range append(append([]string{}, f.only...), f.skip...) {
		if !containsID(known, id) {
			return withCode(exitUsage, fmt.Errorf("unknown check id %q in --only/--skip (see 'erplab doctor --list')", id))
		}
	}
	ctx := cmd.Context()
	dsn, given, err := resolveDSN(cmd, f.dsn, f.dsnFile)
	if err != nil {
		return err
	}
	if given && f.osUser != "" {
		return withCode(exitUsage, errors.New("--os-user applies to the embedded server only; drop it or drop --dsn"))
	}
	if err := doctor.ValidateSelection(f.only, f.skip); err != nil {
		return withCode(exitUsage, err)
	}
	if !given {
		c, err := loadtest.StartEmbedded(ctx, cmd.ErrOrStderr(), f.osUser, 0, false)
		if err != nil {
			return err
		}
		defer c.Stop()
		dsn = c.DSN("erplab")
		fmt.Fprintln(cmd.ErrOrStderr(), "diagnosing the throwaway server: a fresh server has no load, so rate-based checks see an idle server")
	}
	opts := doctor.Options{DSN: dsn, Sample: f.sample, Interval: f.interval, Windows: f.windows, Only: f.only, Skip: f.skip,
		ProcRoot: f.procRoot, SysRoot: f.sysRoot, Catalogs: &cats}
	switch {
	case f.host:
		opts.Host = sampler.HostOn
	case f.noHost:
		opts.Host = sampler.HostOff
	}
	if f.format == doctor.FormatText {
		opts.OnSampleStart = func(total time.Duration) {
			fmt.Fprintf(cmd.ErrOrStderr(), "sampling the server for %s...\n", total)
		}
	}
	if f.profile > 0 {
		if opts.Profile, err = doctorProfile(ctx, cmd.ErrOrStderr(), dsn, f.profile); err != nil {
			return withCode(exitInterrupted, errors.New("interrupted"))
		}
	}
	if f.probes && f.sample > 0 && !containsID(f.skip, "invalidation-chain") && (len(f.only) == 0 || containsID(f.only, "invalidation-chain")) {
		opts.Invalidation = doctorProbes(ctx, cmd.ErrOrStderr(), dsn)
		if rec := opts.Invalidation.Recording; rec != nil {
			defer rec.Abort()
		}
	}
	rep, err := doctor.Run(ctx, opts)
	if err != nil {
		if ctx.Err() != nil {
			return withCode(exitInterrupted, errors.New("interrupted"))
		}
		return err
	}
	if err := doctor.Render(out, rep, f.format); err != nil {
		return err
	}
	return doctorExit(rep)
}

// runDoctorResults is doctor --results: the window-* checks on a run's
// results, no server.
func runDoctorResults(cmd *cobra.Command, f doctorFlags) error {
	for _, n := range []string{"dsn", "dsn-file", "sample", "windows", "interval", "profile", "probes", "catalog-databases", "host", "no-host", "os-user"} {
		if cmd.Flags().Changed(n) {
			return withCode(exitUsage, fmt.Errorf("--%s is for diagnosing a server, not with --results", n))
		}
	}
	switch {
	case f.at == "":
		return withCode(exitUsage, errors.New("--results needs --at: the window's end (41m, 2h5m, 90s, or a clock time 12:03:05)"))
	case f.window <= 0:
		return withCode(exitUsage, fmt.Errorf("--window must be > 0, got %s", f.window))
	}
	rep, err := doctor.RunResults(cmd.Context(), doctor.ResultsOptions{Path: f.results, At: f.at, Window: f.window, Only: f.only, Skip: f.skip})
	var we *doctor.WindowError
	switch {
	case errors.As(err, &we):
		return withCode(exitUsage, err)
	case err != nil:
		return err
	}
	if err := doctor.Render(cmd.OutOrStdout(), rep, f.format); err != nil {
		return err
	}
	return doctorExit(rep)
}

// doctorExit is the command's error for rep: exit 5 for a critical
// finding, 4 for a warning, else 6 when checks could not run
// (Report.Incomplete), else nil. The message says which checks did not
// run and why (Report.NotRun) when some could not.
func doctorExit(rep *doctor.Report) error {
	notRun := ""
	if rep.Incomplete() {
		notRun = "; " + rep.NotRun()
	}
	switch {
	case rep.Worst == doctor.Critical:
		return withCode(exitDoctorCritical, fmt.Errorf("doctor: %d critical, %d warning findings%s", rep.Count(doctor.Critical), rep.Count(doctor.Warning), notRun))
	case rep.Worst == doctor.Warning:
		return withCode(exitDoctorWarning, fmt.Errorf("doctor: %d warning findings%s", rep.Count(doctor.Warning), notRun))
	case rep.Incomplete():
		return withCode(exitResults, errors.New("doctor: "+rep.NotRun()))
	}
	return nil
}

func containsID(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

type fixFlags struct {
	dsn, size, tablespace, location, scope, procRoot, state, stateDir string
	dsnFile                                                           string
	apply, undo, force, states                                        bool
	grantTo                                                           []string
}

func newDoctorFixCmd() *cobra.Command {
	var f fixFlags
	cmd := &cobra.Command{
		Use:   "fix " + tmpfsfix.Name,
		Short: "Print, or perform on a local server, the procedure that puts temp tables on tmpfs",
		Long: `Print the procedure that moves the files of temporary tables of one database to a tmpfs:
a tablespace directory owned by the server's OS user (mode 0700), CREATE TABLESPACE, a dummy temp
table that creates the per-database directory, a tmpfs mounted over that directory, temp_tablespaces
set and pg_reload_conf(), and a check that a new temp table's file lands on the tmpfs.
CREATE on the tablespace goes only to the roles of --grant-to (PUBLIC only when named there): a
role with CREATE can also put permanent tables there, and those are lost at the next reboot.

With --apply, erplab performs it on a server on this host, as root, with a superuser role, and
verifies it (pg_relation_filepath of a new temp table against /proc/self/mountinfo); a failed step
undoes the steps before it. Before each step it records what it creates or changes (directory,
tablespace and its OID, grant, mount with its ID, the previous temp_tablespaces at the scope it
sets) in a state file, 0600, under /var/lib/erplab/tmpfs (root; else $XDG_STATE_HOME/erplab/tmpfs),
one per server and tablespace. Applying again over a complete record verifies and changes nothing.

With --undo it reverts exactly what that file records, newest first: temp_tablespaces set back to
its previous value (RESET when it was unset), tmpfs unmounted, tablespace dropped, the directory
removed (or its owner and mode put back), state file removed. It refuses, in one line, changing
nothing, a tablespace or mount erplab did not create: no state file for it (e.g. a DBA's own
tablespace of that name, or one named with --tablespace), a tablespace whose OID differs from the
record, a mount that is not the recorded one. --undo --force removes them anyway: it drops the
tablespace, unmounts every mount under its directory and resets every temp_tablespaces naming it,
whoever made them — only for leftovers you know are erplab's.

A state file whose server is gone (e.g. the throwaway server of a killed 'erplab ab'): list them
with --states, and clean one with --undo --state FILE (no --dsn): it unmounts the recorded tmpfs and,
once the data directory is gone, removes the tablespace directory and the file.

--scope system (default) uses ALTER SYSTEM: running sessions follow at pg_reload_conf(), which
matters for ERP connection pools that live for days, but the setting applies to every database
(their temp files go to the tablespace on disk unless they get a mount too). --scope database uses
ALTER DATABASE: this database only, new sessions only.

` + tmpfsfix.FullWarning,
		Example: `  erplab doctor fix tmpfs-temp-tablespace --size 2G --dsn 'dbname=erp'
  sudo erplab doctor fix tmpfs-temp-tablespace --size 2G --dsn 'host=/var/run/postgresql dbname=erp user=postgres' --apply
  sudo erplab doctor fix tmpfs-temp-tablespace --dsn 'host=/var/run/postgresql dbname=erp user=postgres' --undo
  sudo erplab doctor fix tmpfs-temp-tablespace --states
  sudo erplab doctor fix tmpfs-temp-tablespace --undo --state /var/lib/erplab/tmpfs/7312...-erplab_temp_tmpfs-0a1b2c3d4e5f.json`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) != 1 {
				return withCode(exitUsage, fmt.Errorf("doctor fix needs the fix's name: %s", tmpfsfix.Name))
			}
			if args[0] != tmpfsfix.Name {
				return withCode(exitUsage, fmt.Errorf("unknown fix %q (known: %s)", args[0], tmpfsfix.Name))
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, _ []string) error { return runFix(cmd, f) },
	}
	fl := cmd.Flags()
	fl.StringVar(&f.dsn, "dsn", "", "server and database to fix (libpq key=value or URL); default: PG* environment")
	addDSNFileFlag(fl, &f.dsnFile, "dsn")
	fl.StringVar(&f.size, "size", "", "tmpfs size: a number with k, m, g or % (e.g. 2G); required with --apply")
	fl.BoolVar(&f.apply, "apply", false, "perform the procedure (local server, root, superuser) and verify it")
	fl.BoolVar(&f.undo, "undo", false, "revert what --apply recorded for this server and tablespace; refuses what erplab did not create")
	fl.BoolVar(&f.force, "force", false, "with --undo: DANGEROUS, also drop a tablespace and unmount a tmpfs erplab has no record of creating (a DBA's own)")
	fl.StringVar(&f.state, "state", "", "with --undo and no --dsn: the state file of a server that is gone (see --states)")
	fl.BoolVar(&f.states, "states", false, "list erplab's tmpfs state files (what --apply recorded and --undo would revert)")
	fl.StringVar(&f.tablespace, "tablespace", tmpfsfix.DefaultTablespace, "tablespace name")
	fl.StringSliceVar(&f.grantTo, "grant-to", nil, "roles given CREATE on the tablespace (the application's roles; comma-separated); PUBLIC only when named here, since CREATE also lets a role put permanent tables on the tmpfs")
	fl.StringVar(&f.location, "location", "", "tablespace directory (default: next to the data directory, <parent of data_directory>/<tablespace>)")
	fl.StringVar(&f.scope, "scope", string(tmpfsfix.ScopeSystem), "where temp_tablespaces is set: system (ALTER SYSTEM) or database (ALTER DATABASE)")
	fl.StringVar(&f.procRoot, "proc-root", hostfacts.DefaultProcRoot, "proc tree whose self/mountinfo is read")
	fl.StringVar(&f.stateDir, "state-dir", "", "erplab's state directory (default /var/lib/erplab for root, else $XDG_STATE_HOME/erplab)")
	_ = fl.MarkHidden("proc-root")
	_ = fl.MarkHidden("state-dir")
	return cmd
}

func runFix(cmd *cobra.Command, f fixFlags) error {
	out := cmd.OutOrStdout()
	opts := tmpfsfix.Options{Size: f.size, Tablespace: f.tablespace, Location: f.location, Scope: tmpfsfix.Scope(f.scope), ProcRoot: f.procRoot, GrantTo: f.grantTo}
	switch {
	case f.apply && f.undo:
		return withCode(exitUsage, errors.New("--apply and --undo exclude each other"))
	case f.force && !f.undo:
		return withCode(exitUsage, errors.New("--force applies to --undo only"))
	case f.state != "" && !f.undo:
		return withCode(exitUsage, errors.New("--state applies to --undo only"))
	case f.state != "" && (f.dsn != "" || f.dsnFile != ""):
		return withCode(exitUsage, errors.New("--state is for a server that is gone: drop --dsn (with --dsn the state file is found from the server)"))
	case f.states && (f.apply || f.undo):
		return withCode(exitUsage, errors.New("--states lists the state files; it excludes --apply and --undo"))
	case f.scope != string(tmpfsfix.ScopeSystem) && f.scope != string(tmpfsfix.ScopeDatabase):
		return withCode(exitUsage, fmt.Errorf("--scope must be system or database, got %q", f.scope))
	case f.tablespace == "":
		return withCode(exitUsage, errors.New("--tablespace must not be empty"))
	}
	if f.size != "" || f.apply {
		if err := tmpfsfix.ValidSize(f.size); err != nil {
			return withCode(exitUsage, fmt.Errorf("--size: %w", err))
		}
	}
	ctx := cmd.Context()
	opts.Force, opts.StateDir = f.force, f.stateDir
	switch {
	case f.states:
		return listFixStates(cmd, opts)
	case f.state != "":
		return tmpfsfix.UndoOrphan(ctx, f.state, opts, out)
	}
	dsn, given, err := resolveDSN(cmd, f.dsn, f.dsnFile)
	if err != nil {
		return err
	}
	if !given {
		if f.apply || f.undo {
			return withCode(exitUsage, errors.New("--apply and --undo need the server: pass --dsn (or set PG* variables; for a server that is gone, --undo --state FILE)"))
		}
		fmt.Fprint(out, tmpfsfix.Procedure(&tmpfsfix.Target{Database: "<database>", Tablespace: f.tablespace, Location: f.location, UID: -1, GID: -1}, opts))
		return nil
	}
	switch {
	case f.apply:
		if _, err := tmpfsfix.Apply(ctx, dsn, opts, out); err != nil {
			return err
		}
		fmt.Fprintln(out)
		for _, l := range strings.Split(tmpfsfix.FullWarning, "\n") {
			fmt.Fprintln(out, "warning: "+l)
		}
		fmt.Fprintln(out, "persist the mount in /etc/fstab (see the printed procedure without --apply); undo with --undo")
		return nil
	case f.undo:
		return tmpfsfix.Undo(ctx, dsn, opts, out)
	}
	conn, err := tmpfsfix.Connect(ctx, dsn)
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	t, err := tmpfsfix.Inspect(ctx, conn, opts)
	if err != nil {
		return err
	}
	fmt.Fprint(out, tmpfsfix.Procedure(t, opts))
	return nil
}

// listFixStates prints one line per tmpfs state file: its path and what
// it records.
func listFixStates(cmd *cobra.Command, opts tmpfsfix.Options) error {
	out := cmd.OutOrStdout()
	ents, err := tmpfsfix.States(opts)
	if err != nil {
		return err
	}
	if len(ents) == 0 {
		fmt.Fprintln(out, "no tmpfs state files: nothing recorded to undo")
		return nil
	}
	for _, e := range ents {
		if e.Err != nil {
			fmt.Fprintf(out, "%s: %v\n", e.Path, e.Err)
			continue
		}
		fmt.Fprintf(out, "%s: %s\n", e.Path, e.State.Summary())
	}
	return nil
}
