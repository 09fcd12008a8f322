package script

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/erplab/erplab/internal/pgbench/expr"
	"github.com/jackc/pgx/v5/pgconn"
)

func runOK(t *testing.T, c *Client, conn *pgconn.PgConn) Result {
	t.Helper()
	res := c.Run(testCtx(t), conn, 0)
	if res.Err != nil {
		t.Fatalf("Run: %v", res.Err)
	}
	return res
}

func wantVar(t *testing.T, c *Client, name, want string) {
	t.Helper()
	got, ok := c.Var(name)
	if !ok || got != want {
		t.Errorf("variable %s = %q (defined %v), want %q", name, got, ok, want)
	}
}

func TestMetaCommands(t *testing.T) {
	conn := connect(t, srv.NewDatabase(t))
	src := `-- every meta-command
\set zero 0
\set one 1.0
\set two :one * 2
\set s debug(:two)
\sleep :zero
\sleep 100 us
\sleep 0 s
\sleep :one ms
\setshell another_one\
  echo \
    :one
\set n debug(:another_one + 1)
\setshell neg echo -n '  -7  '
\shell echo shell-echo-output ::lit :two
\if :one > 5
  \set branch 1
\elif :one = 1
  \set branch 2
  \if false
    \set inner 1
  \else
    \set inner 2
  \endif
\else
  \set branch 3
\endif
\set last debug(:branch * 10 + :inner)
`
	for _, mode := range allModes {
		t.Run(mode.String(), func(t *testing.T) {
			var out bytes.Buffer
			c, dbg := testClient(t, src, Options{Mode: mode, ShellOut: &out})
			runOK(t, c, conn)
			wantVar(t, c, "two", "2")
			wantVar(t, c, "another_one", "1")
			wantVar(t, c, "neg", "-7")
			wantVar(t, c, "branch", "2")
			wantVar(t, c, "inner", "2")
			if got := out.String(); got != "shell-echo-output :lit 2\n" {
				t.Errorf("shell output %q", got)
			}
			wantDbg := "debug(script=0,command=4): double 2\n" +
				"debug(script=0,command=10): int 2\n" +
				"debug(script=0,command=25): int 22\n"
			if dbg.String() != wantDbg {
				t.Errorf("debug output\n%s\nwant\n%s", dbg.String(), wantDbg)
			}
		})
	}
}

