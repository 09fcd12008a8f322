package capacity

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// Growth is how the search grows the load from one step to the next:
// geometric (Factor > 1, "x2") or arithmetic (Add > 0, "+10").
type Growth struct {
	Factor float64 `json:"factor,omitempty"`
	Add    float64 `json:"add,omitempty"`
}

// ParseGrowth parses "x2" (or "*2", factor > 1) and "+N" (N > 0).
// Errors: any other form, a step that does not grow.
func ParseGrowth(s string) (Growth, error) {
	s = strings.TrimSpace(s)
	if rest, ok := strings.CutPrefix(s, "+"); ok {
		n, err := strconv.ParseFloat(rest, 64)
		if err != nil || !(n > 0) || math.IsInf(n, 0) {
			return Growth{}, fmt.Errorf("--step %q: +N needs N > 0 (the step must grow the load)", s)
		}
		return Growth{Add: n}, nil
	}
	rest, ok := strings.CutPrefix(s, "x")
	if !ok {
		rest, ok = strings.CutPrefix(s, "*")
	}
	if !ok {
		return Growth{}, fmt.Errorf("--step %q: want xF (geometric, F > 1, e.g. x2) or +N (e.g. +10)", s)
	}
	f, err := strconv.ParseFloat(rest, 64)
	if err != nil || !(f > 1) || math.IsInf(f, 0) {
		return Growth{}, fmt.Errorf("--step %q: xF needs a factor F > 1, e.g. x2 or x1.5 (the step must grow the load)", s)
	}
	return Growth{Factor: f}, nil
}

// String is the form ParseGrowth reads.
func (g Growth) String() string {
	if g.Add > 0 {
		return "+" + strconv.FormatFloat(g.Add, 'g', -1, 64)
	}
	return "x" + strconv.FormatFloat(g.Factor, 'g', -1, 64)
}

// next is the load after n: n·Factor or n+Add, rounded up to a whole
// number when integer, and always more than n.
func (g Growth) next(n float64, integer bool) float64 {
	v := n + g.Add
	if g.Factor > 0 {
		v = n * g.Factor
	}
	if integer {
		v = math.Max(math.Ceil(v-1e-9), n+1)
	}
	return v
}

// Plan is the search: loads from Start grown by Step up to Max, then a
// bisection between the last good and the first bad load until they are
// within Resolution of each other (relative to the last good load; for
// whole users also when they are 1 apart). Integer is true for users
// (closed model), false for arrival rates (open model, per second).
// Repeats is how many times a step whose APDEX interval straddles the
// target is run again (default 1).
type Plan struct {
	Start, Max float64
	Step       Growth
	Resolution float64
	Integer    bool
	Repeats    int
}

// Validate checks the plan. Errors, one line each: a start <= 0, a
// start above Max, a step that does not grow, a resolution outside
// (0, 1).
func (p Plan) Validate() error {
	switch {
	case !(p.Start > 0):
		return fmt.Errorf("--start must be > 0, got %g", p.Start)
	case p.Start > p.Max:
		return fmt.Errorf("--start %g is above --max-users %g", p.Start, p.Max)
	case !(p.Step.Factor > 1) && !(p.Step.Add > 0):
		return fmt.Errorf("--step %s does not grow the load", p.Step)
	case !(p.Resolution > 0 && p.Resolution < 1):
		return fmt.Errorf("--resolution must be in (0 %%, 100 %%), got %g %%", 100*p.Resolution)
	case p.Repeats < 0:
		return fmt.Errorf("repeats must be >= 0, got %d", p.Repeats)
	}
	return nil
}

// Search is the state of a capacity search over judged steps. It is
// pure: the caller runs the load Next asks for, judges it and gives the
// Judgement to Record. Not safe for concurrent use.
type Search struct {
	plan Plan
	// lastGood is the highest load judged good (0: none yet); firstBad
	// the lowest judged bad (0: none yet).
	lastGood, firstBad float64
	// current is the load being judged; attempts its judgements so far.
	current  float64
	attempts []Judgement
	// stop is set when the search is over (a hard stop or converged).
	stop Stop
	done bool
}

// Stop says why a search ended.
type Stop struct {
	// Kind is one of the Stop* constants.
	Kind string `json:"kind"`
	// Detail is the human reason, e.g. "APDEX 0.74 < 0.85 at 64 users".
	Detail string `json:"detail,omitempty"`
}

