package pgbench

import (
	"fmt"
	"io"
	"math"
	"time"

	"github.com/erplab/erplab/internal/apdex"
	"github.com/erplab/erplab/internal/pgbench/script"
	"github.com/erplab/erplab/internal/results"
)

// Report implements workload.Reporter: pgbench 15's familiar end-of-run
// lines (pgbench.c printResults: transaction type, scaling factor, query
// mode, clients, threads, tries, duration or transactions per client,
// processed, failed, retried, skipped, late, latency average and stddev,
// schedule lag, tps), then per script pgbench's lines plus erplab's
// p50/p95/p99/max and APDEX, and with -r the per-command latencies. Figures
// cover the scored part of the run (after --warmup); erplab opens every
// connection before the run starts, so the tps has no connection time in
// it.
func (w *Workload) Report(out io.Writer, doc *results.Document) {
	ops := doc.Operations
	if len(ops) != len(w.opts.Scripts) {
		return
	}
	var processed, failed, retried, retries, skipped, late int64
	var lagMax float64
	var lagSum float64
	all := make([]moments, 0, len(ops))
	for _, r := range ops {
		ok := r.Count - r.Errors
		processed += ok
		failed += r.Errors
		retries += r.Retries
		retried += r.Retried
		skipped += r.Skipped
		late += r.Late
		all = append(all, moments{n: float64(ok), mean: r.Response.Mean, sd: r.Response.StdDev})
		lagSum += r.Lag.Mean * float64(ok)
		lagMax = math.Max(lagMax, r.Lag.Max)
	}
	total := pooled(all)
	if len(w.opts.Scripts) == 1 {
		fmt.Fprintf(out, "transaction type: %s\n", w.opts.Scripts[0].Name)
	} else {
		fmt.Fprintf(out, "transaction type: multiple scripts\n")
	}
	fmt.Fprintf(out, "scaling factor: %d\n", w.scale)
	fmt.Fprintf(out, "query mode: %s\n", w.opts.Mode)
	fmt.Fprintf(out, "number of clients: %d\n", w.opts.Clients)
	fmt.Fprintf(out, "number of threads: %d\n", max(min(w.opts.Threads, w.opts.Clients), 1))
	if w.opts.MaxTries < 0 {
		fmt.Fprintf(out, "maximum number of tries: unlimited\n")
	} else {
		fmt.Fprintf(out, "maximum number of tries: %d\n", max(w.opts.MaxTries, 1))
	}
	if w.opts.TxPerClient > 0 {
		fmt.Fprintf(out, "number of transactions per client: %d\n", w.opts.TxPerClient)
		fmt.Fprintf(out, "number of transactions actually processed: %d/%d\n", processed, int64(w.opts.TxPerClient)*int64(w.opts.Clients))
	} else {
		fmt.Fprintf(out, "duration: %d s\n", int(math.Round(w.opts.Duration.Seconds())))
		fmt.Fprintf(out, "number of transactions actually processed: %d\n", processed)
	}
	fmt.Fprintf(out, "number of failed transactions: %d (%.3f%%)\n", failed, pct(failed, processed+failed))
	withRetries := w.opts.MaxTries < 0 || w.opts.MaxTries > 1
	if withRetries {
		fmt.Fprintf(out, "number of transactions retried: %d (%.3f%%)\n", retried, pct(retried, processed+failed))
		fmt.Fprintf(out, "total number of retries: %d\n", retries)
	}
	if w.opts.Rate && w.opts.LatencyLimit > 0 {
		fmt.Fprintf(out, "number of transactions skipped: %d (%.3f%%)\n", skipped, pct(skipped, processed+skipped))
	}
	if w.opts.LatencyLimit > 0 {
		fmt.Fprintf(out, "number of transactions above the %.1f ms latency limit: %d/%d (%.3f%%)\n",
			msOf(w.opts.LatencyLimit), late, processed, pct(late, processed))
	}
	if processed > 0 {
		fmt.Fprintf(out, "latency average = %.3f ms\n", total.mean)
		fmt.Fprintf(out, "latency stddev = %.3f ms\n", total.sd)
	}
	if w.opts.Rate && processed > 0 {
		fmt.Fprintf(out, "rate limit schedule lag: avg %.3f (max %.3f) ms\n", lagSum/float64(processed), lagMax)
	}
	if doc.Totals.BacklogLeft > 0 {
		fmt.Fprintf(out, "arrivals due but never started (backlog at the end): %d\n", doc.Totals.BacklogLeft)
	}
	if doc.Totals.AbortedVUs > 0 {
		fmt.Fprintf(out, "clients aborted after an error: %d (the results of the run are incomplete)\n", doc.Totals.AbortedVUs)
	}
	tps := 0.0
	if doc.Totals.ScoredSeconds > 0 {
		tps = float64(processed) / doc.Totals.ScoredSeconds
	}
	fmt.Fprintf(out, "tps = %f (without initial connection time)\n", tps)

	totalWeight := 0
	for _, s := range w.opts.Scripts {
		totalWeight += s.Weight
	}
	for i, s := range w.opts.Scripts {
		r := ops[i]
		ok := r.Count - r.Errors
		prefix := ""
		if len(w.opts.Scripts) > 1 {
			prefix = " - "
			fmt.Fprintf(out, "SQL script %d: %s\n", i+1, s.Name)
			fmt.Fprintf(out, " - weight: %d (targets %.1f%% of total)\n", s.Weight, 100*float64(s.Weight)/float64(max(totalWeight, 1)))
			scriptTPS := 0.0
			if doc.Totals.ScoredSeconds > 0 {
				scriptTPS = float64(ok) / doc.Totals.ScoredSeconds
			}
			fmt.Fprintf(out, " - %d transactions (%.1f%% of total, tps = %f)\n", ok, pct(ok, processed), scriptTPS)
			fmt.Fprintf(out, " - number of failed transactions: %d (%.3f%%)\n", r.Errors, pct(r.Errors, r.Count))
			if ok > 0 {
				fmt.Fprintf(out, " - latency average = %.3f ms\n", r.Response.Mean)
				fmt.Fprintf(out, " - latency stddev = %.3f ms\n", r.Response.StdDev)
			}
		}
		if ok > 0 {
			fmt.Fprintf(out, "%slatency p50 = %.3f ms, p95 = %.3f ms, p99 = %.3f ms, max = %.3f ms\n", prefix,
				r.Response.P50, r.Response.P95, r.Response.P99, r.Response.Max)
		}
		fmt.Fprintf(out, "%sAPDEX %s (%s), target time T %s, key operation %s\n", prefix,
			r.Apdex.String(), ratingOf(r.Apdex), time.Duration(r.TargetMs*float64(time.Millisecond)), r.Name)
		if msgs, counts := w.Errors(i); len(msgs) > 0 {
			fmt.Fprintf(out, "%serrors:\n", prefix)
			for j := range msgs {
				fmt.Fprintf(out, "%s  %d x %s\n", prefix, counts[j], msgs[j])
			}
		}
		if w.opts.PerCommand {
			_ = script.WriteCommandReport(out, s, w.CommandStats(i), withRetries, len(w.opts.Scripts) > 1)
		}
	}
}

func ratingOf(s apdex.Score) string {
	if s.NS() {
		return "NS"
	}
	return s.Rating().String()
}

func msOf(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func pct(a, b int64) float64 {
	if b == 0 {
		return 0
	}
	return 100 * float64(a) / float64(b)
}

// moments is a sample's size, mean and standard deviation.
type moments struct{ n, mean, sd float64 }

// pooled combines the moments of several samples into those of their
// union (the population variance of the union: within-sample variance
// plus the spread of the means), as pgbench's single latency stddev over
// all scripts.
func pooled(ms []moments) moments {
	var n, sum float64
	for _, m := range ms {
		n += m.n
		sum += m.n * m.mean
	}
	if n == 0 {
		return moments{}
	}
	mean := sum / n
	var ss float64
	for _, m := range ms {
		ss += m.n * (m.sd*m.sd + (m.mean-mean)*(m.mean-mean))
	}
	return moments{n: n, mean: mean, sd: math.Sqrt(ss / n)}
}
