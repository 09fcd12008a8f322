// Package opmap keeps, for a load test, which key operation runs on which
// server backend: a map from backend PID (pgconn.PgConn.PID, known from
// the connection's start-up) to the index of the key operation running on
// it, or idle. The engine marks an operation's start and end on its
// connection (Begin, End: one atomic store each, no lock once the PID is
// known); samplers read it (Snapshot, Op) to attribute what they see on a
// backend, such as its wait event or its statement, to a key operation.
//
// Each Begin also advances the PID's sequence number, so a reader that
// takes a Snapshot before and after reading the server can tell whether
// the same execution ran on the backend all along (Stable): only then does
// what it read belong to that execution.
package opmap

import (
	"sync"
	"sync/atomic"
)

// Idle is the Op of a backend on which no key operation runs.
const Idle = -1

// Map is the PID-to-operation map. The zero value is not usable: call New.
// A nil *Map is valid and does nothing (Begin, End, Forget are no-ops,
// Snapshot returns an empty map), so callers need not check. Safe for
// concurrent use.
type Map struct {
	names []string
	m     sync.Map                 // uint32 -> *atomic.Uint64: seq<<32 | uint32(op+1)
	tl    atomic.Pointer[Timeline] // nil unless StartTimeline (timeline.go)
	texts *Texts                   // statement texts per operation (texts.go)
}

// New returns an empty map for the key operations named by names (index i
// of Begin is names[i]).
func New(names []string) *Map {
	return &Map{names: append([]string(nil), names...), texts: &Texts{}}
}

// Names returns the operation names, by index (shared: do not modify).
func (m *Map) Names() []string {
	if m == nil {
		return nil
	}
	return m.names
}

// Name returns the name of operation op, "" when op is out of range or
// Idle.
func (m *Map) Name(op int) string {
	if m == nil || op < 0 || op >= len(m.names) {
		return ""
	}
	return m.names[op]
}

func (m *Map) slot(pid uint32) *atomic.Uint64 {
	if v, ok := m.m.Load(pid); ok {
		return v.(*atomic.Uint64)
	}
	v, _ := m.m.LoadOrStore(pid, new(atomic.Uint64))
	return v.(*atomic.Uint64)
}

// Begin marks key operation op (an index of Names) as running on backend
// pid from now on, as a new execution (its sequence number advances).
func (m *Map) Begin(pid uint32, op int) {
	if m == nil || pid == 0 {
		return
	}
	s := m.slot(pid)
	seq := s.Load()>>32 + 1
	s.Store(seq<<32 | uint64(uint32(op+1)))
	if tl := m.tl.Load(); tl != nil {
		tl.begin(pid, op)
	}
}

// End marks backend pid idle (its sequence number is kept).
func (m *Map) End(pid uint32) {
	if m == nil || pid == 0 {
		return
	}
	if v, ok := m.m.Load(pid); ok {
		s := v.(*atomic.Uint64)
		s.Store(s.Load() &^ (1<<32 - 1))
	}
	if tl := m.tl.Load(); tl != nil {
		tl.end(pid)
	}
}

// Forget drops backend pid (its connection closed), so that a later
// backend reusing the PID starts afresh.
func (m *Map) Forget(pid uint32) {
	if m == nil {
		return
	}
	m.m.Delete(pid)
}

// State is what runs on one backend: Op (an index of Names, or Idle) and
// Seq, the number of Begins seen on the PID so far.
type State struct {
	Op  int
	Seq uint32
}

func decode(v uint64) State { return State{Op: int(uint32(v)) - 1, Seq: uint32(v >> 32)} }

// Op returns the operation running on pid now (Idle when none) and whether
// the PID is known.
func (m *Map) Op(pid uint32) (int, bool) {
	if m == nil {
		return Idle, false
	}
	v, ok := m.m.Load(pid)
	if !ok {
		return Idle, false
	}
	return decode(v.(*atomic.Uint64).Load()).Op, true
}

// Snapshot returns the state of every known backend, PID -> State, into
// dst (cleared first; nil allocates a new map). The states are read one by
// one, not at one instant.
func (m *Map) Snapshot(dst map[uint32]State) map[uint32]State {
	if dst == nil {
		dst = map[uint32]State{}
	}
	clear(dst)
	if m == nil {
		return dst
	}
	m.m.Range(func(k, v any) bool {
		dst[k.(uint32)] = decode(v.(*atomic.Uint64).Load())
		return true
	})
	return dst
}

// Stable returns the operation that ran on pid throughout the time between
// two snapshots, before and after, and true; false when pid was idle at
// either, unknown, or began another execution in between.
func Stable(before, after map[uint32]State, pid uint32) (int, bool) {
	b, ok1 := before[pid]
	a, ok2 := after[pid]
	if !ok1 || !ok2 || b != a || b.Op == Idle {
		return Idle, false
	}
	return b.Op, true
}
