package doctor

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/prometheus/procfs"

	"github.com/erplab/erplab/internal/conninfo"
	"github.com/erplab/erplab/internal/hostfacts"
	"github.com/erplab/erplab/internal/sampler"
	"github.com/erplab/erplab/internal/storm"
)

// env is what the checks read: the doctor's connection, the server's
// identity and settings, the host facts (nil when not checked) and the
// sample (nil when none was taken).
type env struct {
	opts    Options
	conn    *pgx.Conn
	srv     ServerInfo
	dbOID   uint32
	pid     int
	set     map[string]setting
	host    *hostFacts
	hostWhy string
	smp     *sampleData
	smpWhy  string
	pgss    *pgssState // loaded on first use
	hz      *horizon   // loaded on first use
	// rec, when set (golden tests), holds recorded facts that the
	// checks' fact loaders read instead of querying the server.
	rec *recorded
	// hostFailed and smpFailed are Failed when reading the host or
	// taking the sample failed (hostWhy, smpWhy say how), "" otherwise.
	hostFailed, smpFailed string
	// win is the window of a run's results the window-* checks judge
	// (RunResults); nil otherwise.
	win *windowFacts
}

// recorded are the facts of a golden case (testdata/doctor/<case>/
// facts.json) that fact loaders read instead of the server: each
// loader returns errNotRecorded for a fact the case does not hold.
type recorded struct {
	// Checks are the checks the case runs from these facts (beside the
	// offline ones; golden_test.go lists which may).
	Checks []string `json:"checks"`
	// Windows is the sample (sampled checks); ProfilePeriodMs
	// pg_wait_sampling's profile_period when the windows carry its profile.
	Windows         []window `json:"windows,omitempty"`
	ProfilePeriodMs float64  `json:"profile_period_ms,omitempty"`
	// Statements are pg_stat_statements rows; TrackPlanning its setting.
	Statements    []pgssRow `json:"statements,omitempty"`
	TrackPlanning bool      `json:"track_planning,omitempty"`
	// Catalog are the catalogs' sizes and tuple counts.
	Catalog []catRel `json:"catalog,omitempty"`
	// Horizon are the xmin horizon's holders.
	Horizon *horizon `json:"horizon,omitempty"`
	// JoinStats are the statistics of join columns.
	JoinStats []joinColStat `json:"join_stats,omitempty"`
	// Tablespaces are the temp tablespaces as seen on the server and host.
	Tablespaces []tsFact `json:"tablespaces,omitempty"`
	// TmpfsScan is the scan of all databases for relations in tmpfs
	// tablespaces (tmpfs_alldb.go).
	TmpfsScan *tmpfsScan `json:"tmpfs_scan,omitempty"`
	// ServerLog is the disk-full errors read in the server's log
	// (serverlog.go).
	ServerLog *serverLog `json:"server_log,omitempty"`
}

// errNotRecorded is what a fact loader returns under a golden case that
// lacks the fact.
type errNotRecorded string

func (e errNotRecorded) Error() string { return "fact " + string(e) + " not recorded in the case" }

// setting is one row of pg_settings; the JSON names are those of the
// golden fixtures (testdata/doctor/*/settings.json).
type setting struct {
	Raw    string `json:"setting"` // pg_settings.setting, in Unit
	Unit   string `json:"unit"`    // pg_settings.unit: "8kB", "kB", "MB", "ms", "s", ""
	Source string `json:"source"`  // pg_settings.source: "default", "configuration file", ...
	Show   string `json:"show"`    // current_setting(): as SHOW prints it, with a unit
}

const serverSQL = `SELECT current_setting('server_version_num')::int4, current_setting('server_version'),
       current_database()::text, (SELECT oid FROM pg_catalog.pg_database WHERE datname = current_database())::int8,
       coalesce((SELECT rolsuper FROM pg_catalog.pg_roles WHERE rolname = current_user), false),
       pg_catalog.pg_has_role(current_user, 'pg_read_all_stats', 'USAGE'),
       pg_catalog.pg_backend_pid(), pg_catalog.pg_is_in_recovery(), pg_catalog.quote_ident(current_user)`

// settingsSQL reads every setting the role may see (pg_settings hides
// superuser-only ones such as data_directory from other roles).
const settingsSQL = `SELECT name, coalesce(setting, ''), coalesce(unit, ''), coalesce(source, ''), current_setting(name) FROM pg_catalog.pg_settings`

