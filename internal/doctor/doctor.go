// Package doctor diagnoses a PostgreSQL server and the host it runs on
// for the trouble ERP workloads meet in the field (docs/field-notes.md):
// transparent huge pages eating the CPU in system time, catalogs bloated
// by temp-table churn, temp files from a low work_mem, planning slower
// than execution, OR-over-subquery filters that force a sequential scan,
// LWLock:LockManager and shared-invalidation waits, and the usual
// configuration limits (connections, memory budget, autovacuum,
// wraparound).
//
// Every check is read-only: the doctor's session runs with
// default_transaction_read_only = on, reads statistics views, settings and
// (for a local server) /proc and /sys, and never reads pg_locks. Each
// check yields one Finding with a Severity, the measured evidence and
// where it came from, why it matters, the fix as exact commands, and the
// source of the rule (PostgreSQL documentation page, source file or
// kernel documentation). A check whose prerequisite is missing (an
// extension, a privilege, a local server, a sample) reports NotChecked
// with what it needs instead of failing.
//
// Rate-based checks (temp files, catalog churn, wait shares, THP and
// swap activity, new sessions) use a sample taken with package sampler
// in Options.Windows consecutive windows of Options.Sample each; the
// doctor's own session reads the catalogs' counters (n_tup_ins,
// n_tup_upd, n_tup_hot_upd, n_tup_del, size) at every window bound.
// Catalog churn and wait shares are judged on the worst window and
// reported with the mean. The sample is taken only when a selected check
// has NeedsSample or WantsSample, and only after the server has answered. The
// thresholds are constants of this package, listed with each check in
// Checks and in the CLI help.
//
// Catalog bloat and dead tuples are read together with the xmin horizon
// (checks_horizon.go): when a backend's snapshot or xid, a prepared
// transaction, a replication slot or a standby's hot_standby_feedback
// holds it back long enough (horizonAgeWarn transactions, or
// horizonHoldWarnS seconds open), the fix names that holder instead of a
// VACUUM that would remove nothing.
//
// Host facts come from package hostfacts under Options.ProcRoot and
// SysRoot; meminfo is required, every other host file is read on its own,
// so a malformed one makes only the checks reading it NotChecked (naming
// the file). Checks that read nothing but the server's identity, its
// settings and the host facts run offline on golden cases in
// testdata/doctor/<case>/ (server.json, settings.json as pg_settings rows,
// proc/ and sys/ trees, expected.json); checks that read the server
// through fact loaders of env run there on what a case's facts.json can
// fill (sample windows, pg_stat_statements rows, catalog counts, horizon
// holders, join-column statistics, temp tablespaces); a case lists in
// "checks" which of them it runs, and golden_test.go lists both kinds. And
// `go test ./internal/doctor -run Golden -update` rewrites the expected
// findings after a deliberate change.
package doctor

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/erplab/erplab/internal/conninfo"
	"github.com/erplab/erplab/internal/hostfacts"
	"github.com/erplab/erplab/internal/sampler"
	"github.com/erplab/erplab/internal/storm"
)

// Severity grades a finding. The order of the constants is the order of
// the report sections (worst first); Worse compares by harm.
type Severity int

const (
	// Critical: the server is failing or about to (wraparound, connection
	// limit, autovacuum off).
	Critical Severity = iota
	// Warning: measurably hurts an ERP workload; fix it.
	Warning
	// Info: worth knowing, not harmful by itself.
	Info
	// OK: checked, nothing to fix.
	OK
	// NotChecked: a prerequisite is missing (Finding.Needs says which).
	NotChecked
)

var severityNames = []string{"critical", "warning", "info", "ok", "not checked"}

// String returns "critical", "warning", "info", "ok" or "not checked".
func (s Severity) String() string {
	if s < 0 || int(s) >= len(severityNames) {
		return fmt.Sprintf("severity(%d)", int(s))
	}
	return severityNames[s]
}

// rank orders severities by harm: critical 3, warning 2, info 1, ok and
// not checked 0.
func (s Severity) rank() int {
	switch s {
	case Critical:
		return 3
	case Warning:
		return 2
	case Info:
		return 1
	}
	return 0
}

// MarshalText encodes the severity as its name (JSON "warning").
func (s Severity) MarshalText() ([]byte, error) { return []byte(s.String()), nil }

// UnmarshalText parses a severity name.
func (s *Severity) UnmarshalText(b []byte) error {
	i := slices.Index(severityNames, string(b))
	if i < 0 {
		return fmt.Errorf("unknown severity %q", b)
	}
	*s = Severity(i)
	return nil
}

