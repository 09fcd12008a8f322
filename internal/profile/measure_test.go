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
	"unsafe"

	"github.com/prometheus/procfs"
	"gonum.org/v1/gonum/stat"

	"github.com/erplab/erplab/internal/hostfacts"
	"github.com/erplab/erplab/internal/opmap"
	"github.com/erplab/erplab/internal/pgtest"
	"github.com/erplab/erplab/internal/profile"
)

// measureRounds returns the measurements' rounds (ERPLAB_PROFILE_ROUNDS,
// default 10) and the length of one slot (ERPLAB_PROFILE_ROUND, default
// 3 s).
func measureRounds() (rounds int, slot time.Duration) {
	rounds, slot = 10, 3*time.Second
	if n, err := strconv.Atoi(os.Getenv("ERPLAB_PROFILE_ROUNDS")); err == nil && n > 0 {
		rounds = n
	}
	if v, err := time.ParseDuration(os.Getenv("ERPLAB_PROFILE_ROUND")); err == nil && v > 0 {
		slot = v
	}
	return rounds, slot
}

// TestMeasureOverhead prints the overhead figures of docs/measurements/2026-12-01-profile-overhead.md
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
	pgtest.NeedPerf(t)
	rounds, d := measureRounds()
	dsn := prepare(t)
	ctx := context.Background()
	pm := srv.Cluster(t).PID()
	opm := opmap.New([]string{"select"})
	vs := selectVariants(t, overheadVariants(dsn, pm, opm))
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

