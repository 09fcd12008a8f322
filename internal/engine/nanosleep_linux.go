//go:build linux

package engine

import (
	"runtime"
	"time"

	"golang.org/x/sys/unix"
)

// nanosleep blocks the calling OS thread for d with nanosleep(2), which
// ends within the thread's timer slack instead of the Go netpoller's
// millisecond. For the sleep the thread's timer slack is cut from its
// default (50 µs; prctl(2) PR_SET_TIMERSLACK) to 1 ns and then reset to
// the default, the goroutine being locked to the thread meanwhile, so no
// other code runs with the changed slack. An interrupted sleep (EINTR)
// returns early; the caller loops on the remaining time.
func nanosleep(d time.Duration) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	// Errors: only EINVAL for a bad argument, impossible here; the sleep is
	// then merely less precise.
	_ = unix.Prctl(unix.PR_SET_TIMERSLACK, 1, 0, 0, 0)
	ts := unix.NsecToTimespec(d.Nanoseconds())
	_ = unix.Nanosleep(&ts, nil)                       // EINTR: the caller re-checks the time
	_ = unix.Prctl(unix.PR_SET_TIMERSLACK, 0, 0, 0, 0) // 0 = back to the thread's default
}