// Evidence is one measured fact: Text holds the numbers, From where they
// were read ("pg_stat_database", "/sys/kernel/mm/transparent_hugepage/enabled").
type Evidence struct {
	Text string `json:"text"`
	From string `json:"from"`
}

// Finding is the result of one check.
type Finding struct {
	// ID is the check's id ("thp-enabled"), Title its name.
	ID    string `json:"id"`
	Title string `json:"title"`
	// Severity is the verdict.
	Severity Severity `json:"severity"`
	// Summary is the verdict in one line with the key number.
	Summary string `json:"summary"`
	// Evidence are the measured facts behind the verdict.
	Evidence []Evidence `json:"evidence,omitempty"`
	// Why says in one sentence why the rule matters.
	Why string `json:"why"`
	// Fix holds exact commands (SQL or shell, "#" lines are comments);
	// empty when nothing is to be done.
	Fix []string `json:"fix,omitempty"`
	// Sources justify the rule: PostgreSQL documentation pages, source
	// files, kernel documentation.
	Sources []string `json:"sources"`
	// Needs says what is missing when Severity is NotChecked, e.g.
	// "pg_stat_statements: CREATE EXTENSION pg_stat_statements; in
	// database erp (its library is already loaded by
	// shared_preload_libraries: no restart)".
	Needs string `json:"needs,omitempty"`
	// CouldNotRun says why a NotChecked check could not run: NeedsPrivilege
	// or Failed. It is empty for the other NotChecked findings, which lack
	// a prerequisite the server or the invocation chose (an extension, a
	// setting, a version, a local server, a sample, a profile).
	CouldNotRun string `json:"could_not_run,omitempty"`
	// Metrics are the key numbers by name, for scripts and tests (units
	// in the names: _bytes, _ms, _per_s, _pct).
	Metrics map[string]float64 `json:"metrics,omitempty"`
	// Statements are the pg_stat_statements entries a finding names.
	Statements []Statement `json:"statements,omitempty"`
}

// Statement is one pg_stat_statements entry named by a finding; times
// in ms.
type Statement struct {
	QueryID  int64  `json:"queryid"`
	Database string `json:"database"`
	// Query is the normalized text ($n for constants), whitespace
	// collapsed, cut to 1000 characters.
	Query       string  `json:"query"`
	Calls       int64   `json:"calls"`
	MeanExecMs  float64 `json:"mean_exec_ms"`
	TotalExecMs float64 `json:"total_exec_ms"`
	MeanPlanMs  float64 `json:"mean_plan_ms,omitempty"`
	// Note says what the finding saw in it, e.g. "d.owner: 2 OR arms, 1 subquery".
	Note string `json:"note,omitempty"`
}

// Check describes one check. Each check registers its Check from an init
// function beside its run function (register, registry.go).
type Check struct {
	ID    string
	Title string
	// Needs says what the check needs beyond a session on the server (a
	// local host, a sample); zero for none.
	Needs Needs
	// Rule is the severity rule in one line (for --list and the docs).
	Rule string
	Why  string
	// Sources justify the rule.
	Sources []string
	// order places the check in the report: its section (secHost, ...)
	// plus its place in the section.
	order int
	run   func(ctx context.Context, e *env) result
}

// result is what a check's run returns; the static parts of Finding come
// from the Check.
type result struct {
	sev         Severity
	summary     string
	evidence    []Evidence
	fix         []string
	needs       string
	couldNotRun string
	metrics     map[string]float64
	stmts       []Statement
}

// Why a check could not run (Finding.CouldNotRun).
const (
	// NeedsPrivilege: the role lacks a privilege of pg_monitor
	// (pg_read_all_stats, pg_read_all_settings, pg_stat_scan_tables).
	NeedsPrivilege = "privilege"
	// Failed: the check's query, or the sampler, failed.
	Failed = "error"
)

func notChecked(needs string) result {
	return result{sev: NotChecked, summary: "not checked: needs " + needs, needs: needs}
}

// notRun is notChecked for a check that could not run (why: NeedsPrivilege
// or Failed).
func notRun(why, needs string) result {
	r := notChecked(needs)
	r.couldNotRun = why
	return r
}

// needsMonitor is the NotChecked result of a check that reads other
// roles' sessions, hidden (what) from a role without pg_read_all_stats.
func needsMonitor(e *env, what string) result {
	return notRun(NeedsPrivilege, fmt.Sprintf("pg_read_all_stats (GRANT pg_monitor TO %s): %s", e.srv.role(), what))
}

