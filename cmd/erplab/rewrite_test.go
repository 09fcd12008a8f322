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
	if err != nil || !strings.Contains(string(out), "t.a = $1 OR t.a = ANY (ARRAY (SELECT u.x FROM u)) -- keep") || !strings.Contains(string(out), "or_any_array fired") {
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
