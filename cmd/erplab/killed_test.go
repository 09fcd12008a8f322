package main

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/erplab/erplab/internal/leftover"
	"github.com/erplab/erplab/internal/pgcluster"
	"github.com/erplab/erplab/internal/results"
)

// A run killed with SIGKILL leaves a stream without a summary; report and
// compare read it as the document rebuilt from its intervals, whose
// operation counts are the sums over the intervals. The embedded cluster
// lives in a TMPDIR of the test's own: its postmaster dies with erplab
// (PDEATHSIG), and the test reaps that directory as the next erplab run
// would, leaving nothing behind.
func TestKilledRunStaysReadable(t *testing.T) {
	if testing.Short() {
		t.Skip("starts an embedded server and runs for ~10 s")
	}
	dir, tmp := embeddedTmp(t)
	cmd := erplab(t, dir, "run", "--workload", "smoke", "--duration", "60s", "--users", "4", "--think", "20ms",
		"--observe=false", "--out", filepath.Join(dir, "x.json"))
	state := filepath.Join(tmp, "state")
	cmd.Env = append(cmd.Env, "TMPDIR="+tmp, "ERPLAB_STATE_DIR="+state)
	stream := filepath.Join(dir, "x.jsonl")
	killWhen(t, cmd, "8 intervals in "+stream, 90*time.Second, 200*time.Millisecond, func() bool { return intervalLines(stream) >= 8 })
	t.Cleanup(func() { reapKilled(t, tmp) })

	if _, err := os.Stat(filepath.Join(dir, "x.json")); !os.IsNotExist(err) {
		t.Fatalf("a killed run wrote its document (%v)", err)
	}
	doc, err := results.Read(stream)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(string(doc.Status), "killed: stream ended at t=") || len(doc.Series) < 8 {
		t.Fatalf("status %q, %d intervals", doc.Status, len(doc.Series))
	}
	sums := map[string]int64{}
	for _, iv := range rawStreamIntervals(t, stream) {
		for name, op := range iv.Ops {
			sums[name] += op.Count
		}
	}
	var total int64
	for _, op := range doc.Operations {
		if op.Count != sums[op.Name] {
			t.Errorf("%s: count %d, intervals sum to %d", op.Name, op.Count, sums[op.Name])
		}
		if op.Count > op.Errors && op.Response.P95 <= 0 {
			t.Errorf("%s: no percentiles rebuilt: %+v", op.Name, op.Response)
		}
		total += op.Count
	}
	if total == 0 || doc.Totals.Count != total {
		t.Errorf("totals.count %d, operations sum to %d", doc.Totals.Count, total)
	}

	html := filepath.Join(dir, "x.html")
	if b, err := erplab(t, dir, "report", stream, "-o", html).CombinedOutput(); err != nil {
		t.Fatalf("report: %v\n%s", err, b)
	}
	if b, err := os.ReadFile(html); err != nil || !strings.Contains(string(b), "killed: stream ended") {
		t.Errorf("report %s lacks the killed status (%v)", html, err)
	}
	if b, err := erplab(t, dir, "compare", stream, stream).CombinedOutput(); err != nil || !strings.Contains(string(b), "item_lookup") {
		t.Fatalf("compare: %v\n%s", err, b)
	}
}

