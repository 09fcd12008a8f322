package cli

import (
	"fmt"
	"io"
	"math"
	"strconv"
	"sync"
	"time"

	wpgbench "github.com/erplab/erplab/internal/pgbench"
	"github.com/erplab/erplab/internal/pgbench/script"
	"github.com/erplab/erplab/internal/pgbench/tables"
)

// reportInput is what the end-of-run report is made of.
type reportInput struct {
	cfg      *Config
	w        *wpgbench.Workload
	col      *collector
	doc      *resultsDoc
	scale    int
	layout   tables.Layout
	connTime time.Duration // the set-up connection's
}

// pct is pgbench's 100.0 * a / b printed with %.<prec>f; 0/0 is "NaN" (as
// PostgreSQL's own snprintf prints it).
func pct(a, b int64, prec int) string {
	if b == 0 {
		if a == 0 {
			return "NaN"
		}
		return "Infinity"
	}
	return strconv.FormatFloat(100*float64(a)/float64(b), 'f', prec, 64)
}

// printResults prints pgbench 15-17's end-of-run report (printResults)
// line for line.
func printResults(out io.Writer, in reportInput) {
	c := in.cfg
	p := func(format string, a ...any) { fmt.Fprintf(out, format, a...) }
	total := in.col.total()
	// an incomplete transaction block is counted (Execute succeeded),
	// then its client aborted, as in pgbench
	processed := total.latency.count
	failures := total.failures()
	totalCnt := processed + total.skipped + failures
	seconds := in.doc.Totals.ScoredSeconds

	if len(c.Scripts) == 1 {
		p("transaction type: %s\n", c.Scripts[0].Name)
	} else {
		p("transaction type: multiple scripts\n")
	}
	p("scaling factor: %d\n", in.scale)
	if in.layout.PartitionMethod != "" {
		p("partition method: %s\npartitions: %d\n", in.layout.PartitionMethod, in.layout.Partitions)
	}
	p("query mode: %s\n", c.Mode)
	p("number of clients: %d\n", c.Clients)
	p("number of threads: %d\n", c.Jobs)
	if c.MaxTries > 0 {
		p("maximum number of tries: %d\n", c.MaxTries)
	}
	if c.Duration <= 0 {
		p("number of transactions per client: %d\n", c.Transactions)
		p("number of transactions actually processed: %d/%d\n", processed, int64(c.Transactions)*int64(c.Clients))
	} else {
		p("duration: %d s\n", c.Duration)
		p("number of transactions actually processed: %d\n", processed)
	}
	printFailures(out, c, "", total, totalCnt)
	if totalCnt <= 0 {
		return
	}
	if c.Rate > 0 && c.LatencyLimitMs > 0 {
		p("number of transactions skipped: %d (%s%%)\n", total.skipped, pct(total.skipped, totalCnt, 3))
	}
	if c.LatencyLimitMs > 0 {
		late := "0.000"
		if processed > 0 {
			late = pct(total.late, processed, 3)
		}
		p("number of transactions above the %.1f ms latency limit: %d/%d (%s%%)\n", c.LatencyLimitMs, total.late, processed, late)
	}
	if c.Rate > 0 || c.Progress > 0 || c.LatencyLimitMs > 0 {
		printSimpleStats(out, "latency", total.latency)
	} else {
		suffix := ""
		if failures > 0 {
			suffix = " (including failures)"
		}
		p("latency average = %.3f ms%s\n", 1000*seconds*float64(c.Clients)/float64(totalCnt), suffix)
	}
	if c.Rate > 0 && total.lag.count > 0 {
		p("rate limit schedule lag: avg %.3f (max %.3f) ms\n", total.lag.meanMs(), 0.001*total.lag.max)
	}
	tps := 0.0
	if seconds > 0 {
		tps = float64(processed) / seconds
	}
	if c.Connect {
		d, _ := in.w.ConnectTime()
		avg := 0.0
		if n := processed + failures; n > 0 {
			avg = float64(d) / float64(time.Millisecond) / float64(n)
		}
		p("average connection time = %.3f ms\n", avg)
		p("tps = %f (including reconnection times)\n", tps)
	} else {
		p("initial connection time = %.3f ms\n", float64(in.connTime)/float64(time.Millisecond))
		p("tps = %f (without initial connection time)\n", tps)
	}

	perScript := len(c.Scripts) > 1
	if !perScript && !c.PerCommand {
		return
	}
	totalWeight := 0
	for _, s := range c.Scripts {
		totalWeight += s.Weight
	}
	for i, s := range c.Scripts {
		if perScript {
			d := in.col.script(i)
			n := d.latency.count
			f := d.failures()
			stc := n + d.skipped + f
			stps := 0.0
			if seconds > 0 {
				stps = float64(n) / seconds
			}
			p("SQL script %d: %s\n", i+1, s.Name)
			p(" - weight: %d (targets %s%% of total)\n", s.Weight, pct(int64(s.Weight), int64(totalWeight), 1))
			p(" - %d transactions (%s%% of total, tps = %f)\n", n, pct(n, processed, 1), stps)
			printFailures(out, c, " - ", d, stc)
			if c.Rate > 0 && c.LatencyLimitMs > 0 && stc > 0 {
				p(" - number of transactions skipped: %d (%s%%)\n", d.skipped, pct(d.skipped, stc, 3))
			}
			printSimpleStats(out, " - latency", d.latency)
		}
		if c.PerCommand {
			_ = script.WriteCommandReport(out, s, in.w.CommandStats(i), c.MaxTries != 1, perScript)
		}
	}
}

