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

// A pgbench script run with erplab's flags: --users clients, each with
// its own connection; :client_id reaches the script; --protocol and
// --target are the script workload's; the results say what ran.
func TestRunScriptFlags(t *testing.T) {
	dsn := srv.NewDatabase(t)
	dir := t.TempDir()
	pool := srv.Pool(t, dsn)
	if _, err := pool.Exec(t.Context(), "create table seen (client int, v int)"); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(dir, "ins.sql")
	if err := os.WriteFile(file, []byte("\\set base 7\n\\set v :base * 10 + :client_id\ninsert into seen values (:client_id, :v);\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "r.json")
	code, text := exitCode(t, erplab(t, dir, "run", "--dsn", dsn, "-f", file, "--users", "3", "--duration", "2s",
		"--protocol", "prepared", "--target", "ins=20ms", "--observe=false", "--progress", "0", "--out", out))
	if code != 0 {
		t.Fatalf("exit %d\n%s", code, text)
	}
	var n, clients, bad int
	if err := pool.QueryRow(t.Context(), "select count(*), count(distinct client), count(*) filter (where v <> 70 + client or client not between 0 and 2) from seen").Scan(&n, &clients, &bad); err != nil {
		t.Fatal(err)
	}
	// clients 0,1,2, v = 70 + client_id
	if n == 0 || clients != 3 || bad != 0 {
		t.Fatalf("seen has %d rows from %d clients, %d of them not 70 + client_id\n%s", n, clients, bad, text)
	}
	doc, err := results.Read(out)
	if err != nil {
		t.Fatal(err)
	}
	if doc.Workload != "pgbench" || doc.Operations[0].Name != "ins" || doc.Operations[0].TargetMs != 20 || doc.Operations[0].Count != int64(n) {
		t.Fatalf("results: workload %q op %+v, %d rows", doc.Workload, doc.Operations[0], n)
	}
	for _, want := range []string{"query mode: prepared", "number of clients: 3"} {
		if !strings.Contains(text, want) {
			t.Errorf("output lacks %q:\n%s", want, text)
		}
	}
}

// A script run exits with erplab run's codes: 2 for a script or option
// error (one line, with file:line:column), 1 when the clients stopped on
// errors during the run (erplab pgbench keeps pgbench's: TestPgbenchScriptExitCodes).
func TestRunScriptExitCodes(t *testing.T) {
	dsn := srv.NewDatabase(t)
	dir := t.TempDir()
	bad, failing := errorScripts(t, dir)
	cases := []struct {
		name string
		args []string
		code int
		msg  string
	}{
		{"syntax error", []string{"-f", bad}, exitUsage, "bad.sql:2:"},
		{"unknown builtin", []string{"-b", "nope"}, exitUsage, "nope"},
		{"bad protocol", []string{"-b", "select-only", "--protocol", "fast"}, exitUsage, "fast"},
		{"bad flag", []string{"-f", bad, "--bogus"}, exitUsage, "--bogus"},
		{"pgbench's flag", []string{"-b", "select-only", "-c", "2"}, exitUsage, "erplab run --help"},
		{"run error", []string{"-f", failing, "--users", "2"}, exitError, "22012"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			args := append([]string{"run", "--dsn", dsn, "--duration", "2s", "--observe=false", "--progress", "0", "--out", filepath.Join(t.TempDir(), "r.json")}, c.args...)
			code, text := exitCode(t, erplab(t, dir, args...))
			if code != c.code || !strings.Contains(text, c.msg) {
				t.Fatalf("exit %d, want %d with %q:\n%s", code, c.code, c.msg, text)
			}
			if c.code == exitUsage && strings.Count(strings.TrimSpace(text), "\n") > 0 {
				t.Errorf("script/option error is not one line:\n%s", text)
			}
			if c.code == exitError && (!strings.Contains(text, "\nrun aborted: 2 of 2 clients aborted after ") || strings.Contains(text, "run completed")) {
				t.Errorf("a run whose clients stopped on errors does not say it was aborted:\n%s", text)
			}
		})
	}
}

// --target needs scripts, --protocol is the pgbench workload's, -f/-b run
// pgbench only; the open model's flags apply to every workload.
func TestRunScriptFlagsNeedScripts(t *testing.T) {
	code, text := exitCode(t, erplab(t, t.TempDir(), "run", "--workload", "smoke", "--target", "x=5ms"))
	if code != exitUsage || !strings.Contains(text, "--target sets a pgbench script's APDEX target") {
		t.Fatalf("exit %d:\n%s", code, text)
	}
	code, text = exitCode(t, erplab(t, t.TempDir(), "run", "--workload", "smoke", "--protocol", "prepared"))
	if code != exitUsage || !strings.Contains(text, "--protocol applies to --workload pgbench only") {
		t.Fatalf("exit %d:\n%s", code, text)
	}
	code, text = exitCode(t, erplab(t, t.TempDir(), "run", "--workload", "erp", "-b", "select-only"))
	if code != exitUsage || !strings.Contains(text, "--workload erp does not run pgbench scripts") {
		t.Fatalf("exit %d:\n%s", code, text)
	}
	code, text = exitCode(t, erplab(t, t.TempDir(), "run", "--workload", "smoke", "--rate-stage", "1m:5", "--duration", "10s"))
	if code != exitUsage || !strings.Contains(text, "rate profile lasts 1m0s") {
		t.Fatalf("exit %d:\n%s", code, text)
	}
}

// erplab vs-pgbench end to end on a --dsn database: both generators run
// each cell (one for a fixed number of transactions, one for a time), and
// each row has both CPU figures per transaction and peak resident sizes.
func TestVsPgbenchCommand(t *testing.T) {
	if _, err := exec.LookPath("pgbench"); err != nil {
		t.Skip("pgbench not installed")
	}
	dsn := srv.NewDatabase(t)
	code, text := exitCode(t, erplab(t, t.TempDir(), "vs-pgbench", "--dsn", dsn, "--force", "-s", "1",
		"--cell", "-b select-only -c 2 -j 1 -t 200", "--cell", "-b select-only -M simple -T 1", "--repeat", "1"))
	if code != 0 {
		t.Fatalf("exit %d\n%s", code, text)
	}
	cpu := regexp.MustCompile(`([0-9.]+) \[[0-9.]+-[0-9.]+\] µs`)
	rss := regexp.MustCompile(`([0-9.]+) \(([0-9.]+)\) MB`)
	var rows []string
	for _, line := range strings.Split(text, "\n") {
		if !strings.HasPrefix(strings.TrimSpace(line), "select-only -M") {
			continue
		}
		rows = append(rows, strings.Fields(line)[2])
		c, r := cpu.FindAllStringSubmatch(line, -1), rss.FindAllStringSubmatch(line, -1)
		if len(c) != 2 || len(r) != 2 || c[0][1] == "0.0" || c[1][1] == "0.0" || r[0][1] == "0.0" || r[1][1] == "0.0" || r[0][2] == "0.0" || r[1][2] == "0.0" {
			t.Errorf("a generator's CPU or memory is missing: %q", line)
		}
	}
	if strings.Join(rows, ",") != "prepared,simple" || !strings.Contains(text, "ratios erplab / pgbench") {
		t.Fatalf("want the two cells' rows in order and the legend:\n%s", text)
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
// bad flag of a script run is a usage error like any run's.
func TestRunScriptOrderAndFlagErrors(t *testing.T) {
	dsn := srv.NewDatabase(t)
	dir := t.TempDir()
	file := writeScript(t, dir, "mine.sql", "select 1;\n")
	out := filepath.Join(dir, "r.json")
	code, text := exitCode(t, erplab(t, dir, "run", "--dsn", dsn, "--force", "-f", file, "-b", "select-only", "-b", "simple@2",
		"--users", "1", "--duration", "1s", "--observe=false", "--progress", "0", "--out", out))
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
	for _, args := range [][]string{{"run", "-b", "select-only", "--bogus"}, {"run", "-S"}, {"run", "-b", "tpcb", "-L", "x"}} {
		if code, text := exitCode(t, erplab(t, dir, args...)); code != exitUsage {
			t.Errorf("%v: exit %d, want %d\n%s", args, code, exitUsage, text)
		}
	}
	if code, _ := exitCode(t, erplab(t, dir, "run", "--workload", "smoke", "--bogus")); code != exitUsage {
		t.Errorf("a bad flag outside script runs: exit %d, want %d", code, exitUsage)
	}
}

// writeScript writes a pgbench script file name into dir; its path.
func writeScript(t *testing.T, dir, name, body string) string {
	t.Helper()
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// errorScripts are a script with a syntax error at line 2 (bad.sql) and
// one that fails at run time with 22012 (fail.sql), in dir.
func errorScripts(t *testing.T, dir string) (bad, failing string) {
	t.Helper()
	return writeScript(t, dir, "bad.sql", "select 1;\n\\set x 1 +\n"), writeScript(t, dir, "fail.sql", "select 1/0;\n")
}

// opNames are the results' key operations, comma-separated, in order.
func opNames(doc *results.Document) string {
	var names []string
	for _, op := range doc.Operations {
		names = append(names, op.Name)
	}
	return strings.Join(names, ",")
}
