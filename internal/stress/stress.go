// Package stress runs load generators like the classic stress(1) tool —
// CPU workers (sqrt loops), I/O workers (sync(2) loops) and VM workers
// (map, touch every page, unmap) — and measures where the CPU time goes:
// the host's split from /proc/stat, the workers' own user and system time
// from getrusage(RUSAGE_THREAD), and the transparent huge page and
// compaction counters of /proc/vmstat. It reproduces the method of
// CONTEXT.md section 4: stress CPU, I/O and memory apart and look at user
// versus system time; with THP the memory workers' system time dominates.
//
// Start a run with [Start], read [Run.Live] while it runs and end it with
// [Run.Stop], which returns the [Report]. A run may go beside a load test in
// the same process (erplab run --stress vm=2).
package stress

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/procfs"

	"github.com/erplab/erplab/internal/hostfacts"
	"golang.org/x/sys/unix"
)

// THP modes of Spec.THP for the VM workers' mappings.
const (
	// THPDefault leaves the mapping to the host's mode (no madvise).
	THPDefault = ""
	// THPAllow asks for huge pages with madvise(MADV_HUGEPAGE), honoured
	// when the host mode is "always" or "madvise".
	THPAllow = "huge"
	// THPRefuse refuses huge pages with madvise(MADV_NOHUGEPAGE) on the
	// mapping only (madvise(2)); global settings are not touched.
	THPRefuse = "nohuge"
)

// Worker kinds.
const (
	KindCPU = "cpu"
	KindIO  = "io"
	KindVM  = "vm"
)

// DefaultVMBytes is the mapping size of one VM worker, bytes (stress(1)
// uses 256 MiB too).
const DefaultVMBytes = 256 << 20

// Spec is what to run.
type Spec struct {
	// CPU, IO and VM are the numbers of workers of each kind (>= 0, at
	// least one in total, each at most 1024).
	CPU, IO, VM int
	// VMBytes is the mapping size of each VM worker, bytes; 0 means
	// DefaultVMBytes. At least one page.
	VMBytes int64
	// THP is THPDefault, THPAllow or THPRefuse for the VM workers.
	THP string
	// ProcRoot and SysRoot are the proc and sys trees ("" = /proc, /sys).
	ProcRoot, SysRoot string
}

// ErrNoWorkers is returned by Start for a Spec without workers.
var ErrNoWorkers = errors.New("stress: no workers (give --cpu, --io or --vm)")

// Validate checks a Spec; it returns ErrNoWorkers or a one-line error.
func (s Spec) Validate() error {
	for _, n := range []struct {
		k string
		v int
	}{{KindCPU, s.CPU}, {KindIO, s.IO}, {KindVM, s.VM}} {
		if n.v < 0 || n.v > 1024 {
			return fmt.Errorf("stress: %s workers %d: want 0..1024", n.k, n.v)
		}
	}
	if s.CPU+s.IO+s.VM == 0 {
		return ErrNoWorkers
	}
	if s.VMBytes < 0 || (s.VMBytes > 0 && s.VMBytes < int64(os.Getpagesize())) {
		return fmt.Errorf("stress: vm bytes %d: want at least one page (%d)", s.VMBytes, os.Getpagesize())
	}
	switch s.THP {
	case THPDefault, THPAllow, THPRefuse:
	default:
		return fmt.Errorf("stress: thp mode %q: want %q, %q or empty", s.THP, THPAllow, THPRefuse)
	}
	return nil
}

// CPUSplit is the host's CPU time split over an interval, % of all CPUs,
// from the "cpu" line of /proc/stat (proc(5)).
type CPUSplit = hostfacts.CPU

// Workers sums the workers of one kind.
type Workers struct {
	Kind  string `json:"kind"`
	Count int    `json:"count"`
	// Ops is the number of loop iterations: sqrt batches of 1e6 (cpu),
	// sync(2) calls (io), map-touch-unmap cycles (vm).
	Ops int64 `json:"ops"`
	// OpsPerS is Ops per second of the run.
	OpsPerS float64 `json:"ops_per_s"`
	// TouchedBytesPerS is bytes of pages touched per second (vm only).
	TouchedBytesPerS float64 `json:"touched_bytes_per_s,omitempty"`
	// UserS and SystemS are the workers' own CPU time, seconds, from
	// getrusage(RUSAGE_THREAD) of each worker's locked OS thread.
	UserS   float64 `json:"user_s"`
	SystemS float64 `json:"system_s"`
	// UserPct and SystemPct are UserS and SystemS as % of the workers'
	// wall time (Count × duration): 100 = every worker always on a CPU in
	// that mode. The rest is waiting (run queue, I/O, sleep).
	UserPct   float64 `json:"user_pct"`
	SystemPct float64 `json:"system_pct"`
	// SystemShare is SystemS / (UserS+SystemS), %.
	SystemShare float64 `json:"system_share_pct"`
}

