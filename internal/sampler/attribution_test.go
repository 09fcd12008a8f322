package sampler

import (
	"math"
	"strings"
	"testing"

	"github.com/erplab/erplab/internal/opmap"
)

// The texts a client sends (constants inline, its own parameter numbers,
// its own white space) key to the same statement as pg_stat_statements'
// normalized text of them; the statements the engine sent are attributed
// by its counts, the others by sightings, the rest not at all.
func TestStatementsAttributedByEngineTexts(t *testing.T) {
	names := []string{"item_lookup", "order_list", "post_order"}
	long := "SELECT d.id" + strings.Repeat(", d.some_rather_long_column_name", 80) + " FROM doc d WHERE d.id = "
	sent := map[opmap.OpText]int64{
		{Op: 0, SQL: "SELECT name FROM item WHERE id = $1"}:                                  10,
		{Op: 1, SQL: "select name\n  from item\n where id = $1"}:                             30,
		{Op: 2, SQL: "UPDATE stock SET qty = qty - 1 WHERE item = $1 AND wh = 'main'"}:       5,
		{Op: 2, SQL: "UPDATE stock SET qty = qty - 2 WHERE item = $1 AND wh = 'other'"}:      5,
		{Op: 1, SQL: long + "'\\x08'::bytea"}:                                                4,
		{Op: opmap.Idle, SQL: "SELECT 1"}:                                                    3, // not kept by Recorder; ignored here too
		{Op: 0, SQL: "SELECT * FROM order_line WHERE order_id = ANY($1) AND qty > 1.5 -- x"}: 2,
	}
	row := func(q string, qid int64, top bool, calls int64) (stmtKey, Statement) {
		return stmtKey{10, qid, top}, Statement{QueryID: qid, Toplevel: top, Query: q,
			StatementCounters: StatementCounters{Calls: calls, Plans: calls, PlanMs: float64(calls), ExecMs: 2 * float64(calls)}}
	}
	b := &stmtSnapshot{rows: map[stmtKey]Statement{}, plan: true}
	for _, r := range []struct {
		q     string
		qid   int64
		top   bool
		calls int64
	}{
		{"SELECT name FROM item WHERE id = $1", 1, true, 40},
		{"UPDATE stock SET qty = qty - $2 WHERE item = $1 AND wh = $3", 2, true, 10},
		{long + "$1::bytea", 3, true, 4},
		{"SELECT name FROM item WHERE id = $1", 1, false, 8}, // nested in a function: sightings
		{"SELECT * FROM order_line WHERE order_id = ANY($1) AND qty > $2", 4, true, 2},
		{"VACUUM item", 5, true, 1}, // nobody sent it, never seen
		{catalogSQL, 6, true, 3},    // the sampler's own: named observer
	} {
		k, s := row(r.q, r.qid, r.top, r.calls)
		b.rows[k] = s
	}
	a := &stmtSnapshot{rows: map[stmtKey]Statement{}}
	sightings := map[sighting]int{{2, 1}: 3}
	st := statementsDelta(a, b, sightings, names, textOps(sent))

	byID := map[[2]int64]Statement{}
	for _, s := range st.Top {
		top := int64(0)
		if s.Toplevel {
			top = 1
		}
		byID[[2]int64{s.QueryID, top}] = s
	}
	check := func(qid int64, top int64, by string, want map[string]float64) {
		t.Helper()
		s := byID[[2]int64{qid, top}]
		if s.AttributedBy != by || len(s.Operations) != len(want) {
			t.Errorf("queryid %d toplevel %d: by %q %v, want %q %v", qid, top, s.AttributedBy, s.Operations, by, want)
			return
		}
		for op, f := range want {
			if s.Operations[op] != f {
				t.Errorf("queryid %d toplevel %d: %v, want %v", qid, top, s.Operations, want)
			}
		}
	}
	check(1, 1, "engine", map[string]float64{"item_lookup": 0.25, "order_list": 0.75})
	check(2, 1, "engine", map[string]float64{"post_order": 1})
	check(3, 1, "engine", map[string]float64{"order_list": 1})
	check(4, 1, "engine", map[string]float64{"item_lookup": 1})
	check(1, 0, "samples", map[string]float64{"post_order": 1})
	check(5, 1, "", map[string]float64{})
	check(6, 1, "", map[string]float64{})
	if st.AttributedCalls != 64 || st.ObserverCalls != 3 || st.OtherCalls != 1 {
		t.Errorf("calls attributed %d, observer %d, other %d; want 64, 3, 1", st.AttributedCalls, st.ObserverCalls, st.OtherCalls)
	}
	if p := st.AttributedPct(); math.Abs(p-100*64.0/65) > 1e-9 {
		t.Errorf("attributed %.3f %%, want 64 of the 65 calls not the observer's", p)
	}
	if q := byID[[2]int64{3, 1}].Query; len([]rune(q)) != statementText || !strings.HasPrefix(long, q) {
		t.Errorf("long text kept as %d characters, want its first %d", len([]rune(q)), statementText)
	}
	ops := map[string]OpStatements{}
	for _, o := range st.Operations {
		ops[o.Operation] = o
	}
	// order_list: 30 of statement 1's 40 calls and statement 3's 4;
	// post_order: statement 2's 10 and the nested statement's 8.
	if o := ops["order_list"]; o.Calls != 34 || o.PlanMs != 34 || o.ExecMs != 68 || o.Statements != 2 {
		t.Errorf("order_list %+v, want 34 calls, 34 ms planning, 68 ms executing over 2 statements", o)
	}
	if o := ops["post_order"]; o.Calls != 18 || o.Statements != 2 {
		t.Errorf("post_order %+v, want 18 calls over 2 statements", o)
	}
	if o := ops[""]; o.Calls != 4 || o.Statements != 2 {
		t.Errorf("unattributed %+v, want VACUUM's call and the observer's 3", o)
	}
	if want := "4 statements attributed to key operations by the texts the engine saw each send, 1 by samples of pg_stat_activity, 2 not attributed"; st.Attribution != want {
		t.Errorf("attribution %q, want %q", st.Attribution, want)
	}
}