func TestSleepHonoursContext(t *testing.T) {
	conn := connect(t, srv.NewDatabase(t))
	c, _ := testClient(t, "\\sleep 60 s\n", Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	res := c.Run(ctx, conn, 0)
	if !errors.Is(res.Err, context.DeadlineExceeded) || !res.Failed {
		t.Fatalf("Run = %+v, want a deadline error", res)
	}
}

func TestAutomaticVariables(t *testing.T) {
	conn := connect(t, srv.NewDatabase(t))
	src := "SELECT :client_id AS c, :scale AS s, :random_seed AS r, :default_seed AS d, :custom AS x \\gset v_\n"
	c, _ := testClient(t, src, Options{ClientID: 3, Scale: 7, RandomSeed: 42, DefaultSeed: -5,
		Defines: map[string]string{"custom": "hello", "scale": "9"}, Mode: Extended})
	runOK(t, c, conn)
	for name, want := range map[string]string{"v_c": "3", "v_s": "9", "v_r": "42", "v_d": "-5", "v_x": "hello"} {
		wantVar(t, c, name, want)
	}
	if _, err := NewClient([]*Script{mustParse(t, "SELECT 1;")}, Options{Defines: map[string]string{"bad name": "1"}}); err == nil ||
		err.Error() != `option: invalid variable name: "bad name"` {
		t.Errorf("NewClient with a bad -D name: %v", err)
	}
}

func TestGsetAset(t *testing.T) {
	conn := connect(t, srv.NewDatabase(t))
	tests := []struct {
		name   string
		src    string
		modes  []Mode
		values map[string]string
	}{
		{"gset values and prefix", "SELECT 0 AS i0, 'x y' AS s, NULL AS n \\gset\nSELECT 3 AS i3 \\gset x_\n",
			allModes, map[string]string{"i0": "0", "s": "x y", "n": "", "x_i3": "3"}},
		{"gset overwrites, last column wins", "\\set i4 9\nSELECT 0 AS i4, 4 AS i4 \\gset\n",
			allModes, map[string]string{"i4": "4"}},
		{"gset with no columns", "SELECT \\gset\n\\set ok 1\n", allModes, map[string]string{"ok": "1"}},
		{"gset on the last of several queries", "\\; \\; SELECT 0 AS i5 \\; SELECT 5 AS i5 \\; \\; \\gset\n",
			[]Mode{Simple}, map[string]string{"i5": "5"}},
		{"aset on several queries", "\\; SELECT 6 AS i6 \\; SELECT 7 AS i7 \\; \\aset\n",
			[]Mode{Simple}, map[string]string{"i6": "6", "i7": "7"}},
		{"aset keeps the last row", "SELECT 8 AS i8 UNION SELECT 9 ORDER BY 1 DESC \\aset\n",
			allModes, map[string]string{"i8": "8"}},
		{"aset skips empty results", "\\set e 1\nSELECT 5 AS e WHERE false \\aset\n",
			allModes, map[string]string{"e": "1"}},
		{"gset value used in an expression and in SQL", "SELECT 20 AS g \\gset\n\\set h :g + 1\nSELECT :h * 2 AS k \\gset\n",
			allModes, map[string]string{"h": "21", "k": "42"}},
	}
	for _, tt := range tests {
		for _, mode := range tt.modes {
			t.Run(tt.name+"/"+mode.String(), func(t *testing.T) {
				c, _ := testClient(t, tt.src, Options{Mode: mode})
				runOK(t, c, conn)
				for k, v := range tt.values {
					wantVar(t, c, k, v)
				}
			})
		}
	}
}

// Substitution follows pgbench: text in simple mode (also inside quotes),
// $n parameters otherwise; undefined variables stay as text in simple mode
// and are NULL parameters in the others.
func TestVariableSubstitution(t *testing.T) {
	conn := connect(t, srv.NewDatabase(t))
	tests := []struct {
		mode Mode
		src  string
		want map[string]string
		err  string
	}{
		{Simple, "\\set aid 42\nSELECT ':aid' AS a, :aid + 1 AS b, '1'::int AS c \\gset\n", map[string]string{"a": "42", "b": "43", "c": "1"}, ""},
		{Extended, "\\set aid 42\nSELECT :aid::int + 1 AS b, :nosuch::int IS NULL AS n \\gset\n", map[string]string{"b": "43", "n": "t"}, ""},
		{Prepared, "\\set d 1.5\n\\set t true\nSELECT :d::float8 * 2 AS x, :t::bool AS y \\gset\n", map[string]string{"x": "3", "y": "t"}, ""},
		{Simple, "SELECT :nosuch AS a;\n", nil, "syntax error"},
		{Extended, "\\set aid 42\nSELECT ':aid' AS a;\n", nil, "bind message supplies 1 parameters, but prepared statement \"\" requires 0"},
	}
	for i, tt := range tests {
		t.Run(fmt.Sprintf("%d-%v", i, tt.mode), func(t *testing.T) {
			c, _ := testClient(t, tt.src, Options{Mode: tt.mode})
			res := c.Run(testCtx(t), conn, 0)
			if tt.err != "" {
				if res.Err == nil || !strings.Contains(res.Err.Error(), tt.err) {
					t.Fatalf("Run error %v, want %q", res.Err, tt.err)
				}
				return
			}
			if res.Err != nil {
				t.Fatalf("Run: %v", res.Err)
			}
			for k, v := range tt.want {
				wantVar(t, c, k, v)
			}
		})
	}
}

func TestPipelines(t *testing.T) {
	dsn := srv.NewDatabase(t)
	conn := connect(t, dsn)
	query(t, conn, "CREATE TABLE p(i int)")
	src := "\\startpipeline\nBEGIN ISOLATION LEVEL SERIALIZABLE;\n" +
		strings.Repeat("INSERT INTO p VALUES (:client_id);\n", 5) +
		"\\syncpipeline\nINSERT INTO p VALUES (:client_id + 100);\nEND;\n\\endpipeline\n"
	for i, mode := range []Mode{Extended, Prepared} {
		c, _ := testClient(t, src, Options{Mode: mode, ClientID: i, PerCommand: true})
		for k := 0; k < 2; k++ {
			runOK(t, c, conn)
		}
		if st := c.Stats(0); st[len(st)-1].Count != 2 {
			t.Errorf("%v: \\endpipeline count %d", mode, st[len(st)-1].Count)
		}
	}
	got := query(t, conn, "SELECT i, count(*) FROM p GROUP BY i ORDER BY i")
	want := [][]string{{"0", "10"}, {"1", "10"}, {"100", "2"}, {"101", "2"}}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("rows %v, want %v", got, want)
	}

	errs := []struct {
		name string
		mode Mode
		src  string
		want string
	}{
		{"simple mode", Simple, "\\startpipeline\nSELECT 1;\n\\endpipeline\n", "startpipeline: cannot use pipeline mode with the simple query protocol"},
		{"twice", Extended, "\\startpipeline\n\\startpipeline\n", "t.sql:2: startpipeline: already in pipeline mode"},
		{"end without start", Extended, "\\endpipeline\n", "t.sql:1: endpipeline: not in pipeline mode"},
		{"sync without start", Extended, "\\syncpipeline\n", "t.sql:1: syncpipeline: not in pipeline mode"},
		{"gset in pipeline", Extended, "\\startpipeline\nselect 1 \\gset f\n\\endpipeline\n", `t.sql:2: gset: \gset is not allowed in pipeline mode`},
		{"open at end", Prepared, "\\startpipeline\nSELECT 1;\n", "end of script reached with pipeline open"},
		{"sql error", Extended, "\\startpipeline\nSELECT 1;\nSELECT 1/0;\nSELECT 2;\n\\endpipeline\n", "t.sql:5: ERROR: division by zero (SQLSTATE 22012)"},
	}
	for _, tt := range errs {
		t.Run(tt.name, func(t *testing.T) {
			c, _ := testClient(t, tt.src, Options{Mode: tt.mode})
			res := c.Run(testCtx(t), conn, 0)
			if res.Err == nil || !strings.Contains(res.Err.Error(), tt.want) || !res.Failed || !res.Aborted {
				t.Fatalf("Run = %+v, want error %q", res, tt.want)
			}
			if res.ConnBroken || conn.TxStatus() != 'I' {
				t.Fatalf("connection not idle after the failure: broken=%v status=%c", res.ConnBroken, conn.TxStatus())
			}
			query(t, conn, "SELECT 1") // still usable
		})
	}
}

