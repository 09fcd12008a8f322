package main

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/erplab/erplab/internal/capture"
	"github.com/erplab/erplab/internal/capture/techlog"
	"github.com/erplab/erplab/internal/pgtest"
	"github.com/erplab/erplab/internal/replay"
	"github.com/erplab/erplab/internal/results"
)

// erpMix runs every key operation of the erp workload, the batch ones
// (re-post a day, recompute a month) included, which no role mixes in
// with a few users.
const erpMix = "document_list=10,document_form=10,post_sales_invoice=20,post_goods_receipt=20,stock_balance_report=5," +
	"sales_turnover_report=5,or_subquery_report=5,item_picker=5,temp_table_storm=10,repost_day=3,recompute_month=3"

// erpState is the contents of every table of the public schema of dsn:
// per table its row count and the md5 of its rows as text, sorted. No
// column is left out: the erp workload's SQL takes nothing from the
// server's clock, random() or a sequence (every value is a parameter the
// client sends, which the replay sends as captured), and the data set's
// marker (_erplab_meta, its created_at) is written by init, before the
// copy. Temporary tables are the sessions' own and gone at the end.
func erpState(t *testing.T, dsn string) map[string]string {
	t.Helper()
	conn, err := pgx.Connect(t.Context(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	rows, err := conn.Query(t.Context(), `SELECT relname FROM pg_class WHERE relkind IN ('r', 'p') AND relnamespace = 'public'::regnamespace`)
	if err != nil {
		t.Fatal(err)
	}
	tables, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	state := map[string]string{}
	for _, tbl := range tables {
		var n int64
		var sum *string
		q := fmt.Sprintf(`SELECT count(*), md5(string_agg(t::text, '|' ORDER BY t::text)) FROM %s t`, pgx.Identifier{tbl}.Sanitize())
		if err := conn.QueryRow(t.Context(), q).Scan(&n, &sum); err != nil {
			t.Fatal(err)
		}
		state[tbl] = fmt.Sprintf("%d rows", n)
		if sum != nil {
			state[tbl] += " md5 " + *sum
		}
	}
	return state
}

// diffState lists the tables whose contents differ between a and b.
func diffState(a, b map[string]string) []string {
	var out []string
	for tbl, v := range a {
		if b[tbl] != v {
			out = append(out, fmt.Sprintf("%s: %s / %s", tbl, v, b[tbl]))
		}
	}
	for tbl, v := range b {
		if _, ok := a[tbl]; !ok {
			out = append(out, fmt.Sprintf("%s: - / %s", tbl, v))
		}
	}
	slices.Sort(out)
	return out
}

// erpInit builds the erp data set (scale 0.01) in the database of dsn
// with erplab init.
func erpInit(t *testing.T, dsn string) {
	t.Helper()
	start := time.Now()
	defer func() { t.Logf("erp init in %s", time.Since(start).Round(time.Millisecond)) }()
	if out, err := erplab(t, t.TempDir(), "init", "--workload", "erp", "--dsn", dsn, "--scale", "0.01").CombinedOutput(); err != nil {
		t.Fatalf("init: %v\n%s", err, out)
	}
}

// erpDatabase is a database of the test server with the erp data set
// and its copy taken before any load (copyDatabase).
func erpDatabase(t *testing.T) (dsn, copyName string) {
	t.Helper()
	dsn = srv.NewDatabase(t)
	erpInit(t, dsn)
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		t.Fatal(err)
	}
	return dsn, copyDatabase(t, cfg.Database)
}

// erpRun runs the erp workload (every operation, 4 users, no think time,
// 3 s) against dsn. The observers are off: they are erplab's own
// monitoring sessions, not the application's traffic.
func erpRun(t *testing.T, dsn string, flags ...string) *results.Document {
	t.Helper()
	dir := t.TempDir()
	args := append([]string{"run", "--workload", "erp", "--dsn", dsn, "--scale", "0.01", "--mix", erpMix, "--users", "4",
		"--think", "0", "--duration", "3s", "--observe=false", "--progress", "0", "--out", "run.json"}, flags...)
	start := time.Now()
	out, err := erplab(t, dir, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("run: %v\n%s", err, out)
	}
	doc, err := results.Read(filepath.Join(dir, "run.json"))
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("erp run in %s: %d operations, %d errors", time.Since(start).Round(time.Millisecond), doc.Totals.Count, doc.Totals.Errors)
	return doc
}

// statementEvents counts the statements of a capture (queries, executes,
// copies): what a replay must send.
func statementEvents(t *testing.T, path string) int64 {
	t.Helper()
	evs, torn := readCapture(t, path)
	if torn {
		t.Fatalf("%s is torn", path)
	}
	var n int64
	for _, e := range evs {
		switch e.Kind {
		case capture.KindQuery, capture.KindExecute, capture.KindCopy:
			n++
		}
	}
	return n
}

// checkErpReplayed asserts a replay of the erp workload reproduced the
// original: every captured statement replayed, nothing skipped, no error
// the original did not have, and every table's contents as the
// original's, which differ from the copy's (the run wrote).
func checkErpReplayed(t *testing.T, text, origDSN, copyDSN, replayedDSN string, doc *results.Document, statements int64) {
	t.Helper()
	f := fidelity(t, doc)
	if f.Statements != statements || f.Skipped > 0 || len(f.NewErrors) > 0 || f.RowsDiffer > 0 || doc.Status != "completed" {
		t.Errorf("fidelity: status %s, %d statements of %d, new errors %v, skipped %v, rows differ %d %+v\n%s",
			doc.Status, f.Statements, statements, f.NewErrors, f.SkippedBy, f.RowsDiffer, f.RowDiffs, text)
	}
	start := time.Now()
	orig, replayed, before := erpState(t, origDSN), erpState(t, replayedDSN), erpState(t, copyDSN)
	t.Logf("end states in %s", time.Since(start).Round(time.Millisecond))
	if d := diffState(orig, replayed); len(d) > 0 {
		t.Errorf("end state, original / replayed:\n%s\n%s", strings.Join(d, "\n"), text)
	}
	// A posting (40% of the mix) changes at least its document, its
	// lines, a register's movements and its totals.
	if changed := diffState(before, orig); len(changed) < 4 {
		t.Errorf("the run changed %d tables: the round trip proves little\n%s", len(changed), strings.Join(changed, "\n"))
	}
	t.Logf("%d statements, %d reordered, %d lock waits, same errors %v", f.Statements, f.Reordered, f.LockWaits, f.SameErrors)
}

// erplab's own erp workload (every key operation, 1C-style temp tables,
// unnamed statements with typed binds) captured by the proxy, replayed
// with the default gates onto a copy taken after init and before the
// run: every statement, no new error, every table as the original's.
func TestReplayErpProxyCapture(t *testing.T) {
	pgtest.SkipShort(t)
	dsn, copyName := erpDatabase(t)
	admin := srv.DSN(t, "postgres")
	path := filepath.Join(t.TempDir(), "erp.erpcap.gz")
	p := startProxyProcess(t, dsn, "--capture", path)
	erpRun(t, p.dsn)
	_ = p.cmd.Process.Signal(syscall.SIGINT)
	if code := p.exit(t); code != 0 {
		t.Fatalf("proxy exit code %d", code)
	}
	text, replayed, doc := replayOnto(t, admin, path, "--template", copyName)
	checkErpReplayed(t, text, dsn, replay.WithDatabase(admin, copyName), replayed, doc, statementEvents(t, path))
}

// The same from a csvlog (log_statement = all, durations, connections,
// disconnections), with lsFusion-style temp tables (t_N kept per
// connection, TRUNCATE): the log's statements carry no row counts, so
// only the end state tells what the replay did.
func TestReplayErpCsvlog(t *testing.T) {
	pgtest.SkipShort(t)
	c, admin, dsn := csvlogCluster(t)
	erpInit(t, dsn)
	adminSQL(t, admin, "CREATE DATABASE a_copy TEMPLATE a")
	// Logging from here: init and the copy are not in the log.
	logAll(t, admin)
	erpRun(t, dsn, "--temp-style", "lsfusion")
	log := filepath.Join(c.DataDir(), "log", "pg.csv")
	saved := filepath.Join(t.TempDir(), "log.erpcap.gz")
	text, replayed, doc := replayOnto(t, admin, log, "--template", "a_copy", "--save-capture", saved)
	if !strings.Contains(text, "source: pglog") {
		t.Errorf("not read as a server log:\n%s", text)
	}
	checkErpReplayed(t, text, dsn, c.DSN("a_copy"), replayed, doc, statementEvents(t, saved))
}

// A 1C technological journal written from erplab's own erp workload:
// three key operations, each run alone through the proxy's capture, the
// captures written as one journal with the operation as the 1C Context
// (its sessions numbered apart, one capture after the other), replayed
// onto the copy: scored per Context with APDEX, every statement, no new
// error, every table as the original's.
func TestReplayErpTechlog(t *testing.T) {
	pgtest.SkipShort(t)
	dsn, copyName := erpDatabase(t)
	admin := srv.DSN(t, "postgres")
	ops := []string{"post_sales_invoice", "document_list", "stock_balance_report"}
	contexts := make([]string, len(ops))
	dir := filepath.Join(t.TempDir(), "journal")
	w, err := techlog.NewWriter(dir, techlog.WriterOptions{Started: time.Date(2026, 3, 2, 10, 0, 0, 0, time.UTC)})
	if err != nil {
		t.Fatal(err)
	}
	var offset, statements int64
	for k, op := range ops {
		contexts[k] = "ОбщийМодуль.ERP." + op
		path := filepath.Join(t.TempDir(), op+".erpcap.gz")
		p := startProxyProcess(t, dsn, "--capture", path)
		erpRun(t, p.dsn, "--mix", op+"=1", "--users", "2", "--duration", "1s")
		_ = p.cmd.Process.Signal(syscall.SIGINT)
		if code := p.exit(t); code != 0 {
			t.Fatalf("proxy exit code %d", code)
		}
		evs, torn := readCapture(t, path)
		if torn {
			t.Fatalf("%s is torn", path)
		}
		var last int64
		for _, e := range evs {
			e.T += offset
			last = max(last, e.T+e.Duration)
			id, err := strconv.Atoi(e.Session)
			if err != nil {
				t.Fatalf("session %q: %v", e.Session, err)
			}
			e.Session = strconv.Itoa((k+1)*1000 + id)
			switch e.Kind {
			case capture.KindQuery, capture.KindExecute:
				e.Operation = contexts[k]
				statements++
			}
			if err := w.Write(e); err != nil {
				t.Fatal(err)
			}
		}
		offset = last + 1_000_000
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if len(w.Skipped) > 0 {
		t.Fatalf("events the journal cannot hold: %v", w.Skipped)
	}
	text, replayed, doc := replayOnto(t, admin, dir, "--template", copyName)
	if !strings.Contains(text, "source: techlog") {
		t.Errorf("not read as a journal:\n%s", text)
	}
	var names []string
	for _, o := range doc.Operations {
		names = append(names, o.Name)
		if o.Count == 0 || o.Apdex.Samples != o.Count {
			t.Errorf("group %s: count %d, APDEX %+v", o.Name, o.Count, o.Apdex)
		}
	}
	if strings.Join(names, "|") != strings.Join(contexts, "|") {
		t.Errorf("groups %q, want the Contexts %q\n%s", names, contexts, text)
	}
	checkErpReplayed(t, text, dsn, replay.WithDatabase(admin, copyName), replayed, doc, statements)
}
