package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/erplab/erplab/internal/disk"
	"github.com/erplab/erplab/internal/pgcluster"
	"github.com/erplab/erplab/internal/report"
	"github.com/erplab/erplab/internal/stress"
)

// diskReport is the JSON output of erplab disk.
type diskReport struct {
	Micro []disk.PathResult  `json:"micro"`
	Macro []disk.MacroResult `json:"macro,omitempty"`
}

func newDiskCmd() *cobra.Command {
	var (
		quick, asJSON, noMacro, noMicro, quiet bool
		tmpfsSize, fileSize, htmlOut           string
		duration                               time.Duration
		qd, churnFiles, runs                   int
		scale                                  float64
		osUser                                 string
	)
	cmd := &cobra.Command{
		Use:   "disk PATH...",
		Short: "Compare storage directories by PostgreSQL micro patterns and real ERP operations",
		Long: `disk measures each candidate directory (a disk, an NVMe mount, /dev/shm, a tmpfs it mounts
itself with --tmpfs SIZE when root) with micro patterns (8 KiB random reads/writes with O_DIRECT at
queue depth 1 and N, WAL-like 8 KiB writes with fdatasync and O_DSYNC, the temp-table file churn)
and macro operations of the ERP workload on a tablespace on that path in a throwaway server (data
load, sales turnover report, re-posting a day, temp-table storm with temp_tablespaces there), and
ranks the paths per operation. Free space is checked first; every file it creates is removed
afterwards, also on Ctrl-C. --quick runs the whole comparison in about a minute.`,
		RunE: func(cmd *cobra.Command, paths []string) error {
			ctx := cmd.Context()
			out, errw := cmd.OutOrStdout(), cmd.ErrOrStderr()
			progress := func(format string, args ...any) {
				if !quiet {
					fmt.Fprintf(errw, format+"\n", args...)
				}
			}
			opts := disk.DefaultOptions()
			mopts := disk.MacroOptions{Scale: 0.05, Seed: 1, Runs: 3, Progress: progress}
			if quick {
				opts = disk.QuickOptions()
				mopts.Scale, mopts.Runs = 0.01, 1
			}
			f := cmd.Flags()
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
					need = max(need, mopts.NeedBytes())
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
			var rep diskReport
			for _, p := range paths {
				if noMicro {
					break
				}
				r, err := disk.Measure(ctx, p, opts)
				if err != nil {
					return diskErr(ctx, err)
				}
				rep.Micro = append(rep.Micro, r)
			}
			if !noMacro {
				mr, err := runMacro(ctx, errw, osUser, paths, mopts)
				rep.Macro = mr
				if err != nil {
					return diskErr(ctx, err)
				}
			}
			if htmlOut != "" {
				if err := writeDiskHTML(htmlOut, rep); err != nil {
					return err
				}
				fmt.Fprintf(errw, "HTML report: %s\n", htmlOut)
			}
			if asJSON {
				return labWriteJSON(out, rep)
			}
			if len(rep.Micro) > 0 {
				if err := writeMicroTable(out, rep.Micro); err != nil {
					return err
				}
			}
			if len(rep.Macro) > 0 {
				return writeMacroTable(out, rep.Macro, mopts)
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.BoolVar(&quick, "quick", false, "small sizes and short patterns: the whole comparison in about a minute")
	f.StringVar(&tmpfsSize, "tmpfs", "", "also mount a tmpfs of this size (e.g. 2G) and measure it (root only); unmounted afterwards")
	f.DurationVar(&duration, "duration", 5*time.Second, "time bound of each micro pattern (--quick: 2s)")
	f.StringVar(&fileSize, "file-size", "512M", "random I/O data file size (--quick: 64M)")
	f.IntVar(&qd, "queue-depth", 16, "N of the queue depth N patterns (--quick: 8)")
	f.IntVar(&churnFiles, "churn-files", 50000, "most files the temp-table churn creates in one directory (--quick: 10000)")
	f.StringVar(&htmlOut, "html", "", "also write the tables and charts as one self-contained HTML file")
	f.BoolVar(&noMicro, "no-micro", false, "skip the micro patterns")
	f.BoolVar(&noMacro, "no-macro", false, "skip the macro part (tablespaces in a throwaway server)")
	f.Float64Var(&scale, "scale", 0.05, "ERP data scale of the macro part (--quick: 0.01)")
	f.IntVar(&runs, "runs", 3, "timed executions of each macro operation (--quick: 1)")
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

// runMacro starts a throwaway server and runs disk.Macro on every path.
func runMacro(ctx context.Context, errw io.Writer, osUser string, paths []string, mopts disk.MacroOptions) ([]disk.MacroResult, error) {
	mopts.Progress("starting a throwaway PostgreSQL for the tablespaces...")
	c, err := pgcluster.Start(ctx, pgcluster.Options{OSUser: osUser, StopWithParent: true})
	if err != nil {
		return nil, err
	}
	defer func() {
		if err := c.Stop(); err != nil {
			fmt.Fprintf(errw, "erplab: stop server: %v\n", err)
		}
	}()
	srv := disk.Server{DSN: c.DSN, AdminDB: "postgres", OSUser: c.OSUser()}
	var out []disk.MacroResult
	for i, p := range paths {
		r, err := disk.Macro(ctx, srv, p, i, mopts)
		if err != nil {
			return out, err
		}
		out = append(out, r)
	}
	return out, nil
}

func writeMicroTable(out io.Writer, res []disk.PathResult) error {
	fmt.Fprintln(out, "Micro patterns (8 KiB; ranked by ops/s, 1 = best)")
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "pattern\trank\tpath\tfs\tops/s\tMiB/s\tp50 µs\tp95 µs\tp99 µs\tmax µs\t  note")
	for _, p := range disk.Patterns() {
		idx := disk.Rank(res, p)
		for _, i := range idx {
			r, _ := res[i].Result(p)
			rank := 1
			for _, j := range idx {
				if o, _ := res[j].Result(p); o.OpsPerS > r.OpsPerS {
					rank++
				}
			}
			note := r.Note
			if len(r.RateOverTime) > 0 {
				first, last := r.RateOverTime[0], r.RateOverTime[len(r.RateOverTime)-1]
				low := slices.Min(r.RateOverTime)
				note = strings.TrimSpace(fmt.Sprintf("create files/s first %.0f, min %.0f, last %.0f as %d files filled the dir; unlink %.0f/s %s",
					first, low, last, r.Ops, r.UnlinkPerS, note))
			}
			if r.QueueDepth > 1 {
				note = strings.TrimSpace(fmt.Sprintf("QD %d %s", r.QueueDepth, note))
			}
			if r.Direct {
				note = strings.TrimSpace("O_DIRECT " + note)
			}
			fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%.0f\t%.1f\t%.0f\t%.0f\t%.0f\t%.0f\t  %s\n", p, rank, res[i].Path, res[i].FSType,
				r.OpsPerS, r.MiBPerS, r.P50us, r.P95us, r.P99us, r.MaxUs, note)
		}
	}
	return tw.Flush()
}

// writeMacroTable writes the field's table (CONTEXT.md section 2): one
// row per path, the operations' mean times with their rank, rows ordered
// by the sum of ranks.
func writeMacroTable(out io.Writer, res []disk.MacroResult, o disk.MacroOptions) error {
	fmt.Fprintf(out, "\nERP operations on a tablespace per path (scale %g, mean of %d run(s), ms; (rank), 1 = fastest)\n", o.Scale, o.Runs)
	ops := disk.MacroOps()
	ranks := make([]map[string]int, len(res))
	score := make([]int, len(res))
	for i := range res {
		ranks[i] = map[string]int{}
	}
	for _, op := range ops {
		idx := disk.RankMacro(res, op)
		for _, i := range idx {
			t, _ := res[i].Op(op)
			r := 1
			for _, j := range idx {
				if o, _ := res[j].Op(op); o.MeanMs < t.MeanMs {
					r++
				}
			}
			ranks[i][op] = r
			if op != disk.MacroInit {
				score[i] += r
			}
		}
	}
	order := make([]int, len(res))
	for i := range order {
		order[i] = i
	}
	sort.SliceStable(order, func(a, b int) bool { return score[order[a]] < score[order[b]] })
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "path\ttablespace MiB\tdata load\tturnover report\tre-posting a day\ttemp-table storm\trank\t")
	for n, i := range order {
		r := res[i]
		fmt.Fprintf(tw, "%s\t%.1f", r.Path, float64(r.TablespaceBytes)/(1<<20))
		for _, op := range ops {
			t, _ := r.Op(op)
			fmt.Fprintf(tw, "\t%.1f (%d)", t.MeanMs, ranks[i][op])
		}
		fmt.Fprintf(tw, "\t%d\t\n", n+1)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	_, err := fmt.Fprintln(out, "rank: by the sum of the operations' ranks (data load not counted); WAL stays in the server's data directory")
	return err
}

// writeDiskHTML writes the comparison page (report.WriteDiskHTML) to path.
func writeDiskHTML(path string, rep diskReport) error {
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("--html: %w", err)
	}
	if err := report.WriteDiskHTML(f, rep.Micro, rep.Macro); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
