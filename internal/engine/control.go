package engine

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync/atomic"
	"time"

	"github.com/erplab/erplab/internal/results"
	"github.com/erplab/erplab/internal/workload"
)

// The controller, the same for every executor: it starts and stops the
// VUs the stages ask for (each runs the executor's runVU), closes the
// intervals on every tick, judges the server, ends the run (at the end
// of the stages, when every VU has stopped on its own, on an abort or an
// interrupt), lets the VUs finish within the graceful stop and tells how
// the run ended.

// controller is the state of one run's controller goroutine.
type controller struct {
	*run
	exec      executor
	ctx       context.Context    // the caller's: its end is an interrupt
	runCtx    context.Context    // the VUs': cancelled to cut operations short
	cancelOps context.CancelFunc // cancels runCtx
	start     time.Time
	ticker    *time.Ticker

	vus    []vuHandle // running, in order of start
	nextID int        // the next VU's id within this segment, from 1
	out    Outcome
	abort  error
	// stopAt is when the VUs were told to stop: no arrival after it is
	// due.
	stopAt time.Time
	// notAnswering is the server's state at the last flush when it was
	// not answering (zero Since otherwise); lastState is that state
	// whatever it was.
	notAnswering, lastState ServerState
}

// loop runs the load model x from the recorder's start to the end of the
// run and returns how it ended.
func (e *run) loop(ctx context.Context, x executor) (Outcome, error) {
	c := &controller{run: e, exec: x, ctx: ctx, start: e.rec.Start(), nextID: 1, out: Outcome{Status: results.StatusCompleted}}
	c.runCtx, c.cancelOps = context.WithCancel(context.WithoutCancel(ctx))
	defer c.cancelOps()
	c.ticker = time.NewTicker(e.cfg.Tick)
	defer c.ticker.Stop()
	probeCtx, stopProbe := context.WithCancel(context.WithoutCancel(ctx))
	probeDone := make(chan struct{})
	go func() { defer close(probeDone); e.watch.probe(probeCtx, e.pool) }()
	defer func() { stopProbe(); <-probeDone }()
	c.stopAt = c.start.Add(TotalDuration(e.cfg.Stages))
	c.drive()
	c.drain()
	return c.outcome(time.Now())
}

// drive follows the stages until they end, every VU has stopped on its
// own, the run is aborted or ctx ends (an interrupt: the operations are
// cancelled at once).
func (c *controller) drive() {
	for {
		now := time.Now()
		target, done := TargetAt(c.cfg.Stages, now.Sub(c.start))
		if done {
			return
		}
		c.resize(c.cfg.Segment.Scale(target))
		c.flush(now)
		if c.over(now) {
			return
		}
		select {
		case <-c.ctx.Done():
			c.out.Status = results.StatusInterrupted
			c.cancelOps()
			return
		case <-c.ticker.C:
		case <-c.wake:
		}
	}
}

// resize starts or stops VUs (the last started first) until target run.
func (c *controller) resize(target int) {
	for len(c.vus) < target {
		c.startVU()
	}
	for len(c.vus) > target {
		c.stopLast()
	}
	c.out.MaxVUs = max(c.out.MaxVUs, len(c.vus))
}

// startVU starts the next VU, with its run-wide id, its random source
// and its role.
func (c *controller) startVU() {
	id := c.cfg.Segment.Global(c.nextID-1) + 1
	vu := &workload.VU{
		ID:   id,
		Rand: rand.New(rand.NewPCG(c.cfg.Seed, uint64(id))),
	}
	m := c.roleOf(id)
	vu.Role = m.role
	c.nextID++
	c.live.Add(1)
	c.vus = append(c.vus, c.exec.startVU(c.traceContext(c.runCtx), vu, m))
}

// vuEnded counts a VU that ran n operations and stopped for end (self
// is set when it stopped on its own), wakes the controller and marks the
// VU ended (run.live).
func (e *run) vuEnded(self *atomic.Bool, n int, end vuEnd) {
	switch {
	case end == endAborted:
		e.aborted.Add(1)
	case e.cfg.TxPerVU > 0 && n < e.cfg.TxPerVU:
		e.unfinish.Add(1)
	}
	if end != endStopped {
		self.Store(true)
	}
	select {
	case e.wake <- struct{}{}:
	default:
	}
	e.live.Done()
}

