package engine

import (
	"context"
	"math/rand/v2"
	"sync/atomic"
	"testing"
	"time"

	"github.com/erplab/erplab/internal/record"
	"github.com/erplab/erplab/internal/workload"
)

// catchUpRun is a run of the open model one second behind a schedule of
// 100,000 arrivals per second, with a 1 ms latency limit, two operations
// mixed half and half and a 0.2 s warm-up, whose OnSkip keeps what it saw.
func catchUpRun(t testing.TB, start time.Time, onSkip func(Skip)) (*openModel, *mix, *workload.VU) {
	t.Helper()
	rate, _ := ConstantRate(1e5)
	rec := record.New([]record.OpInfo{{Name: "a", Target: time.Second}, {Name: "b", Target: time.Second}}, start, 200*time.Millisecond, time.Second)
	e := &openModel{run: &run{rec: rec, cfg: Config{LatencyLimit: time.Millisecond, OnSkip: onSkip}},
		sched: newSchedule(rate, start, time.Hour, 7)}
	m := &mix{ops: []int{0, 1}, cum: []float64{1, 2}}
	return e, m, &workload.VU{ID: 2, Rand: rand.New(rand.NewPCG(1, 2))}
}

// A catch-up skips exactly the arrivals later than the limit by one
// reading of the clock, in order, each handed to OnSkip with that clock
// and counted once in the recorder (warm-up apart, per operation); the
// arrival after them is within the limit; the backlog peak is the
// backlog the catch-up started from.
func TestCatchUpSkipsTheLateArrivals(t *testing.T) {
	start := time.Unix(1000, 0)
	now := start.Add(time.Second)
	var seen []Skip
	e, m, vu := catchUpRun(t, start, func(s Skip) { seen = append(seen, s) })
	var late, warm int64
	rate, _ := ConstantRate(1e5)
	for _, off := range arrivalTimes(rate, 2*time.Second, 7) {
		at := start.Add(time.Duration(off * float64(time.Second)))
		if now.Sub(at) > time.Millisecond {
			late++
			if at.Before(start.Add(200 * time.Millisecond)) {
				warm++
			}
		}
	}
	cu := newCatchUp(2, e.rec.WarmupEnd())
	done, more := e.catchUp(context.Background(), vu, m, nil, cu, now, 0)
	if !more || int64(done) != late || int64(len(seen)) != late || late < 90000 {
		t.Fatalf("skipped %d (go on %v), OnSkip saw %d; want the %d arrivals due by now - 1 ms", done, more, len(seen), late)
	}
	perOp := [2]int64{}
	for i, s := range seen {
		if s.VU != 2 || !s.At.Equal(now) || now.Sub(s.Scheduled) <= time.Millisecond || (i > 0 && s.Scheduled.Before(seen[i-1].Scheduled)) {
			t.Fatalf("skip %d: %+v", i, s)
		}
		perOp[s.Op]++
	}
	res := e.rec.Results(time.Minute)
	if res[0].Skipped+res[1].Skipped != late-warm || res[0].WarmupSkipped+res[1].WarmupSkipped != warm ||
		res[0].Skipped+res[0].WarmupSkipped != perOp[0] || res[1].Skipped+res[1].WarmupSkipped != perOp[1] || perOp[0] == 0 || perOp[1] == 0 {
		t.Fatalf("recorder: skipped %d+%d, warm-up %d+%d; OnSkip per op %v; want %d scored, %d warm-up",
			res[0].Skipped, res[1].Skipped, res[0].WarmupSkipped, res[1].WarmupSkipped, perOp, late-warm, warm)
	}
	if res[0].Apdex.Samples != res[0].Skipped || res[0].Zones.Frustrated != res[0].Skipped {
		t.Fatalf("op a: APDEX over %d samples, zones %+v; want the %d skipped, frustrated", res[0].Apdex.Samples, res[0].Zones, res[0].Skipped)
	}
	cur, peak := e.sched.gauge(now)
	if peak != cur+late-1 {
		t.Fatalf("backlog %d, peak %d; want the peak %d + %d - 1 (after the catch-up's first take)", cur, peak, cur, late)
	}
	a, ok := e.sched.take(now)
	if !ok || now.Sub(a.at) > time.Millisecond {
		t.Fatalf("after the catch-up the next arrival %v is %s late", a.at, now.Sub(a.at))
	}
	// TxPerVU caps the skips.
	e.cfg.TxPerVU = 100
	if done, more := e.catchUp(context.Background(), vu, m, nil, cu, now.Add(time.Second), 30); done != 100 || !more {
		t.Fatalf("with -t 100 after 30 done: %d (go on %v)", done, more)
	}
}

// The catch-up allocates nothing: taking a batch, counting it, OnSkip.
func TestCatchUpAllocations(t *testing.T) {
	start := time.Now()
	var n atomic.Int64
	e, m, vu := catchUpRun(t, start, func(Skip) { n.Add(1) })
	cu := newCatchUp(2, e.rec.WarmupEnd())
	now := start.Add(time.Second)
	step := func() {
		now = now.Add(time.Millisecond) // about 100 arrivals more
		if _, more := e.catchUp(context.Background(), vu, m, nil, cu, now, 0); !more {
			t.Fatal("stopped")
		}
	}
	step()
	if allocs := testing.AllocsPerRun(1000, step); allocs != 0 {
		t.Fatalf("%.2f allocations per catch-up, want 0", allocs)
	}
	if n.Load() < 100000 {
		t.Fatalf("OnSkip saw %d skips", n.Load())
	}
}

// BenchmarkSkipPath is the open model's cost per skipped arrival, with no
// server: a worker far behind a schedule of 10^6 arrivals per second
// skips b.N of them (OnSkip an atomic count, like erplab pgbench's
// collector). "catch-up" is the worker's path (batches under one lock);
// "take" is the arrival-at-a-time path (take, then skip) it replaced.
func BenchmarkSkipPath(b *testing.B) {
	for _, path := range []string{"catch-up", "take"} {
		b.Run(path, func(b *testing.B) {
			start := time.Now()
			var n atomic.Int64
			e, m, vu := catchUpRun(b, start, func(Skip) { n.Add(1) })
			rate, _ := ConstantRate(1e6)
			e.sched = newSchedule(rate, start, time.Hour, 7)
			now := start.Add(time.Second + time.Duration(b.N)*2*time.Microsecond)
			b.ReportAllocs()
			b.ResetTimer()
			if path == "catch-up" {
				e.cfg.TxPerVU = b.N
				cu := newCatchUp(2, e.rec.WarmupEnd())
				e.catchUp(context.Background(), vu, m, nil, cu, now, 0)
			} else {
				for range b.N {
					op := m.pick(vu.Rand)
					a, _ := e.sched.take(now)
					e.skip(vu, op, a.at, now)
				}
			}
			b.StopTimer()
			if n.Load() != int64(b.N) {
				b.Fatalf("skipped %d of %d", n.Load(), b.N)
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N), "ns/skip")
		})
	}
}
