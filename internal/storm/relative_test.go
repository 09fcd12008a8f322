package storm

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// recorded is a series of testdata/: sampler observations trimmed to the
// fields the rules read (testdata/README.md).
type recorded struct {
	Source string `json:"source"`
	Series []struct {
		T        float64 `json:"t"`
		Dt       float64 `json:"dt_s"`
		Sessions struct {
			Active int `json:"active"`
		} `json:"sessions"`
		Waits map[string]int `json:"waits"`
		Host  *struct {
			CPU struct {
				Busy float64 `json:"busy_pct"`
			} `json:"cpu"`
		} `json:"host"`
		Noise *struct {
			User   float64 `json:"server_user_pct"`
			System float64 `json:"server_system_pct"`
			CPUs   int     `json:"cpus"`
		} `json:"noise"`
	} `json:"series"`
}

// loadRecorded returns the points of testdata/name as package sampler
// builds them (Sample.StormPoint) and the host's CPU count.
func loadRecorded(t *testing.T, name string) ([]Point, int) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	var r recorded
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	pts, cpus := make([]Point, len(r.Series)), 0
	for i, s := range r.Series {
		pts[i] = Point{T: s.T, Active: s.Sessions.Active, Waits: s.Waits}
		if s.Host != nil && s.Dt > 0 {
			pts[i].CPUBusy, pts[i].CPUKnown = s.Host.CPU.Busy, true
		}
		if n := s.Noise; n != nil && n.CPUs > 0 {
			pts[i].ServerCPU, pts[i].ServerCPUKnown = (n.User+n.System)/100*float64(n.CPUs), true
			cpus = n.CPUs
		}
	}
	if len(pts) == 0 || cpus == 0 {
		t.Fatalf("%s: no points with the server's CPU", name)
	}
	return pts, cpus
}

func relativeOnly(ev []Event) []Event {
	var out []Event
	for _, e := range ev {
		if e.Rule == "relative" {
			out = append(out, e)
		}
	}
	return out
}

// TestRelativeStormRecorded replays recorded series with the default rule
// and the host's CPU count, as run, doctor and top apply it.
func TestRelativeStormRecorded(t *testing.T) {
	replay := func(name string, mod func(*Rule)) []Event {
		pts, cpus := loadRecorded(t, name)
		r := DefaultRule()
		r.CPUs = cpus
		if mod != nil {
			mod(&r)
		}
		ev, err := Replay(r, pts)
		if err != nil {
			t.Fatal(err)
		}
		return ev
	}
	// 7 sessions pile up on one advisory lock on 2 CPUs, the server idle.
	ev := replay("storm-lock.json", nil)
	if len(ev) != 1 || ev[0].Rule != "relative" || ev[0].T != 2.5 || ev[0].StartT != 1.751 {
		t.Fatalf("storm-lock: storms %+v, want one relative storm at 2.5 s", ev)
	}
	want := "Lock:advisory storm: active 0 -> 7 in 0.7 s, server CPU 0.01 -> 0.00 cores, CPU 70 %"
	if ev[0].Message != want || ev[0].WaitCount != 7 {
		t.Errorf("message %q (%d waiting), want %q (7)", ev[0].Message, ev[0].WaitCount, want)
	}
	// Steady ERP load (active sessions swing 0..22 from second to second),
	// a start-up ramp to 100 sessions and a CPU-bound rise from 1 to 7
	// sessions: no relative storm.
	for _, name := range []string{"steady-erp.json", "steady-erp-aged.json", "churn-ramp.json", "cpu-rise.json"} {
		for _, e := range relativeOnly(replay(name, nil)) {
			t.Errorf("%s: relative storm %s", name, e.Message)
		}
	}
	// The margin: a 1.5x rise instead of 2x fires on the steady series.
	for _, name := range []string{"steady-erp.json", "steady-erp-aged.json"} {
		if len(relativeOnly(replay(name, func(r *Rule) { r.RelRise = 0.5 }))) == 0 {
			t.Errorf("%s: no relative storm with RelRise 0.5 (the calibration's margin)", name)
		}
	}
}

