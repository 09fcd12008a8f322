package engine

import (
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/erplab/erplab/internal/results"
)

// The refusals of a server on its way back (PostgreSQL 15's
// ProcessStartupPacket messages for 57P03) are "coming back"; a server
// shutting down, other connection errors and other codes are not.
func TestComingBack(t *testing.T) {
	for _, c := range []struct {
		code, msg string
		want      bool
	}{
		{"57P03", "the database system is starting up", true},
		{"57P03", "the database system is not yet accepting connections", true},
		{"57P03", "the database system is not accepting connections", true},
		{"57P03", "the database system is in recovery mode", true},
		{"57P03", "the database system is shutting down", false},
		{"57P01", "terminating connection due to administrator command", false},
		{"53300", "sorry, too many clients already", false},
	} {
		err := fmt.Errorf("acquire: %w", &pgconn.PgError{Severity: "FATAL", Code: c.code, Message: c.msg})
		if got := ComingBack(err); got != c.want {
			t.Errorf("%s %q: ComingBack %v, want %v", c.code, c.msg, got, c.want)
		}
		if got, want := ShuttingDown(err), c.code == "57P03" && !c.want; got != want {
			t.Errorf("%s %q: ShuttingDown %v, want %v", c.code, c.msg, got, want)
		}
	}
	if ComingBack(fmt.Errorf("dial: connection refused")) {
		t.Error("a refused dial is coming back")
	}
}

// The controller's judgement over a frozen span that ends, then one that
// lasts to the end: states, spans, the progress wording.
func TestJudgeSpans(t *testing.T) {
	start := time.Unix(1000, 0)
	at := func(s float64) time.Time { return start.Add(time.Duration(s * float64(time.Second))) }
	var w watch
	w.event(at(1))
	if st := w.judge(at(5.9), start, 3, at(1), false); st.Condition != ServerOK {
		t.Fatalf("4.9 s of silence: %+v", st)
	}
	st := w.judge(at(6), start, 3, at(1), false)
	if st.Condition != ServerNotAnswering || st.Waiting != 3 || st.Describe(at(6)) != "server not answering for 5 s: 3 operations waiting" {
		t.Fatalf("5 s of silence: %+v %q", st, st.Describe(at(6)))
	}
	w.judge(at(7), start, 4, at(1), false)
	w.event(at(7.5)) // an answer
	if st := w.judge(at(7.6), start, 4, at(1), false); st.Condition != ServerOK {
		t.Fatalf("after the answer: %+v", st)
	}
	// Silence with nothing in flight is not "not answering".
	if st := w.judge(at(19), start, 0, at(7.5), false); st.Condition != ServerOK {
		t.Fatalf("idle: %+v", st)
	}
	if st := w.judge(at(20), start, 0, at(7.5), false); st.Condition != ServerOK {
		t.Fatalf("idle: %+v", st)
	}
	w.judge(at(30), start, 1, at(7.5), false)
	// The last operation ends cut short (no answer): the span goes on.
	w.judge(at(30.5), start, 0, at(7.5), false)
	got := w.finish(at(31), start)
	want := []results.Unresponsive{{FromS: 1, ToS: 7.5, MaxWaiting: 4}, {FromS: 7.5, ToS: 31, UntilEnd: true, MaxWaiting: 1}}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("spans %+v, want %+v", got, want)
	}
	// The answers that end a run come after the last judgement: finish
	// closes the span at the last answer, not at the end.
	var w2 watch
	w2.event(at(1))
	w2.judge(at(6.5), start, 2, at(1), false)
	w2.event(at(7.2)) // the frozen server continued; the last operations complete
	got = w2.finish(at(7.3), start)
	want = []results.Unresponsive{{FromS: 1, ToS: 7.2, MaxWaiting: 2}}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("answered after the last judgement: spans %+v, want %+v", got, want)
	}
	if d := (ServerState{Condition: ServerNotAnswering, Since: at(0), Waiting: 1}).Describe(at(9)); d != "server not answering for 9 s: 1 operation waiting" {
		t.Fatalf("describe %q", d)
	}
	// "Starting up" answers: coming back for 2 s after the last one.
	w.comingBack(at(40))
	w.comingBack(at(41))
	if st := w.judge(at(42.5), start, 0, at(7.5), true); st.Condition != ServerComingBack || !st.Since.Equal(at(40)) || st.Describe(at(42.5)) != "server starting up / in recovery for 2 s" {
		t.Fatalf("coming back: %+v %q", st, st.Describe(at(42.5)))
	}
	if st := w.judge(at(44), start, 0, at(7.5), true); st.Condition != ServerUnreachable || st.Describe(at(44)) != "server unreachable for 36 s" {
		t.Fatalf("unreachable: %+v %q", st, st.Describe(at(44)))
	}
	// "Shutting down" refusals while operations fail: going, not coming
	// back; the time counts from the last success.
	w.shuttingDown(at(50))
	if st := w.judge(at(51), start, 0, at(7.5), true); st.Condition != ServerShuttingDown || st.Describe(at(51)) != "server shutting down for 43 s: connections refused" {
		t.Fatalf("shutting down: %+v %q", st, st.Describe(at(51)))
	}
	if st := w.judge(at(53), start, 0, at(7.5), true); st.Condition != ServerUnreachable {
		t.Fatalf("2 s after the last refusal: %+v", st)
	}
}
