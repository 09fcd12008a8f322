package replay

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/erplab/erplab/internal/capture"
	"github.com/erplab/erplab/internal/rewrite"
)

func TestParseTargets(t *testing.T) {
	f, err := os.Open("testdata/targets.txt")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	got, err := ParseTargets(f, "targets.txt")
	if err != nil {
		t.Fatal(err)
	}
	want := []Target{
		{Name: "Продажа товара", T: 300 * time.Millisecond},
		{Name: "account-update", T: 50 * time.Millisecond, Match: "UPDATE pgbench_accounts"},
		{Name: "branch", T: 20 * time.Millisecond, Match: "a74faacd3f5ec4e5"},
	}
	if len(got) != len(want) {
		t.Fatalf("got %+v, want %+v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("line %d: %+v, want %+v", i+1, got[i], want[i])
		}
	}
}

func TestParseTargetsErrors(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"a 500", `t.txt:1:3: T "500": want a positive duration with its unit`},
		{"\n  a", `t.txt:2:4: "a": want NAME T [MATCH]: no T`},
		{`"a b 1s`, `t.txt:1:1: unterminated quoted name`},
		{"a 1s x\na 2s y", `t.txt:2:1: "a" has T 2s here and 1s above`},
		{"a -1s", `t.txt:1:3: T "-1s": want a positive duration`},
	} {
		_, err := ParseTargets(strings.NewReader(c.in), "t.txt")
		if err == nil || !strings.HasPrefix(err.Error(), c.want) {
			t.Errorf("%q: %v, want %s...", c.in, err, c.want)
		}
	}
}

// TestGrouping: an event's operation first, then the first matching
// target (by text or fingerprint), then the fingerprint's readable name;
// T from the targets, the option, or the captured p95.
func TestGrouping(t *testing.T) {
	fpBranch, err := rewrite.Fingerprint(updBr)
	if err != nil {
		t.Fatal(err)
	}
	ev := func(sql, op string, dur int64) capture.Event {
		return capture.Event{Kind: capture.KindQuery, Session: "s", SQL: sql, Operation: op, Duration: dur}
	}
	events := []capture.Event{
		ev("SELECT 1", "Продажа товара", 1000),
		ev("UPDATE pgbench_accounts SET abalance = 1 WHERE aid = 2", "", 2000),
		ev("UPDATE pgbench_branches SET bbalance = bbalance + 5 WHERE bid = 1", "", 3000),
		ev("SELECT abalance FROM pgbench_accounts WHERE aid = 7", "", 2400),
		ev("select abalance from pgbench_accounts where aid = 8", "", 0),
		ev("SELEC oops", "", 0),
	}
	targets := []Target{{Name: "Продажа товара", T: 300 * time.Millisecond},
		{Name: "accounts", T: 50 * time.Millisecond, Match: "update PGBENCH_ACCOUNTS"},
		{Name: "branch", Match: fpBranch}}
	p := planOf(t, events, Options{Targets: targets})
	want := []struct {
		name, by string
		target   time.Duration
		targetBy string
	}{
		{"Продажа товара", "operation", 300 * time.Millisecond, "targets"},
		{"accounts", "targets", 50 * time.Millisecond, "targets"},
		{"branch", "targets", 3 * time.Millisecond, "captured p95"},
		{"SELECT abalance FROM pgbench_accounts #" + mustFP(t, "SELECT abalance FROM pgbench_accounts WHERE aid = 7")[:8], "fingerprint", 2 * time.Millisecond, "captured p95"},
		{"unparsed #", "fingerprint", DefaultTarget, "default"},
	}
	if len(p.groups) != len(want) {
		t.Fatalf("%d groups %+v, want %d", len(p.groups), p.groups, len(want))
	}
	for i, w := range want {
		g := p.groups[i]
		if !strings.HasPrefix(g.name, w.name) || g.by != w.by || g.target != w.target || g.targetBy != w.targetBy {
			t.Errorf("group %d: %q by %s, T %s by %s; want %q by %s, T %s by %s", i, g.name, g.by, g.target, g.targetBy, w.name, w.by, w.target, w.targetBy)
		}
	}
	if s := p.sessions[0].steps; s[3].group != s[4].group {
		t.Errorf("two texts of one fingerprint in groups %d and %d", s[3].group, s[4].group)
	}
	p = planOf(t, events[3:4], Options{Target: 80 * time.Millisecond})
	if g := p.groups[0]; g.target != 80*time.Millisecond || g.targetBy != "option" {
		t.Errorf("with a target option: T %s by %s", g.target, g.targetBy)
	}
}

