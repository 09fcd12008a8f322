package main

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/procfs"
)

// tmpfsUnder returns the mount points of erplab's tmpfs mounts
// (erplab-tmpfs-*) directly under dir.
func tmpfsUnder(t *testing.T, dir string) []string {
	t.Helper()
	ms, err := procfs.GetMounts()
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, m := range ms {
		if filepath.Dir(m.MountPoint) == dir && strings.HasPrefix(filepath.Base(m.MountPoint), "erplab-tmpfs-") && m.FSType == "tmpfs" {
			out = append(out, m.MountPoint)
		}
	}
	return out
}

// erplab disk killed with SIGKILL while its tmpfs is mounted and its
// files exist: the next erplab command (here `erplab version`) unmounts
// the tmpfs, removes its mount point and the erplab-disk-* directory on
// the other path, and says so in one line.
func TestKilledDiskLeavesNothing(t *testing.T) {
	if testing.Short() {
		t.Skip("runs erplab disk for a few seconds")
	}
	if os.Geteuid() != 0 {
		t.Skip("erplab disk --tmpfs mounts a tmpfs: needs root")
	}
	dir := t.TempDir()
	tmp, cand, state := filepath.Join(dir, "tmp"), filepath.Join(dir, "cand"), filepath.Join(dir, "state")
	for _, d := range []string{tmp, cand} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	env := []string{"TMPDIR=" + tmp, "ERPLAB_STATE_DIR=" + state}
	t.Cleanup(func() { // never leave a mount behind, whatever failed
		for _, m := range tmpfsUnder(t, tmp) {
			_ = syscall.Unmount(m, syscall.MNT_DETACH)
		}
	})
	cmd := erplab(t, dir, "disk", "--tmpfs", "128M", "--no-macro", "--quick", "--file-size", "16M", "--churn-files", "2000",
		"--duration", "20s", cand)
	cmd.Env = append(cmd.Env, env...)
	var mount string
	ready := func() bool {
		ms := tmpfsUnder(t, tmp)
		if len(ms) != 1 {
			return false
		}
		mount = ms[0]
		a, _ := filepath.Glob(filepath.Join(cand, "erplab-disk-*", "data"))
		b, _ := filepath.Glob(filepath.Join(mount, "erplab-disk-*", "data"))
		if len(a) != 1 || len(b) != 1 {
			return false
		}
		fi, err := os.Stat(b[0])
		return err == nil && fi.Size() == 16<<20 // the tmpfs holds the full data file
	}
	killWhen(t, cmd, "tmpfs and files", 60*time.Second, 50*time.Millisecond, ready)
	if len(tmpfsUnder(t, tmp)) != 1 {
		t.Fatal("the tmpfs went away with the killed process: nothing to test")
	}

	next := erplab(t, dir, "version")
	next.Env = append(next.Env, env...)
	got, err := next.CombinedOutput()
	if err != nil {
		t.Fatalf("erplab version: %v\n%s", err, got)
	}
	line := string(got)
	t.Log(line)
	if ms := tmpfsUnder(t, tmp); len(ms) != 0 {
		t.Errorf("tmpfs still mounted: %v", ms)
	}
	if _, err := os.Stat(mount); !os.IsNotExist(err) {
		t.Errorf("mount point %s left (%v)", mount, err)
	}
	if left, _ := filepath.Glob(filepath.Join(cand, "erplab-*")); len(left) != 0 {
		t.Errorf("left on the candidate path: %v", left)
	}
	for _, want := range []string{"erplab: cleaned up after killed erplab commands: ", "mount " + mount + " (unmounted tmpfs, removed the mount point)",
		"dir " + cand + "/erplab-disk-", "(removed with 16 MiB of files)"} {
		if !strings.Contains(line, want) {
			t.Errorf("output lacks %q:\n%s", want, line)
		}
	}
	if n := strings.Count(line, "cleaned up"); n != 1 {
		t.Errorf("%d cleaning lines, want 1:\n%s", n, line)
	}
	// A third command has nothing to say.
	again := erplab(t, dir, "version")
	again.Env = append(again.Env, env...)
	if got, err := again.CombinedOutput(); err != nil || strings.Contains(string(got), "cleaned") {
		t.Errorf("third command: %v\n%s", err, got)
	}
}
