package replay

import (
	"maps"
	"sync"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"

	"github.com/erplab/erplab/internal/capture"
	"github.com/erplab/erplab/internal/results"
)

// Fidelity says how faithfully the capture was replayed; it is the
// results document's extra.replay.
type Fidelity struct {
	Source  capture.Source `json:"source,omitempty"`
	Partial string         `json:"partial,omitempty"` // the capture holds only some statements
	Order   Order          `json:"order"`
	Speed   float64        `json:"speed"` // 0: as fast as possible
	UsersX  int            `json:"users_x"`
	// OffsetMs is the time between two copies' starts.
	OffsetMs float64 `json:"offset_ms"`
	// Sessions is the captured sessions, Connections the connections the
	// replay opened (every copy's), ConnectFailures those refused.
	Sessions        int   `json:"sessions"`
	Connections     int64 `json:"connections"`
	ConnectFailures int64 `json:"connect_failures,omitempty"`
	// Statements counts the statements replayed (queries, executes,
	// copies; every copy's), Prepares the Parses; Failed those of both
	// that the server answered with an error, PreparesFailed the Parses
	// among them (in no key operation: the scores do not count them).
	Statements     int64 `json:"statements"`
	Prepares       int64 `json:"prepares"`
	Failed         int64 `json:"failed"`
	PreparesFailed int64 `json:"prepares_failed,omitempty"`
	// Errors by SQLSTATE: NewErrors the replay got and the capture did
	// not (or with another code), SameErrors as in the capture,
	// MissingErrors the capture's that the replay did not get.
	NewErrors     map[string]int64 `json:"new_errors,omitempty"`
	SameErrors    map[string]int64 `json:"same_errors,omitempty"`
	MissingErrors map[string]int64 `json:"missing_errors,omitempty"`
	// RowsCompared counts the successful statements whose captured rows
	// (returned or affected) are known, RowsDiffer those where the replay
	// got another number; RowDiffs are the first of them.
	RowsCompared int64     `json:"rows_compared"`
	RowsDiffer   int64     `json:"rows_differ"`
	RowDiffs     []RowDiff `json:"row_diffs,omitempty"`
	// Lag is actual send time minus scheduled time per statement (Speed >
	// 0 only; nil otherwise).
	Lag *results.Latency `json:"lag,omitempty"`
	// LockWaits counts statements the monitor saw waiting on a lock held
	// by another replayed session.
	LockWaits int64 `json:"lock_waits"`
	// Reordered counts the gates the watchdog released; Reorders are the
	// first of them.
	Reordered int64     `json:"reordered"`
	Reorders  []Reorder `json:"reorders,omitempty"`
	// Skipped counts the events not replayed (every copy's), by reason.
	Skipped   int64            `json:"skipped"`
	SkippedBy map[string]int64 `json:"skipped_by,omitempty"`
	// UnknownTypes are Prepare type names the target does not know
	// (their parameters were left for the server to infer).
	UnknownTypes []string `json:"unknown_types,omitempty"`
	// Groups are the key operations with their captured ("as in
	// production") and replayed durations.
	Groups []GroupFigures `json:"groups"`
}

// RowDiff is one statement whose row count differs from the capture's.
type RowDiff struct {
	Session  string `json:"session"`
	At       string `json:"at,omitempty"` // the capture's input location
	T        int64  `json:"t_us"`
	Captured int64  `json:"captured"`
	Replayed int64  `json:"replayed"`
}

// Reorder is one gate the watchdog released: Released (a session parked
// at its gate, holding a lock) ran out of the captured order because
// Waiter had waited on it longer than its captured duration plus the
// margin.
type Reorder struct {
	Waiter   string  `json:"waiter"`
	Released string  `json:"released"`
	AtS      float64 `json:"at_s"` // since the replay's start
}

// GroupFigures puts a key operation's captured durations beside the
// replayed ones (ms; successful statements only).
type GroupFigures struct {
	Name     string    `json:"name"`
	By       string    `json:"by"` // "operation", "targets" or "fingerprint"
	TargetMs float64   `json:"target_ms"`
	TargetBy string    `json:"target_by"` // "targets", "option", "captured p95" or "default"
	Captured Durations `json:"captured"`
	Replayed Durations `json:"replayed"`
}

// Durations summarise a group's statement durations.
type Durations struct {
	Count int64   `json:"count"`
	P50   float64 `json:"p50_ms"`
	P95   float64 `json:"p95_ms"`
}

// Lists in Fidelity keep at most this many entries.
const keepExamples = 20

// tally accumulates the fidelity figures while the sessions run.
type tally struct {
	mu     sync.Mutex
	f      Fidelity
	lag    *hdrhistogram.Histogram // µs
	lagged bool
	// newErrs counts the statements that failed with an error the
	// capture did not have; atMax is called once when it reaches maxNew
	// (> 0).
	newErrs, maxNew int64
	atMax           func(n int64)
}

