package doctor

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// pileUp is a real run (erplab run -f adv.sql --users 20 --think 100ms
// --interval 2s --duration 70s): each operation takes an advisory lock in
// shared mode; from about 35 s to 50 s another session held it in
// exclusive mode, so every VU queued on Lock:advisory at flat CPU.
const pileUp = "testdata/results/pileup.json"

func runWindow(t *testing.T, path, at string, window time.Duration) *Report {
	t.Helper()
	rep, err := RunResults(context.Background(), ResultsOptions{Path: path, At: at, Window: window})
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

// TestResultsWindowPileUp: the window at the turn names the lock queue as
// the cause, from the waits and the storm detector, with the stalled
// load; a steady window before it has no finding.
func TestResultsWindowPileUp(t *testing.T) {
	rep := runWindow(t, pileUp, "50s", 15*time.Second)
	for _, id := range []string{"window-waits", "window-storms", "window-apdex"} {
		if f := rep.Find(id); f == nil || f.Severity != Warning {
			t.Errorf("%s at the turn: %+v, want a warning", id, f)
		}
	}
	if f := rep.Find("window-waits"); f != nil && !strings.Contains(f.Summary, "in 35s-50s: Lock:advisory 0.0 -> ") {
		t.Errorf("window-waits summary %q, want the window's Lock:advisory figures", f.Summary)
	}
	if c := rep.Window.Cause; !strings.Contains(c, "Lock:advisory") || !strings.HasSuffix(c, "(window-waits)") {
		t.Errorf("cause %q, want Lock:advisory from window-waits", c)
	}
	if f := rep.Find("window-horizon"); f == nil || f.Severity != OK || f.Metrics["oldest_xact_s_window"] < 5 {
		t.Errorf("window-horizon: %+v, want ok with the blocker's open transaction", f)
	}
	steady := runWindow(t, pileUp, "30s", 15*time.Second)
	if steady.Worst != OK || steady.Window.Cause != "none: no finding in the window" {
		t.Errorf("steady window: worst %s, cause %q\n%s", steady.Worst, steady.Window.Cause, Text(steady))
	}
}

// TestResultsWindowStream: a killed run's stream (no summary line) of
// the format before the samples were streamed keeps the intervals only:
// the stall is found, the observers' checks say what is not recorded.
func TestResultsWindowStream(t *testing.T) {
	b, err := os.ReadFile(strings.TrimSuffix(pileUp, ".json") + ".jsonl")
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.SplitAfter(strings.TrimSuffix(string(b), "\n"), "\n")
	killed := filepath.Join(t.TempDir(), "killed.jsonl")
	if err := os.WriteFile(killed, []byte(strings.Join(lines[:len(lines)-1], "")), 0o600); err != nil {
		t.Fatal(err)
	}
	rep := runWindow(t, killed, "50s", 15*time.Second)
	if f := rep.Find("window-apdex"); f == nil || f.Severity != Warning {
		t.Errorf("window-apdex of the stream: %+v, want a warning", f)
	}
	if f := rep.Find("window-waits"); f == nil || f.Severity != NotChecked || !strings.Contains(f.Needs, "stream written before erplab streamed the samples") {
		t.Errorf("window-waits of the stream: %+v, want not checked for want of observations", f)
	}
	if len(rep.Window.NotRecorded) != 1 || !strings.HasPrefix(rep.Window.Cause, "none recorded: ") {
		t.Errorf("not recorded %q, cause %q", rep.Window.NotRecorded, rep.Window.Cause)
	}
}

// pileUpKilled is a real run killed with SIGKILL in its pile-up (erplab
// run -f adv.sql --users 20 --think 100ms --interval 2s --duration 70s,
// another session holding the advisory lock in exclusive mode from about
// 32 s, kill -9 at 48 s): a stream without a summary whose interval lines
// carry the samples and the storm.
const pileUpKilled = "testdata/results/pileup-killed.jsonl"

// TestResultsWindowKilledStream: the killed run's stream is judged as a
// finished run's document: the window at the kill names Lock:advisory
// from the streamed samples (window-waits) and the streamed storm, and
// nothing is said not recorded.
func TestResultsWindowKilledStream(t *testing.T) {
	rep := runWindow(t, pileUpKilled, "46s", 10*time.Second)
	for _, id := range []string{"window-waits", "window-storms", "window-apdex"} {
		if f := rep.Find(id); f == nil || f.Severity != Warning {
			t.Errorf("%s at the kill: %+v, want a warning", id, f)
		}
	}
	if f := rep.Find("window-waits"); f != nil && !strings.Contains(f.Summary, "in 36s-46s: Lock:advisory 1.1 -> 20.0 sessions") {
		t.Errorf("window-waits summary %q, want the window's Lock:advisory figures", f.Summary)
	}
	if c := rep.Window.Cause; !strings.Contains(c, "Lock:advisory") || !strings.HasSuffix(c, "(window-waits)") || len(rep.Window.NotRecorded) != 0 {
		t.Errorf("cause %q, not recorded %q: want Lock:advisory from window-waits, all recorded", c, rep.Window.NotRecorded)
	}
	if rep.Window.RunS != 48 || rep.Server.Database != "postgres" {
		t.Errorf("run of %g s on database %q, want 48 s (the last sample) on postgres", rep.Window.RunS, rep.Server.Database)
	}
}

// TestResultsWindowErrors: a bad --at or --window is a one-line
// WindowError naming the run's span.
func TestResultsWindowErrors(t *testing.T) {
	for _, c := range []struct {
		at     string
		window time.Duration
		want   string
	}{
		{"soon", 0, `--at "soon": want a time since the run's start (41m, 1h2m3s) or a clock time (12:03:05): the run goes from `},
		{"2h", 0, `--at "2h" is after the run's end: the run goes from `},
		{"0s", 0, `--at "0s" is at or before the run's start`},
		{"23:59:59", 0, `is after the run's end`},
		{"40s", -time.Second, "--window must be > 0"},
	} {
		_, err := RunResults(context.Background(), ResultsOptions{Path: pileUp, At: c.at, Window: c.window})
		var we *WindowError
		if !errors.As(err, &we) || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("--at %s --window %s: %v, want a WindowError with %q", c.at, c.window, err, c.want)
		}
	}
}

