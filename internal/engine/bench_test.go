package engine_test

import (
	"context"
	"testing"
	"time"

	"github.com/erplab/erplab/internal/engine"
	"github.com/erplab/erplab/internal/record"
)

// BenchmarkNoopOperation measures the engine's own cost per key operation:
// pick from the mix, borrow a pooled connection, call Execute (which does
// nothing), return the connection, record the sample. One VU, no think
// time; b.N operations are approximated by running for a fixed time and
// reporting ns/op from the count.
func BenchmarkNoopOperation(b *testing.B) {
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
				Think:       engine.ThinkTime{Kind: "fixed"},
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
