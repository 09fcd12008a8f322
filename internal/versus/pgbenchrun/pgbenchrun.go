// Package pgbenchrun compares erplab's load generator with pgbench on the same
// server in one go: for each cell (a built-in script, query mode, client and
// thread count, and a fixed number of transactions per client or a
// duration) pgbench and `erplab pgbench` run with the same arguments, one
// after the other, and the comparison is the client CPU each spent per
// transaction (user + system time of the generator's process from the
// kernel's accounting of the child, wait4(2)'s rusage, divided by the
// transactions it completed), the wall time, the throughput (tps) and the
// peak resident memory (VmHWM, read while it runs). Ratios are the result:
// the machines this runs on are noisy, and both generators share the host
// with the server they load.
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

// Cell is one comparison: the arguments both generators get.
type Cell struct {
	// Script is a built-in script name ("select-only", "tpcb-like",
	// "simple-update"), pgbench -b.
	Script string
	// Mode is the query mode, pgbench -M: simple, extended or prepared.
	Mode string
	// Clients and Jobs are pgbench -c and -j.
	Clients, Jobs int
	// Transactions per client, pgbench -t; when 0, Duration (-T, whole
	// seconds) bounds the run instead.
	Transactions int
	Duration     time.Duration
}

// Args are the cell's pgbench arguments (without the connection).
func (c Cell) Args() []string {
	a := []string{"-n", "-b", c.Script, "-M", c.Mode, "-c", strconv.Itoa(c.Clients), "-j", strconv.Itoa(c.Jobs)}
	if c.Transactions > 0 {
		return append(a, "-t", strconv.Itoa(c.Transactions))
	}
	return append(a, "-T", secs(c.Duration))
}

// String is the cell as its table row names it: "select-only -M prepared
// -c 8 -j 2 -t 5000".
func (c Cell) String() string { return strings.Join(c.Args()[2:], " ") }

// GeneratorCells are the four cells of the generator's CPU table (issue
// #35): select-only prepared on 1 client for 20,000 transactions, on 8
// clients and 2 threads for 5,000 each, the same in the simple protocol,
// and tpcb-like prepared on 8 clients and 2 threads for 1,500 each.
func GeneratorCells() []Cell {
	return []Cell{
		{Script: "select-only", Mode: "prepared", Clients: 1, Jobs: 1, Transactions: 20000},
		{Script: "select-only", Mode: "prepared", Clients: 8, Jobs: 2, Transactions: 5000},
		{Script: "select-only", Mode: "simple", Clients: 8, Jobs: 2, Transactions: 5000},
		{Script: "tpcb-like", Mode: "prepared", Clients: 8, Jobs: 2, Transactions: 1500},
	}
}

// ParseCell reads a cell written as pgbench's arguments: "-b select-only
// -M prepared -c 8 -j 2 -t 5000" (-b is required; -M defaults to prepared,
// -c to 1, -j to min(clients, CPUs); -t or -T, not both, -T in whole
// seconds as 10 or 10s).
func ParseCell(s string) (Cell, error) {
	c := Cell{Mode: "prepared", Clients: 1}
	f := strings.Fields(s)
	for i := 0; i < len(f); i += 2 {
		if i+1 == len(f) {
			return c, fmt.Errorf("cell %q: %s needs a value", s, f[i])
		}
		v := f[i+1]
		var err error
		switch f[i] {
		case "-b":
			c.Script = v
		case "-M":
			c.Mode = v
		case "-c":
			c.Clients, err = positive(v)
		case "-j":
			c.Jobs, err = positive(v)
		case "-t":
			c.Transactions, err = positive(v)
		case "-T":
			var n int
			n, err = positive(strings.TrimSuffix(v, "s"))
			c.Duration = time.Duration(n) * time.Second
		default:
			return c, fmt.Errorf("cell %q: %s is not one of -b -M -c -j -t -T", s, f[i])
		}
		if err != nil {
			return c, fmt.Errorf("cell %q: %s %s: %w", s, f[i], v, err)
		}
	}
	switch {
	case c.Script == "":
		return c, fmt.Errorf("cell %q: -b (the built-in script) is missing", s)
	case c.Transactions > 0 && c.Duration > 0:
		return c, fmt.Errorf("cell %q: -t and -T together", s)
	case c.Transactions == 0 && c.Duration == 0:
		return c, fmt.Errorf("cell %q: -t (transactions per client) or -T (seconds) is missing", s)
	}
	if c.Jobs == 0 {
		c.Jobs = Jobs(c.Clients)
	}
	return c, nil
}

func positive(v string) (int, error) {
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		return 0, errors.New("not a positive whole number")
	}
	return n, nil
}