func (e *env) readServer(ctx context.Context) error {
	var oid int64
	s := &e.srv
	if err := e.conn.QueryRow(ctx, serverSQL).Scan(&s.VersionNum, &s.Version, &s.Database, &oid,
		&s.Superuser, &s.StatsPrivileged, &e.pid, &s.InRecovery, &s.Role); err != nil {
		return fmt.Errorf("doctor: identify server: %w", err)
	}
	e.dbOID = uint32(oid)
	s.Local = conninfo.IsLocal(e.conn.PgConn().Conn().RemoteAddr())
	rows, err := e.conn.Query(ctx, settingsSQL)
	if err != nil {
		return fmt.Errorf("doctor: read settings: %w", err)
	}
	e.set = map[string]setting{}
	var name string
	var st setting
	if _, err := pgx.ForEachRow(rows, []any{&name, &st.Raw, &st.Unit, &st.Source, &st.Show}, func() error {
		e.set[name] = st
		return nil
	}); err != nil {
		return fmt.Errorf("doctor: read settings: %w", err)
	}
	return nil
}

// show returns a setting as SHOW prints it, "" when absent.
func (e *env) show(name string) string { return e.set[name].Show }

// has reports whether the server has (and shows this role) a setting.
func (e *env) has(name string) bool { _, ok := e.set[name]; return ok }

// num returns a numeric setting in its pg_settings unit.
func (e *env) num(name string) (float64, bool) {
	s, ok := e.set[name]
	if !ok {
		return 0, false
	}
	v, err := strconv.ParseFloat(s.Raw, 64)
	if err != nil {
		return 0, false
	}
	return v, true
}

// bytes returns a memory setting in bytes (pg_settings.setting times its
// unit: "8kB" pages, "kB", "MB"); -1 stays -1 (e.g. autovacuum_work_mem
// "use maintenance_work_mem").
func (e *env) bytes(name string) (int64, bool) {
	s, ok := e.set[name]
	if !ok {
		return 0, false
	}
	v, err := strconv.ParseFloat(s.Raw, 64)
	if err != nil {
		return 0, false
	}
	if v < 0 {
		return -1, true
	}
	m, ok := unitBytes(s.Unit)
	if !ok {
		return 0, false
	}
	return int64(v * float64(m)), true
}

// unitBytes parses a pg_settings memory unit: an optional number then
// B, kB, MB, GB or TB ("8kB" = 8192).
func unitBytes(u string) (int64, bool) {
	i := 0
	for i < len(u) && u[i] >= '0' && u[i] <= '9' {
		i++
	}
	n := int64(1)
	if i > 0 {
		v, err := strconv.ParseInt(u[:i], 10, 64)
		if err != nil {
			return 0, false
		}
		n = v
	}
	switch u[i:] {
	case "B":
		return n, true
	case "kB":
		return n << 10, true
	case "MB":
		return n << 20, true
	case "GB":
		return n << 30, true
	case "TB":
		return n << 40, true
	}
	return 0, false
}

// on reports whether a boolean setting is on.
func (e *env) on(name string) bool { return e.set[name].Raw == "on" }

// hostFacts are read once from the proc and sys trees. Meminfo is
// required (without it no host check runs); every other file is read on
// its own and a broken one only affects the checks that read it.
type hostFacts struct {
	fs  hostfacts.FS
	mem procfs.Meminfo
	// cpus is the number of processors in cpuinfo; 0 with cpusErr.
	cpus    int
	cpusErr error
	// thp are the transparent huge pages choice files, each read on its
	// own (hostfacts.THPSettings); sysMM says whether <sys>/kernel/mm
	// exists (sysfs visible), which tells "no THP in this kernel" from
	// "unknown".
	thp   hostfacts.THPSettings
	sysMM bool
	// overcommit and overcommitRatio are vm.overcommit_memory and
	// vm.overcommit_ratio; nil with the error when unreadable.
	overcommit, overcommitRatio *int64
	overcommitErr               error
}

// readHost decides whether host checks run and reads the host facts.
func (e *env) readHost() {
	switch {
	case e.opts.Host == sampler.HostOff:
		e.hostWhy = "host checks (turned off: --no-host / HostOff)"
		return
	case e.opts.Host == sampler.HostAuto && !e.srv.Local:
		e.hostWhy = "a local server (Unix socket or loopback) or --host: the server is remote, its host is not this one"
		return
	}
	hf, err := readHostFacts(e.opts.ProcRoot, e.opts.SysRoot)
	if err != nil {
		e.hostWhy, e.hostFailed = "a readable host: "+err.Error(), Failed
		return
	}
	e.host = hf
}

