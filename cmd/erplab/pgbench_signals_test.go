package main

import (
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"regexp"
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
		if sig == syscall.SIGHUP && signal.Ignored(sig) {
			t.Log("SIGHUP not tried: it is ignored in this process (nohup), and the erplab it starts would inherit that")
			continue
		}
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
// what was interrupted, exit 130 (docs/exit-codes.md's code for an interrupt, as
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
	// the phase the signal lands in depends on the host's speed: the
	// first progress line can be the last one, before the vacuum
	want := regexp.MustCompile(`^pgbench: error: interrupted \(SIGINT\) during init: (generating data \(client-side\)|vacuuming|creating primary keys); the pgbench tables are incomplete$`)
	if code := cmd.ProcessState.ExitCode(); code != 130 || len(errs) != 1 || !want.MatchString(errs[0]) {
		t.Fatalf("exit %d, want 130 and one error line matching %s:\n%s", code, want, s)
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

// The results document never breaks the drop-in: ERPLAB_PGBENCH_OUT=none
// (and /dev/null) writes nothing, a directory takes time-stamped files, a
// fixed file is replaced on every run, and a default directory that
// cannot be made or written is one warning line, the run exiting 0.
func TestPgbenchResultsPlace(t *testing.T) {
	dir := t.TempDir()
	dsn := pgbenchDB(t, dir)
	run := func(cwd, out string) (int, string) {
		t.Helper()
		cmd := pgbenchCmd(t, cwd, dsn, []string{"ERPLAB_PGBENCH_OUT=" + out}, "-c", "1", "-t", "2", "-S")
		return exitCode(t, cmd)
	}
	entries := func(d string) []string {
		t.Helper()
		es, err := os.ReadDir(d)
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, e := range es {
			names = append(names, e.Name())
		}
		return names
	}

	// Off.
	for _, v := range []string{"none", os.DevNull} {
		cwd := t.TempDir()
		code, text := run(cwd, v)
		if code != 0 || strings.Contains(text, "erplab: results:") || strings.Contains(text, "warning") || len(entries(cwd)) != 0 {
			t.Fatalf("%s: exit %d, files %v:\n%s", v, code, entries(cwd), text)
		}
	}
	if st, err := os.Stat(os.DevNull); err != nil || st.Mode().IsRegular() {
		t.Fatalf("%s: %v %v", os.DevNull, st, err)
	}
	for _, p := range []string{os.DevNull + ".json", os.DevNull + ".jsonl"} {
		if _, err := os.Stat(p); err == nil {
			os.Remove(p)
			t.Fatalf("%s written", p)
		}
	}

	// A directory: time-stamped files in it, two runs two documents.
	outDir := t.TempDir()
	for range 2 {
		if code, text := run(dir, outDir); code != 0 || !strings.Contains(text, "erplab: results: "+outDir+"/") {
			t.Fatalf("directory: exit %d:\n%s", code, text)
		}
	}
	docs, _ := filepath.Glob(filepath.Join(outDir, "*-pgbench*.json"))
	if len(docs) != 2 || len(entries(outDir)) != 4 {
		t.Fatalf("directory: %v", entries(outDir))
	}

	// A fixed file: replaced by the second run.
	file := filepath.Join(t.TempDir(), "r.json")
	var started []string
	for range 2 {
		if code, text := run(dir, file); code != 0 || !strings.Contains(text, "erplab: results: "+file) {
			t.Fatalf("file: exit %d:\n%s", code, text)
		}
		doc, err := results.Read(file)
		if err != nil {
			t.Fatal(err)
		}
		stream, err := results.Read(strings.TrimSuffix(file, ".json") + ".jsonl")
		if err != nil || !stream.StartedAt.Equal(doc.StartedAt) {
			t.Fatalf("stream %v: started %v, document %v", err, stream, doc.StartedAt)
		}
		started = append(started, doc.StartedAt.String())
	}
	if started[0] == started[1] {
		t.Fatalf("file not replaced: both runs started %s", started[0])
	}

	// The default directory cannot be made (a file of its name; as root
	// no permission stops the test's process): one warning, exit 0.
	cwd := t.TempDir()
	if err := os.WriteFile(filepath.Join(cwd, "erplab-results"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	code, text := run(cwd, "")
	if code != 0 || strings.Count(text, "warning") != 1 || !strings.Contains(text, "erplab: warning: no results document: results directory: ") ||
		!strings.Contains(text, "number of transactions actually processed: 2/2") || strings.Contains(text, "erplab: results:") {
		t.Fatalf("default directory unusable: exit %d:\n%s", code, text)
	}
	if os.Getuid() != 0 {
		ro := t.TempDir()
		if err := os.Chmod(ro, 0o555); err != nil {
			t.Fatal(err)
		}
		if code, text := run(ro, ""); code != 0 || !strings.Contains(text, "erplab: warning: no results document: ") {
			t.Fatalf("unwritable directory: exit %d:\n%s", code, text)
		}
	}
}
