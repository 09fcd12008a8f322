package doctor

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"strings"

	"github.com/erplab/erplab/internal/hostfacts"
)

// Sources of the host rules.
const (
	srcTHPKernel        = "https://docs.kernel.org/admin-guide/mm/transhuge.html (Documentation/admin-guide/mm/transhuge.rst)"
	srcHugePagesPG      = "https://www.postgresql.org/docs/current/kernel-resources.html#LINUX-HUGE-PAGES"
	srcHugePagesGUC     = "https://www.postgresql.org/docs/current/runtime-config-resource.html#GUC-HUGE-PAGES"
	srcHugetlbKernel    = "https://docs.kernel.org/admin-guide/mm/hugetlbpage.html (Documentation/admin-guide/mm/hugetlbpage.rst)"
	srcOvercommitPG     = "https://www.postgresql.org/docs/current/kernel-resources.html#LINUX-MEMORY-OVERCOMMIT"
	srcOvercommitKernel = "https://docs.kernel.org/mm/overcommit-accounting.html (Documentation/mm/overcommit-accounting.rst)"
	srcProc5            = "https://man7.org/linux/man-pages/man5/proc.5.html (/proc/meminfo, /proc/vmstat)"
	srcFieldTHP         = "docs/field-notes.md section 4 (THP: system time above user time, halved by 'never')"
)

// Thresholds of the host checks.
const (
	// hugePagesMinShared is the shared memory size below which huge
	// pages are not worth a finding.
	hugePagesMinShared = 1 << 30
	// pageTableWarnBytes: page tables for shared memory mapped with 4 kB
	// pages by every backend (8 bytes per page per backend, worst case)
	// at or above this are a warning.
	pageTableWarnBytes = 1 << 30
	// compactStallWarnPerS: direct compaction stalls per second during
	// the sample at or above this are a warning.
	compactStallWarnPerS = 1.0
)

// thpLiveDir is the THP directory on a live host, for the fix commands
// (the RHEL 6 one when the host has it).
func (h *hostFacts) thpLiveDir() string {
	return hostfacts.THPLiveDir(h.thp.RedHat)
}

// thpUnknown is the finding for a THP file that could not be read: the
// kernel's THP directory is there (or sysfs is not visible here) but the
// file is missing, unreadable or malformed.
func thpUnknown(e *env, v hostfacts.THPValue) result {
	why := v.Path + " is missing"
	switch {
	case e.host.thp.Dir == "" && !e.host.sysMM:
		why = "sysfs is not visible here (" + e.host.fs.SysPath("kernel", "mm") + " is missing)"
	case !v.Absent():
		why = oneLine(v.Err) // names the file
	}
	r := notChecked("a readable " + v.Path)
	r.summary = "THP mode unknown: " + why
	return r
}

// thpAbsent reports whether the kernel has no THP at all: sysfs is
// visible and neither THP directory exists.
func thpAbsent(e *env) bool { return e.host.thp.Dir == "" && e.host.sysMM }

func init() {
	register(Check{ID: "thp-enabled", Title: "Transparent huge pages mode", Needs: NeedsHost, order: secHost + 10, run: checkTHPEnabled,
		Rule:    "warning when /sys/kernel/mm/transparent_hugepage/enabled (RHEL 6: redhat_transparent_hugepage) is 'always', shmem_enabled is 'always' or 'force', or a hugepages-<N>kB/enabled is 'always' (or 'inherit' under 'always'); ok for madvise, never or a kernel without THP; not checked (unknown) when a file is missing or malformed",
		Why:     "With THP 'always' every backend's private memory is faulted and compacted into huge pages by the kernel, and system time can exceed user time under load.",
		Sources: []string{srcTHPKernel, srcHugePagesPG, srcFieldTHP}})
}

