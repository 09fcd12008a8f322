package sampler

import (
	"fmt"
	"math"
	"os"

	"github.com/prometheus/procfs"
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
}

// treeCounters are cumulative CPU seconds of one reading.
type treeCounters struct {
	hostBusy, hostTotal, steal float64
	serverUser, serverSys      float64
	erplab                     float64
	procsRunning               uint64
}

// treeReader reads the process-tree CPU of a local server.
type treeReader struct {
	fs         procfs.FS
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
	fs, err := procfs.NewFS(root)
	if err != nil {
		return nil, fmt.Errorf("process tree: %w", err)
	}
	p, err := fs.Proc(backend)
	if err != nil {
		return nil, fmt.Errorf("process tree: backend %d: %w", backend, err)
	}
	st, err := p.Stat()
	if err != nil || st.Comm != "postgres" {
		return nil, fmt.Errorf("process tree: backend %d is not a visible postgres process", backend)
	}
	pp, err := fs.Proc(st.PPID)
	if err != nil {
		return nil, fmt.Errorf("process tree: postmaster %d: %w", st.PPID, err)
	}
	pst, err := pp.Stat()
	if err != nil || pst.Comm != "postgres" {
		return nil, fmt.Errorf("process tree: parent %d of backend %d is not postgres", st.PPID, backend)
	}
	return &treeReader{fs: fs, postmaster: st.PPID, self: os.Getpid()}, nil
}

// userHZ is the clock tick of /proc/<pid>/stat times (procfs uses 100).
const userHZ = 100

// counters reads the host's CPU line and every process once.
func (t *treeReader) counters() (*treeCounters, int, error) {
	st, err := t.fs.Stat()
	if err != nil {
		return nil, 0, fmt.Errorf("process tree: stat: %w", err)
	}
	procs, err := t.fs.AllProcs()
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
	for _, pid := range tree(t.postmaster, -1) {
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

// runnableThreads counts the threads of pid in state R (the process's
// own state when its threads cannot be read).
func (t *treeReader) runnableThreads(pid int, procRunning bool) int {
	threads, err := t.fs.AllThreads(pid)
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
	return n, nil
}

// owns reports whether backend is a child of t's postmaster (after a
// reconnection the reader and its previous counters stay valid).
func (t *treeReader) owns(backend int) bool {
	p, err := t.fs.Proc(backend)
	if err != nil {
		return false
	}
	st, err := p.Stat()
	return err == nil && st.PPID == t.postmaster
}