// readHostFacts reads the host facts under procRoot and sysRoot. Errors:
// the proc root or its meminfo (with MemTotal) unreadable; other files
// leave their error in the facts.
func readHostFacts(procRoot, sysRoot string) (*hostFacts, error) {
	fs, err := hostfacts.New(procRoot, sysRoot)
	if err != nil {
		return nil, err
	}
	mi, err := fs.Meminfo()
	if err != nil {
		return nil, err
	}
	if mi.MemTotalBytes == nil {
		return nil, fmt.Errorf("%s: no MemTotal line", fs.ProcPath("meminfo"))
	}
	hf := &hostFacts{fs: fs, mem: mi}
	if ci, err := fs.CPUInfo(); err != nil {
		hf.cpusErr = err
	} else {
		hf.cpus = len(ci)
	}
	hf.thp = fs.THPSettings()
	if st, err := os.Stat(fs.SysPath("kernel", "mm")); err == nil && st.IsDir() {
		hf.sysMM = true
	}
	if v, err := fs.Sysctl("vm", "overcommit_memory"); err != nil {
		hf.overcommitErr = err
	} else {
		hf.overcommit = &v
		if r, err := fs.Sysctl("vm", "overcommit_ratio"); err == nil {
			hf.overcommitRatio = &r
		}
	}
	return hf, nil
}

// memTotal is MemTotal of meminfo, bytes.
func (h *hostFacts) memTotal() int64 { return int64(deref(h.mem.MemTotalBytes)) }

func (h *hostFacts) procPath(parts ...string) string { return h.fs.ProcPath(parts...) }

// sampleData is the sample rate-based checks read.
type sampleData struct {
	series  []sampler.Sample
	storms  []storm.Event
	errs    []sampler.SampleError
	first   *sampler.Sample
	last    *sampler.Sample
	elapsed float64 // seconds from first to last sample
	// swap activity over the sample, pages/s (/proc/vmstat pswpin,
	// pswpout); swapKnown false without host or counters.
	swapIn, swapOut float64
	swapKnown       bool
	// windows split the sample into Options.Windows consecutive windows
	// of Options.Sample each, for the checks that judge bursts.
	windows []window
	// profilePeriodMs is pg_wait_sampling's profile_period (0 without it).
	profilePeriodMs float64
	// others are the other databases' catalog windows (catalog_alldb.go);
	// nil when not read.
	others *otherCatalogs
	// locks are the relation locks backends held at the samples
	// (pg_locks, unnamed: the doctor knows no key operations); nil when
	// not read.
	locks *sampler.Locks
}

// window is one sampling window: the wait events of its samples and the
// change of the catalogs' counters over it (read by the doctor's own
// session at the window's boundaries).
type window struct {
	// Seconds is the window's length.
	Seconds float64 `json:"seconds"`
	// Samples is the number of samples in it; Active the sum of their
	// active client sessions (session-samples); Waits the active
	// session-samples by wait event key ("LWLock:LockManager", "CPU").
	Samples int            `json:"samples"`
	Active  int            `json:"active"`
	Waits   map[string]int `json:"waits,omitempty"`
	// Catalog is the change of each catalog's counters, by name.
	Catalog map[string]catDelta `json:"catalog,omitempty"`
	// Profile is pg_wait_sampling's profile over the window (when the
	// extension is there, waitprofile.go): session-seconds in each wait
	// event key over ProfileSeconds.
	ProfileSeconds float64            `json:"profile_seconds,omitempty"`
	Profile        map[string]float64 `json:"profile,omitempty"`
}

// catDelta is the change of one catalog's pg_stat_sys_tables counters
// over a window, and its pg_total_relation_size at both ends.
type catDelta struct {
	Ins    int64 `json:"ins"`
	Upd    int64 `json:"upd"`
	HotUpd int64 `json:"hot_upd"`
	Del    int64 `json:"del"`
	Bytes0 int64 `json:"bytes0"`
	Bytes1 int64 `json:"bytes1"`
}

