package profile_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"text/tabwriter"
	"time"

	"github.com/prometheus/procfs"
	"gonum.org/v1/gonum/stat"

	"github.com/erplab/erplab/internal/hostfacts"
	"github.com/erplab/erplab/internal/opmap"
	"github.com/erplab/erplab/internal/profile"
)

// TestMeasureOverhead prints the overhead figures of the README
// (ERPLAB_PROFILE_MEASURE=1; ERPLAB_PROFILE_ROUNDS rounds, default 10, of
// ERPLAB_PROFILE_ROUND each per variant, default 3s; ERPLAB_PROFILE_VARIANTS
// a comma list of variant names, default all; off is always run): a
// select-only load (3 connections) on the server under each variant of
// overheadVariants in turn, the order rotated each round so that each
// variant takes each place equally often, after one warm-up pass not
// counted. Per variant: the median tps and its ratio to off (ratio of
// medians, 95 % bootstrap interval), the median and range of the ratios
// to the off slot of the same round, the server's and this process's
// (the client's) CPU per transaction as ratios to off, perf's own CPU
// while sampling, the host's busy share and the server samples per
// second; then the subsystem shares each perf variant saw, the cost of
// the /proc scan and the load average before and after. Run it with
// -timeout 0 (each slot takes the round plus about 2 s of start-up,
// settling and perf script).
func TestMeasureOverhead(t *testing.T) {
	if os.Getenv("ERPLAB_PROFILE_MEASURE") == "" {
		t.Skip("set ERPLAB_PROFILE_MEASURE=1 to measure profiling overhead")
	}
	needPerf(t)
	rounds := 10
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
	opm := opmap.New([]string{"select"})
	vs := overheadVariants(dsn, pm, opm)
	if names := os.Getenv("ERPLAB_PROFILE_VARIANTS"); names != "" {
		keep := map[string]bool{"off": true}
		for _, n := range strings.Split(names, ",") {
			keep[strings.TrimSpace(n)] = true
		}
		var sel []overheadVariant
		for _, v := range vs {
			if keep[v.name] {
				sel = append(sel, v)
				delete(keep, v.name)
			}
		}
		delete(keep, "off")
		if len(keep) > 0 {
			t.Fatalf("ERPLAB_PROFILE_VARIANTS: unknown %v (known: %s)", keep, variantNames(vs))
		}
		vs = sel
	}
	load0 := loadavg()
	// The load's backends exit after their connections close: wait for
	// the postmaster to reap them (their CPU moves to its cutime); the
	// previous slot's garbage (perf script's parse) is collected first.
	settle := func() float64 { runtime.GC(); time.Sleep(time.Second); return treeCPU(t, pm) }
	slot := func(v overheadVariant) overheadSlot {
		c0 := settle()
		stop, err := v.start(ctx)
		if err != nil {
			t.Fatalf("%s: %v", v.name, err)
		}
		s0, b0 := selfCPU(t), hostCPU(t)
		lctx, cancel := context.WithTimeout(ctx, d)
		n := loadOps(lctx, t, dsn, 3, "", selectLoop, opm)
		cancel()
		s1, b1 := selfCPU(t), hostCPU(t) // before stop: perf script's parsing is not the recording's cost
		sum, err := stop()
		if err != nil {
			t.Fatalf("%s: %v", v.name, err)
		}
		c1 := settle()
		o := overheadSlot{tps: float64(n) / d.Seconds(), srvUS: 1e6 * (c1 - c0) / float64(n), cliUS: 1e6 * (s1 - s0) / float64(n),
			busyPct: 100 * b1.busy(b0), sum: sum}
		if sum != nil {
			o.perfPct = 100 * sum.PerfSamplingCPUS / (sum.DurationS * float64(runtime.NumCPU()))
		}
		return o
	}
	for _, v := range vs { // warm-up pass: caches, the table in shared buffers, perf's first start
		slot(v)
	}
	res := map[string][]overheadSlot{}
	for r := 0; r < rounds; r++ {
		line := fmt.Sprintf("round %d (load %s):", r+1, loadavg())
		for k := range vs {
			v := vs[(r+k)%len(vs)]
			o := slot(v)
			res[v.name] = append(res[v.name], o)
			line += fmt.Sprintf(" %s %.0f tps %.0f+%.0f µs/tx;", v.name, o.tps, o.srvUS, o.cliUS)
		}
		t.Log(line)
	}
	t.Log("\n" + overheadTable(vs, res))
	for _, v := range vs {
		if sh := pooledShares(res[v.name]); sh != "" {
			t.Logf("%s attribution: %s", v.name, sh)
		}
	}
	all, tree := scanCPU(t, pm)
	t.Logf("/proc scan every 200 ms: every process %.3f ms CPU per scan (%.2f %% of one CPU), the postmaster's tree %.3f ms (%.2f %%)",
		1e3*all, 100*all/0.2, 1e3*tree, 100*tree/0.2)
	t.Logf("load average: before %s; after %s; %d rounds of %s per variant, %d CPUs", load0, loadavg(), rounds, d, runtime.NumCPU())
	for _, v := range vs {
		if len(res[v.name]) != rounds || res[v.name][0].tps <= 0 {
			t.Errorf("%s: no throughput measured", v.name)
		}
	}
}