func mustFP(t *testing.T, sql string) string {
	t.Helper()
	fp, err := rewrite.Fingerprint(sql)
	if err != nil {
		t.Fatal(err)
	}
	return fp
}

func planOf(t *testing.T, events []capture.Event, opts Options) *plan {
	t.Helper()
	p, err := collect(Slice(events))
	if err != nil {
		t.Fatal(err)
	}
	p.resolve()
	p.order()
	p.groupSteps(opts)
	return p
}

// TestPlanGates: each statement needs the statements that started before
// it sent (gate a) and the transactions that ended before it ended (gate
// b); a transaction ends where the status returns to idle, or at an
// autocommit write, not at an autocommit read.
func TestPlanGates(t *testing.T) {
	q := func(s string, at, dur int64, tag, tx string) capture.Event {
		return capture.Event{Kind: capture.KindQuery, Session: s, T: at, SQL: "SELECT 1", Duration: dur, Tag: tag, TxAfter: tx}
	}
	events := []capture.Event{
		{Kind: capture.KindConnect, Session: "A", T: 0},
		q("A", 10, 5, "BEGIN", "T"),
		q("B", 12, 100, "SELECT 1", "I"), // autocommit read: no end
		q("A", 20, 5, "UPDATE 1", "T"),
		q("A", 30, 5, "COMMIT", "I"),     // ends at 35
		q("B", 200, 50, "UPDATE 1", "I"), // autocommit write: ends at 250
		q("A", 240, 5, "SELECT 1", "I"),
		q("A", 260, 5, "SELECT 1", "I"),
	}
	p := planOf(t, events, Options{})
	type gate struct{ order, needSent, needEnded, ends int }
	var got []gate
	for _, s := range p.sessions {
		for _, st := range s.steps {
			got = append(got, gate{st.order, st.needSent, st.needEnded, st.ends})
		}
	}
	want := []gate{
		{-1, 0, 0, -1}, // A connect
		{0, 0, 0, 0},   // A BEGIN at 10, ends at 15
		{2, 2, 1, 1},   // A UPDATE at 20: BEGIN ended at 15; ends at 25
		{3, 3, 2, 2},   // A COMMIT at 30, ends at 35
		{5, 5, 4, 4},   // A at 240: B's read ended at 112; ends at 245
		{6, 6, 6, 6},   // A at 260: B's write ended at 250
		{1, 1, 0, 3},   // B read at 12, ends at 112
		{4, 4, 4, 5},   // B write at 200, ends at 250
	}
	if len(got) != len(want) {
		t.Fatalf("steps %+v, want %+v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("step %d: %+v, want %+v", i, got[i], want[i])
		}
	}
}

// TestGatesWait: a statement waits until the prefix it needs is sent and
// ended, whatever the order the marks come in, and a release lets it go
// at once.
func TestGatesWait(t *testing.T) {
	p := &plan{statements: 3, ends: 1}
	g := newGates(p)
	st := &step{needSent: 2, needEnded: 1}
	done := make(chan string, 1)
	parked := make(chan bool, 4)
	go func() {
		by, err := g.wait(context.Background(), st, nil, func(b bool) { parked <- b }, nil)
		if err != nil {
			by = err.Error()
		}
		done <- by
	}()
	if !<-parked {
		t.Fatal("not parked")
	}
	g.markSent(1)
	g.markEnded(0)
	select {
	case <-done:
		t.Fatal("went before statement 0 was sent")
	case <-time.After(10 * time.Millisecond):
	}
	g.markSent(0)
	if by := <-done; by != "" {
		t.Errorf("wait returned %q, want a plain return", by)
	}
	if <-parked {
		t.Error("still parked after the gate opened")
	}
	release := make(chan string, 1)
	release <- "W"
	by, err := g.wait(context.Background(), &step{needSent: 3}, release, func(bool) {}, nil)
	if by != "W" || err != nil {
		t.Errorf("released wait: %q %v, want W", by, err)
	}
}