// Options configure Run.
type Options struct {
	// DSN is the server (libpq key=value or URL; "" reads PG* variables).
	DSN string
	// Sample is how long each of the Windows sampling windows observes
	// the server (0: rate-based checks report NotChecked). DefaultSample unless a caller picks
	// another.
	Sample time.Duration
	// Interval is the sampling period within Sample (default
	// DefaultInterval).
	Interval time.Duration
	// Windows is the number of consecutive windows of Sample each that
	// the doctor samples (default DefaultWindows): the sampled checks
	// judge the worst window and report it beside the mean, so that a
	// burst is not averaged away or split by chance.
	Windows int
	// Only, when not empty, runs only the checks with these ids; Skip
	// leaves out these ids. Unknown ids are an error.
	Only, Skip []string
	// Host chooses whether host checks run: sampler.HostAuto (when the
	// server is reached over a Unix socket or loopback), HostOn, HostOff.
	Host sampler.HostMode
	// ProcRoot and SysRoot are the proc and sys trees host checks read
	// (default "/proc" and "/sys"; tests pass fixture trees).
	ProcRoot, SysRoot string
	// Catalogs chooses the other databases whose catalog counters the
	// catalog-churn check reads at every window bound (one connection
	// each, opened and closed per reading; Every is not used): nil reads
	// every database the role may connect to, &sampler.OtherCatalogs{}
	// none.
	Catalogs *sampler.OtherCatalogs
	// OnSampleStart, when set, is called once the server has answered and
	// just before sampling starts, with the total sampling time (not
	// called when no selected check needs a sample).
	OnSampleStart func(total time.Duration)
	// Profile is a CPU profile of the server for the profile-* checks
	// (checks_profile.go); zero: they report NotChecked.
	Profile ProfileFacts
	// Invalidation are the shared-invalidation uprobes counting during
	// the sample for the invalidation-chain check
	// (checks_invalidation.go); zero: it reports NotChecked.
	Invalidation InvalFacts
}

// Sampling defaults.
const (
	DefaultSample   = 10 * time.Second
	DefaultInterval = 500 * time.Millisecond
	DefaultWindows  = 3
	// ApplicationName is set on the doctor's connection.
	ApplicationName = "erplab doctor"
	// queryTimeout bounds every statement of a check (statement_timeout
	// of the doctor's session).
	queryTimeout = 15 * time.Second
)

// ReportFormat names the version of the JSON report.
const ReportFormat = "erplab-doctor/1"

// Report is the outcome of Run.
type Report struct {
	Format string `json:"format"`
	// Server identifies the server: version, database, redacted DSN.
	Server ServerInfo `json:"server"`
	// HostChecked says whether host checks read /proc and /sys;
	// HostNote says why not or which roots were read.
	HostChecked bool   `json:"host_checked"`
	HostNote    string `json:"host_note,omitempty"`
	// SampleS is the length of the sample from its first to its last
	// reading, seconds (0: no sample taken).
	SampleS float64 `json:"sample_s"`
	// SampleWindows is the number of sampling windows (0: no sample).
	SampleWindows int `json:"sample_windows,omitempty"`
	// Worst is the worst severity found (ok when all are ok or not
	// checked).
	Worst    Severity  `json:"worst"`
	Findings []Finding `json:"findings"`
	// Storms are the session storms the sampler detected.
	Storms []storm.Event `json:"storms,omitempty"`
	// Window is the window of a run's results judged (doctor --results);
	// nil for a server's diagnosis.
	Window *WindowInfo `json:"window,omitempty"`
}

// ServerInfo identifies the diagnosed server.
type ServerInfo struct {
	Version    string `json:"version"`
	VersionNum int    `json:"version_num"`
	Database   string `json:"database"`
	// DSN is the connection string with the password masked.
	DSN   string `json:"dsn"`
	Local bool   `json:"local"`
	// Superuser and StatsPrivileged (pg_read_all_stats) are the role's
	// privileges.
	Superuser       bool `json:"superuser"`
	StatsPrivileged bool `json:"stats_privileged"`
	InRecovery      bool `json:"in_recovery"`
	// Role is the doctor's role (current_user) as an SQL identifier
	// (quote_ident), for the GRANT a check that could not run needs.
	Role string `json:"role,omitempty"`
}

// role is Role, or "<role>" when unknown.
func (s ServerInfo) role() string {
	if s.Role == "" {
		return "<role>"
	}
	return s.Role
}

// Count returns the number of findings with severity s.
func (r *Report) Count(s Severity) int {
	n := 0
	for _, f := range r.Findings {
		if f.Severity == s {
			n++
		}
	}
	return n
}