// overheadVariant is one way of running a measured slot: start begins
// what the variant adds to the load (nothing for off) and returns stop,
// which ends it and returns the profile (nil without perf).
type overheadVariant struct {
	name, what string
	start      func(ctx context.Context) (stop func() (*profile.Summary, error), err error)
}

// overheadVariants are the variants TestMeasureOverhead compares: off;
// perf as erplab runs it (499 Hz, call graphs); 499 Hz without call
// graphs; 99 Hz with; the session without perf (the /proc poll and the
// opmap timeline run --profile keeps). Every perf variant also keeps the
// timeline, as run --profile does.
func overheadVariants(dsn string, pm int, opm *opmap.Map) []overheadVariant {
	timeline := func() func() {
		tl := opm.StartTimeline(time.Now(), 1<<20)
		return func() { opm.StopTimeline(tl) }
	}
	perfV := func(name, what string, o profile.Options) overheadVariant {
		return overheadVariant{name, what, func(ctx context.Context) (func() (*profile.Summary, error), error) {
			sess, err := profile.Begin(ctx, dsn, o)
			if err != nil {
				return nil, err
			}
			stopTL := timeline()
			return func() (*profile.Summary, error) {
				stopTL()
				sum, _, err := sess.End(ctx)
				return sum, err
			}, nil
		}}
	}
	return []overheadVariant{
		{"off", "no profiling", func(context.Context) (func() (*profile.Summary, error), error) {
			return func() (*profile.Summary, error) { return nil, nil }, nil
		}},
		perfV("perf-499-g", "erplab's recording: perf -F 499 -g, /proc poll, timeline", profile.Options{}),
		perfV("perf-499-flat", "perf -F 499 without -g (leaf only)", profile.Options{NoCallGraph: true}),
		perfV("perf-99-g", "perf -F 99 -g", profile.Options{Frequency: 99}),
		{"session-only", "the /proc poll every 200 ms and the timeline, no perf", func(context.Context) (func() (*profile.Summary, error), error) {
			stopTL, stopPoll := timeline(), profile.StartPoll("/proc", []int{pm})
			return func() (*profile.Summary, error) { stopPoll(); stopTL(); return nil, nil }, nil
		}},
	}
}

func variantNames(vs []overheadVariant) string {
	var n []string
	for _, v := range vs {
		n = append(n, v.name)
	}
	return strings.Join(n, ",")
}

// overheadSlot is one measured slot: throughput (transactions/s), the
// server's and the client's CPU per transaction (µs), perf's CPU while
// sampling (% of all CPUs), the host's busy share (%) and the profile.
type overheadSlot struct {
	tps, srvUS, cliUS, perfPct, busyPct float64
	sum                                 *profile.Summary
}

