package stress

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
)

// WriteTable writes the final table of a report: the host CPU split, one
// row per worker kind with its own user/system time, and the vmstat THP
// counters.
func WriteTable(out io.Writer, r Report) error {
	fmt.Fprintf(out, "host THP mode %s (defrag %s); vm workers' advice: %s; %.1f s\n",
		orDash(r.THPHost), orDash(r.THPDefrag), thpName(r.THP), r.Seconds)
	fmt.Fprintf(out, "host CPU %%: user %.1f  system %.1f  iowait %.1f  softirq %.1f  irq %.1f  steal %.1f  idle %.1f\n\n",
		r.Host.User+r.Host.Nice, r.Host.System, r.Host.Iowait, r.Host.SoftIRQ, r.Host.IRQ, r.Host.Steal, r.Host.Idle)
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "worker\tcount\tops/s\tMiB touched/s\tuser s\tsystem s\tuser %\tsystem %\tsystem share %\t")
	for _, w := range r.Workers {
		mib := "-"
		if w.Kind == KindVM {
			mib = fmt.Sprintf("%.0f", w.TouchedBytesPerS/(1<<20))
		}
		fmt.Fprintf(tw, "%s\t%d\t%.1f\t%s\t%.2f\t%.2f\t%.1f\t%.1f\t%.1f\t\n", w.Kind, w.Count, w.OpsPerS, mib,
			w.UserS, w.SystemS, w.UserPct, w.SystemPct, w.SystemShare)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if _, err := fmt.Fprintf(out, "\nvmstat increments: thp_fault_alloc %d  thp_fault_fallback %d  thp_collapse_alloc %d  compact_stall %d  pgfault %d  pgmajfault %d\n",
		r.VM.THPFaultAlloc, r.VM.THPFaultFallback, r.VM.THPCollapseAlloc, r.VM.CompactStall, r.VM.PgFault, r.VM.PgMajFault); err != nil {
		return err
	}
	for _, e := range r.Errors {
		if _, err := fmt.Fprintf(out, "error: %s\n", e); err != nil {
			return err
		}
	}
	return nil
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func thpName(m string) string {
	switch m {
	case THPAllow:
		return "MADV_HUGEPAGE"
	case THPRefuse:
		return "MADV_NOHUGEPAGE"
	}
	return "none (host default)"
}

// Comparison is the result of CompareTHP.
type Comparison struct {
	THPHost   string `json:"thp_host"`
	THPDefrag string `json:"thp_defrag"`
	Allowed   Report `json:"allowed"`
	Refused   Report `json:"refused"`
}

// CompareTHP runs spec's VM workers (the other workers too, if any) for
// each of the two halves of d: first with madvise(MADV_HUGEPAGE), then
// with madvise(MADV_NOHUGEPAGE), sequentially so they do not compete. The
// host's global THP settings are not changed; with host mode "never" both
// halves get base pages. tick, when not nil, is called about every second
// with a live line. Errors are Start's, or ctx's when interrupted before
// the second half began (the first report is still returned).
func CompareTHP(ctx context.Context, spec Spec, d time.Duration, tick func(string)) (Comparison, error) {
	if spec.VM == 0 {
		spec.VM = 1
	}
	var c Comparison
	for i, mode := range []string{THPAllow, THPRefuse} {
		if err := ctx.Err(); err != nil {
			return c, fmt.Errorf("stress: thp compare interrupted: %w", err)
		}
		s := spec
		s.THP = mode
		rep, err := RunFor(ctx, s, d/2, func(l string) {
			if tick != nil {
				tick(thpName(mode) + " " + l)
			}
		})
		if err != nil {
			return c, err
		}
		if i == 0 {
			c.Allowed = rep
		} else {
			c.Refused = rep
		}
		c.THPHost, c.THPDefrag = rep.THPHost, rep.THPDefrag
	}
	return c, nil
}

// RunFor runs spec for d (or until ctx is done) and returns the report;
// tick, when not nil, gets a live line about every second.
func RunFor(ctx context.Context, spec Spec, d time.Duration, tick func(string)) (Report, error) {
	r, err := Start(ctx, spec)
	if err != nil {
		return Report{}, err
	}
	end := time.NewTimer(d)
	defer end.Stop()
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return r.Stop(), nil
		case <-end.C:
			return r.Stop(), nil
		case <-t.C:
			if tick != nil {
				if l, err := r.Live(); err == nil {
					tick(LiveLine(l))
				}
			}
		}
	}
}

