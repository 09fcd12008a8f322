// Package storm detects session storms: active sessions rising by a large
// factor within seconds while the host CPU is not saturated, the symptom of
// the field reports in docs (CONTEXT.md, section 1 and 3): active sessions
// jumped from tens to thousands in seconds, all waiting on
// LWLock:LockManager, with the database CPU at 30-40 %. A queue that grows
// while the CPU is idle means sessions wait on each other (a lock, the
// shared invalidation queue, I/O), not on the processor.
//
// Three rules look at the series (Rule has their exact statements):
//   - the rise rule: active sessions up by Factor within Window while the
//     host CPU stays below CPUSaturated (any server, the host CPU unknown
//     for a remote one);
//   - the relative rule: active sessions at least doubled over the last
//     seconds while the server's own CPU use (CPU seconds per second of
//     the postmaster's process tree) did not rise by a comparable share,
//     the added sessions waiting on locks or I/O (a local server, whose
//     processes are visible); the field's signature on any size of box,
//     since it needs no idle CPU: on 2 cores saturated by other work it
//     still fires, and a rise that is CPU work (the server's CPU follows,
//     or the added sessions are running, not waiting) does not;
//   - the crowd rule: a queue of several sessions per CPU, a share of them
//     waiting on locks, saturated CPU or not (the CPU count known).
//
// The rules are pure arithmetic over a time series of points (one per
// sampling tick, see package sampler); the detector keeps only the points
// of its windows. Package sampler builds the points for run and doctor,
// package top for the live view, both with Rule's defaults and the host's
// CPU count, so the three commands flag the same storms.
package storm

import (
	"fmt"
	"math"
	"sort"
	"strings"
	"time"
)

// Rule holds the thresholds of storm detection. DefaultRule gives the
// values erplab uses; every field is a parameter.
//
// A storm fires at a point p when all of these hold:
//   - p.Active >= MinActive;
//   - some earlier point b with p.T - b.T <= Window seconds has
//     p.Active >= Factor * max(b.Active, 1) (b is the point of the window
//     with the fewest active sessions, the latest of equals: the baseline);
//   - the host CPU busy share stayed below CPUSaturated % at every point
//     from b to p whose CPU is known (a saturated CPU explains a queue by
//     itself: that is overload, not a storm). When no point has a known
//     CPU (a remote server), the CPU condition is not checked and the
//     message says "CPU n/a".
//
// A storm ends at the first later point whose Active is at most
// EndRatio * the Active it fired at, or below MinActive; no new storm
// fires while one is going on.
//
// The crowd rule (when CPUs > 0) does not depend on spare CPU, so it also
// sees storms on a server too small to keep CPU idle (on 2 cores
// temp-table churn saturates the CPU and the rise rule never fires). It
// fires at a point p when the window (the points within Window seconds
// before p, and p; or, when sampling is so slow that these are fewer than
// CrowdPoints, the last CrowdPoints points) holds at least CrowdPoints
// points, every one of them
// with Active >= CrowdFactor * CPUs, and the sessions waiting on an LWLock
// or a heavyweight lock (wait event types LWLock and Lock, all events
// together) are on average at least CrowdShare of the active sessions
// over those points. A queue several times the CPU count whose sessions
// wait on each other, not only for a processor. It is named after the
// lock event with the most waiting sessions over the window. It ends at
// the first point where Active falls below CrowdFactor * CPUs or the
// window's mean lock share below CrowdShare / 2. MinActive does not apply
// to it.
//
// The relative rule (when RelWindow > 0) needs the server's CPU use
// (Point.ServerCPU, cores); points without it are left out of its
// arithmetic. At a point p it takes the last RelPoints points up to p (the
// recent run) and the points before them within RelWindow of p (the
// baseline, at least one), and compares their means (active A, server
// CPU C, sessions waiting W: wait types LWLock, Lock, BufferPin and IO,
// sessions waiting on each other or on storage; not CPU, Client, Activity
// or Timeout). With rise = A_recent / max(A_base, 1) - 1, it fires when:
//   - A_recent >= max(RelMinActive, CPUs), and every recent point has
//     Active >= (1 + RelRise) * max(A_base, 1) (a sustained rise, not one
//     noisy sample);
//   - C_recent - C_base <= RelCPUShare * rise * max(C_base, RelCPUFloor):
//     the server's CPU grew by less than RelCPUShare of the active
//     sessions' share (the floor keeps an idle baseline's few hundredths of
//     a core from making any change look large);
//   - W_recent - W_base >= RelWaitShare * (A_recent - A_base): most added
//     sessions wait. This is what keeps a CPU-bound rise on a saturated
//     host silent (its server CPU cannot follow, but its sessions run:
//     "CPU").
//
// It does not look at the host CPU. A relative storm ends at the first
// point whose Active is at most EndRatio * the Active it fired at.
type Rule struct {
	// Window is how quickly the rise must happen (default 5 s).
	Window time.Duration
	// Factor is the rise, now / baseline, that counts as a storm
	// (default 4: 12 -> 48 active).
	Factor float64
	// MinActive is the least number of active sessions a storm reaches
	// (default 30), so 1 -> 5 active is not a storm.
	MinActive int
	// CPUSaturated is the host CPU busy share, in % of all CPUs, at or
	// above which no storm fires (default 90).
	CPUSaturated float64
	// EndRatio ends a storm when active sessions fall to this share of
	// the count it fired at (default 0.5).
	EndRatio float64

	// CPUs is the server's CPU count for the crowd rule; 0 turns the crowd
	// rule off (a remote server whose CPUs are unknown).
	CPUs int
	// CrowdFactor is the active sessions per CPU from which a crowd counts
	// (default 4).
	CrowdFactor float64
	// CrowdShare is the mean share of active sessions waiting on locks
	// (LWLock and Lock types) over the window that makes a crowd a storm
	// (default 0.15).
	CrowdShare float64
	// CrowdPoints is the least number of points in the window (default 3).
	CrowdPoints int

	// RelWindow is the relative rule's window, baseline and recent run
	// together (default 10 s); 0 turns the rule off.
	RelWindow time.Duration
	// RelPoints is the length of the recent run (default 3).
	RelPoints int
	// RelRise is the least rise of every recent point over the baseline
	// mean, as a share (default 1: active sessions doubled).
	RelRise float64
	// RelCPUShare is the share of the active sessions' rise that the
	// server's CPU may rise by without making it a CPU rise (default 0.5).
	RelCPUShare float64
	// RelCPUFloor is the least baseline server CPU, cores, the CPU rise is
	// taken against (default 0.1).
	RelCPUFloor float64
	// RelWaitShare is the least share of the added active sessions that
	// wait (LWLock, Lock, BufferPin, IO) (default 0.75).
	RelWaitShare float64
	// RelMinActive is the least mean of active sessions over the recent run
	// (default 6; the CPU count when that is larger).
	RelMinActive int
}

