package loadtest

import (
	"context"
	"encoding/json"
	"fmt"
	"io"

	"github.com/erplab/erplab/internal/opmap"
	"github.com/erplab/erplab/internal/profile"
	"github.com/erplab/erplab/internal/results"
)

// invalAttachment counts the server's shared-invalidation events with
// perf uprobes (Options.Probes: catalog cache resets, catch-up
// interrupts, queue clean-ups, messages inserted and read) per second,
// per backend and per key operation, into extra.invalidation; the
// observations' summary prints them beside the estimate. The probes are
// added when it is made (perf reads every process at its start, before
// the --start-at barrier) and removed when it stops or closes; when they
// cannot run, extra.invalidation says why and the summary prints it in
// one line.
type invalAttachment struct {
	quiet
	rec   *profile.InvalRecording
	why   string
	ended bool
}

// startInval adds the probes to the server at dsn and starts counting.
func startInval(ctx context.Context, dsn string, reads bool, say func(string, ...any)) *invalAttachment {
	rec, err := profile.BeginInval(ctx, dsn, profile.InvalOptions{Reads: reads})
	if err != nil {
		// said once, in the summary (printInvalidation)
		return &invalAttachment{why: err.Error()}
	}
	say("counting shared invalidation (resets, catch-ups, clean-ups, messages) with perf uprobes")
	return &invalAttachment{rec: rec}
}

// start counts from the run's time base on, on the run's shared
// timeline of key operations.
func (a *invalAttachment) start(_ context.Context, r *runState) error {
	if a.rec == nil {
		return nil
	}
	r.opm = profileOpMap(r.opm, r.ops)
	c, ok := r.timeline()
	if !ok {
		var err error
		if c, err = profile.NewClock(); err != nil {
			return nil
		}
	}
	a.rec.Rebase(c)
	return nil
}

func (a *invalAttachment) stop(ctx context.Context, r *runState, doc *results.Document) {
	res := profile.InvalResult{Unavailable: a.why}
	if a.rec != nil {
		a.ended = true
		ivs := r.intervals()
		s, err := a.rec.End(ctx)
		if err != nil {
			r.say("warning: invalidation counts: %v", err)
		}
		if s != nil {
			a.rec.Attribute(s, ivs, r.opm.Names())
			res = profile.InvalResult{Observed: s}
		}
	}
	doc.Extra["invalidation"], _ = json.Marshal(res)
}

func (a *invalAttachment) close() {
	if a.rec != nil && !a.ended {
		a.ended = true
		a.rec.Abort()
	}
}

// printInvalidation prints extra.invalidation: the observed counts, or
// the one line saying why they were not observed.
func printInvalidation(w io.Writer, doc *results.Document) {
	raw, ok := doc.Extra["invalidation"]
	if !ok {
		return
	}
	res, err := profile.ReadInval(raw)
	switch {
	case err != nil:
	case res.Observed != nil:
		res.Observed.WriteText(w)
	case res.Unavailable != "":
		fmt.Fprintln(w, profile.UnavailableLine(res.Unavailable))
	}
}

// timeline starts the run's timeline of key operations on r.opm once
// (shared by the profile and the invalidation counts) and returns its
// clock; false when none (no operation map, or the clock failed).
func (r *runState) timeline() (profile.Clock, bool) {
	if r.tl != nil {
		return r.tlClock, true
	}
	if r.opm == nil {
		return profile.Clock{}, false
	}
	c, err := profile.NewClock()
	if err != nil {
		r.say("warning: events not attributed to key operations: %v", err)
		return profile.Clock{}, false
	}
	r.tlClock, r.tl = c, r.opm.StartTimeline(c.T0, timelineMax)
	return c, true
}

// intervals stops the run's timeline once and returns its executions
// (nil without a timeline).
func (r *runState) intervals() []opmap.Interval {
	if r.tl != nil && !r.tlStopped {
		r.tlStopped = true
		r.tlIvs, r.tlDropped = r.opm.StopTimeline(r.tl)
	}
	return r.tlIvs
}
