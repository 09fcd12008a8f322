package engine

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Stage is one step of the load profile: over Duration, the number of
// virtual users moves linearly from the previous stage's target (0 before
// the first stage) to Target. The same notion as k6's `stages`.
type Stage struct {
	Duration time.Duration
	Target   int
}

// ParseStage parses "DURATION:VUS", e.g. "30s:100" or "10m:0".
// Errors name the offending text.
func ParseStage(s string) (Stage, error) {
	d, n, ok := strings.Cut(strings.TrimSpace(s), ":")
	if !ok {
		return Stage{}, fmt.Errorf("stage %q: want DURATION:VUS, e.g. 30s:100", s)
	}
	dur, err := time.ParseDuration(d)
	if err != nil {
		return Stage{}, fmt.Errorf("stage %q: bad duration %q (e.g. 30s, 5m, 1h)", s, d)
	}
	if dur < 0 {
		return Stage{}, fmt.Errorf("stage %q: duration must not be negative", s)
	}
	vus, err := strconv.Atoi(n)
	if err != nil || vus < 0 {
		return Stage{}, fmt.Errorf("stage %q: VUs must be a whole number >= 0, got %q", s, n)
	}
	return Stage{Duration: dur, Target: vus}, nil
}

// SimpleStages builds the profile of --users N --ramp R --duration D: ramp
// from 0 to N over R, then hold N for D. R may be 0.
func SimpleStages(users int, ramp, hold time.Duration) ([]Stage, error) {
	if users < 1 {
		return nil, fmt.Errorf("--users must be >= 1, got %d", users)
	}
	if ramp < 0 {
		return nil, fmt.Errorf("--ramp must not be negative, got %s", ramp)
	}
	if hold <= 0 {
		return nil, fmt.Errorf("--duration must be > 0, got %s", hold)
	}
	var st []Stage
	if ramp > 0 {
		st = append(st, Stage{Duration: ramp, Target: users})
	} else {
		st = append(st, Stage{Duration: 0, Target: users})
	}
	return append(st, Stage{Duration: hold, Target: users}), nil
}

// TotalDuration sums the stages' durations.
func TotalDuration(stages []Stage) time.Duration {
	var d time.Duration
	for _, s := range stages {
		d += s.Duration
	}
	return d
}

// MaxTarget is the largest VU count any stage reaches.
func MaxTarget(stages []Stage) int {
	m := 0
	for _, s := range stages {
		if s.Target > m {
			m = s.Target
		}
	}
	return m
}

// TargetAt returns the number of VUs the profile asks for at elapsed time
// t, interpolating linearly within a stage (rounded down), and done=true
// once t is past the last stage.
func TargetAt(stages []Stage, t time.Duration) (vus int, done bool) {
	prev := 0
	for _, s := range stages {
		if t < s.Duration {
			frac := float64(t) / float64(s.Duration)
			return prev + int(float64(s.Target-prev)*frac), false
		}
		t -= s.Duration
		prev = s.Target
	}
	return prev, true
}

// maxTargetFrom is the largest VU count the profile asks for at elapsed
// time t or later (TargetAt at t, and every stage target not yet reached);
// 0 once t is past the last stage.
func maxTargetFrom(stages []Stage, t time.Duration) int {
	m, done := TargetAt(stages, t)
	if done {
		return 0
	}
	var end time.Duration
	for _, s := range stages {
		end += s.Duration
		if end > t {
			m = max(m, s.Target)
		}
	}
	return m
}