// NotRun says in one line how many checks did not run (NotChecked) and
// why: those that could not run (Finding.CouldNotRun) by name, with the
// GRANT the role needs or "failed", the others as needing a prerequisite:
// "5 of 25 checks did not run: idle-in-transaction, long-queries,
// lwlock-waits need privileges role app lacks (GRANT pg_monitor TO app);
// temp-buffers, catalog-bloat need a prerequisite (see each one's line)".
// It is "" when every check ran.
func (r *Report) NotRun() string {
	var priv, errs, other []string
	for _, f := range r.Findings {
		switch {
		case f.Severity != NotChecked:
		case f.CouldNotRun == NeedsPrivilege:
			priv = append(priv, f.ID)
		case f.CouldNotRun == Failed:
			errs = append(errs, f.ID)
		default:
			other = append(other, f.ID)
		}
	}
	if len(priv)+len(errs)+len(other) == 0 {
		return ""
	}
	var why []string
	if len(priv) > 0 {
		role := r.Server.role()
		why = append(why, fmt.Sprintf("%s %s privileges role %s lacks (GRANT pg_monitor TO %s)", strings.Join(priv, ", "), need(priv), role, role))
	}
	if len(errs) > 0 {
		why = append(why, strings.Join(errs, ", ")+" failed (see each one's line)")
	}
	if len(other) > 0 {
		why = append(why, fmt.Sprintf("%s %s a prerequisite (see each one's line)", strings.Join(other, ", "), need(other)))
	}
	return fmt.Sprintf("%d of %d checks did not run: %s", len(priv)+len(errs)+len(other), len(r.Findings), strings.Join(why, "; "))
}

// need is the verb for ids: "needs" for one, "need" for several.
func need(ids []string) string {
	if len(ids) == 1 {
		return "needs"
	}
	return "need"
}

// Incomplete reports whether checks could not run (Finding.CouldNotRun):
// the role lacks a privilege or a query failed.
func (r *Report) Incomplete() bool {
	return slices.ContainsFunc(r.Findings, func(f Finding) bool { return f.CouldNotRun != "" })
}

// Find returns the finding with this id, or nil.
func (r *Report) Find(id string) *Finding {
	for i := range r.Findings {
		if r.Findings[i].ID == id {
			return &r.Findings[i]
		}
	}
	return nil
}

// JSON returns the report as indented JSON.
func (r *Report) JSON() ([]byte, error) { return json.MarshalIndent(r, "", "  ") }

// Checks returns the checks in report order (a fresh slice).
func Checks() []Check {
	return everyCheck()
}

// IDs returns the ids of all checks.
func IDs() []string {
	all := everyCheck()
	out := make([]string, len(all))
	for i, c := range all {
		out[i] = c.ID
	}
	return out
}

// ValidateSelection checks --only/--skip of a server's diagnosis before
// anything runs: unknown ids, or a selection that leaves no check (the
// window-* checks judge a run's results only), are an error.
func ValidateSelection(only, skip []string) error {
	checks, err := selectChecks(only, skip)
	if err == nil && !slices.ContainsFunc(checks, func(c Check) bool { return !c.isWindow() }) {
		err = errNoServerCheck
	}
	return err
}

// errNoServerCheck is a server's diagnosis with window-* checks only.
var errNoServerCheck = errors.New("--only names window-* checks only, which judge a run's results (doctor --results FILE --at T)")

// selectChecks applies only/skip; unknown ids are an error naming them.
func selectChecks(only, skip []string) ([]Check, error) {
	known := IDs()
	var unknown []string
	for _, id := range append(slices.Clone(only), skip...) {
		if !slices.Contains(known, id) {
			unknown = append(unknown, id)
		}
	}
	if len(unknown) > 0 {
		return nil, fmt.Errorf("unknown check id %s (known: %s)", strings.Join(unknown, ", "), strings.Join(known, ", "))
	}
	var out []Check
	for _, c := range everyCheck() {
		if len(only) > 0 && !slices.Contains(only, c.ID) {
			continue
		}
		if slices.Contains(skip, c.ID) {
			continue
		}
		out = append(out, c)
	}
	if len(out) == 0 {
		return nil, errors.New("--only/--skip leave no check to run")
	}
	return out, nil
}