func checkTHPEnabled(_ context.Context, e *env) result {
	t := e.host.thp
	if thpAbsent(e) {
		return result{sev: OK, summary: "the kernel has no transparent huge pages",
			evidence: []Evidence{{Text: "no transparent_hugepage or redhat_transparent_hugepage directory", From: e.host.fs.SysPath("kernel", "mm")}}}
	}
	var ev []Evidence
	var warn []string
	m := map[string]float64{"always": 0, "shmem_always": 0, "sizes_always": 0}
	dir := e.host.thpLiveDir()
	var fix []string
	show := func(name string, v hostfacts.THPValue) {
		switch {
		case v.Known():
			ev = append(ev, Evidence{Text: name + " = " + v.Mode, From: v.Path})
		case v.Absent():
			ev = append(ev, Evidence{Text: name + ": unknown (file missing)", From: v.Path})
		default:
			ev = append(ev, Evidence{Text: name + ": unknown (" + oneLine(v.Err) + ")", From: v.Path})
		}
	}
	show("enabled", t.Enabled)
	if t.Enabled.Mode == "always" {
		m["always"] = 1
		warn = append(warn, "transparent huge pages are 'always': page faults and khugepaged compaction run in the kernel on every backend's memory")
		fix = append(fix,
			"echo madvise > "+dir+"/enabled   # or never; takes effect at once",
			"# persist: add transparent_hugepage=madvise to the kernel command line (GRUB_CMDLINE_LINUX), or a systemd unit running the echo at boot",
			"# for shared_buffers use explicit huge pages instead (huge_pages = on, vm.nr_hugepages), see check huge-pages")
	}
	if !t.ShmemEnabled.Absent() { // absent before Linux 4.7 and on RHEL 6
		show("shmem_enabled", t.ShmemEnabled)
	}
	if s := t.ShmemEnabled.Mode; s == "always" || s == "force" {
		m["shmem_always"] = 1
		warn = append(warn, "THP shmem_enabled is '"+s+"': PostgreSQL's shared memory (shared_buffers) is faulted and collapsed into transparent huge pages")
		fix = append(fix, "echo never > "+dir+"/shmem_enabled   # or advise; shared_buffers then takes explicit huge pages (huge_pages = on) or 4 kB pages")
	}
	var sizes []string
	for _, z := range t.Sizes {
		name := fmt.Sprintf("hugepages-%dkB/enabled", z.KB)
		show(name, z.THPValue)
		if z.Mode == "always" || (z.Mode == "inherit" && t.Enabled.Mode == "always") {
			sizes = append(sizes, fmt.Sprintf("%d kB (%s)", z.KB, z.Mode))
			fix = append(fix, fmt.Sprintf("echo never > %s/hugepages-%dkB/enabled", dir, z.KB))
		}
	}
	if len(sizes) > 0 {
		m["sizes_always"] = float64(len(sizes))
		warn = append(warn, "THP sizes "+strings.Join(sizes, ", ")+" take a huge page on every fault")
	}
	mi := e.host.mem
	if mi.AnonHugePagesBytes != nil {
		ev = append(ev, Evidence{Text: "AnonHugePages " + fmtBytes(int64(*mi.AnonHugePagesBytes)), From: e.host.procPath("meminfo")})
	}
	if mi.ShmemHugePagesBytes != nil {
		ev = append(ev, Evidence{Text: "ShmemHugePages " + fmtBytes(int64(*mi.ShmemHugePagesBytes)), From: e.host.procPath("meminfo")})
	}
	switch {
	case len(warn) > 0:
		return result{sev: Warning, summary: strings.Join(warn, "; "), evidence: ev, metrics: m, fix: fix}
	case !t.Enabled.Known():
		r := thpUnknown(e, t.Enabled)
		r.evidence = ev
		return r
	}
	sum := "transparent huge pages: " + t.Enabled.Mode
	if t.ShmemEnabled.Known() {
		sum += ", shmem " + t.ShmemEnabled.Mode
	}
	return result{sev: OK, summary: sum, evidence: ev, metrics: m}
}

