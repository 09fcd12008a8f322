package replay

import (
	"strings"
	"testing"
	"time"

	"github.com/erplab/erplab/internal/opmap"
	"github.com/erplab/erplab/internal/results"
)

// TestUsersX: four copies of every session run four times the sessions
// and the statements, each copy kept in its own captured order, and the
// end state is four times the capture's.
func TestUsersX(t *testing.T) {
	p := newTPCB(5, 3)
	res, pool := replayOnto(t, tpcbSchema, p.events, Options{UsersX: 4, Margin: 200 * time.Millisecond})
	f := res.Fidelity
	if f.Connections != 4*5 || f.Statements != 4*p.statements || f.Failed != 0 {
		t.Errorf("%d connections, %d statements, %d failed: want %d, %d, 0", f.Connections, f.Statements, f.Failed, 4*5, 4*p.statements)
	}
	acc, tel, br, hist := balances(t, pool)
	if acc != 4*p.delta || tel != 4*p.delta || br != 4*p.delta || hist != 4*p.history {
		t.Errorf("end state: balances %d %d %d, history %d; want %d each and %d", acc, tel, br, hist, 4*p.delta, 4*p.history)
	}
}

// TestSpeed: at speed 2 a capture whose last statement came 600 ms after
// its first cannot end before 300 ms, every statement's lag behind its
// schedule is recorded, and the time series is handed out as it closes.
func TestSpeed(t *testing.T) {
	s := &script{}
	a := s.session("A", "speed-A", 0)
	b := s.session("B", "speed-B", 0)
	for _, at := range []int64{0, 300_000, 600_000} {
		a.t, b.t = max(a.t, at), max(b.t, at+50_000)
		a.query("SELECT 1", 5, 1, "SELECT 1")
		b.query("SELECT 2", 5, 1, "SELECT 1")
	}
	a.disconnect()
	b.disconnect()
	var streamed []results.Interval
	res, _ := replayOnto(t, "SELECT 1", s.sorted(), Options{Speed: 2, Interval: 100 * time.Millisecond,
		OnInterval: func(iv results.Interval) { streamed = append(streamed, iv) }})
	if d := res.Doc.EndedAt.Sub(res.Doc.StartedAt); d < 300*time.Millisecond {
		t.Errorf("replay took %s: the last statement was due at 300 ms", d)
	}
	f := res.Fidelity
	if f.Lag == nil || f.Lag.Max <= 0 || f.Statements != 6 {
		t.Errorf("lag %+v over %d statements: want it recorded for 6", f.Lag, f.Statements)
	}
	if len(streamed) < 3 || len(streamed) != len(res.Doc.Series) {
		t.Errorf("%d intervals streamed, %d in the document: want the same, at least 3 of 100 ms", len(streamed), len(res.Doc.Series))
	}
}

// TestOpsMapped: while a statement runs, the map handed to OnStart names
// its backend with the statement's group (the samplers' waits per
// group), and the backend is idle again once it answered.
func TestOpsMapped(t *testing.T) {
	s := &script{}
	a := s.session("A", "ops-A", 0)
	a.query("SELECT pg_sleep(0.5)", 500_000, 1, "SELECT 1")
	a.query("SELECT 1", 5, 1, "SELECT 1")
	a.disconnect()
	seen := make(chan string, 1)
	opts := Options{OnStart: func(_ time.Time, ops *opmap.Map) {
		go func() {
			deadline := time.Now().Add(deadline)
			for time.Now().Before(deadline) {
				for _, st := range ops.Snapshot(nil) {
					if st.Op >= 0 {
						seen <- ops.Name(st.Op)
						return
					}
				}
				time.Sleep(5 * time.Millisecond)
			}
			seen <- ""
		}()
	}}
	replayOnto(t, "", s.sorted(), opts)
	if name := <-seen; !strings.HasPrefix(name, "SELECT pg_sleep") {
		t.Errorf("a running backend mapped to %q, want the pg_sleep statement's group", name)
	}
}
