package loadtest

import (
	"context"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/erplab/erplab/internal/engine"
	"github.com/erplab/erplab/internal/metrics"
	"github.com/erplab/erplab/internal/opmap"
	"github.com/erplab/erplab/internal/profile"
	"github.com/erplab/erplab/internal/record"
	"github.com/erplab/erplab/internal/results"
	"github.com/erplab/erplab/internal/sampler"
	"github.com/erplab/erplab/internal/workload"
)

// An attachment is something a run starts around its load, as k6's
// outputs are (Description, Start, AddMetricSamples, Stop): the results
// stream, the metrics endpoint, the catalog sizes, the samplers, the
// progress lines, the stress workers and the server profile. Run starts
// them in order just before the load and stops them in reverse order
// just after it; close releases what one holds on every path, also when
// the run failed before its load or an attachment failed to start.
type attachment interface {
	// start begins it on the run's time base (r.start, r.rec); an error
	// ends the run (the attachments are then closed).
	start(ctx context.Context, r *runState) error
	// interval sees each closed interval of the load, from the engine's
	// controller goroutine.
	interval(r *runState, iv results.Interval)
	// stop ends it after the load (r.end, r.outcome are set) and puts
	// what it measured in doc (doc.Extra is made).
	stop(ctx context.Context, r *runState, doc *results.Document)
	// report prints its part of the summary, from doc.
	report(w io.Writer, doc *results.Document)
	// close releases what it still holds: called on every path, after
	// the results are written or when the run failed; idempotent, and
	// safe on an attachment that never started.
	close()
}

// quiet is an attachment's defaults: nothing to do.
type quiet struct{}

func (quiet) interval(*runState, results.Interval)               {}
func (quiet) stop(context.Context, *runState, *results.Document) {}
func (quiet) report(io.Writer, *results.Document)                {}
func (quiet) close()                                             {}

// runState is one load test of Run once its server, data and
// connections are ready: what the attachments and the engine share.
type runState struct {
	opts   Options
	out    io.Writer
	outMu  sync.Mutex // serialises lines from the progress and sampler goroutines
	roles  []workload.Role
	maxVUs int
	srv    *server
	pool   *pgxpool.Pool
	files  *runFiles
	env    Environment
	params Parameters
	doc    *results.Document
	seg    *results.SegmentInfo // nil for a whole run

	start  time.Time // the run's time base, after the --start-at barrier
	end    time.Time // the end of the load's own span
	rec    *record.Recorder
	cpu    *cpuMeter
	health *engine.Health
	ops    []workload.Operation
	opm    *opmap.Map // backend PID -> key operation (samplers, profile)
	// the timeline of key operations on opm the profile and the
	// invalidation counts share (invalattach.go: timeline, intervals)
	tl        *opmap.Timeline
	tlClock   profile.Clock
	tlStopped bool
	tlIvs     []opmap.Interval
	tlDropped int
	exp       *metrics.Exporter // the metrics endpoint's, nil without
	obs       *sampler.Session  // the samplers', nil without
	stream    *results.Stream   // the results stream (discarding without results)
	frozen    bool              // the server is not answering: no clean-up queries
	stopRun   func() error      // the engine's Stop (the soak's collapse), nil without
	outcome   engine.Outcome

	atts      []attachment
	observers int // atts[:observers] start before the run's banner, the rest after
	started   int // atts[:started] have started
}

// say prints one line on out, serialised with the other goroutines'.
func (r *runState) say(format string, args ...any) {
	r.outMu.Lock()
	defer r.outMu.Unlock()
	fmt.Fprintf(r.out, format+"\n", args...)
}

// attach starts the attachments in order: those that observe the run,
// then the run's banner, then those beside the load.
func (r *runState) attach(ctx context.Context) error {
	for i, a := range r.atts {
		if i == r.observers {
			r.banner()
		}
		if err := a.start(ctx, r); err != nil {
			return err
		}
		r.started = i + 1
	}
	if r.observers == len(r.atts) {
		r.banner()
	}
	return nil
}

// onInterval is the engine's OnInterval: the agent's CPU, then every
// attachment.
func (r *runState) onInterval(iv results.Interval) {
	r.cpu.interval(time.Now())
	for _, a := range r.atts[:r.started] {
		a.interval(r, iv)
	}
}

// detach stops the started attachments in reverse order, after the load.
func (r *runState) detach(ctx context.Context, doc *results.Document) {
	for i := r.started - 1; i >= 0; i-- {
		r.atts[i].stop(ctx, r, doc)
	}
}

// report prints the attachments' parts of the summary, in start order.
func (r *runState) report(w io.Writer, doc *results.Document) {
	for _, a := range r.atts {
		a.report(w, doc)
	}
}

// closeAttachments releases every attachment, in reverse order.
func (r *runState) closeAttachments() {
	for i := len(r.atts) - 1; i >= 0; i-- {
		r.atts[i].close()
	}
}