// overheadTable is the table of TestMeasureOverhead, one row per
// variant; ratios are to off.
func overheadTable(vs []overheadVariant, res map[string][]overheadSlot) string {
	col := func(xs []overheadSlot, f func(overheadSlot) float64) []float64 {
		out := make([]float64, len(xs))
		for i, x := range xs {
			out[i] = f(x)
		}
		return out
	}
	tps := func(o overheadSlot) float64 { return o.tps }
	srv := func(o overheadSlot) float64 { return o.srvUS }
	cli := func(o overheadSlot) float64 { return o.cliUS }
	off := res["off"]
	var b strings.Builder
	w := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	fmt.Fprintln(w, "variant\ttps\ttps/off (95% boot)\tpaired tps/off median [min, max]\tserver µs/tx\tserver/off (95% boot)\tclient µs/tx\tclient/off (95% boot)\tperf CPU %\thost busy %\tserver samples/s")
	for _, v := range vs {
		xs := res[v.name]
		pairs := make([]float64, len(xs))
		for i := range xs {
			pairs[i] = xs[i].tps / off[i].tps
		}
		r, lo, hi := medianRatio(col(xs, tps), col(off, tps))
		pm, pmin, pmax := median(pairs), slices.Min(pairs), slices.Max(pairs)
		sr, slo, shi := medianRatio(col(xs, srv), col(off, srv))
		cr, clo, chi := medianRatio(col(xs, cli), col(off, cli))
		rate := 0.0
		for _, x := range xs {
			if x.sum != nil && x.sum.DurationS > 0 {
				rate += float64(x.sum.Samples) / x.sum.DurationS / float64(len(xs))
			}
		}
		fmt.Fprintf(w, "%s\t%.0f\t%.3f [%.3f, %.3f]\t%.3f [%.3f, %.3f]\t%.1f\t%.3f [%.3f, %.3f]\t%.1f\t%.3f [%.3f, %.3f]\t%.2f\t%.0f\t%.0f\n",
			v.name, median(col(xs, tps)), r, lo, hi, pm, pmin, pmax, median(col(xs, srv)), sr, slo, shi, median(col(xs, cli)), cr, clo, chi,
			median(col(xs, func(o overheadSlot) float64 { return o.perfPct })), median(col(xs, func(o overheadSlot) float64 { return o.busyPct })), rate)
	}
	w.Flush()
	for _, v := range vs {
		fmt.Fprintf(&b, "  %s: %s\n", v.name, v.what)
	}
	return b.String()
}

// pooledShares is the subsystem shares of the slots' profiles pooled
// (their samples added), the top eight, "" without profiles.
func pooledShares(xs []overheadSlot) string {
	n := map[string]int{}
	total := 0
	var order []string
	for _, x := range xs {
		if x.sum == nil {
			continue
		}
		for _, s := range x.sum.Subsystems {
			if _, ok := n[s.Name]; !ok {
				order = append(order, s.Name)
			}
			n[s.Name] += s.Samples
			total += s.Samples
		}
	}
	if total == 0 {
		return ""
	}
	sort.SliceStable(order, func(i, j int) bool { return n[order[i]] > n[order[j]] })
	var parts []string
	for _, s := range order[:min(8, len(order))] {
		parts = append(parts, fmt.Sprintf("%s %.1f", s, 100*float64(n[s])/float64(total)))
	}
	return fmt.Sprintf("%d samples: %s", total, strings.Join(parts, ", "))
}

func median(xs []float64) float64 {
	y := append([]float64(nil), xs...)
	sort.Float64s(y)
	return stat.Quantile(0.5, stat.LinInterp, y, nil)
}

// hostTimes are the host's CPU seconds, busy and in all (/proc/stat).
type hostTimes struct{ busySec, allSec float64 }

// busy is the busy fraction of the host's CPU time from before to h.
func (h hostTimes) busy(before hostTimes) float64 {
	if h.allSec <= before.allSec {
		return 0
	}
	return (h.busySec - before.busySec) / (h.allSec - before.allSec)
}

func hostCPU(t *testing.T) hostTimes {
	t.Helper()
	fs, err := procfs.NewDefaultFS()
	if err != nil {
		t.Fatal(err)
	}
	st, err := fs.Stat()
	if err != nil {
		t.Fatal(err)
	}
	c := st.CPUTotal
	idle := c.Idle + c.Iowait
	all := idle + c.User + c.Nice + c.System + c.IRQ + c.SoftIRQ + c.Steal
	return hostTimes{busySec: all - idle, allSec: all}
}

// medianRatio is median(a)/median(b) with a 95 % percentile bootstrap
// interval (each side resampled with replacement, 4,000 times).
func medianRatio(a, b []float64) (r, lo, hi float64) {
	r = median(a) / median(b)
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
		rs[i] = median(ra) / median(rb)
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
