package engine

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/erplab/erplab/internal/workload"
)

// closedModel is the closed model's executor (k6's ramping-vus): each VU
// runs its key operations one after the other, thinking between them, so
// the load follows the server's pace.
//
// A thinking VU holds no goroutine: its think time is a timer
// (time.AfterFunc) that runs its next step on a goroutine of its own, so
// an idle VU costs its closedVU, its random source and its timer, about
// 0.4 KiB, instead of a parked goroutine's stack and select
// (docs/measurements/2026-12-04-vu-memory.md).
type closedModel struct{ *run }

// gauge: the closed model has no gauges of its own.
func (closedModel) gauge(time.Time) {}

// finish: the closed model has no counts of its own.
func (closedModel) finish(time.Time, *Outcome) {}

// closedVU is one VU of the closed model: after a random first pause, it
// picks an operation from its mix, runs it and thinks, until it must
// stop or has run TxPerVU operations. Its steps run one at a time, each
// on the goroutine its timer started (or, for a VU that does not think,
// on one goroutine throughout).
type closedVU struct {
	workload.VU
	e    closedModel
	ctx  context.Context
	m    *mix
	own  *pgxpool.Conn // the VU's own connection when Connections == 0
	done int           // operations run

	// mu orders halt against the arming of the timer: a VU told to stop
	// while thinking ends at once, one told while it runs an operation
	// ends after it.
	mu      sync.Mutex
	timer   *time.Timer // the think time's, made at the first pause
	halting atomic.Bool // told to stop
	self    atomic.Bool // stopped on its own
}

// startVU starts vu, of mix m: with a think time, on its random first
// pause, which spreads VUs that start together so that they do not march
// in lock step; otherwise on a goroutine at once.
func (e closedModel) startVU(ctx context.Context, vu *workload.VU, m *mix) vuHandle {
	v := &closedVU{VU: *vu, e: e, ctx: ctx, m: m}
	e.active.Add(1)
	if mean := e.cfg.Think.Mean(); mean > 0 {
		v.think(time.Duration(v.Rand.Int64N(int64(mean) + 1)))
	} else {
		go v.step()
	}
	return v
}

// step runs the VU's operations one after the other until it must think
// (it arms the timer for the think time and returns, leaving the VU
// without a goroutine) or stop (it ends the VU).
func (v *closedVU) step() {
	tx := v.e.cfg.TxPerVU
	for {
		if v.halting.Load() || v.ctx.Err() != nil {
			v.end(endStopped)
			return
		}
		var pause time.Duration
		var next step
		v.own, pause, next = v.e.operation(v.ctx, &v.VU, v.m.pick(v.Rand), v.own, time.Time{})
		switch next {
		case stepEnding:
			v.end(endStopped)
			return
		case stepAborted:
			v.done++
			v.end(endAborted)
			return
		}
		v.done++
		if tx > 0 && v.done >= tx {
			v.end(endDone)
			return
		}
		if pause == 0 {
			pause = v.e.cfg.Think.Draw(v.Rand)
		}
		// no think time: the stop check at the top of the loop is the
		// only one needed
		if pause > 0 {
			if !v.think(pause) {
				v.end(endStopped)
			}
			return
		}
	}
}

// think arms the timer that runs the next step after pause and reports
// whether it did: false when the VU was told to stop meanwhile.
func (v *closedVU) think(pause time.Duration) bool {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.halting.Load() {
		return false
	}
	if v.timer == nil {
		v.timer = time.AfterFunc(pause, v.step)
	} else {
		v.timer.Reset(pause)
	}
	return true
}

// halt tells the VU to stop: a thinking VU (its timer stopped before it
// fired) ends here, one running a step ends at the step's next stop
// check.
func (v *closedVU) halt() {
	v.mu.Lock()
	v.halting.Store(true)
	thinking := v.timer != nil && v.timer.Stop()
	v.mu.Unlock()
	if thinking {
		v.end(endStopped)
	}
}

func (v *closedVU) stoppedSelf() bool { return v.self.Load() }

// end ends the VU, for why: it gives back its own connection and is
// counted.
func (v *closedVU) end(why vuEnd) {
	release(v.own)
	v.own = nil
	v.e.active.Add(-1)
	v.e.vuEnded(&v.self, v.done, why)
}