// selectVariants keeps the variants ERPLAB_PROFILE_VARIANTS names (a
// comma list; off always), all when unset.
func selectVariants(t *testing.T, vs []overheadVariant) []overheadVariant {
	t.Helper()
	names := os.Getenv("ERPLAB_PROFILE_VARIANTS")
	if names == "" {
		return vs
	}
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
	if len(keep) > 0 {
		t.Fatalf("ERPLAB_PROFILE_VARIANTS: unknown %v (known: %s)", keep, variantNames(vs))
	}
	return sel
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

// TestMeasureSampleCost prints what one perf sample costs the code it
// interrupts (ERPLAB_PROFILE_MEASURE=1, same ERPLAB_PROFILE_ROUNDS,
// ERPLAB_PROFILE_ROUND and ERPLAB_PROFILE_VARIANTS as
// TestMeasureOverhead), measured so that other load on the host does not
// blur it: a thread spins reading the monotonic clock at a call depth of
// gapDepth frames (PostgreSQL's executor stacks are 20-40 deep), and
// every interruption shows as a gap between two reads. A gap from
// gapMin to gapMax during which the thread's own CPU clock advanced too
// is an interrupt (the kernel's tick, perf's hrtimer with its stack
// walk; this kernel has no IRQ time accounting, so the interrupted task
// is charged); a gap the CPU clock did not follow is the thread being
// descheduled and is left out. Per variant, in rotated
// slots: interrupt time per second the thread ran, its ratio to off's,
// and the cost per sample, (interrupt time - off's) / frequency. This is
// the cost of a sample taken in user mode with that stack; samples in
// the kernel walk the kernel stack too.
func TestMeasureSampleCost(t *testing.T) {
	if os.Getenv("ERPLAB_PROFILE_MEASURE") == "" {
		t.Skip("set ERPLAB_PROFILE_MEASURE=1 to measure the cost of a perf sample")
	}
	pgtest.NeedPerf(t)
	rounds, d := measureRounds()
	dsn := prepare(t)
	ctx := context.Background()
	pm := srv.Cluster(t).PID()
	vs := selectVariants(t, overheadVariants(dsn, pm, opmap.New([]string{"select"})))
	res := map[string][]gapStats{}
	for r := 0; r < rounds; r++ {
		for k := range vs {
			v := vs[(r+k)%len(vs)]
			stop, err := v.start(ctx)
			if err != nil {
				t.Fatalf("%s: %v", v.name, err)
			}
			g := spinGaps(d)
			if _, err := stop(); err != nil {
				t.Fatalf("%s: %v", v.name, err)
			}
			res[v.name] = append(res[v.name], g)
		}
	}
	col := func(xs []gapStats, f func(gapStats) float64) []float64 {
		out := make([]float64, len(xs))
		for i, x := range xs {
			out[i] = f(x)
		}
		return out
	}
	irq := func(g gapStats) float64 { return 1e6 * g.gapS / g.ranS }     // µs per s run
	rate := func(g gapStats) float64 { return float64(g.gaps) / g.ranS } // per s run
	off := res["off"]
	var b strings.Builder
	w := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	fmt.Fprintln(w, "variant\tinterrupts/s\tinterrupt µs per s run\t/off (95% boot)\tcost per sample µs, paired median [min, max]\textra interrupts per sample\tCPU lost %\tthread ran %")
	for _, v := range vs {
		xs := res[v.name]
		r, lo, hi := medianRatio(col(xs, irq), col(off, irq))
		cost := "-"
		extra, lost := "-", "-"
		if f := float64(variantFreq(v.name)); f > 0 {
			c := make([]float64, len(xs))
			e := make([]float64, len(xs))
			for i := range xs {
				c[i] = (irq(xs[i]) - irq(off[i])) / f
				e[i] = (rate(xs[i]) - rate(off[i])) / f
			}
			cost = fmt.Sprintf("%.2f [%.2f, %.2f]", median(c), slices.Min(c), slices.Max(c))
			extra = fmt.Sprintf("%.2f", median(e))
			lost = fmt.Sprintf("%.2f", median(c)*f/1e4)
		}
		fmt.Fprintf(w, "%s\t%.0f\t%.0f\t%.3f [%.3f, %.3f]\t%s\t%s\t%s\t%.0f\n", v.name, median(col(xs, rate)), median(col(xs, irq)), r, lo, hi,
			cost, extra, lost, median(col(xs, func(g gapStats) float64 { return 100 * g.ranS / d.Seconds() })))
	}
	w.Flush()
	t.Logf("a thread spinning at call depth %d, gaps of %s-%s counted as interrupts, %d rounds of %s per variant:\n%s", gapDepth, gapMin, gapMax, rounds, d, b.String())
	t.Logf("load average: %s, %d CPUs", loadavg(), runtime.NumCPU())
	if len(off) != rounds || off[0].ranS <= 0 {
		t.Errorf("the spinning thread did not run: %+v", off)
	}
}

// gapMin and gapMax bound the gaps spinGaps counts as interrupts; gapDepth
// is the call depth it spins at.
const (
	gapMin   = time.Microsecond
	gapMax   = 200 * time.Microsecond
	gapDepth = 32
)

// gapStats is one spinGaps run: seconds the thread ran (its CPU clock),
// the interrupt gaps and their seconds in all.
type gapStats struct {
	ranS, gapS float64
	gaps       int
}

// spinGaps spins on a locked thread for d at call depth gapDepth,
// reading the monotonic clock, and sums the gaps between reads.
func spinGaps(d time.Duration) gapStats {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	return spinAt(gapDepth, d)
}

//go:noinline
func spinAt(depth int, d time.Duration) gapStats {
	if depth > 1 {
		g := spinAt(depth-1, d)
		g.gaps += depth & 0 // keeps the frame (no tail call)
		return g
	}
	var g gapStats
	start, cpu0 := time.Now(), threadCPU()
	lastW, lastC := start, cpu0
	prev := time.Now()
	for {
		now := time.Now()
		gap := now.Sub(prev)
		prev = now
		if gap >= gapMin {
			// An interrupt's time is this thread's (no IRQ time
			// accounting here): its CPU clock followed the wall clock
			// over the gap. Otherwise the thread was descheduled. The
			// CPU clock is a system call (about 1 µs here), so it is
			// read only after a gap, and the gap detection restarts
			// after it.
			c := threadCPU()
			if gap < gapMax && c-lastC >= now.Sub(lastW)-gap/2 {
				g.gaps++
				g.gapS += gap.Seconds()
			}
			lastC = c
			lastW = time.Now()
			prev = lastW
		}
		if now.Sub(start) >= d {
			g.ranS = (threadCPU() - cpu0).Seconds()
			return g
		}
	}
}

// threadCPU is this thread's CPU time (CLOCK_THREAD_CPUTIME_ID; a raw
// system call, no scheduler hand-off).
func threadCPU() time.Duration {
	var ts syscall.Timespec
	syscall.RawSyscall(syscall.SYS_CLOCK_GETTIME, 3 /* CLOCK_THREAD_CPUTIME_ID */, uintptr(unsafe.Pointer(&ts)), 0)
	return time.Duration(ts.Nano())
}

// variantFreq is the sampling frequency of a perf variant's name
// ("perf-499-g": 499), 0 for the others.
func variantFreq(name string) int {
	f := strings.Split(name, "-")
	if len(f) < 2 || f[0] != "perf" {
		return 0
	}
	n, _ := strconv.Atoi(f[1])
	return n
}
