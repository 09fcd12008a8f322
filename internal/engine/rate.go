package engine

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"time"
)

// RateStage is one step of the open model's arrival-rate profile
// (Config.Rate): over Duration the arrival rate moves linearly from the
// previous stage's rate (0 before the first stage) to Rate, in arrivals
// per second; a Duration of 0 is a step. After the last stage its rate
// holds until the run ends. The same notion as the stages of k6's
// ramping-arrival-rate executor.
type RateStage struct {
	Duration time.Duration
	Rate     float64
}

// ParseRateStage parses "DURATION:RATE", RATE in arrivals per second,
// e.g. "60s:100", "30s:0.5" or "0s:200" (a step). Errors name the
// offending text.
func ParseRateStage(s string) (RateStage, error) {
	d, r, ok := strings.Cut(strings.TrimSpace(s), ":")
	if !ok {
		return RateStage{}, fmt.Errorf("rate stage %q: want DURATION:RATE (arrivals per second), e.g. 60s:100", s)
	}
	dur, err := time.ParseDuration(d)
	if err != nil {
		return RateStage{}, fmt.Errorf("rate stage %q: bad duration %q (e.g. 30s, 5m, 1h)", s, d)
	}
	if dur < 0 {
		return RateStage{}, fmt.Errorf("rate stage %q: duration must not be negative", s)
	}
	rate, err := strconv.ParseFloat(strings.TrimSpace(r), 64)
	if err != nil || rate < 0 || math.IsInf(rate, 0) || math.IsNaN(rate) {
		return RateStage{}, fmt.Errorf("rate stage %q: rate must be a number of arrivals per second >= 0, got %q", s, r)
	}
	return RateStage{Duration: dur, Rate: rate}, nil
}

// ConstantRate is the profile of a constant --rate R (like pgbench -R):
// one step to rate arrivals per second at the start, held for the whole
// run. It returns an error when rate is not a finite number > 0.
func ConstantRate(rate float64) ([]RateStage, error) {
	if !(rate > 0) || math.IsInf(rate, 0) {
		return nil, fmt.Errorf("--rate must be a number of arrivals per second > 0, got %g", rate)
	}
	return []RateStage{{Duration: 0, Rate: rate}}, nil
}

// ValidateRate checks a rate profile: durations >= 0, rates finite and
// >= 0. It returns the first problem found.
func ValidateRate(stages []RateStage) error {
	for i, s := range stages {
		if s.Duration < 0 {
			return fmt.Errorf("rate stage %d: duration %s is negative", i+1, s.Duration)
		}
		if !(s.Rate >= 0) || math.IsInf(s.Rate, 0) {
			return fmt.Errorf("rate stage %d: rate %g is not a number of arrivals per second >= 0", i+1, s.Rate)
		}
	}
	return nil
}

// TotalRateDuration sums the rate stages' durations (after it the last
// stage's rate holds).
func TotalRateDuration(stages []RateStage) time.Duration {
	var d time.Duration
	for _, s := range stages {
		d += s.Duration
	}
	return d
}

// RateAt returns the arrival rate, per second, that the profile asks for
// at elapsed time t (linear within a stage; the last rate after the end).
func RateAt(stages []RateStage, t time.Duration) float64 {
	x := t.Seconds()
	for _, s := range rateSegments(stages) {
		if x < s.to {
			return max(s.r0+s.k*(x-s.from), 0)
		}
	}
	return 0
}

// ExpectedArrivals is the integral of the rate profile over [0, d): the
// mean number of arrivals of the Poisson process in the first d of the
// run (its variance is the same number).
func ExpectedArrivals(stages []RateStage, d time.Duration) float64 {
	x := d.Seconds()
	total := 0.0
	for _, s := range rateSegments(stages) {
		if x <= s.from {
			break
		}
		span := min(x, s.to) - s.from
		total += s.r0*span + 0.5*s.k*span*span
	}
	return total
}

// rateSeg is one piece of a rate profile: from `from` to `to` (seconds
// since the start; the last piece ends at +Inf) the rate is
// r0 + k*(t-from) arrivals per second.
type rateSeg struct {
	from, to float64
	r0, k    float64
}

// rateSegments turns stages into pieces of non-zero length, starting at 0
// from rate 0 and ending with the last rate held to +Inf.
func rateSegments(stages []RateStage) []rateSeg {
	var out []rateSeg
	t, prev := 0.0, 0.0
	for _, s := range stages {
		if d := s.Duration.Seconds(); d > 0 {
			out = append(out, rateSeg{from: t, to: t + d, r0: prev, k: (s.Rate - prev) / d})
			t += d
		}
		prev = s.Rate
	}
	return append(out, rateSeg{from: t, to: math.Inf(1), r0: prev})
}

