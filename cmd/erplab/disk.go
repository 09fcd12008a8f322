package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/erplab/erplab/internal/disk"
	"github.com/erplab/erplab/internal/pgcluster"
	"github.com/erplab/erplab/internal/report"
	"github.com/erplab/erplab/internal/stress"
)

// diskReport is the JSON output of erplab disk (docs/disk-format.md).
type diskReport = disk.Comparison

func newDiskCmd() *cobra.Command {
	var (
		quick, asJSON, noMacro, noMicro, quiet bool
		walOnPath                              bool
		tmpfsSize, fileSize, htmlOut           string
		duration                               time.Duration
		qd, churnFiles, runs, repeat           int
		scale, minEffect                       float64
		osUser                                 string
		outMode                                fs.FileMode
	)
	cmd := &cobra.Command{
		Use:   "disk PATH...",
		Short: "Compare storage directories by PostgreSQL micro patterns and real ERP operations",
		Long: `disk measures each candidate directory (a disk, an NVMe mount, /dev/shm, a tmpfs it mounts
itself with --tmpfs SIZE when root) with micro patterns (8 KiB random reads/writes with O_DIRECT at
queue depth 1 and N, WAL-like 8 KiB writes with fdatasync and O_DSYNC, the temp-table file churn)
and macro operations of the ERP workload on a tablespace on that path in a throwaway server (data
load, sales turnover report, re-posting a day, temp-table storm with temp_tablespaces there), and
ranks the paths per operation.

Every measurement is repeated (--repeat, default 3) in rounds interleaved across the paths (round r
takes the paths, sorted by name, rotated by r), so the order the paths are given in does not
matter. Each figure is the median of its repeats with their range [min-max]. Two paths are tied
unless the exact Mann-Whitney test over the repeats gives p <= 0.10 and the medians are at least
--min-effect apart (default 10 %); with 3 repeats only complete separation of the repeats
(p = 0.10) can make a difference, use --repeat 5 or more to resolve smaller ones.

--wal-on-path gives each path its own throwaway server whose WAL (pg_wal) is on that path too, so
re-posting's WAL flushes hit the candidate device; without it the WAL stays in the server's data
directory under the temporary directory. The macro part always uses a server erplab starts itself
(a server reached by a DSN could not have its WAL moved). Free space is checked first; every file
it creates is removed afterwards, also on Ctrl-C. --quick (1 s runs, scale 0.01) takes about
1.5 minutes for two paths.`,
		RunE: func(cmd *cobra.Command, paths []string) error {
			ctx := cmd.Context()
			out, errw := cmd.OutOrStdout(), cmd.ErrOrStderr()
			progress := func(format string, args ...any) {
				if !quiet {
					fmt.Fprintf(errw, format+"\n", args...)
				}
			}
			opts := disk.DefaultOptions()
			mopts := disk.MacroOptions{Scale: 0.05, Seed: 1, Runs: 1, Repeats: 3, Progress: progress}
			if quick {
				opts = disk.QuickOptions()
				mopts.Scale = 0.01
			}
			f := cmd.Flags()
			if f.Changed("repeat") {
				opts.Repeats, mopts.Repeats = repeat, repeat
			}
			rule := disk.DefaultRule()
			rule.MinEffect = minEffect
			if err := rule.Validate(); err != nil {
				return withCode(exitUsage, fmt.Errorf("--min-effect: %w", err))
			}
			if f.Changed("duration") {
				opts.Duration = duration
			}
			if f.Changed("queue-depth") {
				opts.QueueDepth = qd
			}
			if f.Changed("churn-files") {
				opts.ChurnFiles = churnFiles
			}
			if f.Changed("file-size") {
				n, err := stress.ParseSize(fileSize)
				if err != nil {
					return withCode(exitUsage, fmt.Errorf("--file-size: %w", err))
				}
				opts.FileBytes = n
			}
			if f.Changed("scale") {
				mopts.Scale = scale
			}
			if f.Changed("runs") {
				mopts.Runs = runs
			}
			opts.Progress = progress
			if err := opts.Validate(); err != nil {
				return withCode(exitUsage, err)
			}
			if !noMacro {
				if err := mopts.Validate(); err != nil {
					return withCode(exitUsage, err)
				}
			}
			if len(paths) == 0 && tmpfsSize == "" {
				return withCode(exitUsage, errors.New("give at least one directory (e.g. erplab disk /var/lib/postgresql /dev/shm) or --tmpfs SIZE"))
			}
			if err := disk.Distinct(paths); err != nil {
				return withCode(exitUsage, err)
			}
			// Space first, before writing anything anywhere.
			for _, p := range paths {
				fi, err := os.Stat(p)
				if err != nil {
					return withCode(exitUsage, fmt.Errorf("disk: %w", err))
				}
				if !fi.IsDir() {
					return withCode(exitUsage, fmt.Errorf("disk: %s is not a directory", p))
				}
				_, free, err := disk.Space(p)
				if err != nil {
					return err
				}
				need := opts.NeedBytes()
				if noMicro {
					need = 0
				}
				if !noMacro {
					need = max(need, mopts.NeedBytes(walOnPath))
				}
				if free < need {
					return fmt.Errorf("disk: %s: %d MiB free, need %d MiB (lower --file-size, --churn-files or --scale)", p, free>>20, need>>20)
				}
			}
			if tmpfsSize != "" {
				n, err := stress.ParseSize(tmpfsSize)
				if err != nil {
					return withCode(exitUsage, fmt.Errorf("--tmpfs: %w", err))
				}
				m, err := disk.MountTmpfs(n)
				if err != nil {
					return err
				}
				defer func() {
					if err := m.Unmount(); err != nil {
						fmt.Fprintf(errw, "erplab: %v\n", err)
					}
				}()
				progress("mounted a %d MiB tmpfs on %s", n>>20, m.Dir)
				paths = append(paths, m.Dir)
			}
			if noMicro && noMacro {
				return withCode(exitUsage, errors.New("--no-micro and --no-macro leave nothing to measure"))
			}
			if walOnPath && noMacro {
				return withCode(exitUsage, errors.New("--wal-on-path moves the WAL of the macro part: drop --no-macro"))
			}
			var micro []disk.PathResult
			var macro []disk.MacroResult
			if !noMicro {
				var err error
				if micro, err = disk.MeasureAll(ctx, paths, opts); err != nil {
					return diskErr(ctx, err)
				}
			}
			if !noMacro {
				var err error
				if macro, err = runMacro(ctx, errw, osUser, paths, mopts, walOnPath); err != nil {
					return diskErr(ctx, err)
				}
			}
			rep, err := disk.NewComparison(micro, macro, opts.Repeats, rule, walOnPath)
			if err != nil {
				return err
			}
			if htmlOut != "" {
				if err := writeDiskHTML(htmlOut, outMode, rep); err != nil {
					return err
				}
				fmt.Fprintf(errw, "HTML report: %s\n", htmlOut)
			}
			if asJSON {
				return labWriteJSON(out, rep)
			}
			if len(rep.Micro) > 0 {
				if err := writeMicroTable(out, rep); err != nil {
					return err
				}
			}
			if len(rep.Macro) > 0 {
				if err := writeMacroTable(out, rep, mopts); err != nil {
					return err
				}
			}
			return writeRuleNote(out, rep)
		},
	}
	f := cmd.Flags()
	f.BoolVar(&quick, "quick", false, "small sizes and short patterns: two paths in about 1.5 minutes")
	f.StringVar(&tmpfsSize, "tmpfs", "", "also mount a tmpfs of this size (e.g. 2G) and measure it (root only); unmounted afterwards")
	f.IntVar(&repeat, "repeat", 3, fmt.Sprintf("measure every pattern and operation this many times per path, interleaved across paths (1..%d)", disk.MaxRepeats))
	f.Float64Var(&minEffect, "min-effect", disk.DefaultRule().MinEffect, "smallest relative difference of the medians that can rank two paths apart (0.10 = 10 %)")
	f.BoolVar(&walOnPath, "wal-on-path", false, "put the WAL of the macro part on each candidate path too (one throwaway server per path)")
	f.DurationVar(&duration, "duration", 5*time.Second, "time bound of each micro pattern run (--quick: 1s)")
	f.StringVar(&fileSize, "file-size", "512M", "random I/O data file size (--quick: 64M)")
	f.IntVar(&qd, "queue-depth", 16, "N of the queue depth N patterns (--quick: 8)")
	f.IntVar(&churnFiles, "churn-files", 50000, "most files the temp-table churn creates in one directory (--quick: 10000)")
	f.StringVar(&htmlOut, "html", "", "also write the tables and charts as one self-contained HTML file")
	addOutModeFlag(f, &outMode)
	f.BoolVar(&noMicro, "no-micro", false, "skip the micro patterns")
	f.BoolVar(&noMacro, "no-macro", false, "skip the macro part (tablespaces in a throwaway server)")
	f.Float64Var(&scale, "scale", 0.05, "ERP data scale of the macro part (--quick: 0.01)")
	f.IntVar(&runs, "runs", 1, "timed executions of each macro operation per repeat, averaged")
	f.StringVar(&osUser, "os-user", "", "OS user of the throwaway server when root (default postgres)")
	f.BoolVar(&asJSON, "json", false, "print the results as JSON")
	f.BoolVarP(&quiet, "quiet", "q", false, "no progress lines")
	return cmd
}