// setupFlaky creates flaky(n, code): it raises SQLSTATE code for its first
// n calls (counted by a sequence, which survives rollbacks).
func setupFlaky(t *testing.T, conn *pgconn.PgConn) {
	query(t, conn, `CREATE SEQUENCE calls;
CREATE TABLE log(r bigint, try bigint);
CREATE FUNCTION flaky(n int, code text) RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE c bigint := nextval('calls');
BEGIN
  IF c <= n THEN RAISE EXCEPTION 'forced failure %', c USING ERRCODE = code; END IF;
  RETURN c;
END $$`)
}

func TestRetry(t *testing.T) {
	conn := connect(t, srv.NewDatabase(t))
	setupFlaky(t, conn)
	src := `\set r random(1, 1000000000)
BEGIN;
SELECT flaky(:fails, :'code') AS c \gset
INSERT INTO log VALUES (:r, :c);
END;
`
	tests := []struct {
		name     string
		fails    int
		code     string
		maxTries int
		tries    int
		failed   bool
		sqlstate string
	}{
		{"no retry by default", 1, "40001", 0, 1, true, "40001"},
		{"serialization retried", 2, "40001", 3, 3, false, ""},
		{"deadlock retried", 1, "40P01", 2, 2, false, ""},
		{"out of tries", 3, "40001", 3, 3, true, "40001"},
		{"unlimited", 4, "40001", -1, 5, false, ""},
		{"other errors are not retried", 1, "23505", 5, 1, true, "23505"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			query(t, conn, "TRUNCATE log; SELECT setval('calls', 1, false)")
			src := strings.ReplaceAll(strings.ReplaceAll(src, ":fails", fmt.Sprint(tt.fails)), ":'code'", "'"+tt.code+"'")
			c, _ := testClient(t, src, Options{Mode: Prepared, MaxTries: tt.maxTries})
			first := *c.Rand()
			wantR := first.Rand(1, 1000000000)
			res := c.Run(testCtx(t), conn, 0)
			if res.Tries != tt.tries || res.Failed != tt.failed || res.SQLState != tt.sqlstate {
				t.Fatalf("Run = %+v, want tries %d failed %v sqlstate %q", res, tt.tries, tt.failed, tt.sqlstate)
			}
			if res.Retries() != tt.tries-1 {
				t.Errorf("Retries() = %d", res.Retries())
			}
			if tt.failed {
				var re *RunError
				if !errors.As(res.Err, &re) || re.Line != 3 || re.Command != 2 {
					t.Errorf("error %v, want a RunError at line 3, command 2", res.Err)
				}
				if res.Aborted != (tt.code != "40001" && tt.code != "40P01") {
					t.Errorf("Aborted = %v", res.Aborted)
				}
			}
			st := c.Stats(0)[2]
			wantFailures := int64(0)
			if tt.failed {
				wantFailures = 1
			}
			if st.Retries != int64(tt.tries-1) || st.Failures != wantFailures {
				t.Errorf("stats %+v, want %d retries, %d failures", st, tt.tries-1, wantFailures)
			}
			// every try drew the same :r (random state restored); only the
			// successful try's row is kept
			rows := query(t, conn, "SELECT r, try FROM log")
			if tt.failed {
				if len(rows) != 0 {
					t.Errorf("log %v after a failed transaction", rows)
				}
			} else if len(rows) != 1 || rows[0][0] != fmt.Sprint(wantR) || rows[0][1] != fmt.Sprint(tt.tries) {
				t.Errorf("log %v, want [[%d %d]]", rows, wantR, tt.tries)
			}
			if conn.TxStatus() != 'I' {
				t.Errorf("transaction status %c after Run", conn.TxStatus())
			}
		})
	}
}

