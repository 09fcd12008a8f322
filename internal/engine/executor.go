package engine

import (
	"context"
	"time"

	"github.com/erplab/erplab/internal/workload"
)

// executor is one load model, in the sense of k6's executors: what each
// VU does and what the model adds to the run's gauges and outcome. The
// controller (control.go), the same for every model, starts and stops
// the VUs the stages ask for through startVU and the handles it returns;
// it calls gauge on every tick and finish once every VU has ended. Run
// chooses the executor once, from the configuration ((*run).executor).
type executor interface {
	// startVU starts vu, of mix m, which runs until it is halted, ctx
	// ends or it stops on its own; once stopped it calls (*run).vuEnded,
	// once.
	startVU(ctx context.Context, vu *workload.VU, m *mix) vuHandle
	// gauge hands the recorder the model's gauges at now (no later than
	// the moment the VUs were told to stop).
	gauge(now time.Time)
	// finish adds the model's counts to out once every VU has ended;
	// stopAt is when the VUs were told to stop.
	finish(stopAt time.Time, out *Outcome)
}

// vuHandle is the controller's hold on one running VU.
type vuHandle interface {
	// halt tells the VU to stop: at once when it waits (thinks, or waits
	// for an arrival), after its current operation otherwise.
	halt()
	// stoppedSelf reports whether the VU stopped on its own (TxPerVU
	// done or workload.ErrStopVU), set before it is counted as ended.
	stoppedSelf() bool
}

// executor chooses the load model from the configuration: the open model
// when a rate is given (its profile checked here, before anything runs),
// the closed model otherwise.
func (e *run) executor() (executor, error) {
	if e.cfg.Rate == nil {
		return closedModel{e}, nil
	}
	return newOpenModel(e)
}

// vuEnd is why a VU's loop returned.
type vuEnd int

const (
	endStopped vuEnd = iota // told to stop, or the run is ending
	endDone                 // ran its TxPerVU operations
	endAborted              // an operation failed with workload.ErrStopVU
)

// step is what a VU does after an operation.
type step int

const (
	stepNext    step = iota // go on
	stepEnding              // the run is ending: the operation was cut short
	stepAborted             // the operation failed with workload.ErrStopVU: stop the VU
)

// stopped reports, without waiting, whether the VU must stop.
func stopped(ctx context.Context, stop <-chan struct{}) bool {
	select {
	case <-stop:
		return true
	case <-ctx.Done():
		return true
	default:
		return false
	}
}

// sleep waits d unless stop or ctx ends first; it reports whether the VU
// should go on.
func sleep(ctx context.Context, stop <-chan struct{}, d time.Duration) bool {
	if d <= 0 {
		select {
		case <-stop:
			return false
		case <-ctx.Done():
			return false
		default:
			return true
		}
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-stop:
		return false
	case <-ctx.Done():
		return false
	}
}
