package sampler

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/prometheus/procfs"
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
type CPU struct {
	User    float64 `json:"user_pct,omitempty"`
	Nice    float64 `json:"nice_pct,omitempty"`
	System  float64 `json:"system_pct,omitempty"`
	Iowait  float64 `json:"iowait_pct,omitempty"`
	IRQ     float64 `json:"irq_pct,omitempty"`
	SoftIRQ float64 `json:"softirq_pct,omitempty"`
	Steal   float64 `json:"steal_pct,omitempty"`
	Idle    float64 `json:"idle_pct"`
	// Busy is User+Nice+System+IRQ+SoftIRQ+Steal: time not idle and not
	// waiting for I/O.
	Busy float64 `json:"busy_pct"`
}

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
	root     string
	fs       procfs.FS
	prev     *HostCounters
	prevTime time.Time
}

func newHostReader(procRoot string) (*hostReader, error) {
	if procRoot == "" {
		procRoot = procfs.DefaultMountPoint
	}
	fs, err := procfs.NewFS(procRoot)
	if err != nil {
		return nil, fmt.Errorf("host sampler: proc tree %s: %w", procRoot, err)
	}
	return &hostReader{root: procRoot, fs: fs}, nil
}

// read returns one Host sample taken at now; per-second rates use the
// wall time since the previous successful read. CPU shares use the CPU
// time deltas themselves as the denominator.
func (h *hostReader) read(now time.Time) (*Host, error) {
	st, err := h.fs.Stat()
	if err != nil {
		return nil, fmt.Errorf("host sampler: %s: %w", filepath.Join(h.root, "stat"), err)
	}
	mi, err := h.fs.Meminfo()
	if err != nil {
		return nil, fmt.Errorf("host sampler: %s: %w", filepath.Join(h.root, "meminfo"), err)
	}
	vm, err := readVMStat(filepath.Join(h.root, "vmstat"), vmstatKeys)
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
		out.CPU = cpuSplit(h.prev.CPUTotal, cur.CPUTotal)
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

// cpuSplit turns two readings of the "cpu" line into shares of the
// interval, %. Guest and GuestNice are not added: the kernel already
// counts them in User and Nice (proc(5)).
func cpuSplit(a, b procfs.CPUStat) CPU {
	d := func(x, y float64) float64 { return max(y-x, 0) }
	user, nice, sys := d(a.User, b.User), d(a.Nice, b.Nice), d(a.System, b.System)
	idle, iow := d(a.Idle, b.Idle), d(a.Iowait, b.Iowait)
	irq, soft, steal := d(a.IRQ, b.IRQ), d(a.SoftIRQ, b.SoftIRQ), d(a.Steal, b.Steal)
	total := user + nice + sys + idle + iow + irq + soft + steal
	if total <= 0 {
		return CPU{}
	}
	p := func(x float64) float64 { return round2(100 * x / total) }
	return CPU{User: p(user), Nice: p(nice), System: p(sys), Iowait: p(iow), IRQ: p(irq), SoftIRQ: p(soft),
		Steal: p(steal), Idle: p(idle), Busy: p(user + nice + sys + irq + soft + steal)}
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

// readVMStat reads the counters named in keys from a /proc/vmstat file
// ("name value" per line, proc(5)); prometheus/procfs has no parser for
// it. Keys the file lacks are absent from the map; an unparsable value of
// a wanted key is an error naming the file.
func readVMStat(path string, keys []string) (map[string]uint64, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("host sampler: %w", err)
	}
	want := make(map[string]bool, len(keys))
	for _, k := range keys {
		want[k] = true
	}
	out := make(map[string]uint64, len(keys))
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		name, val, ok := bytes.Cut(sc.Bytes(), []byte{' '})
		if !ok || !want[string(name)] {
			continue
		}
		n, err := strconv.ParseUint(string(bytes.TrimSpace(val)), 10, 64)
		if err != nil {
			return nil, fmt.Errorf("host sampler: %s: %s: %w", path, name, err)
		}
		out[string(name)] = n
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("host sampler: %s: %w", path, err)
	}
	return out, nil
}
