package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/erplab/erplab/internal/results"
)

// A pgbench script run with pgbench's own flags: -c/-t counts exactly,
// -D and :client_id reach the script, the results say what ran.
func TestRunScriptFlags(t *testing.T) {
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
	code, text := exitCode(t, erplab(t, dir, "run", "--dsn", dsn, "-f", file, "-c", "3", "-t", "4", "-D", "base=7",
		"-M", "prepared", "--target", "ins=20ms", "--observe=false", "--out", out))
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
	if doc.Workload != "pgbench" || doc.Operations[0].Name != "ins" || doc.Operations[0].TargetMs != 20 || doc.Operations[0].Count != 12 {
		t.Fatalf("results: workload %q op %+v", doc.Workload, doc.Operations[0])
	}
	for _, want := range []string{"query mode: prepared", "number of transactions actually processed: 12/12", "number of clients: 3"} {
		if !strings.Contains(text, want) {
			t.Errorf("output lacks %q:\n%s", want, text)
		}
	}
}

// Exit codes follow pgbench in script runs: 1 for a script or option
// error (with file:line:column), 2 when transactions failed during the
// run; and pgbench agrees on the same inputs where it is installed.
func TestRunScriptExitCodes(t *testing.T) {
	dsn := srv.NewDatabase(t)
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.sql")
	if err := os.WriteFile(bad, []byte("select 1;\n\\set x 1 +\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	failing := filepath.Join(dir, "fail.sql")
	if err := os.WriteFile(failing, []byte("select 1/0;\n"), 0o644); err != nil {
		t.Fatal(err)
	}
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
		{"run error", []string{"-f", failing, "-t", "2"}, 2, "22012"},
	}
	pgbench, _ := exec.LookPath("pgbench")
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			args := append([]string{"run", "--dsn", dsn, "-n", "--observe=false", "--progress", "0", "--out", filepath.Join(t.TempDir(), "r.json")}, c.args...)
			code, text := exitCode(t, erplab(t, dir, args...))
			if code != c.code || !strings.Contains(text, c.msg) {
				t.Fatalf("exit %d, want %d with %q:\n%s", code, c.code, c.msg, text)
			}
			if c.code == 1 && strings.Count(strings.TrimSpace(text), "\n") > 0 {
				t.Errorf("script/option error is not one line:\n%s", text)
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

// pgbench options outside a script run are refused; the open model's are
// not.
func TestRunPgbenchFlagsNeedScripts(t *testing.T) {
	code, text := exitCode(t, erplab(t, t.TempDir(), "run", "--workload", "smoke", "-c", "4"))
	if code != exitUsage || !strings.Contains(text, "--client is a pgbench option") {
		t.Fatalf("exit %d:\n%s", code, text)
	}
	code, text = exitCode(t, erplab(t, t.TempDir(), "run", "--workload", "erp", "-S", "-t", "1"))
	if code != 1 || !strings.Contains(text, "--workload erp does not run pgbench scripts") {
		t.Fatalf("exit %d:\n%s", code, text)
	}
	code, text = exitCode(t, erplab(t, t.TempDir(), "run", "--workload", "smoke", "--rate-stage", "1m:5", "--duration", "10s"))
	if code != exitUsage || !strings.Contains(text, "rate profile lasts 1m0s") {
		t.Fatalf("exit %d:\n%s", code, text)
	}
}

// erplab vs-pgbench end to end on a --dsn database: both generators run,
// the table has both tps figures and the ratios.
func TestVsPgbenchCommand(t *testing.T) {
	if _, err := exec.LookPath("pgbench"); err != nil {
		t.Skip("pgbench not installed")
	}
	dsn := srv.NewDatabase(t)
	code, text := exitCode(t, erplab(t, t.TempDir(), "vs-pgbench", "--dsn", dsn, "--force", "-s", "1", "--duration", "1s",
		"--clients", "1,2", "--builtins", "select-only", "--repeat", "1"))
	if code != 0 {
		t.Fatalf("exit %d\n%s", code, text)
	}
	rows := 0
	for _, line := range strings.Split(text, "\n") {
		f := strings.Fields(line)
		if len(f) >= 10 && f[0] == "select-only" {
			rows++
			if f[3] == "0" || f[4] == "0" {
				t.Errorf("a generator did nothing: %q", line)
			}
		}
	}
	if rows != 2 || !strings.Contains(text, "tps ratio = erplab / pgbench") {
		t.Fatalf("want 2 rows of select-only and the ratio legend:\n%s", text)
	}
	// the pgbench measured is the binary itself, not Debian's pg_wrapper
	// (a Perl script whose start-up would count as pgbench's CPU)
	m := regexp.MustCompile(`, pgbench (\S+)\n`).FindStringSubmatch(text)
	if m == nil {
		t.Fatalf("no pgbench path in the header:\n%s", text)
	}
	head, err := os.ReadFile(m[1])
	if err != nil {
		t.Fatal(err)
	}
	if bytes.HasPrefix(head, []byte("#!")) {
		t.Errorf("vs-pgbench measured %s, a script, not pgbench itself", m[1])
	}
}

// Scripts keep their command-line order (pgbench numbers them so), and a
// bad flag in a script run exits 1 like pgbench.
func TestRunScriptOrderAndFlagErrors(t *testing.T) {
	dsn := srv.NewDatabase(t)
	dir := t.TempDir()
	file := filepath.Join(dir, "mine.sql")
	if err := os.WriteFile(file, []byte("select 1;\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "r.json")
	code, text := exitCode(t, erplab(t, dir, "run", "--dsn", dsn, "--force", "-f", file, "-S", "-b", "simple@2", "-t", "2", "--observe=false", "--out", out))
	if code != 0 {
		t.Fatalf("exit %d\n%s", code, text)
	}
	doc, err := results.Read(out)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, op := range doc.Operations {
		names = append(names, op.Name)
	}
	if strings.Join(names, ",") != "mine,select-only,simple-update" {
		t.Fatalf("operations %v, want command-line order mine,select-only,simple-update", names)
	}
	if !strings.Contains(text, "SQL script 1: "+file) {
		t.Fatalf("script 1 is not %s:\n%s", file, text)
	}
	for _, args := range [][]string{{"run", "-S", "--bogus"}, {"run", "-nS", "-c", "abc"}, {"run", "-b", "tpcb", "-L", "x"}} {
		if code, text := exitCode(t, erplab(t, dir, args...)); code != 1 {
			t.Errorf("%v: exit %d, want 1 (pgbench's code for option errors)\n%s", args, code, text)
		}
	}
	if code, _ := exitCode(t, erplab(t, dir, "run", "--workload", "smoke", "--bogus")); code != exitUsage {
		t.Errorf("a bad flag outside script runs: exit %d, want %d", code, exitUsage)
	}
}
