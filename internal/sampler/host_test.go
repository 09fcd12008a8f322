package sampler

import (
	"github.com/erplab/erplab/internal/hostfacts"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/erplab/erplab/internal/runenv"
)

// Fixture /proc files in the kernel's formats (proc(5)); two /proc/stat
// readings 1 s apart.
const (
	fixtureStat1 = `cpu  1000 50 500 8000 100 10 20 5 0 0
cpu0 500 25 250 4000 50 5 10 3 0 0
cpu1 500 25 250 4000 50 5 10 2 0 0
intr 123456 0 9 0 0 0
ctxt 1000000
btime 1700000000
processes 5000
procs_running 3
procs_blocked 1
softirq 5000 0 100 0 0 0 0 0 0 0 0
`
	// Deltas (USER_HZ ticks): user 600, nice 0, system 300, idle 400,
	// iowait 100, irq 0, softirq 40, steal 60; total 1500.
	fixtureStat2 = `cpu  1600 50 800 8400 200 10 60 65 0 0
cpu0 800 25 400 4200 100 5 30 33 0 0
cpu1 800 25 400 4200 100 5 30 32 0 0
intr 123999 0 9 0 0 0
ctxt 1005000
btime 1700000000
processes 5010
procs_running 7
procs_blocked 2
softirq 5100 0 150 0 0 0 0 0 0 0 0
`
	fixtureMeminfo = `MemTotal:       16384000 kB
MemFree:         1000000 kB
MemAvailable:    8000000 kB
Buffers:          100000 kB
Cached:          4000000 kB
SwapCached:            0 kB
SwapTotal:       2000000 kB
SwapFree:        1500000 kB
Dirty:              2048 kB
Shmem:            300000 kB
AnonHugePages:    204800 kB
`
	fixtureVMStat1 = `nr_free_pages 250000
pgmajfault 100
compact_stall 7
thp_fault_alloc 1000
thp_fault_fallback 20
thp_collapse_alloc 5
`
	fixtureVMStat2 = `nr_free_pages 240000
pgmajfault 130
compact_stall 17
thp_fault_alloc 1400
thp_fault_fallback 22
thp_collapse_alloc 5
`
)

