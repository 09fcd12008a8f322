package main

import (
	"bytes"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/erplab/erplab/internal/capacity"
	"github.com/erplab/erplab/internal/report"
	"github.com/erplab/erplab/internal/safefile"
)

// newReportCmd is `erplab report RUN.json [MORE.json...] [-o FILE]`.
// Exit codes: 0 written; 1 an input could not be read or the output not
// written; 2 bad usage.
func newReportCmd() *cobra.Command {
	var out, format string
	var perm fs.FileMode
	cmd := &cobra.Command{
		Use:   "report RUN.json [MORE.json...]",
		Short: "Render run results as one self-contained HTML page (or Markdown)",
		Long: `report renders results files of erplab run for people. HTML (the default) is one file
that works offline (inline CSS, inline SVG charts, no scripts, no external assets): summary and
APDEX table, APDEX per operation as bars (runs side by side), response-time percentiles over
time per key operation, VUs and throughput over time, active sessions by wait event (stacked),
host CPU user/system/iowait/softirq, catalog size and temp files over time, storms marked on
the time axis, and the environment and parameters. A run of erplab run --soak gets a soak
section: per trend (APDEX, throughput, each key operation's p95, sessions, catalog, dead
tuples, xmin age, WAL, ...) a small chart of its values per window with the fitted line, its
slope and interval in the caption, each early warning and the collapse marked by a vertical
line; in Markdown, a table of the trends and the warnings' lines. --format markdown writes the
tables only, for tickets. A capacity document of erplab capacity gets its own page: the verdict, the steps,
and APDEX, throughput, p95 and top wait events against the load with the knee marked; an A/B
document of erplab capacity --variant gets the verdicts, the sides and every search's APDEX
curve on one chart with each side's capacity marked; several capacity documents are drawn on
one such chart (separate searches: no verdict).

Exit codes: 0 written; 1 an input could not be read or the output not written; 2 bad usage.`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if format != "html" && format != "markdown" {
				return withCode(exitUsage, fmt.Errorf("--format must be html or markdown, got %q", format))
			}
			out = reportPath(out, args[0], format)
			var buf bytes.Buffer
			if len(args) == 1 && capacity.IsABDocument(args[0]) {
				// erplab capacity --variant's document: its own page.
				doc, err := capacity.ReadAB(args[0])
				if err == nil && format == "markdown" {
					err = report.WriteCapacityABMarkdown(&buf, doc)
				} else if err == nil {
					err = report.WriteCapacityABHTML(&buf, doc)
				}
				if err != nil {
					return err
				}
				return writeReport(cmd, out, perm, buf.Bytes())
			}
			if len(args) > 1 && allCapacity(args) {
				// several capacity documents: their APDEX curves on one chart
				var docs []*capacity.Document
				var names []string
				for _, a := range args {
					d, err := capacity.Read(a)
					if err != nil {
						return err
					}
					docs, names = append(docs, d), append(names, strings.TrimSuffix(filepath.Base(a), ".json"))
				}
				ab := capacity.Separate(names, docs)
				var err error
				if format == "markdown" {
					err = report.WriteCapacityABMarkdown(&buf, ab)
				} else {
					err = report.WriteCapacityABHTML(&buf, ab)
				}
				if err != nil {
					return err
				}
				return writeReport(cmd, out, perm, buf.Bytes())
			}
			if len(args) == 1 && capacity.IsDocument(args[0]) {
				// erplab capacity's document: its own page.
				doc, err := capacity.Read(args[0])
				if err == nil && format == "markdown" {
					err = report.WriteCapacityMarkdown(&buf, doc)
				} else if err == nil {
					err = report.WriteCapacityHTML(&buf, doc)
				}
				if err != nil {
					return err
				}
				return writeReport(cmd, out, perm, buf.Bytes())
			}
			runs, err := report.Load(args)
			if err != nil {
				return err
			}
			if format == "markdown" {
				err = report.WriteMarkdown(&buf, runs)
			} else {
				err = report.WriteHTML(&buf, runs)
			}
			if err != nil {
				return err
			}
			return writeReport(cmd, out, perm, buf.Bytes())
		},
	}
	cmd.Flags().StringVarP(&out, "output", "o", "", "output file, a new one, or an existing directory for <first input's name>.html/.md (default: standard output)")
	cmd.Flags().StringVar(&format, "format", "html", "html or markdown")
	addOutModeFlag(cmd.Flags(), &perm)
	return cmd
}

// allCapacity reports whether every path is a capacity document.
func allCapacity(paths []string) bool {
	for _, p := range paths {
		if !capacity.IsDocument(p) {
			return false
		}
	}
	return true
}

// reportPath is the page's file for -o out: out itself, or in an existing
// directory out the first input's name with .html or .md.
func reportPath(out, first, format string) string {
	if st, err := os.Stat(out); err != nil || !st.IsDir() {
		return out
	}
	ext := ".html"
	if format == "markdown" {
		ext = ".md"
	}
	stem := strings.TrimSuffix(strings.TrimSuffix(filepath.Base(first), ".jsonl"), ".json")
	return filepath.Join(out, stem+ext)
}

// writeReport writes a rendered page to out ("" or "-": standard output),
// a new file with mode perm (safefile.WriteNew: an existing file or a
// symbolic link there is refused), and says where on standard error.
func writeReport(cmd *cobra.Command, out string, perm fs.FileMode, b []byte) error {
	if out == "" || out == "-" {
		_, err := cmd.OutOrStdout().Write(b)
		return err
	}
	if err := safefile.WriteNew(out, b, perm); err != nil {
		return fmt.Errorf("report: %w", err)
	}
	fmt.Fprintf(cmd.ErrOrStderr(), "report: %s (%d bytes)\n", out, len(b))
	return nil
}
