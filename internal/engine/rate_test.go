package engine

import (
	"math"
	"sync/atomic"
	"testing"
	"time"

	"github.com/erplab/erplab/internal/record"
	"github.com/erplab/erplab/internal/workload"
)

// arrivalTimes draws every arrival of a profile before end, in seconds.
func arrivalTimes(stages []RateStage, end time.Duration, seed uint64) []float64 {
	g := newArrivalGen(rateSegments(stages), end.Seconds(), seed)
	var out []float64
	for !math.IsInf(g.at, 1) {
		out = append(out, g.at)
		g.advance()
	}
	return out
}

func countIn(ts []float64, from, to float64) int {
	n := 0
	for _, t := range ts {
		if t >= from && t < to {
			n++
		}
	}
	return n
}

// A constant rate gives a Poisson process: exponential gaps (mean 1/rate,
// coefficient of variation 1) and counts in disjoint windows whose
// variance equals their mean. The seed fixes the sequence; the bands are
// several standard errors wide.
func TestConstantRateIsPoisson(t *testing.T) {
	rate, _ := ConstantRate(1000)
	ts := arrivalTimes(rate, 60*time.Second, 7)
	// 60 000 expected, standard deviation 245.
	if n := len(ts); n < 59000 || n > 61000 {
		t.Fatalf("%d arrivals in 60 s at 1000/s, want 60000 ± 1000", n)
	}
	var sum, sum2 float64
	prev := 0.0
	for _, x := range ts {
		g := x - prev
		if g < 0 {
			t.Fatalf("arrivals out of order at %f", x)
		}
		sum += g
		sum2 += g * g
		prev = x
	}
	n := float64(len(ts))
	mean := sum / n
	cv := math.Sqrt(sum2/n-mean*mean) / mean
	if math.Abs(mean-0.001) > 0.00003 || math.Abs(cv-1) > 0.03 {
		t.Fatalf("gaps: mean %.6f s (want 0.001), CV %.3f (want 1)", mean, cv)
	}
	// Index of dispersion of counts in 600 windows of 100 ms.
	var c, c2 float64
	for i := 0; i < 600; i++ {
		k := float64(countIn(ts, float64(i)*0.1, float64(i+1)*0.1))
		c += k
		c2 += k * k
	}
	m := c / 600
	if d := (c2/600 - m*m) / m; d < 0.8 || d > 1.2 {
		t.Fatalf("window counts: variance/mean %.2f, want about 1 (Poisson)", d)
	}
	again := arrivalTimes(rate, 60*time.Second, 7)
	other := arrivalTimes(rate, 60*time.Second, 8)
	if len(again) != len(ts) || again[100] != ts[100] {
		t.Fatal("the same seed gave another sequence")
	}
	if other[100] == ts[100] {
		t.Fatal("another seed gave the same sequence")
	}
}

// A ramp from 0 to 100/s over 10 s: the rate integral is 500, 125 of it in
// the first half; every second holds about its share.
func TestRampingRateFollowsTheIntegral(t *testing.T) {
	stages := []RateStage{{Duration: 10 * time.Second, Rate: 100}}
	if e := ExpectedArrivals(stages, 10*time.Second); math.Abs(e-500) > 1e-9 {
		t.Fatalf("ExpectedArrivals = %f, want 500", e)
	}
	if r := RateAt(stages, 2500*time.Millisecond); math.Abs(r-25) > 1e-9 {
		t.Fatalf("RateAt(2.5 s) = %f, want 25", r)
	}
	var total, first int
	for seed := uint64(1); seed <= 20; seed++ {
		ts := arrivalTimes(stages, 10*time.Second, seed)
		total += len(ts)
		first += countIn(ts, 0, 5)
		if l := len(ts); l < 400 || l > 600 {
			t.Fatalf("seed %d: %d arrivals, want 500 ± 100", seed, l)
		}
	}
	// 20 runs: 10 000 expected (sd 100), 2 500 in the first halves (sd 50).
	if total < 9600 || total > 10400 || first < 2300 || first > 2700 {
		t.Fatalf("20 runs: %d arrivals (want 10000), %d in the first halves (want 2500)", total, first)
	}
}