// Options say what to compare.
type Options struct {
	// DSN of a database holding the pgbench tables (libpq key=value or
	// URL); both generators connect to it. Its password reaches them in
	// PGPASSWORD, never on their command lines (conninfo.Split).
	DSN string
	// Pgbench and Erplab are the paths of the two generators' executables.
	Pgbench, Erplab string
	// Cells are compared in this order. Without them, every Scripts x
	// Clients cell is, in Mode for Duration.
	Cells []Cell
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
	// PeakRSS is the process's peak resident memory in bytes (its VmHWM,
	// see measure.Usage).
	PeakRSS int64
	// PeakAnon is the largest anonymous resident size seen (heap and
	// stacks, without the program's file pages; measure.Usage).
	PeakAnon int64
}

// CPUPerTx is the client CPU per transaction in µs (0 without
// transactions).
func (m Measurement) CPUPerTx() float64 {
	if m.Transactions == 0 {
		return 0
	}
	return float64(m.CPU.Microseconds()) / float64(m.Transactions)
}

// Pair is one cell of the comparison: both generators on one cell,
// Repeat times each (index i of both slices ran back to back).
type Pair struct {
	Cell    Cell
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
func (p Pair) CPURatio() Spread { return p.ratios(Measurement.CPUPerTx) }

// WallRatio is erplab's wall time divided by pgbench's over the
// repetitions (below 1: erplab finished sooner; with a fixed number of
// transactions, the inverse of the throughput ratio, start-up included).
func (p Pair) WallRatio() Spread {
	return p.ratios(func(m Measurement) float64 { return m.Wall.Seconds() })
}

func (p Pair) ratios(f func(Measurement) float64) Spread {
	var r []float64
	for i := range min(len(p.Pgbench), len(p.Erplab)) {
		r = append(r, ratio(f(p.Erplab[i]), f(p.Pgbench[i])))
	}
	return spread(r)
}

// Of is the spread of f over ms.
func Of(ms []Measurement, f func(Measurement) float64) Spread {
	v := make([]float64, len(ms))
	for i, m := range ms {
		v[i] = f(m)
	}
	return spread(v)
}

func median(ms []Measurement, f func(Measurement) float64) float64 { return Of(ms, f).Median }

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

// cells are the cells to compare: opts.Cells, or every script x client
// count in opts.Mode for opts.Duration.
func (o Options) cells() ([]Cell, error) {
	if len(o.Cells) > 0 {
		for _, c := range o.Cells {
			if c.Clients < 1 || c.Jobs < 1 || (c.Transactions < 1 && c.Duration < time.Second) {
				return nil, fmt.Errorf("versus: cell %q: clients, jobs and transactions (or a duration of 1s or more) must be positive", c)
			}
		}
		return o.Cells, nil
	}
	if o.Duration < time.Second {
		return nil, fmt.Errorf("versus: duration must be at least 1s, got %s", o.Duration)
	}
	mode := o.Mode
	if mode == "" {
		mode = "prepared"
	}
	var out []Cell
	for _, script := range o.Scripts {
		for _, c := range o.Clients {
			if c < 1 {
				return nil, fmt.Errorf("versus: client count must be >= 1, got %d", c)
			}
			out = append(out, Cell{Script: script, Mode: mode, Clients: c, Jobs: Jobs(c), Duration: o.Duration})
		}
	}
	return out, nil
}

// Run runs every cell, pgbench and erplab back to back (the order
// alternates from pair to pair so neither always runs on a warmer
// server). It returns the cells done so far with the first error: a
// generator that fails, or ctx cancelled.
func Run(ctx context.Context, opts Options) ([]Pair, error) {
	cells, err := opts.cells()
	if err != nil {
		return nil, err
	}
	reps := max(opts.Repeat, 1)
	var out []Pair
	n := 0
	for _, cell := range cells {
		p := Pair{Cell: cell}
		for range reps {
			var pg, ep Measurement
			steps := []func() error{
				func() (err error) { pg, err = runPgbench(ctx, opts, cell); return err },
				func() (err error) { ep, err = runErplab(ctx, opts, cell, n); return err },
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
	return out, nil
}

func (o Options) say(format string, args ...any) {
	if o.Progress != nil {
		o.Progress(format, args...)
	}
}

func secs(d time.Duration) string { return strconv.Itoa(int(d / time.Second)) }

func runPgbench(ctx context.Context, opts Options, cell Cell) (Measurement, error) {
	opts.say("pgbench  %s", cell)
	dsn, env, err := conninfo.Split(opts.DSN)
	if err != nil {
		return Measurement{}, fmt.Errorf("versus: %w", err)
	}
	out, m, err := measure(ctx, opts.Pgbench, append(cell.Args(), dsn), env)
	if err != nil {
		return m, fmt.Errorf("versus: pgbench %s: %w: %s", cell, err, lastLine(out))
	}
	if m.Transactions, m.TPS, err = parsePgbench(out); err != nil {
		return m, fmt.Errorf("versus: pgbench %s: %w", cell, err)
	}
	return m, nil
}

func runErplab(ctx context.Context, opts Options, cell Cell, n int) (Measurement, error) {
	opts.say("erplab   %s", cell)
	path := filepath.Join(opts.Dir, fmt.Sprintf("erplab-%d-%s-c%d.json", n, cell.Script, cell.Clients))
	dsn, env, err := conninfo.Split(opts.DSN)
	if err != nil {
		return Measurement{}, fmt.Errorf("versus: %w", err)
	}
	// pgbench's own command line, run by erplab pgbench; its results
	// document goes to path (ERPLAB_PGBENCH_OUT).
	args := append(append([]string{"pgbench"}, cell.Args()...), dsn)
	out, m, err := measure(ctx, opts.Erplab, args, append(env, "ERPLAB_PGBENCH_OUT="+path))
	if err != nil {
		return m, fmt.Errorf("versus: erplab pgbench %s: %w: %s", cell, err, lastLine(out))
	}
	doc, err := results.Read(path)
	if err != nil {
		return m, fmt.Errorf("versus: erplab pgbench %s: %w", cell, err)
	}
	m.Transactions = doc.Totals.Count - doc.Totals.Errors
	if doc.Totals.ScoredSeconds > 0 {
		m.TPS = float64(m.Transactions) / doc.Totals.ScoredSeconds
	}
	return m, nil
}

// measure runs a generator to completion and takes its CPU and peak
// memory from the kernel's accounting of the child (wait4(2)'s rusage as
// Go's ProcessState reports it). env (the password, from conninfo.Split)
// is added to this process's environment: no password goes in args.
func measure(ctx context.Context, bin string, args, env []string) ([]byte, Measurement, error) {
	var m Measurement
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = append(os.Environ(), env...)
	var buf bytes.Buffer
	cmd.Stdout, cmd.Stderr = &buf, &buf
	u, err := meas.RunUsage(ctx, cmd)
	m.Wall, m.CPU, m.PeakRSS, m.PeakAnon = u.Wall, u.CPU, u.PeakRSS, u.PeakAnon
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

// Print writes the side-by-side table: per cell both generators' client
// CPU per transaction (µs) as median [min-max] over the repetitions, the
// ratios erplab / pgbench of CPU per transaction, wall time and tps as
// median [min-max], and both generators' median peak resident memory.
func Print(w io.Writer, pairs []Pair) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "cell\truns\tpgbench CPU/tx\terplab CPU/tx\tCPU ratio\twall ratio\ttps ratio\tpgbench tps\tpgbench RSS (anon)\terplab RSS (anon)\t\n")
	tps := func(m Measurement) float64 { return m.TPS }
	cpu := func(m Measurement) float64 { return m.CPUPerTx() }
	rss := func(m Measurement) float64 { return float64(m.PeakRSS) / (1 << 20) }
	anon := func(m Measurement) float64 { return float64(m.PeakAnon) / (1 << 20) }
	rng := func(s Spread) string { return fmt.Sprintf("%.2f [%.2f-%.2f]", s.Median, s.Min, s.Max) }
	us := func(s Spread) string { return fmt.Sprintf("%.1f [%.1f-%.1f] µs", s.Median, s.Min, s.Max) }
	mem := func(ms []Measurement) string { return fmt.Sprintf("%.1f (%.1f) MB", median(ms, rss), median(ms, anon)) }
	for _, p := range pairs {
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\t%s\t%s\t%.0f\t%s\t%s\t\n", p.Cell, len(p.Erplab),
			us(Of(p.Pgbench, cpu)), us(Of(p.Erplab, cpu)), rng(p.CPURatio()), rng(p.WallRatio()), rng(p.TPSRatio()),
			median(p.Pgbench, tps), mem(p.Pgbench), mem(p.Erplab))
	}
	tw.Flush()
	fmt.Fprintln(w, "\nCPU/tx: user + system time of the generator's process (the kernel's rusage of the child, start-up")
	fmt.Fprintln(w, "included) per transaction completed; ratios erplab / pgbench: CPU (goal <= 1), wall time (below 1:")
	fmt.Fprintln(w, "erplab finished sooner), tps (goal >= 1); RSS: peak resident memory (VmHWM), with the program's file")
	fmt.Fprintln(w, "pages as far as the page cache holds them; (anon): the largest heap and stacks seen. Medians over the runs,")
	fmt.Fprintln(w, "[min-max] over the runs: a wide range means a noisy host")
}
