package capacity

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/erplab/erplab/internal/results"
)

// TestP95StraddleRepeats: the recorded 18-user step, good on APDEX,
// against a p95 limit inside the p95's interval straddles and is run
// again; its attempts are decided by the mean p95 against the limit. A
// limit outside the interval decides at once, and a hard reason (an
// error rate over its limit) is never repeated.
func TestP95StraddleRepeats(t *testing.T) {
	d, est, res := recorded(t, "good-18.json")
	p := est.P95["serve"]
	if !(p.Lo < p.Value && p.Value < p.Hi) {
		t.Fatalf("serve p95 %+v has no interval", p)
	}
	at := func(ms float64) Target {
		return Target{Apdex: 0.5, ErrorRate: 0.01, P95: map[string]time.Duration{"serve": time.Duration(ms * float64(time.Millisecond))}}
	}
	inside := (p.Value + p.Hi) / 2 // above the value: good, but the interval holds it
	j := Judge(d, est, res, at(inside), idle())
	if j.Outcome != OutcomeGood || !j.Straddles {
		t.Fatalf("limit %.1f ms in [%.1f, %.1f]: %+v", inside, p.Lo, p.Hi, j)
	}
	s := NewSearch(Plan{Start: 18, Max: 36, Step: Growth{Factor: 2}, Resolution: 0.05, Integer: true})
	if l, _ := s.Next(); l != 18 {
		t.Fatalf("first load %g", l)
	}
	s.Record(j)
	if l, _ := s.Next(); l != 18 {
		t.Fatalf("a straddling p95 is not repeated: next %g", l)
	}
	// The second attempt has a p95 far above the limit: the mean is over
	// it, the load is bad although both APDEX attempts reached the target.
	j2 := j
	j2.p95 = map[string]float64{"serve": 3 * inside}
	j2.Outcome, j2.Straddles = OutcomeBad, false
	s.Record(j2)
	if _, fb, _ := s.Capacity(); fb != 18 {
		t.Fatalf("pooled p95 above the limit: first bad %g, want 18", fb)
	}
	if j := Judge(d, est, res, at(p.Hi*2), idle()); j.Straddles || j.Outcome != OutcomeGood {
		t.Fatalf("limit outside the interval: %+v", j)
	}
	hard := at(inside)
	hard.ErrorRate = 0
	d2 := *d
	d2.Totals.Errors = 1
	if j := Judge(&d2, est, res, hard, idle()); j.Straddles || j.Outcome != OutcomeBad {
		t.Fatalf("an error-rate miss straddles: %+v", j)
	}
}

// TestPoolRule: the error of a pool that cannot open quotes the user's
// --connections, not the step's derived pool size.
func TestPoolRule(t *testing.T) {
	for _, c := range []struct {
		conns, users int
		want         string
	}{
		{0, 15, "--connections 0: one per VU, 15 VUs"},
		{-1, 15, "--connections -1: min(VUs, 100), 15 VUs"},
		{4, 15, "with --connections 4"},
	} {
		if got := poolRule(c.conns, c.users); got != c.want {
			t.Errorf("poolRule(%d, %d) = %q, want %q", c.conns, c.users, got, c.want)
		}
	}
}

// TestFreshPath: the default document of a second search started in the
// same second gets its own name.
func TestFreshPath(t *testing.T) {
	dir := t.TempDir()
	var made []string
	for i := 0; i < 3; i++ {
		p := freshPath(dir, "-capacity-smoke")
		if err := os.WriteFile(p, nil, 0o644); err != nil {
			t.Fatal(err)
		}
		made = append(made, p)
	}
	if made[0] == made[1] || made[1] == made[2] || made[0] == made[2] {
		t.Fatalf("paths %v", made)
	}
	for _, p := range made {
		if filepath.Dir(p) != dir || !strings.HasSuffix(p, ".json") || !strings.Contains(p, "-capacity-smoke") {
			t.Fatalf("path %s", p)
		}
	}
}