// arrivalGen generates the arrival times of a Poisson process whose rate
// follows a rate profile, by time rescaling: each inter-arrival draws
// E ~ Exp(1) and moves to the time where the integral of the rate since
// the previous arrival reaches E (exact for the piecewise linear rate;
// with a constant rate it is the usual exponential inter-arrival time).
// It is a plain value: copying it forks an identical sequence, which the
// schedule uses to count due arrivals ahead of the hand-out without
// storing them.
type arrivalGen struct {
	src  rand.PCG
	segs []rateSeg // shared, read-only
	seg  int
	end  float64 // arrivals at or after end (s) are not generated
	at   float64 // the current arrival (s since start); +Inf when none is left
}

func newArrivalGen(segs []rateSeg, end float64, seed uint64) arrivalGen {
	g := arrivalGen{src: *rand.NewPCG(seed, arrivalStream), segs: segs, end: end}
	g.advance()
	return g
}

// arrivalStream is the second PCG seed word of the arrival schedule; the
// VUs' random sources use (Config.Seed, VU id), so this one is apart.
const arrivalStream = 0x6172726976616c73 // "arrivals"

// advance moves at to the next arrival.
func (g *arrivalGen) advance() {
	// E ~ Exp(1) by the ziggurat method of math/rand/v2 (Marsaglia and
	// Tsang 2000), drawn from g.src itself so that a copy of g forks the
	// sequence; about half the cost of inverting a uniform with math.Log,
	// which was a third of a skipped arrival's cost under an impossible
	// rate (BenchmarkSkipPath).
	e := rand.New(&g.src).ExpFloat64()
	t := g.at
	for {
		s := &g.segs[g.seg]
		ra := max(s.r0+s.k*(t-s.from), 0)
		if math.IsInf(s.to, 1) {
			if ra <= 0 {
				t = math.Inf(1)
			} else {
				t += e / ra
			}
			break
		}
		span := s.to - t
		if area := ra*span + 0.5*s.k*span*span; e > area {
			e -= area
			t = s.to
			g.seg++
			continue
		}
		// Solve ra*x + k/2*x^2 = e for x in the stable form.
		disc := max(ra*ra+2*s.k*e, 0)
		if den := ra + math.Sqrt(disc); den > 0 {
			t = min(t+2*e/den, s.to)
		} else {
			t = s.to
		}
		break
	}
	if t >= g.end {
		t = math.Inf(1)
	}
	g.at = t
}

// arrival is one scheduled start handed to a worker.
type arrival struct {
	off float64   // seconds since the start of the run
	at  time.Time // the same as a time
}

// schedule is the open model's shared arrival schedule: a mutex-protected
// generator from which each free worker takes the next arrival, in order.
// Memory is constant: arrivals are generated when taken, and the backlog
// (arrivals due, not yet taken) is counted by a second copy of the
// generator that runs ahead to the present (each arrival is stepped over
// once more, amortised; a worker's catch-up, takeLate, hands out the late
// arrivals first and moves the due cursor by a copy, so that they are drawn
// once). Arrivals that a stopped worker held are handed back (at most one
// per worker) and handed out again first.
type schedule struct {
	start time.Time
	end   float64 // run length, s: no arrival is scheduled at or after it

	mu    sync.Mutex
	next  arrivalGen // next.at is the next arrival to hand out
	taken int64      // arrivals handed out by next
	due   arrivalGen // arrivals before due.at are counted in dueN
	dueN  int64      // arrivals generated up to the due cursor
	back  []float64  // handed back, ascending
	peak  int64      // largest backlog since the last gauge
	// lazy: the schedule starts at the first take (begun), not at start
	lazy, begun bool
}

func newSchedule(stages []RateStage, start time.Time, runLength time.Duration, seed uint64) *schedule {
	g := newArrivalGen(rateSegments(stages), runLength.Seconds(), seed)
	return &schedule{start: start, end: runLength.Seconds(), next: g, due: g}
}

func (s *schedule) offset(t time.Time) float64 { return t.Sub(s.start).Seconds() }

// begin, for a lazy schedule, moves its start to now at the first take
// (the arrivals keep their spacing; the run's end stays where it was).
// s.mu is held.
func (s *schedule) begin(now time.Time) {
	if !s.lazy || s.begun {
		return
	}
	s.begun = true
	shift := now.Sub(s.start).Seconds()
	if shift <= 0 {
		return
	}
	s.start = now
	s.end = max(s.end-shift, 0)
	s.next.end, s.due.end = s.end, s.end
	if s.next.at >= s.end {
		s.next.at, s.due.at = math.Inf(1), math.Inf(1)
	}
}