// stopLast tells the last started VU to stop.
func (c *controller) stopLast() {
	h := c.vus[len(c.vus)-1]
	c.vus = c.vus[:len(c.vus)-1]
	h.halt()
}

// flush sets the gauges, closes the intervals due by now and judges the
// server's state.
func (c *controller) flush(now time.Time) {
	c.rec.SetGauges(int(c.active.Load()), int(c.waiters.Load()), int(c.inflight.Load()))
	c.exec.gauge(minTime(now, c.stopAt)) // no arrival is due after stopAt
	for _, iv := range c.rec.Tick(now) {
		if c.cfg.OnInterval != nil {
			c.cfg.OnInterval(iv)
		}
	}
	lastOK := time.Unix(0, c.lastOK.Load())
	msg, _ := c.lastErr.Load().(string)
	unreachable := c.errors.Load() > 0 && msg != "" && now.Sub(lastOK) > 2*c.cfg.Tick+time.Second
	st := c.watch.judge(now, c.start, c.inflight.Load(), lastOK, unreachable)
	c.cfg.Health.set(st)
	c.lastState = st
	c.notAnswering = ServerState{}
	if st.Condition == ServerNotAnswering {
		c.notAnswering = st
	}
}

// over reports whether the run ends at now before its stages do: every
// VU has stopped on its own and none would be started, or the run is
// aborted (c.abort).
func (c *controller) over(now time.Time) bool {
	if allStopped(c.vus) && c.cfg.Segment.Scale(maxTargetFrom(c.cfg.Stages, now.Sub(c.start))) <= len(c.vus) {
		// Every VU has stopped on its own (run its transactions,
		// pgbench -t, or aborted) and none would be started.
		c.stopAt = now
		return true
	}
	c.abort = c.abortFor(now)
	return c.abort != nil
}

// abortFor returns why the run must be aborted at now (ErrAborted
// wrapped), nil when it goes on: too many errors, a server not answering
// or gone for Config.ServerGone.
func (c *controller) abortFor(now time.Time) error {
	if c.cfg.MaxErrors > 0 && c.errors.Load() >= c.cfg.MaxErrors {
		return fmt.Errorf("%w: %d operations failed (--max-errors %d)", ErrAborted, c.errors.Load(), c.cfg.MaxErrors)
	}
	if c.cfg.Stop != nil {
		if err := c.cfg.Stop(); err != nil {
			return fmt.Errorf("%w: %w", ErrAborted, err)
		}
	}
	if st := c.notAnswering; !st.Since.IsZero() && now.Sub(st.Since) > c.cfg.ServerGone {
		return fmt.Errorf("%w: %w at t=%.1f s: no answer for %s with %d operations waiting", ErrAborted, ErrNotAnswering,
			st.Since.Sub(c.start).Seconds(), now.Sub(st.Since).Round(time.Second), st.Waiting)
	}
	if last := c.lastAlive(); c.errors.Load() > 0 && now.Sub(last) > c.cfg.ServerGone {
		if msg, _ := c.lastErr.Load().(string); msg != "" {
			return fmt.Errorf("%w: %w: no operation succeeded for %s; last error: %s", ErrAborted, ErrServerGone, now.Sub(last).Round(time.Second), msg)
		}
	}
	return nil
}

// drain stops every VU and waits for them: in-flight operations may
// finish within the graceful stop unless the run was aborted or
// interrupted (then, or when the graceful stop is over, they are
// cancelled, and the sockets of those still stuck hardStopAfter later
// are closed under them). Intervals go on closing meanwhile.
func (c *controller) drain() {
	for len(c.vus) > 0 {
		c.stopLast()
	}
	// A VU that checked its stop channel before this point started its
	// arrival before it.
	c.stopAt = minTime(c.stopAt, time.Now())
	finished := make(chan struct{})
	go func() { c.live.Wait(); close(finished) }()
	grace := time.NewTimer(c.cfg.GracefulStop)
	defer grace.Stop()
	hard := newHardStop(c.cancelOps)
	defer hard.stop()
	if c.abort != nil || c.out.Status == results.StatusInterrupted {
		hard.cancel()
	}
	interrupt := c.ctx.Done() // nil once seen
	for {
		select {
		case <-finished:
			return
		case <-grace.C:
			hard.cancel()
		case <-hard.timer.C:
			c.out.StuckClosed += c.watch.closeInFlight()
		case <-interrupt:
			if c.out.Status == results.StatusCompleted {
				c.out.Status = results.StatusInterrupted
			}
			hard.cancel()
			interrupt = nil
		case now := <-c.ticker.C:
			// Intervals go on closing in the graceful stop, so what
			// completes in it lies in the interval it completed in.
			c.flush(now)
		}
	}
}

