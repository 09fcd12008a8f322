package loadtest_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/erplab/erplab/internal/engine"
	"github.com/erplab/erplab/internal/loadtest"
	"github.com/erplab/erplab/internal/pgtest"
	"github.com/erplab/erplab/internal/results"
	"github.com/erplab/erplab/internal/sampler"
	"github.com/erplab/erplab/internal/workload"
	"github.com/erplab/erplab/internal/workload/smoke"
)

var srv *pgtest.Server

func TestMain(m *testing.M) { os.Exit(pgtest.Run(m, &srv)) }

func smokeOptions(t *testing.T, dsn string, d time.Duration) loadtest.Options {
	return loadtest.Options{
		DSN: dsn, Workload: smoke.New(), Scale: 0.1, Seed: 7,
		Stages:      []engine.Stage{{Duration: 0, Target: 6}, {Duration: d, Target: 6}},
		Think:       engine.ThinkTime{Kind: "uniform", Min: 10 * time.Millisecond, Max: 30 * time.Millisecond},
		Connections: 3, Interval: time.Second, Progress: time.Second, Observe: true,
		Out: filepath.Join(t.TempDir(), "r.json"), Version: "test",
		CommandLine: []string{"erplab", "run", "--dsn", "postgres://u:s3cret@h/db"},
	}
}

// progressRE matches a progress line after the warm-up.
var progressRE = regexp.MustCompile(`(?m)^ +\d+s/4s  VUs \d+  in op \d+  waiting \d+  tps \d+\.\d  errors \d+  last 1s: p95 [a-z_]+ \S+ \(T \S+\) APDEX [01]\.\d\d  since start: APDEX [01]\.\d\d  \| active `)

// rowRE matches a summary table row: name, T, count, errors.
var rowRE = regexp.MustCompile(`^\s*([a-z_]+)\s+\S+\s+(\d+)\s+(\d+)\s`)

// The end-to-end path: a run's results file holds the same counts as the
// printed table, its series sums to them, and the stream is complete.
func TestRunResultsMatchPrintedTable(t *testing.T) {
	var out bytes.Buffer
	res, err := loadtest.Run(context.Background(), smokeOptions(t, srv.NewDatabase(t), 4*time.Second), &out)
	if err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	doc, err := results.Read(res.Path)
	if err != nil {
		t.Fatal(err)
	}
	if doc.Status != "completed" || doc.Totals.Count < 50 {
		t.Fatalf("status %q, %d operations", doc.Status, doc.Totals.Count)
	}
	printed := map[string][2]int64{}
	for _, line := range strings.Split(out.String(), "\n") {
		if m := rowRE.FindStringSubmatch(line); m != nil {
			c, _ := strconv.ParseInt(m[2], 10, 64)
			e, _ := strconv.ParseInt(m[3], 10, 64)
			printed[m[1]] = [2]int64{c, e}
		}
	}
	var seriesSum int64
	for _, iv := range doc.Series {
		seriesSum += iv.Count
	}
	if seriesSum != doc.Totals.Count {
		t.Fatalf("series sums to %d, totals say %d", seriesSum, doc.Totals.Count)
	}
	for _, op := range doc.Operations {
		p, ok := printed[op.Name]
		if !ok || p[0] != op.Count || p[1] != op.Errors {
			t.Fatalf("%s: printed %v, file count %d errors %d\n%s", op.Name, p, op.Count, op.Errors, out.String())
		}
	}
	if !strings.Contains(out.String(), "integral APDEX") || !strings.Contains(out.String(), res.Path) {
		t.Fatalf("summary lacks the integral APDEX or the results path:\n%s", out.String())
	}
	// The observations ride on the same time base as the latency series.
	obs, err := sampler.ReadObservations(doc.Extra["observations"])
	if err != nil {
		t.Fatalf("observations: %v", err)
	}
	// Points in run time (s since the start), in order, the first within
	// the first period: no bound on the sampler's jitter (a loaded host
	// delays a sample by hundreds of ms).
	if len(obs.Series) < 3 || obs.Series[0].T < 0 || obs.Series[0].T >= 1 ||
		!(obs.Series[0].T < obs.Series[1].T && obs.Series[1].T < obs.Series[2].T) {
		t.Fatalf("observation points: %d, first at %.2f s", len(obs.Series), obs.Series[0].T)
	}
	if !strings.Contains(out.String(), "| active ") {
		t.Fatalf("progress lines lack the sampler's figures:\n%s", out.String())
	}
	// The progress line's figures are labelled: erplab's own tps, the
	// last period's p95 and APDEX, the APDEX since the start, and the
	// server's own commit rate named as the server's.
	if !progressRE.MatchString(out.String()) || strings.Contains(out.String(), "| tps ") || !strings.Contains(out.String(), "| server tps ") {
		t.Fatalf("progress lines lack labelled window and since-start figures:\n%s", out.String())
	}
	if strings.Contains(string(mustRead(t, res.Path)), "s3cret") {
		t.Fatal("a password reached the results file")
	}
	h, series, summary, err := results.ReadStream(res.StreamPath)
	if err != nil || h == nil || summary == nil || len(series) != len(doc.Series) {
		t.Fatalf("stream: err %v header %v summary %v, %d vs %d intervals", err, h != nil, summary != nil, len(series), len(doc.Series))
	}
	if summary.Totals.Count != doc.Totals.Count {
		t.Fatalf("stream summary %d != %d", summary.Totals.Count, doc.Totals.Count)
	}
}

