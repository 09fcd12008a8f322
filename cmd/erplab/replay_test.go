package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/spf13/cobra"

	"github.com/erplab/erplab/internal/capture"
	"github.com/erplab/erplab/internal/capture/techlog"
	"github.com/erplab/erplab/internal/pgcluster"
	"github.com/erplab/erplab/internal/pgtest"
	"github.com/erplab/erplab/internal/replay"
	"github.com/erplab/erplab/internal/results"
)

// pgbenchState is the end state of a pgbench database that a replay must
// reproduce: sum(abalance) of the three tables and count(*) of history.
func pgbenchState(t *testing.T, dsn string) string {
	t.Helper()
	conn, err := pgx.Connect(t.Context(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	var a, b, c, h int64
	err = conn.QueryRow(t.Context(), `SELECT (SELECT sum(abalance) FROM pgbench_accounts), (SELECT sum(bbalance) FROM pgbench_branches),
		(SELECT sum(tbalance) FROM pgbench_tellers), (SELECT count(*) FROM pgbench_history)`).Scan(&a, &b, &c, &h)
	if err != nil {
		t.Fatal(err)
	}
	return "accounts " + strconv.FormatInt(a, 10) + " branches " + strconv.FormatInt(b, 10) + " tellers " + strconv.FormatInt(c, 10) + " history " + strconv.FormatInt(h, 10)
}

// adminSQL runs q on the server of dsn.
func adminSQL(t *testing.T, dsn, q string) {
	t.Helper()
	ctx := context.Background() // also in a cleanup, after t.Context ends
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, q); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
}

// pgbenchTemplate makes a pgbench database of scale 1 and a copy of it
// taken before any transaction (the replay's template); it returns the
// database's name and DSN and the copy's name.
func pgbenchTemplate(t *testing.T) (db, dsn, copyName string) {
	t.Helper()
	dsn = srv.NewDatabase(t)
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		t.Fatal(err)
	}
	db = cfg.Database
	runPgbench(t, dsn, "-i", "-q", "-s", "1")
	return db, dsn, copyDatabase(t, db)
}

// copyDatabase copies db on the test server into <db>_copy (CREATE
// DATABASE ... TEMPLATE: the database before a capture), dropped at the
// test's end, and returns the copy's name.
func copyDatabase(t *testing.T, db string) string {
	t.Helper()
	copyName := db + "_copy"
	adminSQL(t, srv.DSN(t, "postgres"), "CREATE DATABASE "+copyName+" TEMPLATE "+db)
	t.Cleanup(func() { adminSQL(t, srv.DSN(t, "postgres"), "DROP DATABASE IF EXISTS "+copyName+" WITH (FORCE)") })
	return copyName
}

// csvlogCluster starts a server of its own writing a csvlog (log/pg.csv
// in its data directory, messages in C) with database a; logAll then
// makes it log every statement with its duration, connection and
// disconnection, as erplab replay --help says.
func csvlogCluster(t *testing.T) (c *pgcluster.Cluster, admin, dsn string) {
	t.Helper()
	c, err := pgcluster.Start(t.Context(), pgcluster.Options{BinDir: srv.BinDir(t), StopWithParent: true, MaxConnections: 30,
		Settings: map[string]string{"logging_collector": "on", "log_destination": "csvlog", "log_filename": "pg.log", "lc_messages": "C"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Stop() })
	admin = c.DSN("postgres")
	adminSQL(t, admin, "CREATE DATABASE a")
	return c, admin, c.DSN("a")
}

// logAll turns on the logging a replay from a server log needs.
func logAll(t *testing.T, admin string) {
	t.Helper()
	for _, q := range []string{"ALTER SYSTEM SET log_statement = 'all'", "ALTER SYSTEM SET log_min_duration_statement = 0",
		"ALTER SYSTEM SET log_connections = on", "ALTER SYSTEM SET log_disconnections = on", "SELECT pg_reload_conf()"} {
		adminSQL(t, admin, q)
	}
}

// stockDatabase is a database of the test server with table stock (ids
// 1 to 10, qty 100), what writeJournal's statements update, and its name.
func stockDatabase(t *testing.T) (dsn, db string) {
	t.Helper()
	dsn = srv.NewDatabase(t)
	adminSQL(t, dsn, "CREATE TABLE stock (id int PRIMARY KEY, qty int NOT NULL)")
	adminSQL(t, dsn, "INSERT INTO stock SELECT g, 100 FROM generate_series(1, 10) g")
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		t.Fatal(err)
	}
	return dsn, cfg.Database
}