// newFiles estimates the relation files a catalog delta of pg_class
// stands for: one per inserted row (CREATE of a table, index, sequence,
// TOAST table) and one per non-HOT update (TRUNCATE, VACUUM FULL,
// CLUSTER, REINDEX and table rewrites give the relation a new
// relfilenode, an indexed column of pg_class, so the update cannot be
// HOT; renames also count).
func (c catDelta) newFiles() int64 { return c.Ins + max(c.Upd-c.HotUpd, 0) }

// catCounters are one catalog's cumulative counters at one moment.
type catCounters struct {
	ins, upd, hot, del, bytes int64
}

// catalogCountersSQL reads the cumulative counters of the churned
// catalogs (the connected database's).
const catalogCountersSQL = `SELECT s.relname::text, s.n_tup_ins, s.n_tup_upd, s.n_tup_hot_upd, s.n_tup_del, pg_catalog.pg_total_relation_size(s.relid)
FROM pg_catalog.pg_stat_sys_tables s
WHERE s.schemaname = 'pg_catalog' AND s.relname IN ('pg_class', 'pg_attribute', 'pg_depend', 'pg_type')`

func (e *env) catalogCounters(ctx context.Context) (map[string]catCounters, error) {
	return catalogCountersOn(ctx, e.conn)
}

// catalogCountersOn reads catalogCountersSQL on conn (its database's).
func catalogCountersOn(ctx context.Context, conn *pgx.Conn) (map[string]catCounters, error) {
	rows, err := conn.Query(ctx, catalogCountersSQL)
	if err != nil {
		return nil, err
	}
	out := map[string]catCounters{}
	var name string
	var c catCounters
	_, err = pgx.ForEachRow(rows, []any{&name, &c.ins, &c.upd, &c.hot, &c.del, &c.bytes}, func() error {
		out[name] = c
		return nil
	})
	return out, err
}

// sum is the windows together: seconds, samples, session-samples, waits
// and catalog deltas summed (sizes from the first and last window).
func sumWindows(ws []window) window {
	var t window
	t.Waits, t.Catalog = map[string]int{}, map[string]catDelta{}
	for i, w := range ws {
		t.Seconds += w.Seconds
		t.Samples += w.Samples
		t.Active += w.Active
		for k, n := range w.Waits {
			t.Waits[k] += n
		}
		for k, v := range w.Profile {
			if t.Profile == nil {
				t.Profile = map[string]float64{}
			}
			t.Profile[k] += v
		}
		t.ProfileSeconds += w.ProfileSeconds
		for rel, d := range w.Catalog {
			a, ok := t.Catalog[rel]
			if !ok || i == 0 {
				a.Bytes0 = d.Bytes0
			}
			a.Ins, a.Upd, a.HotUpd, a.Del, a.Bytes1 = a.Ins+d.Ins, a.Upd+d.Upd, a.HotUpd+d.HotUpd, a.Del+d.Del, d.Bytes1
			t.Catalog[rel] = a
		}
	}
	return t
}

