// Package replay replays captured client sessions (package capture's
// events, from any source) against a PostgreSQL server and measures them:
// one connection per captured session, its statements in order with the
// captured protocol (simple Query, Parse/Bind/Execute with the captured
// types, formats and binary values, COPY with its data), paced like the
// original (Options.Speed), multiplied into a load (Options.UsersX), kept
// in the captured cross-session order (gates.go) with a watchdog that
// never lets that order hang the replay (monitor.go), scored by key
// operation into the standard results document (scoring.go, document.go)
// with the replay's fidelity to the capture in extra.replay (fidelity.go).
//
// The whole capture is held in memory while it replays: the gates need
// the start of every statement and the end of every transaction. See
// docs/replay.md.
package replay

import (
	"fmt"
	"github.com/erplab/erplab/internal/opmap"
	"time"

	"github.com/erplab/erplab/internal/capture"
	"github.com/erplab/erplab/internal/results"
)

// Order is how the replay keeps the captured order between sessions.
type Order string

// The orders.
const (
	// OrderCapture (the default) gates every statement of a copy: it is
	// sent only after every statement of the copy that started before it
	// in the capture has been sent (lock acquisition in the captured
	// order), and after every transaction of the copy that ended before it
	// started in the capture has ended in the replay (commit order). A
	// watchdog releases a gate that would hang the replay (monitor.go).
	OrderCapture Order = "capture"
	// OrderNone sends each session's statements on its own schedule only,
	// as pgreplay does: a statement may overtake an earlier one of another
	// session and wait on a lock its original never waited on (counted
	// in Fidelity.LockWaits), and sessions that wait on each other in a
	// way the original did not may block until the server's deadlock
	// detector or lock_timeout ends it.
	OrderNone Order = "none"
)

// Defaults of Options' zero values.
const (
	// DefaultPoll is how often the monitor asks the server which replayed
	// backends wait on a lock.
	DefaultPoll = 150 * time.Millisecond
	// DefaultMargin is how much longer than its captured duration a
	// statement may wait on a lock held by a session parked at a gate
	// before the watchdog releases that gate.
	DefaultMargin = time.Second
	// DefaultTarget is the APDEX target T of a group whose statements
	// have no captured duration, when neither the targets nor
	// Options.Target give one.
	DefaultTarget = 500 * time.Millisecond
	// DefaultInterval is the time-series resolution of the results.
	DefaultInterval = time.Second
)

// Options configure a replay. Durations are wall-clock time of the replay.
type Options struct {
	// DSN is the server to replay onto ("": libpq's PG* environment).
	// User and database come from it unless KeepUser; the password never
	// comes from the capture.
	DSN string
	// Speed is the pacing: each event is due at its captured time (from
	// the capture's first event) divided by Speed, from the replay's
	// start; 1 is the original pacing, 2 twice as fast; 0 sends every
	// event as soon as its session and the gates allow.
	Speed float64
	// UsersX is how many copies of every session run (0 is 1). Copy k
	// (from 0) starts Offset*k after the replay's start, so that N copies
	// are N times the users, spread in time, not a fast-forward.
	UsersX int
	// Offset is the time between the starts of two copies. 0 is the
	// default: the capture's mean time between two session starts (its
	// sessions' start span divided by their number less one), divided by
	// UsersX and by Speed, so the copies' sessions interleave with the
	// original ones; 0 when Speed is 0 or the capture has one session. A
	// negative Offset starts every copy at once.
	Offset time.Duration
	// Order is the cross-session order ("" is OrderCapture).
	Order Order
	// Poll is the monitor's period (0: DefaultPoll); Margin the
	// watchdog's margin over a statement's captured duration (0:
	// DefaultMargin).
	Poll, Margin time.Duration
	// KeepUser connects each session as the captured user to the
	// captured database (startup parameters user and database) instead of
	// the DSN's.
	KeepUser bool
	// Targets group statements into key operations by name pattern or
	// fingerprint and give their APDEX target T (ParseTargets).
	Targets []Target
	// Target is T of every group the targets do not give one; 0 derives
	// it from the capture: the group's captured p95 duration rounded to
	// a whole millisecond (at least 1 ms), so the production run scores
	// about 0.95 and a slower replay lower; DefaultTarget for a group
	// without captured durations.
	Target time.Duration
	// Interval is the results' time-series resolution (0: DefaultInterval).
	Interval time.Duration
	// Header is the capture's header: source and Partial go into the
	// fidelity report.
	Header capture.Header
	// AppName is application_name of a session whose capture has none,
	// and of the monitor ("" is "erplab-replay").
	AppName string
	// Version, CommandLine (redacted before it is written) and RunID go
	// into the results document as `erplab run` writes them.
	Version     string
	CommandLine []string
	RunID       string
	// OnInterval, when set, receives each closed interval of the time
	// series as it closes (for the results stream), from one goroutine.
	OnInterval func(results.Interval)
	// OnStart, when set, is called once the replay is about to send its
	// first event, with its start (the results' time base), e.g. to start
	// observing the server on the same time base.
	// ops is the backend-PID-to-group map the replay keeps while it
	// runs (indexes as the document's operations), for the samplers'
	// waits per group.
	OnStart func(start time.Time, ops *opmap.Map)
	// OnProgress, when set, receives the figures so far (statements,
	// errors, lag, reorders) after each closed interval, from the same
	// goroutine as OnInterval.
	OnProgress func(Progress)
	// MaxNewErrors > 0 stops the replay once that many statements failed
	// with an error the capture did not have: the sessions stop as on an
	// interruption and the document's status is "aborted: <why>".
	MaxNewErrors int64
	// Warn, when set, receives one line per thing worth a user's
	// attention (an unknown type name, a session that could not connect).
	Warn func(string)
}

// withDefaults fills the zero values and checks the rest.
func (o Options) withDefaults() (Options, error) {
	if o.Speed < 0 {
		return o, fmt.Errorf("replay: speed %g is negative", o.Speed)
	}
	if o.UsersX < 0 {
		return o, fmt.Errorf("replay: users-x %d is negative", o.UsersX)
	}
	o.UsersX = max(o.UsersX, 1)
	if o.MaxNewErrors < 0 {
		return o, fmt.Errorf("replay: max new errors %d is negative", o.MaxNewErrors)
	}
	switch o.Order {
	case "":
		o.Order = OrderCapture
	case OrderCapture, OrderNone:
	default:
		return o, fmt.Errorf("replay: order %q: want %q or %q", o.Order, OrderCapture, OrderNone)
	}
	if o.Poll <= 0 {
		o.Poll = DefaultPoll
	}
	if o.Margin <= 0 {
		o.Margin = DefaultMargin
	}
	if o.Interval <= 0 {
		o.Interval = DefaultInterval
	}
	if o.AppName == "" {
		o.AppName = "erplab-replay"
	}
	if o.Warn == nil {
		o.Warn = func(string) {}
	}
	return o, nil
}

// offset is the time between two copies' starts for a plan (Offset's
// default applied).
func (o Options) offset(p *plan) time.Duration {
	switch {
	case o.Offset < 0:
		return 0
	case o.Offset > 0:
		return o.Offset
	case o.Speed == 0 || len(p.sessions) < 2:
		return 0
	}
	first, last := p.sessions[0].start, p.sessions[0].start
	for _, s := range p.sessions {
		first, last = min(first, s.start), max(last, s.start)
	}
	gap := float64(last-first) / float64(len(p.sessions)-1) // µs
	return time.Duration(gap / float64(o.UsersX) / o.Speed * float64(time.Microsecond))
}
