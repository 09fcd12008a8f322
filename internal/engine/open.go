package engine

import (
	"context"
	"errors"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/erplab/erplab/internal/workload"
)

// openModel is the open model's executor (k6's ramping-arrival-rate,
// pgbench --rate): arrivals come from one shared schedule, a Poisson
// process at the rate profile's rate, whatever the server does, and the
// VUs are the workers that take them in order. Under a latency limit a
// worker first skips the arrivals already too late (catchup.go).
type openModel struct {
	*run
	sched *schedule
}

// newOpenModel checks the rate profile and that there is a VU to run
// the arrivals, and builds the schedule of this segment's share of the
// rate from the recorder's start (or, with RateFromFirstArrival, from
// the first take).
func newOpenModel(e *run) (*openModel, error) {
	cfg := e.cfg
	if err := ValidateRate(cfg.Rate); err != nil {
		return nil, err
	}
	if cfg.Segment.Scale(MaxTarget(cfg.Stages)) < 1 {
		return nil, errors.New("the open model (a rate) needs at least one VU to run the arrivals")
	}
	rate := cfg.Rate
	if !cfg.Segment.Whole() {
		rate = make([]RateStage, len(cfg.Rate))
		for i, r := range cfg.Rate {
			rate[i] = RateStage{Duration: r.Duration, Rate: r.Rate * cfg.Segment.Length()}
		}
	}
	sched := newSchedule(rate, e.rec.Start(), TotalDuration(cfg.Stages), cfg.Segment.Seed(cfg.Seed))
	sched.lazy = cfg.RateFromFirstArrival
	return &openModel{run: e, sched: sched}, nil
}

// gauge hands the recorder the backlog at now and its peak since the
// last tick.
func (e *openModel) gauge(now time.Time) {
	e.rec.SetBacklog(e.sched.gauge(now))
}

// finish counts the arrivals scheduled up to stopAt and those never
// started (the backlog left), into out and the recorder.
func (e *openModel) finish(stopAt time.Time, out *Outcome) {
	out.Arrivals, out.BacklogLeft = e.sched.final(stopAt)
	e.rec.SetBacklog(out.BacklogLeft, out.BacklogLeft)
	e.rec.SetBacklogLeft(out.BacklogLeft)
}

// startVU starts a worker of the open model on a goroutine of its own
// (runVU).
func (e *openModel) startVU(ctx context.Context, vu *workload.VU, m *mix) vuHandle {
	h := &goVU{stop: make(chan struct{})}
	go func() {
		n, end := e.runVU(ctx, vu, m, h.stop)
		e.vuEnded(&h.self, n, end)
	}()
	return h
}

// goVU is the handle of a VU that runs on a goroutine of its own and
// waits on its stop channel.
type goVU struct {
	stop chan struct{} // closed to halt it
	self atomic.Bool   // stopped on its own
}

func (h *goVU) halt()             { close(h.stop) }
func (h *goVU) stoppedSelf() bool { return h.self.Load() }

// runVU is a worker of the open model: it picks an operation, takes the
// next arrival, waits for its scheduled time if that lies ahead, and
// runs it (or skips it under the latency limit). It returns the number
// of operations run or skipped and why it stopped.
func (e *openModel) runVU(ctx context.Context, vu *workload.VU, m *mix, stop <-chan struct{}) (done int, end vuEnd) {
	e.active.Add(1)
	defer e.active.Add(-1)
	var own *pgxpool.Conn
	defer func() { release(own) }()
	var cu *catchUp
	if e.cfg.LatencyLimit > 0 {
		cu = newCatchUp(len(e.cfg.Workload.Operations()), e.rec.WarmupEnd())
	}
	for e.cfg.TxPerVU == 0 || done < e.cfg.TxPerVU {
		if stopped(ctx, stop) {
			return done, endStopped
		}
		now := time.Now()
		if cu != nil {
			// Skip every arrival already later than the limit, judged by
			// this one reading of the clock (pgbench's catch-up).
			var more bool
			if done, more = e.catchUp(ctx, vu, m, stop, cu, now, done); !more {
				return done, endStopped
			}
			if e.cfg.TxPerVU > 0 && done >= e.cfg.TxPerVU {
				break
			}
		}
		op := m.pick(vu.Rand)
		a, act := e.await(ctx, vu, op, stop, now)
		switch act {
		case arrivalStop:
			return done, endStopped
		case arrivalSkipped:
			done++
			continue
		}
		var pause time.Duration
		var next step
		own, pause, next = e.operation(ctx, vu, op, own, a.at)
		switch next {
		case stepEnding:
			return done, endStopped
		case stepAborted:
			return done + 1, endAborted
		}
		done++
		if pause > 0 && !sleep(ctx, stop, pause) {
			return done, endStopped
		}
	}
	return done, endDone
}

// arrivalAct is what a worker does with the arrival it took.
type arrivalAct int

const (
	arrivalRun     arrivalAct = iota // run it now
	arrivalSkipped                   // skipped under the latency limit (recorded)
	arrivalStop                      // none taken, or given back: the worker must stop
)

// await takes vu's next arrival at now, for operation op, and waits
// for its scheduled time when that lies ahead. With no arrival left
// before the end of the run the worker waits to be stopped; a worker
// stopped while waiting gives its arrival back; an arrival already later
// than the latency limit (one a stopped worker handed back since the
// catch-up) is skipped.
func (e *openModel) await(ctx context.Context, vu *workload.VU, op int, stop <-chan struct{}, now time.Time) (arrival, arrivalAct) {
	a, ok := e.sched.take(now)
	if !ok {
		// No arrival is left before the end of the run.
		select {
		case <-stop:
		case <-ctx.Done():
		}
		return a, arrivalStop
	}
	if a.at.After(now) {
		if !waitUntil(ctx, stop, a.at) {
			e.sched.giveBack(a)
			return a, arrivalStop
		}
	} else if limit := e.cfg.LatencyLimit; limit > 0 && now.Sub(a.at) > limit {
		// Handed back late since the catch-up (a stopped worker's):
		// too late to meet the limit even if it ran at once.
		e.skip(vu, op, a.at, now)
		return a, arrivalSkipped
	}
	return a, arrivalRun
}
