package hostfacts

import (
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

func open(t *testing.T, tree string) FS {
	t.Helper()
	f, err := New("testdata/"+tree+"/proc", "testdata/"+tree+"/sys")
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// Every reader on the golden tree: the values of its files.
func TestGoldenTree(t *testing.T) {
	f := open(t, "golden")
	mi, err := f.Meminfo()
	if err != nil || deref(mi.MemTotalBytes) != 16318600*1024 || deref(mi.SwapTotalBytes) != 2097148*1024 || deref(mi.HugepagesizeBytes) != 2048*1024 {
		t.Errorf("meminfo: %v", err)
	}
	st, err := f.Stat()
	if err != nil || len(st.CPU) != 4 || st.ContextSwitches != 21526392 || st.ProcessesRunning != 3 || st.ProcessesBlocked != 1 {
		t.Fatalf("stat: %+v %v", st, err)
	}
	// procfs divides by USER_HZ (100): 10132153 ticks = 101321.53 s.
	if st.CPUTotal.User != 101321.53 || st.CPUTotal.Idle != 468284.83 {
		t.Errorf("stat cpu line: %+v", st.CPUTotal)
	}
	vm, err := f.VMStat("pgmajfault", "pswpin", "pswpout", "thp_fault_alloc", "compact_stall", "absent")
	if err != nil || vm["pgmajfault"] != 4321 || vm["pswpin"] != 17 || vm["pswpout"] != 42 || vm["thp_fault_alloc"] != 1200 || vm["compact_stall"] != 7 || len(vm) != 5 {
		t.Errorf("vmstat: %v %v", vm, err)
	}
	if v, err := f.Sysctl("vm", "overcommit_memory"); err != nil || v != 2 {
		t.Errorf("overcommit_memory: %d %v", v, err)
	}
	if v, err := f.Sysctl("vm", "overcommit_ratio"); err != nil || v != 80 {
		t.Errorf("overcommit_ratio: %d %v", v, err)
	}
	if w, err := f.THP("enabled"); err != nil || w != "never" {
		t.Errorf("thp enabled: %q %v", w, err)
	}
	if w, err := f.THP("defrag"); err != nil || w != "madvise" {
		t.Errorf("thp defrag: %q %v", w, err)
	}
	if f.ProcRoot() != "testdata/golden/proc" || f.SysRoot() != "testdata/golden/sys" ||
		f.THPPath("enabled") != "testdata/golden/sys/kernel/mm/transparent_hugepage/enabled" {
		t.Errorf("roots %q %q", f.ProcRoot(), f.SysRoot())
	}
}

// The malformed tree breaks stat, vmstat, overcommit_memory and the THP
// enabled file: each reader fails with an error naming its file, and the
// sound files of the same tree (meminfo, overcommit_ratio, defrag, the
// kernel strings) still read.
func TestMalformedTree(t *testing.T) {
	f := open(t, "malformed")
	wantErr := func(what string, err error, file string, more ...string) {
		t.Helper()
		if err == nil {
			t.Errorf("%s: no error", what)
			return
		}
		for _, s := range append([]string{file}, more...) {
			if !strings.Contains(err.Error(), s) {
				t.Errorf("%s: error %q does not name %q", what, err, s)
			}
		}
		if errors.Is(err, fs.ErrNotExist) {
			t.Errorf("%s: a malformed file reported as missing: %v", what, err)
		}
	}
	_, err := f.Stat()
	wantErr("stat", err, "testdata/malformed/proc/stat")
	_, err = f.VMStat("pgmajfault", "thp_fault_alloc")
	wantErr("vmstat", err, "testdata/malformed/proc/vmstat", "thp_fault_alloc")
	_, err = f.Sysctl("vm", "overcommit_memory")
	wantErr("overcommit_memory", err, "testdata/malformed/proc/sys/vm/overcommit_memory", "not an integer")
	_, err = f.THP("enabled")
	wantErr("thp enabled", err, "testdata/malformed/sys/kernel/mm/transparent_hugepage/enabled", "no bracketed mode")
	_, err = f.Host()
	wantErr("host", err, "transparent_hugepage/enabled")

	if mi, err := f.Meminfo(); err != nil || deref(mi.MemTotalBytes) != 16318600*1024 {
		t.Errorf("meminfo beside broken files: %v", err)
	}
	if v, err := f.Sysctl("vm", "overcommit_ratio"); err != nil || v != 50 {
		t.Errorf("overcommit_ratio beside a broken overcommit_memory: %d %v", v, err)
	}
	if w, err := f.THP("defrag"); err != nil || w != "never" {
		t.Errorf("defrag beside a broken enabled: %q %v", w, err)
	}
	if s, err := Line(f.ProcPath("sys", "kernel", "hostname")); err != nil || s != "erp-db-01" {
		t.Errorf("hostname: %q %v", s, err)
	}
}

// A meminfo with a non-numeric value is an error naming it; stat and
// vmstat of the same tree read, and missing files are fs.ErrNotExist.
func TestBadMeminfoAndMissingFiles(t *testing.T) {
	f := open(t, "badmeminfo")
	if _, err := f.Meminfo(); err == nil || !strings.Contains(err.Error(), "testdata/badmeminfo/proc/meminfo") {
		t.Errorf("meminfo: %v", err)
	}
	if st, err := f.Stat(); err != nil || st.ContextSwitches != 21526392 {
		t.Errorf("stat beside a broken meminfo: %v", err)
	}
	if vm, err := f.VMStat("pswpout"); err != nil || vm["pswpout"] != 42 {
		t.Errorf("vmstat beside a broken meminfo: %v %v", vm, err)
	}
	if v, err := f.Sysctl("vm", "overcommit_memory"); err != nil || v != 1 {
		t.Errorf("overcommit_memory: %d %v", v, err)
	}
	for what, err := range map[string]error{
		"thp":      second(f.THP("enabled")),
		"ratio":    second(f.Sysctl("vm", "overcommit_ratio")),
		"cpuinfo":  second(f.CPUInfo()),
		"hostname": second(Line(f.ProcPath("sys", "kernel", "hostname"))),
	} {
		if !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("%s: missing file gives %v, want fs.ErrNotExist", what, err)
		}
	}
	if _, err := New("testdata/absent/proc", ""); err == nil || !strings.Contains(err.Error(), "testdata/absent/proc") {
		t.Errorf("absent proc root: %v", err)
	}
}

func second[T any](_ T, err error) error { return err }

func deref(p *uint64) uint64 {
	if p == nil {
		return 0
	}
	return *p
}

// ProcStat and ChildPIDs on the live /proc: this test process and the
// child it starts.
func TestLiveProcesses(t *testing.T) {
	f, err := New("", "")
	if err != nil {
		t.Fatal(err)
	}
	st, err := f.ProcStat(os.Getpid())
	if err != nil || st.PID != os.Getpid() || st.PPID != os.Getppid() {
		t.Fatalf("own stat: %+v %v", st, err)
	}
	cmd := exec.Command("sleep", "30")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	kids, err := f.ChildPIDs(os.Getpid())
	if err != nil || !slices.Contains(kids, cmd.Process.Pid) {
		t.Errorf("children %v (%v), want %d among them", kids, err, cmd.Process.Pid)
	}
	if _, err := f.ProcStat(1 << 30); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("absent pid: %v, want fs.ErrNotExist", err)
	}
}
