package main

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

func TestRewriteCommand(t *testing.T) {
	dir := t.TempDir()
	cmd := erplab(t, dir, "rewrite")
	cmd.Stdin = strings.NewReader("SELECT 1 FROM t WHERE t.a = $1 OR t.a IN (SELECT u.x FROM u) -- keep")
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "types unknown: not rewritten") || !strings.Contains(string(out), "t.a = $1 OR t.a IN (SELECT u.x FROM u) -- keep") {
		t.Fatalf("without --dsn or --assume-types: %v\n%s", err, out)
	}
	cmd = erplab(t, dir, "rewrite", "--assume-types")
	cmd.Stdin = strings.NewReader("SELECT 1 FROM t WHERE t.a = $1 OR t.a IN (SELECT u.x FROM u) -- keep")
	out, err = cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "t.a = $1 OR CASE WHEN false THEN t.a IN (SELECT u.x FROM u) ELSE t.a = ANY (ARRAY (SELECT u.x FROM u)) END -- keep") || !strings.Contains(string(out), "or_any_array fired") {
		t.Fatalf("%v\n%s", err, out)
	}
	cmd = erplab(t, dir, "rewrite", "-")
	cmd.Stdin = strings.NewReader("SELECT 1 FROM t WHERE t.a NOT IN (SELECT u.x FROM u) OR t.a = 1")
	if out, err := cmd.CombinedOutput(); err != nil || !strings.Contains(string(out), "unchanged: or_any_array vetoed") {
		t.Fatalf("%v\n%s", err, out)
	}

	dsn := srv.NewDatabase(t)
	pool := srv.Pool(t, dsn)
	if _, err := pool.Exec(context.Background(), `CREATE TABLE t (a int, b int); CREATE INDEX ON t (a);
CREATE TABLE u (x int); INSERT INTO t SELECT g, g FROM generate_series(1, 20000) g; INSERT INTO u VALUES (5), (7); ANALYZE t; ANALYZE u;`); err != nil {
		t.Fatal(err)
	}
	cmd = erplab(t, dir, "rewrite", "--dsn", dsn, "--explain", "--analyze", "--param", "3")
	cmd.Stdin = strings.NewReader("SELECT t.b FROM t WHERE t.a = $1 OR t.a IN (SELECT x FROM u)")
	out, err = cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "execution, ms") || !strings.Contains(string(out), "original scans:  Seq Scan t") ||
		!strings.Contains(string(out), "Bitmap Index Scan t_a_idx") {
		t.Fatalf("%v\n%s", err, out)
	}
	// The server's types veto an int[] subquery output (ARRAY() would
	// flatten it), even with --assume-types.
	if _, err := pool.Exec(context.Background(), `CREATE TABLE tb2 (tags int[]); INSERT INTO tb2 VALUES ('{1,2}')`); err != nil {
		t.Fatal(err)
	}
	cmd = erplab(t, dir, "rewrite", "--dsn", dsn, "--assume-types")
	cmd.Stdin = strings.NewReader("SELECT t.b FROM t WHERE t.a IN (SELECT tb2.tags FROM tb2) OR t.a = 3")
	out, err = cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "integer[], an array type") || strings.Contains(string(out), "ARRAY") {
		t.Fatalf("%v\n%s", err, out)
	}
}

