package engine

import (
	"context"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
)

// waitUntil never returns true before its time, returns false at once when
// stop is already closed, and a long wait ends when stop is closed during
// it (this test would hang otherwise).
func TestWaitUntil(t *testing.T) {
	ctx := context.Background()
	live := make(chan struct{})
	for _, d := range []time.Duration{-time.Millisecond, 0, 300 * time.Microsecond, 3 * time.Millisecond} {
		at := time.Now().Add(d)
		if !waitUntil(ctx, live, at) {
			t.Fatalf("wait of %s: false without a stop", d)
		}
		if now := time.Now(); now.Before(at) {
			t.Fatalf("wait of %s returned %s early", d, at.Sub(now))
		}
	}
	closed := make(chan struct{})
	close(closed)
	if waitUntil(ctx, closed, time.Now().Add(time.Millisecond)) {
		t.Fatal("true with stop closed")
	}
	stop := make(chan struct{})
	time.AfterFunc(50*time.Millisecond, func() { close(stop) })
	if waitUntil(ctx, stop, time.Now().Add(time.Hour)) {
		t.Fatal("an hour's wait went on after stop")
	}
	cctx, cancel := context.WithCancel(ctx)
	time.AfterFunc(50*time.Millisecond, cancel)
	if waitUntil(cctx, live, time.Now().Add(time.Hour)) {
		t.Fatal("an hour's wait went on after the context ended")
	}
}

// BenchmarkWaitOvershoot measures how late a wait for a time 0-10 ms ahead
// ends: waitUntil (Go timer, then nanosleep(2)) against a plain Go timer
// (sleep), whose lateness the netpoller's millisecond resolution sets. It
// reports the overshoot's p50, mean and p99 in µs.
func BenchmarkWaitOvershoot(b *testing.B) {
	ctx := context.Background()
	live := make(chan struct{})
	for _, c := range []struct {
		name string
		wait func(at time.Time)
	}{
		{"waitUntil", func(at time.Time) { waitUntil(ctx, live, at) }},
		{"timer", func(at time.Time) { sleep(ctx, live, time.Until(at)) }},
	} {
		b.Run(c.name, func(b *testing.B) {
			h := hdrhistogram.New(1, int64(time.Second/time.Microsecond), 3)
			r := rand.New(rand.NewPCG(1, 2))
			for b.Loop() {
				at := time.Now().Add(time.Duration(r.Int64N(int64(10 * time.Millisecond))))
				c.wait(at)
				_ = h.RecordValue(max(time.Since(at).Microseconds(), 1))
			}
			b.ReportMetric(float64(h.ValueAtQuantile(50)), "overshoot-p50-µs")
			b.ReportMetric(h.Mean(), "overshoot-mean-µs")
			b.ReportMetric(float64(h.ValueAtQuantile(99)), "overshoot-p99-µs")
		})
	}
}
