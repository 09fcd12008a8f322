package hostfacts

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// Descendants on the live /proc: a shell this (multi-threaded) test
// process starts and the sleep the shell starts, found through the task
// children files.
func TestDescendantsLive(t *testing.T) {
	f, err := New("", "")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(f.ProcPath("self", "task", strconv.Itoa(os.Getpid()), "children")); err != nil {
		t.Skipf("no task children files on this kernel: %v", err)
	}
	cmd := exec.Command("sh", "-c", "sleep 30 & echo $!; wait")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	buf := make([]byte, 32)
	n, _ := out.Read(buf)
	grandchild, err := strconv.Atoi(strings.TrimSpace(string(buf[:n])))
	if err != nil {
		t.Fatalf("sleep's pid: %q", buf[:n])
	}
	defer func() {
		if p, err := os.FindProcess(grandchild); err == nil {
			_ = p.Kill()
		}
	}()
	got, err := f.Descendants([]int{os.Getpid()})
	if err != nil || !slices.Contains(got, cmd.Process.Pid) || !slices.Contains(got, grandchild) || slices.Contains(got, os.Getpid()) {
		t.Errorf("Descendants = %v (%v), want %d and %d, not the root %d", got, err, cmd.Process.Pid, grandchild, os.Getpid())
	}
	scan, err := f.descendantsByScan([]int{os.Getpid()})
	if err != nil || !slices.Contains(scan, cmd.Process.Pid) || !slices.Contains(scan, grandchild) {
		t.Errorf("descendantsByScan = %v (%v)", scan, err)
	}
}

// A proc tree without task children files (an old kernel, a fixture): one
// scan of every stat file, the tree rebuilt from the PPID fields.
func TestDescendantsByScan(t *testing.T) {
	root := t.TempDir()
	stat := func(pid, ppid int) {
		dir := filepath.Join(root, strconv.Itoa(pid))
		if err := os.MkdirAll(filepath.Join(dir, "task", strconv.Itoa(pid)), 0o755); err != nil {
			t.Fatal(err)
		}
		line := strconv.Itoa(pid) + " (postgres) S " + strconv.Itoa(ppid) + strings.Repeat(" 0", 48) + "\n"
		if err := os.WriteFile(filepath.Join(dir, "stat"), []byte(line), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	stat(1, 0)
	stat(100, 1) // postmaster
	stat(101, 100)
	stat(102, 100)
	stat(103, 102)
	stat(200, 1) // another server
	stat(201, 200)
	f, err := New(root, "")
	if err != nil {
		t.Fatal(err)
	}
	got, err := f.Descendants([]int{100})
	slices.Sort(got)
	if err != nil || !slices.Equal(got, []int{101, 102, 103}) {
		t.Errorf("Descendants(100) = %v (%v), want [101 102 103]", got, err)
	}
}