// WriteComparison writes the THP comparison side by side: VM workers'
// throughput and user/system split and the THP counters of each half.
func WriteComparison(out io.Writer, c Comparison) error {
	fmt.Fprintf(out, "host THP mode %s (defrag %s); vm workers run once per advice, one after the other\n\n", orDash(c.THPHost), orDash(c.THPDefrag))
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	a, b := c.Allowed, c.Refused
	wa, wb := a.Worker(KindVM), b.Worker(KindVM)
	fmt.Fprintln(tw, "\tMADV_HUGEPAGE\tMADV_NOHUGEPAGE\t")
	row := func(name, f string, x, y any) { fmt.Fprintf(tw, "%s\t"+f+"\t"+f+"\t\n", name, x, y) }
	row("seconds", "%.1f", a.Seconds, b.Seconds)
	row("vm workers", "%d", wa.Count, wb.Count)
	row("MiB touched/s", "%.0f", wa.TouchedBytesPerS/(1<<20), wb.TouchedBytesPerS/(1<<20))
	row("cycles/s", "%.2f", wa.OpsPerS, wb.OpsPerS)
	row("workers user s", "%.2f", wa.UserS, wb.UserS)
	row("workers system s", "%.2f", wa.SystemS, wb.SystemS)
	row("workers system share %", "%.1f", wa.SystemShare, wb.SystemShare)
	row("system ms per GiB touched", "%.1f", sysPerGiB(wa, a.Seconds), sysPerGiB(wb, b.Seconds))
	row("host user %", "%.1f", a.Host.User+a.Host.Nice, b.Host.User+b.Host.Nice)
	row("host system %", "%.1f", a.Host.System, b.Host.System)
	row("host iowait %", "%.1f", a.Host.Iowait, b.Host.Iowait)
	row("thp_fault_alloc", "%d", a.VM.THPFaultAlloc, b.VM.THPFaultAlloc)
	row("thp_fault_fallback", "%d", a.VM.THPFaultFallback, b.VM.THPFaultFallback)
	row("compact_stall", "%d", a.VM.CompactStall, b.VM.CompactStall)
	row("pgfault", "%d", a.VM.PgFault, b.VM.PgFault)
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, e := range append(append([]string{}, a.Errors...), b.Errors...) {
		if _, err := fmt.Fprintf(out, "error: %s\n", e); err != nil {
			return err
		}
	}
	if c.THPHost == "never" {
		_, err := fmt.Fprintln(out, strings.TrimSpace("note: host THP mode is never: MADV_HUGEPAGE cannot get huge pages, both halves use base pages"))
		return err
	}
	return nil
}

// ParseSpec parses a compact worker list such as "vm=2", "cpu=1,io=1" or
// "vm=2,vm-bytes=512M,thp=nohuge" (for erplab run --stress). Sizes take
// the suffixes K, M, G (powers of 1024). Errors are one line naming the
// bad item.
func ParseSpec(s string) (Spec, error) {
	var sp Spec
	for item := range strings.SplitSeq(s, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		k, v, ok := strings.Cut(item, "=")
		if !ok {
			return Spec{}, fmt.Errorf("stress spec %q: item %q: want name=value", s, item)
		}
		var err error
		switch k {
		case KindCPU:
			sp.CPU, err = strconv.Atoi(v)
		case KindIO:
			sp.IO, err = strconv.Atoi(v)
		case KindVM:
			sp.VM, err = strconv.Atoi(v)
		case "vm-bytes":
			sp.VMBytes, err = ParseSize(v)
		case "thp":
			sp.THP = v
		default:
			return Spec{}, fmt.Errorf("stress spec %q: unknown item %q (want cpu, io, vm, vm-bytes, thp)", s, k)
		}
		if err != nil {
			return Spec{}, fmt.Errorf("stress spec %q: %s: %w", s, item, err)
		}
	}
	return sp, sp.Validate()
}

// ParseSize parses a byte size: a whole number with an optional suffix
// K, M, G or T (powers of 1024; "KiB", "MB" etc. accepted alike).
func ParseSize(v string) (int64, error) {
	t := strings.ToUpper(strings.TrimSpace(v))
	t = strings.TrimSuffix(strings.TrimSuffix(t, "IB"), "B")
	mult := int64(1)
	if n := len(t); n > 0 {
		switch t[n-1] {
		case 'K':
			mult = 1 << 10
		case 'M':
			mult = 1 << 20
		case 'G':
			mult = 1 << 30
		case 'T':
			mult = 1 << 40
		}
		if mult > 1 {
			t = t[:n-1]
		}
	}
	var n int64
	if _, err := fmt.Sscanf(t, "%d", &n); err != nil || n < 0 || fmt.Sprint(n) != t {
		return 0, fmt.Errorf("size %q: want a number with optional K, M, G or T", v)
	}
	if n > (1<<62)/mult {
		return 0, fmt.Errorf("size %q: too large", v)
	}
	return n * mult, nil
}

// sysPerGiB is the VM workers' system time per GiB of pages touched, ms:
// the kernel's cost of faulting and zeroing memory, comparable across
// runs whatever CPU share the workers got.
func sysPerGiB(w Workers, secs float64) float64 {
	gib := w.TouchedBytesPerS * secs / (1 << 30)
	if gib <= 0 {
		return 0
	}
	return 1000 * w.SystemS / gib
}