// takeSample runs a sampler session for opts.Windows windows of
// opts.Sample each; the doctor's own session reads the catalogs' counters
// at every window boundary. A sampler that cannot start leaves e.smp nil
// with the reason in e.smpWhy; only a cancelled ctx is an error.
func (e *env) takeSample(ctx context.Context) error {
	mode := sampler.HostOff
	if e.host != nil {
		mode = sampler.HostOn
	}
	var sw0 map[string]uint64
	if e.host != nil {
		sw0, _ = e.host.fs.VMStat("pswpin", "pswpout")
	}
	nw := max(e.opts.Windows, 1)
	cat0, catErr := e.catalogCounters(ctx)
	// Other databases' catalogs, one connection each at every bound.
	var others []string
	var otherCfg *pgx.ConnConfig
	var otherReads []map[string]map[string]catCounters
	var otherErrs []map[string]error
	readOthers := func() {
		if len(others) > 0 {
			r, errs := e.otherCounters(ctx, otherCfg, others)
			otherReads, otherErrs = append(otherReads, r), append(otherErrs, errs)
		}
	}
	if cfg, err := pgx.ParseConfig(e.opts.DSN); err == nil {
		if names, err := e.otherDatabases(ctx); err == nil {
			others, otherCfg = names, cfg
		}
	}
	readOthers()
	t0 := time.Now()
	ss, err := sampler.Start(ctx, e.opts.DSN, t0, sampler.SessionOptions{
		Options:  sampler.Options{Host: mode, ProcRoot: e.opts.ProcRoot, Locks: true},
		Interval: e.opts.Interval,
	})
	if err != nil {
		if ctx.Err() != nil {
			return fmt.Errorf("doctor: sample: %w", ctx.Err())
		}
		e.smpWhy, e.smpFailed = "a working sampler: "+oneLine(err), Failed
		return nil
	}
	bounds := []time.Time{t0}
	cats := []map[string]catCounters{cat0}
	for k := 1; k <= nw; k++ {
		timer := time.NewTimer(time.Until(t0.Add(time.Duration(k) * e.opts.Sample)))
		select {
		case <-ctx.Done():
			timer.Stop()
			ss.Stop()
			return fmt.Errorf("doctor: sample: %w", ctx.Err())
		case <-timer.C:
		}
		bounds = append(bounds, time.Now())
		c, err := e.catalogCounters(ctx)
		if err != nil && catErr == nil {
			catErr = err
		}
		cats = append(cats, c)
		readOthers()
	}
	ss.Stop()
	t1 := time.Now()
	obs := ss.Snapshot()
	d := &sampleData{series: obs.Series, storms: obs.Storms, errs: obs.Errors, profilePeriodMs: obs.Server.WaitSamplingPeriodMs, locks: obs.Locks}
	if len(d.series) < 2 {
		msg := "at least two successful samples"
		if len(d.errs) > 0 {
			msg += " (" + d.errs[len(d.errs)-1].Error + ")"
		}
		e.smpWhy, e.smpFailed = msg, Failed
		return nil
	}
	d.first, d.last = &d.series[0], &d.series[len(d.series)-1]
	d.elapsed = d.last.Time.Sub(d.first.Time).Seconds()
	d.windows = splitWindows(d.series, bounds, cats, catErr == nil)
	if len(others) > 0 {
		d.others = otherWindows(others, bounds, otherReads, otherErrs)
	}
	if sw0 != nil {
		if sw1, err := e.host.fs.VMStat("pswpin", "pswpout"); err == nil {
			if dt := t1.Sub(t0).Seconds(); dt > 0 {
				_, ok0 := sw0["pswpin"]
				_, ok1 := sw1["pswpin"]
				d.swapKnown = ok0 && ok1
				d.swapIn = round2(float64(sub(sw0["pswpin"], sw1["pswpin"])) / dt)
				d.swapOut = round2(float64(sub(sw0["pswpout"], sw1["pswpout"])) / dt)
			}
		}
	}
	e.smp = d
	return nil
}

// splitWindows assigns the samples to the windows between consecutive
// bounds and takes each window's catalog deltas from the counters read at
// its bounds (none when catOK is false).
func splitWindows(series []sampler.Sample, bounds []time.Time, cats []map[string]catCounters, catOK bool) []window {
	ws := make([]window, len(bounds)-1)
	for i := range ws {
		ws[i].Seconds = round2(bounds[i+1].Sub(bounds[i]).Seconds())
		ws[i].Waits = map[string]int{}
		if !catOK {
			continue
		}
		ws[i].Catalog = map[string]catDelta{}
		for rel, b := range cats[i+1] {
			a, ok := cats[i][rel]
			if !ok {
				continue
			}
			nn := func(x, y int64) int64 { return max(y-x, 0) }
			ws[i].Catalog[rel] = catDelta{Ins: nn(a.ins, b.ins), Upd: nn(a.upd, b.upd), HotUpd: nn(a.hot, b.hot), Del: nn(a.del, b.del), Bytes0: a.bytes, Bytes1: b.bytes}
		}
	}
	for _, s := range series {
		i := 0
		for i < len(ws)-1 && !s.Time.Before(bounds[i+1]) {
			i++
		}
		w := &ws[i]
		w.Samples++
		w.Active += s.Sessions.Active
		for k, n := range s.Waits {
			w.Waits[k] += n
		}
		w.addProfile(&s)
	}
	return ws
}

func sub(a, b uint64) uint64 {
	if b < a {
		return 0
	}
	return b - a
}

