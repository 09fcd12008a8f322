package script

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/erplab/erplab/internal/pgbench/expr"
)

// pgbenchPath finds the pgbench binary next to the server binaries or on
// PATH; the test is skipped without it.
func pgbenchPath(t testing.TB) string {
	t.Helper()
	if p := filepath.Join(srv.BinDir(t), "pgbench"); fileExists(p) {
		return p
	}
	p, err := exec.LookPath("pgbench")
	if err != nil {
		t.Skip("pgbench is not installed (not next to the server binaries nor on PATH)")
	}
	return p
}

func fileExists(p string) bool {
	st, err := os.Stat(p)
	return err == nil && !st.IsDir()
}

// runPgbench runs pgbench with args against dsn and returns its stdout,
// stderr and exit status.
func runPgbench(t testing.TB, dsn string, args ...string) (string, string, int) {
	t.Helper()
	cmd := exec.Command(pgbenchPath(t), append(args, dsn)...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	if err != nil {
		var ee *exec.ExitError
		if !errors.As(err, &ee) {
			t.Fatalf("pgbench: %v", err)
		}
		code = ee.ExitCode()
	}
	return out.String(), errb.String(), code
}

func writeScript(t testing.TB, text string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "script.sql")
	if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// runOurs runs script text with n clients, tx transactions each, seeded
// like pgbench --random-seed=seed -c n -j 1, and returns the clients'
// debug() lines.
func runOurs(t *testing.T, dsn, name, text string, mode Mode, n, tx int, seed uint64, defines map[string]string) []string {
	t.Helper()
	s, err := Parse(name, text)
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	plan := expr.NewSeeds(seed).Plan(n, 1, true)
	var lines []string
	for i := 0; i < n; i++ {
		var dbg bytes.Buffer
		c, err := NewClient([]*Script{s}, Options{Mode: mode, ClientID: i, Rand: plan.Clients[i],
			RandomSeed: plan.RandomSeed, DefaultSeed: plan.DefaultSeed, Defines: defines, Debug: &dbg})
		if err != nil {
			t.Fatalf("NewClient: %v", err)
		}
		conn := connect(t, dsn)
		for k := 0; k < tx; k++ {
			if res := c.Run(testCtx(t), conn, 0); res.Err != nil {
				t.Fatalf("client %d transaction %d: %v", i, k, res.Err)
			}
		}
		c.Close()
		lines = append(lines, debugLines(dbg.String())...)
	}
	sort.Strings(lines)
	return lines
}

func debugLines(s string) []string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.HasPrefix(l, "debug(") {
			out = append(out, l)
		}
	}
	sort.Strings(out)
	return out
}

func dump(t *testing.T, dsn, sql string) string {
	t.Helper()
	return fmt.Sprint(query(t, connect(t, dsn), sql))
}