// runPgbench runs PostgreSQL's pgbench against the server of dsn (or
// host:port when given) and fails the test when it fails.
func runPgbench(t *testing.T, dsn string, args ...string) {
	t.Helper()
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		t.Fatal(err)
	}
	args = append(args, "-h", cfg.Host, "-p", strconv.Itoa(int(cfg.Port)), "-U", cfg.User, cfg.Database)
	cmd := exec.Command(filepath.Join(srv.BinDir(t), "pgbench"), args...)
	cmd.Env = append(os.Environ(), "PGPASSFILE="+passfileOf(dsn), "PGSSLMODE=disable")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("pgbench %v: %v\n%s", args, err, out)
	}
}

var keptRE = regexp.MustCompile(`kept the replayed database: (\S+)`)

// replayOnto runs erplab replay with args onto the template copy (kept),
// checks it succeeded and returns its output, the kept database's DSN and
// the results document.
func replayOnto(t *testing.T, server string, args ...string) (string, string, *results.Document) {
	t.Helper()
	dir := t.TempDir()
	out := filepath.Join(dir, "r.json")
	args = append(append([]string{"replay"}, args...), "--dsn", server, "--keep", "--speed", "0", "--out", out)
	start := time.Now()
	b, err := erplab(t, dir, args...).CombinedOutput()
	text := string(b)
	t.Logf("replay in %s:\n%s", time.Since(start).Round(time.Millisecond), text)
	m := keptRE.FindStringSubmatch(text)
	if m != nil {
		t.Cleanup(func() { adminSQL(t, server, "DROP DATABASE IF EXISTS "+m[1]+" WITH (FORCE)") })
	}
	if err != nil || m == nil {
		t.Fatalf("replay: %v\n%s", err, text)
	}
	doc, err := results.Read(out)
	if err != nil {
		t.Fatalf("results: %v\n%s", err, text)
	}
	return text, replay.WithDatabase(server, m[1]), doc
}

// fidelity is the results' extra.replay.
func fidelity(t *testing.T, doc *results.Document) replay.Fidelity {
	t.Helper()
	var f replay.Fidelity
	if err := json.Unmarshal(doc.Extra["replay"], &f); err != nil {
		t.Fatal(err)
	}
	return f
}

// checkReplayed asserts a replay reproduced the original: the same end
// state, no error the original did not have, nothing skipped.
func checkReplayed(t *testing.T, text, origDSN, replayedDSN string, doc *results.Document, wantStatements int64) {
	t.Helper()
	f := fidelity(t, doc)
	if want, got := pgbenchState(t, origDSN), pgbenchState(t, replayedDSN); want != got {
		t.Errorf("end state: original %s, replayed %s\n%s", want, got, text)
	}
	if len(f.NewErrors) > 0 || f.Skipped > 0 || f.Statements < wantStatements || doc.Status != "completed" {
		t.Errorf("fidelity: status %s, %d statements (want at least %d), new errors %v, skipped %v\n%s",
			doc.Status, f.Statements, wantStatements, f.NewErrors, f.SkippedBy, text)
	}
	for _, want := range []string{"key operation", "captured p95", "statements replayed", "failed 0: new (the capture did not have them) none", "lag", "reordered", "results: "} {
		if !strings.Contains(text, want) {
			t.Errorf("the summary lacks %q:\n%s", want, text)
		}
	}
}

