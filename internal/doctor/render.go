package doctor

import (
	"fmt"
	"io"
	"strings"
)

// Formats of Render.
const (
	FormatText     = "text"
	FormatJSON     = "json"
	FormatMarkdown = "markdown"
)

// Render writes the report in format (FormatText, FormatJSON or
// FormatMarkdown). It returns an error for an unknown format or a failed
// write.
func Render(w io.Writer, r *Report, format string) error {
	switch format {
	case FormatText:
		return write(w, Text(r))
	case FormatMarkdown:
		return write(w, Markdown(r))
	case FormatJSON:
		b, err := r.JSON()
		if err != nil {
			return fmt.Errorf("doctor: encode report: %w", err)
		}
		return write(w, string(b)+"\n")
	}
	return fmt.Errorf("unknown format %q (text, json, markdown)", format)
}

func write(w io.Writer, s string) error {
	if _, err := io.WriteString(w, s); err != nil {
		return fmt.Errorf("doctor: write report: %w", err)
	}
	return nil
}

// sections are the severities in report order.
var sections = []Severity{Critical, Warning, Info, OK, NotChecked}

// header is the report's first lines.
func header(r *Report) []string {
	if r.Window != nil {
		return windowHeader(r)
	}
	loc := "remote"
	if r.Server.Local {
		loc = "local"
	}
	lines := []string{
		fmt.Sprintf("PostgreSQL %s, database %s (%s), %s", r.Server.Version, r.Server.Database, loc, r.Server.DSN),
	}
	if r.HostChecked {
		lines = append(lines, "host checks: "+r.HostNote)
	} else {
		lines = append(lines, "host checks: not run, needs "+r.HostNote)
	}
	if r.SampleS > 0 {
		w := ""
		if r.SampleWindows > 1 {
			w = fmt.Sprintf(" in %d windows (checks judge the worst, print the mean)", r.SampleWindows)
		}
		lines = append(lines, fmt.Sprintf("sampled for %.1f s%s", r.SampleS, w))
	} else {
		lines = append(lines, "no sample taken (rate-based checks need --sample > 0)")
	}
	if !r.Server.Superuser && !r.Server.StatsPrivileged {
		lines = append(lines, fmt.Sprintf("role %s without pg_read_all_stats (GRANT pg_monitor TO %s): other users' sessions and queries are hidden", r.Server.role(), r.Server.role()))
	}
	counts := make([]string, 0, len(sections))
	for _, s := range sections {
		counts = append(counts, fmt.Sprintf("%d %s", r.Count(s), s))
	}
	lines = append(lines, "findings: "+strings.Join(counts, ", ")+"; worst: "+r.Worst.String())
	if nr := r.NotRun(); nr != "" {
		lines = append(lines, nr)
	}
	return lines
}

// Text renders the report for a terminal: a header, then one section per
// severity; critical, warning and info findings in full (evidence, why,
// fix, source), ok and not-checked findings one line each.
func Text(r *Report) string {
	var b strings.Builder
	b.WriteString("erplab doctor\n")
	for _, l := range header(r) {
		b.WriteString("  " + l + "\n")
	}
	for _, sev := range sections {
		fs := r.bySeverity(sev)
		if len(fs) == 0 {
			continue
		}
		fmt.Fprintf(&b, "\n%s (%d)\n", strings.ToUpper(sev.String()), len(fs))
		for _, f := range fs {
			if sev == OK || sev == NotChecked {
				fmt.Fprintf(&b, "  [%s] %s\n", f.ID, f.Summary)
				continue
			}
			fmt.Fprintf(&b, "  [%s] %s: %s\n", f.ID, f.Title, f.Summary)
			for _, e := range f.Evidence {
				fmt.Fprintf(&b, "      evidence: %s  (%s)\n", e.Text, e.From)
			}
			fmt.Fprintf(&b, "      why: %s\n", f.Why)
			if len(f.Fix) > 0 {
				b.WriteString("      fix:\n")
				for _, c := range f.Fix {
					fmt.Fprintf(&b, "        %s\n", c)
				}
			}
			for _, s := range f.Sources {
				fmt.Fprintf(&b, "      source: %s\n", s)
			}
		}
	}
	for _, st := range r.Storms {
		fmt.Fprintf(&b, "\nstorm at %.1f s: %s\n", st.T, st.Message)
	}
	return b.String()
}