// diskErr gives an interrupted run the SIGINT exit code.
func diskErr(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return withCode(exitInterrupted, err)
	}
	return err
}

// runMacro starts a throwaway server (one per path with walOnPath, its
// WAL moved there) and runs disk.MacroAll on the paths.
func runMacro(ctx context.Context, errw io.Writer, osUser string, paths []string, mopts disk.MacroOptions, walOnPath bool) ([]disk.MacroResult, error) {
	var targets []disk.Target
	var stops []func() // run in reverse order
	defer func() {
		for i := len(stops) - 1; i >= 0; i-- {
			stops[i]()
		}
	}()
	start := func() (*pgcluster.Cluster, error) {
		c, err := pgcluster.Start(ctx, pgcluster.Options{OSUser: osUser, StopWithParent: true})
		if err != nil {
			return nil, err
		}
		stops = append(stops, func() {
			if err := c.Stop(); err != nil {
				fmt.Fprintf(errw, "erplab: stop server: %v\n", err)
			}
		})
		return c, nil
	}
	server := func(c *pgcluster.Cluster) disk.Server {
		return disk.Server{DSN: c.DSN, AdminDB: "postgres", OSUser: c.OSUser()}
	}
	if !walOnPath {
		mopts.Progress("starting a throwaway PostgreSQL for the tablespaces...")
		c, err := start()
		if err != nil {
			return nil, err
		}
		for _, p := range paths {
			targets = append(targets, disk.Target{Server: server(c), Path: p})
		}
		return disk.MacroAll(ctx, targets, mopts)
	}
	for _, p := range paths {
		mopts.Progress("starting a throwaway PostgreSQL with its WAL on %s...", p)
		c, err := start()
		if err != nil {
			return nil, err
		}
		dir, err := disk.PutWALOn(ctx, c, p)
		if dir != "" {
			// Remove the WAL directory after the server's Stop: put it
			// before that Stop in the reversed list.
			stopC := stops[len(stops)-1]
			stops[len(stops)-1] = func() {
				if err := disk.RemoveWALDir(dir); err != nil {
					fmt.Fprintf(errw, "erplab: %v\n", err)
				}
			}
			stops = append(stops, stopC)
		}
		if err != nil {
			return nil, err
		}
		targets = append(targets, disk.Target{Server: server(c), Path: p, WALDir: dir})
	}
	return disk.MacroAll(ctx, targets, mopts)
}