// pgbench tpcb-like (prepared and extended protocol, 4 clients) captured
// by the proxy, replayed onto a copy taken before: the same end state, no
// new error, with the default gates (the captured order).
func TestReplayProxyCapture(t *testing.T) {
	pgtest.SkipShort(t)
	_, dsn, copyName := pgbenchTemplate(t)
	path := filepath.Join(t.TempDir(), "w.erpcap.gz")
	p := startProxyProcess(t, dsn, "--capture", path)
	start := time.Now()
	runPgbench(t, p.dsn, "-n", "-c", "4", "-t", "50", "-M", "prepared")
	runPgbench(t, p.dsn, "-n", "-c", "4", "-t", "50", "-M", "extended")
	t.Logf("pgbench through the proxy: %s", time.Since(start).Round(time.Millisecond))
	_ = p.cmd.Process.Signal(syscall.SIGINT)
	if code := p.exit(t); code != 0 {
		t.Fatalf("proxy exit code %d", code)
	}
	text, replayed, doc := replayOnto(t, srv.DSN(t, "postgres"), path, "--template", copyName)
	checkReplayed(t, text, dsn, replayed, doc, 2*200*5)
}

// Without --template or --force a replay refuses in one line (exit 2)
// before reading anything; a source that does not parse is one line
// naming file:line (exit 1); --help prints the server's log settings.
func TestReplayRefusals(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.log")
	if err := os.WriteFile(bad, []byte(strings.Repeat("this is not a server log line\n", 20)), 0o600); err != nil {
		t.Fatal(err)
	}
	code, text := exitCode(t, erplab(t, dir, "replay", bad, "--dsn", "host=/nonexistent"))
	msg := strings.TrimSpace(text)
	if code != exitUsage || strings.Contains(msg, "\n") || !strings.Contains(msg, "--template") || !strings.Contains(msg, "--force") {
		t.Errorf("without --template: exit %d: %q", code, msg)
	}
	code, text = exitCode(t, erplab(t, dir, "replay", bad, "--dsn", "host=/nonexistent", "--force"))
	msg = strings.TrimSpace(text)
	if code != exitError || strings.Contains(msg, "\n") || !strings.Contains(msg, bad+":1") {
		t.Errorf("bad source: exit %d: %q", code, msg)
	}
	code, text = exitCode(t, erplab(t, dir, "replay", "--help"))
	for _, want := range []string{"logging_collector = on", "log_line_prefix = '%m [%p] %q%c %l %e user=%u db=%d app=%a '", "log_connections = on",
		"log_disconnections = on", "log_statement = 'all'", "log_destination = 'csvlog'", "large objects", "LISTEN/NOTIFY"} {
		if code != 0 || !strings.Contains(text, want) {
			t.Errorf("replay --help: exit %d, lacks %q", code, want)
		}
	}
}

// The same round trip from a csvlog: a server logging every statement,
// connection and disconnection, pgbench (prepared and extended) against
// it, its csvlog replayed onto a copy taken before.
func TestReplayCsvlog(t *testing.T) {
	pgtest.SkipShort(t)
	c, admin, dsn := csvlogCluster(t)
	runPgbench(t, dsn, "-i", "-q", "-s", "1")
	adminSQL(t, admin, "CREATE DATABASE a_copy TEMPLATE a")
	// Logging from here: init and the copy are not in the log.
	logAll(t, admin)
	runPgbench(t, dsn, "-n", "-c", "4", "-t", "50", "-M", "prepared")
	runPgbench(t, dsn, "-n", "-c", "4", "-t", "50", "-M", "extended")
	log := filepath.Join(c.DataDir(), "log", "pg.csv")
	saved := filepath.Join(t.TempDir(), "log.erpcap.gz")
	text, replayed, doc := replayOnto(t, admin, log, "--template", "a_copy", "--save-capture", saved)
	if !strings.Contains(text, "source: pglog") {
		t.Errorf("not read as a server log:\n%s", text)
	}
	if evs, torn := readCapture(t, saved); torn || len(evs) < 2000 {
		t.Errorf("--save-capture: %d events, torn %v", len(evs), torn)
	}
	checkReplayed(t, text, dsn, replayed, doc, 2*200*5)
}

