package hostfacts

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/prometheus/procfs"
)

// Default roots of a live host.
const (
	DefaultProcRoot = procfs.DefaultMountPoint // "/proc"
	DefaultSysRoot  = "/sys"
)

// FS reads host facts under a proc root and a sys root. The zero value is
// not usable; make one with New. An FS holds no open files and is safe
// for concurrent use.
type FS struct {
	procRoot, sysRoot string
	proc              procfs.FS
}

// New returns an FS reading procRoot and sysRoot ("" picks
// DefaultProcRoot, DefaultSysRoot). It fails when procRoot does not exist;
// the sys root is only read when a sysfs fact is asked for.
func New(procRoot, sysRoot string) (FS, error) {
	if procRoot == "" {
		procRoot = DefaultProcRoot
	}
	if sysRoot == "" {
		sysRoot = DefaultSysRoot
	}
	p, err := procfs.NewFS(procRoot)
	if err != nil {
		return FS{}, fmt.Errorf("proc tree %s: %w", procRoot, err)
	}
	return FS{procRoot: procRoot, sysRoot: sysRoot, proc: p}, nil
}

// ProcRoot and SysRoot return the roots the FS reads.
func (f FS) ProcRoot() string { return f.procRoot }

// SysRoot returns the sys root the FS reads.
func (f FS) SysRoot() string { return f.sysRoot }

// ProcPath joins parts under the proc root: ProcPath("sys", "vm",
// "overcommit_memory") is "/proc/sys/vm/overcommit_memory" on a live host.
func (f FS) ProcPath(parts ...string) string {
	return filepath.Join(append([]string{f.procRoot}, parts...)...)
}

// SysPath joins parts under the sys root.
func (f FS) SysPath(parts ...string) string {
	return filepath.Join(append([]string{f.sysRoot}, parts...)...)
}

// TracingDir is where the kernel's tracing file system is mounted under
// the sys root: kernel/tracing, or debugfs' kernel/debug/tracing on an
// older kernel.
func (f FS) TracingDir() string {
	if _, err := os.Stat(f.SysPath("kernel", "tracing", "events")); err == nil {
		return f.SysPath("kernel", "tracing")
	}
	return f.SysPath("kernel", "debug", "tracing")
}

// THPPath is the path of a transparent huge pages control file under the
// sys root: THPPath("enabled") is
// /sys/kernel/mm/transparent_hugepage/enabled.
func (f FS) THPPath(name string) string {
	return f.SysPath("kernel", "mm", "transparent_hugepage", name)
}

// Meminfo parses /proc/meminfo (procfs; values in bytes). Errors name the
// file.
func (f FS) Meminfo() (procfs.Meminfo, error) {
	mi, err := f.proc.Meminfo()
	if err != nil {
		return procfs.Meminfo{}, fmt.Errorf("%s: %w", f.ProcPath("meminfo"), err)
	}
	return mi, nil
}

// CPUInfo parses /proc/cpuinfo (procfs, in the format of the architecture
// the program runs on): one entry per online logical CPU. Errors name the
// file.
func (f FS) CPUInfo() ([]procfs.CPUInfo, error) {
	ci, err := f.proc.CPUInfo()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", f.ProcPath("cpuinfo"), err)
	}
	return ci, nil
}

// Stat parses /proc/stat (procfs; CPU times in seconds). Errors name the
// file.
func (f FS) Stat() (procfs.Stat, error) {
	st, err := f.proc.Stat()
	if err != nil {
		return procfs.Stat{}, fmt.Errorf("%s: %w", f.ProcPath("stat"), err)
	}
	return st, nil
}

// VMStat reads the counters named in keys from /proc/vmstat; see the
// package function VMStat.
func (f FS) VMStat(keys ...string) (map[string]uint64, error) {
	return VMStat(f.ProcPath("vmstat"), keys...)
}

// Line returns the first line, trimmed, of the one-value file at path
// (/proc/sys/kernel/hostname and the like). Errors are *fs.PathError
// naming the file.
func Line(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	line, _, _ := strings.Cut(string(b), "\n")
	return strings.TrimSpace(line), nil
}