// VMCounters are /proc/vmstat counter increments over the run
// (Documentation/admin-guide/mm/transhuge.rst).
type VMCounters struct {
	THPFaultAlloc    uint64 `json:"thp_fault_alloc"`
	THPFaultFallback uint64 `json:"thp_fault_fallback"`
	THPCollapseAlloc uint64 `json:"thp_collapse_alloc"`
	CompactStall     uint64 `json:"compact_stall"`
	PgFault          uint64 `json:"pgfault"`
	PgMajFault       uint64 `json:"pgmajfault"`
}

var vmKeys = []string{"thp_fault_alloc", "thp_fault_fallback", "thp_collapse_alloc", "compact_stall", "pgfault", "pgmajfault"}

// Report is the result of a run.
type Report struct {
	// THPHost is the host mode, the bracketed word of
	// /sys/kernel/mm/transparent_hugepage/enabled ("" without THP);
	// THPDefrag likewise of .../defrag.
	THPHost   string `json:"thp_host"`
	THPDefrag string `json:"thp_defrag"`
	// THP is the Spec's mode for the VM workers ("" = host default).
	THP      string        `json:"thp"`
	Duration time.Duration `json:"-"`
	Seconds  float64       `json:"duration_s"`
	Host     CPUSplit      `json:"host_cpu"`
	Workers  []Workers     `json:"workers"`
	VM       VMCounters    `json:"vmstat"`
	// Errors are worker failures (e.g. mmap refused), one line each.
	Errors []string `json:"errors,omitempty"`
}

// Worker returns the summary of one kind (zero Workers when absent).
func (r Report) Worker(kind string) Workers {
	for _, w := range r.Workers {
		if w.Kind == kind {
			return w
		}
	}
	return Workers{Kind: kind}
}

// worker is one running worker's counters, updated by its own goroutine.
type worker struct {
	kind     string
	ops      atomic.Int64
	userUS   atomic.Int64 // µs, from getrusage(RUSAGE_THREAD), since the thread started
	systemUS atomic.Int64
	// user0 and system0 are the thread's times when the worker began (a
	// reused thread carries earlier time); valid once started is true.
	user0, system0 atomic.Int64
	started        atomic.Bool
}

// times returns the worker's own user and system time so far, µs.
func (w *worker) times() (user, system int64) {
	if !w.started.Load() {
		return 0, 0
	}
	return max(w.userUS.Load()-w.user0.Load(), 0), max(w.systemUS.Load()-w.system0.Load(), 0)
}

func (w *worker) rusage() {
	var ru unix.Rusage
	if unix.Getrusage(unix.RUSAGE_THREAD, &ru) == nil {
		w.userUS.Store(ru.Utime.Sec*1e6 + int64(ru.Utime.Usec))
		w.systemUS.Store(ru.Stime.Sec*1e6 + int64(ru.Stime.Usec))
	}
}

// Run is a running stress run.
type Run struct {
	spec    Spec
	cancel  context.CancelFunc
	wg      sync.WaitGroup
	start   time.Time
	fs      hostfacts.FS
	cpu0    procfs.CPUStat
	vm0     map[string]uint64
	workers []*worker

	mu       sync.Mutex
	errs     []string
	liveCPU  procfs.CPUStat
	liveVM   map[string]uint64
	liveTime time.Time
	stopped  *Report
}

// Start starts the workers of spec and returns the run; they stop when
// ctx is done or Stop is called. Errors: Spec.Validate's, or an unreadable
// /proc/stat or /proc/vmstat.
func Start(ctx context.Context, spec Spec) (*Run, error) {
	if err := spec.Validate(); err != nil {
		return nil, err
	}
	if spec.VMBytes == 0 {
		spec.VMBytes = DefaultVMBytes
	}
	fs, err := hostfacts.New(spec.ProcRoot, spec.SysRoot)
	if err != nil {
		return nil, fmt.Errorf("stress: %w", err)
	}
	spec.ProcRoot, spec.SysRoot = fs.ProcRoot(), fs.SysRoot()
	st, err := fs.Stat()
	if err != nil {
		return nil, fmt.Errorf("stress: %w", err)
	}
	vm, err := fs.VMStat(vmKeys...)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(ctx)
	r := &Run{spec: spec, cancel: cancel, start: time.Now(), fs: fs, cpu0: st.CPUTotal, vm0: vm,
		liveCPU: st.CPUTotal, liveVM: vm, liveTime: time.Now()}
	add := func(kind string, n int, loop func(context.Context, *worker) error) {
		for range n {
			w := &worker{kind: kind}
			r.workers = append(r.workers, w)
			r.wg.Add(1)
			go r.runWorker(ctx, w, loop)
		}
	}
	add(KindCPU, spec.CPU, cpuLoop)
	add(KindIO, spec.IO, ioLoop)
	add(KindVM, spec.VM, func(ctx context.Context, w *worker) error { return vmLoop(ctx, w, spec.VMBytes, spec.THP) })
	return r, nil
}

