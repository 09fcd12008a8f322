package loadtest

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"strconv"
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
// rating, then the integral APDEX, the operations cut short at the end
// (scored frustrated past 4T, the others not scored), the per-stage
// figures of a profile of several steps, and the error codes seen.
func PrintSummary(w io.Writer, doc *results.Document, out engine.Outcome) {
	fmt.Fprintf(w, "\nrun %s after %s", doc.Status, out.Elapsed.Round(100*time.Millisecond))
	if out.Cancelled > 0 {
		var scored int64
		for _, r := range doc.Operations {
			scored += r.CutShort.Scored()
		}
		fmt.Fprintf(w, " (%d operations cut short at the end: %d scored frustrated, %d not scored)", out.Cancelled, scored, out.Cancelled-scored)
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
			name(r.Name), results.FormatMs(r.TargetMs), r.Count, r.Errors, r.PerSecond,
			results.FormatMs(r.Response.P50), results.FormatMs(r.Response.P95), results.FormatMs(r.Response.P99), results.FormatMs(r.Response.Max),
			results.FormatMs(r.PoolWait.P95), r.Apdex.String(), r.Apdex.Rating().Label())
	}
	fmt.Fprintf(tw, "%s\t\t%d\t%d\t%.1f\t\t\t\t\t\t%s\t%s\t\n", name("all (integral)"), doc.Totals.Count, doc.Totals.Errors, doc.Totals.PerSecond,
		doc.Integral.String(), doc.Integral.Rating)
	tw.Flush()
	fmt.Fprintf(w, "\nintegral APDEX %s (%s): priority-weighted mean of the key operations' scores\n", doc.Integral.String(), doc.Integral.Rating)
	printCutShort(w, doc)
	printUnresponsive(w, doc)
	printStages(w, doc)
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
	printTempFull(w, doc)
	for _, r := range doc.Operations {
		if r.Apdex.SmallSample() {
			fmt.Fprintf(w, "* fewer than %d samples: APDEX of such operations is indicative only\n", apdex.MinSamples)
			break
		}
	}
	for _, r := range doc.Operations {
		if r.Apdex.NS() {
			fmt.Fprintln(w, NSLegend)
			break
		}
	}
}

// NSLegend explains the APDEX "NS" of the summary's table.
const NSLegend = "NS: no samples: no execution of the operation was scored, so it has no APDEX and no part in the integral"

// fmtElapsed rounds elapsed time to the progress period's precision.
func fmtElapsed(d, period time.Duration) string {
	if period < time.Second {
		return d.Round(100 * time.Millisecond).String()
	}
	return d.Round(time.Second).String()
}

// printProgress writes a line every opts.Progress until done: elapsed,
// VUs, VUs inside an operation and waiting for a connection, erplab's own
// executions per second over the last period ("tps", completed key
// operations, warm-up included), errors since the start, then for the last
// period ("last 5s") the worst p95 against its T and the integral APDEX,
// and the integral APDEX since the start of scoring. The samplers' figures
// follow (their "server tps" is PostgreSQL's commit rate, which
// pg_stat_database reports with a delay).
func printProgress(say func(string, ...any), rec *record.Recorder, obs *sampler.Session, health *engine.Health, stream *results.Stream, opts Options, done <-chan struct{}) {
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
			win := rec.TakeWindow()
			vus, waiters, inFlight := rec.Gauges()
			n := s.Count + s.Warmup
			rate := float64(n-lastCount) / now.Sub(last).Seconds()
			lastCount, last = n, now
			say("%s", progressLine(progressFigures{
				Elapsed: fmtElapsed(now.Sub(rec.Start()), opts.Progress), Total: total, Period: opts.Progress,
				VUs: vus, InFlight: inFlight, Waiters: waiters, TPS: rate, Snapshot: s, Window: win,
				Open: opts.Rate != nil, Warmup: now.Sub(rec.Start()) < opts.Warmup, Obs: obsLine(obs),
				Server: health.State().Describe(now), StreamFailed: stream.Err() != nil,
			}))
		}
	}
}

