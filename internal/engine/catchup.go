package engine

import (
	"context"
	"time"

	"github.com/erplab/erplab/internal/workload"
)

// pgbench's catch-up, the open model's rule under a latency limit
// (Config.LatencyLimit): a worker that finds itself behind skips every
// arrival already later than the limit, judged by one reading of the
// clock, before it takes the next one.

// catchUp is a worker's state for skipping arrivals in batches: the
// batch's scheduled times and operations, and its skip counts per
// operation (scored, warm-up) until they are handed to the recorder.
type catchUp struct {
	off     [skipBatch]float64 // scheduled, s since the schedule's start
	op      [skipBatch]int
	counts  []int64 // 2*op: scored, 2*op+1: warm-up
	touched []int   // operations with counts
	warmEnd time.Time
}

func newCatchUp(ops int, warmEnd time.Time) *catchUp {
	return &catchUp{counts: make([]int64, 2*ops), touched: make([]int, 0, ops), warmEnd: warmEnd}
}

// catchUp skips, as vu, every arrival later than the latency limit at
// now (those due by now - limit), skipBatch at a time: a batch is taken
// from the schedule under one lock, counted in the recorder under one
// lock per operation, and then handed to Config.OnSkip one arrival at a
// time. Each skipped arrival gets its operation from the mix, as a run
// one would. done counts the worker's operations so far (TxPerVU caps
// the skips); it returns the new count and false when the worker must
// stop (looked at between batches).
func (e *openModel) catchUp(ctx context.Context, vu *workload.VU, m *mix, stop <-chan struct{}, cu *catchUp, now time.Time, done int) (int, bool) {
	var skipped int64 // in this catch-up
	for {
		n := skipBatch
		if e.cfg.TxPerVU > 0 {
			n = min(n, e.cfg.TxPerVU-done)
		}
		if n <= 0 {
			return done, true
		}
		k, start := e.sched.takeLate(now, e.cfg.LatencyLimit, cu.off[:n], skipped)
		warmOff := cu.warmEnd.Sub(start).Seconds()
		for i := range k {
			op := m.pick(vu.Rand)
			cu.op[i] = op
			c := 2 * op
			if cu.off[i] < warmOff {
				c++
			}
			if cu.counts[2*op] == 0 && cu.counts[2*op+1] == 0 {
				cu.touched = append(cu.touched, op)
			}
			cu.counts[c]++
		}
		for _, op := range cu.touched {
			e.rec.RecordSkips(op, cu.counts[2*op], cu.counts[2*op+1])
			cu.counts[2*op], cu.counts[2*op+1] = 0, 0
		}
		cu.touched = cu.touched[:0]
		if e.cfg.OnSkip != nil {
			for i := range k {
				at := start.Add(time.Duration(cu.off[i] * float64(time.Second)))
				e.cfg.OnSkip(Skip{VU: vu.ID, Op: cu.op[i], Scheduled: at, At: now})
			}
		}
		done += k
		skipped += int64(k)
		if k < n {
			return done, true
		}
		if stopped(ctx, stop) {
			return done, false
		}
	}
}

// skip records an arrival scheduled at sched that vu skipped at now, as
// op, and hands it to Config.OnSkip.
func (e *openModel) skip(vu *workload.VU, op int, sched, now time.Time) {
	e.rec.RecordSkipped(op, sched)
	if e.cfg.OnSkip != nil {
		e.cfg.OnSkip(Skip{VU: vu.ID, Op: op, Scheduled: sched, At: now})
	}
}

// skipBatch is how many arrivals a worker skips in a row (one batch of
// its catch-up) between two looks at its stop channel.
const skipBatch = 64
