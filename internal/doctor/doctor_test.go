package doctor

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/erplab/erplab/internal/pgtest"
	tmpfsfix "github.com/erplab/erplab/internal/remedy/tmpfs"
	"github.com/erplab/erplab/internal/sampler"
)

// srv is this package's throwaway server: pg_stat_statements preloaded
// with track_planning on (the statement checks), and autovacuum_naptime
// 10min so that autovacuum does not clean the dead catalog tuples the
// churn test makes while the test looks at them (no check judges the
// naptime). Under -short there is none and the tests using it skip.
var srv *pgtest.Server

func TestMain(m *testing.M) {
	os.Exit(pgtest.RunWith(m, &srv, pgtest.Options{
		MaxConnections: 50,
		SharedBuffers:  "128MB",
		Settings: map[string]string{
			"shared_preload_libraries":          "pg_stat_statements",
			"pg_stat_statements.track_planning": "on",
			"autovacuum_naptime":                "10min",
			// The xmin-horizon test holds it with a prepared transaction
			// and a logical slot.
			"max_prepared_transactions": "4",
			"wal_level":                 "logical",
		},
		// lwlock-waits reads pg_wait_sampling's profile when it is there
		// (waitprofile_test.go).
		WaitSampling: true,
	}))
}

var dbSeq struct {
	sync.Mutex
	n int
}

// newDatabase creates a fresh database, dropped at cleanup, and returns
// its DSN.
func newDatabase(t *testing.T) string {
	t.Helper()
	dbSeq.Lock()
	dbSeq.n++
	name := fmt.Sprintf("doctor_%d", dbSeq.n)
	dbSeq.Unlock()
	ctx := context.Background()
	cluster := srv.Cluster(t)
	if err := cluster.CreateDatabase(ctx, name); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		conn, err := pgx.Connect(ctx, cluster.DSN("postgres"))
		if err != nil {
			t.Errorf("drop %s: %v", name, err)
			return
		}
		defer conn.Close(ctx)
		if _, err := conn.Exec(ctx, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)"); err != nil {
			t.Errorf("drop %s: %v", name, err)
		}
	})
	return cluster.DSN(name)
}