func init() {
	register(Check{ID: "thp-defrag", Title: "Transparent huge pages defrag mode", Needs: NeedsHost, order: secHost + 20, run: checkTHPDefrag,
		Rule:    "warning when /sys/kernel/mm/transparent_hugepage/defrag (RHEL 6: redhat_transparent_hugepage) is 'always'; unknown when missing or malformed",
		Why:     "With defrag 'always' an allocation that finds no free huge page stalls the process in direct compaction.",
		Sources: []string{srcTHPKernel}})
}

func checkTHPDefrag(_ context.Context, e *env) result {
	v := e.host.thp.Defrag
	if thpAbsent(e) {
		return result{sev: OK, summary: "no THP defrag control: the kernel has no transparent huge pages",
			evidence: []Evidence{{Text: "no transparent_hugepage or redhat_transparent_hugepage directory", From: e.host.fs.SysPath("kernel", "mm")}}}
	}
	if !v.Known() {
		return thpUnknown(e, v)
	}
	ev := []Evidence{{Text: "defrag = " + v.Mode, From: v.Path}}
	if v.Mode == "always" {
		return result{sev: Warning, summary: "THP defrag is 'always': an allocation that finds no free huge page stalls in direct compaction",
			evidence: ev, fix: []string{"echo madvise > " + e.host.thpLiveDir() + "/defrag   # or defer+madvise, never"}}
	}
	return result{sev: OK, summary: "THP defrag: " + v.Mode, evidence: ev}
}

func init() {
	register(Check{ID: "thp-activity", Title: "THP and compaction activity during the sample", Needs: NeedsHost | NeedsSample, order: secHost + 30, run: checkTHPActivity,
		Rule:    "warning at >= 1 compact_stall/s (/proc/vmstat) during the sample; info when THP faults or collapses occur",
		Why:     "Direct compaction stalls are time backends spend in the kernel moving pages instead of running queries.",
		Sources: []string{srcTHPKernel, srcProc5, srcFieldTHP}})
}

func checkTHPActivity(_ context.Context, e *env) result {
	d := e.smp
	// Average the per-interval rates of the samples that have them.
	var n int
	var vm struct{ fault, fallback, collapse, stall, user, sys float64 }
	for _, s := range d.series {
		if s.Host == nil || !s.Host.Rates {
			continue
		}
		n++
		vm.fault += s.Host.VM.THPFaultAlloc
		vm.fallback += s.Host.VM.THPFaultFallback
		vm.collapse += s.Host.VM.THPCollapseAlloc
		vm.stall += s.Host.VM.CompactStall
		vm.user += s.Host.CPU.User + s.Host.CPU.Nice
		vm.sys += s.Host.CPU.System
	}
	if n == 0 {
		return notChecked("host counters in the sample (the sampler could not read " + e.host.procPath("vmstat") + ")")
	}
	f := float64(n)
	fault, fallback, collapse, stall := round2(vm.fault/f), round2(vm.fallback/f), round2(vm.collapse/f), round2(vm.stall/f)
	user, sys := round2(vm.user/f), round2(vm.sys/f)
	ev := []Evidence{
		{Text: fmt.Sprintf("over %.1f s: thp_fault_alloc %.2f/s, thp_fault_fallback %.2f/s, thp_collapse_alloc %.2f/s, compact_stall %.2f/s", d.elapsed, fault, fallback, collapse, stall), From: e.host.procPath("vmstat")},
		{Text: fmt.Sprintf("CPU user %.1f %%, system %.1f %% of all CPUs", user, sys), From: e.host.procPath("stat")},
	}
	m := map[string]float64{"thp_fault_alloc_per_s": fault, "thp_collapse_alloc_per_s": collapse, "compact_stall_per_s": stall,
		"cpu_user_pct": user, "cpu_system_pct": sys}
	fix := []string{"echo madvise > /sys/kernel/mm/transparent_hugepage/enabled", "echo madvise > /sys/kernel/mm/transparent_hugepage/defrag"}
	switch {
	case stall >= compactStallWarnPerS:
		return result{sev: Warning, summary: fmt.Sprintf("%.2f direct compaction stalls/s during the sample (system CPU %.1f %%, user %.1f %%)", stall, sys, user), evidence: ev, metrics: m, fix: fix}
	case fault > 0 || collapse > 0:
		return result{sev: Info, summary: fmt.Sprintf("huge pages being allocated (%.2f faults/s, %.2f collapses/s), no compaction stalls", fault, collapse), evidence: ev, metrics: m}
	}
	return result{sev: OK, summary: "no THP allocation or compaction during the sample", evidence: ev, metrics: m}
}

