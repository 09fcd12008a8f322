package main

import (
	"errors"
	"fmt"
	"os"
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
		repeat            int
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
select-only -M simple -c 8 -j 2 -t 5000, tpcb-like -M prepared -c 8 -j 2 -t 1500.
--cell names a cell of your own in pgbench's arguments (repeatable). Each row gives both
generators' CPU per transaction, median [min-max] over the runs, the ratios erplab /
pgbench of CPU per transaction, wall time and tps, and both peak resident sizes (VmHWM;
getrusage's maxrss would count the resident size of the process that started them) with,
in parentheses, the largest anonymous part seen (heap and stacks, without the program's
file pages, which count as far as the page cache holds them).

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
			if table {
				cells = pgbenchrun.GeneratorCells()
				if !cmd.Flags().Changed("repeat") {
					repeat = 5
				}
			}
			for _, spec := range cellSpecs {
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
			if embedded {
				c, err := loadtest.StartEmbedded(ctx, out, osUser, maxClients+10, false)
				if err != nil {
					return err
				}
				defer func() {
					if err := c.Stop(); err != nil {
						fmt.Fprintf(out, "warning: stopping the embedded server: %v\n", err)
					}
				}()
				target, force = c.DSN("erplab"), true
			}
			pool, err := conninfo.OpenPool(ctx, target, 4)
			if err != nil {
				return err
			}
			have, _, ok, err := tables.Installed(ctx, pool)
			if err == nil && (!ok || (embedded && have != scale)) {
				fmt.Fprintf(out, "creating pgbench tables at scale %d\n", scale)
				_, err = tables.Init(ctx, pool, tables.Options{Scale: scale, Force: force})
			} else if ok {
				fmt.Fprintf(out, "using the pgbench tables found (scale %d)\n", have)
			}
			pool.Close()
			if err != nil {
				return err
			}
			dir, err := os.MkdirTemp("", "erplab-vs-pgbench-")
			if err != nil {
				return err
			}
			defer os.RemoveAll(dir)
			if len(cells) > 0 {
				fmt.Fprintf(out, "erplab vs pgbench: %d cells, %d runs of each generator per cell (alternating), server %s, pgbench %s\n",
					len(cells), repeat, conninfo.Redact(target), pgbench)
			} else {
				fmt.Fprintf(out, "erplab vs pgbench: %s, clients %s, %s each, %d runs per cell, -M %s, server %s, pgbench %s\n",
					strings.Join(scripts, ", "), joinInts(clients), duration, repeat, mode, conninfo.Redact(target), pgbench)
			}
			if host, err := hostfacts.New("", ""); err == nil {
				if l1, err := host.LoadAverage(); err == nil && l1 > float64(runtime.NumCPU()) {
					fmt.Fprintf(out, "warning: load average %.1f on %d CPUs before the start: other work will distort the tps figures (the CPU per transaction less so)\n", l1, runtime.NumCPU())
				}
			}
			pairs, err := pgbenchrun.Run(ctx, pgbenchrun.Options{
				DSN: target, Pgbench: pgbench, Erplab: self, Cells: cells, Scripts: scripts, Clients: clients,
				Duration: duration, Mode: mode, Dir: dir, Repeat: repeat,
				Progress: func(f string, a ...any) { fmt.Fprintf(cmd.ErrOrStderr(), f+"\n", a...) },
			})
			if len(pairs) > 0 {
				fmt.Fprintln(out)
				pgbenchrun.Print(out, pairs)
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
	fl.StringArrayVar(&cellSpecs, "cell", nil, "a cell in pgbench's arguments, '-b SCRIPT [-M MODE] [-c N] [-j N] (-t N | -T SECS)', instead of --builtins x --clients (repeatable)")
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
