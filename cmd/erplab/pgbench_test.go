package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/erplab/erplab/internal/results"
)

// `erplab pgbench` through the binary: pgbench's own messages and exit
// statuses, nothing of erplab's error line; a run on the given server
// prints pgbench's report, then erplab's lines, and writes the results.
func TestPgbenchCommand(t *testing.T) {
	dir := t.TempDir()
	code, text := exitCode(t, erplab(t, dir, "pgbench", "-c", "three"))
	if code != 1 || strings.TrimSpace(text) != `pgbench: error: invalid value "three" for option -c/--clients` {
		t.Fatalf("exit %d:\n%s", code, text)
	}
	code, text = exitCode(t, erplab(t, dir, "pgbench", "--help"))
	if code != 0 || !strings.Contains(text, "Initialization options:") {
		t.Fatalf("--help: exit %d:\n%s", code, text)
	}
	dsn := srv.NewDatabase(t)
	out := filepath.Join(dir, "r.json")
	if code, text := exitCode(t, pgbenchCmd(t, dir, dsn, nil, "-i", "-q")); code != 0 || !strings.Contains(text, "done in ") {
		t.Fatalf("-i: exit %d:\n%s", code, text)
	}
	code, text = exitCode(t, pgbenchCmd(t, dir, dsn, []string{"ERPLAB_PGBENCH_OUT=" + out}, "-c2", "-t", "3", "-S"))
	if code != 0 || !strings.Contains(text, "number of transactions actually processed: 6/6") ||
		!strings.Contains(text, "erplab: results: "+out) || strings.Contains(text, "erplab: error") {
		t.Fatalf("run: exit %d:\n%s", code, text)
	}
	if _, err := os.Stat(out); err != nil {
		t.Fatalf("results: %v", err)
	}
}

func passfileOf(dsn string) string {
	for _, f := range strings.Fields(dsn) {
		if v, ok := strings.CutPrefix(f, "passfile="); ok {
			return v
		}
	}
	return ""
}

// A pgbench script run with pgbench's own flags (moved from erplab run):
// -c/-t count exactly, -D and :client_id reach the script, -M sets the
// query mode, the results say what ran.
func TestPgbenchScriptFlags(t *testing.T) {
	dsn := srv.NewDatabase(t)
	dir := t.TempDir()
	pool := srv.Pool(t, dsn)
	if _, err := pool.Exec(t.Context(), "create table seen (client int, v int)"); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(dir, "ins.sql")
	if err := os.WriteFile(file, []byte("\\set v :base * 10 + :client_id\ninsert into seen values (:client_id, :v);\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "r.json")
	code, text := exitCode(t, pgbenchCmd(t, dir, dsn, []string{"ERPLAB_PGBENCH_OUT=" + out}, "-n", "-f", file, "-c", "3", "-t", "4", "-D", "base=7", "-M", "prepared"))
	if code != 0 {
		t.Fatalf("exit %d\n%s", code, text)
	}
	var n, sum int
	if err := pool.QueryRow(t.Context(), "select count(*), sum(v) from seen").Scan(&n, &sum); err != nil {
		t.Fatal(err)
	}
	// clients 0,1,2 x 4 rows each, v = 70 + client_id
	if n != 12 || sum != 4*(70+71+72) {
		t.Fatalf("seen has %d rows summing to %d, want 12 rows summing to %d\n%s", n, sum, 4*(70+71+72), text)
	}
	doc, err := results.Read(out)
	if err != nil {
		t.Fatal(err)
	}
	if doc.Workload != "pgbench" || doc.Operations[0].Name != "ins" || doc.Operations[0].Count != 12 {
		t.Fatalf("results: workload %q op %+v", doc.Workload, doc.Operations[0])
	}
	for _, want := range []string{"query mode: prepared", "number of transactions actually processed: 12/12", "number of clients: 3"} {
		if !strings.Contains(text, want) {
			t.Errorf("output lacks %q:\n%s", want, text)
		}
	}
}

// erplab pgbench's exit codes are pgbench's (moved from erplab run): 1
// for a script or option error (with file:line), 2 when transactions
// failed during the run; and pgbench agrees on the same inputs where it
// is installed.
func TestPgbenchScriptExitCodes(t *testing.T) {
	dsn := srv.NewDatabase(t)
	dir := t.TempDir()
	bad, failing := errorScripts(t, dir)
	cases := []struct {
		name string
		args []string
		code int
		msg  string
	}{
		{"syntax error", []string{"-f", bad, "-t", "1"}, 1, "bad.sql:2:"},
		{"unknown builtin", []string{"-b", "nope", "-t", "1"}, 1, "nope"},
		{"bad mode", []string{"-S", "-M", "fast", "-t", "1"}, 1, "fast"},
		{"-t and -T", []string{"-S", "-t", "1", "-T", "1"}, 1, "either"},
		{"run error", []string{"-f", failing, "-t", "2"}, 2, "division by zero"}, // pgbench's words for 22012
	}
	pgbench, _ := exec.LookPath("pgbench")
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			env := []string{"ERPLAB_PGBENCH_OUT=" + filepath.Join(t.TempDir(), "r.json")}
			code, text := exitCode(t, pgbenchCmd(t, dir, dsn, env, append([]string{"-n"}, c.args...)...))
			if code != c.code || !strings.Contains(text, c.msg) {
				t.Fatalf("exit %d, want %d with %q:\n%s", code, c.code, c.msg, text)
			}
			if pgbench == "" {
				t.Log("pgbench not installed: exit code not compared with it")
				return
			}
			pargs := append([]string{"-n"}, c.args...)
			pcode, ptext := exitCode(t, exec.Command(pgbench, append(pargs, dsn)...))
			if pcode != c.code {
				t.Errorf("pgbench exits %d, erplab %d:\n%s", pcode, code, ptext)
			}
		})
	}
}

// Scripts keep their command-line order (pgbench numbers them so), and a
// bad flag exits 1 like pgbench (moved from erplab run).
func TestPgbenchScriptOrderAndFlagErrors(t *testing.T) {
	dsn := srv.NewDatabase(t)
	dir := t.TempDir()
	file := writeScript(t, dir, "mine.sql", "select 1;\n")
	if code, text := exitCode(t, pgbenchCmd(t, dir, dsn, nil, "-i", "-q")); code != 0 {
		t.Fatalf("-i: exit %d:\n%s", code, text)
	}
	out := filepath.Join(dir, "r.json")
	code, text := exitCode(t, pgbenchCmd(t, dir, dsn, []string{"ERPLAB_PGBENCH_OUT=" + out}, "-f", file, "-S", "-b", "simple@2", "-t", "2"))
	if code != 0 {
		t.Fatalf("exit %d\n%s", code, text)
	}
	doc, err := results.Read(out)
	if err != nil {
		t.Fatal(err)
	}
	if names := opNames(doc); names != "mine,select-only,simple-update" {
		t.Fatalf("operations %s, want command-line order mine,select-only,simple-update", names)
	}
	if !strings.Contains(text, "SQL script 1: "+file) {
		t.Fatalf("script 1 is not %s:\n%s", file, text)
	}
	for _, args := range [][]string{{"pgbench", "-S", "--bogus"}, {"pgbench", "-nS", "-c", "abc"}, {"pgbench", "-b", "tpcb", "-L", "x"}} {
		if code, text := exitCode(t, erplab(t, dir, args...)); code != 1 {
			t.Errorf("%v: exit %d, want 1 (pgbench's code for option errors)\n%s", args, code, text)
		}
	}
}
