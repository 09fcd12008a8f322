package loadtest

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/erplab/erplab/internal/apdex"
	"github.com/erplab/erplab/internal/engine"
	"github.com/erplab/erplab/internal/record"
	"github.com/erplab/erplab/internal/results"
	"github.com/erplab/erplab/internal/sampler"
)

// PrintSummary writes the end-of-run table: per key operation T, count,
// errors, p50/p95/p99/max response time, pool wait p95, APDEX [T] and its
// rating, then the integral APDEX and the error codes seen.
func PrintSummary(w io.Writer, doc *results.Document, out engine.Outcome) {
	fmt.Fprintf(w, "\nrun %s after %s", doc.Status, out.Elapsed.Round(100*time.Millisecond))
	if out.Cancelled > 0 {
		fmt.Fprintf(w, " (%d operations cut short at the end, not counted)", out.Cancelled)
	}
	fmt.Fprintf(w, "; max %d VUs\n\n", out.MaxVUs)
	// Names left-aligned (padded here), figures right-aligned.
	width := len("key operation")
	for _, r := range doc.Operations {
		width = max(width, len(r.Name))
	}
	name := func(s string) string { return fmt.Sprintf("%-*s", width, s) }
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "%s\tT\tcount\terrors\tper s\tp50\tp95\tp99\tmax\twait p95\tAPDEX [T]\trating\t\n", name("key operation"))
	var warm int64
	for _, r := range doc.Operations {
		warm += r.WarmupCount
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%.1f\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t\n",
			name(r.Name), fmtMs(r.TargetMs), r.Count, r.Errors, r.PerSecond,
			fmtMs(r.Response.P50), fmtMs(r.Response.P95), fmtMs(r.Response.P99), fmtMs(r.Response.Max),
			fmtMs(r.PoolWait.P95), r.Apdex.String(), rating(r.Apdex))
	}
	fmt.Fprintf(tw, "%s\t\t%d\t%d\t%.1f\t\t\t\t\t\t%s\t%s\t\n", name("all (integral)"), doc.Totals.Count, doc.Totals.Errors, doc.Totals.PerSecond,
		integralString(doc.Integral), doc.Integral.Rating)
	tw.Flush()
	fmt.Fprintf(w, "\nintegral APDEX %s (%s): priority-weighted mean of the key operations' scores\n", integralString(doc.Integral), doc.Integral.Rating)
	printOpenModel(w, doc, out)
	if warm > 0 {
		fmt.Fprintf(w, "warm-up: %d operations recorded apart, not scored\n", warm)
	}
	if codes := results.SQLStates(doc.Operations); len(codes) > 0 {
		parts := make([]string, 0, len(codes))
		for _, c := range codes {
			var n int64
			for _, r := range doc.Operations {
				n += r.ErrorsBySQLState[c]
			}
			parts = append(parts, fmt.Sprintf("%s x%d", c, n))
		}
		fmt.Fprintf(w, "errors by SQLSTATE: %s\n", strings.Join(parts, ", "))
	}
	for _, r := range doc.Operations {
		if r.Apdex.SmallSample() {
			fmt.Fprintf(w, "* fewer than %d samples: APDEX of such operations is indicative only\n", apdex.MinSamples)
			break
		}
	}
}

func rating(s apdex.Score) string {
	if s.NS() {
		return "NS"
	}
	return s.Rating().String()
}

func integralString(i results.IntegralScore) string {
	if i.NS() {
		return "NS"
	}
	return apdex.FormatValue(i.Value)
}

// fmtMs prints a latency in ms with a unit that keeps 3 significant digits.
func fmtMs(v float64) string {
	switch {
	case v == 0:
		return "-"
	case v < 1:
		return fmt.Sprintf("%.0fµs", v*1000)
	case v < 10:
		return fmt.Sprintf("%.2fms", v)
	case v < 1000:
		return fmt.Sprintf("%.0fms", v)
	case v >= 60000:
		return (time.Duration(v*1e6) / time.Second * time.Second).String()
	default:
		return fmt.Sprintf("%.2fs", v/1000)
	}
}