// TestDiskFullIsNotServerFailed: ENOSPC from a step's files, and the
// server's disk_full, end the search as "disk full", never as "server
// failed"; other errors are not disk full.
func TestDiskFullIsNotServerFailed(t *testing.T) {
	for _, c := range []struct {
		err  error
		want bool
	}{
		{fmt.Errorf("results: %w", &os.PathError{Op: "write", Path: "step-03-16.json", Err: syscall.ENOSPC}), true},
		{errors.New(`ERROR: could not extend file "base/16384/16390": No space left on device (SQLSTATE 53100)`), true},
		{errors.New("connect: dial unix /tmp/.s.PGSQL.5432: connect: connection refused"), false},
		{nil, false},
	} {
		if got := DiskFull(c.err); got != c.want {
			t.Errorf("DiskFull(%v) = %v, want %v", c.err, got, c.want)
		}
	}
	s := NewSearch(Plan{Start: 4, Max: 64, Step: Growth{Factor: 2}, Resolution: 0.05, Integer: true})
	s.Next()
	s.Record(judged(OutcomeGood, 0.95, 0.93, 0.97))
	s.Next()
	s.Record(Judgement{Outcome: OutcomeDiskFull, Detail: "results: write step-02-8.json: no space left on device"})
	lg, fb, st := s.Capacity()
	if _, more := s.Next(); more || st.Kind != StopDiskFull || lg != 4 || fb != 0 {
		t.Fatalf("after a full disk: more %v, stop %+v, last good %g, first bad %g", more, st, lg, fb)
	}
	d := &Document{Unit: "users", Steps: []Step{{Index: 1, Load: 4, Outcome: OutcomeGood}}}
	d.Conclude(lg, fb, st)
	if !strings.Contains(d.Result.Line, "search ended: results: write step-02-8.json: no space left on device") {
		t.Fatalf("line %q", d.Result.Line)
	}
}

// TestConcludeLine: the verdict line quotes the mean APDEX of a
// repeated step (what decided it), says "1 user", and a --p95 target
// missed at the lowest load is named as the limit, not the resources.
func TestConcludeLine(t *testing.T) {
	lo, hi, lo2, hi2 := 0.81, 0.87, 0.85, 0.90
	busy := 100.0
	d := &Document{Unit: "users", Search: SearchJSON{Max: 64}, Steps: []Step{
		{Load: 8, Outcome: OutcomeGood, Apdex: Score{Value: 0.95}},
		{Load: 16, Outcome: OutcomeGood, Apdex: Score{Value: 0.84, Lo: &lo, Hi: &hi}, Straddles: true},
		{Load: 16, Outcome: OutcomeGood, Apdex: Score{Value: 0.88, Lo: &lo2, Hi: &hi2}},
		{Load: 32, Outcome: OutcomeBad, Apdex: Score{Value: 0.5}, Reasons: []string{"APDEX 0.50 < 0.85"}},
	}}
	d.Conclude(16, 32, Stop{Kind: StopConverged})
	if want := "capacity 16 users at APDEX 0.86 (mean of 2 attempts: 0.84 [0.81-0.87], 0.88 [0.85-0.90]); at 32 users APDEX 0.50 < 0.85"; !strings.HasPrefix(d.Result.Line, want) || d.Result.Apdex.Value != 0.86 {
		t.Errorf("line %q\n want %q...", d.Result.Line, want)
	}
	d = &Document{Unit: "users", Search: SearchJSON{Max: 2}, Steps: []Step{
		{Load: 1, Outcome: OutcomeBad, Apdex: Score{Value: 0.9}, Reasons: []string{"p95 post_order 5ms > 1ms"}, Resources: Resources{Samples: 4, HostBusy: &busy}},
	}}
	d.Conclude(0, 1, Stop{Kind: StopNoGood})
	if want := "capacity below 1 user; at 1 user p95 post_order 5ms > 1ms; limited by the --p95 target (missed even at 1 user); resources there: host CPU busy 100 %"; d.Result.Line != want {
		t.Errorf("line %q\n want %q", d.Result.Line, want)
	}
	if got := d.Result.CapacityText("users"); got != "below 1 user" {
		t.Errorf("capacity text %q", got)
	}
}

