package replay

import (
	"errors"
	"io"
	"iter"
	"slices"
	"sort"
	"strings"

	"github.com/erplab/erplab/internal/capture"
)

// step is one event of a session as the replay runs it.
type step struct {
	ev capture.Event
	// sql is the text the step runs or executes: the event's own, or for
	// an Execute of a named statement the SQL of its Prepare.
	sql string
	// unnamed: an Execute run with ExecParams (its own SQL parsed as the
	// unnamed statement), with the parameter types (oids, or types by
	// name) of the session's last unnamed Prepare of the same text.
	unnamed bool
	oids    []uint32
	types   []string
	// merged: an unnamed Prepare whose Execute follows it; it is sent
	// with that Execute's Parse/Bind/Execute, as the client did, not in a
	// round trip of its own.
	merged bool
	// group indexes plan.groups; -1 for a step that is not scored
	// (connect, disconnect, prepare).
	group int
	// order is the step's place in the plan's statement order (by
	// captured start), -1 for a step the gates do not hold (connect,
	// disconnect). needSent: the number of the copy's statements that
	// started before it in the capture (gate a); needEnded: the number of
	// the copy's statements that ended before it started (gate b).
	order, needSent, needEnded int
	// ends is the step's place in the end order (by captured end) when
	// the capture knows its end (endKnown), else -1. Before plan.order,
	// 0 marks a statement that ends a transaction.
	ends int
}

// statement reports whether the step is a statement the replay sends
// (everything but connect and disconnect).
func (s *step) statement() bool {
	return s.ev.Kind != capture.KindConnect && s.ev.Kind != capture.KindDisconnect
}

// session is one captured session.
type session struct {
	idx    int // its place in plan.sessions
	id     string
	start  int64 // T of its first event, µs
	params map[string]string
	steps  []step
}

// plan is a capture made ready to replay: its sessions' steps with their
// gates and groups, shared by every copy.
type plan struct {
	t0         int64 // T of the capture's first event, µs
	sessions   []*session
	statements int // steps with an order
	ends       int // steps in the end order
	// sentOwner and endOwner name the session (its index in sessions)
	// of each place in the start order and in the end order: whom a
	// statement parked at a gate waits on.
	sentOwner, endOwner []int
	groups              []group
	skipped             map[string]int64 // events left out, by reason (once per copy)
	typeNames           []string         // distinct Prepare type names to resolve
}

// Slice is the events of a slice as Run's source.
func Slice(events []capture.Event) iter.Seq2[capture.Event, error] {
	return func(yield func(capture.Event, error) bool) {
		for _, e := range events {
			if !yield(e, nil) {
				return
			}
		}
	}
}

// Reader is the events of r (a *capture.Reader) as Run's source: up to
// io.EOF, or its error.
func Reader(r interface{ Next() (capture.Event, error) }) iter.Seq2[capture.Event, error] {
	return func(yield func(capture.Event, error) bool) {
		for {
			e, err := r.Next()
			if errors.Is(err, io.EOF) {
				return
			}
			if !yield(e, err) || err != nil {
				return
			}
		}
	}
}

// collect reads the events into sessions, in the order of their first
// event, each session's events in capture order.
func collect(src iter.Seq2[capture.Event, error]) (*plan, error) {
	p := &plan{skipped: map[string]int64{}}
	byID := map[string]*session{}
	first := true
	for e, err := range src {
		if err != nil {
			return nil, err
		}
		if first || e.T < p.t0 {
			p.t0, first = e.T, false
		}
		s := byID[e.Session]
		if s == nil {
			s = &session{idx: len(p.sessions), id: e.Session, start: e.T}
			byID[e.Session] = s
			p.sessions = append(p.sessions, s)
		}
		if e.Kind == capture.KindConnect && s.params == nil {
			s.params = e.Params
		}
		s.steps = append(s.steps, step{ev: e, group: -1, order: -1, ends: -1})
	}
	return p, nil
}

// order gives every statement its place in the capture's start order and
// every statement whose end is known its place in the end order, and from
// them each statement's gates. Within a session, times are made non-decreasing, so
// that no statement can wait for a later one of its own session.
func (p *plan) order() {
	type ref struct {
		s    *step
		t    int64
		sess int
	}
	var starts, ends []ref
	for si, s := range p.sessions {
		var last int64
		for i := range s.steps {
			st := &s.steps[i]
			last = max(last, st.ev.T)
			if !st.statement() {
				continue
			}
			starts = append(starts, ref{st, last, si})
			if endKnown(st) {
				ends = append(ends, ref{st, last + max(st.ev.Duration, 0), si})
			} else {
				st.ends = -1
			}
		}
	}
	sort.SliceStable(starts, func(i, j int) bool { return starts[i].t < starts[j].t })
	sort.SliceStable(ends, func(i, j int) bool { return ends[i].t < ends[j].t })
	p.sentOwner = make([]int, len(starts))
	for i, r := range starts {
		r.s.order, p.sentOwner[i] = i, r.sess
	}
	p.endOwner = make([]int, len(ends))
	for i, r := range ends {
		r.s.ends, p.endOwner[i] = i, r.sess
	}
	startTs := make([]int64, len(starts))
	for i, r := range starts {
		startTs[i] = r.t
	}
	endTs := make([]int64, len(ends))
	for i, r := range ends {
		endTs[i] = r.t
	}
	for _, r := range starts {
		r.s.needSent, _ = slices.BinarySearch(startTs, r.t)
		r.s.needEnded, _ = slices.BinarySearch(endTs, r.t)
	}
	p.statements, p.ends = len(starts), len(ends)
}

// endKnown reports whether the capture says when st ended, so that the
// statements that started after that end wait for it (gate b): a
// statement with a duration, or one that ends a transaction (a log
// without durations still orders the commits). A statement written
// before its answer came has no known end.
func endKnown(st *step) bool {
	if slices.Contains(strings.Split(st.ev.Note, ","), capture.NoteUnanswered) {
		return false
	}
	return st.ev.Duration > 0 || st.ends >= 0
}
