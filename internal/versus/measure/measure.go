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

	"github.com/erplab/erplab/internal/hostfacts"
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

// Usage is what the kernel accounted for one child process.
type Usage struct {
	// Wall is the time from start to exit, start-up included.
	Wall time.Duration
	// CPU is user + system time (the child's rusage).
	CPU time.Duration
	// PeakRSS is the peak resident set size in bytes of the child's
	// program: its VmHWM, read every SampleEvery while it runs (the last
	// reading; 0 when none succeeded). Not the rusage's maxrss: Linux
	// counts in it the memory map the child was forked from, the
	// resident size of this process (a parent of 200 MB gives true(1) a
	// maxrss of 200 MB).
	PeakRSS int64
	// PeakAnon is the largest RssAnon read in the same samples: the
	// child's own memory (heap, stacks) without its program's file
	// pages, which count in PeakRSS as far as the page cache holds them
	// (tens of MB for a large static binary, varying from run to run).
	PeakAnon int64
}

// SampleEvery is how often RunUsage reads the child's VmHWM; growth in
// the last interval before it exits is missed.
const SampleEvery = 10 * time.Millisecond

// Run runs cmd (made with exec.CommandContext(ctx, ...)) to its end and
// returns its wall time and its CPU time (user + system, from its
// rusage; 0 when the process did not start). When ctx ended the run, the
// error is ctx's.
func Run(ctx context.Context, cmd *exec.Cmd) (wall, cpu time.Duration, err error) {
	u, err := RunUsage(ctx, cmd)
	return u.Wall, u.CPU, err
}

// RunUsage is Run with the child's peak resident memory too.
func RunUsage(ctx context.Context, cmd *exec.Cmd) (Usage, error) {
	var u Usage
	start := time.Now()
	err := cmd.Start()
	if err == nil {
		stop, peak := make(chan struct{}), make(chan hostfacts.ProcMemory)
		go samplePeak(cmd.Process.Pid, stop, peak)
		err = cmd.Wait()
		close(stop)
		m := <-peak
		u.PeakRSS, u.PeakAnon = int64(m.Peak), int64(m.Anon)
	}
	u.Wall = time.Since(start)
	if cmd.ProcessState != nil {
		if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
			u.CPU = time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
		}
	}
	if err != nil && ctx.Err() != nil {
		err = ctx.Err()
	}
	return u, err
}

// samplePeak reads pid's memory every SampleEvery until stop closes and
// sends the last VmHWM and the largest RssAnon read on peak. The pid
// stays the child's until Wait reaps it, and stop closes only after that;
// a reading that fails (the child is a zombie, or exec'ing) is skipped.
func samplePeak(pid int, stop <-chan struct{}, peak chan<- hostfacts.ProcMemory) {
	var last hostfacts.ProcMemory
	fs, err := hostfacts.New("", "")
	t := time.NewTicker(SampleEvery)
	defer t.Stop()
	for err == nil {
		if m, err := fs.Memory(pid); err == nil && m.Peak > 0 {
			last.Peak, last.Anon = m.Peak, max(last.Anon, m.Anon)
		}
		select {
		case <-stop:
			peak <- last
			return
		case <-t.C:
		}
	}
	<-stop
	peak <- last
}
