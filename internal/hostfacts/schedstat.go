package hostfacts

import (
	"fmt"
	"time"
)

// SchedTime is one task's scheduler accounting so far
// (/proc/<pid>/task/<tid>/schedstat, the kernel's
// Documentation/scheduler/sched-stats.rst): Run the time it spent on a
// CPU, Delay the time it spent runnable on a run queue but not running
// (the "run delay"), both since the task started.
type SchedTime struct {
	Run, Delay time.Duration
}

// ThreadSchedstats returns the scheduler accounting of every thread of
// pid, by thread id, read with procfs (Proc.Schedstat of each task).
// Threads that exit during the read are left out. Errors: pid is gone
// (its task directory cannot be listed), or no thread's schedstat could
// be read (a kernel without CONFIG_SCHED_INFO has no schedstat files).
func (f FS) ThreadSchedstats(pid int) (map[int]SchedTime, error) {
	threads, err := f.proc.AllThreads(pid)
	if err != nil {
		return nil, fmt.Errorf("schedstat of %d: %w", pid, err)
	}
	out := make(map[int]SchedTime, len(threads))
	var last error
	for _, th := range threads {
		s, err := th.Schedstat()
		if err != nil {
			last = err
			continue
		}
		out[th.PID] = SchedTime{Run: time.Duration(s.RunningNanoseconds), Delay: time.Duration(s.WaitingNanoseconds)}
	}
	if len(out) == 0 && last != nil {
		return nil, fmt.Errorf("schedstat of %d: %w", pid, last)
	}
	return out, nil
}
