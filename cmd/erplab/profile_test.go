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