// Progress is a replay's figures so far (Options.OnProgress).
type Progress struct {
	// Elapsed is the time since the replay's start.
	Elapsed time.Duration
	// Statements replayed (not counting prepares), Failed those with an
	// error, NewErrors those with an error the capture did not have.
	Statements, Failed, NewErrors int64
	// Reordered counts the gates the watchdog released.
	Reordered int64
	// LagP99 is the 99th percentile of the lag behind schedule so far;
	// Lagged is false when none was measured (Speed 0, or no statement
	// yet).
	LagP99 time.Duration
	Lagged bool
}

// progress returns the figures so far.
func (t *tally) progress() Progress {
	t.mu.Lock()
	defer t.mu.Unlock()
	p := Progress{Statements: t.f.Statements, Failed: t.f.Failed, NewErrors: t.newErrs, Reordered: t.f.Reordered, Lagged: t.lagged}
	if t.lagged {
		p.LagP99 = time.Duration(t.lag.ValueAtQuantile(99)) * time.Microsecond
	}
	return p
}

func newTally() *tally {
	return &tally{
		lag: hdrhistogram.New(1, int64(time.Hour/time.Microsecond), 3),
		f: Fidelity{NewErrors: map[string]int64{}, SameErrors: map[string]int64{}, MissingErrors: map[string]int64{},
			SkippedBy: map[string]int64{}},
	}
}

// statement counts one replayed step's outcome against the capture's.
func (t *tally) statement(sess string, st *step, out outcome, lag time.Duration, paced bool) {
	e := &st.ev
	t.mu.Lock()
	defer t.mu.Unlock()
	if e.Kind == capture.KindPrepare {
		t.f.Prepares++
	} else {
		t.f.Statements++
	}
	if paced {
		t.lagged = true
		_ = t.lag.RecordValue(min(max(lag.Microseconds(), 1), t.lag.HighestTrackableValue()))
	}
	t.compareErrors(e.SQLState, out.sqlState)
	if e.Kind == capture.KindPrepare && out.sqlState != "" {
		t.f.PreparesFailed++
	}
	if out.sqlState != "" || e.SQLState != "" || e.Rows < 0 || e.Kind == capture.KindPrepare {
		return
	}
	t.f.RowsCompared++
	if out.rows != e.Rows {
		t.f.RowsDiffer++
		if len(t.f.RowDiffs) < keepExamples {
			t.f.RowDiffs = append(t.f.RowDiffs, RowDiff{Session: sess, At: e.Where, T: e.T, Captured: e.Rows, Replayed: out.rows})
		}
	}
}

// compareErrors files a statement's error by whether the capture had it.
func (t *tally) compareErrors(captured, replayed string) {
	if replayed != "" {
		t.f.Failed++
	}
	switch {
	case replayed != "" && replayed == captured:
		t.f.SameErrors[replayed]++
	case replayed != "":
		t.f.NewErrors[replayed]++
		t.newErrs++
		if t.newErrs == t.maxNew && t.atMax != nil {
			t.atMax(t.newErrs)
		}
		if captured != "" {
			t.f.MissingErrors[captured]++
		}
	case captured != "":
		t.f.MissingErrors[captured]++
	}
}

func (t *tally) skip(reason string) { t.skipN(reason, 1) }

func (t *tally) skipN(reason string, n int64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.f.Skipped += n
	t.f.SkippedBy[reason] += n
}

func (t *tally) connected()     { t.add(&t.f.Connections) }
func (t *tally) connectFailed() { t.add(&t.f.ConnectFailures) }
func (t *tally) lockWait()      { t.add(&t.f.LockWaits) }

func (t *tally) add(n *int64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	*n++
}

func (t *tally) reorder(r Reorder) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.f.Reordered++
	if len(t.f.Reorders) < keepExamples {
		t.f.Reorders = append(t.f.Reorders, r)
	}
}

// fidelity returns the figures so far (maps and lists copied).
func (t *tally) fidelity() Fidelity {
	t.mu.Lock()
	defer t.mu.Unlock()
	f := t.f
	f.NewErrors, f.SameErrors, f.MissingErrors = maps.Clone(f.NewErrors), maps.Clone(f.SameErrors), maps.Clone(f.MissingErrors)
	f.SkippedBy = maps.Clone(f.SkippedBy)
	f.RowDiffs, f.Reorders = append([]RowDiff(nil), f.RowDiffs...), append([]Reorder(nil), f.Reorders...)
	if t.lagged {
		l := results.Summarize(t.lag)
		f.Lag = &l
	}
	return f
}

// unknownType notes a type name the target does not know.
func (t *tally) unknownType(name string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.f.UnknownTypes = append(t.f.UnknownTypes, name)
}