// Two clients in SERIALIZABLE transactions update the same row; the loser
// gets a real serialization failure and is retried.
func TestRetrySerializableConflict(t *testing.T) {
	dsn := srv.NewDatabase(t)
	c1, c2 := connect(t, dsn), connect(t, dsn)
	query(t, c1, "CREATE TABLE acc(id int PRIMARY KEY, v int); INSERT INTO acc VALUES (1, 0)")
	src := `BEGIN ISOLATION LEVEL SERIALIZABLE;
SELECT v FROM acc WHERE id = 1;
\if :client_id = 0
  SELECT pg_advisory_lock(1);
  UPDATE acc SET v = v + 1 WHERE id = 1;
  END;
  SELECT pg_advisory_unlock(1);
\else
  SELECT pg_advisory_lock(1);
  SELECT pg_advisory_unlock(1);
  UPDATE acc SET v = v + 10 WHERE id = 1;
  END;
\endif
`
	lock := connect(t, dsn)
	query(t, lock, "SELECT pg_advisory_lock(1)") // hold both clients until both read
	a, _ := testClient(t, src, Options{ClientID: 0, MaxTries: 5, Mode: Extended})
	b, _ := testClient(t, src, Options{ClientID: 1, MaxTries: 5, Mode: Extended})
	done := make(chan Result, 2)
	ctx := testCtx(t)
	go func() { done <- a.Run(ctx, c1, 0) }()
	go func() { done <- b.Run(ctx, c2, 0) }()
	// wait until both clients wait for the lock, then let them go
	for i := 0; ; i++ {
		rows := query(t, lock, "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted")
		if rows[0][0] == "2" {
			break
		}
		if i > 1000 {
			t.Fatal("clients never waited for the lock")
		}
		time.Sleep(5 * time.Millisecond)
	}
	query(t, lock, "SELECT pg_advisory_unlock(1)")
	r1, r2 := <-done, <-done
	if r1.Err != nil || r2.Err != nil {
		t.Fatalf("results %+v %+v", r1, r2)
	}
	if r1.Tries+r2.Tries != 3 {
		t.Errorf("tries %d + %d, want one retry in all", r1.Tries, r2.Tries)
	}
	if got := query(t, c1, "SELECT v FROM acc")[0][0]; got != "11" {
		t.Errorf("v = %s, want 11", got)
	}
}

