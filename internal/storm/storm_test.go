package storm

import (
	"strings"
	"testing"
	"time"
)

// series builds one point per second from active counts, with the given
// CPU busy % (negative = unknown) and all active sessions waiting on wait.
func series(active []int, cpu float64, wait string) []Point {
	pts := make([]Point, len(active))
	for i, a := range active {
		pts[i] = Point{T: float64(i + 1), Active: a, CPUBusy: cpu, CPUKnown: cpu >= 0,
			Waits: map[string]int{wait: a * 9 / 10, "CPU": a - a*9/10}}
	}
	return pts
}

func TestStormFires(t *testing.T) {
	active := []int{12, 11, 12, 13, 12, 40, 120, 240, 250, 245, 230}
	ev, err := Replay(DefaultRule(), series(active, 35, "LWLock:LockManager"))
	if err != nil {
		t.Fatal(err)
	}
	if len(ev) != 1 {
		t.Fatalf("got %d storms, want 1: %+v", len(ev), ev)
	}
	e := ev[0]
	// Fires at t=7 (120 >= 4*11, baseline 11 at t=2 within 5 s).
	if e.T != 7 || e.From != 11 || e.To != 120 || e.StartT != 2 {
		t.Errorf("storm %+v, want fired at t=7 from 11 (t=2) to 120", e)
	}
	if e.Peak != 250 || !e.Ongoing() {
		t.Errorf("peak %d ongoing %v, want 250 and still going", e.Peak, e.Ongoing())
	}
	if e.WaitEvent != "LWLock:LockManager" || e.WaitCount != 108 {
		t.Errorf("dominant %s (%d), want LWLock:LockManager (108)", e.WaitEvent, e.WaitCount)
	}
	want := "LWLock:LockManager storm: active 11 -> 120 in 5 s, CPU 35 %"
	if e.Message != want {
		t.Errorf("message %q, want %q", e.Message, want)
	}
}

func TestStormMessageExample(t *testing.T) {
	// The example: 12 -> 240 in 3 s at 35 % CPU.
	pts := series([]int{12, 12, 60, 120, 240}, 35, "LWLock:LockManager")
	ev, _ := Replay(Rule{Window: 3 * time.Second, Factor: 20, MinActive: 30, CPUSaturated: 90, EndRatio: 0.5}, pts)
	if len(ev) != 1 || ev[0].Message != "LWLock:LockManager storm: active 12 -> 240 in 3 s, CPU 35 %" {
		t.Fatalf("got %+v", ev)
	}
}

func TestStormNotWhenCPUSaturated(t *testing.T) {
	active := []int{12, 11, 12, 13, 12, 40, 120, 240, 250, 245, 230}
	ev, err := Replay(DefaultRule(), series(active, 97, "LWLock:LockManager"))
	if err != nil {
		t.Fatal(err)
	}
	if len(ev) != 0 {
		t.Fatalf("storm fired with CPU saturated: %+v", ev)
	}
	// Saturated only at the baseline moment, in the window: still no storm.
	pts := series(active, 35, "LWLock:LockManager")
	pts[5].CPUBusy = 95
	pts[6].CPUBusy = 95
	ev, _ = Replay(DefaultRule(), pts)
	for _, e := range ev {
		if e.T <= 7 {
			t.Fatalf("storm fired across a saturated point: %+v", e)
		}
	}
}

func TestStormNotOnSlowGrowth(t *testing.T) {
	// 12 -> 240 over a minute: the same endpoints as a storm, but slow.
	var active []int
	for i := 0; i <= 60; i++ {
		active = append(active, 12+i*228/60)
	}
	ev, err := Replay(DefaultRule(), series(active, 35, "LWLock:LockManager"))
	if err != nil {
		t.Fatal(err)
	}
	if len(ev) != 0 {
		t.Fatalf("storm fired on slow growth: %+v", ev)
	}
}

func TestStormNotBelowMinActive(t *testing.T) {
	ev, _ := Replay(DefaultRule(), series([]int{1, 1, 2, 8, 20, 25}, 10, "Lock:advisory"))
	if len(ev) != 0 {
		t.Fatalf("storm below MinActive: %+v", ev)
	}
}

func TestStormEndsAndFiresAgain(t *testing.T) {
	active := []int{5, 5, 100, 110, 90, 40, 10, 5, 5, 200}
	ev, err := Replay(DefaultRule(), series(active, -1, "Lock:transactionid"))
	if err != nil {
		t.Fatal(err)
	}
	if len(ev) != 2 {
		t.Fatalf("got %d storms, want 2: %+v", len(ev), ev)
	}
	if ev[0].EndT == nil || *ev[0].EndT != 6 || ev[0].Peak != 110 {
		t.Errorf("first storm %+v, want end at t=6 (40 <= 0.5*100), peak 110", ev[0])
	}
	if !strings.HasSuffix(ev[0].Message, "CPU n/a") || ev[0].CPUKnown {
		t.Errorf("remote server: message %q", ev[0].Message)
	}
	if ev[1].T != 10 || ev[1].From != 5 || ev[1].To != 200 {
		t.Errorf("second storm %+v", ev[1])
	}
}

