package replay

import (
	"context"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
)

// monitor watches the replay's backends from a connection of its own:
// every Poll it asks the server which of them wait on a heavyweight lock
// and who blocks them (pg_blocking_pids). It counts each replayed
// statement seen waiting on a lock held by another replayed session
// (Fidelity.LockWaits), and it is the watchdog of the gates: when a
// statement has waited longer than its captured duration plus Margin on a
// session parked at a gate, it releases that gate (the session runs out
// of the captured order until its transaction ends, counted as a
// reorder), so the replay never hangs on its own order. A wait that
// closes a cycle (the lock's holder is parked at a gate that waits,
// through other parked sessions or lock waits, on the waiter) cannot end
// by itself: the first parked session on the cycle is released at once.
// A session parked longer than kickAfter asks for a poll at once (kick),
// so a cycle costs milliseconds, not a poll and the margin.
type monitor struct {
	conn   *pgx.Conn
	poll   time.Duration
	margin time.Duration
	tally  *tally
	kicks  chan struct{}

	mu    sync.Mutex
	byPID map[uint32]*runner
	all   map[runKey]*runner  // every runner, by copy and session
	seen  map[uint32]waitSeen // backend -> the statement seen waiting
}

// runKey names a runner: its copy and its session's place in the plan.
type runKey struct{ copy, session int }

// waitSeen is a statement (by its runner's sequence number) first seen
// waiting on a lock at since.
type waitSeen struct {
	seq   uint64
	since time.Time
}

func newMonitor(conn *pgx.Conn, poll, margin time.Duration, t *tally) *monitor {
	return &monitor{conn: conn, poll: poll, margin: margin, tally: t, kicks: make(chan struct{}, 1),
		byPID: map[uint32]*runner{}, all: map[runKey]*runner{}, seen: map[uint32]waitSeen{}}
}

// add makes a runner known before it starts (a gate's wait names its
// session; the monitor follows it to the runner).
func (m *monitor) add(r *runner) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.all[runKey{r.copy, r.sess.idx}] = r
}

// kick asks for a poll at once; kicks that come during a poll make one
// more.
func (m *monitor) kick() {
	select {
	case m.kicks <- struct{}{}:
	default:
	}
}

// register makes a runner's backend known; unregister forgets it.
func (m *monitor) register(pid uint32, r *runner) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.byPID[pid] = r
}

func (m *monitor) unregister(pid uint32) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.byPID, pid)
	delete(m.seen, pid)
}

// run polls until ctx ends. A failed poll is retried at the next period
// (the replay goes on without a watchdog for that period).
func (m *monitor) run(ctx context.Context) {
	tick := time.NewTicker(m.poll)
	defer tick.Stop()
	var last time.Time
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		case <-m.kicks:
			// Kicks come from every parked session: at most one look
			// per minKickGap, so the monitor's own queries stay a small
			// load on the server it measures.
			if d := minKickGap - time.Since(last); d > 0 {
				select {
				case <-ctx.Done():
					return
				case <-time.After(d):
				}
			}
		}
		last = time.Now()
		m.check(ctx) //nolint:errcheck // retried at the next tick
	}
}

// minKickGap is the shortest time between two looks of the monitor.
const minKickGap = 10 * time.Millisecond

// blocked is one waiting backend and the backends that block it.
type blocked struct {
	pid      uint32
	blockers []uint32
}

// check runs one poll.
func (m *monitor) check(ctx context.Context) error {
	pids := m.pids()
	if len(pids) == 0 {
		return nil
	}
	rows, err := m.conn.Query(ctx, `SELECT pid, pg_blocking_pids(pid) FROM pg_stat_activity
		WHERE pid = ANY($1) AND wait_event_type = 'Lock'`, pids)
	if err != nil {
		return err
	}
	var waits []blocked
	for rows.Next() {
		var b blocked
		if err := rows.Scan(&b.pid, &b.blockers); err != nil {
			rows.Close()
			return err
		}
		waits = append(waits, b)
	}
	if err := rows.Err(); err != nil {
		return err
	}
	now := time.Now()
	for _, b := range waits {
		m.judge(b, now)
	}
	m.breakCycles(waits)
	return nil
}

// pids lists the registered backends.
func (m *monitor) pids() []uint32 {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]uint32, 0, len(m.byPID))
	for pid := range m.byPID {
		out = append(out, pid)
	}
	return out
}

// judge counts a wait on another replayed session and releases a parked
// blocker once the wait has lasted the statement's captured duration
// plus the margin.
func (m *monitor) judge(b blocked, now time.Time) {
	m.mu.Lock()
	defer m.mu.Unlock()
	w := m.byPID[b.pid]
	if w == nil {
		return
	}
	seq, dur := w.inFlight()
	if seq == 0 {
		return // finished since the poll
	}
	var ours []*runner
	for _, pid := range b.blockers {
		if r := m.byPID[pid]; r != nil {
			ours = append(ours, r)
		}
	}
	if len(ours) == 0 {
		return // blocked by a backend the replay does not own
	}
	s, ok := m.seen[b.pid]
	if !ok || s.seq != seq {
		s = waitSeen{seq: seq, since: now}
		m.seen[b.pid] = s
		m.tally.lockWait()
	}
	if now.Sub(s.since) <= dur+m.margin {
		return
	}
	for _, r := range ours {
		r.releaseIfParked(w.name)
	}
}

// breakCycles releases, for each replayed statement waiting on a lock
// held by another replayed session, the first parked session on a path
// of waits from the holder back to the waiter: nobody on such a cycle
// can move on its own. A parked session waits on the owner of the first
// place its gate misses (gates.waitsOn); a statement waiting on a lock
// waits on its blockers.
func (m *monitor) breakCycles(waits []blocked) {
	m.mu.Lock()
	defer m.mu.Unlock()
	locks := map[*runner][]*runner{}
	for _, b := range waits {
		w := m.byPID[b.pid]
		if w == nil || w.seq.Load() == 0 {
			continue // finished since the poll
		}
		for _, pid := range b.blockers {
			if r := m.byPID[pid]; r != nil && r != w {
				locks[w] = append(locks[w], r)
			}
		}
	}
	for w, holders := range locks {
		for _, h := range holders {
			if p := m.parkedOnPath(h, w, locks); p != nil {
				p.releaseIfParked(w.name)
				break
			}
		}
	}
}

// parkedOnPath is the first parked runner on a path of waits from from
// to to, nil when there is no such path or nobody on it is parked.
func (m *monitor) parkedOnPath(from, to *runner, locks map[*runner][]*runner) *runner {
	type hop struct {
		r      *runner
		parked *runner // the first parked runner on the way to r
	}
	seen := map[*runner]bool{from: true}
	stack := []hop{{from, nil}}
	for len(stack) > 0 {
		h := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		next := locks[h.r]
		if st := h.r.parkedAt.Load(); st != nil && h.r.g != nil {
			if h.parked == nil {
				h.parked = h.r
			}
			next = nil
			if si := h.r.g.waitsOn(st); si >= 0 {
				if o := m.all[runKey{h.r.copy, si}]; o != nil {
					next = []*runner{o}
				}
			}
		}
		for _, n := range next {
			if n == to {
				if h.parked != nil {
					return h.parked
				}
				continue
			}
			if !seen[n] {
				seen[n] = true
				stack = append(stack, hop{n, h.parked})
			}
		}
	}
	return nil
}
