package main

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"time"

	"github.com/spf13/cobra"

	"github.com/erplab/erplab/internal/conninfo"
	"github.com/erplab/erplab/internal/hostfacts"
	"github.com/erplab/erplab/internal/versus/pgreplay"
)

// withReplayBench adds `erplab replay bench` under `erplab replay`.
func withReplayBench(replayCmd *cobra.Command) *cobra.Command {
	replayCmd.AddCommand(newReplayBenchCmd())
	return replayCmd
}

func newReplayBenchCmd() *cobra.Command {
	var (
		dsn, dsnFile, template, bin string
		rounds, lagRuns             int
		timeout                     time.Duration
	)
	cmd := &cobra.Command{
		Use:   "bench LOG... --dsn DSN --template DB",
		Short: "Compare erplab replay with pgreplay on the same csvlog: statements per second and client CPU per statement, side by side",
		Long: `Replay the same csvlog with pgreplay (Debian package pgreplay) and 'erplab replay', one
after the other in a rotated order, --rounds times, each replay onto a fresh copy of
--template (CREATE DATABASE ... TEMPLATE, dropped after it), at unlimited speed (pgreplay
-s ` + pgreplay.Unlimited + `; erplab --speed 0 with --order none, each session on its own schedule as
pgreplay, and with its default --order gates), and print each tool's statements per second
(statements / the process's wall time) and client CPU per statement (user + system time of
the process, from getrusage), with the ratios erplab / pgreplay per round: median and range.
Then --lag-runs replays of each at speed 1 give the lag behind schedule (erplab p50/p99/max;
pgreplay reports only its maximum, in whole seconds).

pgreplay connects as the user to the database each log line names: the log is rewritten
(in a temporary directory) with the --dsn user and the copy's name, and both tools read
that. A replay that runs past --timeout is interrupted and the copy's sessions at that
moment are printed (pgreplay replays the log in its order on one thread: a statement that
waits on a lock held by a session whose next statement comes later in the log waits for
ever).

The log is written with (postgresql.conf):
` + pgreplay.Settings,
		Example: `  createdb -T bench bench_before     # before the workload
  erplab replay bench /var/lib/postgresql/15/main/log/postgresql.csv --dsn 'host=/var/run/postgresql' --template bench_before --rounds 3`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, logs []string) error {
			ctx, out := cmd.Context(), cmd.OutOrStdout()
			if rounds < 1 || lagRuns < 0 || timeout < 0 {
				return withCode(exitUsage, fmt.Errorf("--rounds must be >= 1 (got %d), --lag-runs and --timeout not negative", rounds))
			}
			if template == "" {
				return withCode(exitUsage, errors.New("--template DB: the database each replay starts from (a copy taken before the logged workload)"))
			}
			target, _, err := resolveDSN(cmd, dsn, dsnFile)
			if err != nil {
				return err
			}
			if bin == "" {
				if bin, err = pgreplay.Find(); err != nil {
					return err
				}
			}
			self, err := os.Executable()
			if err != nil {
				return fmt.Errorf("replay bench: finding erplab's own executable: %w", err)
			}
			dir, err := os.MkdirTemp("", "erplab-replay-bench-")
			if err != nil {
				return err
			}
			defer os.RemoveAll(dir)
			fmt.Fprintf(out, "erplab replay vs pgreplay: %d rounds at unlimited speed, %d at speed 1, server %s, template %s, pgreplay %s\n",
				rounds, lagRuns, conninfo.Redact(target), template, bin)
			if host, err := hostfacts.New("", ""); err == nil {
				if l1, err := host.LoadAverage(); err == nil && l1 > float64(runtime.NumCPU()) {
					fmt.Fprintf(out, "warning: load average %.1f on %d CPUs before the start: other work will distort the rates (the CPU per statement less so)\n", l1, runtime.NumCPU())
				}
			}
			rep, err := pgreplay.Run(ctx, pgreplay.Options{DSN: target, Template: template, Logs: logs, Pgreplay: bin, Erplab: self,
				Rounds: rounds, LagRuns: lagRuns, Timeout: timeout, Dir: dir,
				Progress: func(f string, a ...any) { fmt.Fprintf(cmd.ErrOrStderr(), f+"\n", a...) }})
			if rep != nil && len(rep.Unlimited) > 0 {
				fmt.Fprintf(out, "log: %d lines\n\n", rep.LogLines)
				pgreplay.Print(out, rep)
			}
			if err != nil && ctx.Err() != nil {
				return withCode(exitInterrupted, errors.New("interrupted"))
			}
			return err
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&dsn, "dsn", "", "server where the copies are made, its user the one both tools connect as (libpq key=value or URL; default: PG* environment)")
	addDSNFileFlag(fl, &dsnFile, "dsn")
	fl.StringVar(&template, "template", "", "database each replay starts from: a copy taken before the logged workload ran")
	fl.IntVar(&rounds, "rounds", 3, "rounds at unlimited speed, each tool once per round in a rotated order")
	fl.IntVar(&lagRuns, "lag-runs", 1, "replays of each tool at speed 1 (the captured pace) for the lag; 0: none")
	fl.DurationVar(&timeout, "timeout", 10*time.Minute, "interrupt a replay that has not finished by then and print what the copy's sessions were doing (0: no limit)")
	fl.StringVar(&bin, "pgreplay", "", "pgreplay executable (default: pgreplay on PATH)")
	return cmd
}