func TestRunErrors(t *testing.T) {
	conn := connect(t, srv.NewDatabase(t))
	tests := []struct {
		name string
		src  string
		mode Mode
		want string
	}{
		{"undefined variable", "SELECT 1;\n\\set i :nosuchvariable", Prepared, `t.sql:2: set: undefined variable "nosuchvariable"`},
		{"division by zero", "\\set i 1/0", Prepared, "t.sql:1: set: division by zero"},
		{"invalid variable name", "\\set . 1", Prepared, `t.sql:1: set: invalid variable name: "."`},
		{"malformed value", "\\set i :foo + 1", Prepared, `t.sql:1: set: malformed variable "foo" value: "bla"`},
		{"if error", "\\if :nosuch\n\\endif", Simple, `t.sql:1: if: undefined variable "nosuch"`},
		{"sleep undefined variable", "\\sleep :nosuchvariable", Prepared, `t.sql:1: sleep: undefined variable "nosuchvariable"`},
		{"sleep bad variable", "\\sleep :foo", Prepared, `t.sql:1: sleep: invalid sleep time "bla" for variable "foo"`},
		{"setshell not an int", "\\setshell i echo -n one", Prepared, `t.sql:1: echo: shell command must return an integer (not "one")`},
		{"setshell no such command", "\\setshell var no-such-command", Prepared, `t.sql:1: no-such-command: could not read result of shell command`},
		{"shell bad command", "\\shell no-such-command", Prepared, `t.sql:1: no-such-command: could not launch shell command`},
		{"shell undefined variable", "\\shell echo ::foo :nosuchvariable", Prepared, `t.sql:1: echo: undefined variable ":nosuchvariable"`},
		{"gset no row", "SELECT WHERE FALSE \\gset", Prepared, "t.sql:1: gset: expected one row, got 0"},
		{"gset two rows", "\nSELECT 5432 AS fail UNION SELECT 5433 ORDER BY 1 \\gset", Simple, "t.sql:2: gset: expected one row, got 2"},
		{"gset non SELECT", "DROP TABLE IF EXISTS no_such_table \\gset", Extended, "gset: expected one row, got 0"},
		{"gset bad default name", "SELECT 1 \\gset", Prepared, "error storing into variable ?column?"},
		{"gset bad name", `SELECT 1 AS "bad name!" \gset`, Simple, "error storing into variable bad name!"},
		{"aset empty then use", "\\; SELECT 5432 AS i8 WHERE FALSE \\; \\aset\n\\set i debug(:i8)", Simple, `t.sql:2: set: undefined variable "i8"`},
		{"sql syntax error", "-- SQL syntax error\n    SELECT 1 + ;", Prepared, `t.sql:2: ERROR: syntax error at or near ";" (SQLSTATE 42601)`},
		{"copy from stdin", "COPY pgbench_history FROM STDIN;", Simple, "t.sql:1: COPY is not supported in pgbench, aborting"},
		{"copy to stdout", "COPY (SELECT :client_id) TO STDOUT;", Prepared, "t.sql:1: COPY is not supported in pgbench, aborting"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, _ := testClient(t, tt.src, Options{Mode: tt.mode, Defines: map[string]string{"foo": "bla"}, ShellOut: &bytes.Buffer{}, ShellErr: &bytes.Buffer{}})
			res := c.Run(testCtx(t), conn, 0)
			var re *RunError
			if !errors.As(res.Err, &re) || !res.Failed || !res.Aborted {
				t.Fatalf("Run = %+v, want a failed, aborted transaction", res)
			}
			if !strings.Contains(res.Err.Error(), tt.want) {
				t.Errorf("error %q, want %q", res.Err, tt.want)
			}
			if res.ConnBroken || conn.TxStatus() != 'I' {
				t.Errorf("connection not idle: broken %v status %c", res.ConnBroken, conn.TxStatus())
			}
		})
	}
}

// A script that ends inside a transaction block: pgbench counts the
// transaction, then aborts the client (Incomplete, not Failed); the
// block is rolled back.
func TestIncompleteTransaction(t *testing.T) {
	conn := connect(t, srv.NewDatabase(t))
	for _, mode := range []Mode{Simple, Extended} {
		c, _ := testClient(t, "BEGIN;\nSELECT 1;", Options{Mode: mode})
		res := c.Run(testCtx(t), conn, 0)
		var re *RunError
		if !errors.As(res.Err, &re) || res.Failed || !res.Aborted || !res.Incomplete || !errors.Is(res.Err, ErrIncomplete) {
			t.Fatalf("%s: Run = %+v, want an incomplete, aborted transaction", mode, res)
		}
		if want := "t.sql:2: end of script reached without completing the last transaction"; res.Err.Error() != want {
			t.Errorf("%s: error %q, want %q", mode, res.Err, want)
		}
		if res.ConnBroken || conn.TxStatus() != 'I' {
			t.Errorf("%s: connection not idle: broken %v status %c", mode, res.ConnBroken, conn.TxStatus())
		}
	}
}