func dial(t *testing.T, dsn string) *pgx.Conn {
	t.Helper()
	conn, err := pgx.Connect(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	return conn
}

func exec(t *testing.T, conn *pgx.Conn, sql string, args ...any) {
	t.Helper()
	if _, err := conn.Exec(context.Background(), sql, args...); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
}

// hostFixture describes a fixture host tree.
type hostFixture struct {
	thp, defrag string // "" = no THP files
	overcommit  int
	swapTotalKB int
	swapFreeKB  int
}

// healthyHost is a well-configured 8-CPU, 16 GiB host.
var healthyHost = hostFixture{thp: "madvise", defrag: "madvise", overcommit: 2}

// writeHost writes proc and sys fixture trees in the kernel's formats
// (proc(5), transhuge.rst) and returns their roots.
func writeHost(t *testing.T, h hostFixture) (procRoot, sysRoot string) {
	t.Helper()
	dir := t.TempDir()
	procRoot, sysRoot = filepath.Join(dir, "proc"), filepath.Join(dir, "sys")
	var cpuinfo strings.Builder
	for i := 0; i < 8; i++ {
		fmt.Fprintf(&cpuinfo, "processor\t: %d\nvendor_id\t: GenuineIntel\ncpu family\t: 6\nmodel\t\t: 85\nmodel name\t: Intel(R) Xeon(R) Gold 6230 CPU @ 2.10GHz\nflags\t\t: fpu sse2\n\n", i)
	}
	files := map[string]string{
		"proc/cpuinfo": cpuinfo.String(),
		"proc/meminfo": fmt.Sprintf(`MemTotal:       16384000 kB
MemFree:         8000000 kB
MemAvailable:   12000000 kB
Buffers:          100000 kB
Cached:          4000000 kB
SwapTotal:       %d kB
SwapFree:        %d kB
AnonHugePages:         0 kB
CommitLimit:    16000000 kB
Committed_AS:    6000000 kB
HugePages_Total:       0
HugePages_Free:        0
HugePages_Rsvd:        0
HugePages_Surp:        0
Hugepagesize:       2048 kB
`, h.swapTotalKB, h.swapFreeKB),
		"proc/stat":                     "cpu  1000 0 500 8000 100 0 10 0 0 0\ncpu0 1000 0 500 8000 100 0 10 0 0 0\nintr 1 0\nctxt 1000\nbtime 1700000000\nprocesses 100\nprocs_running 1\nprocs_blocked 0\n",
		"proc/vmstat":                   "pgmajfault 10\ncompact_stall 0\nthp_fault_alloc 0\nthp_fault_fallback 0\nthp_collapse_alloc 0\npswpin 0\npswpout 0\n",
		"proc/sys/kernel/hostname":      "erp-db-01\n",
		"proc/sys/kernel/ostype":        "Linux\n",
		"proc/sys/kernel/osrelease":     "6.1.0-18-amd64\n",
		"proc/sys/kernel/arch":          "x86_64\n",
		"proc/sys/vm/overcommit_memory": fmt.Sprintf("%d\n", h.overcommit),
		"proc/sys/vm/overcommit_ratio":  "80\n",
		"proc/self/mountinfo":           "22 1 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw\n",
		"sys/kernel/mm/.keep":           "", // sysfs visible: no THP directory means a kernel without THP
	}
	choices := map[string]string{
		"enabled": "always madvise never",
		"defrag":  "always defer defer+madvise madvise never",
	}
	for name, mode := range map[string]string{"enabled": h.thp, "defrag": h.defrag} {
		if mode == "" {
			continue
		}
		words := strings.Fields(choices[name])
		for i, w := range words {
			if w == mode {
				words[i] = "[" + w + "]"
			}
		}
		files["sys/kernel/mm/transparent_hugepage/"+name] = strings.Join(words, " ") + "\n"
	}
	for name, body := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return procRoot, sysRoot
}

func run(t *testing.T, opts Options) *Report {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	rep, err := Run(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

func find(t *testing.T, rep *Report, id string) *Finding {
	t.Helper()
	f := rep.Find(id)
	if f == nil {
		t.Fatalf("no finding %s in %s", id, Text(rep))
	}
	return f
}

// A healthy configuration on a healthy (fixture) host yields no warning
// and no critical finding, with every check that can run having run: the
// extensions are installed, the sample taken, the host read. Runs first:
// later tests leave statements in pg_stat_statements.
func TestHealthyNoWarnings(t *testing.T) {
	dsn := newDatabase(t)
	pgtest.NeedExtension(t, dsn, "pg_stat_statements")
	pgtest.NeedExtension(t, dsn, "pgstattuple")
	conn := dial(t, dsn)
	exec(t, conn, "CREATE EXTENSION pg_stat_statements")
	exec(t, conn, "CREATE EXTENSION pgstattuple")
	exec(t, conn, "SELECT pg_stat_statements_reset()")
	// A little OLTP work: a table, an index, inserts and lookups.
	exec(t, conn, "CREATE TABLE item (id int PRIMARY KEY, name text, qty int)")
	exec(t, conn, "INSERT INTO item SELECT g, 'item ' || g, g % 10 FROM generate_series(1, 5000) g")
	exec(t, conn, "ANALYZE item")
	for i := 1; i <= 50; i++ {
		var q int
		if err := conn.QueryRow(context.Background(), "SELECT qty FROM item WHERE id = $1", i*7).Scan(&q); err != nil {
			t.Fatal(err)
		}
		exec(t, conn, "UPDATE item SET qty = qty + 1 WHERE id = $1", i)
	}
	proc, sys := writeHost(t, healthyHost)
	rep := run(t, Options{DSN: dsn, Sample: 2 * time.Second, Interval: 250 * time.Millisecond, ProcRoot: proc, SysRoot: sys})
	t.Log(Text(rep))
	if !rep.HostChecked || rep.SampleS < 1 {
		t.Fatalf("host checked %v, sample %.1f s: %s", rep.HostChecked, rep.SampleS, Text(rep))
	}
	for _, f := range rep.Findings {
		if f.Severity == Critical || f.Severity == Warning {
			t.Errorf("false positive: [%s] %s: %s\n%+v", f.Severity, f.ID, f.Summary, f.Evidence)
		}
	}
	// Only the PostgreSQL 16 check, and the invalidation chain (its
	// probes are the caller's: Options.Invalidation, unset here), may be
	// unchecked on this server.
	for _, f := range rep.Findings {
		if f.Severity == NotChecked && !(f.ID == "temp-buffers" && rep.Server.VersionNum < 160000) && f.ID != "invalidation-chain" {
			t.Errorf("[%s] not checked: %s", f.ID, f.Needs)
		}
	}
	if rep.Worst != OK && rep.Worst != Info {
		t.Errorf("worst %s", rep.Worst)
	}
	if rep.Incomplete() {
		t.Errorf("a superuser's report is incomplete: %s", rep.NotRun())
	}
	if len(rep.Findings) != len(baseChecks()) {
		t.Errorf("%d findings for %d checks", len(rep.Findings), len(baseChecks()))
	}
	// Numbers from the fixture host.
	if f := find(t, rep, "memory-budget"); f.Metrics["ram_bytes"] != 16384000*1024 {
		t.Errorf("memory budget RAM %v, want the fixture's 16384000 kB", f.Metrics["ram_bytes"])
	}
	if f := find(t, rep, "max-connections"); f.Metrics["cpus"] != 8 || f.Metrics["max_connections"] != 50 {
		t.Errorf("max-connections metrics %v", f.Metrics)
	}
}

// Tiny work_mem plus a sorting query: the temp-files check fires with the
// numbers pg_stat_database holds for that database.
func TestTempFilesFire(t *testing.T) {
	dsn := newDatabase(t)
	ctx := context.Background()
	sorter, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{
		"SET work_mem = '64kB'",
		"SELECT count(*) FROM (SELECT g FROM generate_series(1, 200000) g ORDER BY g DESC) s",
		"SELECT count(*) FROM (SELECT g FROM generate_series(1, 200000) g ORDER BY g DESC) s",
	} {
		if _, err := sorter.Exec(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	// An exiting backend flushes its statistics at once.
	sorter.Close(ctx)
	conn := dial(t, dsn)
	var files, bytes, xacts int64
	deadline := time.Now().Add(20 * time.Second)
	for {
		if err := conn.QueryRow(ctx, `SELECT temp_files, temp_bytes, xact_commit + xact_rollback FROM pg_stat_database WHERE datname = current_database()`).Scan(&files, &bytes, &xacts); err != nil {
			t.Fatal(err)
		}
		if files > 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if files == 0 {
		t.Fatal("the sorts wrote no temp files")
	}
	rep := run(t, Options{DSN: dsn, Only: []string{"temp-files"}, Host: sampler.HostOff})
	f := find(t, rep, "temp-files")
	if f.Severity != Warning {
		t.Fatalf("temp-files %s: %s", f.Severity, f.Summary)
	}
	if f.Metrics["temp_files"] != float64(files) || f.Metrics["temp_bytes"] != float64(bytes) {
		t.Errorf("temp-files metrics %v, want temp_files %d temp_bytes %d", f.Metrics, files, bytes)
	}
	db := strings.TrimPrefix(dsn[strings.Index(dsn, "dbname="):], "dbname=")
	db, _, _ = strings.Cut(db, " ")
	if !strings.Contains(f.Summary, "database "+db+" wrote ") || !strings.Contains(f.Summary, fmt.Sprintf("%d temp files", files)) {
		t.Errorf("summary %q does not name %s and %d temp files", f.Summary, db, files)
	}
	if len(f.Fix) == 0 || !strings.Contains(strings.Join(f.Fix, "\n"), "work_mem") {
		t.Errorf("fix %q does not raise work_mem", f.Fix)
	} // The suggested work_mem is above the server's current one (the
	// spills happened at it), as the server itself compares them.
	var suggested string
	for _, l := range f.Fix {
		if _, rest, ok := strings.Cut(l, "SET work_mem = '"); ok {
			suggested, _, _ = strings.Cut(rest, "'")
		}
	}
	var higher bool
	if err := conn.QueryRow(ctx, `SELECT pg_size_bytes($1) > pg_size_bytes(current_setting('work_mem'))`, suggested).Scan(&higher); err != nil || !higher {
		t.Errorf("suggested work_mem %q is not above the current one (%v): %q", suggested, err, f.Fix)
	}
}

// A bad DSN fails before any sampling; a selection with no Sampled check
// (swap and thp-enabled only use a sample when one is taken) takes none.
func TestFailFirstAndNoNeedlessSample(t *testing.T) {
	started := 0
	onStart := func(time.Duration) { started++ }
	_, err := Run(context.Background(), Options{DSN: "host=127.0.0.1 port=1 user=x dbname=y connect_timeout=2", Sample: time.Second, OnSampleStart: onStart})
	if err == nil || started != 0 {
		t.Errorf("bad DSN: err %v, sampling started %d times", err, started)
	}
	proc, sys := writeHost(t, healthyHost)
	rep := run(t, Options{DSN: srv.DSN(t, "postgres"), Only: []string{"swap", "thp-enabled"}, Sample: 30 * time.Second, OnSampleStart: onStart, ProcRoot: proc, SysRoot: sys})
	if started != 0 || rep.SampleS != 0 {
		t.Errorf("--only swap,thp-enabled sampled (%d starts, %.1f s)", started, rep.SampleS)
	}
	if f := find(t, rep, "swap"); f.Severity != OK {
		t.Errorf("swap without a sample: %s %s", f.Severity, f.Summary)
	}
	rep = run(t, Options{DSN: srv.DSN(t, "postgres"), Only: []string{"swap", "catalog-churn"}, Sample: time.Second, Interval: 250 * time.Millisecond, OnSampleStart: onStart, ProcRoot: proc, SysRoot: sys})
	if started != 1 || rep.SampleS == 0 {
		t.Errorf("catalog-churn selected: %d starts, %.1f s sample", started, rep.SampleS)
	}
}

// churn creates and drops temp tables with an index, n per transaction,
// until stop is closed (or once when stop is nil).
func churn(ctx context.Context, conn *pgx.Conn, n int, stop <-chan struct{}) (int, error) {
	done := 0
	do := fmt.Sprintf(`DO $$ BEGIN FOR i IN 1..%d LOOP
  CREATE TEMP TABLE churn_t (a int, b int, c int, d int);
  CREATE INDEX ON churn_t (a);
  DROP TABLE churn_t;
END LOOP; END $$`, n)
	for {
		if _, err := conn.Exec(ctx, do); err != nil {
			return done, err
		}
		done += n
		if stop == nil {
			return done, nil
		}
		select {
		case <-stop:
			return done, nil
		default:
		}
	}
}

// A churn of temp tables fires catalog-size (dead catalog tuples),
// catalog-churn (rate during the sample) and temp-tablespace (churn in the
// default tablespace).
func TestCatalogChurnFires(t *testing.T) {
	dsn := newDatabase(t)
	ctx := context.Background()
	conn := dial(t, dsn)
	// autovacuum_naptime 10min is spread over the cluster's databases: a
	// new database can get its turn within seconds and autovacuum would
	// then clean the dead catalog tuples between the doctor's reading and
	// the test's (pg_attribute_dead above n_dead_tup now). The catalogs
	// of this database are never autovacuumed instead.
	exec(t, conn, "SET allow_system_table_mods = on")
	for _, rel := range []string{"pg_class", "pg_attribute", "pg_depend", "pg_type"} {
		exec(t, conn, "ALTER TABLE pg_catalog."+rel+" SET (autovacuum_enabled = false)")
	}
	exec(t, conn, "RESET allow_system_table_mods")
	for i := 0; i < 12; i++ { // 1200 temp tables: about 13,000 dead pg_attribute rows
		if _, err := churn(ctx, conn, 100, nil); err != nil {
			t.Fatal(err)
		}
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var churned int
	var churnErr error
	wg.Add(1)
	go func() {
		defer wg.Done()
		churned, churnErr = churn(ctx, conn, 25, stop)
	}()
	rep := run(t, Options{DSN: dsn, Only: []string{"catalog-size", "catalog-churn", "temp-tablespace"}, Sample: 3 * time.Second,
		Interval: 250 * time.Millisecond, Host: sampler.HostOff})
	close(stop)
	wg.Wait()
	if churnErr != nil {
		t.Fatal(churnErr)
	}
	t.Logf("%d temp tables churned during the sample", churned)

	var dead, live int64
	if err := conn.QueryRow(ctx, `SELECT n_dead_tup, n_live_tup FROM pg_stat_sys_tables WHERE relname = 'pg_attribute'`).Scan(&dead, &live); err != nil {
		t.Fatal(err)
	}
	size := find(t, rep, "catalog-size")
	if size.Severity != Warning || !strings.Contains(size.Summary, "dead tuples") {
		t.Errorf("catalog-size %s: %s (pg_attribute %d dead, %d live now)", size.Severity, size.Summary, dead, live)
	}
	if d := size.Metrics["pg_attribute_dead"]; d < catalogDeadMin || d > float64(dead) {
		t.Errorf("catalog-size pg_attribute_dead %v, want >= %d and <= %d (now)", d, catalogDeadMin, dead)
	}
	ch := find(t, rep, "catalog-churn")
	if ch.Severity != Warning || ch.Metrics["pg_class_ins_per_s"] < churnWarnPerS {
		t.Errorf("catalog-churn %s: %s %v", ch.Severity, ch.Summary, ch.Metrics)
	}
	// Each temp table and its index are two pg_class rows inserted and
	// deleted: the rates match.
	if ins, del := ch.Metrics["pg_class_ins_per_s"], ch.Metrics["pg_class_del_per_s"]; del < ins*0.8 || del > ins*1.2 {
		t.Errorf("pg_class inserts %.1f/s vs deletes %.1f/s", ins, del)
	}
	tt := find(t, rep, "temp-tablespace")
	if tt.Severity != Warning || !strings.Contains(strings.Join(tt.Fix, "\n"), "tmpfs-temp-tablespace") {
		t.Errorf("temp-tablespace %s: %s fix %q", tt.Severity, tt.Summary, tt.Fix)
	}
}

// A query that filters one indexed column with OR over a subquery, run
// with pg_stat_statements loaded, is found by parsing and named by its
// queryid; the same filter with constants only, or on different columns,
// is not.
func TestORSubqueryFound(t *testing.T) {
	dsn := newDatabase(t)
	ctx := context.Background()
	pgtest.NeedExtension(t, dsn, "pg_stat_statements")
	conn := dial(t, dsn)
	exec(t, conn, "CREATE EXTENSION pg_stat_statements")
	t.Cleanup(func() { conn.Exec(context.Background(), "SELECT pg_stat_statements_reset()") })
	exec(t, conn, "CREATE TABLE owner (id int PRIMARY KEY, region int)")
	exec(t, conn, "CREATE TABLE doc (id int PRIMARY KEY, owner int, amount numeric)")
	exec(t, conn, "CREATE INDEX doc_owner ON doc (owner)")
	exec(t, conn, "INSERT INTO owner SELECT g, g % 50 FROM generate_series(1, 1000) g")
	exec(t, conn, "INSERT INTO doc SELECT g, g % 1000 + 1, g FROM generate_series(1, 20000) g")
	exec(t, conn, "ANALYZE owner, doc")
	queries := map[string]bool{ // text -> should be found
		"SELECT count(*) FROM doc d WHERE d.owner = $1 OR d.owner IN (SELECT o.id FROM owner o WHERE o.region = $2)": true,
		"SELECT count(*) FROM doc d WHERE d.owner = $1 OR d.owner = $2":                                              false,
		// Arms on different columns (issue 15, dba.stackexchange 114337).
		"SELECT count(*) FROM doc d WHERE d.id = $1 OR d.owner IN (SELECT o.id FROM owner o WHERE o.region = $2)": true,
	}
	for q := range queries {
		for i := 0; i < 5; i++ {
			var n int64
			if err := conn.QueryRow(ctx, q, 10+i, i).Scan(&n); err != nil {
				t.Fatalf("%s: %v", q, err)
			}
		}
	}
	var wantID int64
	if err := conn.QueryRow(ctx, `SELECT queryid FROM pg_stat_statements WHERE query LIKE '%d.owner = $1 OR d.owner IN%' AND dbid = (SELECT oid FROM pg_database WHERE datname = current_database())`).Scan(&wantID); err != nil {
		t.Fatal(err)
	}
	rep := run(t, Options{DSN: dsn, Only: []string{"or-subquery"}, Host: sampler.HostOff})
	f := find(t, rep, "or-subquery")
	if f.Severity != Info && f.Severity != Warning {
		t.Fatalf("or-subquery %s: %s", f.Severity, f.Summary)
	}
	var hit *Statement
	for i, s := range f.Statements {
		for q, want := range queries {
			if s.Query == q && !want {
				t.Errorf("false positive: %s", q)
			}
		}
		if s.QueryID == wantID {
			hit = &f.Statements[i]
		}
	}
	if hit == nil {
		t.Fatalf("queryid %d not named: %+v", wantID, f.Statements)
	}
	if hit.Note != "d.owner: 2 OR arms, 1 subquery" || hit.Calls != 5 || !strings.Contains(hit.Query, "d.owner IN (SELECT o.id") {
		t.Errorf("statement %+v", hit)
	}
	found := 0
	for _, st := range f.Statements {
		if queries[st.Query] {
			found++
		}
	}
	if found != 2 {
		t.Errorf("%d of the 2 statements found: %+v", found, f.Statements)
	}
	// The summary names the worst statement (the first listed) and its column.
	if worst := f.Statements[0]; !strings.Contains(f.Summary, fmt.Sprint(worst.QueryID)) || !strings.Contains(f.Summary, "d.owner") {
		t.Errorf("summary %q does not name queryid %d and d.owner", f.Summary, worst.QueryID)
	}
}

// THP 'always' in a fixture root fires thp-enabled; 'madvise' and
// 'never' do not; a kernel without THP is ok. defrag likewise.
func TestTHPFixture(t *testing.T) {
	dsn := srv.DSN(t, "postgres")
	for _, c := range []struct {
		mode string
		want Severity
	}{{"always", Warning}, {"madvise", OK}, {"never", OK}, {"", OK}} {
		t.Run("mode="+c.mode, func(t *testing.T) {
			h := healthyHost
			h.thp, h.defrag = c.mode, c.mode
			proc, sys := writeHost(t, h)
			rep := run(t, Options{DSN: dsn, Only: []string{"thp-enabled", "thp-defrag"}, ProcRoot: proc, SysRoot: sys})
			for _, id := range []string{"thp-enabled", "thp-defrag"} {
				f := find(t, rep, id)
				if f.Severity != c.want {
					t.Errorf("%s with %q: %s (%s)", id, c.mode, f.Severity, f.Summary)
				}
				if c.mode != "" && !strings.Contains(f.Evidence[0].Text, c.mode) {
					t.Errorf("%s evidence %q does not show %q", id, f.Evidence[0].Text, c.mode)
				}
			}
			if f := find(t, rep, "thp-enabled"); c.want == Warning && !strings.Contains(strings.Join(f.Fix, "\n"), "echo madvise > /sys/kernel/mm/transparent_hugepage/enabled") {
				t.Errorf("fix %q", f.Fix)
			}
			if c.want == Warning && rep.Worst != Warning {
				t.Errorf("worst %s", rep.Worst)
			}
		})
	}
}

// Host checks need a local server or --host: with host checks off they
// say so instead of reading this machine; swap activity and overcommit
// read the fixture.
func TestHostChecksGated(t *testing.T) {
	proc, sys := writeHost(t, hostFixture{thp: "always", defrag: "madvise", overcommit: 1, swapTotalKB: 2000000, swapFreeKB: 1000000})
	rep := run(t, Options{DSN: srv.DSN(t, "postgres"), Only: []string{"thp-enabled", "overcommit", "swap", "memory-budget"}, Host: sampler.HostOff, ProcRoot: proc, SysRoot: sys})
	for _, f := range rep.Findings {
		if f.Severity != NotChecked || !strings.Contains(f.Needs, "host checks (turned off") {
			t.Errorf("[%s] %s: %s", f.ID, f.Severity, f.Summary)
		}
	}
	rep = run(t, Options{DSN: srv.DSN(t, "postgres"), Only: []string{"overcommit", "swap"}, ProcRoot: proc, SysRoot: sys})
	if f := find(t, rep, "overcommit"); f.Severity != Warning || f.Metrics["overcommit_memory"] != 1 {
		t.Errorf("overcommit %s %v", f.Severity, f.Metrics)
	}
	if f := find(t, rep, "swap"); f.Severity != Info || f.Metrics["swap_used_bytes"] != 1000000*1024 {
		t.Errorf("swap %s %v", f.Severity, f.Metrics)
	}
}

// Without track_planning, planning-time is not checked and says what it
// needs; rate-based checks without a sample say they need one.
func TestNotCheckedNeeds(t *testing.T) {
	dsn := newDatabase(t)
	pgtest.NeedExtension(t, dsn, "pg_stat_statements")
	conn := dial(t, dsn)
	exec(t, conn, "CREATE EXTENSION pg_stat_statements")
	exec(t, conn, "ALTER SYSTEM SET pg_stat_statements.track_planning = off")
	exec(t, conn, "SELECT pg_reload_conf()")
	t.Cleanup(func() {
		ctx := context.Background()
		c, err := pgx.Connect(ctx, srv.DSN(t, "postgres"))
		if err != nil {
			t.Error(err)
			return
		}
		defer c.Close(ctx)
		c.Exec(ctx, "ALTER SYSTEM RESET pg_stat_statements.track_planning")
		c.Exec(ctx, "SELECT pg_reload_conf()")
	})
	// The reload reaches new sessions once the postmaster has processed it.
	deadline := time.Now().Add(10 * time.Second)
	for {
		c := dial(t, dsn)
		var v string
		if err := c.QueryRow(context.Background(), "SHOW pg_stat_statements.track_planning").Scan(&v); err != nil {
			t.Fatal(err)
		}
		if v == "off" || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	rep := run(t, Options{DSN: dsn, Only: []string{"planning-time", "catalog-churn", "catalog-bloat"}, Host: sampler.HostOff})
	if f := find(t, rep, "planning-time"); f.Severity != NotChecked || !strings.Contains(f.Needs, "track_planning = on") {
		t.Errorf("planning-time %s: %s", f.Severity, f.Needs)
	}
	if f := find(t, rep, "catalog-churn"); f.Severity != NotChecked || !strings.Contains(f.Needs, "--sample") {
		t.Errorf("catalog-churn %s: %s", f.Severity, f.Needs)
	}
	if f := find(t, rep, "catalog-bloat"); f.Severity != NotChecked || !strings.Contains(f.Needs, "pgstattuple") {
		t.Errorf("catalog-bloat %s: %s", f.Severity, f.Needs)
	}
	if rep.Worst != OK {
		t.Errorf("worst %s with only unchecked findings", rep.Worst)
	}
}

func TestOptionsErrors(t *testing.T) {
	ctx := context.Background()
	if _, err := Run(ctx, Options{DSN: srv.DSN(t, "postgres"), Only: []string{"thp-enabled", "no-such-check"}}); err == nil || !strings.Contains(err.Error(), "no-such-check") {
		t.Errorf("unknown id: %v", err)
	}
	if _, err := Run(ctx, Options{DSN: srv.DSN(t, "postgres"), Only: []string{"swap"}, Skip: []string{"swap"}}); err == nil {
		t.Error("only and skip leaving nothing: no error")
	}
	_, err := Run(ctx, Options{DSN: "host=127.0.0.1 port=1 user=x password=s3cret dbname=y connect_timeout=2"})
	if err == nil || strings.Contains(err.Error(), "s3cret") || strings.Contains(err.Error(), "\n") {
		t.Errorf("unreachable server: %v", err)
	}
}

// The three formats carry the same findings; JSON round-trips severities
// by name.
func TestRender(t *testing.T) {
	proc, sys := writeHost(t, hostFixture{thp: "always", defrag: "madvise", overcommit: 2})
	rep := run(t, Options{DSN: srv.DSN(t, "postgres") + " password=s3cret", Only: []string{"thp-enabled", "thp-defrag", "wraparound", "catalog-bloat"}, ProcRoot: proc, SysRoot: sys})
	text, md := Text(rep), Markdown(rep)
	var js strings.Builder
	if err := Render(&js, rep, FormatJSON); err != nil {
		t.Fatal(err)
	}
	for name, out := range map[string]string{"text": text, "markdown": md, "json": js.String()} {
		if strings.Contains(out, "s3cret") {
			t.Errorf("%s output shows the password", name)
		}
		for _, id := range []string{"thp-enabled", "thp-defrag", "wraparound", "catalog-bloat"} {
			if !strings.Contains(out, id) {
				t.Errorf("%s output lacks %s", name, id)
			}
		}
	}
	if !strings.Contains(text, "WARNING (1)") || !strings.Contains(text, "source: https://docs.kernel.org/admin-guide/mm/transhuge.html") {
		t.Errorf("text:\n%s", text)
	}
	if !strings.Contains(md, "## Warning (1)") || !strings.Contains(md, "```\necho madvise") {
		t.Errorf("markdown:\n%s", md)
	}
	var back Report
	if err := json.Unmarshal([]byte(js.String()), &back); err != nil {
		t.Fatal(err)
	}
	if back.Worst != Warning || back.Find("thp-enabled").Severity != Warning || back.Find("catalog-bloat").Severity != NotChecked {
		t.Errorf("json round trip: worst %s", back.Worst)
	}
	if err := Render(&js, rep, "yaml"); err == nil || !strings.Contains(err.Error(), "yaml") {
		t.Errorf("unknown format: %v", err)
	}
}

// With the tmpfs fix applied (root only), temp-tablespace finds the temp
// files of the database on tmpfs through /proc/self/mountinfo and is ok
// under the same churn that fires it on the default tablespace.
func TestTempTablespaceOnTmpfs(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: the tmpfs fix mounts a tmpfs")
	}
	dsn := newDatabase(t)
	ctx := context.Background()
	fix := tmpfsfix.Options{Size: "64M", Scope: tmpfsfix.ScopeDatabase, Tablespace: "doctor_tmpfs_test"}
	if _, err := tmpfsfix.Apply(ctx, dsn, fix, io.Discard); err != nil {
		t.Fatal(err)
	}
	conn, err := pgx.Connect(ctx, dsn) // after Apply: sees the database's temp_tablespaces
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		conn.Close(ctx)
		// The churning backend removes its temp files as it exits.
		for i := 0; i < 200; i++ {
			if err := tmpfsfix.Undo(ctx, dsn, fix, io.Discard); err == nil {
				return
			} else if i == 199 {
				t.Errorf("undo: %v", err)
			}
			time.Sleep(50 * time.Millisecond)
		}
	})
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var churnErr error
	wg.Add(1)
	go func() {
		defer wg.Done()
		_, churnErr = churn(ctx, conn, 25, stop)
	}()
	rep := run(t, Options{DSN: dsn, Only: []string{"temp-tablespace"}, Sample: 2 * time.Second, Interval: 250 * time.Millisecond})
	close(stop)
	wg.Wait()
	if churnErr != nil {
		t.Fatal(churnErr)
	}
	f := find(t, rep, "temp-tablespace")
	if f.Severity != OK || f.Metrics["on_tmpfs"] != 1 || f.Metrics["pg_class_ins_per_s"] < churnWarnPerS {
		t.Errorf("temp-tablespace %s: %s %v %+v", f.Severity, f.Summary, f.Metrics, f.Evidence)
	}
}

// shmem_enabled 'always' and a per-size control 'always' fire
// thp-enabled although enabled is madvise; a malformed enabled file makes
// only thp-enabled unknown, not the other host checks.
func TestTHPShmemAndSizes(t *testing.T) {
	dsn := srv.DSN(t, "postgres")
	proc, sys := writeHost(t, healthyHost)
	dir := filepath.Join(sys, "kernel", "mm", "transparent_hugepage")
	if err := os.MkdirAll(filepath.Join(dir, "hugepages-64kB"), 0o755); err != nil {
		t.Fatal(err)
	}
	for name, body := range map[string]string{
		"shmem_enabled":          "[always] within_size advise never deny force\n",
		"hugepages-64kB/enabled": "[always] inherit madvise never\n",
	} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	rep := run(t, Options{DSN: dsn, Only: []string{"thp-enabled", "thp-defrag", "overcommit"}, ProcRoot: proc, SysRoot: sys})
	f := find(t, rep, "thp-enabled")
	if f.Severity != Warning || f.Metrics["shmem_always"] != 1 || f.Metrics["sizes_always"] != 1 || f.Metrics["always"] != 0 {
		t.Errorf("thp-enabled %s: %s %v", f.Severity, f.Summary, f.Metrics)
	}
	if fix := strings.Join(f.Fix, "\n"); !strings.Contains(fix, "echo never > /sys/kernel/mm/transparent_hugepage/shmem_enabled") || !strings.Contains(fix, "hugepages-64kB/enabled") {
		t.Errorf("fix %q", f.Fix)
	}
	if err := os.WriteFile(filepath.Join(dir, "enabled"), []byte("always madvise never\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "shmem_enabled"), []byte("always within_size advise [never] deny force\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(filepath.Join(dir, "hugepages-64kB")); err != nil {
		t.Fatal(err)
	}
	rep = run(t, Options{DSN: dsn, Only: []string{"thp-enabled", "thp-defrag", "overcommit"}, ProcRoot: proc, SysRoot: sys})
	if f := find(t, rep, "thp-enabled"); f.Severity != NotChecked || !strings.Contains(f.Summary, "THP mode unknown") || !strings.Contains(f.Summary, "no bracketed mode") {
		t.Errorf("malformed enabled: %s %s", f.Severity, f.Summary)
	}
	if f := find(t, rep, "thp-defrag"); f.Severity != OK {
		t.Errorf("defrag beside a malformed enabled: %s %s", f.Severity, f.Summary)
	}
	if f := find(t, rep, "overcommit"); f.Severity != OK {
		t.Errorf("overcommit beside a malformed enabled: %s %s", f.Severity, f.Summary)
	}
}

// truncateChurn empties a cached temp table (with an index) by TRUNCATE,
// one transaction each, lsFusion-style, until stop is closed: every
// TRUNCATE gives the table and its index new files (non-HOT pg_class
// updates), with no CREATE.
func truncateChurn(ctx context.Context, conn *pgx.Conn, stop <-chan struct{}) (int, error) {
	if _, err := conn.Exec(ctx, "CREATE TEMP TABLE cached_tt (a int, b text); CREATE INDEX ON cached_tt (a)"); err != nil {
		return 0, err
	}
	n := 0
	for {
		select {
		case <-stop:
			return n, nil
		default:
		}
		if _, err := conn.Exec(ctx, "INSERT INTO cached_tt VALUES (1, 'x'); TRUNCATE cached_tt"); err != nil {
			return n, err
		}
		n++
	}
}

// TRUNCATE-based temp-table reuse fires catalog-churn (new files from
// non-HOT pg_class updates, not inserts) and temp-tablespace's tmpfs
// advice, over several windows.
func TestTruncateChurnFires(t *testing.T) {
	dsn := newDatabase(t)
	ctx := context.Background()
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var mu sync.Mutex
	var n int
	var churnErr error
	for i := 0; i < 3; i++ { // three sessions: enough truncates on a loaded machine
		conn := dial(t, dsn)
		wg.Add(1)
		go func() {
			defer wg.Done()
			k, err := truncateChurn(ctx, conn, stop)
			mu.Lock()
			defer mu.Unlock()
			n += k
			churnErr = errors.Join(churnErr, err)
		}()
	}
	rep := run(t, Options{DSN: dsn, Only: []string{"catalog-churn", "temp-tablespace"}, Sample: time.Second, Windows: 2,
		Interval: 250 * time.Millisecond, Host: sampler.HostOff})
	close(stop)
	wg.Wait()
	if churnErr != nil {
		t.Fatal(churnErr)
	}
	t.Logf("%d truncates", n)
	ch := find(t, rep, "catalog-churn")
	if ch.Severity != Warning || !strings.Contains(ch.Summary, "TRUNCATE") || ch.Metrics["windows"] != 2 {
		t.Errorf("catalog-churn %s: %s %v", ch.Severity, ch.Summary, ch.Metrics)
	}
	if up, ins := ch.Metrics["pg_class_nonhot_upd_per_s"], ch.Metrics["pg_class_ins_per_s"]; up < churnWarnPerS || up <= 10*ins || ch.Metrics["new_files_worst_per_s"] < ch.Metrics["new_files_per_s"] {
		t.Errorf("non-HOT updates %.1f/s vs inserts %.1f/s: %v", up, ins, ch.Metrics)
	}
	tt := find(t, rep, "temp-tablespace")
	if tt.Severity != Warning || !strings.Contains(tt.Summary, "TRUNCATE") || !strings.Contains(strings.Join(tt.Fix, "\n"), "tmpfs-temp-tablespace") {
		t.Errorf("temp-tablespace %s: %s fix %q", tt.Severity, tt.Summary, tt.Fix)
	}
}

// The wait check samples in windows: the samples of the windows add up,
// idle sessions in pg_sleep leave it ok, and the ok line prints the mean
// and worst-window shares it measured.
func TestWaitWindows(t *testing.T) {
	dsn := newDatabase(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	sleeper := dial(t, dsn)
	go sleeper.Exec(ctx, "SELECT pg_sleep(30)")
	rep := run(t, Options{DSN: dsn, Only: []string{"lwlock-waits"}, Sample: 800 * time.Millisecond, Windows: 3, Interval: 200 * time.Millisecond, Host: sampler.HostOff})
	cancel()
	f := find(t, rep, "lwlock-waits")
	if rep.SampleWindows != 3 || !strings.Contains(Text(rep), "in 3 windows") {
		t.Errorf("report: %d windows\n%s", rep.SampleWindows, Text(rep))
	}
	if f.Severity != OK || f.Metrics["windows"] != 3 || !strings.Contains(f.Summary, "mean") || !strings.Contains(f.Summary, "worst of 3 windows") {
		t.Fatalf("lwlock-waits %s: %s %v", f.Severity, f.Summary, f.Metrics)
	}
	windows := 0
	for _, ev := range f.Evidence {
		if strings.HasPrefix(ev.Text, "window ") {
			windows++
		}
	}
	if windows != 3 || !strings.Contains(strings.Join(evTexts(f), "\n"), "Timeout:PgSleep") {
		t.Errorf("evidence %v", f.Evidence)
	}
	if f.Metrics["avg_active"] < 0.5 {
		t.Errorf("the pg_sleep session was not seen active: %v", f.Metrics)
	}
}

func evTexts(f *Finding) []string {
	var out []string
	for _, e := range f.Evidence {
		out = append(out, e.Text)
	}
	return out
}

// burnXIDs advances the next transaction ID by n (one subtransaction
// with a write each).
func burnXIDs(t *testing.T, conn *pgx.Conn, n int) {
	t.Helper()
	exec(t, conn, "CREATE TABLE IF NOT EXISTS xid_burn (i int)")
	exec(t, conn, fmt.Sprintf(`DO $$ BEGIN FOR i IN 1..%d LOOP BEGIN INSERT INTO xid_burn VALUES (i); EXCEPTION WHEN others THEN NULL; END; END LOOP; END $$`, n))
}

// A logical slot, a prepared transaction and an old snapshot hold the
// xmin horizon; with dead catalog tuples from temp-table churn,
// catalog-size names the holder and suggests no VACUUM, and xmin-horizon
// lists all three with their fixes.
func TestXminHolderNamed(t *testing.T) {
	dsn := newDatabase(t)
	ctx := context.Background()
	admin := dial(t, dsn)
	var walLevel string
	if err := admin.QueryRow(ctx, "SHOW wal_level").Scan(&walLevel); err != nil {
		t.Fatal(err)
	}
	slot := walLevel == "logical"
	if slot {
		exec(t, admin, "SELECT pg_create_logical_replication_slot('doctor_test_slot', 'test_decoding')")
		t.Cleanup(func() { admin.Exec(context.Background(), "SELECT pg_drop_replication_slot('doctor_test_slot')") })
	}
	exec(t, admin, "CREATE TABLE prep (i int)")
	prep := dial(t, dsn)
	exec(t, prep, "BEGIN")
	exec(t, prep, "INSERT INTO prep VALUES (1)")
	exec(t, prep, "PREPARE TRANSACTION 'doctor_test_gid'")
	t.Cleanup(func() { admin.Exec(context.Background(), "ROLLBACK PREPARED 'doctor_test_gid'") })
	old := dial(t, dsn)
	exec(t, old, "SET application_name = 'erp report holder'")
	exec(t, old, "BEGIN ISOLATION LEVEL REPEATABLE READ")
	exec(t, old, "SELECT count(*) FROM pg_class")
	var oldPID int
	if err := old.QueryRow(ctx, "SELECT pg_backend_pid()").Scan(&oldPID); err != nil {
		t.Fatal(err)
	}
	burnXIDs(t, admin, horizonAgeWarn+500)
	for i := 0; i < 12; i++ {
		if _, err := churn(ctx, admin, 100, nil); err != nil {
			t.Fatal(err)
		}
	}
	exec(t, admin, "VACUUM pg_catalog.pg_attribute") // removes nothing the holders still see
	rep := run(t, Options{DSN: dsn, Only: []string{"catalog-size", "xmin-horizon"}, Host: sampler.HostOff})
	cs := find(t, rep, "catalog-size")
	if cs.Severity != Warning || !strings.Contains(cs.Summary, "xmin horizon is held by") {
		t.Errorf("catalog-size %s: %s", cs.Severity, cs.Summary)
	}
	for _, l := range cs.Fix {
		if strings.HasPrefix(strings.TrimSpace(l), "VACUUM") {
			t.Errorf("catalog-size suggests %q while the horizon is held", l)
		}
	}
	xh := find(t, rep, "xmin-horizon")
	ev := strings.Join(evTexts(xh), "\n")
	fix := strings.Join(xh.Fix, "\n")
	if xh.Severity != Warning || !strings.Contains(ev, fmt.Sprintf("pid %d (application 'erp report holder'", oldPID)) ||
		!strings.Contains(ev, "prepared transaction 'doctor_test_gid'") || !strings.Contains(fix, "ROLLBACK PREPARED 'doctor_test_gid'") ||
		!strings.Contains(fix, fmt.Sprintf("pg_terminate_backend(%d)", oldPID)) {
		t.Errorf("xmin-horizon %s: %s\nevidence:\n%s\nfix:\n%s", xh.Severity, xh.Summary, ev, fix)
	}
	if slot && (!strings.Contains(ev, "replication slot 'doctor_test_slot'") || !strings.Contains(fix, "pg_drop_replication_slot('doctor_test_slot')")) {
		t.Errorf("slot not named:\n%s\n%s", ev, fix)
	}
	if xh.Metrics["blocker_xmin_age"] < horizonAgeWarn {
		t.Errorf("metrics %v", xh.Metrics)
	}
	exec(t, old, "ROLLBACK")
}

// A join on columns with statistics target 10000 and full MCV lists plans
// far longer than it runs: planning-time flags it (the 5 ms rule) and
// statistics-targets names the join column with the planning evidence.
func TestPlanningAndStatisticsTargets(t *testing.T) {
	dsn := newDatabase(t)
	ctx := context.Background()
	pgtest.NeedExtension(t, dsn, "pg_stat_statements")
	conn := dial(t, dsn)
	exec(t, conn, "CREATE EXTENSION pg_stat_statements")
	t.Cleanup(func() { conn.Exec(context.Background(), "SELECT pg_stat_statements_reset()") })
	exec(t, conn, "CREATE TABLE customer (id int PRIMARY KEY, code int)")
	exec(t, conn, "CREATE TABLE orders (id int PRIMARY KEY, customer_code int)")
	exec(t, conn, "INSERT INTO customer SELECT g, g % 5000 FROM generate_series(1, 20000) g")
	exec(t, conn, "INSERT INTO orders SELECT g, g % 5000 FROM generate_series(1, 20000) g")
	exec(t, conn, "CREATE INDEX ON customer (code)")
	exec(t, conn, "ALTER TABLE customer ALTER COLUMN code SET STATISTICS 10000")
	exec(t, conn, "ALTER TABLE orders ALTER COLUMN customer_code SET STATISTICS 10000")
	exec(t, conn, "ANALYZE customer, orders")
	q := "SELECT c.id FROM orders o JOIN customer c ON c.code = o.customer_code WHERE o.id = 42"
	for i := 0; i < 6; i++ {
		if _, err := conn.Exec(ctx, q, pgx.QueryExecModeSimpleProtocol); err != nil {
			t.Fatal(err)
		}
	}
	var qid int64
	var plan, execMs float64
	if err := conn.QueryRow(ctx, `SELECT queryid, mean_plan_time, mean_exec_time FROM pg_stat_statements WHERE query LIKE '%JOIN customer c ON c.code = o.customer_code%' AND dbid = (SELECT oid FROM pg_database WHERE datname = current_database())`).Scan(&qid, &plan, &execMs); err != nil {
		t.Fatal(err)
	}
	t.Logf("queryid %d: plan %.1f ms, exec %.2f ms", qid, plan, execMs)
	rep := run(t, Options{DSN: dsn, Only: []string{"planning-time", "statistics-targets"}, Host: sampler.HostOff})
	pt := find(t, rep, "planning-time")
	st := find(t, rep, "statistics-targets")
	if plan < planSlowMs || plan <= execMs {
		t.Skipf("this server planned the join in %.1f ms (exec %.2f ms): too fast to show the rule", plan, execMs)
	}
	if pt.Severity != Warning || !slices.ContainsFunc(pt.Statements, func(s Statement) bool { return s.QueryID == qid && strings.Contains(s.Note, "% of its time planning") }) {
		t.Errorf("planning-time %s: %s %+v", pt.Severity, pt.Summary, pt.Statements)
	}
	if st.Severity != Warning || !strings.Contains(st.Summary, fmt.Sprint(qid)) || !(strings.Contains(st.Summary, "customer.code") || strings.Contains(st.Summary, "orders.customer_code")) ||
		!strings.Contains(strings.Join(st.Fix, "\n"), "SET STATISTICS -1") || st.Metrics["largest_mcv"] < mcvLarge {
		t.Errorf("statistics-targets %s: %s %v fix %q", st.Severity, st.Summary, st.Metrics, st.Fix)
	}
}

// A permanent table in the tmpfs temp tablespace (root only: the tmpfs
// fix mounts a tmpfs) makes temp-tablespace critical, naming the table
// and moving it off.
func TestTmpfsPermanentRelationCritical(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: the tmpfs fix mounts a tmpfs")
	}
	dsn := newDatabase(t)
	ctx := context.Background()
	fix := tmpfsfix.Options{Size: "16M", Scope: tmpfsfix.ScopeDatabase, Tablespace: "doctor_tmpfs_perm"}
	if _, err := tmpfsfix.Apply(ctx, dsn, fix, io.Discard); err != nil {
		t.Fatal(err)
	}
	conn := dial(t, dsn)
	t.Cleanup(func() {
		// A dropped table's first file stays (empty) until the next checkpoint.
		conn.Exec(context.Background(), "DROP TABLE IF EXISTS doc_cache")
		conn.Exec(context.Background(), "CHECKPOINT")
		if err := tmpfsfix.Undo(context.Background(), dsn, fix, io.Discard); err != nil {
			t.Errorf("undo: %v", err)
		}
	})
	exec(t, conn, "CREATE TABLE doc_cache (id int PRIMARY KEY USING INDEX TABLESPACE doctor_tmpfs_perm, body text) TABLESPACE doctor_tmpfs_perm")
	rep := run(t, Options{DSN: dsn, Only: []string{"temp-tablespace"}, Sample: 0})
	f := find(t, rep, "temp-tablespace")
	fx := strings.Join(f.Fix, "\n")
	if f.Severity != Critical || f.Metrics["permanent_relations"] != 2 || !strings.Contains(f.Summary, "public.doc_cache (table)") ||
		!strings.Contains(fx, `ALTER TABLE "public"."doc_cache" SET TABLESPACE pg_default;`) || !strings.Contains(fx, `ALTER INDEX "public"."doc_cache_pkey" SET TABLESPACE pg_default;`) {
		t.Errorf("temp-tablespace %s: %s %v\n%s", f.Severity, f.Summary, f.Metrics, fx)
	}
	if rep.Worst != Critical {
		t.Errorf("worst %s", rep.Worst)
	}
}