// DefaultRule returns Window 5 s, Factor 4, MinActive 30, CPUSaturated
// 90 %, EndRatio 0.5, the crowd rule off (CPUs 0) with CrowdFactor 4,
// CrowdShare 0.15, CrowdPoints 3, and the relative rule on with RelWindow
// 10 s, RelPoints 3, RelRise 1, RelCPUShare 0.5, RelCPUFloor 0.1 cores,
// RelWaitShare 0.75, RelMinActive 6. The relative thresholds are
// calibrated on recorded series (testdata/README.md): steady ERP load on
// 2 cores swings between 0 and 18 active sessions from one second to the
// next and must not fire.
func DefaultRule() Rule {
	return Rule{Window: 5 * time.Second, Factor: 4, MinActive: 30, CPUSaturated: 90, EndRatio: 0.5,
		CrowdFactor: 4, CrowdShare: 0.15, CrowdPoints: 3,
		RelWindow: 10 * time.Second, RelPoints: 3, RelRise: 1, RelCPUShare: 0.5, RelCPUFloor: 0.1,
		RelWaitShare: 0.75, RelMinActive: 6}
}

// Validate returns an error naming the first invalid field.
func (r Rule) Validate() error {
	switch {
	case r.Window <= 0:
		return fmt.Errorf("storm rule: window must be > 0, got %s", r.Window)
	case r.Factor <= 1 || math.IsNaN(r.Factor) || math.IsInf(r.Factor, 0):
		return fmt.Errorf("storm rule: factor must be > 1, got %g", r.Factor)
	case r.MinActive < 1:
		return fmt.Errorf("storm rule: min active must be >= 1, got %d", r.MinActive)
	case !(r.CPUSaturated > 0 && r.CPUSaturated <= 100):
		return fmt.Errorf("storm rule: CPU saturation must be in (0, 100] %%, got %g", r.CPUSaturated)
	case !(r.EndRatio > 0 && r.EndRatio < 1):
		return fmt.Errorf("storm rule: end ratio must be in (0, 1), got %g", r.EndRatio)
	case r.CPUs < 0:
		return fmt.Errorf("storm rule: CPUs must be >= 0, got %d", r.CPUs)
	case r.CPUs > 0 && !(r.CrowdFactor > 0 && !math.IsInf(r.CrowdFactor, 0)):
		return fmt.Errorf("storm rule: crowd factor must be > 0, got %g", r.CrowdFactor)
	case r.CPUs > 0 && !(r.CrowdShare > 0 && r.CrowdShare <= 1):
		return fmt.Errorf("storm rule: crowd share must be in (0, 1], got %g", r.CrowdShare)
	case r.CPUs > 0 && r.CrowdPoints < 1:
		return fmt.Errorf("storm rule: crowd points must be >= 1, got %d", r.CrowdPoints)
	}
	return r.validateRelative()
}