// printFailures prints the failed, failures by kind (--failures-detailed;
// "other failures" only with pgbench 18's --continue-on-error)
// and retried lines of the total (prefix "") or of a script (" - "),
// percentages of all transactions.
func printFailures(out io.Writer, c *Config, prefix string, d statsData, all int64) {
	f := d.failures()
	fmt.Fprintf(out, "%snumber of failed transactions: %d (%s%%)\n", prefix, f, pct(f, all, 3))
	if c.FailuresDetailed {
		fmt.Fprintf(out, "%snumber of serialization failures: %d (%s%%)\n", prefix, d.serialization, pct(d.serialization, all, 3))
		fmt.Fprintf(out, "%snumber of deadlock failures: %d (%s%%)\n", prefix, d.deadlock, pct(d.deadlock, all, 3))
		if c.ContinueOnError {
			// pgbench 18's line (its --continue-on-error counts other
			// errors as failures); pgbench 15-17 have neither
			fmt.Fprintf(out, "%snumber of other failures: %d (%s%%)\n", prefix, d.other, pct(d.other, all, 3))
		}
	}
	if c.MaxTries != 1 {
		fmt.Fprintf(out, "%snumber of transactions retried: %d (%s%%)\n", prefix, d.retried, pct(d.retried, all, 3))
		fmt.Fprintf(out, "%stotal number of retries: %d\n", prefix, d.retries)
	}
}

// printSimpleStats is pgbench's printSimpleStats: average and standard
// deviation in ms, nothing without samples.
func printSimpleStats(out io.Writer, prefix string, s simpleStats) {
	if s.count == 0 {
		return
	}
	fmt.Fprintf(out, "%s average = %.3f ms\n", prefix, s.meanMs())
	fmt.Fprintf(out, "%s stddev = %.3f ms\n", prefix, s.stddevMs())
}