// relPoints is a local server at 1 s per point: active sessions, the
// server's CPU (cores) and the waiting share of each point's sessions on
// Lock:relation (the rest "CPU").
func relPoints(active []int, cpu []float64, waiting float64) []Point {
	pts := make([]Point, len(active))
	for i, a := range active {
		w := int(waiting * float64(a))
		pts[i] = Point{T: float64(i + 1), Active: a, CPUBusy: 60, CPUKnown: true, ServerCPU: cpu[i], ServerCPUKnown: true,
			Waits: map[string]int{"Lock:relation": w, "CPU": a - w}}
	}
	return pts
}

func TestRelativeStormConditions(t *testing.T) {
	flat := []float64{1, 1, 1, 1, 1, 1, 1.1, 1.1, 1.1, 1.1}
	active := []int{5, 5, 5, 5, 5, 5, 12, 12, 13, 12}
	r := DefaultRule()
	r.CPUs = 2
	cases := []struct {
		name  string
		pts   []Point
		fires bool
	}{
		{"pile-up, CPU flat", relPoints(active, flat, 0.9), true},
		{"CPU follows", relPoints(active, []float64{1, 1, 1, 1, 1, 1, 2.5, 2.5, 2.5, 2.5}, 0.9), false},
		{"sessions running", relPoints(active, flat, 0.1), false},
		{"one sample", relPoints([]int{5, 5, 5, 5, 5, 5, 12, 5, 12, 5}, flat, 0.9), false},
		{"too few", relPoints([]int{2, 2, 2, 2, 2, 2, 5, 5, 5, 5}, flat, 0.9), false},
		{"slow", relPoints([]int{5, 6, 7, 8, 9, 10, 11, 12, 13, 14}, flat, 0.9), false},
	}
	for _, c := range cases {
		ev, err := Replay(r, c.pts)
		if err != nil {
			t.Fatal(err)
		}
		if got := len(relativeOnly(ev)) == 1; got != c.fires || len(ev) > 1 {
			t.Errorf("%s: storms %+v, want relative %v", c.name, ev, c.fires)
		}
	}
	ev, _ := Replay(r, relPoints(active, flat, 0.9))
	e := ev[0]
	// Fires at t=9: recent 12, 12, 13 (>= 2 x 5), mean CPU 1.1 vs 1.
	if e.T != 9 || e.From != 5 || e.To != 13 || e.ServerCPUFrom != 1 || e.ServerCPUTo != 1.1 || e.WaitEvent != "Lock:relation" {
		t.Errorf("storm %+v", e)
	}
	// Without the server's CPU (a remote server) the rule is silent.
	pts := relPoints(active, flat, 0.9)
	for i := range pts {
		pts[i].ServerCPUKnown = false
	}
	if ev, _ := Replay(r, pts); len(ev) != 0 {
		t.Errorf("remote server: %+v", ev)
	}
	// It ends when active sessions fall to half the count it fired at.
	pts = relPoints(append(active, 12, 7, 6), append(flat, 1, 1, 1), 0.9)
	if ev, _ := Replay(r, pts); len(ev) != 1 || ev[0].EndT == nil || *ev[0].EndT != 13 || ev[0].Peak != 13 {
		t.Errorf("end: %+v, want ended at t=13 (6 <= 0.5 x 13)", ev)
	}
}

func TestRelativeRuleValidate(t *testing.T) {
	for _, mod := range []func(*Rule){
		func(r *Rule) { r.RelWindow = -time.Second },
		func(r *Rule) { r.RelPoints = 0 },
		func(r *Rule) { r.RelRise = 0 },
		func(r *Rule) { r.RelCPUShare = 1 },
		func(r *Rule) { r.RelCPUFloor = 0 },
		func(r *Rule) { r.RelWaitShare = 0 },
		func(r *Rule) { r.RelMinActive = 0 },
	} {
		r := DefaultRule()
		mod(&r)
		if err := r.Validate(); err == nil || !strings.Contains(err.Error(), "relative") {
			t.Errorf("rule %+v: error %v", r, err)
		}
	}
	off := DefaultRule()
	off.RelWindow, off.RelPoints = 0, 0
	if err := off.Validate(); err != nil {
		t.Errorf("relative rule off: %v", err)
	}
}
