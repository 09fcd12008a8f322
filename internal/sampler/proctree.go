package sampler

import (
	"fmt"
	"math"
	"os"
	"time"

	"github.com/erplab/erplab/internal/hostfacts"
)

// Noise is one interval's account of who used the host's CPU, for the
// noise guard of package compare: the server under test (the
// postmaster's process tree), erplab itself (this process and its
// children outside the server's tree) and everything else ("foreign":
// neighbours on a shared machine, a CPU hog, kernel threads). Shares are
// % of all CPUs over the interval, like Host.CPU; only for a local server
// whose processes this process can see (same PID namespace).
type Noise struct {
	// PostmasterPID is the server's postmaster (the parent of the
	// sampler's backend).
	PostmasterPID int `json:"postmaster_pid"`
	// ServerUser and ServerSystem are the user and system CPU time of
	// the postmaster's tree (utime, stime of every live process plus the
	// cutime, cstime of the children they reaped; proc(5)).
	ServerUser   float64 `json:"server_user_pct"`
	ServerSystem float64 `json:"server_system_pct"`
	// Erplab is the CPU time of this process and its descendants that
	// are not in the server's tree (an embedded server is erplab's child).
	Erplab float64 `json:"erplab_pct"`
	// HostBusy is the host's busy share (procfile.CPU.Busy: user, nice,
	// system, irq, softirq, steal) and Foreign = HostBusy - ServerUser -
	// ServerSystem - Erplab, at least 0.
	HostBusy float64 `json:"host_busy_pct"`
	Foreign  float64 `json:"foreign_pct"`
	// Steal is the time the hypervisor gave other guests (part of
	// Foreign); ProcsRunning the runnable tasks at the sample
	// (/proc/stat procs_running).
	Steal        float64 `json:"steal_pct,omitempty"`
	ProcsRunning uint64  `json:"procs_running"`
	// ForeignRunnable is ProcsRunning minus the runnable (state R)
	// processes of the server's tree and threads of erplab, at least 0:
	// the tasks competing with the server for the CPUs. On a saturated
	// host foreign CPU cannot grow, but this does. CPUs is the number of
	// CPUs of /proc/stat.
	ForeignRunnable int `json:"foreign_runnable"`
	CPUs            int `json:"cpus"`
	// Sched is the starvation of the interval (schedstat run delay);
	// nil when the kernel has no schedstat files (and in results written
	// before it was recorded).
	Sched *Sched `json:"sched,omitempty"`
}

// Sched is the time, ms over the interval, the server's processes (every
// thread of the postmaster's tree) and erplab's own threads (the load
// generator, this process's /proc/self/task) spent on a CPU (Run) and
// runnable but waiting for one (Delay, the schedstat "run delay"; the
// kernel's Documentation/scheduler/sched-stats.rst), summed over their
// tasks: 2,000 ms of ServerDelayMs in a 1 s interval means two server
// tasks waited for a CPU the whole second. A task that started during
// the interval counts from its start; one that ended during it loses its
// last part. This is the starvation compare's noise guard judges (CPU
// shares cannot show it on a saturated host).
type Sched struct {
	ServerRunMs   float64 `json:"server_run_ms"`
	ServerDelayMs float64 `json:"server_run_delay_ms"`
	ErplabRunMs   float64 `json:"erplab_run_ms"`
	ErplabDelayMs float64 `json:"erplab_run_delay_ms"`
}

// treeCounters are cumulative CPU seconds of one reading.
type treeCounters struct {
	hostBusy, hostTotal, steal float64
	serverUser, serverSys      float64
	erplab                     float64
	procsRunning               uint64
	// server and erplab are the tasks' schedstat by thread id (nil
	// when unreadable).
	serverSched, erplabSched map[int]hostfacts.SchedTime
}

// treeReader reads the process-tree CPU of a local server.
type treeReader struct {
	facts      hostfacts.FS
	postmaster int
	self       int
	cpus       int
	prev       *treeCounters
}

// newTreeReader finds the postmaster of backend (its parent process) in
// the proc tree at root; it fails when backend or its parent is not a
// process named "postgres" there (another PID namespace, a remote
// server).
func newTreeReader(root string, backend int) (*treeReader, error) {
	facts, err := hostfacts.New(root, "")
	if err != nil {
		return nil, fmt.Errorf("process tree: %w", err)
	}
	p, err := facts.Proc(backend)
	if err != nil {
		return nil, fmt.Errorf("process tree: backend %d: %w", backend, err)
	}
	st, err := p.Stat()
	if err != nil || st.Comm != "postgres" {
		return nil, fmt.Errorf("process tree: backend %d is not a visible postgres process", backend)
	}
	pp, err := facts.Proc(st.PPID)
	if err != nil {
		return nil, fmt.Errorf("process tree: postmaster %d: %w", st.PPID, err)
	}
	pst, err := pp.Stat()
	if err != nil || pst.Comm != "postgres" {
		return nil, fmt.Errorf("process tree: parent %d of backend %d is not postgres", st.PPID, backend)
	}
	return &treeReader{facts: facts, postmaster: st.PPID, self: os.Getpid()}, nil
}

// userHZ is the clock tick of /proc/<pid>/stat times (procfs uses 100).
const userHZ = 100

