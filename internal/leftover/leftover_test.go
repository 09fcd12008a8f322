package leftover

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// testKind removes a directory holding a "marker" file with the token, and
// refuses one without.
var testKind = Kind{
	Name: "test-dir",
	Undo: func(_ context.Context, e Entry) (string, error) {
		b, err := os.ReadFile(filepath.Join(e.Path, "marker"))
		if errors.Is(err, os.ErrNotExist) {
			if _, err := os.Stat(e.Path); errors.Is(err, os.ErrNotExist) {
				return "", nil
			}
		}
		if string(b) != e.Token {
			return "", fmt.Errorf("no marker with the token: %w", ErrNotOurs)
		}
		if strings.HasSuffix(e.Path, "stuck") {
			return "", errors.New("device busy")
		}
		if strings.HasSuffix(e.Path, "byhand") {
			return "", fmt.Errorf("no password: %w: rm -r %s", ErrByHand, e.Path)
		}
		return "removed", os.RemoveAll(e.Path)
	},
}

func init() { Register(testKind) }

// deadProcess returns a Process that has exited.
func deadProcess(t *testing.T) Process {
	t.Helper()
	cmd := exec.Command("true")
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	return Process{PID: cmd.Process.Pid, Start: 1}
}

func TestRecordSweep(t *testing.T) {
	rec, err := OpenDir(filepath.Join(t.TempDir(), "rec"))
	if err != nil {
		t.Fatal(err)
	}
	base := t.TempDir()
	mk := func(name string, marker bool) *Entry {
		path := filepath.Join(base, name)
		e, err := rec.Add(testKind.Name, path, map[string]int{"n": 1})
		if err != nil {
			t.Fatal(err)
		}
		if err := os.Mkdir(path, 0o700); err != nil {
			t.Fatal(err)
		}
		if marker {
			if err := os.WriteFile(filepath.Join(path, "marker"), []byte(e.Token), 0o600); err != nil {
				t.Fatal(err)
			}
		}
		return e
	}
	orphan := mk("orphan", true)
	forged := mk("forged", false)
	stuck := mk("stuck", true)
	live := mk("live", true)
	byHand := mk("byhand", true)
	gone, err := rec.Add(testKind.Name, filepath.Join(base, "never-created"), nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range []*Entry{orphan, forged, stuck, gone, byHand} {
		e.Owner = deadProcess(t)
		if err := rec.Update(e, nil); err != nil {
			t.Fatal(err)
		}
	}
	// The entry file is private and names the path before the sweep.
	st, err := os.Stat(filepath.Join(rec.Dir(), orphan.ID+".json"))
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("entry file: %v %v", st, err)
	}

	rep := rec.Sweep(context.Background())
	line := rep.Line()
	t.Log(line)
	if _, err := os.Stat(orphan.Path); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("orphan %s not removed", orphan.Path)
	}
	for _, keep := range []*Entry{forged, stuck, live, byHand} {
		if _, err := os.Stat(keep.Path); err != nil {
			t.Errorf("%s was removed", keep.Path)
		}
	}
	for _, want := range []string{
		"cleaned up after killed erplab commands: test-dir " + orphan.Path + " (removed)",
		"could not clean up (will retry): test-dir " + stuck.Path + " (device busy)",
		forged.Path + " (no marker with the token: cannot prove erplab created it)",
		"to remove by hand: test-dir " + byHand.Path + " (no password: remove it by hand: rm -r " + byHand.Path + ")",
	} {
		if !strings.Contains(line, want) {
			t.Errorf("line lacks %q:\n%s", want, line)
		}
	}
	if strings.Contains(line, "never-created") || strings.Contains(line, live.Path) || strings.Contains(line, "\n") {
		t.Errorf("line: %q", line)
	}
	left, err := rec.Entries()
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, e := range left {
		ids = append(ids, e.ID)
	}
	if want := []string{stuck.ID, live.ID}; strings.Join(ids, ",") != strings.Join(want, ",") {
		t.Errorf("entries left %v, want %v (stuck, live)", ids, want)
	}
	if string(left[1].Data) != `{"n":1}` {
		t.Errorf("data %s", left[1].Data)
	}
	if err := rec.Remove(live); err != nil {
		t.Fatal(err)
	}
	if err := rec.Remove(live); err != nil {
		t.Fatalf("second Remove: %v", err)
	}
}

func TestStateDirRefusesShared(t *testing.T) {
	d := filepath.Join(t.TempDir(), "state")
	if err := os.Mkdir(d, 0o777); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(d, 0o777); err != nil {
		t.Fatal(err)
	}
	t.Setenv(EnvStateDir, d)
	if _, err := StateDir(); err == nil || !strings.Contains(err.Error(), "mode 0700") {
		t.Fatalf("StateDir on a 0777 directory: %v", err)
	}
	if err := os.Chmod(d, 0o700); err != nil {
		t.Fatal(err)
	}
	if got, err := StateDir(); err != nil || got != d {
		t.Fatalf("StateDir = %q, %v", got, err)
	}
}

func TestProcessAlive(t *testing.T) {
	self, err := ProcessOf(os.Getpid())
	if err != nil || !self.Alive() {
		t.Fatalf("self %v alive=%v err=%v", self, self.Alive(), err)
	}
	if (Process{PID: self.PID, Start: self.Start + 1}).Alive() {
		t.Error("a process with another start time counts as alive (PID reuse)")
	}
	if deadProcess(t).Alive() {
		t.Error("exited process counts as alive")
	}
}

// TestZombieNotAlive: a killed process whose parent has not yet waited
// for it (a zombie, as after kill -9 of a command a shell has not reaped)
// is dead to the sweep.
func TestZombieNotAlive(t *testing.T) {
	cmd := exec.Command("sleep", "60")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Wait() //nolint:errcheck // reaped at the end
	p, err := ProcessOf(cmd.Process.Pid)
	if err != nil || !p.Alive() {
		t.Fatalf("running child %v: alive=%v err=%v", p, p.Alive(), err)
	}
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(time.Minute)
	for p.Alive() && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if p.Alive() {
		t.Error("a killed, unreaped child (zombie) counts as alive")
	}
}