func init() {
	register(Check{ID: "huge-pages", Title: "Huge pages for shared memory", order: secHost + 40, run: checkHugePages,
		Rule:    "ok under 1 GiB of shared memory; warning when huge pages are off (or 'try' without enough HugePages_Total) and page tables for max_connections backends could reach 1 GiB; info otherwise",
		Why:     "Every backend maps all of shared memory; with 4 kB pages each needs its own page tables for it, which costs RAM and TLB misses that huge pages avoid.",
		Sources: []string{srcHugePagesGUC, srcHugePagesPG, srcHugetlbKernel}})
}

func checkHugePages(_ context.Context, e *env) result {
	mode := e.show("huge_pages")
	sb, _ := e.bytes("shared_buffers")
	shared := sb
	ev := []Evidence{{Text: "huge_pages = " + mode + ", shared_buffers = " + e.show("shared_buffers"), From: "pg_settings"}}
	// shared_memory_size (PostgreSQL 15+, MB) is the whole main segment.
	if v, ok := e.num("shared_memory_size"); ok && v > 0 {
		shared = int64(v) << 20
		ev = append(ev, Evidence{Text: "shared_memory_size = " + e.show("shared_memory_size"), From: "pg_settings"})
	}
	need, haveNeed := e.num("shared_memory_size_in_huge_pages")
	conns, _ := e.num("max_connections")
	ptBytes := float64(shared) / 4096 * 8 * conns
	m := map[string]float64{"shared_memory_bytes": float64(shared), "page_tables_worst_bytes": ptBytes}
	ev = append(ev, Evidence{Text: fmt.Sprintf("page tables if every one of max_connections = %.0f backends maps it with 4 kB pages: %s", conns, fmtBytes(int64(ptBytes))), From: "shared memory / 4 kB x 8 bytes x max_connections"})
	if shared < hugePagesMinShared {
		return result{sev: OK, summary: fmt.Sprintf("shared memory %s: huge pages matter little below %s", fmtBytes(shared), fmtBytes(hugePagesMinShared)), evidence: ev, metrics: m}
	}
	var total, free, rsvd float64
	if e.host != nil && e.host.mem.HugePagesTotal != nil {
		mi := e.host.mem
		total, free = float64(*mi.HugePagesTotal), float64(deref(mi.HugePagesFree))
		rsvd = float64(deref(mi.HugePagesRsvd))
		ev = append(ev, Evidence{Text: fmt.Sprintf("HugePages_Total %.0f, HugePages_Free %.0f, HugePages_Rsvd %.0f, Hugepagesize %s", total, free, rsvd, fmtBytes(int64(deref(mi.HugepagesizeBytes)))), From: e.host.procPath("meminfo")})
		m["huge_pages_total"] = total
	}
	if haveNeed {
		ev = append(ev, Evidence{Text: fmt.Sprintf("shared_memory_size_in_huge_pages = %.0f", need), From: "pg_settings"})
		m["huge_pages_needed"] = need
	}
	nrPages := "<shared_memory_size_in_huge_pages>"
	if haveNeed && need > 0 {
		nrPages = fmt.Sprintf("%.0f", need+need/50+1)
	}
	fix := []string{
		"sysctl -w vm.nr_hugepages=" + nrPages + "   # and in /etc/sysctl.d/ to persist",
		"ALTER SYSTEM SET huge_pages = 'on';   -- restart; 'on' refuses to start without the pages instead of silently falling back",
	}
	big := ptBytes >= pageTableWarnBytes
	switch mode {
	case "off":
		if big {
			return result{sev: Warning, summary: fmt.Sprintf("huge_pages = off with %s of shared memory: page tables may reach %s", fmtBytes(shared), fmtBytes(int64(ptBytes))), evidence: ev, metrics: m, fix: fix}
		}
		return result{sev: Info, summary: fmt.Sprintf("huge_pages = off with %s of shared memory", fmtBytes(shared)), evidence: ev, metrics: m, fix: fix}
	case "on":
		return result{sev: OK, summary: "huge_pages = on: the server runs, so its shared memory is in huge pages", evidence: ev, metrics: m}
	}
	// try: did it get them?
	if e.host == nil || e.host.mem.HugePagesTotal == nil || !haveNeed {
		return result{sev: Info, summary: "huge_pages = try: cannot tell whether the server got huge pages (needs a local server and PostgreSQL 15+)", evidence: ev, metrics: m, fix: fix}
	}
	inUse := total - free + rsvd
	if total < need || inUse < need {
		sev := Info
		if big {
			sev = Warning
		}
		return result{sev: sev, summary: fmt.Sprintf("huge_pages = try but the host has %.0f huge pages (%.0f in use or reserved) for %.0f needed: the server most likely fell back to 4 kB pages", total, inUse, need), evidence: ev, metrics: m, fix: fix}
	}
	return result{sev: OK, summary: fmt.Sprintf("huge pages available and in use (%.0f in use or reserved, %.0f needed)", inUse, need), evidence: ev, metrics: m}
}