func TestDetectorObserveReturns(t *testing.T) {
	d, err := NewDetector(DefaultRule())
	if err != nil {
		t.Fatal(err)
	}
	pts := series([]int{10, 10, 100, 100, 20}, 20, "IO:DataFileRead")
	var fired, ended []float64
	for _, p := range pts {
		f, e := d.Observe(p)
		if f != nil {
			fired = append(fired, f.T)
		}
		if e != nil {
			ended = append(ended, *e.EndT)
		}
	}
	if len(fired) != 1 || fired[0] != 3 || len(ended) != 1 || ended[0] != 5 {
		t.Fatalf("fired %v ended %v, want [3] [5]", fired, ended)
	}
}

func TestRuleValidate(t *testing.T) {
	bad := []Rule{
		{Window: 0, Factor: 4, MinActive: 30, CPUSaturated: 90, EndRatio: .5},
		{Window: time.Second, Factor: 1, MinActive: 30, CPUSaturated: 90, EndRatio: .5},
		{Window: time.Second, Factor: 4, MinActive: 0, CPUSaturated: 90, EndRatio: .5},
		{Window: time.Second, Factor: 4, MinActive: 30, CPUSaturated: 120, EndRatio: .5},
		{Window: time.Second, Factor: 4, MinActive: 30, CPUSaturated: 90, EndRatio: 1},
	}
	for _, r := range bad {
		if _, err := NewDetector(r); err == nil {
			t.Errorf("rule %+v accepted", r)
		}
	}
	if err := DefaultRule().Validate(); err != nil {
		t.Fatal(err)
	}
}

func TestDominantTies(t *testing.T) {
	k, n := Dominant(map[string]int{"LWLock:LockManager": 5, "IO:DataFileRead": 5, "CPU": 2})
	if k != "IO:DataFileRead" || n != 5 {
		t.Fatalf("got %s %d", k, n)
	}
	if k, n := Dominant(nil); k != "" || n != 0 {
		t.Fatalf("empty: %s %d", k, n)
	}
}

// crowdPoints is a saturated 2-CPU server with active sessions and lock
// waiters per second.
func crowdPoints(active, locked []int) []Point {
	pts := make([]Point, len(active))
	for i := range active {
		pts[i] = Point{T: float64(i + 1), Active: active[i], CPUBusy: 100, CPUKnown: true,
			Waits: map[string]int{"LWLock:LockManager": locked[i] * 2 / 3, "LWLock:WALWrite": locked[i] - locked[i]*2/3, "CPU": active[i] - locked[i]}}
	}
	return pts
}

func TestCrowdStorm(t *testing.T) {
	r := DefaultRule()
	r.CPUs, r.CrowdShare = 2, 0.2
	// 140 active on 2 CPUs all along (no rise), lock share 10 % then 30 %,
	// then the crowd thins out.
	active := []int{140, 141, 139, 140, 142, 140, 138, 140, 141, 5, 5}
	locked := []int{14, 14, 14, 42, 42, 42, 42, 42, 42, 0, 0}
	ev, err := Replay(r, crowdPoints(active, locked))
	if err != nil {
		t.Fatal(err)
	}
	if len(ev) != 1 {
		t.Fatalf("storms %+v, want one", ev)
	}
	e := ev[0]
	// The window at t holds t-5..t. At t=6 it averages (3*10 % + 3*30 %)/6,
	// just under 20 % (14/141 < 10 %); at t=7, (2*10 % + 4*30 %)/6 = 23.3 %.
	if e.Rule != "crowd" || e.T != 7 || e.StartT != 2 || e.From != 138 || e.WaitEvent != "LWLock:LockManager" || e.LockPct != 23.3 || e.EndT == nil || *e.EndT != 10 {
		t.Errorf("storm %+v", e)
	}
	want := "LWLock:LockManager storm: 138 active on 2 CPUs, 23 % waiting on locks over 5 s (LWLock:LockManager 21 per sample), CPU 100 %"
	if e.Message != want {
		t.Errorf("message %q, want %q", e.Message, want)
	}
	// Without the CPU count (the default) nothing fires: the CPU is
	// saturated and there is no rise.
	if ev, _ := Replay(DefaultRule(), crowdPoints(active, locked)); len(ev) != 0 {
		t.Errorf("default rule fired: %+v", ev)
	}
	// A CPU-bound crowd of the same size: no lock waits, no storm.
	if ev, _ := Replay(r, crowdPoints(active, make([]int, len(active)))); len(ev) != 0 {
		t.Errorf("CPU-bound crowd fired: %+v", ev)
	}
	// Below 4 x CPUs active: no storm, whatever the lock share.
	small := []int{7, 7, 7, 7, 7, 7}
	if ev, _ := Replay(r, crowdPoints(small, small)); len(ev) != 0 {
		t.Errorf("7 active on 2 CPUs fired: %+v", ev)
	}
	bad := r
	bad.CrowdShare = 0
	if err := bad.Validate(); err == nil {
		t.Error("crowd share 0 accepted")
	}
}

// A starved sampler (one point every 6 s, longer than the window) still
// gets a crowd storm from its last CrowdPoints points.
func TestCrowdStormSlowSampling(t *testing.T) {
	r := DefaultRule()
	r.CPUs = 2
	pts := crowdPoints([]int{250, 260, 255, 258}, []int{120, 130, 125, 129})
	for i := range pts {
		pts[i].T = float64(6 * (i + 1))
	}
	ev, err := Replay(r, pts)
	if err != nil {
		t.Fatal(err)
	}
	if len(ev) != 1 || ev[0].T != 18 || ev[0].StartT != 6 || ev[0].Rule != "crowd" {
		t.Fatalf("storms %+v, want one fired at the third point (t=18) over t=6..18", ev)
	}
}
