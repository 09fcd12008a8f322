package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// `erplab pgbench` through the binary: pgbench's own messages and exit
// statuses, nothing of erplab's error line; a run on the given server
// prints pgbench's report, then erplab's lines, and writes the results.
func TestPgbenchCommand(t *testing.T) {
	dir := t.TempDir()
	code, text := exitCode(t, erplab(t, dir, "pgbench", "-c", "three"))
	if code != 1 || strings.TrimSpace(text) != `pgbench: error: invalid value "three" for option -c/--clients` {
		t.Fatalf("exit %d:\n%s", code, text)
	}
	code, text = exitCode(t, erplab(t, dir, "pgbench", "--help"))
	if code != 0 || !strings.Contains(text, "Initialization options:") {
		t.Fatalf("--help: exit %d:\n%s", code, text)
	}
	dsn := srv.NewDatabase(t)
	out := filepath.Join(dir, "r.json")
	if code, text := exitCode(t, pgbenchCmd(t, dir, dsn, nil, "-i", "-q")); code != 0 || !strings.Contains(text, "done in ") {
		t.Fatalf("-i: exit %d:\n%s", code, text)
	}
	code, text = exitCode(t, pgbenchCmd(t, dir, dsn, []string{"ERPLAB_PGBENCH_OUT=" + out}, "-c2", "-t", "3", "-S"))
	if code != 0 || !strings.Contains(text, "number of transactions actually processed: 6/6") ||
		!strings.Contains(text, "erplab: results: "+out) || strings.Contains(text, "erplab: error") {
		t.Fatalf("run: exit %d:\n%s", code, text)
	}
	if _, err := os.Stat(out); err != nil {
		t.Fatalf("results: %v", err)
	}
}

func passfileOf(dsn string) string {
	for _, f := range strings.Fields(dsn) {
		if v, ok := strings.CutPrefix(f, "passfile="); ok {
			return v
		}
	}
	return ""
}
