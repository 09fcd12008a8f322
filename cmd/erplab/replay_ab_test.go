package main

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/erplab/erplab/internal/capacity"
	"github.com/erplab/erplab/internal/pgtest"
	"github.com/erplab/erplab/internal/replay"
	"github.com/erplab/erplab/internal/results"
)

// pgbenchCapture captures a short pgbench tpcb-like run (2 clients, 10
// transactions each, prepared protocol) through the proxy; it returns
// the capture, the database's DSN and the name of its copy taken before.
func pgbenchCapture(t *testing.T) (path, dsn, copyName string) {
	t.Helper()
	_, dsn, copyName = pgbenchTemplate(t)
	path = filepath.Join(t.TempDir(), "w.erpcap.gz")
	p := startProxyProcess(t, dsn, "--capture", path)
	runPgbench(t, p.dsn, "-n", "-c", "2", "-t", "10", "-M", "prepared")
	_ = p.cmd.Process.Signal(syscall.SIGINT)
	if code := p.exit(t); code != 0 {
		t.Fatalf("proxy exit code %d", code)
	}
	return path, dsn, copyName
}

// ab replays a capture as its workload: the pre-capture database given
// as a connection string is copied into ab's own server with pg_dump,
// every round replays onto a fresh copy of it (also under the rewrite
// proxy, which holds sessions on the run's database), and the runs end
// with a verdict; each run's results are a replay's with every captured
// statement replayed and none failed.
func TestABReplay(t *testing.T) {
	pgtest.SkipShort(t)
	capFile, _, copyName := pgbenchCapture(t)
	dir := t.TempDir()
	outDir := filepath.Join(dir, "ab")
	code, text := exitCode(t, erplab(t, dir, "ab", "--workload", "replay", "--replay-source", capFile,
		"--replay-template", srv.DSN(t, copyName), "--replay-speed", "0",
		"--variant", "proxy=rewrite-proxy", "--rounds", "2", "--out-dir", outDir))
	if code != 0 || !strings.Contains(text, "VERDICT proxy: primary verdict: ") {
		t.Fatalf("exit %d:\n%s", code, text)
	}
	for _, name := range []string{"baseline-1", "baseline-2", "proxy-1", "proxy-2"} {
		doc, err := results.Read(filepath.Join(outDir, name+".json"))
		if err != nil {
			t.Fatalf("%s: %v\n%s", name, err, text)
		}
		f := fidelity(t, doc)
		// 10 transactions of 2 clients: BEGIN, 3 UPDATEs, SELECT, INSERT, END
		if doc.Workload != replay.Workload || doc.Status != "completed" || f.Statements < 2*10*7 || f.Failed != 0 || len(f.NewErrors) > 0 {
			t.Errorf("%s: workload %s, status %s, %d statements, %d failed, new errors %v\n%s", name, doc.Workload, doc.Status, f.Statements, f.Failed, f.NewErrors, text)
		}
	}
}

// capacity raises --users-x: with the pre-capture database named on the
// --dsn server, the step at 2 replays twice the sessions and statements
// of the step at 1; every step is observed (extra.observations).
func TestCapacityReplay(t *testing.T) {
	pgtest.SkipShort(t)
	capFile, _, copyName := pgbenchCapture(t)
	dir := t.TempDir()
	out := filepath.Join(dir, "cap.json")
	code, text := exitCode(t, erplab(t, dir, "capacity", "--workload", "replay", "--replay-source", capFile,
		"--replay-template", copyName, "--replay-speed", "0", "--dsn", srv.DSN(t, "postgres"),
		"--max-users", "2", "--apdex", "0.01", "--error-rate", "50%", "--out", out))
	if code != 0 {
		t.Fatalf("exit %d:\n%s", code, text)
	}
	doc, err := capacity.Read(out)
	if err != nil {
		t.Fatal(err)
	}
	if len(doc.Steps) != 2 || doc.Steps[0].Load != 1 || doc.Steps[1].Load != 2 || doc.Unit != "users-x" {
		t.Fatalf("unit %s, steps %+v\n%s", doc.Unit, doc.Steps, text)
	}
	var figs [2]replay.Fidelity
	for i, st := range doc.Steps {
		p := st.Path
		if !filepath.IsAbs(p) {
			p = filepath.Join(dir, p)
		}
		rd, err := results.Read(p)
		if err != nil {
			t.Fatalf("step %d: %v", i+1, err)
		}
		figs[i] = fidelity(t, rd)
		if len(rd.Extra["observations"]) < 10 {
			t.Errorf("step %d: no observations: %s", i+1, rd.Extra["observations"])
		}

	}
	if figs[0].UsersX != 1 || figs[1].UsersX != 2 || figs[0].Statements < 2*10*7 || figs[1].Statements != 2*figs[0].Statements || figs[1].Failed != 0 {
		t.Errorf("users-x %d then %d, statements %d then %d (want twice), failed %d\n%s",
			figs[0].UsersX, figs[1].UsersX, figs[0].Statements, figs[1].Statements, figs[1].Failed, text)
	}
}

