package profile_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"gonum.org/v1/gonum/stat"

	"github.com/erplab/erplab/internal/hostfacts"
	"github.com/erplab/erplab/internal/profile"
)

// TestMeasureOverhead prints the overhead figure of the README
// (ERPLAB_PROFILE_MEASURE=1; ERPLAB_PROFILE_ROUNDS rounds per side,
// default 12, of ERPLAB_PROFILE_ROUND each, default 3s): select-only throughput of the server with profiling
// off and on at 499 Hz, in alternating rounds A B A B ..., as the ratio
// of the tps medians with a 95 % bootstrap interval and the range of the
// ratios of consecutive round pairs; perf's own CPU while sampling; the
// cost of the session's /proc scan; the load average before and after.
func TestMeasureOverhead(t *testing.T) {
	if os.Getenv("ERPLAB_PROFILE_MEASURE") == "" {
		t.Skip("set ERPLAB_PROFILE_MEASURE=1 to measure profiling overhead")
	}
	needPerf(t)
	rounds := 12
	if n, err := strconv.Atoi(os.Getenv("ERPLAB_PROFILE_ROUNDS")); err == nil && n > 0 {
		rounds = n
	}
	d := 3 * time.Second
	if v, err := time.ParseDuration(os.Getenv("ERPLAB_PROFILE_ROUND")); err == nil && v > 0 {
		d = v
	}
	dsn := prepare(t)
	ctx := context.Background()
	pm := srv.Cluster(t).PID()
	load0 := loadavg()
	// The load's backends exit after their connections close: wait for
	// the postmaster to reap them (their CPU moves to its cutime).
	settle := func() float64 { time.Sleep(time.Second); return treeCPU(t, pm) }
	// warm-up round, not counted (caches, the table in shared buffers)
	wctx, cancel := context.WithTimeout(ctx, d)
	load(wctx, t, dsn, 3, "", selectLoop)
	cancel()
	var off, on, offCPU, onCPU, offAll, onAll, perfPct []float64
	for i := 0; i < rounds; i++ {
		c0 := settle()
		s0 := selfCPU(t)
		lctx, cancel := context.WithTimeout(ctx, d)
		n := load(lctx, t, dsn, 3, "", selectLoop)
		cancel()
		s1 := selfCPU(t)
		c1 := settle()
		off = append(off, float64(n)/d.Seconds())
		offCPU = append(offCPU, 1e6*(c1-c0)/float64(n))
		offAll = append(offAll, 1e6*(c1-c0+s1-s0)/float64(n))
		// on: the recording runs; the load's connections open after it
		// started (their backends followed through FORK records).
		sess, err := profile.Begin(ctx, dsn, profile.Options{})
		if err != nil {
			t.Fatal(err)
		}
		s2 := selfCPU(t)
		lctx, cancel = context.WithTimeout(ctx, d)
		m := load(lctx, t, dsn, 3, "", selectLoop)
		cancel()
		s3 := selfCPU(t) // before End: perf script's parsing is not the recording's cost
		sum, _, err := sess.End(ctx)
		if err != nil {
			t.Fatal(err)
		}
		c2 := settle()
		on = append(on, float64(m)/d.Seconds())
		onCPU = append(onCPU, 1e6*(c2-c1)/float64(m))
		onAll = append(onAll, 1e6*(c2-c1+s3-s2+sum.PerfSamplingCPUS)/float64(m))
		perfPct = append(perfPct, 100*sum.PerfSamplingCPUS/(sum.DurationS*float64(runtime.NumCPU())))
		t.Logf("round %d: off %.0f tps %.1f µs server CPU/tx (%.1f with the client); on %.0f tps %.1f µs/tx (%.1f with the client and perf), %d samples; perf while sampling %.2f s CPU (%.2f %% of all CPUs; %.2f s in all)",
			i+1, off[i], offCPU[i], offAll[i], on[i], onCPU[i], onAll[i], sum.Samples, sum.PerfSamplingCPUS, perfPct[i], sum.PerfCPUS)
	}
	pairs := make([]float64, rounds)
	for i := range pairs {
		pairs[i] = on[i] / off[i]
	}
	r, lo, hi := medianRatio(on, off)
	pm1, plo, phi := medianRatio(pairs, []float64{1})
	t.Logf("throughput on/off: ratio of medians %.3f, 95 %% bootstrap [%.3f, %.3f]; median of round-pair ratios %.3f, 95 %% bootstrap [%.3f, %.3f]; pairs %s",
		r, lo, hi, pm1, plo, phi, spread(pairs))
	t.Logf("  tps off %s", spread(off))
	t.Logf("  tps on  %s", spread(on))
	cr, clo, chi := medianRatio(onCPU, offCPU)
	t.Logf("server CPU per transaction on/off: ratio of medians %.3f, 95 %% bootstrap [%.3f, %.3f]", cr, clo, chi)
	ar, alo, ahi := medianRatio(onAll, offAll)
	t.Logf("CPU per transaction of server + client (+ perf while sampling) on/off: ratio of medians %.3f, 95 %% bootstrap [%.3f, %.3f] (the throughput cost on a host where these are all that runs)", ar, alo, ahi)
	t.Logf("perf's own CPU while sampling, %% of all CPUs: %s", spread(perfPct))
	all, tree := scanCPU(t, pm)
	t.Logf("/proc scan every 200 ms: every process %.3f ms CPU per scan (%.2f %% of one CPU), the postmaster's tree %.3f ms (%.2f %%)",
		1e3*all, 100*all/0.2, 1e3*tree, 100*tree/0.2)
	t.Logf("load average: before %s; after %s; %d rounds of %s per side", load0, loadavg(), rounds, d)
	if len(on) != rounds || r <= 0 {
		t.Errorf("no throughput measured: on %v off %v", on, off)
	}
}

