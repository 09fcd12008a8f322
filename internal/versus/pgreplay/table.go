package pgreplay

import (
	"fmt"
	"github.com/erplab/erplab/internal/versus/measure"
	"io"
	"strings"
	"text/tabwriter"
	"time"
)

// Spread is the median and range of a figure over the rounds.
type Spread = measure.Spread

func spread(v []float64) Spread { return measure.SpreadOf(v) }

// byTool picks tool's measurements, by round.
func byTool(ms []Measurement, tool string) map[int]Measurement {
	out := map[int]Measurement{}
	for _, m := range ms {
		if m.Tool == tool {
			out[m.Round] = m
		}
	}
	return out
}

// Ratios are tool's figures divided by pgreplay's of the same round, over
// the rounds both finished: statements per second (above 1: tool is
// faster) and CPU per statement (below 1: tool spends less).
func (r *Report) Ratios(tool string) (rate, cpu Spread, rounds int) {
	pg, t := byTool(r.Unlimited, Pgreplay), byTool(r.Unlimited, tool)
	var rs, cs []float64
	for round, a := range t {
		b, ok := pg[round]
		if !ok || a.Rate() == 0 || b.Rate() == 0 || b.CPUPerStmt() == 0 {
			continue
		}
		rs = append(rs, a.Rate()/b.Rate())
		cs = append(cs, a.CPUPerStmt()/b.CPUPerStmt())
	}
	return spread(rs), spread(cs), len(rs)
}

// figures is the median and range of f over tool's finished replays.
func figures(ms []Measurement, tool string, f func(Measurement) float64) (Spread, int) {
	var v []float64
	for _, m := range ms {
		if m.Tool == tool && !m.TimedOut && m.Statements > 0 {
			v = append(v, f(m))
		}
	}
	return spread(v), len(v)
}

// Print writes the side-by-side tables: per tool the statements, median
// wall time, statements per second and CPU per statement at unlimited
// speed; the ratios erplab / pgreplay as median [min-max] over the
// rounds; the lag at speed 1; the replays that timed out.
func Print(w io.Writer, r *Report) {
	rounds := 0
	for _, m := range r.Unlimited {
		rounds = max(rounds, m.Round+1)
	}
	fmt.Fprintf(w, "unlimited speed (pgreplay -s %s, erplab --speed 0), %d rounds, medians [min-max]\n\n", Unlimited, rounds)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "tool\tfinished\tstatements\terrors\twall\town time\tstmts/s\tCPU/stmt\t\n")
	for _, tool := range Tools {
		st, n := figures(r.Unlimited, tool, func(m Measurement) float64 { return float64(m.Statements) })
		er, _ := figures(r.Unlimited, tool, func(m Measurement) float64 { return float64(m.Errors) })
		wall, _ := figures(r.Unlimited, tool, func(m Measurement) float64 { return m.Wall.Seconds() })
		own, _ := figures(r.Unlimited, tool, func(m Measurement) float64 { return m.Own.Seconds() })
		rate, _ := figures(r.Unlimited, tool, Measurement.Rate)
		cpu, _ := figures(r.Unlimited, tool, Measurement.CPUPerStmt)
		if n == 0 {
			fmt.Fprintf(tw, "%s\t0/%d\t-\t-\t-\t-\t-\t-\t\n", tool, rounds)
			continue
		}
		fmt.Fprintf(tw, "%s\t%d/%d\t%.0f\t%.0f\t%.1f s\t%.1f s\t%.0f [%.0f-%.0f]\t%.1f µs [%.1f-%.1f]\t\n", tool, n, rounds, st.Median, er.Median,
			wall.Median, own.Median, rate.Median, rate.Min, rate.Max, cpu.Median, cpu.Min, cpu.Max)
	}
	tw.Flush()
	fmt.Fprintf(w, "\nratios erplab / pgreplay per round, median [min-max]\n\n")
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "tool\trounds\tstmts/s ratio\tCPU/stmt ratio\t\n")
	for _, tool := range Tools[1:] {
		rate, cpu, n := r.Ratios(tool)
		if n == 0 {
			fmt.Fprintf(tw, "%s\t0\t-\t-\t\n", tool)
			continue
		}
		fmt.Fprintf(tw, "%s\t%d\t%.2f [%.2f-%.2f]\t%.2f [%.2f-%.2f]\t\n", tool, n, rate.Median, rate.Min, rate.Max, cpu.Median, cpu.Min, cpu.Max)
	}
	tw.Flush()
	fmt.Fprintln(w, "\nstmts/s ratio: goal >= 1 (erplab at least as fast); CPU/stmt ratio: goal <= 1 (no more client CPU per statement);")
	fmt.Fprintln(w, "stmts/s = statements / the process's wall time, reading the log included; CPU = user + system time of the process;")
	fmt.Fprintln(w, "own time: the tool's own figure (pgreplay's total run time, reading included as it streams the log; erplab's replay, after reading the whole log)")
	if len(r.Lag) > 0 {
		printLag(w, r.Lag)
	}
	for _, m := range append(append([]Measurement(nil), r.Unlimited...), r.Lag...) {
		if m.TimedOut {
			fmt.Fprintf(w, "timed out: %s, speed %s, round %d, after %s (client CPU %s); the copy's sessions then: %s\n",
				m.Tool, speedName(m.Speed), m.Round+1, m.Wall.Round(time.Second), m.CPU.Round(100*time.Millisecond), m.Stuck)
		}
	}
}

