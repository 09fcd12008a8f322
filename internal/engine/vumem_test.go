package engine_test

import (
	"context"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/erplab/erplab/internal/engine"
	"github.com/erplab/erplab/internal/record"
	"github.com/erplab/erplab/internal/results"
)

// idleVUBound is the most a thinking VU of the closed model may cost in
// heap and stack: about 2.5 x the 0.37 KiB measured (a goroutine parked
// in its think time cost 3.9 KiB; docs/measurements/2026-12-04-vu-memory.md).
const idleVUBound = 1024

// Thinking VUs hold no goroutine: 20,000 VUs in their first pause (think
// time 1 h) add less than idleVUBound bytes each to the heap and the
// goroutine stacks, and the run, interrupted, ends every one of them.
func TestIdleVUMemory(t *testing.T) {
	const n = 20000
	w := oneOp("SELECT 1", time.Second)
	pool := poolOf(t, srv.Pool(t, srv.NewDatabase(t)), 2)
	var vus atomic.Int64
	cfg := engine.Config{
		Workload: w, Roles: w.Roles(), Connections: 2,
		Stages:     []engine.Stage{{Duration: 0, Target: n}, {Duration: time.Hour, Target: n}},
		Think:      engine.ThinkTime{Kind: "fixed", Min: time.Hour},
		OnInterval: func(iv results.Interval) { vus.Store(iv.VUs) },
	}
	rec := record.New(ops(w), time.Now(), 0, 100*time.Millisecond)
	before := inUse()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	type result struct {
		out engine.Outcome
		err error
	}
	done := make(chan result, 1)
	go func() {
		out, err := engine.Run(ctx, pool, cfg, rec)
		done <- result{out, err}
	}()
	for deadline := time.Now().Add(time.Minute); vus.Load() < n; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d VUs after a minute, want %d", vus.Load(), n)
		}
	}
	perVU := (int64(inUse()) - int64(before)) / n
	cancel()
	r := <-done
	if r.err != nil || r.out.Status != results.StatusInterrupted || r.out.MaxVUs != n {
		t.Fatalf("run: %v, status %q, max VUs %d, want interrupted with %d", r.err, r.out.Status, r.out.MaxVUs, n)
	}
	t.Logf("%d bytes of heap and stack per thinking VU", perVU)
	if perVU > idleVUBound {
		t.Fatalf("a thinking VU costs %d bytes of heap and stack, want at most %d", perVU, idleVUBound)
	}
}

// inUse is the heap and the goroutine stacks in use after a collection.
func inUse() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapInuse + m.StackInuse
}