func init() {
	register(Check{ID: "overcommit", Title: "Memory overcommit policy", Needs: NeedsHost, order: secHost + 50, run: checkOvercommit,
		Rule:    "ok for vm.overcommit_memory = 2; info for 0; warning for 1",
		Why:     "When the OOM killer ends one backend, the postmaster restarts all sessions to protect shared memory.",
		Sources: []string{srcOvercommitPG, srcOvercommitKernel}})
}

func checkOvercommit(_ context.Context, e *env) result {
	path := e.host.procPath("sys", "vm", "overcommit_memory")
	if e.host.overcommit == nil {
		if errors.Is(e.host.overcommitErr, fs.ErrNotExist) {
			return notChecked("a readable " + path + " (not present)")
		}
		return notChecked("a readable " + e.host.overcommitErr.Error()) // the error names the file
	}
	v := *e.host.overcommit
	ev := []Evidence{{Text: fmt.Sprintf("vm.overcommit_memory = %d", v), From: path}}
	if r := e.host.overcommitRatio; r != nil {
		ev = append(ev, Evidence{Text: fmt.Sprintf("vm.overcommit_ratio = %d", *r), From: e.host.procPath("sys", "vm", "overcommit_ratio")})
	}
	mi := e.host.mem
	if mi.CommitLimitBytes != nil && mi.CommittedASBytes != nil {
		ev = append(ev, Evidence{Text: fmt.Sprintf("CommitLimit %s, Committed_AS %s", fmtBytes(int64(*mi.CommitLimitBytes)), fmtBytes(int64(*mi.CommittedASBytes))), From: e.host.procPath("meminfo")})
	}
	m := map[string]float64{"overcommit_memory": float64(v)}
	fix := []string{
		"sysctl -w vm.overcommit_memory=2   # and vm.overcommit_ratio so that CommitLimit covers RAM in use; persist in /etc/sysctl.d/",
		"# or keep 0 and protect the postmaster: OOMScoreAdjust=-1000 in its systemd unit, PG_OOM_ADJUST_FILE=/proc/self/oom_score_adj for backends",
	}
	switch v {
	case 2:
		return result{sev: OK, summary: "strict overcommit (2): the kernel refuses allocations instead of OOM-killing backends", evidence: ev, metrics: m}
	case 1:
		return result{sev: Warning, summary: "vm.overcommit_memory = 1: the kernel never refuses memory; the OOM killer ends a backend and the postmaster restarts every session", evidence: ev, metrics: m, fix: fix}
	}
	return result{sev: Info, summary: fmt.Sprintf("vm.overcommit_memory = %d (heuristic): under memory pressure the OOM killer may end a backend and the postmaster restarts every session", v), evidence: ev, metrics: m, fix: fix}
}

