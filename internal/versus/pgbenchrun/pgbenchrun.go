// Package pgbenchrun compares erplab's load generator with pgbench on the same
// server in one go: for each built-in script and client count, pgbench and
// `erplab pgbench` run the same script for the same time in the same query
// mode, one after the other, and the comparison is their throughput (tps)
// and the client CPU each spent per transaction (user + system time of the
// generator's process from getrusage(2), divided by the transactions it
// completed). Ratios are the result: the machines this runs on are noisy,
// and both generators share the host with the server they load.
package pgbenchrun

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	meas "github.com/erplab/erplab/internal/versus/measure"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/erplab/erplab/internal/conninfo"
	"github.com/erplab/erplab/internal/results"
)

// Options say what to compare.
type Options struct {
	// DSN of a database holding the pgbench tables (libpq key=value or
	// URL); both generators connect to it. Its password reaches them in
	// PGPASSWORD, never on their command lines (conninfo.Split).
	DSN string
	// Pgbench and Erplab are the paths of the two generators' executables.
	Pgbench, Erplab string
	// Scripts are built-in script names ("select-only", "tpcb-like",
	// "simple-update").
	Scripts []string
	// Clients are the client counts (pgbench -c), each compared apart.
	Clients []int
	// Duration of each generator's run (pgbench -T, whole seconds).
	Duration time.Duration
	// Mode is the query mode, pgbench -M: simple, extended or prepared.
	Mode string
	// Dir receives erplab's results files (a temporary directory).
	Dir string
	// Repeat runs every cell this many times (at least 1), alternating
	// the generators, so the spread of the ratios shows the noise.
	Repeat int
	// Progress, when not nil, is told which run starts.
	Progress func(format string, args ...any)
}

// Measurement is one generator's run.
type Measurement struct {
	// Transactions completed (failed ones excluded).
	Transactions int64
	// TPS is the generator's own throughput figure: pgbench's "tps = "
	// (without initial connection time), erplab's transactions per scored
	// second.
	TPS float64
	// CPU is the user + system CPU time of the generator's process.
	CPU time.Duration
	// Wall is the wall time of the process, start-up included.
	Wall time.Duration
}

// CPUPerTx is the client CPU per transaction in µs (0 without
// transactions).
func (m Measurement) CPUPerTx() float64 {
	if m.Transactions == 0 {
		return 0
	}
	return float64(m.CPU.Microseconds()) / float64(m.Transactions)
}

// Pair is one cell of the comparison: both generators on one script and
// client count, Repeat times each (index i of both slices ran back to
// back).
type Pair struct {
	Script  string
	Clients int
	Pgbench []Measurement
	Erplab  []Measurement
}

// Spread is the median and range of a ratio over the repetitions.
type Spread = meas.Spread

func spread(v []float64) Spread { return meas.SpreadOf(v) }

// TPSRatio is erplab's tps divided by pgbench's over the repetitions
// (above 1: erplab drove more transactions).
func (p Pair) TPSRatio() Spread {
	var r []float64
	for i := range min(len(p.Pgbench), len(p.Erplab)) {
		r = append(r, ratio(p.Erplab[i].TPS, p.Pgbench[i].TPS))
	}
	return spread(r)
}

// CPURatio is erplab's CPU per transaction divided by pgbench's over the
// repetitions (below 1: erplab spent less client CPU per transaction).
func (p Pair) CPURatio() Spread {
	var r []float64
	for i := range min(len(p.Pgbench), len(p.Erplab)) {
		r = append(r, ratio(p.Erplab[i].CPUPerTx(), p.Pgbench[i].CPUPerTx()))
	}
	return spread(r)
}

// median returns the median of f over ms.
func median(ms []Measurement, f func(Measurement) float64) float64 {
	v := make([]float64, len(ms))
	for i, m := range ms {
		v[i] = f(m)
	}
	return spread(v).Median
}

func ratio(a, b float64) float64 {
	if b == 0 {
		return 0
	}
	return a / b
}