// A failed transaction is rolled back and the client goes on.
func TestFailedTransactionContinues(t *testing.T) {
	conn := connect(t, srv.NewDatabase(t))
	query(t, conn, "CREATE TABLE u(i int PRIMARY KEY)")
	src := "BEGIN;\nINSERT INTO u VALUES (:client_id);\nINSERT INTO u VALUES (1);\nEND;\n"
	c, _ := testClient(t, src, Options{Mode: Simple, ClientID: 1})
	res := c.Run(testCtx(t), conn, 0)
	if res.SQLState != "23505" || !res.Aborted || res.ConnBroken {
		t.Fatalf("Run = %+v, want a unique violation", res)
	}
	if n := query(t, conn, "SELECT count(*) FROM u")[0][0]; n != "0" {
		t.Fatalf("%s rows after the failed transaction", n)
	}
	c2, _ := testClient(t, "BEGIN;\nINSERT INTO u VALUES (:client_id);\nEND;\n", Options{Mode: Simple, ClientID: 2})
	runOK(t, c2, conn)
	if n := query(t, conn, "SELECT count(*) FROM u")[0][0]; n != "1" {
		t.Fatalf("%s rows, want 1", n)
	}
}

func TestPerCommandStatsAndReport(t *testing.T) {
	conn := connect(t, srv.NewDatabase(t))
	src := "\\set a random(1, 10)\nSELECT :a;\n\\if :a > 100\nSELECT 2;\n\\else\n\\sleep 1 ms\n\\endif\n"
	c, _ := testClient(t, src, Options{PerCommand: true, Mode: Prepared})
	const n = 5
	for i := 0; i < n; i++ {
		runOK(t, c, conn)
	}
	st := c.Stats(0)
	// pgbench records \else only when it runs after a true \if branch;
	// here the false \if skips to it; \endif then runs in an active branch.
	wantCount := []int64{n, n, n, 0, 0, n, n}
	for i, w := range wantCount {
		if st[i].Count != w {
			t.Errorf("command %d count %d, want %d", i, st[i].Count, w)
		}
	}
	if st[5].SumUS < n*1000 {
		t.Errorf("\\sleep 1 ms total %d µs, want at least %d", st[5].SumUS, n*1000)
	}
	var b bytes.Buffer
	if err := WriteCommandReport(&b, c.scripts[0].s, st, false, false); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(b.String(), "\n"), "\n")
	if lines[0] != "statement latencies in milliseconds and failures:" || len(lines) != 8 {
		t.Fatalf("report:\n%s", b.String())
	}
	if !strings.HasSuffix(lines[1], "           0  \\set a random(1, 10)") || len(lines[1]) != 3+11+2+10+2+len(`\set a random(1, 10)`) {
		t.Errorf("line %q", lines[1])
	}
	if lines[4] != "         0.000           0  SELECT 2;" {
		t.Errorf("line %q", lines[4])
	}
	b.Reset()
	st[1].Failures, st[1].Retries = 3, 4
	_ = WriteCommandReport(&b, c.scripts[0].s, st, true, true)
	lines = strings.Split(b.String(), "\n")
	if lines[0] != " - statement latencies in milliseconds, failures and retries:" || !strings.HasSuffix(lines[2], "           3           4  SELECT :a;") {
		t.Errorf("report:\n%s", b.String())
	}
}

func TestChooseScript(t *testing.T) {
	a, b := mustParse(t, "SELECT 1;"), mustParse(t, "SELECT 2;")
	a.Weight, b.Weight = 1, 3
	r := expr.NewPRNG(7)
	counts := [2]int{}
	for i := 0; i < 4000; i++ {
		counts[ChooseScript(r, []*Script{a, b})]++
	}
	if counts[0] < 800 || counts[0] > 1200 {
		t.Errorf("choices %v, want about 1000/3000", counts)
	}
	b.Weight = 0
	for i := 0; i < 100; i++ {
		if ChooseScript(r, []*Script{a, b}) != 0 {
			t.Fatal("chose a script of weight 0")
		}
	}
	a.Weight = 0
	if ChooseScript(r, []*Script{a, b}) != -1 {
		t.Error("zero total weight not reported")
	}
}

