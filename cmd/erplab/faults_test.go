package main

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/erplab/erplab/internal/hostfacts"
	"github.com/erplab/erplab/internal/pgcluster"
	"github.com/erplab/erplab/internal/pgtest"
	"github.com/erplab/erplab/internal/results"
)

// A results disk that fills up mid-run (a file-size limit, RLIMIT_FSIZE,
// makes writes past it fail with EFBIG; Go ignores SIGXFSZ): the stream
// failure is reported at once, the summary is printed all the same, the
// failed document is reported in one line naming the stream, no
// temporary file is left, the exit status is ResultsIncomplete, and what the stream kept
// reads back and validates.
func TestFullResultsDisk(t *testing.T) {
	pgtest.SkipShort(t)
	prlimit, err := exec.LookPath("prlimit")
	if err != nil {
		t.Skip("needs prlimit (util-linux)")
	}
	dir := t.TempDir()
	out := filepath.Join(dir, "r.json")
	args := []string{"--fsize=15000", "--", os.Args[0], "run", "--dsn", srv.NewDatabase(t), "--workload", "smoke", "--users", "4",
		"--duration", "3s", "--think", "10ms", "--interval", "100ms", "--progress", "1s", "--observe=false", "--out", out}
	cmd := erplab(t, dir)
	cmd.Path, cmd.Args = prlimit, append([]string{prlimit}, args...)
	var buf bytes.Buffer
	cmd.Stdout, cmd.Stderr = &buf, &buf
	err = cmd.Run()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != exitResults {
		t.Fatalf("exit %v, want %d\n%s", err, exitResults, buf.String())
	}
	s := buf.String()
	warn := strings.Index(s, "warning: at t=")
	sum := strings.Index(s, "integral APDEX")
	notWritten := strings.Index(s, "NOT WRITTEN: results: write ")
	if warn < 0 || sum < warn || notWritten < sum || !strings.Contains(s, "file too large") || !strings.Contains(s[notWritten:], "the stream "+strings.TrimSuffix(out, ".json")+".jsonl holds the intervals up to t=") {
		t.Fatalf("want the stream failure at once, then the summary, then one line on the failed document:\n%s", s)
	}
	// The failure is on the progress lines after it too.
	if !strings.Contains(s[warn:], "[results stream FAILED]") {
		t.Errorf("progress lines do not carry the failure:\n%s", s)
	}
	if _, err := os.Stat(out); !os.IsNotExist(err) {
		t.Errorf("%s exists (%v)", out, err)
	}
	if tmps, _ := filepath.Glob(filepath.Join(dir, ".*.tmp")); len(tmps) != 0 {
		t.Errorf("temporary files left: %v", tmps)
	}
	doc, err := results.Read(strings.TrimSuffix(out, ".json") + ".jsonl")
	if err != nil {
		t.Fatalf("the stream does not read back: %v", err)
	}
	if err := results.Validate(doc); err != nil || doc.Totals.Count == 0 || len(doc.Series) == 0 {
		t.Fatalf("stream: %v, %d operations in %d intervals", err, doc.Totals.Count, len(doc.Series))
	}
	t.Logf("file-size limit 15000 B: stream kept %d intervals (%d operations), exit %d", len(doc.Series), doc.Totals.Count, ee.ExitCode())
}

