package replay

import (
	"container/heap"
	"context"
	"sync"
	"sync/atomic"
	"time"
)

// kickWhileParked calls kick after d, then again after 2d, 4d ...
// while the wait lasts (done not set), up to maxKickGap apart: a look
// that came before the wait it was for could be seen (a statement just
// sent, not yet waiting on its lock) is not the last one before the
// monitor's next poll.
func kickWhileParked(done *atomic.Bool, kick func(), d time.Duration) {
	time.AfterFunc(d, func() {
		if done.Load() {
			return
		}
		kick()
		kickWhileParked(done, kick, min(2*d, maxKickGap))
	})
}

// maxKickGap bounds the time between two kicks of one parked statement.
const maxKickGap = 64 * time.Millisecond

// kickAfter is how long a statement stays parked at a gate before the
// monitor is asked to look for a wait cycle through it: far above the
// time a gate takes to open in a replay that flows (a few µs to a
// statement's round trip), far below a poll.
const kickAfter = 2 * time.Millisecond

// gates keep one copy's cross-session order (OrderCapture): a statement
// is sent only when every statement of the copy that started before it in
// the capture has been sent (gate a: locks are asked for in the captured
// order) and every transaction of the copy that ended before it started
// has ended in the replay (gate b: commit order). Both are prefixes over
// the plan's orders, a counter and a bitmap each, under one mutex; a
// waiter sleeps on its own channel in a queue by the count it needs, so a
// change wakes only the sessions it lets go.
type gates struct {
	mu     sync.Mutex
	sent   []bool // by step.order
	sentN  int    // statements sent, as a prefix of the start order
	ended  []bool // by step.ends
	endedN int    // transactions ended, as a prefix of the end order
	sentQ  waiters
	endedQ waiters
	// the plan's owners of each place in the two orders
	sentOwner, endOwner []int
}

func newGates(p *plan) *gates {
	return &gates{sent: make([]bool, p.statements), ended: make([]bool, p.ends),
		sentOwner: p.sentOwner, endOwner: p.endOwner}
}

// waitsOn is the session (its index in the plan) whose statement or
// transaction end st waits for: the owner of the first place missing
// from the prefix that st needs; -1 when st's gates are open.
func (g *gates) waitsOn(st *step) int {
	g.mu.Lock()
	defer g.mu.Unlock()
	switch {
	case g.sentN < st.needSent:
		return g.sentOwner[g.sentN]
	case g.endedN < st.needEnded:
		return g.endOwner[g.endedN]
	}
	return -1
}

// wait returns when st may be sent, when release delivers (the
// watchdog: the value names the session that waited on this one), or
// with ctx's error. by is release's value when it let st go with its
// gates still closed, else ""; parked is called with true before the
// first sleep and with false after the last. kick, when not nil, is
// called if st is still parked after kickAfter, and again at doubling
// periods (the monitor then looks for a cycle at once rather than at its
// next poll).
func (g *gates) wait(ctx context.Context, st *step, release <-chan string, parked func(bool), kick func()) (by string, err error) {
	slept := false
	var done atomic.Bool // ends the kicks
	defer func() {
		done.Store(true)
		if slept {
			parked(false)
		}
	}()
	for {
		ch := g.enqueue(st)
		if ch == nil {
			return "", nil
		}
		if !slept {
			slept = true
			parked(true)
			if kick != nil {
				kickWhileParked(&done, kick, kickAfter)
			}
		}
		select {
		case <-ch:
		case by := <-release:
			return by, nil
		case <-ctx.Done():
			return "", ctx.Err()
		}
	}
}

// enqueue returns nil when st's gates are open, else the channel closed
// when the gate it waits on opens.
func (g *gates) enqueue(st *step) chan struct{} {
	g.mu.Lock()
	defer g.mu.Unlock()
	w := &waiter{ch: make(chan struct{})}
	switch {
	case g.sentN < st.needSent:
		w.need = st.needSent
		heap.Push(&g.sentQ, w)
	case g.endedN < st.needEnded:
		w.need = st.needEnded
		heap.Push(&g.endedQ, w)
	default:
		return nil
	}
	return w.ch
}

// markSent records that the statement of order i was sent (i < 0: a step
// the gates do not hold).
func (g *gates) markSent(i int) {
	if i < 0 {
		return
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	g.sent[i] = true
	advance(g.sent, &g.sentN, &g.sentQ)
}

// markEnded records that the transaction of end order i ended.
func (g *gates) markEnded(i int) {
	if i < 0 {
		return
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	g.ended[i] = true
	advance(g.ended, &g.endedN, &g.endedQ)
}

// advance moves a prefix counter over the marks set and wakes the waiters
// it satisfies.
func advance(marks []bool, n *int, q *waiters) {
	for *n < len(marks) && marks[*n] {
		*n++
	}
	for q.Len() > 0 && (*q)[0].need <= *n {
		close(heap.Pop(q).(*waiter).ch)
	}
}

// waiter is a session asleep until a prefix counter reaches need.
type waiter struct {
	need int
	ch   chan struct{}
}

// waiters is a min-heap by need (container/heap).
type waiters []*waiter

func (w waiters) Len() int           { return len(w) }
func (w waiters) Less(i, j int) bool { return w[i].need < w[j].need }
func (w waiters) Swap(i, j int)      { w[i], w[j] = w[j], w[i] }
func (w *waiters) Push(x any)        { *w = append(*w, x.(*waiter)) }
func (w *waiters) Pop() any {
	old := *w
	x := old[len(old)-1]
	*w = old[:len(old)-1]
	return x
}