// medianRatio is median(a)/median(b) with a 95 % percentile bootstrap
// interval (each side resampled with replacement, 4,000 times).
func medianRatio(a, b []float64) (r, lo, hi float64) {
	med := func(x []float64) float64 {
		y := append([]float64(nil), x...)
		sort.Float64s(y)
		return stat.Quantile(0.5, stat.LinInterp, y, nil)
	}
	r = med(a) / med(b)
	rng := rand.New(rand.NewPCG(21, 499))
	const n = 4000
	rs := make([]float64, n)
	ra, rb := make([]float64, len(a)), make([]float64, len(b))
	for i := range rs {
		for k := range ra {
			ra[k] = a[rng.IntN(len(a))]
		}
		for k := range rb {
			rb[k] = b[rng.IntN(len(b))]
		}
		rs[i] = med(ra) / med(rb)
	}
	sort.Float64s(rs)
	return r, stat.Quantile(0.025, stat.Empirical, rs, nil), stat.Quantile(0.975, stat.Empirical, rs, nil)
}

// scanCPU is the CPU time of one /proc scan, seconds (this thread's
// rusage over 20 and 400 scans): every process's stat, as Session polled before,
// and the postmaster's tree only (hostfacts.Descendants), as it polls now.
func scanCPU(t *testing.T, pm int) (all, tree float64) {
	t.Helper()
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	f, err := hostfacts.New("", "")
	if err != nil {
		t.Fatal(err)
	}
	cpu := func() float64 {
		var ru syscall.Rusage
		if err := syscall.Getrusage(1 /* RUSAGE_THREAD */, &ru); err != nil {
			t.Fatal(err)
		}
		return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()).Seconds()
	}
	const n, m = 20, 400
	c0 := cpu()
	for i := 0; i < n; i++ {
		if _, err := f.ChildPIDs(pm); err != nil {
			t.Fatal(err)
		}
	}
	c1 := cpu()
	for i := 0; i < m; i++ {
		if _, err := f.Descendants([]int{pm}); err != nil {
			t.Fatal(err)
		}
	}
	return (c1 - c0) / n, (cpu() - c1) / m
}

// selfCPU is this process's CPU seconds so far (user and system).
func selfCPU(t *testing.T) float64 {
	t.Helper()
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		t.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()).Seconds()
}

func loadavg() string {
	b, _ := os.ReadFile("/proc/loadavg")
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "unknown"
	}
	return fmt.Sprintf("%s %s %s", f[0], f[1], f[2])
}
