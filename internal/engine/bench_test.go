package engine_test

import (
	"context"
	"flag"
	"fmt"
	"os"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
	"github.com/jackc/pgx/v5"
	"golang.org/x/sys/unix"

	"github.com/erplab/erplab/internal/engine"
	"github.com/erplab/erplab/internal/opmap"
	"github.com/erplab/erplab/internal/record"
	"github.com/erplab/erplab/internal/results"
	"github.com/erplab/erplab/internal/workload"
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

// BenchmarkThinkingVUs measures what b.N virtual users of the closed
// model cost while they think and how exact the engine's timing is at
// that count. One b.N is one VU: -benchtime=100000x runs 100,000 VUs.
// They ramp up over T/2, each thinks a fixed T between no-op operations
// (on 8 pooled connections), T = b.N / 5,000 s but at least 4 s (5,000
// operations a second, which two shared cores keep up with), for a run
// of 2.5T. It reports the heap and stack per VU at 2T (every VU has run
// and thinks; -vuheap FILE also writes the heap profile then), the
// process's peak resident memory (VmHWM) and CPU time per operation, the
// think time's lateness (an operation's start minus the previous one's
// end minus T: the timer, the goroutine's start, the pool's hand-off) and
// the ramp's lag (how far the VU count at each tick of the ramp is behind
// the profile, in ms of the ramp).
func BenchmarkThinkingVUs(b *testing.B) {
	n := b.N
	think := max(time.Duration(n)*time.Second/5000, 4*time.Second)
	w := &thinkProbe{sqlWorkload: oneOp("", time.Second), think: think, last: make([]atomic.Int64, n+1),
		late: hdrhistogram.New(1, int64(time.Minute/time.Microsecond), 3)}
	pool := poolOf(b, srv.Pool(b, srv.NewDatabase(b)), 8)
	stages := []engine.Stage{{Duration: think / 2, Target: n}, {Duration: 2 * think, Target: n}}
	rate := float64(n) / (think / 2).Seconds() // VUs started per second in the ramp
	var rampLag time.Duration
	rec := record.New(ops(w), time.Now(), 0, 100*time.Millisecond)
	cfg := engine.Config{Workload: w, Roles: w.Roles(), Stages: stages, Connections: 8,
		Think: engine.ThinkTime{Kind: "fixed", Min: think},
		OnInterval: func(iv results.Interval) {
			at := time.Duration(iv.T * float64(time.Second))
			if target, _ := engine.TargetAt(stages, at); at <= think/2 && int64(target) > iv.VUs {
				rampLag = max(rampLag, time.Duration(float64(int64(target)-iv.VUs)/rate*float64(time.Second)))
			}
		}}
	before := inUse()
	perVU := make(chan int64, 1)
	go func() {
		time.Sleep(2 * think)
		used := (int64(inUse()) - int64(before)) / int64(n)
		if *vuHeap != "" {
			writeHeapProfile(b, *vuHeap)
		}
		perVU <- used
	}()
	cpu := cpuTime()
	b.ResetTimer()
	out, err := engine.Run(context.Background(), pool, cfg, rec)
	b.StopTimer()
	cpu = cpuTime() - cpu
	if err != nil || out.MaxVUs != n {
		b.Fatalf("run: %v, max VUs %d, want %d", err, out.MaxVUs, n)
	}
	b.ReportMetric(float64(<-perVU), "B/VU")
	b.ReportMetric(float64(vmHWM())/1024, "MiB-VmHWM")
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, q := range []float64{50, 99, 100} {
		b.ReportMetric(float64(w.late.ValueAtQuantile(q))/1000, fmt.Sprintf("late-p%g-ms", q))
	}
	b.ReportMetric(float64(w.late.TotalCount()), "thinks")
	b.ReportMetric(float64(cpu.Microseconds())/float64(rec.Results(out.Elapsed)[0].Count), "cpu-µs/operation")
	b.ReportMetric(float64(rampLag.Microseconds())/1000, "ramp-lag-ms")
}

// vuHeap: BenchmarkThinkingVUs writes the heap profile at 2T to this
// file (what each thinking VU holds).
var vuHeap = flag.String("vuheap", "", "BenchmarkThinkingVUs: write a heap profile (runtime/pprof) to this file at 2T")

// writeHeapProfile writes the heap profile (runtime/pprof) to file.
func writeHeapProfile(b *testing.B, file string) {
	f, err := os.Create(file)
	if err != nil {
		b.Error(err)
		return
	}
	defer f.Close()
	if err := pprof.WriteHeapProfile(f); err != nil {
		b.Error(err)
	}
}

// thinkProbe is a no-op workload that measures each VU's think time: the
// gap from the end of one Execute to the start of the next beyond think.
type thinkProbe struct {
	*sqlWorkload
	think time.Duration
	last  []atomic.Int64 // unix ns of each VU's last Execute's end, by VU id
	mu    sync.Mutex
	late  *hdrhistogram.Histogram // µs
}

func (w *thinkProbe) Execute(_ context.Context, _ *pgx.Conn, vu *workload.VU, _ int) error {
	now := time.Now().UnixNano()
	if last := w.last[vu.ID].Load(); last != 0 {
		late := time.Duration(now-last) - w.think
		w.mu.Lock()
		w.late.RecordValue(max(late.Microseconds(), 0)) //nolint:errcheck // beyond a minute: clipped
		w.mu.Unlock()
	}
	w.last[vu.ID].Store(time.Now().UnixNano())
	return nil
}

// cpuTime is the CPU time (user and system) the process has used.
func cpuTime() time.Duration {
	var ru unix.Rusage
	if unix.Getrusage(unix.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// vmHWM is the process's peak resident memory in KiB, 0 where
// /proc/self/status cannot tell it.
func vmHWM() int64 {
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return kb
		}
	}
	return 0
}

// BenchmarkQueuedVUs measures what a queued operation costs: b.N VUs of
// the closed model (one b.N is one VU) on one pooled connection that a
// pg_sleep holds, so that all but one wait for it in the pool. It reports
// the heap and stack per waiting VU (its thinking cost included) once
// they all wait, then interrupts the run.
func BenchmarkQueuedVUs(b *testing.B) {
	n := b.N
	w := oneOp("SELECT pg_sleep(600)", time.Hour)
	pool := poolOf(b, srv.Pool(b, srv.NewDatabase(b)), 1)
	var waiting atomic.Int64
	cfg := engine.Config{Workload: w, Roles: w.Roles(), Connections: 1,
		Stages:     []engine.Stage{{Duration: 0, Target: n}, {Duration: time.Hour, Target: n}},
		Think:      engine.ThinkTime{Kind: "fixed", Min: time.Millisecond},
		OnInterval: func(iv results.Interval) { waiting.Store(iv.PoolWaiters) },
	}
	rec := record.New(ops(w), time.Now(), 0, 100*time.Millisecond)
	before := inUse()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	b.ResetTimer()
	go func() { _, err := engine.Run(ctx, pool, cfg, rec); done <- err }()
	for deadline := time.Now().Add(5 * time.Minute); waiting.Load() < int64(n-1); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			b.Fatalf("%d VUs waiting after 5 minutes, want %d", waiting.Load(), n-1)
		}
	}
	b.ReportMetric(float64(int64(inUse())-int64(before))/float64(n), "B/VU")
	cancel()
	if err := <-done; err != nil {
		b.Fatal(err)
	}
}