// TestOffsetDefault: copies spread over the capture's mean time between
// session starts, divided by the copies and the speed.
func TestOffsetDefault(t *testing.T) {
	p := &plan{sessions: []*session{{start: 0}, {start: 4_000_000}, {start: 2_000_000}}}
	for _, c := range []struct {
		o    Options
		want time.Duration
	}{
		{Options{UsersX: 2, Speed: 1}, time.Second},
		{Options{UsersX: 4, Speed: 2}, 250 * time.Millisecond},
		{Options{UsersX: 2, Speed: 0}, 0},
		{Options{UsersX: 2, Speed: 1, Offset: 3 * time.Second}, 3 * time.Second},
		{Options{UsersX: 2, Speed: 1, Offset: -1}, 0},
	} {
		if got := c.o.offset(p); got != c.want {
			t.Errorf("%+v: offset %s, want %s", c.o, got, c.want)
		}
	}
}

// TestResolveSkips: events that cannot be replayed are left out and
// counted by reason; an Execute of a named statement gets its Prepare's
// text, an unnamed one the types of its Prepare, which is sent with it.
func TestResolveSkips(t *testing.T) {
	e := func(k capture.Kind, name, sql string) capture.Event {
		return capture.Event{Kind: k, Session: "s", Name: name, SQL: sql}
	}
	prep := e(capture.KindPrepare, "", "SELECT $1::int")
	prep.TypeNames = []string{"integer"}
	bad := e(capture.KindExecute, "p", "")
	bad.Formats, bad.Values = []int16{0, 1}, [][]byte{nil, nil, nil}
	events := []capture.Event{
		e(capture.KindPrepare, "p", "SELECT 1"),
		e(capture.KindExecute, "p", ""),
		e(capture.KindExecute, "gone", ""),
		prep,
		e(capture.KindExecute, "", ""),
		e(capture.KindQuery, "", "COPY t FROM STDIN"),
		bad,
	}
	p := planOf(t, events, Options{})
	steps := p.sessions[0].steps
	if len(steps) != 4 || steps[1].sql != "SELECT 1" || steps[1].unnamed || !steps[3].unnamed ||
		steps[3].sql != "SELECT $1::int" || len(steps[3].types) != 1 || steps[0].merged || !steps[2].merged {
		t.Errorf("steps %+v", steps)
	}
	if len(p.skipped) != 3 || len(p.typeNames) != 1 {
		t.Errorf("skipped %v, type names %v: want 3 reasons and integer", p.skipped, p.typeNames)
	}
}

// TestTxEnded: a session released by the watchdog stays released through
// a Parse and a statement inside its transaction, not past its end.
func TestTxEnded(t *testing.T) {
	for _, c := range []struct {
		e    capture.Event
		want bool
	}{
		{capture.Event{Kind: capture.KindPrepare}, false},
		{capture.Event{Kind: capture.KindExecute, TxAfter: "T"}, false},
		{capture.Event{Kind: capture.KindQuery, TxAfter: "E"}, false},
		{capture.Event{Kind: capture.KindQuery, TxAfter: "I"}, true},
		{capture.Event{Kind: capture.KindQuery}, true},
	} {
		if got := txEnded(&c.e); got != c.want {
			t.Errorf("%+v: %v, want %v", c.e, got, c.want)
		}
	}
}