// embeddedTmp returns a directory for a test of the embedded server and
// tmp inside it, for the run's TMPDIR (where its cluster directory goes)
// and state directory, removed at the end. Not t.TempDir (mode 0700): an
// erplab run as root hands the cluster directory to the postgres user,
// who must reach it.
func embeddedTmp(t *testing.T) (dir, tmp string) {
	t.Helper()
	dir, err := os.MkdirTemp("", "erplab-killed-test-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	tmp = filepath.Join(dir, "tmp")
	if err := os.Mkdir(tmp, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{dir, tmp} {
		if err := os.Chmod(d, 0o1777); err != nil {
			t.Fatal(err)
		}
	}
	return dir, tmp
}

// killWhen starts cmd, polls ready every poll until it holds, then kills
// cmd with SIGKILL and waits for it. It fails the test, with cmd's
// output, when cmd ends before (or limit passes: what names what it
// waited for). A state directory of the test's own in cmd's environment
// is swept at the end (sweepKilled).
func killWhen(t *testing.T, cmd *exec.Cmd, what string, limit, poll time.Duration, ready func() bool) {
	t.Helper()
	sweepKilled(t, cmd)
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	deadline := time.After(limit)
	for !ready() {
		select {
		case <-exited:
			t.Fatalf("%q ended before %s:\n%s", cmd.Args[1:], what, out.String())
		case <-deadline:
			_ = cmd.Process.Kill()
			<-exited
			t.Fatalf("no %s after %s:\n%s", what, limit, out.String())
		case <-time.After(poll):
		}
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-exited
}

// sweepKilled sweeps, at the end of the test, the record of the state
// directory that cmd's environment names (ERPLAB_STATE_DIR), as the next
// erplab command with that directory would: no later command reads a
// test's temporary state directory, so what a killed command recorded
// there (its perf uprobes: run, ab, top and capacity add them by
// default) would outlive the test. It fails the test when a group of
// uprobes the record named is still listed by perf afterwards.
func sweepKilled(t *testing.T, cmd *exec.Cmd) {
	t.Helper()
	var state string
	for _, e := range cmd.Env {
		if v, ok := strings.CutPrefix(e, leftover.EnvStateDir+"="); ok {
			state = v
		}
	}
	if state == "" {
		return // the default state directory: every later command sweeps it
	}
	t.Cleanup(func() {
		rec, err := leftover.OpenDir(filepath.Join(state, "leftover"))
		if err != nil {
			t.Errorf("the killed command's record: %v", err)
			return
		}
		entries, _ := rec.Entries()
		rep := rec.Sweep(context.Background())
		for _, e := range entries {
			var d struct{ Group string }
			if e.Kind != "perf-probes" || json.Unmarshal(e.Data, &d) != nil || !strings.HasPrefix(d.Group, "erplab_") {
				continue
			}
			if out, _ := exec.Command("perf", "probe", "-l", d.Group+":*").CombinedOutput(); strings.Contains(string(out), d.Group+":") {
				t.Errorf("uprobes of the killed command left after the sweep (%s):\n%s", rep.Line(), out)
			}
		}
	})
}

// intervalLines counts the complete interval lines of a stream so far.
func intervalLines(path string) int {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
	n := 0
	for _, l := range strings.SplitAfter(string(b), "\n") {
		if strings.HasSuffix(l, "\n") && strings.HasPrefix(l, `{"type":"interval"`) {
			n++
		}
	}
	return n
}

// rawStreamIntervals decodes a stream's interval lines without package
// results' reader, skipping a torn last line.
func rawStreamIntervals(t *testing.T, path string) []results.Interval {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []results.Interval
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<24)
	for sc.Scan() {
		var l struct {
			Type     string
			Interval *results.Interval
		}
		if json.Unmarshal(sc.Bytes(), &l) == nil && l.Type == "interval" {
			out = append(out, *l.Interval)
		}
	}
	return out
}

// reapKilled removes the killed run's cluster from tmp as the next erplab
// run would (pgcluster.ReapOrphans, which waits for a postmaster still
// alive) and fails when anything is left.
func reapKilled(t *testing.T, tmp string) {
	t.Setenv("TMPDIR", tmp)
	t.Setenv("ERPLAB_STATE_DIR", filepath.Join(tmp, "state"))
	rep, err := pgcluster.ReapOrphans(context.Background(), io.Discard)
	if err != nil {
		t.Errorf("reap: %v", err)
	}
	left, _ := filepath.Glob(filepath.Join(tmp, "erplab-pg-*"))
	if len(rep.Cleaned) != 1 || len(left) != 0 {
		t.Errorf("reaped %v (failed %v, left alone %v), left %v", rep.Cleaned, rep.Failed, rep.LeftAlone, left)
	}
}
