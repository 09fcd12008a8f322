package capacity

import (
	"math"
	"reflect"
	"strings"
	"testing"

	"github.com/erplab/erplab/internal/compare"
)

// judged is a judgement with the given outcome and APDEX against target
// 0.85 (straddling when lo < 0.85 < hi).
func judged(o Outcome, v, lo, hi float64) Judgement {
	j := Judgement{Outcome: o, Apdex: compare.Interval{Value: v, Lo: lo, Hi: hi}, target: 0.85}
	j.softOnly = o == OutcomeBad
	j.Straddles = j.Apdex.Straddles(0.85)
	return j
}

// simulate runs a search against a server whose capacity is cap users
// (APDEX 0.95 at or below, 0.6 above) and returns the loads tried.
func simulate(p Plan, capUsers float64) ([]float64, *Search) {
	s := NewSearch(p)
	var loads []float64
	for n := 0; n < 100; n++ {
		load, ok := s.Next()
		if !ok {
			break
		}
		loads = append(loads, load)
		if load <= capUsers {
			s.Record(judged(OutcomeGood, 0.95, 0.93, 0.97))
		} else {
			s.Record(judged(OutcomeBad, 0.6, 0.55, 0.65))
		}
	}
	return loads, s
}

func TestSearchGeometricThenBisect(t *testing.T) {
	p := Plan{Start: 10, Max: 1000, Step: Growth{Factor: 2}, Resolution: 0.05, Integer: true}
	loads, s := simulate(p, 46)
	// 45 good and 47 bad are within 5 % of 45: no need to try 46.
	want := []float64{10, 20, 40, 80, 60, 50, 45, 48, 47}
	if !reflect.DeepEqual(loads, want) {
		t.Fatalf("loads %v, want %v", loads, want)
	}
	good, bad, stop := s.Capacity()
	if good != 45 || bad != 47 || stop.Kind != StopConverged {
		t.Fatalf("capacity %g, first bad %g, stop %+v", good, bad, stop)
	}
}

func TestSearchResolutionStopsEarly(t *testing.T) {
	// 20 % resolution: stop once within 20 % of the last good load.
	p := Plan{Start: 10, Max: 1000, Step: Growth{Factor: 2}, Resolution: 0.2, Integer: true}
	loads, s := simulate(p, 46)
	good, bad, _ := s.Capacity()
	if !(bad-good <= 0.2*good) || good > 46 || bad <= 46 {
		t.Fatalf("loads %v: good %g, bad %g", loads, good, bad)
	}
	if len(loads) >= 10 {
		t.Fatalf("a coarser resolution should take fewer steps than 10: %v", loads)
	}
}

func TestSearchArithmeticAndMax(t *testing.T) {
	p := Plan{Start: 5, Max: 22, Step: Growth{Add: 10}, Resolution: 0.05, Integer: true}
	loads, s := simulate(p, 100)
	if want := []float64{5, 15, 22}; !reflect.DeepEqual(loads, want) {
		t.Fatalf("loads %v, want %v (the maximum is always tried)", loads, want)
	}
	if good, _, stop := s.Capacity(); good != 22 || stop.Kind != StopMaxReached {
		t.Fatalf("good %g stop %+v", good, stop)
	}
}

func TestSearchBadFromTheStart(t *testing.T) {
	p := Plan{Start: 8, Max: 100, Step: Growth{Factor: 2}, Resolution: 0.05, Integer: true}
	loads, s := simulate(p, 2)
	good, bad, stop := s.Capacity()
	if good != 2 || bad != 3 || stop.Kind != StopConverged {
		t.Fatalf("loads %v: good %g bad %g stop %+v", loads, good, bad, stop)
	}
	loads, s = simulate(p, 0)
	if good, _, stop := s.Capacity(); good != 0 || stop.Kind != StopNoGood || loads[len(loads)-1] != 1 {
		t.Fatalf("loads %v: good %g stop %+v", loads, good, stop)
	}
}