func obsLine(obs *sampler.Session) string {
	if obs == nil {
		return ""
	}
	return obs.ProgressLine()
}

// progressFigures is what one progress line shows.
type progressFigures struct {
	Elapsed                string
	Total, Period          time.Duration
	VUs, InFlight, Waiters int64
	TPS                    float64 // erplab's completed executions per second in the period
	Snapshot               record.Snapshot
	Window                 record.Window
	Open, Warmup           bool
	Obs                    string // the samplers' part, "" without
	// Server is the engine's word on the server when it is not fine
	// (engine.ServerState.Describe), "" otherwise.
	Server string
	// StreamFailed: the results stream stopped on a write error.
	StreamFailed bool
}

// progressLine formats one progress line, e.g.
// "  10s/1m0s  VUs 20  in op 20  waiting 12  tps 24.8  errors 0  last 5s: p95 post_order 412ms (T 200ms) APDEX 0.61  since start: APDEX 0.83  | active 8 ...".
func progressLine(f progressFigures) string {
	line := fmt.Sprintf("%5s/%s  VUs %d  in op %d  waiting %d  tps %.1f  errors %d",
		f.Elapsed, f.Total, f.VUs, f.InFlight, f.Waiters, f.TPS, f.Snapshot.Errors)
	if f.Server != "" {
		line += "  [" + f.Server + "]"
	}
	if f.StreamFailed {
		line += "  [results stream FAILED]"
	}
	if f.Open {
		line += fmt.Sprintf("  backlog %d", f.Snapshot.Backlog)
		if f.Snapshot.Skipped > 0 {
			line += fmt.Sprintf("  skipped %d", f.Snapshot.Skipped)
		}
	}
	if f.Warmup {
		line += "  (warm-up)"
	} else {
		line += "  last " + f.Period.String() + ":"
		if f.Window.WorstOp != "" {
			line += fmt.Sprintf(" p95 %s %s (T %s)", f.Window.WorstOp, results.FormatMs(float64(f.Window.WorstP95)/1e6), results.FormatMs(float64(f.Window.WorstTarget)/1e6))
		}
		if f.Window.ApdexOK {
			line += " APDEX " + apdex.FormatValue(f.Window.Apdex)
		} else {
			line += " no executions"
		}
		if f.Snapshot.ApdexOK {
			line += "  since start: APDEX " + apdex.FormatValue(f.Snapshot.Apdex)
		}
	}
	if f.Obs != "" {
		line += "  | " + f.Obs
	}
	return line
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
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%d\t\n", r.Name, results.FormatMs(r.Lag.P50), results.FormatMs(r.Lag.P99), results.FormatMs(r.Lag.Max), r.Skipped, r.Late)
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

// printCutShort lists, per operation, the executions still running when
// the run ended: those already past 4T are in the APDEX as frustrated
// (and the table's APDEX counts them), the others are not scored.
func printCutShort(w io.Writer, doc *results.Document) {
	header := false
	for _, r := range doc.Operations {
		c := r.CutShort
		if c.Total() == 0 {
			continue
		}
		if !header {
			fmt.Fprintf(w, "cut short at the end (still running after the graceful stop; past 4T scored frustrated, the others not scored):\n")
			header = true
		}
		var parts []string
		if c.Frustrated > 0 {
			parts = append(parts, fmt.Sprintf("%d past 4T = %s, scored frustrated (longest %s)", c.Frustrated, results.FormatMs(4*r.TargetMs), results.FormatMs(c.FrustratedMaxMs)))
		}
		if c.NotScored > 0 {
			parts = append(parts, fmt.Sprintf("%d not scored (longest %s)", c.NotScored, results.FormatMs(c.NotScoredMaxMs)))
		}
		fmt.Fprintf(w, "  %s: %s\n", r.Name, strings.Join(parts, ", "))
	}
}

// printUnresponsive says when the server answered nothing during the run
// (doc.ServerUnresponsive).
func printUnresponsive(w io.Writer, doc *results.Document) {
	for _, sp := range doc.ServerUnresponsive {
		if sp.UntilEnd {
			fmt.Fprintf(w, "the server stopped answering at t=%s s and had not answered by the end (%d operations waiting): figures after t=%s s are incomplete\n",
				fmtSeconds(sp.FromS), sp.MaxWaiting, fmtSeconds(sp.FromS))
			continue
		}
		fmt.Fprintf(w, "the server answered nothing from t=%s s to t=%s s (%d operations waiting)\n", fmtSeconds(sp.FromS), fmtSeconds(sp.ToS), sp.MaxWaiting)
	}
}

// printStages writes the per-step figures of a load profile of several
// steps (doc.Stages): per step its span and VUs, then per key operation
// count, rate, p50/p95/p99 and APDEX, and the step's integral APDEX.
func printStages(w io.Writer, doc *results.Document) {
	if len(doc.Stages) == 0 {
		return
	}
	fmt.Fprintf(w, "\nper stage (executions counted in the stage in which they completed):\n")
	width := len("all (integral)")
	for _, r := range doc.Operations {
		width = max(width, len(r.Name))
	}
	name := func(s string) string { return fmt.Sprintf("%-*s", width, s) }
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "stage\tspan\tVUs\t%s\tcount\terrors\tper s\tp50\tp95\tp99\tAPDEX [T]\t\n", name("key operation"))
	for _, st := range doc.Stages {
		vus := fmt.Sprint(st.TargetVUs)
		if st.FromVUs != st.TargetVUs {
			vus = fmt.Sprintf("%d->%d", st.FromVUs, st.TargetVUs)
		}
		first := fmt.Sprintf("%d\t%s-%ss\t%s", st.Stage, fmtSeconds(st.StartS), fmtSeconds(st.EndS), vus)
		for _, op := range st.Operations {
			fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%.1f\t%s\t%s\t%s\t%s\t\n", first, name(op.Name), op.Count, op.Errors, op.PerSecond,
				results.FormatMs(op.Response.P50), results.FormatMs(op.Response.P95), results.FormatMs(op.Response.P99), op.Apdex.String())
			first = "\t\t"
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%.1f\t\t\t\t%s\t\n", first, name("all (integral)"), st.Count, st.Errors, st.PerSecond, st.Integral.String())
	}
	tw.Flush()
}

