package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/erplab/erplab/internal/leftover"
)

// Any command first undoes what a killed erplab left in its record: here
// the directory of a throwaway server whose erplab died, said in one line.
func TestCommandSweepsLeftovers(t *testing.T) {
	t.Setenv(leftover.EnvStateDir, filepath.Join(t.TempDir(), "state"))
	rec, err := leftover.Open()
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "erplab-pg-0123456789ab")
	e, err := rec.Add("pgcluster", dir, map[string]any{"server_uid": os.Geteuid(), "server_gid": os.Getegid(), "postgres": "/nonexistent/postgres"})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(dir, "data"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "erplab.owner"), []byte(e.Token+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	dead := exec.Command("true")
	if err := dead.Run(); err != nil {
		t.Fatal(err)
	}
	e.Owner = leftover.Process{PID: dead.Process.Pid, Start: 1}
	if err := rec.Update(e, nil); err != nil {
		t.Fatal(err)
	}

	out, err := runRoot(t, "version")
	if err != nil {
		t.Fatal(err)
	}
	want := "erplab: cleaned up after killed erplab commands: pgcluster " + dir + " (directory removed)\n"
	if !strings.Contains(out, want) {
		t.Errorf("output lacks %q:\n%s", want, out)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("%s still there", dir)
	}
	if entries, _ := rec.Entries(); len(entries) != 0 {
		t.Errorf("entries left: %v", entries)
	}
	// Nothing left: the next command says nothing about it.
	if out, _ := runRoot(t, "version"); strings.Contains(out, "cleaned up") {
		t.Errorf("second command: %s", out)
	}
}
