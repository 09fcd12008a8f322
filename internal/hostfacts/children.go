package hostfacts

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strconv"
	"strings"
)

// maxTreeDepth bounds the walk down a process tree (a postmaster's is two
// levels deep).
const maxTreeDepth = 16

// Descendants lists the descendants of roots (not the roots), reading
// only the tree: /proc/<pid>/task/<tid>/children of each process found
// (Linux 3.5+, CONFIG_PROC_CHILDREN), one file per thread, instead of
// every process's stat as ChildPIDs does. Where a root's children file is
// absent (kernel without it, or a fixture tree) it falls back to one scan
// of every /proc/<n>/stat. Processes that exit during the walk are
// skipped (the children file is a snapshot per thread; a child forked or
// reaped meanwhile may be missed, as with any read of /proc). Errors: the
// fallback cannot list the proc root.
func (f FS) Descendants(roots []int) ([]int, error) {
	var out []int
	seen := map[int]bool{}
	for _, r := range roots {
		seen[r] = true
	}
	level := append([]int(nil), roots...)
	for depth := 0; len(level) > 0 && depth < maxTreeDepth; depth++ {
		var next []int
		for _, pid := range level {
			kids, err := f.children(pid)
			if errors.Is(err, errNoChildrenFile) && depth == 0 {
				return f.descendantsByScan(roots)
			}
			for _, k := range kids {
				if !seen[k] {
					seen[k] = true
					out = append(out, k)
					next = append(next, k)
				}
			}
		}
		level = next
	}
	return out, nil
}

var errNoChildrenFile = errors.New("no task children file")

// children reads the children files of every thread of pid; a process
// that is gone has none.
func (f FS) children(pid int) ([]int, error) {
	dir := f.ProcPath(strconv.Itoa(pid), "task")
	tasks, err := os.ReadDir(dir)
	if err != nil {
		return nil, nil // gone
	}
	var out []int
	for _, t := range tasks {
		b, err := os.ReadFile(f.ProcPath(strconv.Itoa(pid), "task", t.Name(), "children"))
		if errors.Is(err, fs.ErrNotExist) {
			if _, serr := os.Stat(f.ProcPath(strconv.Itoa(pid), "task", t.Name())); serr == nil {
				return nil, errNoChildrenFile
			}
			continue // the thread exited
		}
		if err != nil {
			continue
		}
		for _, w := range strings.Fields(string(b)) {
			if n, err := strconv.Atoi(w); err == nil {
				out = append(out, n)
			}
		}
	}
	return out, nil
}

// descendantsByScan is Descendants from one scan of every process's stat.
func (f FS) descendantsByScan(roots []int) ([]int, error) {
	procs, err := f.proc.AllProcs()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", f.procRoot, err)
	}
	parent := map[int]int{}
	for _, p := range procs {
		if st, err := p.Stat(); err == nil {
			parent[p.PID] = st.PPID
		}
	}
	in := map[int]bool{}
	for _, r := range roots {
		in[r] = true
	}
	var out []int
	for pid := range parent {
		if in[pid] {
			continue
		}
		for q, n := parent[pid], 0; q > 1 && n < maxTreeDepth; q, n = parent[q], n+1 {
			if in[q] {
				out = append(out, pid)
				break
			}
		}
	}
	return out, nil
}
