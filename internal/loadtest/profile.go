package loadtest

import (
	"context"
	"encoding/json"
	"fmt"
	"io"

	"github.com/erplab/erplab/internal/opmap"
	"github.com/erplab/erplab/internal/profile"
	"github.com/erplab/erplab/internal/results"
	"github.com/erplab/erplab/internal/workload"
)

// timelineMax bounds the executions a profiled run's timeline keeps
// (24 bytes each): later ones are counted and left unattributed.
const timelineMax = 1 << 20

// runProfile is the perf recording of a run (--profile), an attachment:
// perf starts when it is made, before the --start-at barrier (reading
// every process's maps takes seconds on a busy host and must not eat the
// run's schedule or delay the segment); start follows the key
// operations just before the load; stop reads the profile back
// (extra.profile). When perf cannot run, sess is nil and one warning
// line said why.
type runProfile struct {
	quiet
	sess  *profile.Session
	opm   *opmap.Map
	clock profile.Clock
	// follows: the samples are attributed on the run's timeline
	follows bool
	ended   bool
	sum     *profile.Summary
}

// profileOpMap returns the run's PID-to-operation map: opm (the
// observations' one) or, for a profiled run without observations, a new
// one, so that samples can be attributed to key operations.
func profileOpMap(opm *opmap.Map, ops []workload.Operation) *opmap.Map {
	if opm != nil {
		return opm
	}
	names := make([]string, len(ops))
	for i, op := range ops {
		names[i] = op.Name
	}
	return opmap.New(names)
}

// startProfile starts recording the server at dsn; when it cannot (perf
// missing or not permitted, remote server) it says why in one line and
// the attachment records nothing.
func startProfile(ctx context.Context, dsn string, say func(string, ...any)) *runProfile {
	sess, err := profile.Begin(ctx, dsn, profile.Options{})
	if err != nil {
		say("warning: profile off: %v", err)
		return &runProfile{}
	}
	if sess.Warning != "" {
		say("warning: %s", sess.Warning)
	}
	say("profiling the server's processes %v with perf at %d Hz", sess.Roots(), profile.DefaultFrequency)
	return &runProfile{sess: sess}
}

// start makes the run's operation map (r.opm) when the samplers did not,
// and follows the key operations on it.
func (p *runProfile) start(_ context.Context, r *runState) error {
	r.opm = profileOpMap(r.opm, r.ops)
	p.follow(r)
	return nil
}

func (p *runProfile) stop(ctx context.Context, r *runState, doc *results.Document) {
	if p.sum = p.end(ctx, r); p.sum != nil {
		doc.Extra["profile"], _ = json.Marshal(p.sum)
	}
}

func (p *runProfile) report(w io.Writer, _ *results.Document) { printProfile(w, p.sum) }

func (p *runProfile) close() { p.abort() }

// follow starts the run's timeline of key operations (r.timeline), for
// attributing the samples to them; called just before the load starts.
func (p *runProfile) follow(r *runState) {
	if p.sess == nil {
		return
	}
	c, ok := r.timeline()
	if !ok {
		return
	}
	p.opm, p.clock, p.follows = r.opm, c, true
}

// abort discards a recording that end did not read (the run failed
// before its load).
func (p *runProfile) abort() {
	if p.sess != nil && !p.ended {
		p.ended = true
		p.sess.Abort()
	}
}

// end stops the recording and returns its summary with the samples
// attributed to key operations (nil when off or when reading it back
// failed, said in one line).
func (p *runProfile) end(ctx context.Context, r *runState) *profile.Summary {
	if p.sess == nil {
		return nil
	}
	p.ended = true
	ivs := r.intervals()
	sum, parsed, err := p.sess.End(context.WithoutCancel(ctx))
	if err != nil {
		r.say("warning: profile lost: %v", err)
		return nil
	}
	if p.follows {
		profile.AttributeOps(sum, parsed, p.clock, ivs, r.tlDropped, p.opm.Names())
	}
	return sum
}

// printProfile prints the subsystem shares, the top functions and the
// profile per key operation.
func printProfile(w io.Writer, s *profile.Summary) {
	if s == nil {
		return
	}
	fmt.Fprintln(w, "\nserver CPU profile (perf):")
	s.WriteTable(w, 10)
	s.WriteOperations(w)
}