func TestContextCancelClosesQuery(t *testing.T) {
	conn := connect(t, srv.NewDatabase(t))
	c, _ := testClient(t, "SELECT pg_sleep(5);\n", Options{Mode: Prepared})
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	start := time.Now()
	res := c.Run(ctx, conn, 0)
	if !errors.Is(res.Err, context.DeadlineExceeded) || time.Since(start) > 20*time.Second {
		t.Fatalf("Run = %+v after %v", res, time.Since(start))
	}
	if !res.ConnBroken {
		t.Errorf("connection not reported broken")
	}
}

func TestTooManyParameters(t *testing.T) {
	s := mustParse(t, "\\set i 0\nSELECT LEAST("+strings.Repeat(":i, ", 255)+":i);\n")
	if _, err := NewClient([]*Script{s}, Options{Mode: Simple}); err != nil {
		t.Fatalf("simple mode: %v", err)
	}
	_, err := NewClient([]*Script{s}, Options{Mode: Prepared})
	var pe *ParseError
	if !errors.As(err, &pe) || pe.Line != 2 || !strings.Contains(pe.Msg, "statement has too many arguments (maximum is 255)") {
		t.Fatalf("error %v", err)
	}
}

// A client's scripts share its variables; prepared statement names are
// numbered across scripts.
func TestMultipleScripts(t *testing.T) {
	conn := connect(t, srv.NewDatabase(t))
	a := mustParse(t, "\\set x 5\nSELECT :x AS a \\gset\n")
	b := mustParse(t, "SELECT :x + 1 AS b \\gset\nSELECT 2;\n")
	c, err := NewClient([]*Script{a, b}, Options{Mode: Prepared, PerCommand: true})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for _, i := range []int{0, 1, 1} {
		if res := c.Run(testCtx(t), conn, i); res.Err != nil || res.Script != i {
			t.Fatalf("Run(%d) = %+v", i, res)
		}
	}
	wantVar(t, c, "a", "5")
	wantVar(t, c, "b", "6")
	if got := c.Stats(1)[0].Count; got != 2 {
		t.Errorf("script 1 command 0 ran %d times, want 2", got)
	}
	rows := query(t, conn, "SELECT name FROM pg_prepared_statements ORDER BY name")
	if fmt.Sprint(rows) != "[[P_0] [P_1] [P_2]]" {
		t.Errorf("prepared statements %v", rows)
	}
	if res := c.Run(testCtx(t), conn, 2); res.Err == nil {
		t.Error("script index out of range accepted")
	}
}

// A serialization failure inside a pipeline is retried like pgbench does
// (discard up to the sync point, roll back, start over).
func TestRetryInPipeline(t *testing.T) {
	conn := connect(t, srv.NewDatabase(t))
	setupFlaky(t, conn)
	src := "\\startpipeline\nBEGIN;\nINSERT INTO log VALUES (1, 0);\nSELECT flaky(2, '40001');\nEND;\n\\endpipeline\n"
	for _, mode := range []Mode{Extended, Prepared} {
		query(t, conn, "TRUNCATE log; SELECT setval('calls', 1, false)")
		c, _ := testClient(t, src, Options{Mode: mode, MaxTries: 5})
		res := runOK(t, c, conn)
		if res.Tries != 3 || c.Stats(0)[5].Retries != 2 {
			t.Errorf("%v: tries %d, \\endpipeline retries %d; want 3 and 2", mode, res.Tries, c.Stats(0)[5].Retries)
		}
		if n := query(t, conn, "SELECT count(*) FROM log")[0][0]; n != "1" {
			t.Errorf("%v: %s log rows, want 1", mode, n)
		}
	}
}

func TestVariableValueErrors(t *testing.T) {
	conn := connect(t, srv.NewDatabase(t))
	for _, tt := range []struct{ value, want string }{
		{"99999999999999999999", `value "99999999999999999999" is out of range for type bigint`},
		{"trueXXX", `malformed variable "v" value: "trueXXX"`},
		{"", `variable "v" has an empty value`},
	} {
		c, _ := testClient(t, "\\set w :v + 1\n", Options{Defines: map[string]string{"v": tt.value}})
		res := c.Run(testCtx(t), conn, 0)
		if res.Err == nil || !strings.HasSuffix(res.Err.Error(), tt.want) {
			t.Errorf("-D v=%q: error %v, want %q", tt.value, res.Err, tt.want)
		}
	}
}