// printAdditions prints erplab's lines after pgbench's report: per script
// the latency percentiles (HdrHistogram) and APDEX against its target
// time, then where the results document is.
func printAdditions(out io.Writer, in reportInput, path string) {
	for i, op := range in.doc.Operations {
		line := fmt.Sprintf("erplab: script %d %s:", i+1, op.Name)
		if op.Count-op.Errors > 0 {
			line += fmt.Sprintf(" latency p50 = %.3f ms, p95 = %.3f ms, p99 = %.3f ms, max = %.3f ms;",
				op.Response.P50, op.Response.P95, op.Response.P99, op.Response.Max)
		}
		rating := "NS"
		if !op.Apdex.NS() {
			rating = op.Apdex.Rating().String()
		}
		line += fmt.Sprintf(" APDEX %s (%s) at T = %s", op.Apdex.String(), rating, time.Duration(op.TargetMs*float64(time.Millisecond)))
		fmt.Fprintln(out, line)
	}
	if path != "" { // "" = not written (ERPLAB_PGBENCH_OUT=none, or the warning said why)
		fmt.Fprintf(out, "erplab: results: %s\n", path)
	}
}

// printSilences warns of each span in which the server answered nothing
// but after which it answered again (a span lasting until the end is the
// run's error, printed by the caller), e.g. "erplab: warning: the server
// did not answer for 6.0 s (from t=1.2 s)".
func printSilences(w io.Writer, doc *resultsDoc) {
	for _, sp := range doc.ServerUnresponsive {
		if !sp.UntilEnd {
			fmt.Fprintf(w, "erplab: warning: the server did not answer for %.1f s (from t=%.1f s)\n", sp.ToS-sp.FromS, sp.FromS)
		}
	}
}

// progress prints pgbench's -P lines on stderr.
type progress struct {
	done chan struct{}
	wg   sync.WaitGroup
}

func (p *progress) stop() {
	close(p.done)
	p.wg.Wait()
}

// startProgress prints a progress line every -P seconds from the run's
// first transaction (printProgressReport).
func (r *runner) startProgress(col *collector) *progress {
	p := &progress{done: make(chan struct{})}
	c := r.cfg
	if c.Progress == 0 {
		return p
	}
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		select {
		case <-col.started:
		case <-p.done:
			return
		}
		col.mu.Lock()
		start := col.first
		col.mu.Unlock()
		period := time.Duration(c.Progress) * time.Second
		var last statsData
		lastAt := start
		for k := 1; ; k++ {
			t := time.NewTimer(time.Until(start.Add(time.Duration(k) * period)))
			select {
			case <-t.C:
			case <-p.done:
				t.Stop()
				return
			}
			now := time.Now()
			cur := col.total()
			ntx := cur.latency.count - last.latency.count
			run := now.Sub(lastAt).Seconds()
			var lat, sd, lag float64
			if ntx > 0 {
				lat = 0.001 * (cur.latency.sum - last.latency.sum) / float64(ntx)
				sq := (cur.latency.sum2 - last.latency.sum2) / float64(ntx)
				sd = 0.001 * math.Sqrt(math.Max(sq-1e6*lat*lat, 0))
				lag = 0.001 * (cur.lag.sum - last.lag.sum) / float64(ntx)
			}
			tbuf := fmt.Sprintf("%.1f s", now.Sub(start).Seconds())
			if c.ProgressTimestamp {
				tbuf = fmt.Sprintf("%.3f s", float64(now.UnixMicro())/1e6)
			}
			line := fmt.Sprintf("progress: %s, %.1f tps, lat %.3f ms stddev %.3f, %d failed",
				tbuf, float64(ntx)/run, lat, sd, cur.failures()-last.failures())
			if c.Rate > 0 {
				line += fmt.Sprintf(", lag %.3f ms", lag)
				if c.LatencyLimitMs > 0 {
					line += fmt.Sprintf(", %d skipped", cur.skipped-last.skipped)
				}
			}
			if c.MaxTries != 1 {
				line += fmt.Sprintf(", %d retried, %d retries", cur.retried-last.retried, cur.retries-last.retries)
			}
			fmt.Fprintln(r.st.Stderr, line)
			last, lastAt = cur, now
		}
	}()
	return p
}