func (r *Run) runWorker(ctx context.Context, w *worker, loop func(context.Context, *worker) error) {
	defer r.wg.Done()
	// The goroutine keeps its OS thread to the end: RUSAGE_THREAD then
	// measures this worker alone, and the thread is discarded when the
	// goroutine exits locked (runtime.LockOSThread), so no other goroutine
	// inherits its counters.
	runtime.LockOSThread()
	w.rusage()
	w.user0.Store(w.userUS.Load())
	w.system0.Store(w.systemUS.Load())
	w.started.Store(true)
	err := loop(ctx, w)
	w.rusage()
	if err != nil {
		r.mu.Lock()
		r.errs = append(r.errs, fmt.Sprintf("%s worker: %v", w.kind, err))
		r.mu.Unlock()
	}
}

// cpuLoop computes square roots in batches of 1e6 (stress(1) --cpu).
func cpuLoop(ctx context.Context, w *worker) error {
	x := 0.0
	for ctx.Err() == nil {
		for i := range 1_000_000 {
			x += math.Sqrt(float64(i) + x*1e-12)
		}
		w.ops.Add(1)
		w.rusage()
	}
	if x < 0 { // keeps the loop from being optimised away
		return fmt.Errorf("negative sum")
	}
	return nil
}

// ioLoop calls sync(2) (stress(1) --io): kernel time flushing dirty pages
// and waiting for the devices.
func ioLoop(ctx context.Context, w *worker) error {
	for ctx.Err() == nil {
		unix.Sync()
		if w.ops.Add(1)%16 == 0 {
			w.rusage()
		}
	}
	return nil
}

