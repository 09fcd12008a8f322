package loadtest

import (
	"cmp"
	"context"
	"fmt"
	"io"

	"github.com/erplab/erplab/internal/opmap"
	"github.com/erplab/erplab/internal/results"
	"github.com/erplab/erplab/internal/sampler"
	"github.com/erplab/erplab/internal/storm"
)

// samplersAttachment runs the samplers (--observe: sessions by state and
// wait event, pg_stat_database, catalog, host) on the run's time base,
// through the graceful stop, and keeps their observations
// (extra.observations) and the storms they saw. When they cannot start,
// one warning line says why and the run goes on without them.
type samplersAttachment struct {
	quiet
	obs    *sampler.Session
	storms []storm.Event
}

func (s *samplersAttachment) start(ctx context.Context, r *runState) error {
	names := make([]string, len(r.ops))
	for i, op := range r.ops {
		names[i] = op.Name
	}
	opm := opmap.New(names)
	so := sampler.SessionOptions{Interval: cmp.Or(r.opts.ObserveInterval, r.opts.Interval), Options: sampler.Options{Ops: opm, Locks: true}}
	if r.opts.Soak != nil && r.opts.Soak.Horizon > 0 { // the load's series' rule and kept spans
		so.Thinning = &sampler.Thinning{Horizon: r.opts.Soak.Horizon, Coarse: r.opts.Soak.Window, Kept: r.rec.Kept}
	}
	exp := r.exp
	ss := &streamedObs{stream: r.stream}
	so.OnStorm = func(e storm.Event) {
		if e.EndT == nil {
			r.say("storm at %.0f s: %s", e.T, e.Message)
		}
		if exp != nil {
			exp.ObserveStorm(e)
		}
		ss.storm(e)
	}
	so.OnSample = func(smp *sampler.Sample) {
		if exp != nil {
			exp.ObserveSample(smp)
		}
		ss.sample(smp)
	}
	// Sampling goes on through the graceful stop; stop ends it.
	obs, err := sampler.Start(context.WithoutCancel(ctx), r.srv.dsn, r.start, so)
	if err != nil {
		r.say("warning: observations off: %v", err)
		return nil
	}
	s.obs, r.obs, r.opm = obs, obs, opm
	if head, err := obs.StreamHead(); err == nil {
		r.stream.Pend(head)
	}
	return nil
}

// streamedObs hands the samplers' samples and storms to the results
// stream as they come (sampler.SamplePart, StormsPart), for the next
// interval line: a killed run's stream keeps its observations. Its
// methods run on the sampler's goroutine.
type streamedObs struct {
	stream *results.Stream
	storms []storm.Event // as of the last callback; one goes on at a time
}

func (o *streamedObs) sample(smp *sampler.Sample) {
	if p, err := sampler.SamplePart(smp); err == nil {
		o.stream.Pend(p)
	}
}

// storm notes a storm that fired, or the end of the one going on.
func (o *streamedObs) storm(e storm.Event) {
	if n := len(o.storms); e.EndT != nil && n > 0 && o.storms[n-1].EndT == nil && o.storms[n-1].T == e.T {
		o.storms[n-1] = e
	} else {
		o.storms = append(o.storms, e)
	}
	if p, err := sampler.StormsPart(o.storms); err == nil {
		o.stream.Pend(p)
	}
}

func (s *samplersAttachment) stop(_ context.Context, _ *runState, doc *results.Document) {
	if s.obs == nil {
		return
	}
	s.obs.Stop()
	s.storms = s.obs.Storms()
	doc.Extra["observations"] = s.obs.Observations()
}

func (s *samplersAttachment) report(w io.Writer, doc *results.Document) {
	printStorms(w, s.storms)
	PrintObservations(w, doc)
}

func (s *samplersAttachment) close() {
	if s.obs != nil {
		s.obs.Stop()
	}
}

// printStorms lists the storms the samplers saw, with their times.
func printStorms(w io.Writer, storms []storm.Event) {
	if len(storms) == 0 {
		return
	}
	fmt.Fprintf(w, "storms (%d):\n", len(storms))
	for _, e := range storms {
		end := "until the end"
		if e.EndT != nil {
			end = fmt.Sprintf("to %.0f s", *e.EndT)
		}
		fmt.Fprintf(w, "  at %.0f s %s, peak %d active: %s\n", e.T, end, e.Peak, e.Message)
	}
}