// Why a search ended.
const (
	StopConverged  = "converged"           // last good and first bad within the resolution
	StopMaxReached = "max reached"         // --max-users was good: the capacity is at least that
	StopGenerator  = "generator saturated" // erplab itself saturated: not the server's capacity
	StopServer     = "server failed"       // the server failed during the search
	StopDiskFull   = "disk full"           // a step could not write: a disk is full
	StopNoGood     = "none good"           // even the lowest load was bad
	StopCancelled  = "interrupted"         // Ctrl-C
)

// NewSearch starts a search of a valid plan (Plan.Validate).
func NewSearch(p Plan) *Search {
	if p.Repeats == 0 {
		p.Repeats = 1
	}
	return &Search{plan: p, current: p.Start}
}

// Next is the load to run next, and false when the search is over.
func (s *Search) Next() (float64, bool) {
	if s.done {
		return 0, false
	}
	return s.current, true
}

// Record gives the judgement of the load Next returned and moves the
// search on: a straddling judgement is repeated (Plan.Repeats), a hard
// stop (generator saturated, server failed) ends the search, a good
// load grows (or bisects upwards), a bad one bisects downwards.
func (s *Search) Record(j Judgement) {
	if s.done {
		return
	}
	s.attempts = append(s.attempts, j)
	switch j.Outcome {
	case OutcomeGenerator:
		s.finish(Stop{StopGenerator, j.Detail})
		return
	case OutcomeServer:
		s.finish(Stop{StopServer, j.Detail})
		return
	case OutcomeDiskFull:
		s.finish(Stop{StopDiskFull, j.Detail})
		return
	}
	if j.Straddles && len(s.attempts) <= s.plan.Repeats {
		return // run the same load again
	}
	good := pooledGood(s.attempts)
	n := s.current
	s.attempts = nil
	if good {
		s.lastGood = n
	} else {
		s.firstBad = n
	}
	if s.firstBad == 0 {
		// Still growing.
		if n >= s.plan.Max {
			s.finish(Stop{StopMaxReached, fmt.Sprintf("good at the maximum %g", s.plan.Max)})
			return
		}
		s.current = math.Min(s.plan.Step.next(n, s.plan.Integer), s.plan.Max)
		return
	}
	if s.converged() {
		if s.lastGood == 0 {
			s.finish(Stop{StopNoGood, fmt.Sprintf("bad already at %g", s.firstBad)})
			return
		}
		s.finish(Stop{StopConverged, fmt.Sprintf("between %g and %g", s.lastGood, s.firstBad)})
		return
	}
	mid := (s.lastGood + s.firstBad) / 2
	if s.plan.Integer {
		mid = math.Round(mid)
	}
	s.current = mid
}

// converged reports whether the last good and first bad loads are close
// enough to stop bisecting.
func (s *Search) converged() bool {
	gap := s.firstBad - s.lastGood
	if s.plan.Integer && gap <= 1 {
		return true
	}
	if s.lastGood == 0 {
		// Nothing good yet: go down to the smallest load.
		if s.plan.Integer {
			return s.firstBad <= 1
		}
		return s.firstBad <= s.plan.Start*s.plan.Resolution
	}
	return gap <= s.plan.Resolution*s.lastGood
}

// Cancel ends the search (Ctrl-C): the capacity known so far stands.
func (s *Search) Cancel(detail string) { s.finish(Stop{StopCancelled, detail}) }

func (s *Search) finish(st Stop) {
	s.stop, s.done = st, true
}

// Capacity is the highest load judged good so far (0: none), the lowest
// judged bad (0: none), and why the search stopped (Kind "" while it
// goes on).
func (s *Search) Capacity() (lastGood, firstBad float64, stop Stop) {
	return s.lastGood, s.firstBad, s.stop
}

// pooledGood decides a load from its attempts: good when the mean APDEX
// of the attempts reaches the target, each limited operation's mean p95
// is within its limit, and no attempt has a hard reason (errors,
// refused connections).
func pooledGood(js []Judgement) bool {
	var sum float64
	p95, count := map[string]float64{}, map[string]float64{}
	for _, j := range js {
		if j.Outcome == OutcomeBad && !j.softOnly {
			return false
		}
		sum += j.Apdex.Value
		for op, v := range j.p95 {
			p95[op] += v
			count[op]++
		}
	}
	for op, v := range p95 {
		if v/count[op] > js[len(js)-1].p95Limit[op] {
			return false
		}
	}
	return sum/float64(len(js)) >= js[0].target
}