// TestResultsWindowCatalog: a real run (-f adv.sql --users 4 --duration
// 60s --interval 2s) during which, from about 30 s, one session created
// and dropped 4,000 temp tables of ten columns in one transaction: the
// window names the catalogs' growth, pg_attribute first.
func TestResultsWindowCatalog(t *testing.T) {
	rep := runWindow(t, "testdata/results/churn.json", "45s", 15*time.Second)
	f := rep.Find("window-catalog")
	if f == nil || f.Severity != Warning || !strings.Contains(f.Summary, "before 0 B/min): pg_attribute +") || !strings.HasSuffix(rep.Window.Cause, "(window-catalog)") {
		t.Errorf("window-catalog: %+v, cause %q", f, rep.Window.Cause)
	}
}

// TestResultsWindowRecorded: other packages' recorded runs: a temp
// tablespace that filled (results' tempfull-run.json) is the critical
// cause; steady catalog cache resets counted by run --probes (report's
// inval-erp.json) are quoted and judged steady.
func TestResultsWindowRecorded(t *testing.T) {
	rep := runWindow(t, "../results/testdata/tempfull-run.json", "3s", 2*time.Second)
	f := rep.Find("window-temp-full")
	if f == nil || f.Severity != Critical || !strings.Contains(f.Summary, "156 disk_full errors (before: 45) writing a temp file") || !strings.HasSuffix(rep.Window.Cause, "(window-temp-full)") {
		t.Errorf("window-temp-full: %+v, cause %q", f, rep.Window.Cause)
	}
	rep = runWindow(t, "../report/testdata/inval-erp.json", "30s", 10*time.Second)
	if f := rep.Find("window-invalidation"); f == nil || f.Severity != OK || f.Metrics["resets_per_s_window"] < 2 || f.Metrics["resets_per_s_before"] < 2 {
		t.Errorf("window-invalidation of steady resets: %+v", f)
	}
}