func writeMicroTable(out io.Writer, c disk.Comparison) error {
	fmt.Fprintf(out, "Micro patterns (8 KiB; ops/s median [min-max] of %d repeats interleaved across paths; rank 1 = best, = tied)\n", c.Repeats)
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "pattern\trank\tpath\tfs\tops/s [min-max]\tMiB/s\tp50 µs\tp95 µs\tp99 µs\tmax µs\tvs next\t  note")
	for _, rk := range c.MicroRanking {
		for k, pl := range rk.Places {
			pr, _ := c.PathResultOf(pl.Path)
			r, _ := pr.Result(rk.Measure)
			note := r.Note
			if m := r.MedianRun(); len(m.RateOverTime) > 0 {
				first, last := m.RateOverTime[0], m.RateOverTime[len(m.RateOverTime)-1]
				low := slices.Min(m.RateOverTime)
				note = strings.TrimSpace(fmt.Sprintf("median run: create files/s first %.0f, min %.0f, last %.0f as %d files filled the dir; unlink %.0f/s %s",
					first, low, last, m.Ops, m.UnlinkPerS, note))
			}
			if r.QueueDepth > 1 {
				note = strings.TrimSpace(fmt.Sprintf("QD %d %s", r.QueueDepth, note))
			}
			if r.Direct {
				note = strings.TrimSpace("O_DIRECT " + note)
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%.1f\t%.0f\t%.0f\t%.0f\t%.0f\t%s\t  %s\n", rk.Measure, disk.RankLabel(pl.Rank, pl.Tied), pl.Path, pr.FSType,
				disk.FormatSpread("%.0f", r.OpsPerS), r.MiBPerS, r.P50us, r.P95us, r.P99us, r.MaxUs, rk.VersusNext(k), note)
		}
	}
	return tw.Flush()
}

