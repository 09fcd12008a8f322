package hostfacts

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"github.com/prometheus/procfs"
)

func TestVMStat(t *testing.T) {
	p := filepath.Join(t.TempDir(), "vmstat")
	os.WriteFile(p, []byte("nr_free_pages 100\nthp_fault_alloc 42\ncompact_stall 7\n"), 0o644)
	m, err := VMStat(p, "thp_fault_alloc", "compact_stall", "absent")
	if err != nil || m["thp_fault_alloc"] != 42 || m["compact_stall"] != 7 || len(m) != 2 {
		t.Fatalf("%v %v", m, err)
	}
	os.WriteFile(p, []byte("thp_fault_alloc x\n"), 0o644)
	if _, err := VMStat(p, "thp_fault_alloc"); err == nil {
		t.Fatal("bad value accepted")
	}
	// the live file has the THP counters on this kernel
	if m, err := VMStat("/proc/vmstat", "pgfault"); err != nil || m["pgfault"] == 0 {
		t.Fatalf("live vmstat: %v %v", m, err)
	}
}

func TestSelected(t *testing.T) {
	for in, want := range map[string]string{
		"always [madvise] never\n": "madvise", "[always] madvise never": "always", "always madvise [never]": "never",
		"always madvise never": "", "": ""} {
		if got := Selected(in); got != want {
			t.Errorf("%q: %q, want %q", in, got, want)
		}
	}
}

func TestSplit(t *testing.T) {
	a := procfs.CPUStat{User: 100, System: 50, Idle: 800, Iowait: 50}
	b := procfs.CPUStat{User: 160, System: 70, Idle: 900, Iowait: 70, SoftIRQ: 10}
	// deltas: user 60, system 20, idle 100, iowait 20, softirq 10 = 210
	c := Split(a, b)
	if c.User != 28.57 || c.System != 9.52 || c.SoftIRQ != 4.76 || c.Busy != 42.86 {
		t.Fatalf("%+v", c)
	}
	if (Split(b, b) != CPU{}) {
		t.Fatal("zero interval not zero")
	}
}

// THP reads the bracketed word of a THP control file (moved from stress's
// TestBracketed); a missing file is "" and fs.ErrNotExist.
func TestTHPFile(t *testing.T) {
	f, err := New("testdata/golden/proc", sysWithTHP(t, "always [madvise] never\n"))
	if err != nil {
		t.Fatal(err)
	}
	if got, err := f.THP("enabled"); err != nil || got != "madvise" {
		t.Errorf("THP(enabled) = %q, %v", got, err)
	}
	if got, err := f.THP("missing"); got != "" || !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("missing file: %q, %v", got, err)
	}
}

// sysWithTHP returns a sys root whose transparent_hugepage/enabled holds
// body.
func sysWithTHP(t *testing.T, body string) string {
	t.Helper()
	sys := t.TempDir()
	thp := filepath.Join(sys, "kernel", "mm", "transparent_hugepage")
	if err := os.MkdirAll(thp, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(thp, "enabled"), []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return sys
}