// The same script with the same --random-seed gives the same database
// contents and debug() output with pgbench and with Client, in each mode.
func TestConformanceValues(t *testing.T) {
	pgbenchPath(t)
	const table = "(client int, n int, ur int, er int, gr int, zr int, h bigint, p int, d float8, x int, parity int, q text, sh int)"
	text := `-- computed values go into a table
\set n :n + 1
\set ur random(1, 1000)
\set er random_exponential(1, 1000, 2.5)
\set gr random_gaussian(1, 1000, 3.0)
\set zr random_zipfian(1, 1000, 1.5)
\set h hash(:ur, :default_seed)
\set p permute(:ur, 1000)
\set d :ur / 7.0
\if :ur % 3 = 0
  \set parity 0
\elif :ur % 3 = 1
  \set parity 1
\else
  \set parity 2
\endif
SELECT :ur * 2 AS dbl, 'q' || :client_id AS q \gset
\set x debug(:dbl + :gr)
\setshell sh echo :zr
INSERT INTO vals_MODE VALUES (:client_id, :n, :ur, :er, :gr, :zr, :h, :p, :d,
  :x, :parity, 'q' || :client_id, :sh);
`
	const seed = 5432
	theirs, ours := srv.NewDatabase(t), srv.NewDatabase(t)
	for _, mode := range allModes {
		t.Run(mode.String(), func(t *testing.T) {
			query(t, connect(t, theirs), "CREATE TABLE vals_"+mode.String()+table)
			query(t, connect(t, ours), "CREATE TABLE vals_"+mode.String()+table)
			text := strings.ReplaceAll(text, "MODE", mode.String())
			path := writeScript(t, text)
			_, stderr, code := runPgbench(t, theirs, "-n", "-t", "15", "-c", "2", "-j", "1", "-M", mode.String(),
				fmt.Sprintf("--random-seed=%d", seed), "-D", "n=0", "-f", path)
			if code != 0 {
				t.Fatalf("pgbench exit %d:\n%s", code, stderr)
			}
			dbg := runOurs(t, ours, path, text, mode, 2, 15, seed, map[string]string{"n": "0"})
			q := "SELECT * FROM vals_" + mode.String() + " ORDER BY client, n"
			if a, b := dump(t, theirs, q), dump(t, ours, q); a != b || len(a) < 100 {
				t.Errorf("table contents differ\npgbench: %s\n    ours: %s", a, b)
			}
			if a, b := strings.Join(debugLines(stderr), "\n"), strings.Join(dbg, "\n"); a != b || len(dbg) != 30 {
				t.Errorf("debug() output differs\npgbench:\n%s\nours:\n%s", a, b)
			}
		})
	}
}

// pgbench substitutes :name also inside quotes and comments in the simple
// mode, and "\;" joins queries; the results must be the same.
func TestConformanceSimpleSubstitution(t *testing.T) {
	pgbenchPath(t)
	const table = "CREATE TABLE s(a text, b text, c int)"
	text := `\set v random(1, 99)
SELECT 'v=:v' AS a -- comment with :v
\; SELECT ':v' AS b, :v::int + 0 AS c \aset
INSERT INTO s VALUES (:'a', 'b:b', :c);
`
	// :'a' is no pgbench variable reference: quote the value in SQL instead
	text = strings.Replace(text, ":'a'", "':a'", 1)
	theirs, ours := srv.NewDatabase(t), srv.NewDatabase(t)
	query(t, connect(t, theirs), table)
	query(t, connect(t, ours), table)
	path := writeScript(t, text)
	if _, stderr, code := runPgbench(t, theirs, "-n", "-t", "5", "--random-seed=7", "-f", path); code != 0 {
		t.Fatalf("pgbench exit %d:\n%s", code, stderr)
	}
	runOurs(t, ours, path, text, Simple, 1, 5, 7, nil)
	const q = "SELECT * FROM s ORDER BY 1, 2, 3"
	if a, b := dump(t, theirs, q), dump(t, ours, q); a != b || !strings.Contains(a, "v=") {
		t.Errorf("table contents differ\npgbench: %s\n    ours: %s", a, b)
	}
}

// The builtin TPC-B-like script on pgbench -i -s 1 tables gives the same
// balances and history as pgbench with the same seed.
func TestConformanceBuiltin(t *testing.T) {
	pgbenchPath(t)
	theirs, ours := srv.NewDatabase(t), srv.NewDatabase(t)
	for _, dsn := range []string{theirs, ours} {
		if _, stderr, code := runPgbench(t, dsn, "-i", "-s", "1", "-q"); code != 0 {
			t.Fatalf("pgbench -i: exit %d\n%s", code, stderr)
		}
	}
	if _, stderr, code := runPgbench(t, theirs, "-n", "-t", "40", "-c", "2", "-M", "prepared", "--random-seed=99", "-b", "tpcb-like"); code != 0 {
		t.Fatalf("pgbench exit %d:\n%s", code, stderr)
	}
	tpcb, err := Builtin("tpcb")
	if err != nil {
		t.Fatal(err)
	}
	runOurs(t, ours, tpcb.Name, mustBuiltinText(t, "tpcb-like"), Prepared, 2, 40, 99, nil)
	for _, q := range []string{
		"SELECT tid, bid, aid, delta FROM pgbench_history ORDER BY 1, 2, 3, 4",
		"SELECT aid, abalance FROM pgbench_accounts WHERE abalance <> 0 ORDER BY aid",
		"SELECT tid, tbalance FROM pgbench_tellers ORDER BY tid",
		"SELECT bid, bbalance FROM pgbench_branches ORDER BY bid",
	} {
		a, b := dump(t, theirs, q), dump(t, ours, q)
		if a != b || len(a) < 8 {
			t.Errorf("%s differs\npgbench: %.300s\n    ours: %.300s", q, a, b)
		}
	}
}

