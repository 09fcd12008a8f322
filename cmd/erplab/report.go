package main

import (
	"bytes"
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/erplab/erplab/internal/report"
)

// newReportCmd is `erplab report RUN.json [MORE.json...] [-o FILE]`.
// Exit codes: 0 written; 1 an input could not be read or the output not
// written; 2 bad usage.
func newReportCmd() *cobra.Command {
	var out, format string
	cmd := &cobra.Command{
		Use:   "report RUN.json [MORE.json...]",
		Short: "Render run results as one self-contained HTML page (or Markdown)",
		Long: `report renders results files of erplab run for people. HTML (the default) is one file
that works offline (inline CSS, inline SVG charts, no scripts, no external assets): summary and
APDEX table, APDEX per operation as bars (runs side by side), response-time percentiles over
time per key operation, VUs and throughput over time, active sessions by wait event (stacked),
host CPU user/system/iowait/softirq, catalog size and temp files over time, storms marked on
the time axis, and the environment and parameters. --format markdown writes the tables only,
for tickets.

Exit codes: 0 written; 1 an input could not be read or the output not written; 2 bad usage.`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if format != "html" && format != "markdown" {
				return withCode(exitUsage, fmt.Errorf("--format must be html or markdown, got %q", format))
			}
			runs, err := report.Load(args)
			if err != nil {
				return withCode(exitError, err)
			}
			var buf bytes.Buffer
			if format == "markdown" {
				err = report.WriteMarkdown(&buf, runs)
			} else {
				err = report.WriteHTML(&buf, runs)
			}
			if err != nil {
				return withCode(exitError, err)
			}
			if out == "" || out == "-" {
				_, err := cmd.OutOrStdout().Write(buf.Bytes())
				return err
			}
			if err := os.WriteFile(out, buf.Bytes(), 0o644); err != nil {
				return withCode(exitError, fmt.Errorf("report: %w", err))
			}
			fmt.Fprintf(cmd.ErrOrStderr(), "report: %s (%d bytes)\n", out, buf.Len())
			return nil
		},
	}
	cmd.Flags().StringVarP(&out, "output", "o", "", "output file (default: standard output)")
	cmd.Flags().StringVar(&format, "format", "html", "html or markdown")
	return cmd
}