func TestProxyCommand(t *testing.T) {
	dsn := srv.NewDatabase(t)
	pool := srv.Pool(t, dsn)
	ctx := context.Background()
	if _, err := pool.Exec(ctx, `CREATE TABLE t (a int); CREATE INDEX ON t (a); CREATE TABLE u (x int);
INSERT INTO t SELECT generate_series(1, 100); INSERT INTO u VALUES (5), (7), (NULL)`); err != nil {
		t.Fatal(err)
	}
	cmd := erplab(t, t.TempDir(), "proxy", "--listen", "127.0.0.1:0", "--upstream", dsn)
	var stdout strings.Builder
	addr, _, sc, _ := startListening(t, cmd, &stdout)
	defer func() { _ = cmd.Process.Kill() }()
	go func() {
		for sc.Scan() {
		}
	}()
	host, port, _ := strings.Cut(addr, ":")
	conn, err := pgx.Connect(ctx, dsn+" host="+host+" port="+port+" sslmode=prefer")
	if err != nil {
		t.Fatal(err)
	}
	var n int
	if err := conn.QueryRow(ctx, "SELECT count(*) FROM t WHERE t.a = 1 OR t.a IN (SELECT u.x FROM u)").Scan(&n); err != nil || n != 3 {
		t.Fatalf("count %d, %v", n, err)
	}
	conn.Close(ctx)
	_ = cmd.Process.Signal(syscall.SIGINT)
	if err := cmd.Wait(); err != nil {
		t.Fatalf("proxy exit: %v", err)
	}
	if !strings.Contains(stdout.String(), "rewritten 1,") {
		t.Fatalf("summary: %s", stdout.String())
	}
}

// The server sees only the rewritten text: current_query() and another
// session's pg_stat_activity.query show "= ANY (ARRAY (...))" for a
// statement the proxy rewrote, and the proxy's --verbose log and exit
// summary name no statement text (docs/design/proxy-guarantees.md, "What a client can observe").
func TestProxyServerSeesRewrittenText(t *testing.T) {
	dsn := srv.NewDatabase(t)
	pool := srv.Pool(t, dsn)
	ctx := context.Background()
	if _, err := pool.Exec(ctx, `CREATE TABLE t (a int); CREATE INDEX ON t (a); CREATE TABLE u (x int);
INSERT INTO t SELECT generate_series(1, 100); INSERT INTO u VALUES (5)`); err != nil {
		t.Fatal(err)
	}
	cmd := erplab(t, t.TempDir(), "proxy", "--listen", "127.0.0.1:0", "--upstream", dsn, "--verbose")
	var stdout strings.Builder
	addr, _, sc, _ := startListening(t, cmd, &stdout)
	defer func() { _ = cmd.Process.Kill() }()
	var logs strings.Builder
	logged := make(chan struct{})
	go func() {
		defer close(logged)
		for sc.Scan() {
			logs.WriteString(sc.Text() + "\n")
		}
	}()
	host, port, _ := strings.Cut(addr, ":")
	conn, err := pgx.Connect(ctx, dsn+" host="+host+" port="+port+" sslmode=prefer")
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	const rewritten = "CASE WHEN false THEN t.a IN (SELECT u.x FROM u) ELSE t.a = ANY (ARRAY (SELECT u.x FROM u)) END"
	var q string
	if err := conn.QueryRow(ctx, "SELECT current_query() FROM t WHERE t.a = 1 OR t.a IN (SELECT u.x FROM u) LIMIT 1").Scan(&q); err != nil || !strings.Contains(q, rewritten) {
		t.Fatalf("current_query() = %q, %v; want the rewritten text", q, err)
	}

	// A second session sees the running statement's rewritten text: the
	// statement waits for an advisory lock this test holds.
	lock, err := pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Release()
	if _, err := lock.Exec(ctx, "SELECT pg_advisory_lock(4242)"); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := conn.Exec(ctx, "SELECT pg_advisory_lock_shared(4242) FROM t WHERE t.a = 1 OR t.a IN (SELECT u.x FROM u)")
		done <- err
	}()
	var seen string
	for seen == "" {
		err := pool.QueryRow(ctx, `SELECT query FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND wait_event = 'advisory' AND query LIKE '%pg_advisory_lock_shared%'`).Scan(&seen)
		if err != nil && !errors.Is(err, pgx.ErrNoRows) {
			t.Fatal(err)
		}
		select {
		case err := <-done:
			t.Fatalf("the statement ended before it was seen waiting: %v", err)
		case <-time.After(10 * time.Millisecond): // poll again
		}
	}
	if _, err := lock.Exec(ctx, "SELECT pg_advisory_unlock(4242)"); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(seen, rewritten) {
		t.Errorf("pg_stat_activity.query = %q, want the rewritten text", seen)
	}
	conn.Close(ctx)
	_ = cmd.Process.Signal(syscall.SIGINT)
	if err := cmd.Wait(); err != nil {
		t.Fatalf("proxy exit: %v", err)
	}
	<-logged
	if !strings.Contains(stdout.String(), "rewritten 2,") {
		t.Errorf("summary: %s", stdout.String())
	}
	for _, out := range []string{stdout.String(), logs.String()} {
		if strings.Contains(out, "IN (SELECT u.x FROM u)") || strings.Contains(out, rewritten) {
			t.Errorf("the proxy's output names a statement:\n%s", out)
		}
	}
}