func init() {
	register(Check{ID: "swap", Title: "Swap use", Needs: NeedsHost, order: secHost + 60, run: checkSwap,
		Rule:    "warning when pages are swapped in or out during the sample; info when swap holds data",
		Why:     "A backend whose memory is swapped out waits for the disk on every access, in the middle of a transaction holding locks.",
		Sources: []string{srcProc5, srcResource}})
}

func checkSwap(_ context.Context, e *env) result {
	mi := e.host.mem
	total, freeB := int64(deref(mi.SwapTotalBytes)), int64(deref(mi.SwapFreeBytes))
	used := max(total-freeB, 0)
	ev := []Evidence{{Text: fmt.Sprintf("SwapTotal %s, used %s", fmtBytes(total), fmtBytes(used)), From: e.host.procPath("meminfo")}}
	m := map[string]float64{"swap_total_bytes": float64(total), "swap_used_bytes": float64(used)}
	active := false
	if e.smp != nil && e.smp.swapKnown {
		ev = append(ev, Evidence{Text: fmt.Sprintf("during the %.1f s sample: pswpin %.2f pages/s, pswpout %.2f pages/s", e.smp.elapsed, e.smp.swapIn, e.smp.swapOut), From: e.host.procPath("vmstat")})
		m["pswpin_per_s"], m["pswpout_per_s"] = e.smp.swapIn, e.smp.swapOut
		active = e.smp.swapIn+e.smp.swapOut > 0
	}
	fix := []string{"# find what uses the memory (shared_buffers, work_mem x sessions, other services): see check memory-budget",
		"sysctl -w vm.swappiness=1   # keep swap as a last resort"}
	switch {
	case active:
		return result{sev: Warning, summary: fmt.Sprintf("the host is swapping during the sample (%.2f pages/s in, %.2f out; %s in swap)", e.smp.swapIn, e.smp.swapOut, fmtBytes(used)), evidence: ev, metrics: m, fix: fix}
	case used > 0:
		return result{sev: Info, summary: fmt.Sprintf("%s in swap, no swapping seen", fmtBytes(used)), evidence: ev, metrics: m}
	case total == 0:
		return result{sev: OK, summary: "no swap configured", evidence: ev, metrics: m}
	}
	return result{sev: OK, summary: "swap unused", evidence: ev, metrics: m}
}

func deref(p *uint64) uint64 {
	if p == nil {
		return 0
	}
	return *p
}

// fmtBytes formats bytes with a binary unit: "512 B", "8.0 MiB", "1.50 GiB".
func fmtBytes(b int64) string {
	f := float64(b)
	switch {
	case b < 0:
		return "-" + fmtBytes(-b)
	case b < 1<<10:
		return fmt.Sprintf("%d B", b)
	case b < 1<<20:
		return fmt.Sprintf("%.1f KiB", f/(1<<10))
	case b < 1<<30:
		return fmt.Sprintf("%.1f MiB", f/(1<<20))
	case b < 1<<40:
		return fmt.Sprintf("%.2f GiB", f/(1<<30))
	}
	return fmt.Sprintf("%.2f TiB", f/(1<<40))
}
