package main

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/jackc/pgx/v5"
)

// exitCode runs cmd and returns its exit code and combined output.
func exitCode(t *testing.T, cmd *exec.Cmd) (int, string) {
	t.Helper()
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	switch {
	case err == nil:
		return 0, string(out)
	case errors.As(err, &ee):
		return ee.ExitCode(), string(out)
	}
	t.Fatalf("%v\n%s", err, out)
	return -1, ""
}

// thpHost writes a minimal host fixture with THP in mode.
func thpHost(t *testing.T, mode string) (proc, sys string) {
	t.Helper()
	dir := t.TempDir()
	proc, sys = filepath.Join(dir, "proc"), filepath.Join(dir, "sys")
	files := map[string]string{
		"proc/meminfo":                               "MemTotal:       16384000 kB\nMemFree:         8000000 kB\nMemAvailable:   12000000 kB\n",
		"proc/cpuinfo":                               "processor\t: 0\nvendor_id\t: GenuineIntel\nmodel name\t: Test CPU\n\n",
		"proc/sys/kernel/hostname":                   "db\n",
		"proc/sys/kernel/ostype":                     "Linux\n",
		"proc/sys/kernel/osrelease":                  "6.1.0\n",
		"proc/sys/kernel/arch":                       "x86_64\n",
		"sys/kernel/mm/transparent_hugepage/enabled": strings.Replace("always madvise never", mode, "["+mode+"]", 1) + "\n",
	}
	for name, body := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return proc, sys
}

// The exit code follows the worst finding: 4 for THP 'always' in a
// fixture host, 0 for 'madvise'; JSON output names the same worst.
func TestDoctorExitCodes(t *testing.T) {
	dsn := srv.NewDatabase(t)
	for _, c := range []struct {
		mode  string
		code  int
		worst string
	}{{"always", exitDoctorWarning, "warning"}, {"madvise", 0, "ok"}} {
		proc, sys := thpHost(t, c.mode)
		code, out := exitCode(t, erplab(t, t.TempDir(), "doctor", "--dsn", dsn, "--only", "thp-enabled", "--sample", "0",
			"--proc-root", proc, "--sys-root", sys, "--format", "json"))
		if code != c.code {
			t.Errorf("THP %s: exit %d, want %d\n%s", c.mode, code, c.code, out)
		}
		js, _, _ := strings.Cut(out, "\nerplab: ") // stderr's one line after the JSON
		var rep struct {
			Worst    string `json:"worst"`
			Findings []struct {
				ID       string `json:"id"`
				Severity string `json:"severity"`
			} `json:"findings"`
		}
		if err := json.Unmarshal([]byte(js), &rep); err != nil {
			t.Fatalf("THP %s: %v\n%s", c.mode, err, out)
		}
		if rep.Worst != c.worst || len(rep.Findings) != 1 || rep.Findings[0].ID != "thp-enabled" {
			t.Errorf("THP %s: %+v", c.mode, rep)
		}
	}
}

// As a role without pg_monitor the doctor exits 6 when nothing worse than
// info was found, with one line saying which checks did not run and the
// GRANT; a warning's 4 wins over 6, its line saying the same.
func TestDoctorWithoutMonitorExitCodes(t *testing.T) {
	role, dsn := srv.NewRole(t, srv.NewDatabase(t))
	notRun := "1 of 2 checks did not run: long-queries needs privileges role " + role + " lacks (GRANT pg_monitor TO " + role + ")"
	for _, c := range []struct {
		mode string
		code int
		line string
	}{
		{"madvise", exitResults, "erplab: doctor: " + notRun},
		{"always", exitDoctorWarning, "erplab: doctor: 1 warning findings; " + notRun},
	} {
		proc, sys := thpHost(t, c.mode)
		code, out := exitCode(t, erplab(t, t.TempDir(), "doctor", "--dsn", dsn, "--only", "thp-enabled,long-queries", "--sample", "0",
			"--host", "--proc-root", proc, "--sys-root", sys))
		lines := strings.Split(strings.TrimSpace(out), "\n")
		if code != c.code || lines[len(lines)-1] != c.line || !strings.Contains(out, "\n  "+notRun+"\n") {
			t.Errorf("THP %s as %s: exit %d, want %d and the last line %q, the header line %q:\n%s", c.mode, role, code, c.code, c.line, notRun, out)
		}
	}
}