// vmLoop maps size bytes of anonymous memory, applies the THP advice,
// writes one byte in every base page, unmaps, repeats (stress(1) --vm).
func vmLoop(ctx context.Context, w *worker, size int64, thp string) error {
	page := os.Getpagesize()
	for ctx.Err() == nil {
		b, err := unix.Mmap(-1, 0, int(size), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
		if err != nil {
			return fmt.Errorf("mmap %d bytes: %w", size, err)
		}
		switch thp {
		case THPAllow:
			err = unix.Madvise(b, unix.MADV_HUGEPAGE)
		case THPRefuse:
			err = unix.Madvise(b, unix.MADV_NOHUGEPAGE)
		}
		if err != nil {
			_ = unix.Munmap(b)
			return fmt.Errorf("madvise %s: %w", thp, err)
		}
		for i := 0; i < len(b); i += page {
			b[i] = 1
			if i&(64<<20-1) == 0 && ctx.Err() != nil {
				break
			}
		}
		if err := unix.Munmap(b); err != nil {
			return fmt.Errorf("munmap: %w", err)
		}
		w.ops.Add(1)
		w.rusage()
	}
	return nil
}

// Live is a snapshot of a running run for a progress line.
type Live struct {
	Elapsed time.Duration
	// Host is the host CPU split since the previous Live call (or Start).
	Host CPUSplit
	// THPFaultAllocPerS and CompactStallPerS are /proc/vmstat rates since
	// the previous Live call.
	THPFaultAllocPerS, CompactStallPerS float64
	// Ops is the loop iterations so far per worker kind.
	Ops map[string]int64
	// UserS and SystemS are the workers' own CPU time so far per kind,
	// seconds (getrusage(RUSAGE_THREAD), refreshed by each worker every
	// iteration; every 16 sync calls for io).
	UserS, SystemS map[string]float64
}

// Live reads the host counters and returns the split since the previous
// call. Errors come from reading /proc.
func (r *Run) Live() (Live, error) {
	st, err := r.fs.Stat()
	if err != nil {
		return Live{}, fmt.Errorf("stress: %w", err)
	}
	vm, err := r.fs.VMStat(vmKeys...)
	if err != nil {
		return Live{}, err
	}
	now := time.Now()
	r.mu.Lock()
	defer r.mu.Unlock()
	l := Live{Elapsed: now.Sub(r.start), Host: hostfacts.Split(r.liveCPU, st.CPUTotal), Ops: map[string]int64{},
		UserS: map[string]float64{}, SystemS: map[string]float64{}}
	if s := now.Sub(r.liveTime).Seconds(); s > 0 {
		l.THPFaultAllocPerS = float64(sub(r.liveVM["thp_fault_alloc"], vm["thp_fault_alloc"])) / s
		l.CompactStallPerS = float64(sub(r.liveVM["compact_stall"], vm["compact_stall"])) / s
	}
	for _, w := range r.workers {
		l.Ops[w.kind] += w.ops.Load()
		u, sy := w.times()
		l.UserS[w.kind] += float64(u) / 1e6
		l.SystemS[w.kind] += float64(sy) / 1e6
	}
	r.liveCPU, r.liveVM, r.liveTime = st.CPUTotal, vm, now
	return l, nil
}

// LiveLine formats a Live as one progress line.
func LiveLine(l Live) string {
	var ops []string
	for _, k := range []string{KindCPU, KindIO, KindVM} {
		if n, ok := l.Ops[k]; ok {
			ops = append(ops, fmt.Sprintf("%s %d ops usr %.1fs sys %.1fs", k, n, l.UserS[k], l.SystemS[k]))
		}
	}
	return fmt.Sprintf("%5.0fs  host user %5.1f%% sys %5.1f%% iowait %5.1f%% softirq %4.1f%% idle %5.1f%%  thp_fault_alloc %.0f/s compact_stall %.0f/s | %s",
		l.Elapsed.Seconds(), l.Host.User+l.Host.Nice, l.Host.System, l.Host.Iowait, l.Host.SoftIRQ, l.Host.Idle,
		l.THPFaultAllocPerS, l.CompactStallPerS, strings.Join(ops, " | "))
}

// Stop stops the workers, waits for them and returns the report; later
// calls return the same report.
func (r *Run) Stop() Report {
	r.mu.Lock()
	if r.stopped != nil {
		defer r.mu.Unlock()
		return *r.stopped
	}
	r.mu.Unlock()
	r.cancel()
	r.wg.Wait()
	end := time.Now()
	rep := Report{THP: r.spec.THP, Duration: end.Sub(r.start)}
	rep.Seconds = math.Round(rep.Duration.Seconds()*100) / 100
	// "" when the kernel has no THP (or the file has no bracketed mode).
	rep.THPHost, _ = r.fs.THP("enabled")
	rep.THPDefrag, _ = r.fs.THP("defrag")
	if st, err := r.fs.Stat(); err == nil {
		rep.Host = hostfacts.Split(r.cpu0, st.CPUTotal)
	} else {
		rep.Errors = append(rep.Errors, err.Error()) // names the file
	}
	if vm, err := r.fs.VMStat(vmKeys...); err == nil {
		d := func(k string) uint64 { return sub(r.vm0[k], vm[k]) }
		rep.VM = VMCounters{THPFaultAlloc: d("thp_fault_alloc"), THPFaultFallback: d("thp_fault_fallback"),
			THPCollapseAlloc: d("thp_collapse_alloc"), CompactStall: d("compact_stall"),
			PgFault: d("pgfault"), PgMajFault: d("pgmajfault")}
	} else {
		rep.Errors = append(rep.Errors, err.Error())
	}
	secs := rep.Duration.Seconds()
	for _, kind := range []string{KindCPU, KindIO, KindVM} {
		ws := Workers{Kind: kind}
		for _, w := range r.workers {
			if w.kind != kind {
				continue
			}
			ws.Count++
			ws.Ops += w.ops.Load()
			u, sy := w.times()
			ws.UserS += float64(u) / 1e6
			ws.SystemS += float64(sy) / 1e6
		}
		if ws.Count == 0 {
			continue
		}
		if secs > 0 {
			ws.OpsPerS = round2(float64(ws.Ops) / secs)
			ws.UserPct = round2(100 * ws.UserS / (secs * float64(ws.Count)))
			ws.SystemPct = round2(100 * ws.SystemS / (secs * float64(ws.Count)))
			if kind == KindVM {
				ws.TouchedBytesPerS = math.Round(float64(ws.Ops) * float64(r.spec.VMBytes) / secs)
			}
		}
		if t := ws.UserS + ws.SystemS; t > 0 {
			ws.SystemShare = round2(100 * ws.SystemS / t)
		}
		ws.UserS, ws.SystemS = round3(ws.UserS), round3(ws.SystemS)
		rep.Workers = append(rep.Workers, ws)
	}
	r.mu.Lock()
	rep.Errors = append(rep.Errors, r.errs...)
	r.stopped = &rep
	r.mu.Unlock()
	return rep
}

func round2(x float64) float64 { return math.Round(x*100) / 100 }
func round3(x float64) float64 { return math.Round(x*1000) / 1000 }

func sub(a, b uint64) uint64 {
	if b < a {
		return 0
	}
	return b - a
}
