package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/erplab/erplab/internal/stress"
)

func newStressCmd() *cobra.Command {
	var (
		spec       stress.Spec
		vmBytes    string
		timeout    time.Duration
		thpCompare bool
		asJSON     bool
		quiet      bool
	)
	cmd := &cobra.Command{
		Use:   "stress",
		Short: "Stress CPU, I/O and memory apart and show user vs system time (THP diagnosis)",
		Long: `stress runs workers like the classic stress tool: --cpu N (sqrt loops), --io N (sync loops),
--vm N --vm-bytes B (map, touch every page, unmap, repeat). It shows the host CPU split from
/proc/stat, the workers' own user/system time and the THP/compaction counters of /proc/vmstat
as a live line (stderr) and a final table. --thp-compare runs the vm workers twice, with
madvise(MADV_HUGEPAGE) and with madvise(MADV_NOHUGEPAGE), without touching global settings.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if vmBytes != "" {
				n, err := stress.ParseSize(vmBytes)
				if err != nil {
					return withCode(exitUsage, fmt.Errorf("--vm-bytes: %w", err))
				}
				spec.VMBytes = n
			}
			if timeout <= 0 || timeout > 24*time.Hour {
				return withCode(exitUsage, fmt.Errorf("--timeout %s: want > 0 and at most 24h", timeout))
			}
			if thpCompare && spec.VM == 0 {
				spec.VM = 2
			}
			if err := spec.Validate(); err != nil {
				return withCode(exitUsage, err)
			}
			ctx := cmd.Context()
			errw := cmd.ErrOrStderr()
			// On a terminal the live line rewrites itself; elsewhere
			// (a log file, a pipe) each update is a plain line.
			tty := false
			if f, ok := errw.(*os.File); ok {
				tty = isTerminal(f)
			}
			tick := func(l string) {
				switch {
				case quiet:
				case tty:
					fmt.Fprintf(errw, "\r\033[K%s", l)
				default:
					fmt.Fprintln(errw, l)
				}
			}
			out := cmd.OutOrStdout()
			if thpCompare {
				c, err := stress.CompareTHP(ctx, spec, timeout, tick)
				stressEndLive(errw, quiet || !tty)
				if err != nil {
					if errors.Is(err, ctx.Err()) {
						return withCode(exitInterrupted, err)
					}
					return err
				}
				if asJSON {
					return labWriteJSON(out, c)
				}
				return stress.WriteComparison(out, c)
			}
			rep, err := stress.RunFor(ctx, spec, timeout, tick)
			stressEndLive(errw, quiet || !tty)
			if err != nil {
				return err
			}
			if asJSON {
				err = labWriteJSON(out, rep)
			} else {
				err = stress.WriteTable(out, rep)
			}
			if err == nil && ctx.Err() != nil {
				return withCode(exitInterrupted, fmt.Errorf("stress interrupted after %.0f s", rep.Seconds))
			}
			return err
		},
	}
	f := cmd.Flags()
	f.IntVar(&spec.CPU, "cpu", 0, "CPU workers (sqrt loops)")
	f.IntVar(&spec.IO, "io", 0, "I/O workers (sync(2) loops)")
	f.IntVar(&spec.VM, "vm", 0, "memory workers (map, touch, unmap); 2 with --thp-compare when not given")
	f.StringVar(&vmBytes, "vm-bytes", "256M", "bytes mapped by each vm worker (K, M, G suffixes)")
	f.StringVar(&spec.THP, "thp", "", "THP advice for the vm workers: huge (MADV_HUGEPAGE), nohuge (MADV_NOHUGEPAGE) or empty")
	f.DurationVar(&timeout, "timeout", 30*time.Second, "run time (with --thp-compare: split into two halves)")
	f.BoolVar(&thpCompare, "thp-compare", false, "run the vm workers with huge pages allowed, then refused, and compare")
	f.BoolVar(&asJSON, "json", false, "print the report as JSON")
	f.BoolVarP(&quiet, "quiet", "q", false, "no live line")
	return cmd
}

func stressEndLive(w io.Writer, quiet bool) {
	if !quiet {
		fmt.Fprint(w, "\r\033[K")
	}
}

func labWriteJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		return fmt.Errorf("write json: %w", err)
	}
	return nil
}