// The whole doctor on the shared test server, text format: every check
// appears once, and the exit code agrees with the summary line.
func TestDoctorText(t *testing.T) {
	dsn := srv.NewDatabase(t)
	code, out := exitCode(t, erplab(t, t.TempDir(), "doctor", "--dsn", dsn, "--sample", "1s", "--no-host"))
	if !strings.Contains(out, "erplab doctor\n") || !strings.Contains(out, "host checks: not run, needs host checks (turned off") {
		t.Fatalf("output:\n%s", out)
	}
	for _, id := range []string{"thp-enabled", "temp-files", "catalog-churn", "or-subquery", "wraparound"} {
		if strings.Count(out, "["+id+"]") != 1 {
			t.Errorf("check %s not listed once:\n%s", id, out)
		}
	}
	// 6 when nothing worse than info was found but checks could not run.
	incomplete := 0
	if strings.Contains(out, " lacks (GRANT pg_monitor TO ") || strings.Contains(out, " failed (see each one's line)") {
		incomplete = exitResults
	}
	want := map[string]int{"worst: ok": incomplete, "worst: info": incomplete, "worst: warning": exitDoctorWarning, "worst: critical": exitDoctorCritical}
	found := false
	for s, c := range want {
		if strings.Contains(out, s) {
			found = true
			if code != c {
				t.Errorf("%s but exit %d", s, code)
			}
		}
	}
	if !found {
		t.Errorf("no worst in:\n%s", out)
	}
}

func TestDoctorUsageErrors(t *testing.T) {
	for _, args := range [][]string{
		{"doctor", "--format", "yaml", "--dsn", "dbname=x"},
		{"doctor", "--only", "no-such-check", "--dsn", "dbname=x"},
		{"doctor", "--only", "jit", "--skip", "jit"},
		{"doctor", "--host", "--no-host", "--dsn", "dbname=x"},
		{"doctor", "--sample", "-1s", "--dsn", "dbname=x"},
		{"doctor", "fix", "no-such-fix"},
		{"doctor", "fix", "tmpfs-temp-tablespace", "--apply", "--undo", "--size", "2G"},
		{"doctor", "fix", "tmpfs-temp-tablespace", "--size", "2GB"},
		{"doctor", "fix", "tmpfs-temp-tablespace", "--apply", "--size", "2G"},
		{"doctor", "fix", "tmpfs-temp-tablespace", "--force", "--dsn", "dbname=x"},
		{"doctor", "fix", "tmpfs-temp-tablespace", "--apply", "--size", "2G", "--force", "--dsn", "dbname=x"},
		{"doctor", "fix", "tmpfs-temp-tablespace", "--state", "/nonexistent.json"},
		{"doctor", "fix", "tmpfs-temp-tablespace", "--undo", "--state", "/nonexistent.json", "--dsn", "dbname=x"},
		{"doctor", "fix", "tmpfs-temp-tablespace", "--undo", "--states"},
	} {
		code, out := exitCode(t, erplab(t, t.TempDir(), args...))
		if code != exitUsage || strings.Count(strings.TrimSpace(out), "\n") != 0 || !strings.HasPrefix(out, "erplab: ") {
			t.Errorf("%q: exit %d, output %q", args, code, out)
		}
	}
}