func mustRead(t *testing.T, p string) []byte {
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// A database holding somebody else's tables is refused without --force,
// and used with it.
func TestForeignDatabaseNeedsForce(t *testing.T) {
	dsn := srv.NewDatabase(t)
	pool := srv.Pool(t, dsn)
	if _, err := pool.Exec(context.Background(), `CREATE TABLE customers (id int)`); err != nil {
		t.Fatal(err)
	}
	opts := smokeOptions(t, dsn, time.Second)
	var out bytes.Buffer
	_, err := loadtest.Run(context.Background(), opts, &out)
	if !errors.Is(err, workload.ErrForeignDatabase) || !strings.Contains(err.Error(), "customers") {
		t.Fatalf("err = %v, want ErrForeignDatabase naming customers", err)
	}
	var n int
	pool.QueryRow(context.Background(), `SELECT count(*) FROM pg_namespace WHERE nspname = 'erplab_smoke'`).Scan(&n)
	if n != 0 {
		t.Fatal("refused run still created schema erplab_smoke")
	}
	opts.Force = true
	if _, err := loadtest.Run(context.Background(), opts, &out); err != nil {
		t.Fatalf("with --force: %v", err)
	}
}

// A bad server gives one line naming the problem, and no password.
func TestBadServerOneLine(t *testing.T) {
	for _, tc := range []struct{ dsn, want string }{
		{"postgres://bob:hunter2@127.0.0.1:1/db?connect_timeout=2", "127.0.0.1"},
		{srv.DSN(t, "no_such_db") + " password=hunter2", "no_such_db"},
		{"host=/tmp port=5432 user=x password=hunter2 dbname", "dsn"},
	} {
		var out bytes.Buffer
		_, err := loadtest.Run(context.Background(), smokeOptions(t, tc.dsn, time.Second), &out)
		if err == nil {
			t.Fatalf("%s: no error", tc.dsn)
		}
		msg := err.Error()
		if strings.Contains(msg, "\n") || strings.Contains(msg, "hunter2") || !strings.Contains(strings.ToLower(msg), tc.want) {
			t.Fatalf("dsn %q: error %q: want one line naming %q, no password", tc.dsn, msg, tc.want)
		}
	}
}

// The server dies mid-run: the run ends with a clear reason and every
// result recorded so far is on disk.
func TestServerGoneMidRunKeepsResults(t *testing.T) {
	dsn := srv.NewDatabase(t)
	admin := srv.Pool(t, srv.DSN(t, "postgres"))
	var dbname string
	for _, kv := range strings.Fields(dsn) {
		if v, ok := strings.CutPrefix(kv, "dbname="); ok {
			dbname = v
		}
	}
	opts := smokeOptions(t, dsn, 30*time.Second)
	opts.ServerGoneAfter = 10 * time.Second // the window before --server-gone-after (now 30 s by default)
	// The server goes once the load has committed 200 transactions in
	// the database (a fixed 2 s from the call included the set-up, and a
	// loaded machine then kept fewer than the 20 operations asserted
	// below). Commits since the load's first line, as the statistics show
	// them (they lag: at least that many happened).
	commits := func() int64 {
		var n int64
		admin.QueryRow(context.Background(), `SELECT xact_commit FROM pg_stat_database WHERE datname = $1`, dbname).Scan(&n)
		return n
	}
	out := afterStart(t, 0, func() {
		for from, deadline := commits(), time.Now().Add(time.Minute); commits()-from < 200 && time.Now().Before(deadline); {
			time.Sleep(100 * time.Millisecond)
		}
		// Refuse new connections to the database and kill its backends:
		// for the run the server is gone.
		admin.Exec(context.Background(), `ALTER DATABASE `+dbname+` ALLOW_CONNECTIONS false`)
		admin.Exec(context.Background(), `SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1`, dbname)
	})
	t.Cleanup(func() { admin.Exec(context.Background(), `ALTER DATABASE `+dbname+` ALLOW_CONNECTIONS true`) })
	res, err := loadtest.Run(context.Background(), opts, out)
	if !errors.Is(err, engine.ErrAborted) || !strings.Contains(err.Error(), "lost the server") {
		t.Fatalf("err = %v, want aborted: lost the server", err)
	}
	if res == nil {
		t.Fatal("no results returned")
	}
	doc, rerr := results.Read(res.Path)
	if rerr != nil {
		t.Fatal(rerr)
	}
	if !strings.HasPrefix(string(doc.Status), "aborted: lost the server") || doc.Totals.Count-doc.Totals.Errors < 20 {
		t.Fatalf("status %q, %d ok operations kept", doc.Status, doc.Totals.Count-doc.Totals.Errors)
	}
}

// Earlier results are never overwritten, and the check comes before any
// server work.
func TestExistingResultsRefused(t *testing.T) {
	opts := smokeOptions(t, "host=/nonexistent dbname=x", time.Second)
	if err := os.WriteFile(opts.Out, []byte("{}"), 0o644); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	_, err := loadtest.Run(context.Background(), opts, &out)
	if err == nil || !strings.Contains(err.Error(), "exists") {
		t.Fatalf("err = %v, want: results file exists", err)
	}
	if b, _ := os.ReadFile(opts.Out); string(b) != "{}" {
		t.Fatal("results file overwritten")
	}
}

// --out into a directory that does not exist is refused (no stray
// directories from a typo).
func TestOutMissingDirectory(t *testing.T) {
	opts := smokeOptions(t, "host=/nonexistent dbname=x", time.Second)
	opts.Out = filepath.Join(t.TempDir(), "no", "such", "r.json")
	var out bytes.Buffer
	_, err := loadtest.Run(context.Background(), opts, &out)
	if err == nil || !strings.Contains(err.Error(), "does not exist") {
		t.Fatalf("err = %v", err)
	}
	if _, err := os.Stat(filepath.Dir(opts.Out)); !os.IsNotExist(err) {
		t.Fatal("directory was created")
	}
}
