// Package hostfacts is erplab's one reader of the kernel's /proc and /sys:
// the host description of a run (kernel, CPUs, RAM, THP mode), the
// counters the samplers read per tick (/proc/stat, /proc/meminfo,
// /proc/vmstat), the sysctls and sysfs choice files the doctor judges
// (transparent_hugepage/enabled, defrag, shmem_enabled and the per-size
// hugepages-<N>kB/enabled, or RHEL 6's redhat_transparent_hugepage, in
// [FS.THPSettings]; vm.overcommit_memory), the
// CPU time split between two /proc/stat readings, and the scheduler
// accounting of a process's threads ([FS.ThreadSchedstats]: run time and
// run delay from /proc/<pid>/task/<tid>/schedstat, for the noise guard).
//
// Every reader goes through an [FS] made by [New] from a proc root and a
// sys root ("/proc" and "/sys" on a live host), so that tests feed it
// fixture trees (as node_exporter and pgcenter keep theirs):
// testdata/golden is a complete fake host; testdata/malformed breaks
// stat, vmstat, overcommit_memory and the THP enabled file beside sound
// ones; testdata/badmeminfo has a non-numeric meminfo and missing files;
// testdata/mthp has shmem_enabled and per-size controls;
// testdata/rhel6 has only the RHEL 6 THP directory;
// testdata/nothp is a kernel without THP and without sys/kernel/arch. The files procfs parses
// (meminfo, cpuinfo, stat) are read with github.com/prometheus/procfs;
// the rest are small one-value files read here.
//
// Each method reads its own file(s) and returns an error naming the file:
// one malformed file leaves every other reader working. A missing file is
// reported with an error that satisfies errors.Is(err, fs.ErrNotExist), so
// callers tell "the kernel has no such control" from "the file is broken".
package hostfacts