// Point is one observation.
type Point struct {
	// T is the time in seconds since the start of the series.
	T float64
	// Active is the number of active client sessions.
	Active int
	// CPUBusy is the host CPU busy share over the last interval, % of all
	// CPUs (user+nice+system+irq+softirq+steal); valid when CPUKnown.
	CPUBusy  float64
	CPUKnown bool
	// Waits counts active sessions by wait event, "Type:Event", with "CPU"
	// for sessions not waiting (package sampler's keys).
	Waits map[string]int
	// ServerCPU is the CPU time the server's processes used over the last
	// interval, seconds per second (cores: 1.5 = one and a half CPUs
	// busy); valid when ServerCPUKnown (a local server whose process tree
	// is visible).
	ServerCPU      float64
	ServerCPUKnown bool
}

// Event is one storm.
type Event struct {
	// T is when the storm fired, StartT the time of the baseline point,
	// in seconds since the start of the series.
	T      float64 `json:"t"`
	StartT float64 `json:"t_start"`
	// EndT is when it ended; nil while it goes on.
	EndT *float64 `json:"t_end,omitempty"`
	// WaitEvent is the dominant wait event at T ("LWLock:LockManager",
	// "CPU" for sessions not waiting, "" when none was reported) and
	// WaitCount the sessions waiting on it.
	WaitEvent string `json:"wait_event"`
	WaitCount int    `json:"wait_count"`
	// From is the baseline active count, To the count at T, Peak the
	// largest count until the end.
	From int `json:"from"`
	To   int `json:"to"`
	Peak int `json:"peak"`
	// CPUBusy is the host CPU busy share at T, %; CPUKnown false when the
	// host was not sampled.
	CPUBusy  float64 `json:"cpu_busy_pct"`
	CPUKnown bool    `json:"cpu_known"`
	// Rule is "crowd" for a storm of the crowd rule (From is then the
	// fewest active sessions in its window, LockPct the window's mean
	// share of active sessions waiting on locks, WaitEvent the lock event
	// with the most waiting sessions over the window), "relative" for the
	// relative rule (WaitEvent the waiting event with the most sessions at
	// T), "" for the rise rule.
	Rule    string  `json:"rule,omitempty"`
	LockPct float64 `json:"lock_wait_pct,omitempty"`
	// ServerCPUFrom and ServerCPUTo are, for a storm of the relative rule
	// ("relative"; From is then the baseline's mean active sessions,
	// rounded), the server's mean CPU use over the baseline and over the
	// recent run, cores.
	ServerCPUFrom float64 `json:"server_cpu_from,omitempty"`
	ServerCPUTo   float64 `json:"server_cpu_to,omitempty"`
	// Message is the one-line description, e.g.
	// "LWLock:LockManager storm: active 12 -> 240 in 3 s, CPU 35 %" or
	// "LWLock:LockManager storm: 141 active on 2 CPUs, 31 % waiting on locks over 5 s (LWLock:LockManager 20), CPU 100 %".
	Message string `json:"message"`
}

// Ongoing reports whether the storm has not ended yet.
func (e Event) Ongoing() bool { return e.EndT == nil }

