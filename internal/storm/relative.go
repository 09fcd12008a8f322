package storm

import (
	"fmt"
	"math"
	"strings"
)

// validateRelative checks the relative rule's fields when it is on.
func (r Rule) validateRelative() error {
	switch {
	case r.RelWindow < 0:
		return fmt.Errorf("storm rule: relative window must be >= 0, got %s", r.RelWindow)
	case r.RelWindow == 0:
		return nil
	case r.RelPoints < 1:
		return fmt.Errorf("storm rule: relative points must be >= 1, got %d", r.RelPoints)
	case !(r.RelRise > 0 && !math.IsInf(r.RelRise, 0)):
		return fmt.Errorf("storm rule: relative rise must be > 0, got %g", r.RelRise)
	case !(r.RelCPUShare >= 0 && r.RelCPUShare < 1):
		return fmt.Errorf("storm rule: relative CPU share must be in [0, 1), got %g", r.RelCPUShare)
	case !(r.RelCPUFloor > 0 && !math.IsInf(r.RelCPUFloor, 0)):
		return fmt.Errorf("storm rule: relative CPU floor must be > 0 cores, got %g", r.RelCPUFloor)
	case !(r.RelWaitShare > 0 && r.RelWaitShare <= 1):
		return fmt.Errorf("storm rule: relative wait share must be in (0, 1], got %g", r.RelWaitShare)
	case r.RelMinActive < 1:
		return fmt.Errorf("storm rule: relative min active must be >= 1, got %d", r.RelMinActive)
	}
	return nil
}

// IsWaitingOnOthers reports whether a wait event key counts as waiting
// for the relative rule: types LWLock, Lock, BufferPin and IO (sessions
// waiting on each other or on storage), not "CPU" (running or runnable),
// Client, Activity, IPC, Extension or Timeout.
func IsWaitingOnOthers(key string) bool {
	for _, t := range []string{"LWLock:", "Lock:", "BufferPin:", "IO:"} {
		if strings.HasPrefix(key, t) {
			return true
		}
	}
	return false
}

// keepRelative adds p to the relative rule's window and drops the points
// older than RelWindow (or all but the last one when the rule is off).
func (d *Detector) keepRelative(p Point) {
	if d.rule.RelWindow <= 0 || !p.ServerCPUKnown {
		return
	}
	win := d.rule.RelWindow.Seconds()
	keep := 0
	for keep < len(d.relWin) && p.T-d.relWin[keep].T > win {
		keep++
	}
	d.relWin = append(append(d.relWin[:0], d.relWin[keep:]...), p)
}

// relMeans are the means of a run of points.
type relMeans struct {
	active, cpu, waiting float64
	min                  int // the fewest active sessions
}

func meansOf(pts []Point) relMeans {
	m := relMeans{min: math.MaxInt}
	for _, p := range pts {
		m.active += float64(p.Active)
		m.cpu += p.ServerCPU
		for k, n := range p.Waits {
			if IsWaitingOnOthers(k) {
				m.waiting += float64(n)
			}
		}
		m.min = min(m.min, p.Active)
	}
	n := float64(len(pts))
	m.active, m.cpu, m.waiting = m.active/n, m.cpu/n, m.waiting/n
	return m
}

// checkRelative applies the relative rule at p against its window.
func (d *Detector) checkRelative(p Point) *Event {
	r := d.rule
	if r.RelWindow <= 0 || !p.ServerCPUKnown {
		return nil
	}
	win := d.relWin
	for len(win) > 0 && p.T-win[0].T > r.RelWindow.Seconds() {
		win = win[1:]
	}
	pts := append(win[:len(win):len(win)], p)
	if len(pts) < r.RelPoints+1 {
		return nil
	}
	base, recent := meansOf(pts[:len(pts)-r.RelPoints]), meansOf(pts[len(pts)-r.RelPoints:])
	from := max(base.active, 1)
	if recent.active < float64(max(r.RelMinActive, r.CPUs)) || float64(recent.min) < (1+r.RelRise)*from {
		return nil
	}
	rise := recent.active/from - 1
	if recent.cpu-base.cpu > r.RelCPUShare*rise*max(base.cpu, r.RelCPUFloor) {
		return nil
	}
	if recent.waiting-base.waiting < r.RelWaitShare*(recent.active-base.active) {
		return nil
	}
	last := pts[len(pts)-r.RelPoints-1]
	e := &Event{T: p.T, StartT: last.T, From: int(math.Round(base.active)), To: p.Active, Peak: p.Active,
		CPUBusy: p.CPUBusy, CPUKnown: p.CPUKnown, Rule: "relative",
		ServerCPUFrom: math.Round(100*base.cpu) / 100, ServerCPUTo: math.Round(100*recent.cpu) / 100}
	waiting := map[string]int{}
	for k, n := range p.Waits {
		if IsWaitingOnOthers(k) {
			waiting[k] = n
		}
	}
	e.WaitEvent, e.WaitCount = Dominant(waiting)
	e.Message = message(*e)
	return e
}