func mustBuiltinText(t *testing.T, name string) string {
	text, _, err := BuiltinText(name)
	if err != nil {
		t.Fatal(err)
	}
	return text
}

// Scripts pgbench rejects (exit status 1) fail Parse or NewClient; scripts
// whose run pgbench aborts (exit status 2) give Aborted results.
func TestConformanceExitStatus(t *testing.T) {
	pgbenchPath(t)
	dsn := srv.NewDatabase(t)
	defines := map[string]string{"foo": "bla", "one": "1", "zero": "0.0", "badtrue": "trueXXX",
		"maxint": "9223372036854775807", "minint": "-9223372036854775808"}
	var dargs []string
	for k, v := range defines {
		dargs = append(dargs, "-D", k+"="+v)
	}
	scripts := []string{
		"SELECT 1;\n",
		"\\set i 1 +\n",
		"\\set i noSuchFunction()\n",
		"\\set . 1\n",
		"\\set i 1/0\n",
		"\\set i :nosuchvariable\n",
		"\\set i ;\n",
		"\\set i random(5,3)\n",
		"\\set i random(:minint, :maxint)\n",
		"\\set i :foo + 1\n",
		"\\set b :badtrue or true\n",
		"\\set i (1<<62) + (1<<62)\n",
		"\\set i :minint / -1\n",
		"\\sleep :nosuchvariable\n",
		"\\sleep 1 week\n",
		"\\sleep :one ms\n",
		"\\shell no-such-command\n",
		"\\shell echo ::foo :nosuchvariable\n",
		"\\setshell i echo -n one\n",
		"\\setshell var\n",
		"\\nosuchcommand\n",
		"SELECT WHERE FALSE \\gset\n",
		"\\gset\n",
		"SELECT 1 \\gset a b\n",
		"SELECT 1 \\gset\n",
		"SELECT 1 AS i \\gset\n\\set j :i + 1\n",
		"    SELECT 1 + ;\n",
		"\\if :one\nSELECT 1;\n\\elif :nosuch\n\\endif\n",
		"\\if 0\n\\elif :nosuch\n\\endif\n",
		"\\if 1\n\\else\n\\else\n\\endif\n",
		"\\startpipeline\nSELECT 1;\n\\endpipeline\n",
		"\\startpipeline\nSELECT 1;\n",
		"BEGIN;\nSELECT 1;\n",
		"\\set i 0\nSELECT LEAST(" + strings.Repeat(":i, ", 255) + ":i);\n",
	}
	conn := connect(t, dsn)
	for i, text := range scripts {
		path := writeScript(t, text)
		_, stderr, theirs := runPgbench(t, dsn, append(append([]string{"-n", "-t", "1", "-M", "prepared"}, dargs...), "-f", path)...)
		ours := 0
		s, err := Parse(path, text)
		var c *Client
		if err == nil {
			c, err = NewClient([]*Script{s}, Options{Mode: Prepared, Defines: defines, ShellOut: &bytes.Buffer{}, ShellErr: &bytes.Buffer{}})
		}
		if err != nil {
			ours = 1
		} else {
			res := c.Run(testCtx(t), conn, 0)
			c.Close()
			if res.Aborted {
				ours = 2
			} else if res.Failed {
				ours = 3
			}
			if res.ConnBroken || conn.TxStatus() != 'I' {
				t.Fatalf("script %d: connection left unusable", i)
			}
		}
		if ours != theirs {
			t.Errorf("script %d %q: pgbench exit %d, ours %d (parse/run error %v)\npgbench stderr: %s", i, text, theirs, ours, err, stderr)
		}
	}
}