// catalogDelta returns the change of a catalog's cumulative counters
// between the first and last sample (ins, upd, del) and its size then.
func (d *sampleData) catalogDelta(rel string) (ins, upd, del int64, first, last sampler.CatalogRel, ok bool) {
	var a, b *sampler.CatalogRel
	for i := range d.first.Catalog {
		if d.first.Catalog[i].Name == rel {
			a = &d.first.Catalog[i]
		}
	}
	for i := range d.last.Catalog {
		if d.last.Catalog[i].Name == rel {
			b = &d.last.Catalog[i]
		}
	}
	if a == nil || b == nil {
		return 0, 0, 0, sampler.CatalogRel{}, sampler.CatalogRel{}, false
	}
	nn := func(x, y int64) int64 { return max(y-x, 0) }
	return nn(a.Ins, b.Ins), nn(a.Upd, b.Upd), nn(a.Del, b.Del), *a, *b, true
}

// pgssState says whether pg_stat_statements can be read and holds its
// rows (all of them; pg_stat_statements.max bounds the count, 5000 by
// default).
type pgssState struct {
	needs         string // non-empty: not readable, needs this
	version       string // extversion
	trackPlanning bool
	hasPlan       bool // 1.8+: plans, total_plan_time, total_exec_time
	hasJIT        bool // 1.10+: jit_* columns
	rows          []pgssRow
}

// pgssRow is one statement of pg_stat_statements; times in ms.
type pgssRow struct {
	QueryID         int64   `json:"queryid"`
	Database        string  `json:"database"`
	Query           string  `json:"query"`
	Calls           int64   `json:"calls"`
	Plans           int64   `json:"plans"`
	TotalPlanMs     float64 `json:"total_plan_ms"`
	TotalExecMs     float64 `json:"total_exec_ms"`
	TempBlksWritten int64   `json:"temp_blks_written,omitempty"`
	JITFunctions    int64   `json:"jit_functions,omitempty"`
	JITMs           float64 `json:"jit_ms,omitempty"`
}

// statement turns a row into a Statement with a note.
func (r pgssRow) statement(note string) Statement {
	return Statement{QueryID: r.QueryID, Database: r.Database, Query: clip(r.Query, 1000), Calls: r.Calls,
		MeanExecMs: round2(r.meanExecMs()), TotalExecMs: round2(r.TotalExecMs), MeanPlanMs: round2(r.meanPlanMs()), Note: note}
}

// planShare is the share of this statement's time spent planning: mean
// plan / (mean plan + mean execution).
func (r pgssRow) planShare() float64 {
	p, x := r.meanPlanMs(), r.meanExecMs()
	return p / max(p+x, 1e-9)
}

// meanPlanMs is the mean planning time per plan.
func (r pgssRow) meanPlanMs() float64 {
	if r.Plans == 0 {
		return 0
	}
	return r.TotalPlanMs / float64(r.Plans)
}

// meanExecMs is the mean execution time per call.
func (r pgssRow) meanExecMs() float64 {
	if r.Calls == 0 {
		return 0
	}
	return r.TotalExecMs / float64(r.Calls)
}

// preloaded reports whether the server loads the library lib: its
// shared_preload_libraries names it, or settings "lib.*" exist (a
// preloaded library defines them in every backend, and pg_settings shows
// them to any role, while shared_preload_libraries itself needs
// pg_read_all_settings).
func (e *env) preloaded(lib string) bool {
	if slices.Contains(e.preloadList(), lib) {
		return true
	}
	for name := range e.set {
		if strings.HasPrefix(name, lib+".") {
			return true
		}
	}
	return false
}

// preloadList is shared_preload_libraries as a list (nil when empty or
// not shown to this role).
func (e *env) preloadList() []string {
	var libs []string
	for _, l := range strings.Split(e.show("shared_preload_libraries"), ",") {
		if l = strings.Trim(strings.TrimSpace(l), `"`); l != "" {
			libs = append(libs, l)
		}
	}
	return libs
}

// extensionNeeds says exactly what the extension ext (whose library has
// its name) lacks in the database checked, given whether it is created
// there: "" when nothing; CREATE EXTENSION alone when the library is
// loaded (no restart); the library in shared_preload_libraries and a
// restart when the extension is created; else both. The
// shared_preload_libraries value given keeps the libraries already
// there.
func (e *env) extensionNeeds(ext string, created bool) string {
	db := e.srv.Database
	loaded := e.preloaded(ext)
	spl := strings.Join(append(e.preloadList(), ext), ", ")
	switch {
	case loaded && created:
		return ""
	case loaded:
		return fmt.Sprintf("CREATE EXTENSION %s; in database %s (its library is already loaded by shared_preload_libraries: no restart)", ext, db)
	case created:
		return fmt.Sprintf("shared_preload_libraries = '%s' and a restart (the extension is already created in database %s)", spl, db)
	}
	return fmt.Sprintf("shared_preload_libraries = '%s' (restart), then CREATE EXTENSION %s; in database %s", spl, ext, db)
}

