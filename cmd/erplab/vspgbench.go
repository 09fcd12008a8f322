package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/erplab/erplab/internal/conninfo"
	"github.com/erplab/erplab/internal/hostfacts"
	"github.com/erplab/erplab/internal/loadtest"
	"github.com/erplab/erplab/internal/pgbench/script"
	"github.com/erplab/erplab/internal/pgbench/tables"
	"github.com/erplab/erplab/internal/pgcluster"
	"github.com/erplab/erplab/internal/versus/pgbenchinit"
	"github.com/erplab/erplab/internal/versus/pgbenchrun"
	"github.com/erplab/erplab/internal/versus/pgreplay"
)

func newVsPgbenchCmd() *cobra.Command {
	var (
		dsn, mode, osUser string
		dsnFile           string
		scripts           []string
		clients           []int
		duration          time.Duration
		scale             int
		force, table      bool
		repeat, replayTx  int
		cellSpecs         []string
	)
	cmd := &cobra.Command{
		Use:   "vs-pgbench",
		Short: "Compare erplab's load generator with pgbench: tps and client CPU per transaction, side by side",
		Long: `Run pgbench and 'erplab pgbench' one after the other on the same server, for every built-in
script and client count, in the same query mode for the same time, and print both
generators' tps and client CPU per transaction (user + system time of the process, from
getrusage) with the ratios erplab / pgbench. Without --dsn a throwaway server is started
with pgbench tables at --scale and removed at the end. pgbench gets -j = min(clients, CPUs).

--generator-table compares the four cells of the generator's CPU table instead, each for a
fixed number of transactions (-t), 5 alternating pairs unless --repeat says otherwise:
select-only -M prepared -c 1 -j 1 -t 20000, select-only -M prepared -c 8 -j 2 -t 5000,
select-only -M simple -c 8 -j 2 -t 5000, tpcb-like -M prepared -c 8 -j 2 -t 1500, then
the replay rows. --cell names a cell of your own in pgbench's arguments (repeatable);
--cell replay the replay rows alone. Each row gives both
generators' CPU per transaction, median [min-max] over the runs, the ratios erplab /
pgbench of CPU per transaction, wall time and tps, and both peak resident sizes (VmHWM;
getrusage's maxrss would count the resident size of the process that started them) with,
in parentheses, the largest anonymous part seen (heap and stacks, without the program's
file pages, which count as far as the page cache holds them).

The replay rows compare 'erplab replay' with pgreplay 1.2 on logs the benchmark makes itself,
on its throwaway server (started writing a csvlog): per pgbench workload (select-only and
simple-update, -M prepared -c 4, --replay-transactions each; not tpcb-like, whose one
branch row makes pgreplay wait for ever on a lock), a database with pgbench tables
at scale 1 and a copy of it taken before the workload, every statement of the workload's
sessions logged; then each tool replays that log onto fresh copies of the copy, as
'erplab replay bench' does (at unlimited speed, --repeat rounds in a rotated order), and
the row gives both tools' client CPU per statement, the ratios of CPU per statement and
statements per second, and the peak resident sizes (a replay still running after 2 minutes
is interrupted and named under the rows). They are skipped, with the reason,
with --dsn (the logging settings are changed only on a server erplab started) and when
pgreplay is not installed.

Both generators share the host with the server they load: on a small machine the server's
CPU bounds both, and the CPU per transaction is where the generators differ.`,
		Example: `  erplab vs-pgbench
  erplab vs-pgbench --builtins select-only --clients 1,8,32 --duration 20s -M prepared
  erplab vs-pgbench --generator-table
  erplab vs-pgbench --cell '-b select-only -M prepared -c 8 -j 2 -t 5000' --repeat 3`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			out := cmd.OutOrStdout()
			if duration < time.Second {
				return withCode(exitUsage, fmt.Errorf("--duration must be at least 1s, got %s", duration))
			}
			if _, err := script.ParseMode(mode); err != nil {
				return withCode(exitUsage, err)
			}
			for _, s := range scripts {
				if _, err := script.Builtin(s); err != nil {
					return withCode(exitUsage, fmt.Errorf("--builtins: %w", err))
				}
			}
			maxClients := 0
			for _, c := range clients {
				if c < 1 {
					return withCode(exitUsage, fmt.Errorf("--clients: %d is not a positive client count", c))
				}
				maxClients = max(maxClients, c)
			}
			var cells []pgbenchrun.Cell
			wantReplay := table
			if table {
				cells = pgbenchrun.GeneratorCells()
				if !cmd.Flags().Changed("repeat") {
					repeat = 5
				}
			}
			for _, spec := range cellSpecs {
				if strings.TrimSpace(spec) == "replay" {
					wantReplay = true
					continue
				}
				c, err := pgbenchrun.ParseCell(spec)
				if err != nil {
					return withCode(exitUsage, fmt.Errorf("--cell: %w", err))
				}
				if _, err := script.Builtin(c.Script); err != nil {
					return withCode(exitUsage, fmt.Errorf("--cell: %w", err))
				}
				if _, err := script.ParseMode(c.Mode); err != nil {
					return withCode(exitUsage, fmt.Errorf("--cell: %w", err))
				}
				cells = append(cells, c)
			}
			for _, c := range cells {
				maxClients = max(maxClients, c.Clients)
			}
			if repeat < 1 {
				return withCode(exitUsage, fmt.Errorf("--repeat must be >= 1, got %d", repeat))
			}
			if replayTx < 0 {
				return withCode(exitUsage, fmt.Errorf("--replay-transactions must be >= 0, got %d", replayTx))
			}
			// --cell replay alone: no pgbench cell
			replayOnly := wantReplay && !table && len(cells) == 0
			if scale < 1 {
				return withCode(exitUsage, fmt.Errorf("--scale must be >= 1, got %d", scale))
			}
			// pgbench next to the server binaries first: Debian's
			// /usr/bin/pgbench is pg_wrapper, a Perl script whose start-up
			// (tens of ms of CPU per run) would count as pgbench's
			binDir, _ := pgcluster.FindBinDir()
			pgbench, err := pgbenchinit.FindPgbench(binDir)
			if err != nil {
				return err
			}
			self, err := os.Executable()
			if err != nil {
				return fmt.Errorf("vs-pgbench: finding erplab's own executable: %w", err)
			}
			target, envGiven, err := resolveDSN(cmd, dsn, dsnFile)
			if err != nil {
				return err
			}
			embedded := target == "" && !envGiven
			var replaySkip, pgreplayBin string
			switch {
			case !wantReplay:
			case !embedded:
				replaySkip = "the replay rows change the server's logging settings: only on a server erplab starts (run without --dsn and PG*)"
			default:
				if pgreplayBin, err = pgreplay.Find(); err != nil {
					replaySkip = err.Error()
				}
			}
			var server *pgcluster.Cluster
			if embedded {
				var settings map[string]string
				if wantReplay && replaySkip == "" {
					settings = pgreplay.ServerSettings()
				}
				c, err := loadtest.StartEmbeddedSettings(ctx, out, osUser, maxClients+10, settings)
				if err != nil {
					return err
				}
				server = c
				defer func() {
					if err := c.Stop(); err != nil {
						fmt.Fprintf(out, "warning: stopping the embedded server: %v\n", err)
					}
				}()
				target, force = c.DSN("erplab"), true
			}
			if !replayOnly {
				if err := ensureTables(ctx, out, target, scale, embedded, force); err != nil {
					return err
				}
			}
			dir, err := os.MkdirTemp("", "erplab-vs-pgbench-")
			if err != nil {
				return err
			}
			defer os.RemoveAll(dir)
			switch {
			case replayOnly:
			case len(cells) > 0:
				fmt.Fprintf(out, "erplab vs pgbench: %d cells, %d runs of each generator per cell (alternating), server %s, pgbench %s\n",
					len(cells), repeat, conninfo.Redact(target), pgbench)
			default:
				fmt.Fprintf(out, "erplab vs pgbench: %s, clients %s, %s each, %d runs per cell, -M %s, server %s, pgbench %s\n",
					strings.Join(scripts, ", "), joinInts(clients), duration, repeat, mode, conninfo.Redact(target), pgbench)
			}
			if host, err := hostfacts.New("", ""); err == nil {
				if l1, err := host.LoadAverage(); err == nil && l1 > float64(runtime.NumCPU()) {
					fmt.Fprintf(out, "warning: load average %.1f on %d CPUs before the start: other work will distort the tps figures (the CPU per transaction less so)\n", l1, runtime.NumCPU())
				}
			}
			var pairs []pgbenchrun.Pair
			if !replayOnly {
				pairs, err = pgbenchrun.Run(ctx, pgbenchrun.Options{
					DSN: target, Pgbench: pgbench, Erplab: self, Cells: cells, Scripts: scripts, Clients: clients,
					Duration: duration, Mode: mode, Dir: dir, Repeat: repeat,
					Progress: func(f string, a ...any) { fmt.Fprintf(cmd.ErrOrStderr(), f+"\n", a...) },
				})
			}
			if len(pairs) > 0 {
				fmt.Fprintln(out)
				pgbenchrun.Print(out, pairs)
			}
			if err == nil && wantReplay {
				if replaySkip != "" {
					fmt.Fprintf(out, "\nreplay rows skipped: %s\n", replaySkip)
				} else {
					err = replayRows(ctx, cmd, server, pgbench, pgreplayBin, self, dir, repeat, replayTx)
				}
			}
			if err != nil && ctx.Err() != nil {
				return withCode(exitInterrupted, errors.New("interrupted"))
			}
			return err
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&dsn, "dsn", "", "server to use (needs pgbench tables, or --force to create them); default: PG* environment, else a throwaway embedded server")
	addDSNFileFlag(fl, &dsnFile, "dsn")
	fl.StringSliceVar(&scripts, "builtins", []string{"select-only", "tpcb-like"}, "built-in scripts to compare, comma-separated")
	fl.IntSliceVar(&clients, "clients", []int{1, 8, 32}, "client counts, comma-separated")
	fl.DurationVar(&duration, "duration", 5*time.Second, "length of each run (whole seconds)")
	fl.IntVar(&repeat, "repeat", 3, "runs of each generator per cell (alternating; 5 with --generator-table); the table gives medians and ranges")
	fl.BoolVar(&table, "generator-table", false, "compare the generator's CPU table's four cells (fixed transaction counts) instead of --builtins x --clients")
	fl.StringArrayVar(&cellSpecs, "cell", nil, "a cell in pgbench's arguments, '-b SCRIPT [-M MODE] [-c N] [-j N] (-t N | -T SECS)', instead of --builtins x --clients (repeatable); 'replay': the replay rows")
	fl.IntVar(&replayTx, "replay-transactions", 0, "transactions per client of the replay rows' logged workloads (0: 1,000 select-only, 300 simple-update)")
	fl.StringVarP(&mode, "protocol", "M", "prepared", "query mode: simple, extended or prepared")
	fl.IntVarP(&scale, "scale", "s", 10, "pgbench scale of the tables created on the embedded server")
	fl.BoolVar(&force, "force", false, "create pgbench tables in --dsn's database when it has none")
	fl.StringVar(&osUser, "os-user", "", "embedded server: OS user to run PostgreSQL as when erplab runs as root (default postgres)")
	return cmd
}