// A technological journal written from statements with their 1C Context
// replays (--force onto the database itself) scored per Context, with
// APDEX in each group.
func TestReplayTechlog(t *testing.T) {
	pgtest.SkipShort(t)
	dsn, _ := stockDatabase(t)
	ops := []string{"Документ.РеализацияТоваров.Форма.ФормаДокумента", "Справочник.Номенклатура.Форма.ФормаСписка"}
	dir := writeJournal(t, ops, 1000)
	out := filepath.Join(t.TempDir(), "r.json")
	code, text := exitCode(t, erplab(t, t.TempDir(), "replay", dir, "--dsn", dsn, "--force", "--speed", "0", "--out", out, "--progress"))
	if code != 0 || !strings.Contains(text, "source: techlog") || !regexp.MustCompile(`(?m)^t=\d+s statements \d+ failed 0 \(new 0\) reordered 0$`).MatchString(text) {
		t.Fatalf("exit %d:\n%s", code, text)
	}
	doc, err := results.Read(out)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, o := range doc.Operations {
		names = append(names, o.Name)
		if o.Apdex.Samples != 15 || o.Count != 15 || o.Errors != 0 {
			t.Errorf("group %s: count %d, errors %d, APDEX %+v", o.Name, o.Count, o.Errors, o.Apdex)
		}
	}
	if strings.Join(names, "|") != strings.Join(ops, "|") {
		t.Errorf("groups %q, want the Contexts %q\n%s", names, ops, text)
	}
	var sum int64
	conn, err := pgx.Connect(t.Context(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	if err := conn.QueryRow(t.Context(), "SELECT sum(qty) FROM stock").Scan(&sum); err != nil || sum != 1000-10 {
		t.Errorf("sum(qty) %d, %v; want 990", sum, err)
	}
}

// writeJournal writes a technological journal of two sessions, one per
// operation of ops (their Context), each five transactions of an UPDATE
// of table stock, an event every gap µs; it returns its directory.
func writeJournal(t *testing.T, ops []string, gap int64) string {
	t.Helper()
	started := time.Date(2026, 3, 2, 10, 0, 0, 0, time.UTC)
	dir := filepath.Join(t.TempDir(), "journal")
	w, err := techlog.NewWriter(dir, techlog.WriterOptions{Started: started})
	if err != nil {
		t.Fatal(err)
	}
	at := int64(0)
	for s := range 2 {
		sess := strconv.Itoa(s + 1)
		ev := func(e capture.Event) {
			at += gap
			e.Session, e.T, e.Duration, e.Rows = sess, at, 300, 1
			if err := w.Write(e); err != nil {
				t.Fatal(err)
			}
		}
		ev(capture.Event{Kind: capture.KindConnect, Params: map[string]string{"user": "Иванов"}})
		for i := range 5 {
			ev(capture.Event{Kind: capture.KindQuery, SQL: "BEGIN", TxAfter: "T", Operation: ops[s], Rows: 0})
			ev(capture.Event{Kind: capture.KindExecute, SQL: "UPDATE stock SET qty = qty - $1 WHERE id = $2", Formats: []int16{0},
				Values: [][]byte{[]byte("1"), []byte(strconv.Itoa(i + 1))}, TxAfter: "T", Operation: ops[s]})
			ev(capture.Event{Kind: capture.KindQuery, SQL: "COMMIT", TxAfter: "I", Operation: ops[s]})
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return dir
}

// Ctrl-C during a replay into a --template copy: exit 130, the results
// so far written, the copy dropped.
func TestReplayInterrupted(t *testing.T) {
	pgtest.SkipShort(t)
	_, db := stockDatabase(t)
	dir := writeJournal(t, []string{"a", "b"}, 2_000_000) // 60 s at --speed 1
	cmd := erplab(t, t.TempDir(), "replay", dir, "--dsn", srv.DSN(t, "postgres"), "--template", db, "--out", filepath.Join(t.TempDir(), "r.json"), "--progress")
	pipe, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = cmd.Stdout
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	copyRE := regexp.MustCompile(`replaying into (\S+),`)
	var copyName string
	var lines []string
	signalled := false
	sc := bufio.NewScanner(pipe)
	for sc.Scan() {
		lines = append(lines, sc.Text())
		if m := copyRE.FindStringSubmatch(sc.Text()); m != nil {
			copyName = m[1]
		}
		if strings.HasPrefix(sc.Text(), "t=") && !signalled { // under way
			signalled = true
			_ = cmd.Process.Signal(syscall.SIGINT)
		}
	}
	err = cmd.Wait()
	text := strings.Join(lines, "\n")
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != exitInterrupted || copyName == "" || !strings.Contains(text, "results: ") {
		t.Fatalf("%v\n%s", err, text)
	}
	conn, err := pgx.Connect(t.Context(), srv.DSN(t, "postgres"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	var n int
	if err := conn.QueryRow(t.Context(), "SELECT count(*) FROM pg_database WHERE datname = $1", copyName).Scan(&n); err != nil || n != 0 {
		t.Errorf("the copy %s is left: %d, %v\n%s", copyName, n, err, text)
	}
}

// startReplay starts erplab replay with args and the state directory
// state, reads its output until it prints a progress line (the replay is
// under way) and returns the command, the copy's name and the lines so
// far; the rest of the output is left in the pipe.
func startReplay(t *testing.T, state string, args ...string) (*exec.Cmd, *bufio.Scanner, string, []string) {
	t.Helper()
	cmd := erplab(t, t.TempDir(), append([]string{"replay"}, args...)...)
	cmd.Env = append(cmd.Env, "ERPLAB_STATE_DIR="+state)
	pipe, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = cmd.Stdout
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	copyRE := regexp.MustCompile(`replaying into (\S+),`)
	var copyName string
	var lines []string
	sc := bufio.NewScanner(pipe)
	for sc.Scan() {
		lines = append(lines, sc.Text())
		if m := copyRE.FindStringSubmatch(sc.Text()); m != nil {
			copyName = m[1]
		}
		if strings.HasPrefix(sc.Text(), "t=") {
			return cmd, sc, copyName, lines
		}
	}
	t.Fatalf("the replay ended before a progress line:\n%s", strings.Join(lines, "\n"))
	return nil, nil, "", nil
}

// databaseExists reports whether the test server has database db.
func databaseExists(t *testing.T, db string) bool {
	t.Helper()
	conn, err := pgx.Connect(t.Context(), srv.DSN(t, "postgres"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	var n int
	if err := conn.QueryRow(t.Context(), "SELECT count(*) FROM pg_database WHERE datname = $1", db).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n > 0
}

// A replay killed outright (kill -9) mid-replay leaves its --template
// copy; the next erplab command's sweep drops it and says so in one
// line. A copy the sweep cannot log in to drop (no password) is named in
// one line with the statement that drops it.
func TestReplayKilledCopyDropped(t *testing.T) {
	pgtest.SkipShort(t)
	_, db := stockDatabase(t)
	state := filepath.Join(t.TempDir(), "state")
	journal := writeJournal(t, []string{"a", "b"}, 2_000_000) // 60 s at --speed 1
	cmd, _, copyName, lines := startReplay(t, state, journal, "--dsn", srv.DSN(t, "postgres"), "--template", db,
		"--out", filepath.Join(t.TempDir(), "r.json"), "--progress")
	t.Cleanup(func() { adminSQL(t, srv.DSN(t, "postgres"), "DROP DATABASE IF EXISTS "+copyName+" WITH (FORCE)") })
	_ = cmd.Process.Kill()
	_ = cmd.Wait()
	if copyName == "" || !databaseExists(t, copyName) {
		t.Fatalf("no copy %q under way:\n%s", copyName, strings.Join(lines, "\n"))
	}
	next := erplab(t, t.TempDir(), "version")
	next.Env = append(next.Env, "ERPLAB_STATE_DIR="+state)
	b, err := next.CombinedOutput()
	text := string(b)
	if err != nil || databaseExists(t, copyName) {
		t.Fatalf("after the next command (%v) the copy %s is left:\n%s", err, copyName, text)
	}
	want := "erplab: cleaned up after killed erplab commands: replay-copy " + copyName + " on host="
	if !strings.Contains(text, want) || !strings.Contains(text, "(dropped)") || strings.Contains(text, "password=") {
		t.Errorf("the sweep's line lacks %q:\n%s", want, text)
	}

	// The password given in --dsn (not the password file) is not
	// recorded: the sweep, over TCP, has none and names the copy to drop
	// by hand, once.
	pf, err := os.ReadFile(passfileOf(srv.DSN(t, "postgres")))
	if err != nil {
		t.Fatal(err)
	}
	fields := strings.Split(strings.TrimSpace(strings.SplitN(string(pf), "\n", 2)[0]), ":")
	password := fields[len(fields)-1]
	withPassword := regexp.MustCompile(`passfile=\S+`).ReplaceAllString(srv.DSN(t, "postgres"), "password="+password)
	cmd, _, copyName, lines = startReplay(t, state, journal, "--dsn", withPassword, "--template", db,
		"--out", filepath.Join(t.TempDir(), "r.json"), "--progress")
	t.Cleanup(func() { adminSQL(t, srv.DSN(t, "postgres"), "DROP DATABASE IF EXISTS "+copyName+" WITH (FORCE)") })
	_ = cmd.Process.Kill()
	_ = cmd.Wait()
	if copyName == "" {
		t.Fatalf("no copy:\n%s", strings.Join(lines, "\n"))
	}
	entries, err := filepath.Glob(filepath.Join(state, "leftover", "*.json"))
	if err != nil || len(entries) != 1 {
		t.Fatalf("entries %v, %v", entries, err)
	}
	b, err = os.ReadFile(entries[0])
	if err != nil || len(password) < 8 || strings.Contains(string(b), password) || strings.Contains(string(b), "password=") {
		t.Fatalf("the entry holds the password (%v):\n%s", err, b)
	}
	// Over TCP (scram-sha-256; the test server's socket trusts) without
	// the password file.
	noPass := regexp.MustCompile(`passfile=[^ "]+`).ReplaceAll(b, []byte("passfile=/nonexistent"))
	noPass = regexp.MustCompile(`host=[^ "]+`).ReplaceAll(noPass, []byte("host=127.0.0.1"))
	if err := os.WriteFile(entries[0], noPass, 0o600); err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		next = erplab(t, t.TempDir(), "version")
		next.Env = append(next.Env, "ERPLAB_STATE_DIR="+state)
		b, _ = next.CombinedOutput()
		text = string(b)
		named := strings.Contains(text, "to remove by hand: replay-copy "+copyName) && strings.Contains(text, "DROP DATABASE "+`"`+copyName+`"`)
		t.Logf("sweep %d: %s", i+1, text)
		if named != (i == 0) || !databaseExists(t, copyName) {
			t.Errorf("sweep %d: named %v:\n%s", i+1, named, text)
		}
	}
}

// --max-errors 3 on a replay whose every UPDATE fails where the capture's
// did not (the copy lacks the table): the replay stops after the third
// new error with one line saying why (exit 1), the results so far are
// written with status "aborted: ...", the copy is dropped. Its
// --progress lines (at --speed 1) show the new errors, the lag's p99 and
// the reorders so far.
func TestReplayMaxErrors(t *testing.T) {
	pgtest.SkipShort(t)
	dsn := srv.NewDatabase(t) // no table stock: every UPDATE fails with 42P01
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		t.Fatal(err)
	}
	journal := writeJournal(t, []string{"a", "b"}, 200_000) // 6 s at --speed 1
	out := filepath.Join(t.TempDir(), "r.json")
	cmd := erplab(t, t.TempDir(), "replay", journal, "--dsn", srv.DSN(t, "postgres"), "--template", cfg.Database, "--out", out,
		"--progress", "--max-errors", "3")
	cmd.Env = append(cmd.Env, "ERPLAB_STATE_DIR="+filepath.Join(t.TempDir(), "state"))
	code, text := exitCode(t, cmd)
	copyName := ""
	if m := regexp.MustCompile(`replaying into (\S+),`).FindStringSubmatch(text); m != nil {
		copyName = m[1]
	}
	want := regexp.MustCompile(`(?m)^erplab: replay stopped by --max-errors 3: 3 statements failed with errors the capture did not have \(at most 3 allowed\); results so far: \S+$`)
	if code != exitError || copyName == "" || !want.MatchString(text) {
		t.Fatalf("exit %d:\n%s", code, text)
	}
	if !regexp.MustCompile(`(?m)^t=\d+s statements \d+ failed \d+ \(new \d+\) lag p99 \S+ reordered 0$`).MatchString(text) {
		t.Errorf("no progress line with the new errors, the lag and the reorders:\n%s", text)
	}
	if databaseExists(t, copyName) {
		t.Errorf("the copy %s is left", copyName)
	}
	doc, err := results.Read(out)
	if err != nil {
		t.Fatal(err)
	}
	f := fidelity(t, doc)
	if !strings.HasPrefix(string(doc.Status), "aborted: 3 statements failed") || f.NewErrors["42P01"] != 3 || f.Skipped == 0 {
		t.Errorf("status %q, new errors %v, skipped %d", doc.Status, f.NewErrors, f.Skipped)
	}
}

// pgbenchSums are sum(abalance), sum(bbalance), sum(tbalance) and
// count(*) of pgbench_history in the database of dsn.
func pgbenchSums(t *testing.T, dsn string) [4]int64 {
	t.Helper()
	conn, err := pgx.Connect(t.Context(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	var s [4]int64
	err = conn.QueryRow(t.Context(), `SELECT (SELECT sum(abalance) FROM pgbench_accounts), (SELECT sum(bbalance) FROM pgbench_branches),
		(SELECT sum(tbalance) FROM pgbench_tellers), (SELECT count(*) FROM pgbench_history)`).Scan(&s[0], &s[1], &s[2], &s[3])
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// --users-x 4 of a pgbench capture (through the proxy) replays every
// captured session four times: four times the connections and the
// statements, and, from a copy taken before pgbench (balances 0), four
// times the history rows and the balances' sums, with no new error.
func TestReplayUsersX(t *testing.T) {
	pgtest.SkipShort(t)
	_, dsn, copyName := pgbenchTemplate(t)
	path := filepath.Join(t.TempDir(), "w.erpcap.gz")
	p := startProxyProcess(t, dsn, "--capture", path)
	runPgbench(t, p.dsn, "-n", "-c", "4", "-t", "25", "-M", "prepared")
	_ = p.cmd.Process.Signal(syscall.SIGINT)
	if code := p.exit(t); code != 0 {
		t.Fatalf("proxy exit code %d", code)
	}
	evs, _ := readCapture(t, path)
	var sessions, statements int64
	for _, e := range evs {
		switch e.Kind {
		case capture.KindConnect:
			sessions++
		case capture.KindQuery, capture.KindExecute, capture.KindCopy:
			statements++
		}
	}
	text, replayed, doc := replayOnto(t, srv.DSN(t, "postgres"), path, "--template", copyName, "--users-x", "4")
	f := fidelity(t, doc)
	if f.UsersX != 4 || int64(f.Sessions) != sessions || f.Connections != 4*sessions || f.Statements != 4*statements {
		t.Errorf("users-x %d: sessions %d (captured %d), connections %d, statements %d (captured %d): want 4 times\n%s",
			f.UsersX, f.Sessions, sessions, f.Connections, f.Statements, statements, text)
	}
	if len(f.NewErrors) > 0 || f.Skipped > 0 || doc.Status != "completed" {
		t.Errorf("status %s, new errors %v, skipped %v\n%s", doc.Status, f.NewErrors, f.SkippedBy, text)
	}
	orig, got := pgbenchSums(t, dsn), pgbenchSums(t, replayed)
	if orig[3] != 100 || got != [4]int64{4 * orig[0], 4 * orig[1], 4 * orig[2], 4 * orig[3]} {
		t.Errorf("original (balances, history) %v, replayed x4 %v: want 4 times\n%s", orig, got, text)
	}
}

// shellWords splits a line of a --help example as sh would: words
// separated by blanks, '...' quoted, a # word ending the line, && ending
// a command (words is every command of the line).
func shellWords(line string) (cmds [][]string) {
	var cur []string
	var w strings.Builder
	inWord, quoted := false, false
	flush := func() {
		if inWord {
			cur = append(cur, w.String())
		}
		w.Reset()
		inWord = false
	}
	for i := 0; i < len(line); i++ {
		c := line[i]
		switch {
		case quoted && c == '\'':
			quoted = false
		case quoted:
			w.WriteByte(c)
		case c == '\'':
			quoted, inWord = true, true
		case c == ' ' || c == '\t':
			flush()
		case c == '#' && !inWord:
			flush()
			return append(cmds, cur)
		default:
			w.WriteByte(c)
			inWord = true
		}
	}
	flush()
	return append(cmds, cur)
}

// Every erplab command of replay's --help examples parses with its
// command's flags, and every replay names the database its --dsn
// connects to (the copy is made from that connection; without dbname
// libpq connects to the user's database, which may not exist).
func TestReplayHelpExamples(t *testing.T) {
	ex := newReplayCmd().Example
	n := 0
	for line := range strings.Lines(ex) {
		for _, words := range shellWords(strings.TrimSpace(line)) {
			if len(words) > 0 && words[len(words)-1] == "&&" {
				words = words[:len(words)-1]
			}
			if len(words) < 2 || words[0] != "erplab" {
				continue
			}
			n++
			var c *cobra.Command
			switch words[1] {
			case "replay":
				c = newReplayCmd()
			case "proxy":
				c = newProxyCmd()
			default:
				t.Fatalf("example of another command: %q", line)
			}
			if err := c.ParseFlags(words[2:]); err != nil {
				t.Errorf("%q: %v", line, err)
				continue
			}
			if words[1] != "replay" {
				continue
			}
			dsn, _ := c.Flags().GetString("dsn")
			tmpl, _ := c.Flags().GetString("template")
			if cfg, err := pgx.ParseConfig(dsn); err != nil || !strings.Contains(dsn, "dbname=") || cfg.Database == tmpl || len(c.Flags().Args()) == 0 {
				t.Errorf("%q: --dsn %q names no database other than the template, or no source", line, dsn)
			}
		}
	}
	if n < 4 {
		t.Errorf("%d erplab commands in the examples:\n%s", n, ex)
	}
}

// A --template that does not exist: one line with the server's words
// (exit 1), and nothing left in erplab's leftover record.
func TestReplayTemplateMissing(t *testing.T) {
	pgtest.SkipShort(t)
	state := filepath.Join(t.TempDir(), "state")
	cmd := erplab(t, t.TempDir(), "replay", writeJournal(t, []string{"a", "b"}, 1000), "--dsn", srv.DSN(t, "postgres"),
		"--template", "no_such_db", "--out", filepath.Join(t.TempDir(), "r.json"))
	cmd.Env = append(cmd.Env, "ERPLAB_STATE_DIR="+state)
	code, text := exitCode(t, cmd)
	want := regexp.MustCompile(`(?m)^erplab: --template no_such_db: CREATE DATABASE erplab_replay_\S+ TEMPLATE no_such_db: template database "no_such_db" does not exist \(SQLSTATE 3D000\)$`)
	if code != exitError || !want.MatchString(text) {
		t.Errorf("exit %d:\n%s", code, text)
	}
	if left, _ := filepath.Glob(filepath.Join(state, "leftover", "*.json")); len(left) != 0 {
		t.Errorf("entries left: %v", left)
	}
}