// Jobs is the -j given to both generators for c clients: one thread per
// client up to the number of CPUs, as a performance engineer would run
// pgbench (erplab runs its clients' goroutines on that many threads,
// GOMAXPROCS).
func Jobs(clients int) int { return max(1, min(clients, runtime.NumCPU())) }

// Run runs every script x client count cell, pgbench and erplab back to
// back (the order alternates from cell to cell so neither always runs on
// a warmer server). It returns the cells done so far with the first
// error: a generator that fails, or ctx cancelled.
func Run(ctx context.Context, opts Options) ([]Pair, error) {
	if opts.Duration < time.Second {
		return nil, fmt.Errorf("versus: duration must be at least 1s, got %s", opts.Duration)
	}
	if opts.Mode == "" {
		opts.Mode = "prepared"
	}
	reps := max(opts.Repeat, 1)
	var out []Pair
	n := 0
	for _, script := range opts.Scripts {
		for _, c := range opts.Clients {
			if c < 1 {
				return out, fmt.Errorf("versus: client count must be >= 1, got %d", c)
			}
			p := Pair{Script: script, Clients: c}
			for range reps {
				var pg, ep Measurement
				steps := []func() error{
					func() (err error) { pg, err = runPgbench(ctx, opts, script, c); return err },
					func() (err error) { ep, err = runErplab(ctx, opts, script, c, n); return err },
				}
				if n%2 == 1 {
					steps[0], steps[1] = steps[1], steps[0]
				}
				for _, step := range steps {
					if err := step(); err != nil {
						if len(p.Pgbench) > 0 {
							out = append(out, p)
						}
						return out, err
					}
				}
				p.Pgbench, p.Erplab = append(p.Pgbench, pg), append(p.Erplab, ep)
				n++
			}
			out = append(out, p)
		}
	}
	return out, nil
}

func (o Options) say(format string, args ...any) {
	if o.Progress != nil {
		o.Progress(format, args...)
	}
}

func secs(d time.Duration) string { return strconv.Itoa(int(d / time.Second)) }

func runPgbench(ctx context.Context, opts Options, script string, clients int) (Measurement, error) {
	opts.say("pgbench  %-12s %2d clients, %s, %s", script, clients, opts.Mode, opts.Duration)
	dsn, env, err := conninfo.Split(opts.DSN)
	if err != nil {
		return Measurement{}, fmt.Errorf("versus: %w", err)
	}
	args := []string{"-n", "-b", script, "-M", opts.Mode, "-c", strconv.Itoa(clients), "-j", strconv.Itoa(Jobs(clients)),
		"-T", secs(opts.Duration), dsn}
	out, m, err := measure(ctx, opts.Pgbench, args, env)
	if err != nil {
		return m, fmt.Errorf("versus: pgbench %s -c %d: %w: %s", script, clients, err, lastLine(out))
	}
	if m.Transactions, m.TPS, err = parsePgbench(out); err != nil {
		return m, fmt.Errorf("versus: pgbench %s -c %d: %w", script, clients, err)
	}
	return m, nil
}

func runErplab(ctx context.Context, opts Options, script string, clients, n int) (Measurement, error) {
	opts.say("erplab   %-12s %2d clients, %s, %s", script, clients, opts.Mode, opts.Duration)
	path := filepath.Join(opts.Dir, fmt.Sprintf("erplab-%d-%s-c%d.json", n, script, clients))
	dsn, env, err := conninfo.Split(opts.DSN)
	if err != nil {
		return Measurement{}, fmt.Errorf("versus: %w", err)
	}
	// pgbench's own command line, run by erplab pgbench; its results
	// document goes to path (ERPLAB_PGBENCH_OUT).
	args := []string{"pgbench", "-n", "-b", script, "-M", opts.Mode, "-c", strconv.Itoa(clients),
		"-j", strconv.Itoa(Jobs(clients)), "-T", secs(opts.Duration), dsn}
	out, m, err := measure(ctx, opts.Erplab, args, append(env, "ERPLAB_PGBENCH_OUT="+path))
	if err != nil {
		return m, fmt.Errorf("versus: erplab pgbench %s -c %d: %w: %s", script, clients, err, lastLine(out))
	}
	doc, err := results.Read(path)
	if err != nil {
		return m, fmt.Errorf("versus: erplab pgbench %s -c %d: %w", script, clients, err)
	}
	m.Transactions = doc.Totals.Count - doc.Totals.Errors
	if doc.Totals.ScoredSeconds > 0 {
		m.TPS = float64(m.Transactions) / doc.Totals.ScoredSeconds
	}
	return m, nil
}

