// Package measure holds what erplab's side-by-side benchmarks (package
// versus/*) share: the spread of a figure over rounds, and a reference
// tool's run measured as a whole process (wall time, CPU time).
package measure

import (
	"context"
	"os/exec"
	"sort"
	"syscall"
	"time"
)

// Spread is the median and range of a figure over rounds.
type Spread struct{ Median, Min, Max float64 }

// SpreadOf is the spread of v (the zero Spread when v is empty); v is
// not modified.
func SpreadOf(v []float64) Spread {
	if len(v) == 0 {
		return Spread{}
	}
	s := append([]float64(nil), v...)
	sort.Float64s(s)
	m := s[len(s)/2]
	if len(s)%2 == 0 {
		m = (s[len(s)/2-1] + s[len(s)/2]) / 2
	}
	return Spread{Median: m, Min: s[0], Max: s[len(s)-1]}
}

// Run runs cmd (made with exec.CommandContext(ctx, ...)) to its end and
// returns its wall time and its CPU time (user + system, from its
// rusage; 0 when the process did not start). When ctx ended the run, the
// error is ctx's.
func Run(ctx context.Context, cmd *exec.Cmd) (wall, cpu time.Duration, err error) {
	start := time.Now()
	err = cmd.Run()
	wall = time.Since(start)
	if cmd.ProcessState != nil {
		if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
			cpu = time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
		}
	}
	if err != nil && ctx.Err() != nil {
		err = ctx.Err()
	}
	return wall, cpu, err
}