// Steps, a pause at rate 0 and a ramp down: no arrival while the rate is
// 0, none after the run length, and the counts of each piece.
func TestRateStepsAndZeroStretches(t *testing.T) {
	stages := []RateStage{
		{Duration: 0, Rate: 200}, {Duration: 2 * time.Second, Rate: 200}, // 400
		{Duration: 0, Rate: 0}, {Duration: time.Second, Rate: 0}, // none
		{Duration: 0, Rate: 200}, {Duration: 2 * time.Second, Rate: 0}, // 200
	}
	ts := arrivalTimes(stages, 6*time.Second, 3)
	if n := countIn(ts, 2, 3); n != 0 {
		t.Fatalf("%d arrivals while the rate was 0", n)
	}
	if n := countIn(ts, 5, 100); n != 0 {
		t.Fatalf("%d arrivals after the ramp down to 0", n)
	}
	if a, b := countIn(ts, 0, 2), countIn(ts, 3, 5); a < 320 || a > 480 || b < 140 || b > 260 {
		t.Fatalf("counts %d and %d, want 400 and 200", a, b)
	}
	if e := ExpectedArrivals(stages, time.Hour); math.Abs(e-600) > 1e-9 {
		t.Fatalf("ExpectedArrivals = %f, want 600", e)
	}
	// The last rate holds to the end of the run; the run length cuts.
	ts = arrivalTimes([]RateStage{{Duration: 0, Rate: 50}}, 2*time.Second, 3)
	if len(ts) < 60 || len(ts) > 140 || ts[len(ts)-1] >= 2 {
		t.Fatalf("constant 50/s for 2 s: %d arrivals, last at %.3f s", len(ts), ts[len(ts)-1])
	}
}

func TestParseRateStage(t *testing.T) {
	s, err := ParseRateStage(" 90s:12.5 ")
	if err != nil || s.Duration != 90*time.Second || s.Rate != 12.5 {
		t.Fatalf("ParseRateStage = %+v, %v", s, err)
	}
	for _, bad := range []string{"60s", "x:1", "-1s:5", "1s:-1", "1s:abc", "1s:Inf", "1s:NaN"} {
		if _, err := ParseRateStage(bad); err == nil {
			t.Errorf("ParseRateStage(%q): no error", bad)
		}
	}
	for _, bad := range []float64{0, -1, math.Inf(1), math.NaN()} {
		if _, err := ConstantRate(bad); err == nil {
			t.Errorf("ConstantRate(%g): no error", bad)
		}
	}
	if err := ValidateRate([]RateStage{{Duration: time.Second, Rate: math.NaN()}}); err == nil {
		t.Error("ValidateRate accepted NaN")
	}
}

// The schedule hands arrivals out in order, counts the due ones not taken
// as backlog, takes handed-back arrivals first, and at the end counts the
// arrivals up to the stop and those never started.
func TestScheduleBacklogAndGiveBack(t *testing.T) {
	start := time.Unix(1000, 0)
	rate, _ := ConstantRate(100)
	s := newSchedule(rate, start, 10*time.Second, 5)
	ts := arrivalTimes(rate, 10*time.Second, 5)
	at := func(sec float64) time.Time { return start.Add(time.Duration(sec * float64(time.Second))) }

	// Nothing taken for 1 s: every arrival of the first second is due.
	dueAt1 := int64(countIn(ts, 0, 1.0000001))
	if cur, peak := s.gauge(at(1)); cur != dueAt1 || peak != dueAt1 {
		t.Fatalf("gauge at 1 s = %d/%d, want %d", cur, peak, dueAt1)
	}
	a, ok := s.take(at(1))
	if !ok || a.off != ts[0] {
		t.Fatalf("take = %v %v, want the first arrival %f", a, ok, ts[0])
	}
	b, _ := s.take(at(1))
	if cur, _ := s.gauge(at(1)); cur != dueAt1-2 {
		t.Fatalf("after two takes: backlog %d, want %d", cur, dueAt1-2)
	}
	s.giveBack(b)
	s.giveBack(a)
	if cur, _ := s.gauge(at(1)); cur != dueAt1 {
		t.Fatalf("after giving both back: backlog %d, want %d", cur, dueAt1)
	}
	if a2, _ := s.take(at(1)); a2.off != a.off {
		t.Fatalf("take after give-back = %f, want the oldest %f", a2.off, a.off)
	}
	if b2, _ := s.take(at(1)); b2.off != b.off {
		t.Fatalf("second take after give-back = %f, want %f", b2.off, b.off)
	}
	// Take everything due by 2 s, then one ahead of time (a worker
	// waiting for it), which a stop hands back.
	for {
		c, _ := s.take(at(2))
		if c.off > 2 {
			s.giveBack(c)
			break
		}
	}
	if cur, _ := s.gauge(at(2)); cur != 0 {
		t.Fatalf("all due taken: backlog %d", cur)
	}
	arrivals, left := s.final(at(2.5))
	if want := int64(countIn(ts, 0, 2.5)); arrivals != want {
		t.Fatalf("final arrivals %d, want %d", arrivals, want)
	}
	if want := int64(countIn(ts, 2, 2.5)); left != want {
		t.Fatalf("final backlog left %d, want %d (due after 2 s, never taken)", left, want)
	}
}

