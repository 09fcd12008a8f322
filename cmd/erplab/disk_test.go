package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// Bad disk and stress input: one line on stderr, exit code 2.
func TestDiskStressBadFlags(t *testing.T) {
	for _, args := range [][]string{
		{"disk"},
		{"disk", "/nonexistent-dir-x"},
		{"disk", "/dev/shm", "--queue-depth", "1"},
		{"disk", "/dev/shm", "--file-size", "12Q"},
		{"disk", "/dev/shm", "--scale", "-1"},
		{"stress"},
		{"stress", "--vm", "1", "--vm-bytes", "x"},
		{"stress", "--cpu", "1", "--timeout", "-1s"},
		{"stress", "--vm", "1", "--thp", "maybe"},
	} {
		checkUsageError(t, args)
	}
}

// Ctrl-C during erplab disk: exit 130, no erplab-disk-* directory left.
func TestDiskInterruptedCleansUp(t *testing.T) {
	dir := t.TempDir()
	cmd := erplab(t, dir, "disk", dir, "--no-macro", "--duration", "3s", "--file-size", "8M", "--churn-files", "500")
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(stderr)
	var lines []string
	for sc.Scan() { // the first finished pattern
		lines = append(lines, sc.Text())
		break
	}
	cmd.Process.Signal(syscall.SIGINT)
	for sc.Scan() {
		lines = append(lines, sc.Text())
	}
	err = cmd.Wait()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != exitInterrupted {
		t.Fatalf("exit %v, want %d\n%s", err, exitInterrupted, strings.Join(lines, "\n"))
	}
	if m, _ := filepath.Glob(filepath.Join(dir, "erplab-disk-*")); len(m) != 0 {
		t.Errorf("left behind: %v", m)
	}
}

// --tmpfs mounts a tmpfs, measures it and unmounts it; --json parses.
func TestDiskOwnTmpfsJSON(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root")
	}
	cmd := erplab(t, t.TempDir(), "disk", "--tmpfs", "64M", "--no-macro", "--json", "-q",
		"--duration", "100ms", "--file-size", "4M", "--churn-files", "200")
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%v: %s", err, stderr.String())
	}
	var rep diskReport
	if err := json.Unmarshal(out, &rep); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if len(rep.Micro) != 1 || rep.Micro[0].FSType != "tmpfs" || len(rep.Micro[0].Results) == 0 {
		t.Fatalf("report: %+v", rep)
	}
	mounts, err := os.ReadFile("/proc/self/mounts")
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(mounts), rep.Micro[0].Path) {
		t.Errorf("%s still mounted", rep.Micro[0].Path)
	}
	if _, err := os.Stat(rep.Micro[0].Path); !os.IsNotExist(err) {
		t.Errorf("mount point %s left: %v", rep.Micro[0].Path, err)
	}
}

// erplab stress --json: the cpu worker's time is user time.
func TestStressJSON(t *testing.T) {
	cmd := erplab(t, t.TempDir(), "stress", "--cpu", "1", "--timeout", "1s", "--json", "-q")
	out, err := cmd.Output()
	if err != nil {
		t.Fatal(err)
	}
	var rep struct {
		Workers []struct {
			Kind    string  `json:"kind"`
			UserS   float64 `json:"user_s"`
			SystemS float64 `json:"system_s"`
		} `json:"workers"`
	}
	if err := json.Unmarshal(out, &rep); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if len(rep.Workers) != 1 || rep.Workers[0].Kind != "cpu" || rep.Workers[0].UserS <= rep.Workers[0].SystemS {
		t.Errorf("workers: %+v", rep.Workers)
	}
}