// idle reports whether a lazy schedule has not begun: nothing is due.
func (s *schedule) idle() bool { return s.lazy && !s.begun }

// backlogLocked advances the due cursor to n (s since start) and returns
// the arrivals due by n and not handed out (or handed back).
func (s *schedule) backlogLocked(n float64) int64 {
	for s.due.at <= n {
		s.dueN++
		s.due.advance()
	}
	b := max(s.dueN-s.taken, 0)
	for _, off := range s.back {
		if off <= n {
			b++
		}
	}
	return b
}

// take hands out the next arrival at time now (it may lie in the future:
// the worker then waits for it); false when no arrival is left before the
// end of the run.
func (s *schedule) take(now time.Time) (arrival, bool) {
	s.mu.Lock()
	s.begin(now)
	n := s.offset(now)
	var off float64
	switch {
	case len(s.back) > 0:
		off = s.back[0]
		s.back = s.back[:copy(s.back, s.back[1:])]
	case !math.IsInf(s.next.at, 1):
		off = s.next.at
		s.taken++
		s.next.advance()
		if s.next.at > n {
			// Everything due has been handed out: the due cursor
			// catches up by a copy instead of stepping.
			s.due, s.dueN = s.next, s.taken
		}
	default:
		s.mu.Unlock()
		return arrival{}, false
	}
	if b := s.backlogLocked(n); b > s.peak {
		s.peak = b
	}
	s.mu.Unlock()
	return arrival{off: off, at: s.start.Add(time.Duration(off * float64(time.Second)))}, true
}

// takeLate hands out, under one lock, the next arrivals that are already
// later than limit at now (now - scheduled > limit: skipped, whoever took
// them), in order and at most len(out), into out as offsets (seconds since
// the returned start of the schedule); it returns how many and that start.
// Fewer than len(out) means the catch-up judged by now is over: the next
// arrival is within the limit or ahead (or none is left), and the backlog
// peak is updated with the backlog the catch-up started from, before
// arrivals the caller took earlier in it by the same now. The arrivals are
// drawn once: the due cursor follows the hand-out by a copy instead of
// stepping over them again. Offsets rather than times: a time.Time.Add per
// arrival was a fifth of a skip's cost, and most skips need no time.
func (s *schedule) takeLate(now time.Time, limit time.Duration, out []float64, before int64) (int, time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.begin(now)
	nowOff := s.offset(now)
	// late: off < nowOff - limit, in the float seconds the arrivals are
	// drawn in (the same as now.Sub(at) > limit up to a nanosecond)
	cut := nowOff - limit.Seconds()
	k := 0
next:
	for k < len(out) {
		var off float64
		back := len(s.back) > 0
		switch {
		case back:
			off = s.back[0]
		case !math.IsInf(s.next.at, 1):
			off = s.next.at
		default:
			break next // none left: the catch-up is over
		}
		if off >= cut {
			break
		}
		if back {
			s.back = s.back[:copy(s.back, s.back[1:])]
		} else {
			s.taken++
			s.next.advance()
		}
		out[k] = off
		k++
	}
	if s.dueN <= s.taken {
		s.due, s.dueN = s.next, s.taken
	}
	if k < len(out) {
		if b := s.backlogLocked(nowOff); before+int64(k) > 0 && b+before+int64(k)-1 > s.peak {
			// take's peak: the backlog after the catch-up's first take
			s.peak = b + before + int64(k) - 1
		}
	}
	return k, s.start
}

// giveBack returns an arrival a stopped worker held without starting it.
func (s *schedule) giveBack(a arrival) {
	s.mu.Lock()
	i := len(s.back)
	for i > 0 && s.back[i-1] > a.off {
		i--
	}
	s.back = append(s.back, 0)
	copy(s.back[i+1:], s.back[i:])
	s.back[i] = a.off
	s.mu.Unlock()
}

// gauge returns the backlog at now and the largest backlog seen since the
// last call.
func (s *schedule) gauge(now time.Time) (current, peak int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.idle() {
		return 0, 0
	}
	n := min(s.offset(now), s.end)
	current = s.backlogLocked(n)
	peak = max(s.peak, current)
	s.peak = current
	return current, peak
}

// final counts, once every worker has exited, the arrivals scheduled up
// to stopAt (capped at the run length) and those of them never started.
func (s *schedule) final(stopAt time.Time) (arrivals, left int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.idle() {
		return 0, 0
	}
	n := min(s.offset(stopAt), s.end)
	left = s.backlogLocked(n)
	arrivals = s.dueN
	// The due cursor may have been copied ahead of n; what lies ahead was
	// handed out and, the workers being gone, handed back.
	for _, off := range s.back {
		if off > n {
			arrivals--
		}
	}
	return arrivals, left
}
