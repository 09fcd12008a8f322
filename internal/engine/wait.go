package engine

import (
	"context"
	"time"
)

// preciseMargin is how long before an arrival's scheduled time waitUntil
// stops waiting on a Go timer and sleeps the rest in the kernel. Go's
// timers may fire up to about 1 ms late: when nothing else is runnable the
// runtime waits for the next timer in epoll_wait, whose timeout is in whole
// milliseconds, a delay under 1 ms being rounded up to 1 ms
// (runtime/netpoll_epoll.go, netpoll). A timer set 2 ms early therefore
// fires about 1-2 ms before the time, and the rest is slept precisely.
const preciseMargin = 2 * time.Millisecond

// waitUntil waits until the time at unless stop or ctx ends first, and
// reports whether the VU should go on (false: it must stop). It is precise
// to a thread's wake-up latency (tens of µs on an idle Linux system)
// rather than to the Go timer's millisecond: a Go timer until
// preciseMargin before at, which stop and ctx interrupt, then a blocking
// nanosleep(2) for the remainder (at most preciseMargin, during which stop
// and ctx are only checked at its end). The nanosleep blocks one OS thread
// and burns no CPU. It never returns true before at. The open model's
// workers wait for their arrivals with it, so that the schedule lag, part
// of every response time, is not inflated by the Go timer's resolution.
// Under a fake clock (testing/synctest) the remainder is waited on a Go
// timer instead, detected by the clock standing still over the nanosleep;
// on the real clock this costs one clock read per nanosleep.
func waitUntil(ctx context.Context, stop <-chan struct{}, at time.Time) bool {
	if d := time.Until(at) - preciseMargin; d > 0 {
		if !sleep(ctx, stop, d) {
			return false
		}
	}
	for {
		now := time.Now()
		d := at.Sub(now)
		if d <= 0 {
			break
		}
		nanosleep(d)
		if !time.Now().After(now) {
			// The clock did not move over a sleep of d > 0: it is a fake
			// clock (a testing/synctest bubble, whose time only advances
			// when every goroutine is blocked on Go primitives, not in a
			// system call). Wait for the rest on a Go timer, which
			// advances that clock.
			return sleep(ctx, stop, d)
		}
	}
	return !stopped(ctx, stop)
}