// writeMacroTable writes the field's table (CONTEXT.md section 2): one
// row per path, the operations' median times [min-max] with their rank,
// rows ordered by the sum of ranks.
func writeMacroTable(out io.Writer, c disk.Comparison, o disk.MacroOptions) error {
	fmt.Fprintf(out, "\nERP operations on a tablespace per path (scale %g; ms, median [min-max] of %d repeats, each the mean of %d run(s); (rank) 1 = fastest, = tied)\n",
		o.Scale, c.Repeats, o.Runs)
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "path\ttablespace MiB\tdata load\tturnover report\tre-posting a day\ttemp-table storm\trank\t")
	for _, ov := range c.MacroOverall {
		r, _ := c.MacroResultOf(ov.Path)
		fmt.Fprintf(tw, "%s\t%.1f", r.Path, float64(r.TablespaceBytes)/(1<<20))
		for _, op := range disk.MacroOps() {
			fmt.Fprintf(tw, "\t%s", c.MacroCell(r.Path, op))
		}
		fmt.Fprintf(tw, "\t%s\t\n", disk.RankLabel(ov.Rank, ov.Tied))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	_, err := fmt.Fprintf(out, "rank: by the sum of the operations' ranks (data load not counted); %s\n", c.WALNote())
	return err
}

// writeRuleNote states the tie rule and what the repeats can resolve.
func writeRuleNote(out io.Writer, c disk.Comparison) error {
	_, err := fmt.Fprintf(out, "\n%s\n", disk.RuleNote(c.Rule, c.Repeats))
	return err
}

// writeDiskHTML writes the comparison page (report.WriteDiskHTML) to path,
// a new file with mode perm (writeFile).
func writeDiskHTML(path string, perm fs.FileMode, rep diskReport) error {
	if err := writeFile(path, perm, func(w io.Writer) error { return report.WriteDiskHTML(w, rep) }); err != nil {
		return fmt.Errorf("--html: %w", err)
	}
	return nil
}
