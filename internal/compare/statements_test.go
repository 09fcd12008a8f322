package compare_test

import (
	"bytes"
	"encoding/json"
	"math"
	"strings"
	"testing"

	"github.com/erplab/erplab/internal/compare"
	"github.com/erplab/erplab/internal/results"
	"github.com/erplab/erplab/internal/sampler"
)

// churnRun is report's recorded temp-table churn run (with
// pg_stat_statements in its observations).
const churnRun = "../report/testdata/churn.json"

// TestSlowerStatements compares the recorded run with a copy in which
// one statement's execution took three times as long: that statement,
// and only it, is listed as slower.
func TestSlowerStatements(t *testing.T) {
	a, err := results.Read(churnRun)
	if err != nil {
		t.Fatal(err)
	}
	b, err := results.Read(churnRun)
	if err != nil {
		t.Fatal(err)
	}
	o, err := sampler.ReadObservations(b.Extra["observations"])
	if err != nil {
		t.Fatal(err)
	}
	k := -1
	for i, s := range o.Statements.Top {
		if s.Calls >= 10 && s.ExecMs > 0 {
			k = i
			break
		}
	}
	if k < 0 {
		t.Fatal("no statement with 10 calls in the recording")
	}
	s := &o.Statements.Top[k]
	s.ExecMs *= 3
	b.Extra["observations"], _ = json.Marshal(o)

	c, err := compare.Compare("a", a, "b", b, compare.Options{})
	if err != nil {
		t.Fatal(err)
	}
	// Statements are matched by fingerprint, which merges entries of the
	// same normalized text (a utility statement run by several roles or
	// backends): the group's added time is what the one entry added.
	added := s.ExecMs * 2 / 3
	if len(c.Slower) != 1 || c.Slower[0].CallsB < s.Calls || math.Abs(c.Slower[0].AddedMs-added) > 0.01*added {
		t.Fatalf("slower %+v, want the one statement (%d calls, %.0f ms added)", c.Slower, s.Calls, added)
	}
	var buf bytes.Buffer
	if err := c.WriteText(&buf); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(buf.String(), "statements that got slower") {
		t.Errorf("text lacks the statements:\n%s", buf.String())
	}
	// The same run on both sides: nothing got slower.
	if c, _ := compare.Compare("a", a, "a", a, compare.Options{}); len(c.Slower) != 0 {
		t.Errorf("A/A lists slower statements: %+v", c.Slower)
	}
}

// Two rounds a side of erplab ab on erp (testdata/stmts-erp): each key
// operation whose statements were attributed in the runs has a plan_ms
// and an exec_ms row per execution (section statements) tested over the
// rounds; one seen in only one baseline round has its rows untested.
func TestStatementRows(t *testing.T) {
	var docs [4]*results.Document
	names := [4]string{"baseline-1", "baseline-2", "x-1", "x-2"}
	for i, n := range names {
		d, err := results.Read("testdata/stmts-erp/" + n + ".json")
		if err != nil {
			t.Fatal(err)
		}
		docs[i] = d
	}
	c, err := compare.CompareRounds(names[:2], docs[:2], names[2:], docs[2:], compare.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, metric := range []string{"plan_ms", "exec_ms"} {
		r := c.Find("stock_balance_report", metric)
		if r == nil || r.Section != "statements" || r.Unit != "ms" || r.Method != compare.MethodRounds || math.IsNaN(r.P) || !(r.A > 0) || !(r.B > 0) {
			t.Fatalf("stock_balance_report %s: %+v", metric, r)
		}
		if r := c.Find("temp_table_storm", metric); r == nil || !math.IsNaN(r.P) || !strings.Contains(r.Note, "too few rounds with a value (1, 2") {
			t.Fatalf("temp_table_storm %s: %+v", metric, r)
		}
	}
	r := c.Find("stock_balance_report", "plan_ms")
	if math.Abs(r.A-1.69) > 0.01 || math.Abs(r.B-1.36) > 0.01 {
		t.Fatalf("stock_balance_report plan_ms per execution: A %.3f, B %.3f; want 1.69, 1.36", r.A, r.B)
	}
	if c.Find("document_list", "plan_ms") != nil {
		t.Fatal("a row for document_list, whose statements were never attributed")
	}
}

// A run whose closing pg_stat_statements snapshot failed (its statements
// only a note, track_planning unknown) lacks a value in the statements
// rows; the other runs keep their plan_ms rows (one such round of erplab
// ab dropped every plan_ms row, the --primary row among them).
func TestStatementRowsRunWithoutStatements(t *testing.T) {
	var docs [4]*results.Document
	names := [4]string{"baseline-1", "baseline-2", "x-1", "x-2"}
	for i, n := range names {
		d, err := results.Read("testdata/stmts-erp/" + n + ".json")
		if err != nil {
			t.Fatal(err)
		}
		docs[i] = d
	}
	o, err := sampler.ReadObservations(docs[1].Extra["observations"])
	if err != nil {
		t.Fatal(err)
	}
	o.Statements = &sampler.Statements{Note: "statements: at the end: statements: connection closed", Top: []sampler.Statement{}}
	raw, err := json.Marshal(o)
	if err != nil {
		t.Fatal(err)
	}
	docs[1].Extra["observations"] = raw
	c, err := compare.CompareRounds(names[:2], docs[:2], names[2:], docs[2:], compare.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, metric := range []string{"plan_ms", "exec_ms"} {
		r := c.Find("stock_balance_report", metric)
		if r == nil || r.Section != "statements" || !(r.B > 0) || !strings.Contains(r.Note, "too few rounds with a value (1, 2") {
			t.Fatalf("stock_balance_report %s: %+v, want a row with one round of A", metric, r)
		}
	}
}
