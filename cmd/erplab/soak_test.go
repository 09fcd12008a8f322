package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/erplab/erplab/internal/results"
	"github.com/erplab/erplab/internal/soak"
)

// soakSection reads extra.soak of the results at path.
func soakSection(t *testing.T, path string) (*results.Document, soak.Section) {
	t.Helper()
	doc, err := results.Read(path)
	if err != nil {
		t.Fatal(err)
	}
	var sec soak.Section
	if err := json.Unmarshal(doc.Extra["soak"], &sec); err != nil {
		t.Fatalf("extra.soak: %v", err)
	}
	return doc, sec
}

// TestSoakWarnsBeforeApdexFalls: a table growing under a scan without an
// index (a pgbench script at a fixed rate, so its p95 grows with the
// table) is a soak degrading within seconds. Always checked: the run ends
// at its duration (exit 0) or at a collapse below 0.7 (exit 9) with the
// results written, its windows in extra.soak, every warning a "degrading
// at" line. How the host degrades is the host's (the scans slow with its
// CPU; a WAL stall on a loaded host can end the run in one window, and
// one run of four at load 8-12 never degraded), so that the warning names
// grow's p95 before a window's APDEX falls below 0.85 is an acceptance
// figure: a failure only with ERPLAB_SOAK_ACCEPT=1 (the rule itself is
// TestDegradingWarns' on a recorded run).
func TestSoakWarnsBeforeApdexFalls(t *testing.T) {
	dsn := srv.NewDatabase(t)
	dir := t.TempDir()
	if _, err := srv.Pool(t, dsn).Exec(t.Context(), "create table grow (v int)"); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(dir, "grow.sql")
	script := "set max_parallel_workers_per_gather = 0;\n\\set r random(1, 1000000)\n" +
		"insert into grow select :r from generate_series(1, 100);\nselect count(*) from grow where v = :r;\n"
	if err := os.WriteFile(file, []byte(script), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "r.json")
	code, text := exitCode(t, erplab(t, dir, "run", "--dsn", dsn, "-f", file, "--target", "grow=100ms", "--users", "8", "--rate", "40",
		"--soak", "--window", "2s", "--duration", "55s", "--stop-on-collapse", "--collapse-apdex", "0.7",
		"--progress", "0", "--probes=false", "--out", out))
	if code != exitOK && code != exitCollapse {
		t.Fatalf("exit %d\n%s", code, text)
	}
	doc, sec := soakSection(t, out)
	if len(sec.Windows) < 10 {
		t.Fatalf("%d soak windows:\n%s", len(sec.Windows), text)
	}
	for _, w := range sec.Warnings {
		if !strings.HasPrefix(w.Line, "degrading at ") || !strings.Contains(text, w.Line) {
			t.Fatalf("warning %q not printed as a degrading line:\n%s", w.Line, text)
		}
	}
	if code == exitCollapse && (sec.Collapse == nil || !strings.HasPrefix(string(doc.Status), "aborted: collapse")) {
		t.Fatalf("exit 9 without a collapse: status %q, %+v", doc.Status, sec.Collapse)
	}
	fell := len(sec.Windows)
	for _, win := range sec.Windows {
		if a, ok := win.Values[soak.KeyApdex]; ok && a < 0.85 {
			fell = win.I
			break
		}
	}
	var w *soak.Warning
	for i := range sec.Warnings {
		if slices.Contains(sec.Warnings[i].Metrics, soak.KeyP95+"grow") {
			w = &sec.Warnings[i]
			break
		}
	}
	if w == nil || w.Window >= fell {
		msg := fmt.Sprintf("no warning naming grow's p95 before window %d's APDEX fell below 0.85 (warnings %+v)", fell, sec.Warnings)
		if os.Getenv("ERPLAB_SOAK_ACCEPT") != "" {
			t.Fatalf("%s:\n%s", msg, text)
		}
		t.Log(msg + "; ERPLAB_SOAK_ACCEPT=1 makes it a failure")
		return
	}
	t.Logf("exit %d, warning at %.0f s (APDEX below 0.85 from window %d): %s", code, w.TS, fell, w.Line)
}

// TestSoakStopOnCollapse: a window whose APDEX is below --collapse-apdex
// (T of 1µs: every execution frustrated) ends the run there: exit 9, the
// summary printed, the results written with status "aborted: collapse
// ..." and extra.soak's collapse naming the window.
func TestSoakStopOnCollapse(t *testing.T) {
	dsn := srv.NewDatabase(t)
	dir := t.TempDir()
	out, file := filepath.Join(dir, "r.json"), filepath.Join(dir, "one.sql")
	if err := os.WriteFile(file, []byte("select 1;\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	code, text := exitCode(t, erplab(t, dir, "run", "--dsn", dsn, "-f", file, "--target", "one=1us", "--users", "2",
		"--soak", "--window", "2s", "--duration", "40s", "--stop-on-collapse", "--progress", "0", "--probes=false", "--out", out))
	if code != exitCollapse || !strings.Contains(text, "integral APDEX") || !strings.Contains(text, "results so far: "+out) {
		t.Fatalf("exit %d, want %d with the summary and where the results are:\n%s", code, exitCollapse, text)
	}
	doc, sec := soakSection(t, out)
	if sec.Collapse == nil || sec.Collapse.Window != 0 || !strings.HasPrefix(string(doc.Status), "aborted: collapse at ") ||
		doc.Totals.Count == 0 || len(sec.Windows) == 0 || doc.EndedAt.Sub(doc.StartedAt).Seconds() > 20 {
		t.Fatalf("status %q, collapse %+v, %d operations, %d windows, %s long:\n%s", doc.Status, sec.Collapse, doc.Totals.Count,
			len(sec.Windows), doc.EndedAt.Sub(doc.StartedAt), text)
	}
}

// TestSoakSurvivesSIGHUP: a soak goes on when its terminal is lost
// (SIGHUP): it ends at its duration, exit 0, status completed, its
// windows after the signal in the results (a run without --soak ends
// "interrupted": TestRunInterruptedBySIGHUP).
func TestSoakSurvivesSIGHUP(t *testing.T) {
	dsn := srv.NewDatabase(t)
	dir := t.TempDir()
	out := filepath.Join(dir, "r.json")
	cmd := erplab(t, dir, "run", "--dsn", dsn, "--workload", "smoke", "--users", "2", "--soak", "--window", "2s", "--duration", "8s",
		"--progress", "0", "--probes=false", "--out", out)
	buf, exited := startCmd(t, cmd)
	waitFor(t, buf, exited, "soak window 0 ")
	if err := cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	<-exited
	text := buf.String()
	if code := cmd.ProcessState.ExitCode(); code != 0 || strings.Contains(text, "interrupted") {
		t.Fatalf("exit %d after SIGHUP, want 0:\n%s", code, text)
	}
	doc, sec := soakSection(t, out)
	if doc.Status != results.StatusCompleted || len(sec.Windows) < 4 {
		t.Fatalf("status %q, %d windows:\n%s", doc.Status, len(sec.Windows), text)
	}
}