// The fix prints the procedure: with placeholders without a server, with
// the server's values with one; nothing is changed.
func TestDoctorFixPrints(t *testing.T) {
	code, out := exitCode(t, erplab(t, t.TempDir(), "doctor", "fix", "tmpfs-temp-tablespace", "--size", "2G"))
	if code != 0 || !strings.Contains(out, "mount -t tmpfs -o size=2G,uid=<uid of postgres>") || !strings.Contains(out, "\n# only DROP TABLE frees the space") {
		t.Errorf("exit %d:\n%s", code, out)
	}
	dsn := srv.NewDatabase(t)
	code, out = exitCode(t, erplab(t, t.TempDir(), "doctor", "fix", "tmpfs-temp-tablespace", "--size", "512m", "--scope", "database", "--dsn", dsn))
	if code != 0 || !strings.Contains(out, "size=512m,uid=") || !strings.Contains(out, "ALTER DATABASE") || strings.Contains(out, "<uid of") {
		t.Errorf("exit %d:\n%s", code, out)
	}
	if strings.Contains(out, "ALTER SYSTEM SET") {
		t.Errorf("database scope prints ALTER SYSTEM:\n%s", out)
	}
}

// Through the command line (root only): --undo refuses, in one line with
// exit 1, a DBA's tablespace named with --tablespace and leaves it;
// --apply records, --states lists the record, --undo reverts it and
// removes it.
func TestDoctorFixUndoOnlyWhatWasDone(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: the fix mounts a tmpfs")
	}
	ctx := context.Background()
	dsn := srv.NewDatabase(t)
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var dataDir string
	if err := conn.QueryRow(ctx, "SELECT current_setting('data_directory')").Scan(&dataDir); err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(dataDir)
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(srv.Cluster(t).Dir(), "cli_usertemp")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	sys := st.Sys().(*syscall.Stat_t)
	if err := os.Chown(dir, int(sys.Uid), int(sys.Gid)); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, "CREATE TABLESPACE cli_usertemp LOCATION '"+dir+"'"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = conn.Exec(context.Background(), "DROP TABLESPACE IF EXISTS cli_usertemp") })
	stateDir := t.TempDir()
	fix := func(args ...string) (int, string) {
		return exitCode(t, erplab(t, t.TempDir(), append([]string{"doctor", "fix", "tmpfs-temp-tablespace", "--state-dir", stateDir, "--dsn", dsn}, args...)...))
	}
	code, out := fix("--undo", "--tablespace", "cli_usertemp")
	if code != 1 || strings.Count(strings.TrimSpace(out), "\n") != 0 || !strings.Contains(out, "refusing to undo what erplab did not create: found tablespace cli_usertemp") {
		t.Fatalf("undo of a DBA's tablespace: exit %d:\n%s", code, out)
	}
	var n int
	if err := conn.QueryRow(ctx, "SELECT count(*) FROM pg_tablespace WHERE spcname = 'cli_usertemp'").Scan(&n); err != nil || n != 1 {
		t.Fatalf("the DBA's tablespace after the refused undo: %d (%v)", n, err)
	}

	if code, out := fix("--apply", "--size", "16M", "--tablespace", "cli_tmpfs"); code != 0 || !strings.Contains(out, "recorded in "+stateDir) {
		t.Fatalf("apply: exit %d:\n%s", code, out)
	}
	code, out = exitCode(t, erplab(t, t.TempDir(), "doctor", "fix", "tmpfs-temp-tablespace", "--state-dir", stateDir, "--states"))
	if code != 0 || !strings.Contains(out, "tablespace cli_tmpfs (oid ") || !strings.Contains(out, "tmpfs 16M at ") || !strings.Contains(out, ", complete") {
		t.Errorf("--states: exit %d:\n%s", code, out)
	}
	if code, out := fix("--undo", "--tablespace", "cli_tmpfs"); code != 0 || !strings.Contains(out, "ALTER SYSTEM RESET temp_tablespaces") || !strings.Contains(out, "DROP TABLESPACE") {
		t.Fatalf("undo: exit %d:\n%s", code, out)
	}
	code, out = exitCode(t, erplab(t, t.TempDir(), "doctor", "fix", "tmpfs-temp-tablespace", "--state-dir", stateDir, "--states"))
	if code != 0 || !strings.Contains(out, "no tmpfs state files") {
		t.Errorf("--states after undo: exit %d:\n%s", code, out)
	}
}