// Sysctl returns the integer value of a sysctl under /proc/sys:
// Sysctl("vm", "overcommit_memory") reads /proc/sys/vm/overcommit_memory.
// A missing file gives an error satisfying errors.Is(err, fs.ErrNotExist);
// a value that is not an integer is an error naming the file.
func (f FS) Sysctl(parts ...string) (int64, error) {
	path := f.ProcPath(append([]string{"sys"}, parts...)...)
	line, err := Line(path)
	if err != nil {
		return 0, err
	}
	v, err := strconv.ParseInt(line, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%s: not an integer: %w", path, errors.Unwrap(err))
	}
	return v, nil
}

// THP returns the selected word of a transparent huge pages control file
// (name "enabled" or "defrag"): "always", "madvise", "never", "defer",
// "defer+madvise". A missing file (a kernel without THP) gives "" and an
// error satisfying errors.Is(err, fs.ErrNotExist); a file without a
// bracketed word is an error naming the file.
func (f FS) THP(name string) (string, error) {
	path := f.THPPath(name)
	line, err := Line(path)
	if err != nil {
		return "", err
	}
	w := Selected(line)
	if w == "" {
		return "", fmt.Errorf("%s: no bracketed mode in %q", path, line)
	}
	return w, nil
}

// ProcStat parses /proc/<pid>/stat of one process (procfs; CPU times via
// its CPUTime method, seconds). Errors name the file; a process that is
// gone gives fs.ErrNotExist.
func (f FS) ProcStat(pid int) (procfs.ProcStat, error) {
	p, err := f.proc.Proc(pid)
	if err != nil {
		return procfs.ProcStat{}, fmt.Errorf("%s: %w", f.ProcPath(strconv.Itoa(pid)), err)
	}
	st, err := p.Stat()
	if err != nil {
		return procfs.ProcStat{}, fmt.Errorf("%s: %w", f.ProcPath(strconv.Itoa(pid), "stat"), err)
	}
	return st, nil
}

// LiveProcStat is ProcStat of process pid on this host (DefaultProcRoot).
func LiveProcStat(pid int) (procfs.ProcStat, error) {
	f, err := New("", "")
	if err != nil {
		return procfs.ProcStat{}, err
	}
	return f.ProcStat(pid)
}

// ChildPIDs lists the processes whose parent is pid (the PPID field of
// every /proc/<n>/stat); processes that exit while the tree is read are
// skipped. Errors: the proc root cannot be listed.
func (f FS) ChildPIDs(pid int) ([]int, error) {
	procs, err := f.proc.AllProcs()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", f.procRoot, err)
	}
	var out []int
	for _, p := range procs {
		if st, err := p.Stat(); err == nil && st.PPID == pid {
			out = append(out, p.PID)
		}
	}
	return out, nil
}

// LoadAverage returns the one-minute load average (<proc>/loadavg).
func (f FS) LoadAverage() (float64, error) {
	l, err := f.proc.LoadAvg()
	if err != nil {
		return 0, fmt.Errorf("load average: %w", err)
	}
	return l.Load1, nil
}

// ProcMemory is a process's resident memory in bytes, from
// /proc/<pid>/status.
type ProcMemory struct {
	// Peak is VmHWM: the high-water mark of the resident set of the
	// memory map the process exec'd into (getrusage's maxrss also holds
	// the resident size of the parent the process was forked from).
	Peak uint64
	// Anon is RssAnon now: the process's own memory (heap, stacks),
	// without the pages of its program and libraries (RssFile), which
	// are shared with the page cache and depend on what it holds.
	Anon uint64
}

// Memory reads process pid's resident memory. A process that is gone
// gives fs.ErrNotExist.
func (f FS) Memory(pid int) (ProcMemory, error) {
	p, err := f.proc.Proc(pid)
	if err != nil {
		return ProcMemory{}, fmt.Errorf("%s: %w", f.ProcPath(strconv.Itoa(pid)), err)
	}
	st, err := p.NewStatus()
	if err != nil {
		return ProcMemory{}, fmt.Errorf("%s: %w", f.ProcPath(strconv.Itoa(pid), "status"), err)
	}
	return ProcMemory{Peak: st.VmHWM, Anon: st.RssAnon}, nil
}