// extensionCreated reports whether the extension is created in the
// database checked.
func (e *env) extensionCreated(ctx context.Context, ext string) (bool, error) {
	var ok bool
	if err := e.conn.QueryRow(ctx, `SELECT EXISTS (SELECT FROM pg_catalog.pg_extension WHERE extname = $1)`, ext).Scan(&ok); err != nil {
		return false, fmt.Errorf("doctor: pg_extension: %w", err)
	}
	return ok, nil
}

// statements loads pg_stat_statements once.
func (e *env) statements(ctx context.Context) *pgssState {
	if e.pgss != nil {
		return e.pgss
	}
	if e.rec != nil {
		e.pgss = &pgssState{hasPlan: true, trackPlanning: e.rec.TrackPlanning, rows: e.rec.Statements}
		if e.rec.Statements == nil {
			e.pgss.needs = "pg_stat_statements (not recorded in the case)"
		}
		return e.pgss
	}
	st := &pgssState{}
	e.pgss = st
	var schema string
	err := e.conn.QueryRow(ctx, `SELECT n.nspname::text, x.extversion FROM pg_catalog.pg_extension x
JOIN pg_catalog.pg_namespace n ON n.oid = x.extnamespace WHERE x.extname = 'pg_stat_statements'`).Scan(&schema, &st.version)
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		st.needs = "pg_stat_statements readable: " + oneLine(err)
		return st
	}
	if needs := e.extensionNeeds("pg_stat_statements", err == nil); needs != "" {
		st.needs = "pg_stat_statements: " + needs
		return st
	}
	st.hasPlan = versionAtLeast(st.version, 1, 8)
	st.hasJIT = versionAtLeast(st.version, 1, 10)
	st.trackPlanning = e.on("pg_stat_statements.track_planning")
	if !st.hasPlan {
		st.needs = "pg_stat_statements 1.8 or later (PostgreSQL 13+; ALTER EXTENSION pg_stat_statements UPDATE)"
		return st
	}
	jit := "0::int8, 0::float8"
	if st.hasJIT {
		jit = "s.jit_functions, s.jit_generation_time + s.jit_inlining_time + s.jit_optimization_time + s.jit_emission_time"
	}
	q := `SELECT coalesce(s.queryid, 0), coalesce(d.datname::text, '(dropped database ' || s.dbid || ')'), coalesce(s.query, ''),
       s.calls, s.plans, s.total_plan_time, s.total_exec_time, s.temp_blks_written, ` + jit + `
FROM ` + pgx.Identifier{schema, "pg_stat_statements"}.Sanitize() + ` s
LEFT JOIN pg_catalog.pg_database d ON d.oid = s.dbid`
	rows, err := e.conn.Query(ctx, q)
	if err != nil {
		st.needs = "pg_stat_statements readable: " + oneLine(err)
		return st
	}
	var r pgssRow
	if _, err := pgx.ForEachRow(rows, []any{&r.QueryID, &r.Database, &r.Query, &r.Calls, &r.Plans, &r.TotalPlanMs,
		&r.TotalExecMs, &r.TempBlksWritten, &r.JITFunctions, &r.JITMs}, func() error {
		st.rows = append(st.rows, r)
		return nil
	}); err != nil {
		st.needs = "pg_stat_statements readable: " + oneLine(err)
		st.rows = nil
	}
	return st
}

// versionAtLeast compares an extension version "1.10" with major.minor.
func versionAtLeast(v string, major, minor int) bool {
	a, b, _ := strings.Cut(v, ".")
	ma, err1 := strconv.Atoi(a)
	mi, err2 := strconv.Atoi(b)
	if err1 != nil || err2 != nil {
		return false
	}
	return ma > major || (ma == major && mi >= minor)
}

// oneLine flattens an error to one line.
func oneLine(err error) string { return strings.Join(strings.Fields(err.Error()), " ") }

func round2(x float64) float64 { return math.Round(x*100) / 100 }