// Detector applies a Rule to a series of points, in time order. It is not
// safe for concurrent use.
type Detector struct {
	rule   Rule
	window []Point
	// relWin are the points of the last RelWindow (the relative rule's).
	relWin []Point
	// recent are the last CrowdPoints-1 points whatever their age: the
	// crowd rule's window when sampling is slower than Window/CrowdPoints
	// (a sampler starved on a saturated server).
	recent []Point
	events []Event
	cur    int // index of the ongoing event in events, -1 if none
}

// NewDetector returns a detector for r, or r's validation error.
func NewDetector(r Rule) (*Detector, error) {
	if err := r.Validate(); err != nil {
		return nil, err
	}
	return &Detector{rule: r, cur: -1}, nil
}

// Rule returns the detector's rule.
func (d *Detector) Rule() Rule { return d.rule }

// Observe adds a point (T must not decrease) and returns the storm that
// fired at it, if any (fired), and the storm that ended at it, if any
// (ended). The returned events are copies.
func (d *Detector) Observe(p Point) (fired, ended *Event) {
	win := d.rule.Window.Seconds()
	// Drop points older than the window.
	keep := 0
	for keep < len(d.window) && p.T-d.window[keep].T > win {
		keep++
	}
	d.window = append(d.window[:0], d.window[keep:]...)

	if d.cur >= 0 {
		e := &d.events[d.cur]
		if p.Active > e.Peak {
			e.Peak = p.Active
		}
		if d.ends(*e, p) {
			t := p.T
			e.EndT = &t
			d.cur = -1
			c := *e
			ended = &c
		}
	} else {
		f := d.check(p)
		if f == nil {
			f = d.checkRelative(p)
		}
		if f == nil && d.rule.CPUs > 0 {
			f = d.checkCrowd(p)
		}
		if f != nil {
			d.events = append(d.events, *f)
			d.cur = len(d.events) - 1
			fired = f
		}
	}
	d.window = append(d.window, p)
	d.keepRelative(p)
	if n := d.rule.CrowdPoints - 1; n > 0 {
		if len(d.recent) >= n {
			d.recent = append(d.recent[:0], d.recent[len(d.recent)-n+1:]...)
		}
		d.recent = append(d.recent, p)
	}
	return fired, ended
}

// ends reports whether the ongoing storm e ends at p.
func (d *Detector) ends(e Event, p Point) bool {
	switch e.Rule {
	case "crowd":
		return d.crowdEnds(p)
	case "relative":
		return float64(p.Active) <= d.rule.EndRatio*float64(e.To)
	}
	return float64(p.Active) <= d.rule.EndRatio*float64(e.To) || p.Active < d.rule.MinActive
}

// check applies the rule at p against the window (which holds earlier
// points only).
func (d *Detector) check(p Point) *Event {
	if p.Active < d.rule.MinActive || len(d.window) == 0 {
		return nil
	}
	base := 0 // the latest point with the fewest active sessions
	for i, w := range d.window {
		if w.Active <= d.window[base].Active {
			base = i
		}
	}
	b := d.window[base]
	if float64(p.Active) < d.rule.Factor*float64(max(b.Active, 1)) {
		return nil
	}
	for _, w := range d.window[base:] {
		if w.CPUKnown && w.CPUBusy >= d.rule.CPUSaturated {
			return nil
		}
	}
	if p.CPUKnown && p.CPUBusy >= d.rule.CPUSaturated {
		return nil
	}
	e := &Event{T: p.T, StartT: b.T, From: b.Active, To: p.Active, Peak: p.Active,
		CPUBusy: p.CPUBusy, CPUKnown: p.CPUKnown}
	e.WaitEvent, e.WaitCount = Dominant(p.Waits)
	e.Message = message(*e)
	return e
}

// crowdLimit is the active count from which the crowd rule counts.
func (d *Detector) crowdLimit() float64 { return d.rule.CrowdFactor * float64(d.rule.CPUs) }

// isLock reports whether a wait event key is an LWLock or a heavyweight
// lock.
func isLock(key string) bool {
	return strings.HasPrefix(key, "LWLock:") || strings.HasPrefix(key, "Lock:")
}

// lockShare returns the mean share of active sessions waiting on locks
// over pts and p, and the lock waits summed.
func lockShare(pts []Point, p Point) (float64, map[string]int) {
	sum := map[string]int{}
	share := 0.0
	for _, w := range append(pts[:len(pts):len(pts)], p) {
		n := 0
		for k, c := range w.Waits {
			if isLock(k) {
				n += c
				sum[k] += c
			}
		}
		if w.Active > 0 {
			share += float64(n) / float64(w.Active)
		}
	}
	return share / float64(len(pts)+1), sum
}