// freezableCluster starts a cluster of the test's own and returns it
// with functions that freeze it (SIGSTOP of the postmaster and its
// children) and continue it; t.Cleanup continues it before stopping it.
func freezableCluster(t *testing.T) (c *pgcluster.Cluster, freeze, thaw func()) {
	t.Helper()
	pgtest.SkipShort(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c, err := pgcluster.Start(ctx, pgcluster.Options{MaxConnections: 40, SharedBuffers: "32MB", StopWithParent: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Stop() })
	var (
		mu   sync.Mutex
		pids []int
	)
	thaw = func() {
		mu.Lock()
		defer mu.Unlock()
		for _, p := range pids {
			syscall.Kill(p, syscall.SIGCONT)
		}
		pids = nil
	}
	t.Cleanup(thaw)
	freeze = func() {
		fs, err := hostfacts.New("", "")
		if err != nil {
			t.Error(err)
			return
		}
		kids, _ := fs.ChildPIDs(c.PID())
		mu.Lock()
		defer mu.Unlock()
		pids = append([]int{c.PID()}, kids...)
		for _, p := range pids {
			syscall.Kill(p, syscall.SIGSTOP)
		}
	}
	return c, freeze, thaw
}

// newDatabase creates database name on c.
func newDatabase(t *testing.T, c *pgcluster.Cluster, name string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := c.CreateDatabase(ctx, name); err != nil {
		t.Fatal(err)
	}
	return c.DSN(name)
}

// startRun starts `erplab run` on dsn for d and returns it with its
// output and a channel closed when it has exited.
func startRun(t *testing.T, dsn string, d string, extra ...string) (*exec.Cmd, *syncBuffer, chan struct{}) {
	t.Helper()
	dir := t.TempDir()
	args := append([]string{"run", "--dsn", dsn, "--workload", "smoke", "--scale", "0.1", "--users", "4", "--duration", d, "--think", "10ms",
		"--progress", "1s", "--graceful-stop", "1s", "--observe=false", "--out", filepath.Join(dir, "r.json")}, extra...)
	cmd := erplab(t, dir, args...)
	buf, exited := startCmd(t, cmd)
	return cmd, buf, exited
}

// waitFor waits until the output contains want (or the run exits, or
// 60 s pass).
func waitFor(t *testing.T, buf *syncBuffer, exited chan struct{}, want string) {
	t.Helper()
	deadline := time.After(60 * time.Second)
	for !strings.Contains(buf.String(), want) {
		select {
		case <-exited:
			t.Fatalf("erplab exited before %q:\n%s", want, buf.String())
		case <-deadline:
			t.Fatalf("no %q after 60 s:\n%s", want, buf.String())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// A server frozen for the last part of a run: exit status
// ServerNotAnswering, the summary says from when, and the process ends
// within a bound (graceful stop, hard stop, pool close: a few seconds).
// Ctrl-C on a frozen server ends the run with 130 within the same bound,
// and a second Ctrl-C during the clean-up exits at once with 130.
func TestFrozenServerCLI(t *testing.T) {
	c, freeze, thaw := freezableCluster(t)

	dsn := newDatabase(t, c, "f")
	// The run outlasts the freeze's 5 s to "not answering" by 9 s: with
	// 6 s (5 left at the freeze) the span had to open in the 3 s of
	// graceful and hard stop, and a progress line or a freeze late by 2-3 s
	// under load made the run end "completed" before it did.
	cmd, buf, exited := startRun(t, dsn, "10s")
	waitFor(t, buf, exited, " 1s/10s ")
	freeze()
	frozenAt := time.Now()
	<-exited
	after := time.Since(frozenAt)
	if code := cmd.ProcessState.ExitCode(); code != exitNotAnswering {
		t.Fatalf("exit %d, want %d\n%s", code, exitNotAnswering, buf.String())
	}
	s := buf.String()
	// The first mark says 5 or 6 s depending on where the 1 s ticks fall
	// (later on a loaded machine); the threshold is engine's TestJudgeSpans.
	if !strings.Contains(s, "[server not answering for ") || strings.Contains(s, "[server not answering for 4 s: ") {
		t.Fatalf("output lacks \"[server not answering for N s: \" with N >= 5:\n%s", s)
	}
	for _, want := range []string{"run stalled: the server answered nothing from t=", "the server stopped answering at t="} {
		if !strings.Contains(s, want) {
			t.Fatalf("output lacks %q:\n%s", want, s)
		}
	}
	// 9 s of profile left, 1 s graceful stop, 2 s hard stop, 3 s pool
	// close: generous liveness bound.
	if after > 30*time.Second {
		t.Errorf("ended %s after the freeze", after)
	}
	t.Logf("frozen with 9 s of the run left: exit %d %s after the freeze", exitNotAnswering, after.Round(100*time.Millisecond))

	// Interrupts while the server is frozen.
	interrupt := func(twice bool) (time.Duration, *syncBuffer, int) {
		thaw()
		cmd, buf, exited := startRun(t, dsn, "60s")
		waitFor(t, buf, exited, " 1s/1m0s ")
		freeze()
		time.Sleep(time.Second) // operations are stuck in the server by now
		cmd.Process.Signal(os.Interrupt)
		if twice {
			time.Sleep(300 * time.Millisecond)
		}
		t0 := time.Now()
		if twice {
			cmd.Process.Signal(os.Interrupt)
		}
		<-exited
		return time.Since(t0), buf, cmd.ProcessState.ExitCode()
	}
	one, buf, code := interrupt(false)
	if code != exitInterrupted || one > 15*time.Second {
		t.Fatalf("Ctrl-C on a frozen server: exit %d after %s, want %d within 15 s\n%s", code, one, exitInterrupted, buf.String())
	}
	two, buf, code := interrupt(true)
	if code != exitInterrupted || two > 5*time.Second || !strings.Contains(buf.String(), "second interrupt: exiting at once") {
		t.Fatalf("second Ctrl-C: exit %d after %s, want %d at once\n%s", code, two, exitInterrupted, buf.String())
	}
	t.Logf("Ctrl-C on a frozen server: 130 after %s; second Ctrl-C: 130 after %s", one.Round(100*time.Millisecond), two.Round(10*time.Millisecond))
}

// syncBuffer is a bytes.Buffer safe for a child's output and a reader.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// timeout(1) signals its child and then its own process group, so erplab
// gets SIGTERM twice at once: that is one signal (a clean stop with exit
// 130), not the "second signal" that exits without cleaning up.
func TestDuplicateSignalIsOne(t *testing.T) {
	cmd, buf, exited := startRun(t, srv.NewDatabase(t), "60s")
	waitFor(t, buf, exited, " 1s/1m0s ")
	cmd.Process.Signal(syscall.SIGTERM)
	cmd.Process.Signal(syscall.SIGTERM)
	<-exited
	if code := cmd.ProcessState.ExitCode(); code != exitInterrupted || strings.Contains(buf.String(), "exiting at once") {
		t.Fatalf("two SIGTERMs at once: exit %d (want %d, cleaned up)\n%s", code, exitInterrupted, buf.String())
	}
}

// A server frozen for 6 s in the middle of `erplab pgbench -T 3`, then
// continued: the transactions in flight complete, the run ends 0 as
// pgbench's, and erplab warns of the silence instead of saying that the
// server had not answered by the end.
func TestPgbenchFrozenThenContinued(t *testing.T) {
	c, freeze, thaw := freezableCluster(t)
	dsn := newDatabase(t, c, "pf")
	dir := t.TempDir()
	if code, text := exitCode(t, pgbenchCmd(t, dir, dsn, nil, "-i", "-q")); code != 0 {
		t.Fatalf("-i: exit %d\n%s", code, text)
	}
	out := filepath.Join(dir, "r.json")
	cmd := pgbenchCmd(t, dir, dsn, []string{"ERPLAB_PGBENCH_OUT=" + out}, "-c", "2", "-T", "3", "-P", "1", "-S")
	buf, exited := startCmd(t, cmd)
	waitFor(t, buf, exited, "progress: 1.0 s")
	freeze()
	time.Sleep(6 * time.Second)
	thaw()
	<-exited
	s := buf.String()
	if code := cmd.ProcessState.ExitCode(); code != 0 || strings.Contains(s, "error:") ||
		!strings.Contains(s, "erplab: warning: the server did not answer for ") {
		t.Fatalf("exit %d, want 0 with a warning and no error line:\n%s", code, s)
	}
	doc, err := results.Read(out)
	if err != nil {
		t.Fatal(err)
	}
	if len(doc.ServerUnresponsive) != 1 || doc.ServerUnresponsive[0].UntilEnd || doc.Status != "completed" {
		t.Fatalf("status %q, spans %+v\n%s", doc.Status, doc.ServerUnresponsive, s)
	}
	sp := doc.ServerUnresponsive[0]
	t.Logf("silence %.1f s from t=%.1f s; max latency %.0f ms", sp.ToS-sp.FromS, sp.FromS, doc.Operations[0].Response.Max)
}
