package engine

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/erplab/erplab/internal/workload"
)

// closedModel is the closed model's executor (k6's ramping-vus): each VU
// runs its key operations one after the other, thinking between them, so
// the load follows the server's pace.
type closedModel struct{ *run }

// gauge: the closed model has no gauges of its own.
func (closedModel) gauge(time.Time) {}

// finish: the closed model has no counts of its own.
func (closedModel) finish(time.Time, *Outcome) {}

// runVU is a VU of the closed model: after a random first pause, it
// picks an operation from its mix, runs it and thinks, until it must
// stop or has run TxPerVU operations. It returns the number of
// operations it ran and why it stopped.
func (e closedModel) runVU(ctx context.Context, vu *workload.VU, m *mix, stop <-chan struct{}) (done int, end vuEnd) {
	e.active.Add(1)
	defer e.active.Add(-1)
	// A random first pause spreads VUs that start together, so they do
	// not march in lock step.
	if mean := e.cfg.Think.Mean(); mean > 0 {
		if !sleep(ctx, stop, time.Duration(vu.Rand.Int64N(int64(mean)+1))) {
			return 0, endStopped
		}
	}
	// own is the VU's own connection when Connections == 0.
	var own *pgxpool.Conn
	defer func() { release(own) }()
	for e.cfg.TxPerVU == 0 || done < e.cfg.TxPerVU {
		if stopped(ctx, stop) {
			return done, endStopped
		}
		var pause time.Duration
		var next step
		own, pause, next = e.operation(ctx, vu, m.pick(vu.Rand), own, time.Time{})
		switch next {
		case stepEnding:
			return done, endStopped
		case stepAborted:
			return done + 1, endAborted
		}
		done++
		if e.cfg.TxPerVU > 0 && done >= e.cfg.TxPerVU {
			return done, endDone
		}
		if pause == 0 {
			pause = e.cfg.Think.Draw(vu.Rand)
		}
		// no think time: the stop check at the top of the loop is the
		// only one needed (one select per operation instead of two)
		if pause > 0 && !sleep(ctx, stop, pause) {
			return done, endStopped
		}
	}
	return done, endDone
}