// crowdWindow is the crowd rule's window before p: the points within
// Window, or the last CrowdPoints-1 points when the window holds fewer.
func (d *Detector) crowdWindow() []Point {
	if len(d.window)+1 >= d.rule.CrowdPoints {
		return d.window
	}
	return d.recent
}

// checkCrowd applies the crowd rule at p against the window.
func (d *Detector) checkCrowd(p Point) *Event {
	limit := d.crowdLimit()
	win := d.crowdWindow()
	if len(win)+1 < d.rule.CrowdPoints || float64(p.Active) < limit {
		return nil
	}
	low := p
	for _, w := range win {
		if float64(w.Active) < limit {
			return nil
		}
		if w.Active < low.Active {
			low = w
		}
	}
	share, locks := lockShare(win, p)
	if share < d.rule.CrowdShare {
		return nil
	}
	e := &Event{T: p.T, StartT: win[0].T, From: low.Active, To: p.Active, Peak: p.Active,
		CPUBusy: p.CPUBusy, CPUKnown: p.CPUKnown, Rule: "crowd", LockPct: math.Round(1000*share) / 10}
	name, n := Dominant(locks)
	e.WaitEvent, e.WaitCount = name, n/(len(win)+1)
	cpu := "CPU n/a"
	if e.CPUKnown {
		cpu = fmt.Sprintf("CPU %.0f %%", e.CPUBusy)
	}
	e.Message = fmt.Sprintf("%s storm: %d active on %d CPUs, %.0f %% waiting on locks over %.0f s (%s %d per sample), %s",
		name, p.Active, d.rule.CPUs, e.LockPct, p.T-e.StartT, name, e.WaitCount, cpu)
	return e
}

// crowdEnds reports whether an ongoing crowd storm ends at p.
func (d *Detector) crowdEnds(p Point) bool {
	if float64(p.Active) < d.crowdLimit() {
		return true
	}
	share, _ := lockShare(d.crowdWindow(), p)
	return share < d.rule.CrowdShare/2
}

// Dominant returns the wait event with the most sessions in waits (ties:
// the smaller name) and its count; "", 0 for an empty map.
func Dominant(waits map[string]int) (string, int) {
	keys := make([]string, 0, len(waits))
	for k := range waits {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	best, n := "", 0
	for _, k := range keys {
		if waits[k] > n {
			best, n = k, waits[k]
		}
	}
	return best, n
}

// message is the rise and relative rules' line: "Lock:advisory storm:
// active 1 -> 12 in 3 s, CPU 35 %", with ", server CPU 0.02 -> 0.03
// cores" before the host CPU for the relative rule.
func message(e Event) string {
	name := e.WaitEvent
	if name == "" {
		name = "session"
	}
	dt := e.T - e.StartT
	dur := fmt.Sprintf("%.0f s", dt)
	if dt < 1 {
		dur = fmt.Sprintf("%.1f s", dt)
	}
	cpu := "CPU n/a"
	if e.CPUKnown {
		cpu = fmt.Sprintf("CPU %.0f %%", e.CPUBusy)
	}
	if e.Rule == "relative" {
		cpu = fmt.Sprintf("server CPU %.2f -> %.2f cores, %s", e.ServerCPUFrom, e.ServerCPUTo, cpu)
	}
	return fmt.Sprintf("%s storm: active %d -> %d in %s, %s", name, e.From, e.To, dur, cpu)
}

// Events returns copies of all storms so far, in firing order; the last
// one may be ongoing.
func (d *Detector) Events() []Event {
	out := make([]Event, len(d.events))
	copy(out, d.events)
	for i := range out {
		if out[i].EndT != nil {
			t := *out[i].EndT
			out[i].EndT = &t
		}
	}
	return out
}

// Replay runs a fresh detector for r over points (in time order) and
// returns the storms; r's validation error if r is invalid.
func Replay(r Rule, points []Point) ([]Event, error) {
	d, err := NewDetector(r)
	if err != nil {
		return nil, err
	}
	for _, p := range points {
		d.Observe(p)
	}
	return d.Events(), nil
}