func joinInts(v []int) string {
	s := make([]string, len(v))
	for i, x := range v {
		s[i] = fmt.Sprint(x)
	}
	return strings.Join(s, ",")
}

// ensureTables creates the pgbench tables at scale in target's database
// when it has none (or, on the embedded server, others).
func ensureTables(ctx context.Context, out io.Writer, target string, scale int, embedded, force bool) error {
	pool, err := conninfo.OpenPool(ctx, target, 4)
	if err != nil {
		return err
	}
	defer pool.Close()
	have, _, ok, err := tables.Installed(ctx, pool)
	if err == nil && (!ok || (embedded && have != scale)) {
		fmt.Fprintf(out, "creating pgbench tables at scale %d\n", scale)
		_, err = tables.Init(ctx, pool, tables.Options{Scale: scale, Force: force})
	} else if ok {
		fmt.Fprintf(out, "using the pgbench tables found (scale %d)\n", have)
	}
	return err
}

// replayRows makes the replay rows' logs on the embedded server, replays
// each with both tools (versus/pgreplay, rounds rounds at unlimited
// speed) and prints the rows.
func replayRows(ctx context.Context, cmd *cobra.Command, server *pgcluster.Cluster, pgbench, pgreplayBin, self, dir string, rounds, tx int) error {
	out := cmd.OutOrStdout()
	say := func(f string, a ...any) { fmt.Fprintf(cmd.ErrOrStderr(), f+"\n", a...) }
	admin := server.DSN("erplab")
	var rows []pgreplay.Row
	var err error
	for _, w := range pgreplay.Workloads(tx) {
		say("replay: making the %s log (pgbench %s)", w.Name, strings.Join(w.Args, " "))
		var l pgreplay.Log
		if l, err = pgreplay.MakeLog(ctx, pgreplay.LogOptions{DSN: admin, Pgbench: pgbench, Dir: dir, Scale: 1}, w); err != nil {
			break
		}
		rdir := filepath.Join(dir, w.Name)
		if err = os.Mkdir(rdir, 0o700); err != nil {
			break
		}
		var rep *pgreplay.Report
		rep, err = pgreplay.Run(ctx, pgreplay.Options{DSN: admin, Template: l.Template, Logs: []string{l.Path}, Pgreplay: pgreplayBin,
			Erplab: self, Rounds: rounds, Timeout: 2 * time.Minute, Dir: rdir, Progress: say})
		if rep != nil && len(rep.Unlimited) > 0 {
			rows = append(rows, pgreplay.Row{Workload: w, Lines: l.Lines, Report: rep})
		}
		if derr := pgreplay.Drop(ctx, admin, l); err == nil {
			err = derr
		}
		if err != nil {
			break
		}
	}
	if len(rows) > 0 {
		fmt.Fprintf(out, "\nerplab replay vs pgreplay (%s): logs made on this server, %d rounds at unlimited speed, medians [min-max]\n\n", pgreplayBin, rounds)
		pgreplay.PrintRows(out, rows)
	}
	return err
}
