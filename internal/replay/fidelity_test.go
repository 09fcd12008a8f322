package replay

import (
	"strings"
	"testing"

	"github.com/erplab/erplab/internal/capture"
)

// TestFidelityErrors: errors are filed by whether the capture had them,
// row counts compared where the capture knows them, a type the target
// lacks left to the server to infer (and named), and a session that
// cannot connect skipped, its events counted, without holding the
// others at their gates.
func TestFidelityErrors(t *testing.T) {
	s := &script{}
	a := s.session("A", "fid-A", 0)
	a.add(capture.Event{Kind: capture.KindQuery, SQL: "SELECT 1/0", SQLState: "22012", Rows: -1, TxAfter: "I"}, 5)
	a.query("SELECT * FROM missing", 5, 0, "SELECT 0")
	a.add(capture.Event{Kind: capture.KindQuery, SQL: "SELECT 1", SQLState: "40001", Rows: -1, TxAfter: "I"}, 5)
	a.query("SELECT generate_series(1, 3)", 5, 2, "SELECT 2")
	a.prepare("typed", "SELECT $1 || 'x'", nil, []string{"mvarchar"})
	a.execute("typed", "", nil, text(7), 5, 1, "SELECT 1")
	ghost := s.session("G", "fid-G", 1)
	ghost.query("SELECT 1", 5, 1, "SELECT 1")
	ghost.query("SELECT 2", 5, 1, "SELECT 1")
	ghost.disconnect()
	a.query("SELECT 3", 5, 1, "SELECT 1") // after G's statements: gate a
	a.disconnect()
	events := s.sorted()
	for i := range events {
		if events[i].Kind == capture.KindConnect && events[i].Session == "A" {
			events[i].Params = nil // A connects as the DSN's user
		}
	}
	var warnings []string
	opts := Options{KeepUser: true, Warn: func(w string) { warnings = append(warnings, w) }}
	res, _ := replayOnto(t, "SELECT 1", events, opts)
	f := res.Fidelity
	if f.SameErrors["22012"] != 1 || f.NewErrors["42P01"] != 1 || f.MissingErrors["40001"] != 1 || len(f.NewErrors) != 1 || f.Failed != 2 {
		t.Errorf("errors: same %v, new %v, missing %v, failed %d", f.SameErrors, f.NewErrors, f.MissingErrors, f.Failed)
	}
	if f.RowsDiffer != 1 || len(f.RowDiffs) != 1 || f.RowDiffs[0].Captured != 2 || f.RowDiffs[0].Replayed != 3 {
		t.Errorf("rows differ %d %+v, want generate_series's 3 rows against the captured 2", f.RowsDiffer, f.RowDiffs)
	}
	if len(f.UnknownTypes) != 1 || f.UnknownTypes[0] != "mvarchar" {
		t.Errorf("unknown types %v, want mvarchar", f.UnknownTypes)
	}
	if f.ConnectFailures != 1 || f.SkippedBy["connection refused"] != 4 || f.Statements != 6 {
		t.Errorf("connect failures %d, skipped %v, statements %d: want G's 4 events skipped, A's 6 statements run", f.ConnectFailures, f.SkippedBy, f.Statements)
	}
	if len(warnings) != 2 || !strings.Contains(warnings[1], "session G") {
		t.Errorf("warnings %q: want mvarchar's and session G's", warnings)
	}
}

// TestPrepareFailedCounted: a Parse that fails (its table is missing on
// the target) counts in failed and in prepares_failed, and the failures
// the scores show (its Execute's 26000) are failed less those.
func TestPrepareFailedCounted(t *testing.T) {
	s := &script{}
	a := s.session("A", "fid-P", 0)
	a.prepare("gone", "SELECT * FROM missing_here", nil, nil)
	a.execute("gone", "", nil, nil, 5, 0, "SELECT 0")
	a.disconnect()
	res, _ := replayOnto(t, "SELECT 1", s.sorted(), Options{})
	f := res.Fidelity
	if f.Failed != 2 || f.PreparesFailed != 1 || f.NewErrors["42P01"] != 1 || f.NewErrors["26000"] != 1 {
		t.Errorf("failed %d, prepares failed %d, new %v: want the Parse's 42P01 and the Execute's 26000", f.Failed, f.PreparesFailed, f.NewErrors)
	}
	var scored int64
	for _, op := range res.Doc.Operations {
		scored += op.Errors
	}
	if scored != f.Failed-f.PreparesFailed {
		t.Errorf("errors in the scores %d, want failed less prepares %d", scored, f.Failed-f.PreparesFailed)
	}
	var b strings.Builder
	printFidelity(&b, f)
	if !strings.Contains(b.String(), "failed 2 (1 of them prepares, in no key operation)") {
		t.Errorf("summary:\n%s", b.String())
	}
}