// fmtElapsed rounds elapsed time to the progress period's precision.
func fmtElapsed(d, period time.Duration) string {
	if period < time.Second {
		return d.Round(100 * time.Millisecond).String()
	}
	return d.Round(time.Second).String()
}

// printProgress writes a line every opts.Progress until done: elapsed, VUs,
// VUs inside an operation and waiting for a connection, operations per
// second over the last period, errors, the worst p95 against its T since
// the start of scoring (cumulative), and the running integral APDEX.
func printProgress(say func(string, ...any), rec *record.Recorder, obs *sampler.Session, opts Options, done <-chan struct{}) {
	t := time.NewTicker(opts.Progress)
	defer t.Stop()
	total := engine.TotalDuration(opts.Stages)
	var lastCount int64
	last := rec.Start()
	for {
		select {
		case <-done:
			return
		case now := <-t.C:
			s := rec.Snapshot()
			vus, waiters, inFlight := rec.Gauges()
			n := s.Count + s.Warmup
			rate := float64(n-lastCount) / now.Sub(last).Seconds()
			lastCount, last = n, now
			line := fmt.Sprintf("%5s/%s  VUs %d  in op %d  waiting %d  %.1f ops/s  errors %d",
				fmtElapsed(now.Sub(rec.Start()), opts.Progress), total, vus, inFlight, waiters, rate, s.Errors)
			if opts.Rate != nil {
				line += fmt.Sprintf("  backlog %d", s.Backlog)
				if s.Skipped > 0 {
					line += fmt.Sprintf("  skipped %d", s.Skipped)
				}
			}
			if now.Sub(rec.Start()) < opts.Warmup {
				line += "  (warm-up)"
			} else {
				if s.WorstOp != "" {
					line += fmt.Sprintf("  worst p95 %s %s (T %s)", s.WorstOp, fmtMs(float64(s.WorstP95)/1e6), fmtMs(float64(s.WorstTarget)/1e6))
				}
				if s.ApdexOK {
					line += "  APDEX " + apdex.FormatValue(s.Apdex)
				}
			}
			if obs != nil {
				if o := obs.ProgressLine(); o != "" {
					line += "  | " + o
				}
			}
			say("%s", line)
		}
	}
}

// printOpenModel writes the open model's figures (skipped arrivals count
// in APDEX as frustrated) (arrivals, schedule lag
// per key operation, skipped, late, the backlog left at the end) and the
// latency-limit and transactions-per-VU counts, when the run had any.
func printOpenModel(w io.Writer, doc *results.Document, out engine.Outcome) {
	t := doc.Totals
	if out.Arrivals > 0 {
		fmt.Fprintf(w, "\nopen model: %d arrivals scheduled; response times run from each arrival's scheduled start\n", out.Arrivals)
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintf(tw, "key operation\tlag p50\tlag p99\tlag max\tskipped\tlate\t\n")
		for _, r := range doc.Operations {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%d\t\n", r.Name, fmtMs(r.Lag.P50), fmtMs(r.Lag.P99), fmtMs(r.Lag.Max), r.Skipped, r.Late)
		}
		tw.Flush()
		fmt.Fprintf(w, "lag = actual start - scheduled start")
		if t.BacklogLeft > 0 {
			fmt.Fprintf(w, "; %d arrivals were due and never started (backlog at the end: the VUs could not keep up)", t.BacklogLeft)
		}
		fmt.Fprintln(w)
	} else if t.Late > 0 {
		fmt.Fprintf(w, "late (above the latency limit): %d\n", t.Late)
	}
	if t.Retries > 0 {
		fmt.Fprintf(w, "retried: %d executions, %d retries in all\n", t.Retried, t.Retries)
	}
	if out.AbortedVUs > 0 {
		fmt.Fprintf(w, "%d VUs stopped after an error for the rest of the run: the results are incomplete\n", out.AbortedVUs)
	}
	if out.Unfinished > 0 {
		fmt.Fprintf(w, "%d VUs stopped before doing all their transactions (the run's time bound or a ramp-down)\n", out.Unfinished)
	}
}