// fmtSeconds prints seconds since the start without needless decimals.
func fmtSeconds(s float64) string { return strconv.FormatFloat(math.Round(s*10)/10, 'f', -1, 64) }

// PrintObservations writes what the samplers attributed to key operations
// and the run's churn, from doc's extra.observations (nothing without):
// the temp-relation file churn and shared-invalidation estimate (mean and
// largest after the warm-up), then per key operation its top waits (share
// of its active backends' samples) and, from pg_stat_statements, its
// statements' planning and execution time per execution of the operation;
// when pg_stat_statements is absent, one line saying how to enable it;
// then the relation locks each operation held (printLocks).
func PrintObservations(w io.Writer, doc *results.Document) {
	raw, ok := doc.Extra["observations"]
	if !ok {
		return
	}
	o, err := sampler.ReadObservations(raw)
	if err != nil {
		return
	}
	var warmup float64
	var p struct {
		WarmupS float64 `json:"warmup_s"`
	}
	if json.Unmarshal(doc.Parameters, &p) == nil {
		warmup = p.WarmupS
	}
	if c, ok := o.Churn(warmup); ok {
		fmt.Fprintf(w, "temp-relation file churn: %.0f files/s mean, %.0f max (pg_class inserts + updates); shared invalidation ~%.0f msg/s mean, %.0f max = %.2f queue/s of %d messages (estimate from catalog changes); SInval waits %.1f %% of active\n",
			c.RelFilesMean, c.RelFilesMax, c.SInvalMean, c.SInvalMax, c.SInvalQueuesMean, sampler.SInvalQueueSize, c.SInvalWaitPctMean)
	}
	printInvalidation(w, doc)
	totals := o.OpWaitTotals()
	st := o.Statements
	stmts := map[string]sampler.OpStatements{}
	if st != nil {
		for _, x := range st.Operations {
			stmts[x.Operation] = x
		}
	}
	execs := map[string]int64{}
	for _, r := range doc.Operations {
		execs[r.Name] = r.Count + r.WarmupCount
	}
	if len(totals) > 0 || len(stmts) > 0 {
		fmt.Fprintf(w, "\nper key operation (waits: its active backends at each sample; plan/exec: pg_stat_statements per execution of the operation):\n")
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintf(tw, "key operation\tsamples\ttop waits\tstatements\tplan ms\texec ms\t\n")
		for _, r := range doc.Operations {
			top, n := sampler.TopWaits(totals[r.Name], 3)
			if _, ok := stmts[r.Name]; n == 0 && !ok && execs[r.Name] == 0 {
				continue // not in the mix
			}
			parts := make([]string, 0, len(top))
			for _, x := range top {
				parts = append(parts, fmt.Sprintf("%s %.0f %%", x.Wait, x.Pct))
			}
			waits := strings.Join(parts, ", ")
			if waits == "" {
				waits = "-"
			}
			plan, exec, ns := "-", "-", "-"
			if x, ok := stmts[r.Name]; ok && execs[r.Name] > 0 {
				e := float64(execs[r.Name])
				plan, exec, ns = fmt.Sprintf("%.2f", x.PlanMs/e), fmt.Sprintf("%.2f", x.ExecMs/e), fmt.Sprint(x.Statements)
			}
			fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\t%s\t\n", r.Name, n, waits, ns, plan, exec)
		}
		tw.Flush()
		if st != nil {
			fmt.Fprintf(w, "statements: %d calls, %.1f %% of the workload's attributed to key operations; not attributed: observer %d, other %d\n",
				st.Total.Calls, st.AttributedPct(), st.ObserverCalls, st.OtherCalls)
		}
		if x, ok := stmts[""]; ok {
			fmt.Fprintf(w, "not attributed to any key operation: %d statements, %.0f calls, plan %.0f ms, exec %.0f ms in all\n", x.Statements, x.Calls, x.PlanMs, x.ExecMs)
		}
	}
	if st != nil && st.Note != "" {
		fmt.Fprintln(w, st.Note)
	}
	printLocks(w, o.Locks)
}

// printLocks writes the relation locks per key operation (pg_locks at
// each sample), one line each, most held first; nothing when none were
// read or none held.
func printLocks(w io.Writer, l *sampler.Locks) {
	if l == nil || len(l.Operations) == 0 {
		return
	}
	fmt.Fprintf(w, "relation locks per key operation (pg_locks, each backend running it at a sample):\n")
	for _, x := range l.Operations {
		name := x.Operation
		if name == "" {
			name = "a backend"
		}
		fmt.Fprintf(w, "  %s %s\n", name, x.Phrase())
	}
}

// printTempFull names the key operations whose executions failed on a
// full temp tablespace (53100 on a temp relation's or temp file's path,
// from the errors' messages), the trap and how to size it.
func printTempFull(w io.Writer, doc *results.Document) {
	fulls := results.TempFulls(doc.Operations)
	if len(fulls) == 0 {
		return
	}
	results.SortTempFulls(fulls)
	for _, f := range fulls {
		fmt.Fprintln(w, f.Line())
	}
	fmt.Fprintf(w, "  the trap: %s\n  the size: %s\n", results.TempFullTrap, results.TempFullSize)
}