// A worker that takes an arrival ahead of time and is stopped before it
// hands it back; if the run stops before that time it was never due.
func TestScheduleFutureArrivalNotDue(t *testing.T) {
	start := time.Unix(1000, 0)
	rate, _ := ConstantRate(10)
	s := newSchedule(rate, start, 10*time.Second, 1)
	a, ok := s.take(start)
	if !ok || a.off <= 0 || !a.at.After(start) {
		t.Fatalf("take at the start: %+v %v", a, ok)
	}
	if cur, _ := s.gauge(start); cur != 0 {
		t.Fatalf("backlog %d with nothing due", cur)
	}
	s.giveBack(a)
	if arrivals, left := s.final(start); arrivals != 0 || left != 0 {
		t.Fatalf("final at the start: %d arrivals, %d left; want 0, 0", arrivals, left)
	}
	// No arrival at or after the run length.
	s = newSchedule(rate, start, time.Second, 1)
	n := 0
	for {
		a, ok := s.take(start.Add(time.Hour))
		if !ok {
			break
		}
		if a.off >= 1 {
			t.Fatalf("arrival at %f s after a 1 s run", a.off)
		}
		n++
	}
	if arrivals, left := s.final(start.Add(time.Hour)); arrivals != int64(n) || left != 0 {
		t.Fatalf("final: %d arrivals (want %d), %d left", arrivals, n, left)
	}
}

// BenchmarkScheduleTake is the open model's arrival hand-off: one take
// from the shared, mutex-protected schedule (1 million arrivals per
// second), with a backlog (the clock runs 10 ms ahead of the arrivals
// taken, about 10 000 due: the due cursor steps too) and with none (every
// arrival lies ahead of the clock), serial and from all CPUs.
func BenchmarkScheduleTake(b *testing.B) {
	start := time.Unix(1000, 0)
	rate, _ := ConstantRate(1e6)
	for _, c := range []struct {
		name string
		lead time.Duration
	}{{"backlog", 10 * time.Millisecond}, {"ahead", -10 * time.Millisecond}} {
		// The clock of the i-th take: the i-th arrival is due at about
		// i µs, so the taker stays lead behind it.
		clock := func(i int64) time.Time { return start.Add(time.Duration(i)*time.Microsecond + c.lead) }
		b.Run(c.name+"/serial", func(b *testing.B) {
			s := newSchedule(rate, start, 1000*time.Hour, 1)
			for i := 0; i < b.N; i++ {
				s.take(clock(int64(i)))
			}
		})
		b.Run(c.name+"/parallel", func(b *testing.B) {
			s := newSchedule(rate, start, 1000*time.Hour, 1)
			var n atomic.Int64
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					s.take(clock(n.Add(1)))
				}
			})
		})
	}
}

// A lazy schedule (Config.RateFromFirstArrival) starts at its first take:
// nothing is due before it, the first arrival lies after it, and the
// run's end does not move.
func TestScheduleStartsAtFirstTake(t *testing.T) {
	start := time.Unix(1000, 0)
	rate, _ := ConstantRate(100)
	s := newSchedule(rate, start, 10*time.Second, 5)
	s.lazy = true
	late := start.Add(3 * time.Second)
	if cur, _ := s.gauge(late); cur != 0 {
		t.Fatalf("backlog %d before the first take", cur)
	}
	a, ok := s.take(late)
	ts := arrivalTimes(rate, 10*time.Second, 5)
	if !ok || !a.at.After(late) || a.at.Sub(late).Seconds()-ts[0] > 1e-6 || ts[0]-a.at.Sub(late).Seconds() > 1e-6 {
		t.Fatalf("first arrival %v (%+v), want %f s after the first take at %v", a.at, a, ts[0], late)
	}
	last := a
	for {
		b, ok := s.take(late.Add(time.Hour))
		if !ok {
			break
		}
		last = b
	}
	if end := start.Add(10 * time.Second); !last.at.Before(end) {
		t.Fatalf("an arrival at %v, after the run's end %v", last.at, end)
	}
}

// A skipped arrival costs no allocation: taking it from the schedule,
// counting it in the recorder and handing it to Config.OnSkip (by value).
func TestSkipAllocations(t *testing.T) {
	start := time.Now()
	rate, _ := ConstantRate(1e6)
	rec := record.New([]record.OpInfo{{Name: "op", Target: time.Second}}, start, 0, time.Second)
	var n atomic.Int64
	var last Skip
	e := &openModel{run: &run{rec: rec, cfg: Config{OnSkip: func(s Skip) { n.Add(1); last = s }}},
		sched: newSchedule(rate, start, time.Hour, 1)}
	vu := &workload.VU{ID: 3}
	now := start.Add(time.Second) // a second behind: every arrival taken is late
	step := func() {
		a, ok := e.sched.take(now)
		if !ok {
			t.Fatal("no arrival")
		}
		e.skip(vu, 0, a.at, now)
	}
	step()
	if allocs := testing.AllocsPerRun(10000, step); allocs != 0 {
		t.Fatalf("%.2f allocations per skipped arrival, want 0", allocs)
	}
	if n.Load() != 10002 || last.VU != 3 || last.Op != 0 || !last.At.Equal(now) || !last.Scheduled.After(start) || !last.Scheduled.Before(now) {
		t.Fatalf("OnSkip saw %d skips, the last %+v", n.Load(), last)
	}
	if got := rec.Results(time.Minute)[0].Skipped; got != 10002 {
		t.Fatalf("recorder counted %d skipped, want 10002", got)
	}
}