func TestSearchOpenModelIsContinuous(t *testing.T) {
	p := Plan{Start: 50, Max: 1000, Step: Growth{Factor: 2}, Resolution: 0.05}
	loads, s := simulate(p, 333)
	good, bad, stop := s.Capacity()
	if stop.Kind != StopConverged || !(good <= 333 && bad > 333 && bad-good <= 0.05*good) {
		t.Fatalf("loads %v: good %g bad %g stop %+v", loads, good, bad, stop)
	}
	fractional := false
	for _, l := range loads {
		fractional = fractional || l != math.Trunc(l)
	}
	if !fractional {
		t.Fatalf("loads %v: an arrival rate is not rounded to whole numbers", loads)
	}
}

func TestSearchRepeatsStraddlingStep(t *testing.T) {
	p := Plan{Start: 10, Max: 20, Step: Growth{Factor: 2}, Resolution: 0.05, Integer: true}
	s := NewSearch(p)
	s.Record(judged(OutcomeGood, 0.95, 0.93, 0.97)) // 10
	// 20: APDEX 0.84 [0.80-0.88] straddles 0.85: run again.
	s.Record(judged(OutcomeBad, 0.84, 0.80, 0.88))
	if n, ok := s.Next(); !ok || n != 20 {
		t.Fatalf("next %g %v, want 20 again", n, ok)
	}
	// The second attempt 0.88: mean 0.86 >= 0.85: good.
	s.Record(judged(OutcomeGood, 0.88, 0.84, 0.92))
	good, _, stop := s.Capacity()
	if good != 20 || stop.Kind != StopMaxReached {
		t.Fatalf("good %g stop %+v", good, stop)
	}
}

func TestSearchHardStops(t *testing.T) {
	p := Plan{Start: 10, Max: 100, Step: Growth{Factor: 2}, Resolution: 0.05, Integer: true}
	s := NewSearch(p)
	s.Record(judged(OutcomeGood, 0.95, 0.93, 0.97))
	s.Record(Judgement{Outcome: OutcomeGenerator, Detail: "load generator saturated: erplab used 1.95 of its 2 cores"})
	if _, ok := s.Next(); ok {
		t.Fatal("the search goes on after the generator saturated")
	}
	good, bad, stop := s.Capacity()
	if good != 10 || bad != 0 || stop.Kind != StopGenerator {
		t.Fatalf("good %g bad %g stop %+v: the saturated step must not count as the server's", good, bad, stop)
	}
	s = NewSearch(p)
	s.Record(Judgement{Outcome: OutcomeServer, Detail: "aborted"})
	if _, _, stop := s.Capacity(); stop.Kind != StopServer {
		t.Fatalf("stop %+v", stop)
	}
}

func TestParseGrowthAndPlan(t *testing.T) {
	for in, want := range map[string]Growth{"x2": {Factor: 2}, "*1.5": {Factor: 1.5}, "+10": {Add: 10}} {
		g, err := ParseGrowth(in)
		if err != nil || g != want {
			t.Errorf("%s: %+v %v", in, g, err)
		}
	}
	for _, bad := range []string{"x1", "x0.5", "+0", "+-3", "2", "", "xabc"} {
		if _, err := ParseGrowth(bad); err == nil || strings.Contains(err.Error(), "\n") {
			t.Errorf("%q: err %v, want one line", bad, err)
		}
	}
	if err := (Plan{Start: 20, Max: 10, Step: Growth{Factor: 2}, Resolution: 0.05}).Validate(); err == nil || !strings.Contains(err.Error(), "above --max-users") {
		t.Errorf("start above max: %v", err)
	}
	if err := (Target{Apdex: 1.2}).Validate(); err == nil {
		t.Error("apdex 1.2 accepted")
	}
	if err := (Target{Apdex: 0}).Validate(); err == nil {
		t.Error("apdex 0 accepted")
	}
	if err := (Target{Apdex: 1}).Validate(); err != nil {
		t.Errorf("apdex 1: %v", err)
	}
}

func TestThinkForPace(t *testing.T) {
	th, err := ThinkForPace(120)
	if err != nil || th.String() != "exp:30s" {
		t.Fatalf("%v %v", th, err)
	}
	if _, err := ThinkForPace(0); err == nil {
		t.Fatal("0 accepted")
	}
	if KnownCapacity(4, 50e6, 150e6, 100e6) != 20 {
		t.Fatal("known capacity")
	}
}
