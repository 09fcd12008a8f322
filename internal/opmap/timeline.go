package opmap

import (
	"sync"
	"time"
)

// Interval is one execution of a key operation on a backend: Op (an index
// of Names) ran on PID from FromNs to ToNs, nanoseconds of Go's monotonic
// clock since the Timeline's T0 (ToNs is -1 for an execution still
// running when the timeline stopped).
type Interval struct {
	PID          uint32
	Op           int32
	FromNs, ToNs int64
}

// Timeline records every Begin and End of a Map as intervals while it is
// on (Map.StartTimeline), for attributing timed samples taken elsewhere
// (perf's) to the key operation that ran on a backend at that instant.
// Recording costs each Begin and End a monotonic clock read and an
// uncontended lock; without a timeline they pay one atomic load.
type Timeline struct {
	// T0 is the origin of the intervals' times.
	T0 time.Time

	mu      sync.Mutex
	max     int
	open    map[uint32]int // pid -> index in iv of its running execution
	iv      []Interval
	dropped int
	stopped bool
}

// StartTimeline starts recording Begin and End from now on, into at most
// max intervals (later executions are counted as dropped); times are
// measured from t0. A previous timeline of m stops. On a nil Map it
// returns nil.
func (m *Map) StartTimeline(t0 time.Time, max int) *Timeline {
	if m == nil {
		return nil
	}
	tl := &Timeline{T0: t0, max: max, open: map[uint32]int{}}
	if old := m.tl.Swap(tl); old != nil {
		old.Stop()
	}
	return tl
}

// StopTimeline stops recording into tl (if it is m's timeline) and
// returns tl.Stop().
func (m *Map) StopTimeline(tl *Timeline) ([]Interval, int) {
	if m == nil || tl == nil {
		return nil, 0
	}
	m.tl.CompareAndSwap(tl, nil)
	return tl.Stop()
}

func (t *Timeline) begin(pid uint32, op int) {
	now := int64(time.Since(t.T0))
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.stopped {
		return
	}
	if i, ok := t.open[pid]; ok { // a Begin without End: the previous one ends here
		t.iv[i].ToNs = now
		delete(t.open, pid)
	}
	if len(t.iv) >= t.max {
		t.dropped++
		return
	}
	t.open[pid] = len(t.iv)
	t.iv = append(t.iv, Interval{PID: pid, Op: int32(op), FromNs: now, ToNs: -1})
}

func (t *Timeline) end(pid uint32) {
	now := int64(time.Since(t.T0))
	t.mu.Lock()
	defer t.mu.Unlock()
	if i, ok := t.open[pid]; ok && !t.stopped {
		t.iv[i].ToNs = now
		delete(t.open, pid)
	}
}

// Stop ends the recording and returns the intervals, in order of their
// Begin, and the number of executions dropped over the limit.
func (t *Timeline) Stop() ([]Interval, int) {
	if t == nil {
		return nil, 0
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.stopped = true
	return t.iv, t.dropped
}