// A statement too deep for the C parser's stack is refused with its
// position and the usage exit code (it crashed erplab before).
func TestRewriteCommandDeepStatement(t *testing.T) {
	dir := t.TempDir()
	sql := "\n\nselect 1 where 1=0 or 1 in (select 1) or 0=(" + strings.Repeat("1+", 30000) + "1)\n"
	if err := os.WriteFile(filepath.Join(dir, "deep.sql"), []byte(sql), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := erplab(t, dir, "rewrite", "--assume-types", "deep.sql")
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != exitUsage {
		t.Fatalf("exit: %v, want %d\n%.500s", err, exitUsage, out)
	}
	if got := strings.TrimSpace(string(out)); strings.Count(got, "\n") != 0 || !strings.Contains(got, "deep.sql:3: statement not parsed: too deep") {
		t.Errorf("output %q, want one line naming deep.sql:3", got)
	}
}

// A syntax error names the file, line and column (in characters, the
// file's leading blank lines counted) of the token PostgreSQL's parser
// points at, with the server's wording, in one line and exit 2 (the
// trial's report: no position, and "FROM" was ambiguous with two FROMs).
func TestRewriteCommandSyntaxError(t *testing.T) {
	dir := t.TempDir()
	for _, c := range []struct{ sql, want string }{
		{"\n\nSELECT a FROM t\nWHERE a IN (SELECT x FROM u) AND FROM;\n", `bad.sql:4:34: syntax error at or near "FROM"`},
		{"SELECT 'ж' FROM t WHERE x = 1 OR x IN (SELECT y FROM u) AND FROM;", `bad.sql:1:61: syntax error at or near "FROM"`},
		{"SELECT (", `bad.sql:1:9: syntax error at end of input`},
	} {
		if err := os.WriteFile(filepath.Join(dir, "bad.sql"), []byte(c.sql), 0o600); err != nil {
			t.Fatal(err)
		}
		out, err := erplab(t, dir, "rewrite", "--assume-types", "bad.sql").CombinedOutput()
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != exitUsage {
			t.Errorf("%q: exit %v, want %d\n%s", c.sql, err, exitUsage, out)
		}
		if got := strings.TrimSpace(string(out)); got != "erplab: "+c.want {
			t.Errorf("%q: output %q, want %q", c.sql, got, "erplab: "+c.want)
		}
	}
}

// Positions are the file's lines and columns in characters (its leading
// blank lines and indentation count, as in psql), not byte offsets.
func TestRewriteCommandPositions(t *testing.T) {
	dir := t.TempDir()
	sql := "\n\n-- отчёт «Остатки»\n  SELECT т.наименование FROM справочник т\n  WHERE т.вид = 'Товар' OR т.вид = SOME (SELECT в.код FROM виды в)\n"
	if err := os.WriteFile(filepath.Join(dir, "q.sql"), []byte(sql), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := erplab(t, dir, "rewrite", "--assume-types", "q.sql")
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%v\n%s%s", err, out, stderr.String())
	}
	want := "-- or_any_array fired at line 5, column 34 (т.вид = SOME (subquery) -> т.вид = SOME (ARRAY(subquery)))\n"
	if stderr.String() != want || !strings.Contains(string(out), "т.вид = SOME (ARRAY(SELECT в.код FROM виды в))") {
		t.Errorf("stderr %q, want %q; stdout %q", stderr.String(), want, out)
	}
}

// --explain and --analyze refuse what they cannot do before printing or
// running anything, in one line naming the flag (the trial's report:
// pgx's "insufficient arguments", the server's "cannot execute DELETE in
// a read-only transaction", and the rewritten SQL printed before "takes
// one statement").
func TestRewriteExplainChecks(t *testing.T) {
	dsn := srv.NewDatabase(t)
	pool := srv.Pool(t, dsn)
	if _, err := pool.Exec(context.Background(), "CREATE TABLE t (id int PRIMARY KEY)"); err != nil {
		t.Fatal(err)
	}
	const q = "SELECT count(*) FROM t WHERE id = $1 OR id IN (SELECT 2)"
	for _, c := range []struct {
		sql  string
		args []string
		want string
	}{
		{q, []string{"--explain"}, "erplab: the statement has parameter $1: give --param once for each, in order (got 0)"},
		{q + " OR id = $2", []string{"--explain", "--param", "1"}, "erplab: the statement has parameters $1..$2: give --param once for each, in order (got 1)"},
		{"SELECT 1 FROM t WHERE id = 1 OR id IN (SELECT 2)", []string{"--explain", "--param", "1"}, "erplab: --param given 1 time(s), but the statement has no $n parameters"},
		{"DELETE FROM t WHERE id = 1 OR id IN (SELECT 2)", []string{"--analyze"}, "erplab: --analyze runs both statements in a read-only transaction (rolled back), and DELETE writes: use --explain without --analyze"},
		{"SELECT 1; SELECT 2", []string{"--explain"}, "erplab: --explain takes one statement, got 2: put the one to compare in a file of its own"},
		{"SELECT * INTO nt FROM t WHERE id = 1 OR id IN (SELECT 2)", []string{"--analyze"}, "erplab: --analyze runs both statements in a read-only transaction (rolled back), and SELECT INTO creates a table: use --explain without --analyze"},
		{"WITH d AS (DELETE FROM t RETURNING id) SELECT count(*) FROM t WHERE id = 1 OR id IN (SELECT 2)", []string{"--analyze"}, "erplab: --analyze runs both statements in a read-only transaction (rolled back), and a WITH query writes: use --explain without --analyze"},
		{"SELECT * FROM t WHERE id = 1 OR id IN (SELECT 2) FOR UPDATE", []string{"--analyze"}, "erplab: --analyze runs both statements in a read-only transaction (rolled back), and FOR UPDATE/SHARE locks rows: use --explain without --analyze"},
		{"CREATE TABLE nt2 AS SELECT * FROM t WHERE id = 1 OR id IN (SELECT 2)", []string{"--analyze"}, "erplab: --analyze runs both statements in a read-only transaction (rolled back), and the statement is not a SELECT: use --explain without --analyze"},
		{q, []string{"--param", "1"}, "erplab: --param is for --explain: without it the statement is not run"},
	} {
		cmd := erplab(t, t.TempDir(), append([]string{"rewrite", "--dsn", dsn}, c.args...)...)
		cmd.Stdin = strings.NewReader(c.sql)
		var stdout, stderr strings.Builder
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		err := cmd.Run()
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != exitUsage {
			t.Errorf("%q %v: exit %v, want %d", c.sql, c.args, err, exitUsage)
		}
		if got := strings.TrimSpace(stderr.String()); got != c.want || stdout.Len() != 0 {
			t.Errorf("%q %v: stderr %q, stdout %q; want only %q", c.sql, c.args, got, stdout.String(), c.want)
		}
	}
}
