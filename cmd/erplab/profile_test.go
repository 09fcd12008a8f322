package main

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/erplab/erplab/internal/pgtest"
)

func TestProfileUsageAndCannotRun(t *testing.T) {
	checkUsageError(t, []string{"profile", "--duration", "0s"})
	checkUsageError(t, []string{"profile", "--freq", "0"})
	checkUsageError(t, []string{"profile", "--pid", "-3"})
	// perf missing: one line naming the package, exit 1.
	cmd := erplab(t, t.TempDir(), "profile", "--pid", "1", "--duration", "1s", "--perf", filepath.Join(t.TempDir(), "perf"))
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	var ee *exec.ExitError
	msg := strings.TrimSpace(stderr.String())
	if !errors.As(err, &ee) || ee.ExitCode() != exitError || strings.Contains(msg, "\n") || !strings.Contains(msg, "apt-get install linux-perf") || len(out) != 0 {
		t.Errorf("no perf: %v, stderr %q, stdout %q", err, msg, out)
	}
}

// --svg and --folded are created before perf starts: a bad path is
// found at once (here before perf is even looked for), and the file made
// for the other flag is not left behind.
func TestProfileOutputsCheckedFirst(t *testing.T) {
	dir := t.TempDir()
	svg, folded := filepath.Join(dir, "taken.svg"), filepath.Join(dir, "stacks.txt")
	if err := os.WriteFile(svg, []byte("mine"), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := erplab(t, dir, "profile", "--pid", "1", "--duration", "1s", "--perf", filepath.Join(dir, "perf"), "--folded", folded, "--svg", svg)
	b, err := cmd.CombinedOutput()
	msg := strings.TrimSpace(string(b))
	if exitOf(err) != exitError || !strings.Contains(msg, svg+" exists") || strings.Contains(msg, "perf") {
		t.Errorf("--svg an existing file: %v, %q; want exit %d naming %s before perf", err, msg, exitError, svg)
	}
	if _, err := os.Lstat(folded); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("--folded %s left behind: %v", folded, err)
	}
	if b, _ := os.ReadFile(svg); string(b) != "mine" {
		t.Errorf("--svg's existing file changed: %q", b)
	}
}

// erplab profile on the test server: tables printed, folded stacks and a
// flame graph written.
func TestProfileCommand(t *testing.T) {
	dsn := srv.DSN(t, "postgres")
	pgtest.NeedPerf(t)
	dir := t.TempDir()
	cmd := erplab(t, dir, "profile", "--dsn", dsn, "--duration", "2s", "--svg", "f.svg", "--folded", "f.txt")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	for _, want := range []string{"profiling processes [", "subsystem", "file system", "flame graph: f.svg"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	svg, err := os.ReadFile(filepath.Join(dir, "f.svg"))
	if err != nil || !strings.HasPrefix(string(svg), "<svg") || strings.Contains(string(svg), "<script") {
		t.Errorf("flame graph: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "f.txt")); err != nil {
		t.Error(err)
	}
}
