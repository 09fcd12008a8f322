package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/erplab/erplab/internal/results"
)

// startCmd starts cmd with its output in a buffer and returns a channel
// closed when it has exited; t.Cleanup kills it if it is still running.
func startCmd(t *testing.T, cmd *exec.Cmd) (*syncBuffer, chan struct{}) {
	t.Helper()
	buf := &syncBuffer{}
	cmd.Stdout, cmd.Stderr = buf, buf
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		select {
		case <-exited:
		default:
			cmd.Process.Kill()
			<-exited
		}
	})
	return buf, exited
}

// pgbenchDB is a database of the shared server with pgbench's tables at
// scale 1.
func pgbenchDB(t *testing.T, dir string) string {
	t.Helper()
	dsn := srv.NewDatabase(t)
	if code, text := exitCode(t, pgbenchCmd(t, dir, dsn, nil, "-i", "-q")); code != 0 {
		t.Fatalf("-i: exit %d\n%s", code, text)
	}
	return dsn
}

// An interrupted `erplab pgbench` run exits as pgbench killed by the
// signal (128 + its number), after the partial report, with the results
// document written and saying "interrupted".
func TestPgbenchInterruptExitStatus(t *testing.T) {
	dir := t.TempDir()
	dsn := pgbenchDB(t, dir)
	for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP} {
		out := filepath.Join(dir, fmt.Sprintf("r-%d.json", sig))
		cmd := pgbenchCmd(t, dir, dsn, []string{"ERPLAB_PGBENCH_OUT=" + out}, "-c", "2", "-T", "600", "-P", "1", "-S")
		buf, exited := startCmd(t, cmd)
		waitFor(t, buf, exited, "progress: 1.0 s")
		cmd.Process.Signal(sig)
		<-exited
		s := buf.String()
		name := map[syscall.Signal]string{syscall.SIGINT: "SIGINT", syscall.SIGTERM: "SIGTERM", syscall.SIGHUP: "SIGHUP"}[sig]
		if code := cmd.ProcessState.ExitCode(); code != 128+int(sig) || !strings.Contains(s, "number of transactions actually processed: ") ||
			!strings.Contains(s, "erplab: interrupted ("+name+"): the above results are incomplete.") || strings.Contains(s, "Run was aborted") {
			t.Fatalf("%v: exit %d, want %d with the partial report:\n%s", sig, code, 128+int(sig), s)
		}
		doc, err := results.Read(out)
		if err != nil {
			t.Fatal(err)
		}
		if doc.Status != "interrupted" || doc.Totals.Count == 0 {
			t.Fatalf("%v: status %q, %d transactions", sig, doc.Status, doc.Totals.Count)
		}
	}
}

// `erplab pgbench -i` interrupted while generating data: one line saying
// what was interrupted, exit 130 (the README's code for an interrupt, as
// the run's).
func TestPgbenchInitInterrupted(t *testing.T) {
	dir := t.TempDir()
	dsn := srv.NewDatabase(t)
	cmd := pgbenchCmd(t, dir, dsn, nil, "-i", "-s", "30")
	buf, exited := startCmd(t, cmd)
	waitFor(t, buf, exited, " tuples (")
	cmd.Process.Signal(syscall.SIGINT)
	<-exited
	s := buf.String()
	var errs []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, "error") {
			errs = append(errs, l)
		}
	}
	want := "pgbench: error: interrupted (SIGINT) during init: generating data (client-side); the pgbench tables are incomplete"
	if code := cmd.ProcessState.ExitCode(); code != 130 || len(errs) != 1 || errs[0] != want {
		t.Fatalf("exit %d, want 130 and the one error line %q:\n%s", code, want, s)
	}
}

// A signal erplab started with ignored stays ignored (nohup erplab
// pgbench ... &): SIGHUP does not stop the run, which ends 0.
func TestPgbenchIgnoredSIGHUP(t *testing.T) {
	dir := t.TempDir()
	dsn := pgbenchDB(t, dir)
	out := filepath.Join(dir, "r.json")
	inner := pgbenchCmd(t, dir, dsn, []string{"ERPLAB_PGBENCH_OUT=" + out}, "-c", "1", "-T", "3", "-P", "1", "-S")
	// exec.Cmd cannot start a process with a signal ignored; sh's trap
	// "" can, and exec keeps it ignored.
	cmd := exec.Command("sh", append([]string{"-c", `trap "" HUP; exec "$0" "$@"`}, inner.Args...)...)
	cmd.Dir, cmd.Env = inner.Dir, inner.Env
	buf, exited := startCmd(t, cmd)
	waitFor(t, buf, exited, "progress: 1.0 s")
	cmd.Process.Signal(syscall.SIGHUP)
	<-exited
	s := buf.String()
	if code := cmd.ProcessState.ExitCode(); code != 0 || strings.Contains(s, "interrupted") {
		t.Fatalf("exit %d, want 0 (SIGHUP ignored):\n%s", code, s)
	}
	doc, err := results.Read(out)
	if err != nil {
		t.Fatal(err)
	}
	if doc.Status != "completed" {
		t.Fatalf("status %q", doc.Status)
	}
}

// A run whose clients aborted exits 2, as pgbench's, and its results
// document says it was aborted.
func TestPgbenchAbortedStatus(t *testing.T) {
	dir := t.TempDir()
	dsn := srv.NewDatabase(t)
	script := filepath.Join(dir, "fail.sql")
	if err := os.WriteFile(script, []byte("SELECT 1/0;\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "r.json")
	code, text := exitCode(t, pgbenchCmd(t, dir, dsn, []string{"ERPLAB_PGBENCH_OUT=" + out}, "-n", "-c", "2", "-t", "3", "-f", script))
	if code != 2 || !strings.Contains(text, "Run was aborted; the above results are incomplete.") {
		t.Fatalf("exit %d, want 2:\n%s", code, text)
	}
	doc, err := results.Read(out)
	if err != nil {
		t.Fatal(err)
	}
	if doc.Status != "aborted: 2 of 2 clients aborted" {
		t.Fatalf("status %q", doc.Status)
	}
}