// TestConcludeQuotesTheDecidingMean: a first bad load run twice (its
// first attempt straddled the target) is decided by the mean of its
// attempts (the search's pooled decision), and the verdict line quotes
// that mean, not the second attempt's own figure: for APDEX (the second
// attempt bad, or good with the first bad) and for a --p95 limit.
func TestConcludeQuotesTheDecidingMean(t *testing.T) {
	lohi := func(lo, hi float64) (*float64, *float64) { return &lo, &hi }
	step := func(load float64, attempt int, j Judgement) Step {
		s := NewStep(0, load, attempt, &results.Document{}, "", nil, Resources{}, j)
		if j.Outcome == OutcomeBad {
			s.Reasons = []string{fmt.Sprintf("APDEX %s < 0.85", fmtApdex(j.Apdex.Value))}
		}
		return s
	}
	for _, c := range []struct {
		name     string
		a1, a2   Judgement
		want     string
		notQuote string
	}{
		{"second attempt bad", judged(OutcomeBad, 0.84, 0.82, 0.86), judged(OutcomeBad, 0.80, 0.78, 0.82),
			"; at 32 users APDEX 0.82 (mean of 2 attempts: 0.84 [0.82-0.86], 0.80 [0.78-0.82]) < 0.85;", "APDEX 0.80 < 0.85"},
		{"second attempt good", judged(OutcomeBad, 0.78, 0.75, 0.86), judged(OutcomeGood, 0.86, 0.84, 0.88),
			"; at 32 users APDEX 0.82 (mean of 2 attempts: 0.78 [0.75-0.86], 0.86 [0.84-0.88]) < 0.85;", "APDEX 0.78 < 0.85"},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := NewSearch(Plan{Start: 16, Max: 64, Step: Growth{Factor: 2}, Resolution: 0.05, Integer: true})
			good := judged(OutcomeGood, 0.95, 0.93, 0.97)
			d := &Document{Unit: "users", Target: TargetJSON{Apdex: 0.85}, Search: SearchJSON{Max: 64}}
			for i, j := range []Judgement{good, c.a1, c.a2} {
				load, _ := s.Next()
				d.Steps = append(d.Steps, step(load, map[int]int{0: 1, 1: 1, 2: 2}[i], j))
				s.Record(j)
			}
			lg, fb, st := s.Capacity()
			if lg != 16 || fb != 32 {
				t.Fatalf("search: last good %g, first bad %g; want 16 and 32 (the mean is below the target)", lg, fb)
			}
			d.Conclude(lg, fb, st)
			if !strings.Contains(d.Result.Line, c.want) || strings.Contains(d.Result.Line, c.notQuote) {
				t.Errorf("line %q\n want %q, not %q", d.Result.Line, c.want, c.notQuote)
			}
			if len(d.Result.Reasons) != 1 || !strings.HasPrefix(c.want, "; at 32 users "+d.Result.Reasons[0]) {
				t.Errorf("reasons %q", d.Result.Reasons)
			}
		})
	}
	lo, hi := lohi(0.88, 0.92)
	p1lo, p1hi := lohi(400, 560)
	d := &Document{Unit: "users", Target: TargetJSON{Apdex: 0.85, P95Ms: map[string]float64{"post": 500}}, Search: SearchJSON{Max: 64}, Steps: []Step{
		{Load: 16, Attempt: 1, Outcome: OutcomeGood, Apdex: Score{Value: 0.95}},
		{Load: 32, Attempt: 1, Outcome: OutcomeGood, Straddles: true, Apdex: Score{Value: 0.9, Lo: lo, Hi: hi}, P95Ms: map[string]Score{"post": {Value: 480, Lo: p1lo, Hi: p1hi}}},
		{Load: 32, Attempt: 2, Outcome: OutcomeBad, Reasons: []string{"p95 post 600ms > 500ms"}, Apdex: Score{Value: 0.9, Lo: lo, Hi: hi}, P95Ms: map[string]Score{"post": {Value: 600}}},
	}}
	d.Conclude(16, 32, Stop{})
	if want := "; at 32 users p95 post 540ms (mean of 2 attempts: 480ms, 600ms) > 500ms;"; !strings.Contains(d.Result.Line, want) {
		t.Errorf("p95: line %q\n want %q", d.Result.Line, want)
	}
}

// TestFailedStepIsBad: a step whose every operation failed (status
// "failed", as at a load where every operation times out) is judged by
// the criteria, a bad step the search goes below, not a server failure
// that ends it; a lost server still ends it.
func TestFailedStepIsBad(t *testing.T) {
	d, est, res := recorded(t, "good-18.json")
	failed := *d
	failed.Status = results.StatusFailed.Because("every one of the 9 attempts of the key operations failed (SQLSTATE 57014 x9)")
	failed.Totals.Errors = failed.Totals.Count
	tg := Target{Apdex: 0.5, ErrorRate: 0.01}
	if j := Judge(&failed, est, res, tg, idle()); j.Outcome != OutcomeBad {
		t.Errorf("a failed step: %+v", j)
	}
	lost := *d
	lost.Status = results.StatusLost.Because("no operation succeeded")
	if j := Judge(&lost, est, res, tg, idle()); j.Outcome != OutcomeServer {
		t.Errorf("a lost server: %+v", j)
	}
}
