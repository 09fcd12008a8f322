package engine_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/erplab/erplab/internal/engine"
	"github.com/erplab/erplab/internal/opmap"
	"github.com/erplab/erplab/internal/record"
)

// BenchmarkNoopOperation measures the engine's own cost per key operation:
// pick from the mix, borrow a pooled connection, call Execute (which does
// nothing), return the connection, record the sample. One VU, no think
// time; b.N operations are approximated by running for a fixed time and
// reporting ns/op from the count. The ops cases add the observations'
// bookkeeping (Config.Ops: the PID map and the statement tracer's
// context).
func BenchmarkNoopOperation(b *testing.B) {
	for _, c := range []struct {
		vus int
		ops bool
	}{{1, false}, {8, false}, {1, true}, {8, true}} {
		vus := c.vus
		name := map[int]string{1: "vus=1", 8: "vus=8"}[vus]
		if c.ops {
			name += "/ops"
		}
		b.Run(name, func(b *testing.B) {
			w := oneOp("", time.Second)
			pool := poolOf(b, srv.Pool(b, srv.NewDatabase(b)), vus)
			d := time.Duration(b.N) * 2 * time.Microsecond
			d = max(d, 200*time.Millisecond)
			rec := record.New(ops(w), time.Now(), 0, time.Second)
			b.ResetTimer()
			out, err := engine.Run(context.Background(), pool, engine.Config{
				Workload: w, Roles: w.Roles(),
				Stages:      []engine.Stage{{Duration: 0, Target: vus}, {Duration: d, Target: vus}},
				Think:       engine.ThinkTime{Kind: "fixed"},
				Connections: vus, Ops: opsOf(c.ops, w),
			}, rec)
			b.StopTimer()
			if err != nil {
				b.Fatal(err)
			}
			n := rec.Results(out.Elapsed)[0].Count
			b.ReportMetric(float64(out.Elapsed.Nanoseconds())/float64(n), "ns/operation")
			b.ReportMetric(float64(n)/out.Elapsed.Seconds(), "operations/s")
		})
	}
}

// opsOf is a PID map of w's operations when on, nil otherwise.
func opsOf(on bool, w *sqlWorkload) *opmap.Map {
	if !on {
		return nil
	}
	var names []string
	for _, o := range w.Operations() {
		names = append(names, o.Name)
	}
	return opmap.New(names)
}

// BenchmarkOpenNoopOperation is the same in the open model: arrivals at
// 2 million per second, above what the engine can run, so every worker
// always finds a due arrival. It adds the arrival hand-off (a take from
// the shared schedule, the due cursor's count of the backlog) and the lag
// histogram to the closed model's cost.
func BenchmarkOpenNoopOperation(b *testing.B) {
	rate, err := engine.ConstantRate(2e6)
	if err != nil {
		b.Fatal(err)
	}
	for _, vus := range []int{1, 8} {
		b.Run(map[int]string{1: "vus=1", 8: "vus=8"}[vus], func(b *testing.B) {
			w := oneOp("", time.Second)
			pool := poolOf(b, srv.Pool(b, srv.NewDatabase(b)), vus)
			d := time.Duration(b.N) * 2 * time.Microsecond
			d = max(d, 200*time.Millisecond)
			rec := record.New(ops(w), time.Now(), 0, time.Second)
			b.ResetTimer()
			out, err := engine.Run(context.Background(), pool, engine.Config{
				Workload: w, Roles: w.Roles(),
				Stages:      []engine.Stage{{Duration: 0, Target: vus}, {Duration: d, Target: vus}},
				Rate:        rate,
				Connections: vus,
			}, rec)
			b.StopTimer()
			if err != nil {
				b.Fatal(err)
			}
			n := rec.Results(out.Elapsed)[0].Count
			b.ReportMetric(float64(out.Elapsed.Nanoseconds())/float64(n), "ns/operation")
			b.ReportMetric(float64(n)/out.Elapsed.Seconds(), "operations/s")
		})
	}
}