// counters reads the host's CPU line and every process once.
func (t *treeReader) counters() (*treeCounters, int, error) {
	st, err := t.facts.Stat()
	if err != nil {
		return nil, 0, fmt.Errorf("process tree: stat: %w", err)
	}
	procs, err := t.facts.AllProcs()
	if err != nil {
		return nil, 0, fmt.Errorf("process tree: %w", err)
	}
	type entry struct {
		ppid      int
		user, sys float64 // own plus reaped children's, seconds
		running   bool
	}
	all := make(map[int]entry, len(procs))
	children := map[int][]int{}
	for _, p := range procs {
		s, err := p.Stat()
		if err != nil {
			continue // exited meanwhile
		}
		all[p.PID] = entry{ppid: s.PPID,
			user: float64(s.UTime+uint(max(s.CUTime, 0))) / userHZ,
			sys:  float64(s.STime+uint(max(s.CSTime, 0))) / userHZ, running: s.State == "R"}
		children[s.PPID] = append(children[s.PPID], p.PID)
	}
	// tree returns the pids of root and its descendants, skipping skip.
	tree := func(root, skip int) []int {
		var out []int
		stack := []int{root}
		for len(stack) > 0 {
			pid := stack[len(stack)-1]
			stack = stack[:len(stack)-1]
			if pid == skip {
				continue
			}
			if _, ok := all[pid]; !ok {
				continue
			}
			out = append(out, pid)
			stack = append(stack, children[pid]...)
		}
		return out
	}
	c := &treeCounters{}
	ours := 0 // runnable tasks of the server and erplab
	serverPIDs := tree(t.postmaster, -1)
	c.serverSched = t.schedstats(serverPIDs)
	c.erplabSched = t.schedstats([]int{t.self})
	for _, pid := range serverPIDs {
		c.serverUser += all[pid].user
		c.serverSys += all[pid].sys
		if all[pid].running {
			ours++
		}
	}
	for _, pid := range tree(t.self, t.postmaster) {
		c.erplab += all[pid].user + all[pid].sys
		ours += t.runnableThreads(pid, all[pid].running)
	}
	running := max(int(st.ProcessesRunning)-ours, 0)
	t.cpus = len(st.CPU)
	h := st.CPUTotal
	c.hostBusy = h.User + h.Nice + h.System + h.IRQ + h.SoftIRQ + h.Steal
	c.hostTotal = c.hostBusy + h.Idle + h.Iowait
	c.steal = h.Steal
	c.procsRunning = st.ProcessesRunning
	return c, running, nil
}

// schedstats reads the schedstat of every thread of pids; nil when none
// could be read (no schedstat files, or every process gone).
func (t *treeReader) schedstats(pids []int) map[int]hostfacts.SchedTime {
	var out map[int]hostfacts.SchedTime
	for _, pid := range pids {
		ts, err := t.facts.ThreadSchedstats(pid)
		if err != nil {
			continue
		}
		if out == nil {
			out = make(map[int]hostfacts.SchedTime, len(pids))
		}
		for tid, st := range ts {
			out[tid] = st
		}
	}
	return out
}

// schedDelta sums cur-prev per task, ms (a task new in cur counts
// whole: it started during the interval); ok false when either reading
// is missing.
func schedDelta(prev, cur map[int]hostfacts.SchedTime) (run, delay float64, ok bool) {
	if prev == nil || cur == nil {
		return 0, 0, false
	}
	var r, d time.Duration
	for tid, c := range cur {
		p := prev[tid]
		if c.Run >= p.Run && c.Delay >= p.Delay {
			r += c.Run - p.Run
			d += c.Delay - p.Delay
		} // else a reused thread id: skip it
	}
	ms := func(x time.Duration) float64 { return math.Round(float64(x)/1e4) / 100 }
	return ms(r), ms(d), true
}

// runnableThreads counts the threads of pid in state R (the process's
// own state when its threads cannot be read).
func (t *treeReader) runnableThreads(pid int, procRunning bool) int {
	threads, err := t.facts.AllThreads(pid)
	if err != nil || len(threads) == 0 {
		if procRunning {
			return 1
		}
		return 0
	}
	n := 0
	for _, th := range threads {
		if s, err := th.Stat(); err == nil && s.State == "R" {
			n++
		}
	}
	return n
}

// read returns the shares since the previous read (nil on the first).
func (t *treeReader) read() (*Noise, error) {
	cur, foreignRunnable, err := t.counters()
	if err != nil {
		return nil, err
	}
	prev := t.prev
	t.prev = cur
	if prev == nil {
		return nil, nil
	}
	total := cur.hostTotal - prev.hostTotal
	if total <= 0 {
		return nil, nil
	}
	pct := func(a, b float64) float64 { return math.Round(10000*max(b-a, 0)/total) / 100 }
	n := &Noise{PostmasterPID: t.postmaster, ProcsRunning: cur.procsRunning, ForeignRunnable: foreignRunnable, CPUs: t.cpus,
		ServerUser: pct(prev.serverUser, cur.serverUser), ServerSystem: pct(prev.serverSys, cur.serverSys),
		Erplab: pct(prev.erplab, cur.erplab), HostBusy: pct(prev.hostBusy, cur.hostBusy), Steal: pct(prev.steal, cur.steal)}
	n.Foreign = math.Round(100*max(n.HostBusy-n.ServerUser-n.ServerSystem-n.Erplab, 0)) / 100
	sr, sd, okS := schedDelta(prev.serverSched, cur.serverSched)
	er, ed, okE := schedDelta(prev.erplabSched, cur.erplabSched)
	if okS && okE {
		n.Sched = &Sched{ServerRunMs: sr, ServerDelayMs: sd, ErplabRunMs: er, ErplabDelayMs: ed}
	}
	return n, nil
}

// owns reports whether backend is a child of t's postmaster (after a
// reconnection the reader and its previous counters stay valid).
func (t *treeReader) owns(backend int) bool {
	p, err := t.facts.Proc(backend)
	if err != nil {
		return false
	}
	st, err := p.Stat()
	return err == nil && st.PPID == t.postmaster
}