// --workload replay's flag combinations that make no sense are refused
// in one line each (exit 2), before any server starts.
func TestReplayWorkloadRefusals(t *testing.T) {
	dir := t.TempDir()
	journal := writeJournal(t, []string{"a", "b"}, 1000)
	src := []string{"--workload", "replay", "--replay-source", journal}
	tpl := append(src, "--replay-template", "before")
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"ab", "--workload", "replay", "--variant", "x=rewrite-proxy"}, "--workload replay needs --replay-source"},
		{append([]string{"ab", "--variant", "x=rewrite-proxy"}, src...), "--workload replay needs --replay-template"},
		{append([]string{"ab", "--variant", "x=rewrite-proxy", "--users", "5"}, tpl...), "--users does not apply"},
		{append([]string{"ab", "--variant", "x=rewrite-proxy", "--connections", "5"}, tpl...), "--connections does not apply"},
		{append([]string{"ab", "--variant", "x=rewrite-proxy", "--replay-order", "sideways"}, tpl...), `--replay-order "sideways"`},
		{append([]string{"ab", "--variant", "x=rewrite-proxy", "--budget", "5m"}, tpl...), "--budget cannot plan: give --rounds"},
		{append([]string{"capacity", "--max-users", "4", "--users-x", "2"}, tpl...), "capacity raises --users-x itself"},
		{append([]string{"capacity", "--max-users", "4", "--hold", "10s"}, tpl...), "--hold does not apply"},
		{append([]string{"capacity"}, tpl...), "give --max-users"},
		{[]string{"run", "--workload", "smoke", "--replay-source", journal}, "--replay-source applies to --workload replay only"},
	} {
		code, text := exitCode(t, erplab(t, dir, c.args...))
		msg := strings.TrimSpace(text)
		if code != exitUsage || strings.Contains(msg, "\n") || !strings.Contains(msg, c.want) {
			t.Errorf("%v: exit %d, want %d and one line with %q:\n%s", c.args, code, exitUsage, c.want, msg)
		}
	}
}

// A --replay-template connection string with a password: pg_dump gets it
// in its environment, and neither the output nor the results hold it.
func TestReplayTemplatePassword(t *testing.T) {
	withPW, _ := passwordRole(t)
	adminSQL(t, withPW, "CREATE TABLE stock (id int PRIMARY KEY, qty int NOT NULL)")
	adminSQL(t, withPW, "INSERT INTO stock SELECT g, 100 FROM generate_series(1, 10) g")
	dir := t.TempDir()
	journal := writeJournal(t, []string{"a", "b"}, 1000)
	out := filepath.Join(dir, "r.json")
	cmd := erplab(t, dir, "run", "--workload", "replay", "--replay-source", journal, "--replay-template", withPW,
		"--replay-speed", "0", "--observe=false", "--out", out)
	code, text := exitCode(t, cmd)
	if code != 0 {
		t.Fatalf("exit %d:\n%s", code, text)
	}
	doc, err := results.Read(out)
	if err != nil {
		t.Fatal(err)
	}
	if f := fidelity(t, doc); f.Statements != 2*5*3 || f.Failed != 0 {
		t.Errorf("%d statements (want 30), %d failed\n%s", f.Statements, f.Failed, text)
	}
	for name, b := range map[string][]byte{"output": []byte(text), "results": mustRead(t, out), "stream": mustRead(t, strings.TrimSuffix(out, ".json")+".jsonl")} {
		if strings.Contains(string(b), secretCore) {
			t.Errorf("the %s holds the password", name)
		}
	}
	// On a server erplab did not start, a connection string would leave
	// a database of erplab's there: refused without --force.
	code, text = exitCode(t, erplab(t, dir, "run", "--workload", "replay", "--replay-source", journal, "--replay-template", withPW,
		"--dsn", srv.DSN(t, "postgres"), "--out", filepath.Join(dir, "r2.json")))
	// the password on argv is warned about first, then refused in one line
	const warned = "warning: the password in --replay-template is visible to every user of this host"
	msg := strings.TrimSpace(text)
	if rest, ok := strings.CutPrefix(msg, warned); ok {
		_, msg, _ = strings.Cut(rest, "\n")
	} else {
		t.Errorf("no warning about the password on the command line:\n%s", text)
	}
	if code != exitError || strings.Contains(msg, "\n") || !strings.Contains(msg, "--force") || strings.Contains(text, secretCore) {
		t.Errorf("--dsn with a template connection string: exit %d:\n%s", code, text)
	}
}

func mustRead(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// A password in --replay-template stays in erplab's argv: one warning
// line names --replay-template-file, which reads it from a 0600 file
// (refused with group or world access, or beside --replay-template).
func TestReplayTemplateArgvWarning(t *testing.T) {
	dir := t.TempDir()
	journal := writeJournal(t, []string{"a", "b"}, 1000)
	conn := "host=/nonexistent password=s3cret dbname=before"
	file := filepath.Join(dir, "tpl")
	if err := os.WriteFile(file, []byte(conn+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	open := filepath.Join(dir, "tpl-open")
	if err := os.WriteFile(open, []byte(conn+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	ab := []string{"ab", "--dry-run", "--rounds", "2", "--variant", "x=rewrite-proxy", "--workload", "replay", "--replay-source", journal}
	warning := "warning: the password in --replay-template is visible to every user of this host (ps, /proc); pass it in PGPASSWORD or ~/.pgpass (PGPASSFILE), or the whole DSN in a 0600 file with --replay-template-file"
	for _, c := range []struct {
		args      []string
		code      int
		want, not string
	}{
		{append(ab, "--replay-template", conn), 0, warning, ""},
		{[]string{"capacity", "--workload", "replay", "--replay-source", journal, "--replay-template", conn}, exitUsage, warning, ""},
		{append(ab, "--replay-template-file", file), 0, "plan: ", "warning"},
		{append(ab, "--replay-template-file", open), exitUsage, "chmod 600", "warning"},
		{append(ab, "--replay-template-file", file, "--replay-template", "before"), exitUsage, "give one", "warning"},
	} {
		code, text := exitCode(t, erplab(t, dir, c.args...))
		if code != c.code || !strings.Contains(text, c.want) || (c.not != "" && strings.Contains(text, c.not)) || strings.Contains(text, "s3cret") {
			t.Errorf("%v: exit %d (want %d), want %q, not %q:\n%s", c.args, code, c.code, c.want, c.not, text)
		}
	}
}