// measure runs a generator to completion and takes its CPU from the
// kernel's accounting of the child (getrusage(2) RUSAGE_CHILDREN as Go's
// ProcessState reports it). env (the password, from conninfo.Split) is
// added to this process's environment: no password goes in args.
func measure(ctx context.Context, bin string, args, env []string) ([]byte, Measurement, error) {
	var m Measurement
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = append(os.Environ(), env...)
	var buf bytes.Buffer
	cmd.Stdout, cmd.Stderr = &buf, &buf
	var err error
	m.Wall, m.CPU, err = meas.Run(ctx, cmd)
	return buf.Bytes(), m, err
}

// parsePgbench reads "number of transactions actually processed: N" and
// "tps = X (without initial connection time)" from pgbench's report
// (pgbench.c printResults).
func parsePgbench(out []byte) (tx int64, tps float64, err error) {
	sc := bufio.NewScanner(bytes.NewReader(out))
	var haveTx, haveTPS bool
	for sc.Scan() {
		line := sc.Text()
		if v, ok := strings.CutPrefix(line, "number of transactions actually processed: "); ok {
			f := strings.Fields(v)
			if len(f) > 0 {
				// "N" or "N/M" when -t was given
				n := strings.SplitN(f[0], "/", 2)[0]
				if tx, err = strconv.ParseInt(n, 10, 64); err == nil {
					haveTx = true
				}
			}
		}
		if v, ok := strings.CutPrefix(line, "tps = "); ok {
			f := strings.Fields(v)
			if len(f) > 0 {
				if tps, err = strconv.ParseFloat(f[0], 64); err == nil {
					haveTPS = true
				}
			}
		}
	}
	if !haveTx || !haveTPS {
		return 0, 0, errors.New("no transaction count or tps in pgbench's report")
	}
	return tx, tps, nil
}

func lastLine(b []byte) string {
	s := strings.TrimSpace(string(b))
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		s = s[i+1:]
	}
	return s
}

// Print writes the side-by-side table: per script and client count the
// median of both generators' tps and CPU per transaction (µs) over the
// repetitions, and the ratios erplab / pgbench as median [min-max].
func Print(w io.Writer, pairs []Pair) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "script\tclients\truns\tpgbench tps\terplab tps\ttps ratio [range]\tpgbench CPU/tx\terplab CPU/tx\tCPU ratio [range]\t\n")
	tps := func(m Measurement) float64 { return m.TPS }
	cpu := func(m Measurement) float64 { return m.CPUPerTx() }
	for _, p := range pairs {
		t, c := p.TPSRatio(), p.CPURatio()
		fmt.Fprintf(tw, "%s\t%d\t%d\t%.0f\t%.0f\t%.2f [%.2f-%.2f]\t%.1f µs\t%.1f µs\t%.2f [%.2f-%.2f]\t\n", p.Script, p.Clients, len(p.Erplab),
			median(p.Pgbench, tps), median(p.Erplab, tps), t.Median, t.Min, t.Max,
			median(p.Pgbench, cpu), median(p.Erplab, cpu), c.Median, c.Min, c.Max)
	}
	tw.Flush()
	fmt.Fprintln(w, "\ntps ratio = erplab / pgbench (goal >= 1); CPU ratio = erplab CPU per transaction / pgbench's (goal <= 1);")
	fmt.Fprintln(w, "medians over the runs, [range] over the runs: a wide range means a noisy host")
}