func printLag(w io.Writer, ms []Measurement) {
	fmt.Fprintf(w, "\nat speed 1 (the captured pace): lag behind schedule (pgreplay reports only its maximum, in whole seconds)\n\n")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "tool\trun\tstatements\terrors\twall\tlag p50\tlag p99\tlag max\tCPU/stmt\t\n")
	for _, m := range ms {
		if m.TimedOut || m.Statements < 0 {
			fmt.Fprintf(tw, "%s\t%d\ttimed out\t\t%.1f s\t\t\t\t\t\n", m.Tool, m.Round+1, m.Wall.Seconds())
			continue
		}
		p50, p99, top := "-", "-", fmt.Sprintf("%.0f s", m.LagMax/1000)
		if m.LagQuantiles {
			p50, p99, top = fmt.Sprintf("%.1f ms", m.LagP50), fmt.Sprintf("%.1f ms", m.LagP99), fmt.Sprintf("%.1f ms", m.LagMax)
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%.1f s\t%s\t%s\t%s\t%.1f µs\t\n", m.Tool, m.Round+1, m.Statements, m.Errors,
			m.Wall.Seconds(), p50, p99, top, m.CPUPerStmt())
	}
	tw.Flush()
}

// Row is a replayed log of the generator table: the workload that made
// it, its lines, and the rounds of both tools on it.
type Row struct {
	Workload Workload
	Lines    int
	Report   *Report
}

// PrintRows writes the replay rows of the generator table (erplab
// vs-pgbench): per log and erplab order, both tools' statements and CPU
// per statement, median [min-max] over the rounds, the ratios erplab /
// pgreplay of CPU per statement and statements per second, pgreplay's
// statements per second and both median peak resident sizes.
func PrintRows(w io.Writer, rows []Row) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "replay\terplab\trounds\terrors\tpgreplay CPU/stmt\terplab CPU/stmt\tCPU ratio\tstmts/s ratio\tpgreplay stmts/s\tpgreplay RSS (anon)\terplab RSS (anon)\t\n")
	us := func(s Spread) string { return fmt.Sprintf("%.1f [%.1f-%.1f] µs", s.Median, s.Min, s.Max) }
	rng := func(s Spread) string { return fmt.Sprintf("%.2f [%.2f-%.2f]", s.Median, s.Min, s.Max) }
	mem := func(ms []Measurement, tool string) string {
		rss, _ := figures(ms, tool, func(m Measurement) float64 { return float64(m.PeakRSS) / (1 << 20) })
		anon, _ := figures(ms, tool, func(m Measurement) float64 { return float64(m.PeakAnon) / (1 << 20) })
		return fmt.Sprintf("%.1f (%.1f) MB", rss.Median, anon.Median)
	}
	for _, r := range rows {
		ms := r.Report.Unlimited
		st, n := figures(ms, Pgreplay, func(m Measurement) float64 { return float64(m.Statements) })
		if n == 0 { // pgreplay finished no round
			st, _ = figures(ms, ErplabNone, func(m Measurement) float64 { return float64(m.Statements) })
		}
		pgErr, _ := figures(ms, Pgreplay, func(m Measurement) float64 { return float64(m.Errors) })
		name := fmt.Sprintf("%s log, %d sessions, %.0f statements", r.Workload.Name, r.Workload.Sessions, st.Median)
		pgCPU, _ := figures(ms, Pgreplay, Measurement.CPUPerStmt)
		pgRate, _ := figures(ms, Pgreplay, Measurement.Rate)
		for _, tool := range Tools[1:] {
			rate, cpu, n := r.Report.Ratios(tool)
			epCPU, _ := figures(ms, tool, Measurement.CPUPerStmt)
			epErr, _ := figures(ms, tool, func(m Measurement) float64 { return float64(m.Errors) })
			if n == 0 {
				fmt.Fprintf(tw, "%s\t%s\t0\t-\t-\t-\t-\t-\t-\t-\t-\t\n", name, strings.TrimPrefix(tool, "erplab "))
				continue
			}
			fmt.Fprintf(tw, "%s\t%s\t%d\t%.0f/%.0f\t%s\t%s\t%s\t%s\t%.0f\t%s\t%s\t\n", name, strings.TrimPrefix(tool, "erplab "), n, pgErr.Median, epErr.Median,
				us(pgCPU), us(epCPU), rng(cpu), rng(rate), pgRate.Median, mem(ms, Pgreplay), mem(ms, tool))
		}
	}
	tw.Flush()
	fmt.Fprintf(w, "\nreplay: the log of the pgbench run named, made on this server, replayed by pgreplay (-s %s) and erplab\n", Unlimited)
	fmt.Fprintln(w, "replay (--speed 0, --order none or gates) onto a fresh copy of the database before it, in a rotated order;")
	fmt.Fprintln(w, "errors: statements that failed, pgreplay/erplab (medians); CPU/stmt: user + system time of the process per")
	fmt.Fprintln(w, "statement; ratios erplab / pgreplay per round: CPU (goal <= 1),")
	fmt.Fprintln(w, "stmts/s = statements / the process's wall time, reading the log included (goal >= 1)")
	for _, r := range rows {
		for _, m := range r.Report.Unlimited {
			if m.TimedOut {
				fmt.Fprintf(w, "timed out: %s log, %s, round %d, after %s; the copy's sessions then: %s\n",
					r.Workload.Name, m.Tool, m.Round+1, m.Wall.Round(time.Second), m.Stuck)
			}
		}
	}
}