func writeProc(t *testing.T, dir, stat, vmstat string) {
	t.Helper()
	for name, body := range map[string]string{"stat": stat, "meminfo": fixtureMeminfo, "vmstat": vmstat} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func TestHostFixture(t *testing.T) {
	dir := t.TempDir()
	writeProc(t, dir, fixtureStat1, fixtureVMStat1)
	h, err := newHostReader(dir)
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Unix(1700000000, 0)
	first, err := h.read(t0)
	if err != nil {
		t.Fatal(err)
	}
	if first.Rates || first.CPU != (CPU{}) {
		t.Errorf("first reading has rates: %+v", first.CPU)
	}
	writeProc(t, dir, fixtureStat2, fixtureVMStat2)
	got, err := h.read(t0.Add(2 * time.Second))
	if err != nil {
		t.Fatal(err)
	}
	wantCPU := CPU{User: 40, Nice: 0, System: 20, Iowait: 6.67, IRQ: 0, SoftIRQ: 2.67, Steal: 4, Idle: 26.67, Busy: 66.67}
	if got.CPU != wantCPU {
		t.Errorf("CPU split\n got %+v\nwant %+v", got.CPU, wantCPU)
	}
	wantMem := Mem{Total: 16384000 << 10, Available: 8000000 << 10, Cached: 4100000 << 10, Dirty: 2048 << 10,
		Shmem: 300000 << 10, AnonHugePages: 204800 << 10, SwapUsed: 500000 << 10}
	if got.Mem != wantMem {
		t.Errorf("memory\n got %+v\nwant %+v", got.Mem, wantMem)
	}
	// Rates over the 2 s between the readings.
	wantVM := VM{THPFaultAlloc: 200, THPFaultFallback: 1, THPCollapseAlloc: 0, CompactStall: 5, PgMajFault: 15}
	if got.VM != wantVM {
		t.Errorf("vmstat rates\n got %+v\nwant %+v", got.VM, wantVM)
	}
	if got.ContextSwitchesPerS != 2500 || got.ProcsRunning != 7 || got.ProcsBlocked != 2 {
		t.Errorf("ctxt/s %v running %d blocked %d, want 2500 7 2", got.ContextSwitchesPerS, got.ProcsRunning, got.ProcsBlocked)
	}
	if len(got.Counters.PerCPU) != 2 || got.Counters.PerCPU[1].Steal != 0.32 {
		t.Errorf("per-CPU counters %+v", got.Counters.PerCPU)
	}
	if got.Counters.VMStat["thp_fault_alloc"] != 1400 {
		t.Errorf("vmstat counters %v", got.Counters.VMStat)
	}
}

func TestHostFixtureErrors(t *testing.T) {
	dir := t.TempDir()
	writeProc(t, dir, fixtureStat1, "thp_fault_alloc notanumber\n")
	h, err := newHostReader(dir)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := h.read(time.Now()); err == nil || !strings.Contains(err.Error(), "vmstat") {
		t.Errorf("bad vmstat: err %v", err)
	}
	os.Remove(filepath.Join(dir, "meminfo"))
	if _, err := h.read(time.Now()); err == nil || !strings.Contains(err.Error(), "meminfo") {
		t.Errorf("missing meminfo: err %v", err)
	}
	// A kernel without THP has no thp_* lines: not an error, just absent.
	os.WriteFile(filepath.Join(dir, "vmstat"), []byte("pgmajfault 5\n"), 0o644)
	m, err := hostfacts.VMStat(filepath.Join(dir, "vmstat"), vmstatKeys...)
	if _, ok := m["thp_fault_alloc"]; err != nil || ok || m["pgmajfault"] != 5 {
		t.Errorf("vmstat without THP: %v %v", m, err)
	}
}

func TestHostLive(t *testing.T) {
	h, err := newHostReader("/proc")
	if err != nil {
		t.Fatal(err)
	}
	first, err := h.read(time.Now())
	if err != nil {
		t.Fatal(err)
	}
	// Wait for the kernel's CPU counters to move (they tick at USER_HZ).
	var got *Host
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); {
		x := 0
		for i := 0; i < 1e6; i++ {
			x += i
		}
		_ = x
		if got, err = h.read(time.Now()); err != nil {
			t.Fatal(err)
		}
		if got.Counters.CPUTotal != first.Counters.CPUTotal {
			break
		}
	}
	c := got.CPU
	sum := c.User + c.Nice + c.System + c.Iowait + c.IRQ + c.SoftIRQ + c.Steal + c.Idle
	if math.Abs(sum-100) > 0.2 {
		t.Errorf("CPU shares sum to %.2f %%, want 100: %+v", sum, c)
	}
	if math.Abs(c.Busy-(100-c.Idle-c.Iowait)) > 0.2 {
		t.Errorf("busy %.2f != 100 - idle - iowait: %+v", c.Busy, c)
	}
	want, err := runenv.ReadHost("/proc", "/sys")
	if err != nil {
		t.Fatal(err)
	}
	if got.Mem.Total != want.MemTotalBytes || got.Mem.Available == 0 || got.Mem.Available > got.Mem.Total {
		t.Errorf("memory %+v, MemTotal %d", got.Mem, want.MemTotalBytes)
	}
	if len(got.Counters.PerCPU) != want.CPUs {
		t.Errorf("%d per-CPU lines, want %d CPUs", len(got.Counters.PerCPU), want.CPUs)
	}
	if want.THPEnabled != "" {
		if _, ok := got.Counters.VMStat["thp_fault_alloc"]; !ok {
			t.Errorf("THP kernel but no thp_fault_alloc in /proc/vmstat: %v", got.Counters.VMStat)
		}
	}
}