// hardStop cancels the operations once and, hardStopAfter later, fires
// its timer: the sockets of those still in flight are then closed under
// them.
type hardStop struct {
	cancelOps context.CancelFunc
	timer     *time.Timer
	cancelled bool
}

// newHardStop is a hard stop, unarmed, of the operations cancelOps
// cancels.
func newHardStop(cancelOps context.CancelFunc) *hardStop {
	t := time.NewTimer(time.Hour)
	t.Stop()
	return &hardStop{cancelOps: cancelOps, timer: t}
}

// cancel cancels the operations and, the first time, arms the timer.
func (h *hardStop) cancel() {
	h.cancelOps()
	if !h.cancelled {
		h.cancelled = true
		h.timer.Reset(hardStopAfter)
	}
}

func (h *hardStop) stop() { h.timer.Stop() }

// outcome closes the run at end, once every VU has exited: the model's
// counts, the VUs', the last interval, the spans of not answering and
// whether the server was lost at the end.
func (c *controller) outcome(end time.Time) (Outcome, error) {
	out := c.out
	c.exec.finish(c.stopAt, &out)
	out.Unfinished = int(c.unfinish.Load())
	out.AbortedVUs = int(c.aborted.Load())
	c.rec.SetAbortedVUs(out.AbortedVUs)
	// Close the last, possibly partial, interval so nothing recorded is
	// left out of the series.
	c.rec.SetGauges(0, 0, 0)
	for _, iv := range c.rec.Finish(end) {
		if c.cfg.OnInterval != nil {
			c.cfg.OnInterval(iv)
		}
	}
	out.Elapsed = end.Sub(c.start)
	out.Cancelled = c.cancelled.Load()
	out.Unresponsive = c.watch.finish(end, c.start)
	if c.abort == nil && out.Status == results.StatusCompleted {
		out.LostAtEnd = c.lostAtEnd(end, c.start, c.lastState)
	}
	if c.abort != nil {
		out.Status = results.StatusAborted.Because(abortReason(c.abort))
		return out, c.abort
	}
	return out, nil
}

// lostAtEnd returns how the run ended without its server when every
// operation has failed for want of one (failSince) for LostAtEndAfter at
// end, nil otherwise; st is the server's last judged state.
func (e *run) lostAtEnd(end, start time.Time, st ServerState) *Lost {
	since := e.failSince.Load()
	if since == 0 || end.Sub(time.Unix(0, since)) < LostAtEndAfter {
		return nil
	}
	c := st.Condition
	if c != ServerShuttingDown && c != ServerComingBack {
		c = ServerUnreachable
	}
	return &Lost{Condition: c, FromS: round3(max(time.Unix(0, e.lastOK.Load()).Sub(start), 0).Seconds())}
}

// lastAlive is the last time the server answered an operation or said
// it was coming back (starting up, in recovery).
func (e *run) lastAlive() time.Time {
	last := time.Unix(0, e.lastOK.Load())
	if b := time.Unix(0, e.watch.lastBack.Load()); b.After(last) {
		return b
	}
	return last
}

// allStopped reports whether there are VUs and every one has stopped on
// its own.
func allStopped(vus []vuHandle) bool {
	for _, h := range vus {
		if !h.stoppedSelf() {
			return false
		}
	}
	return len(vus) > 0
}

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

func abortReason(err error) string {
	s := err.Error()
	prefix := ErrAborted.Error() + ": "
	if len(s) > len(prefix) && s[:len(prefix)] == prefix {
		return s[len(prefix):]
	}
	return s
}