// Markdown renders the report as a Markdown document (for tickets and CI
// summaries): every finding with its evidence, fix in a code block and
// sources; ok and not-checked findings in a table.
func Markdown(r *Report) string {
	var b strings.Builder
	b.WriteString("# erplab doctor\n\n")
	for _, l := range header(r) {
		b.WriteString("- " + mdEscape(l) + "\n")
	}
	for _, sev := range sections {
		fs := r.bySeverity(sev)
		if len(fs) == 0 {
			continue
		}
		fmt.Fprintf(&b, "\n## %s (%d)\n\n", titleCase(sev.String()), len(fs))
		if sev == OK || sev == NotChecked {
			b.WriteString("| check | result |\n|---|---|\n")
			for _, f := range fs {
				fmt.Fprintf(&b, "| `%s` | %s |\n", f.ID, strings.ReplaceAll(mdEscape(f.Summary), "|", `\|`))
			}
			continue
		}
		for _, f := range fs {
			fmt.Fprintf(&b, "### `%s` %s\n\n%s\n\n", f.ID, mdEscape(f.Title), mdEscape(f.Summary))
			if len(f.Evidence) > 0 {
				b.WriteString("Evidence:\n\n")
				for _, e := range f.Evidence {
					fmt.Fprintf(&b, "- %s (from %s)\n", mdEscape(e.Text), mdEscape(e.From))
				}
				b.WriteString("\n")
			}
			fmt.Fprintf(&b, "Why: %s\n\n", mdEscape(f.Why))
			if len(f.Fix) > 0 {
				b.WriteString("Fix:\n\n```\n" + strings.Join(f.Fix, "\n") + "\n```\n\n")
			}
			b.WriteString("Sources:\n\n")
			for _, s := range f.Sources {
				fmt.Fprintf(&b, "- %s\n", mdEscape(s))
			}
			b.WriteString("\n")
		}
	}
	return b.String()
}

func (r *Report) bySeverity(s Severity) []Finding {
	var out []Finding
	for _, f := range r.Findings {
		if f.Severity == s {
			out = append(out, f)
		}
	}
	return out
}

func titleCase(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}

// mdEscape escapes, with CommonMark backslash escapes, the characters
// Markdown would take as emphasis, code, links, HTML, entities or block
// quotes in running text: "a -> b" stays "a -\> b" (shown as "a -> b"),
// never an HTML entity that plain-text viewers show as "&gt;".
func mdEscape(s string) string { return mdEscaper.Replace(s) }

var mdEscaper = strings.NewReplacer(`\`, `\\`, "*", `\*`, "_", `\_`, "<", `\<`, ">", `\>`, "&", `\&`, "`", "\\`", "[", `\[`, "]", `\]`)

// windowHeader is the first lines of a report on a window of a run's
// results (doctor --results).
func windowHeader(r *Report) []string {
	w := r.Window
	lines := []string{fmt.Sprintf("results %s: run of %s from %s", w.File, fmtT(w.RunS), w.StartedAt.Format("2006-01-02 15:04:05 MST"))}
	if r.Server.Version != "" {
		lines[0] += fmt.Sprintf(", PostgreSQL %s, database %s", r.Server.Version, r.Server.Database)
	}
	before := "nothing before it to compare"
	if w.FromS > 0 {
		before = "compared with 0s-" + fmtT(w.FromS)
	}
	lines = append(lines, fmt.Sprintf("window %s-%s (%s)", fmtT(w.FromS), fmtT(w.ToS), before))
	for _, n := range w.NotRecorded {
		lines = append(lines, "not recorded: "+n)
	}
	lines = append(lines, "cause: "+w.Cause)
	counts := make([]string, 0, len(sections))
	for _, s := range sections {
		counts = append(counts, fmt.Sprintf("%d %s", r.Count(s), s))
	}
	return append(lines, "findings: "+strings.Join(counts, ", ")+"; worst: "+r.Worst.String())
}