// BenchmarkOpenScheduleLag measures the open model's schedule lag on a
// lightly loaded system (pgbench reports 0.1-0.16 ms for the same run):
// arrivals at 200 per second on 4 VUs, each running SELECT 1, so a VU
// almost always waits for its arrival's scheduled time and the lag is the
// precision of that wait plus the hand-off. One b.N is one arrival (5 ms of
// run time); -benchtime=1000x is a 5 s run. It reports the lag's p50, mean
// and p99 in µs.
func BenchmarkOpenScheduleLag(b *testing.B) {
	rate, err := engine.ConstantRate(200)
	if err != nil {
		b.Fatal(err)
	}
	w := oneOp("SELECT 1", time.Second)
	pool := poolOf(b, srv.Pool(b, srv.NewDatabase(b)), 4)
	d := max(time.Duration(b.N)*5*time.Millisecond, 200*time.Millisecond)
	rec := record.New(ops(w), time.Now(), 0, time.Second)
	b.ResetTimer()
	out, err := engine.Run(context.Background(), pool, engine.Config{
		Workload: w, Roles: w.Roles(),
		Stages:      []engine.Stage{{Duration: 0, Target: 4}, {Duration: d, Target: 4}},
		Rate:        rate,
		Connections: 4,
		Seed:        1,
	}, rec)
	b.StopTimer()
	if err != nil {
		b.Fatal(err)
	}
	r := rec.Results(out.Elapsed)[0]
	if r.Count == 0 {
		b.Fatal("no executions")
	}
	b.ReportMetric(r.Lag.P50*1000, "lag-p50-µs")
	b.ReportMetric(r.Lag.Mean*1000, "lag-mean-µs")
	b.ReportMetric(r.Lag.P99*1000, "lag-p99-µs")
	b.ReportMetric(r.Response.P50*1000, "response-p50-µs")
}

// TestOperationAllocations: once a VU holds its own connection
// (Connections 0, as erplab pgbench runs), an operation allocates nothing
// in the engine: the clock readings, the in-flight bookkeeping, the PID
// map and statement tracer (Config.Ops), the recorder's histograms and
// OnSample. The workload's Execute here does nothing, so what is counted
// is the engine's own cost per key operation.
func TestOperationAllocations(t *testing.T) {
	w := oneOp("", time.Second)
	pool := poolOf(t, srv.Pool(t, srv.NewDatabase(t)), 1)
	var seen int
	for _, c := range []struct {
		name string
		cfg  engine.Config
	}{
		{"plain", engine.Config{}},
		{"ops and OnSample", engine.Config{Ops: opsOf(true, w), OnSample: func(record.Sample) { seen++ }}},
	} {
		cfg := c.cfg
		cfg.Workload, cfg.Roles = w, w.Roles()
		rec := record.New(ops(w), time.Now(), 0, time.Second)
		vu, err := engine.NewOneVU(context.Background(), pool, cfg, rec)
		if err != nil {
			t.Fatal(err)
		}
		if !vu.Operation(0) { // connects
			t.Fatalf("%s: the first operation failed", c.name)
		}
		allocs := testing.AllocsPerRun(200, func() {
			if !vu.Operation(0) {
				t.Fatalf("%s: an operation failed", c.name)
			}
		})
		vu.Close()
		if allocs != 0 {
			t.Errorf("%s: %.2f allocations per operation, want 0", c.name, allocs)
		}
		if n := rec.Results(time.Second)[0].Count; n != 202 {
			t.Errorf("%s: %d operations recorded, want 202", c.name, n)
		}
	}
	if seen != 202 {
		t.Errorf("OnSample saw %d operations, want 202", seen)
	}
}

// BenchmarkOwnConnectionOperation is the engine's own cost per key
// operation as erplab pgbench runs it: one VU (vus=8: eight VUs of one
// run, each on its goroutine, sharing the run's counters, the recorder
// and the OnSample callback as erplab pgbench's clients do) on its own connection
// (Connections 0), the PID map and statement tracer on (Config.Ops), an
// OnSample callback, a workload whose Execute does nothing. No
// controller, ticks or other VUs: the figure is the operation's path
// alone (clock readings, bookkeeping, recording).
func BenchmarkOwnConnectionOperation(b *testing.B) {
	for _, vus := range []int{1, 8} {
		b.Run(map[int]string{1: "vus=1", 8: "vus=8"}[vus], func(b *testing.B) {
			w := oneOp("", time.Second)
			pool := poolOf(b, srv.Pool(b, srv.NewDatabase(b)), vus)
			var n atomic.Int64
			cfg := engine.Config{Workload: w, Roles: w.Roles(), Ops: opsOf(true, w), OnSample: func(record.Sample) { n.Add(1) }}
			rec := record.New(ops(w), time.Now(), 0, time.Second)
			first, err := engine.NewOneVU(context.Background(), pool, cfg, rec)
			if err != nil {
				b.Fatal(err)
			}
			all := []*engine.OneVU{first}
			for id := 2; id <= vus; id++ {
				all = append(all, first.Another(id))
			}
			for _, vu := range all {
				defer vu.Close()
				vu.Operation(0)
			}
			b.ReportAllocs()
			b.ResetTimer()
			var wg sync.WaitGroup
			for i, vu := range all {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for j := i; j < b.N; j += vus {
						vu.Operation(0)
					}
				}()
			}
			wg.Wait()
		})
	}
}