// Run connects to the server (a bad DSN fails here, before any
// sampling), samples it for opts.Sample when a selected check needs or wants a sample, runs the selected checks and returns the report.
// Errors: bad options (unknown check id), the connection failing (one
// line, no password), ctx cancelled. A check that fails on its own
// reports NotChecked with the error instead of failing Run.
func Run(ctx context.Context, opts Options) (*Report, error) {
	checks, err := selectChecks(opts.Only, opts.Skip)
	if err != nil {
		return nil, err
	}
	checks = profileSelection(checks, opts)
	if checks = slices.DeleteFunc(checks, Check.isWindow); len(checks) == 0 {
		return nil, errNoServerCheck
	}
	if opts.Sample < 0 {
		return nil, fmt.Errorf("sample must be >= 0, got %s", opts.Sample)
	}
	if opts.Interval == 0 {
		opts.Interval = DefaultInterval
	}
	if opts.Windows == 0 {
		opts.Windows = DefaultWindows
	}
	if opts.Windows < 0 {
		return nil, fmt.Errorf("windows must be >= 1, got %d", opts.Windows)
	}
	if opts.Interval < sampler.MinInterval {
		return nil, fmt.Errorf("sampling interval must be at least %s, got %s", sampler.MinInterval, opts.Interval)
	}
	if opts.ProcRoot == "" {
		opts.ProcRoot = hostfacts.DefaultProcRoot
	}
	if opts.SysRoot == "" {
		opts.SysRoot = hostfacts.DefaultSysRoot
	}

	conn, err := connect(ctx, opts.DSN)
	if err != nil {
		return nil, err
	}
	defer conn.Close(context.WithoutCancel(ctx))

	e := &env{opts: opts, conn: conn}
	if err := e.readServer(ctx); err != nil {
		return nil, err
	}
	e.srv.DSN = conninfo.Redact(opts.DSN)
	if opts.DSN == "" {
		e.srv.DSN = "(PG* environment)"
	}
	e.readHost()

	// Only checks that cannot judge (or advise) without a sample make the
	// doctor sample; other checks use one when it is taken.
	needSample := slices.ContainsFunc(checks, func(c Check) bool { return c.Needs&(NeedsSample|WantsSample) != 0 })
	e.smpWhy = "a sample (--sample > 0)"
	switch {
	case !needSample, opts.Sample == 0:
	default:
		if opts.OnSampleStart != nil {
			opts.OnSampleStart(time.Duration(opts.Windows) * opts.Sample)
		}
		if err := e.takeSample(ctx); err != nil {
			return nil, err
		}
	}

	return e.report(ctx, checks)
}

// report runs checks on the facts in e (server, settings, host, sample)
// and assembles the report: findings sorted by severity section, then
// check order. Errors: ctx cancelled.
func (e *env) report(ctx context.Context, checks []Check) (*Report, error) {
	opts := e.opts
	rep := &Report{Format: ReportFormat, Server: e.srv, HostChecked: e.host != nil}
	if e.host != nil {
		rep.HostNote = "read " + opts.ProcRoot + " and " + opts.SysRoot
	} else {
		rep.HostNote = e.hostWhy
	}
	if e.smp != nil {
		rep.SampleS = round2(e.smp.elapsed)
		rep.SampleWindows = len(e.smp.windows)
		rep.Storms = e.smp.storms
	}
	for _, c := range checks {
		f := Finding{ID: c.ID, Title: c.Title, Why: c.Why, Sources: c.Sources}
		var r result
		switch {
		case c.Needs.Has(NeedsHost) && e.host == nil:
			r = notChecked(e.hostWhy)
			r.couldNotRun = e.hostFailed
		case c.Needs.Has(NeedsSample) && e.smp == nil:
			r = notChecked(e.smpWhy)
			r.couldNotRun = e.smpFailed
		default:
			r = c.run(ctx, e)
		}
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("doctor: %w", err)
		}
		f.Severity, f.Summary, f.Evidence, f.Fix, f.Needs, f.CouldNotRun, f.Metrics, f.Statements = r.sev, r.summary, r.evidence, r.fix, r.needs, r.couldNotRun, r.metrics, r.stmts
		rep.Findings = append(rep.Findings, f)
	}
	// Stable order: by severity section, then check order.
	sort.SliceStable(rep.Findings, func(i, j int) bool { return rep.Findings[i].Severity < rep.Findings[j].Severity })
	rep.Worst = OK
	for _, f := range rep.Findings {
		if f.Severity.rank() > rep.Worst.rank() {
			rep.Worst = f.Severity
		}
	}
	return rep, nil
}

// connect opens the doctor's session: read-only by default
// (default_transaction_read_only), with a statement timeout and its
// application_name.
func connect(ctx context.Context, dsn string) (*pgx.Conn, error) {
	return conninfo.Connect(ctx, dsn, ApplicationName, map[string]string{
		"default_transaction_read_only": "on",
		"statement_timeout":             fmt.Sprint(queryTimeout.Milliseconds()),
	})
}
