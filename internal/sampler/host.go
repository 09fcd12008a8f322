package sampler

import (
	"fmt"
	"time"

	"github.com/prometheus/procfs"

	"github.com/erplab/erplab/internal/hostfacts"
)

// Host is one sample of the machine the server runs on (only when it is
// the machine erplab runs on). Shares are % of the interval over all CPUs
// (100 = every CPU busy the whole interval); they are zero on the first
// sample, which has no interval (Rates false).
type Host struct {
	// Rates is false on the first sample (no previous counters).
	Rates bool `json:"-"`
	CPU   CPU  `json:"cpu"`
	Mem   Mem  `json:"mem"`
	VM    VM   `json:"vm"`
	// ProcsRunning and ProcsBlocked are the runnable and I/O-blocked tasks
	// now (/proc/stat procs_running, procs_blocked).
	ProcsRunning uint64 `json:"procs_running,omitempty"`
	ProcsBlocked uint64 `json:"procs_blocked,omitempty"`
	// ContextSwitchesPerS is the rate of /proc/stat ctxt.
	ContextSwitchesPerS float64 `json:"ctxt_per_s,omitempty"`
	// Counters are the raw cumulative values (for /metrics).
	Counters HostCounters `json:"-"`
}

// CPU is the split of CPU time over the interval, % of all CPUs, from the
// "cpu" line of /proc/stat (proc(5)). Guest time is already inside User and
// Nice, as the kernel accounts it.
type CPU = hostfacts.CPU

// Mem is memory now, bytes, from /proc/meminfo.
type Mem struct {
	Total         uint64 `json:"total_bytes"`
	Available     uint64 `json:"available_bytes"`
	Cached        uint64 `json:"cached_bytes,omitempty"` // Buffers + Cached
	Dirty         uint64 `json:"dirty_bytes,omitempty"`
	Shmem         uint64 `json:"shmem_bytes,omitempty"`
	AnonHugePages uint64 `json:"anon_huge_pages_bytes,omitempty"`
	SwapUsed      uint64 `json:"swap_used_bytes,omitempty"` // SwapTotal - SwapFree
}

// VM is the rate, per second, of the transparent huge page and memory
// compaction counters of /proc/vmstat (CONTEXT.md section 4: THP made
// system time eat the CPU) and of major page faults. The kernel
// documents them in Documentation/admin-guide/mm/transhuge.rst.
type VM struct {
	THPFaultAlloc    float64 `json:"thp_fault_alloc_per_s,omitempty"`
	THPFaultFallback float64 `json:"thp_fault_fallback_per_s,omitempty"`
	THPCollapseAlloc float64 `json:"thp_collapse_alloc_per_s,omitempty"`
	CompactStall     float64 `json:"compact_stall_per_s,omitempty"`
	PgMajFault       float64 `json:"pgmajfault_per_s,omitempty"`
}

// VMStatKeys are the /proc/vmstat counters the host sampler reads.
var vmstatKeys = []string{"thp_fault_alloc", "thp_fault_fallback", "thp_collapse_alloc", "compact_stall", "pgmajfault"}

// HostCounters are cumulative host counters.
type HostCounters struct {
	// CPUTotal is the "cpu" line, PerCPU the "cpuN" lines of /proc/stat,
	// seconds (procfs divides by USER_HZ).
	CPUTotal procfs.CPUStat
	PerCPU   map[int64]procfs.CPUStat
	// ContextSwitches is /proc/stat ctxt.
	ContextSwitches uint64
	// VMStat holds the counters of vmstatKeys found in /proc/vmstat;
	// a key the kernel lacks (no THP support) is absent.
	VMStat map[string]uint64
}

// hostReader reads host figures under a proc root.
type hostReader struct {
	fs       hostfacts.FS
	prev     *HostCounters
	prevTime time.Time
}

// newHostReader reads the proc tree procRoot ("" = /proc); only /proc is
// read, so the sys root is left at its default.
func newHostReader(procRoot string) (*hostReader, error) {
	fs, err := hostfacts.New(procRoot, "")
	if err != nil {
		return nil, fmt.Errorf("host sampler: %w", err)
	}
	return &hostReader{fs: fs}, nil
}

// read returns one Host sample taken at now; per-second rates use the
// wall time since the previous successful read. CPU shares use the CPU
// time deltas themselves as the denominator.
func (h *hostReader) read(now time.Time) (*Host, error) {
	st, err := h.fs.Stat()
	if err != nil {
		return nil, fmt.Errorf("host sampler: %w", err)
	}
	mi, err := h.fs.Meminfo()
	if err != nil {
		return nil, fmt.Errorf("host sampler: %w", err)
	}
	vm, err := h.fs.VMStat(vmstatKeys...)
	if err != nil {
		return nil, err
	}
	cur := HostCounters{CPUTotal: st.CPUTotal, PerCPU: st.CPU, ContextSwitches: st.ContextSwitches, VMStat: vm}
	out := &Host{
		ProcsRunning: st.ProcessesRunning, ProcsBlocked: st.ProcessesBlocked,
		Mem:      memOf(mi),
		Counters: cur,
	}
	if h.prev != nil {
		elapsed := now.Sub(h.prevTime).Seconds()
		out.Rates = true
		out.CPU = hostfacts.Split(h.prev.CPUTotal, cur.CPUTotal)
		if elapsed > 0 {
			out.ContextSwitchesPerS = round2(float64(delta(h.prev.ContextSwitches, cur.ContextSwitches)) / elapsed)
			r := func(k string) float64 {
				return round2(float64(delta(h.prev.VMStat[k], cur.VMStat[k])) / elapsed)
			}
			out.VM = VM{THPFaultAlloc: r("thp_fault_alloc"), THPFaultFallback: r("thp_fault_fallback"),
				THPCollapseAlloc: r("thp_collapse_alloc"), CompactStall: r("compact_stall"), PgMajFault: r("pgmajfault")}
		}
	}
	h.prev, h.prevTime = &cur, now
	return out, nil
}

// delta is cur-prev for a counter, 0 when it went backwards (reset).
func delta(prev, cur uint64) uint64 {
	if cur < prev {
		return 0
	}
	return cur - prev
}

func memOf(mi procfs.Meminfo) Mem {
	v := func(p *uint64) uint64 {
		if p == nil {
			return 0
		}
		return *p
	}
	m := Mem{
		Total: v(mi.MemTotalBytes), Available: v(mi.MemAvailableBytes),
		Cached: v(mi.BuffersBytes) + v(mi.CachedBytes), Dirty: v(mi.DirtyBytes),
		Shmem: v(mi.ShmemBytes), AnonHugePages: v(mi.AnonHugePagesBytes),
	}
	if st, sf := v(mi.SwapTotalBytes), v(mi.SwapFreeBytes); st > sf {
		m.SwapUsed = st - sf
	}
	return m
}
