package compare

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"strings"
	"text/tabwriter"
)

func fmtNum(v float64) string {
	switch a := math.Abs(v); {
	case math.IsNaN(v):
		return "-"
	case a >= 1e9:
		return fmt.Sprintf("%.2fG", v/1e9)
	case a >= 1e6:
		return fmt.Sprintf("%.2fM", v/1e6)
	case a >= 1e4:
		return fmt.Sprintf("%.1fk", v/1e3)
	case a >= 100:
		return fmt.Sprintf("%.1f", v)
	case a >= 1 || a == 0:
		return fmt.Sprintf("%.2f", v)
	default:
		return fmt.Sprintf("%.3f", v)
	}
}

func fmtPct(v float64) string {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return "-"
	}
	return fmt.Sprintf("%+.1f%%", v)
}

func fmtP(p float64) string {
	switch {
	case math.IsNaN(p):
		return "-"
	case p < 0.0001:
		return "<0.0001"
	default:
		return fmt.Sprintf("%.4f", p)
	}
}

func (r Row) metricLabel() string {
	if r.Unit == "" || strings.HasSuffix(r.Metric, "_"+r.Unit) || r.Unit == "%" && strings.HasSuffix(r.Metric, "_pct") {
		return r.Metric
	}
	return r.Metric + " (" + r.Unit + ")"
}

func (r Row) verdictText() string {
	if r.Note != "" && r.Verdict == NotApplicable {
		return string(r.Verdict) + ": " + r.Note
	}
	return string(r.Verdict)
}

// Summary is the one-line count of verdicts, e.g.
// "2 better, 1 worse, 40 no significant difference, 3 n/a".
func (c *Comparison) Summary() string {
	parts := []string{}
	for _, v := range []Verdict{Better, Worse, Higher, Lower, NoDifference, NotApplicable} {
		if n := c.Count(v); n > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", n, v))
		}
	}
	return strings.Join(parts, ", ")
}

// MethodNote explains the verdicts in one paragraph.
func (c *Comparison) MethodNote() string {
	return fmt.Sprintf("Verdicts: better/worse when the test is significant after Holm's correction over all %d tested rows "+
		"(family-wise alpha %g) and the relative difference is at least %g %%. Tests: APDEX and error rate two-proportion z "+
		"(APDEX per-sample score 1/0.5/0 from the zone counts); p50/p95/p99 Mann-Whitney U over per-interval percentiles; "+
		"throughput and host/database rates Welch's t over per-interval values; wait-event shares Mann-Whitney U over samples.",
		c.tested(), c.Alpha, 100*c.MinEffect)
}

func (c *Comparison) tested() int {
	n := 0
	for _, r := range c.Rows {
		if !math.IsNaN(r.P) {
			n++
		}
	}
	return n
}

// WriteText writes the comparison as an aligned table.
func (c *Comparison) WriteText(w io.Writer) error {
	fmt.Fprintf(w, "baseline A: %s\nvariant  B: %s\n\n", c.Baseline, c.Variant)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "SUBJECT\tMETRIC\tA\tB\tDELTA\tDELTA %\tP\tTEST\tVERDICT")
	section := ""
	for _, r := range c.Rows {
		if r.Section != section {
			if section != "" {
				fmt.Fprintln(tw, "\t\t\t\t\t\t\t\t")
			}
			section = r.Section
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", r.Subject, r.metricLabel(), fmtNum(r.A), fmtNum(r.B),
			fmtNum(r.Delta), fmtPct(r.DeltaPct), fmtP(r.P), r.Method, r.verdictText())
	}
	if err := tw.Flush(); err != nil {
		return fmt.Errorf("compare: write: %w", err)
	}
	_, err := fmt.Fprintf(w, "\n%s\n%s\n", c.Summary(), c.MethodNote())
	return err
}

// WriteMarkdown writes the comparison as a Markdown table.
func (c *Comparison) WriteMarkdown(w io.Writer) error {
	fmt.Fprintf(w, "### %s vs %s\n\n", mdCell(c.Baseline), mdCell(c.Variant))
	fmt.Fprintln(w, "| subject | metric | A | B | Δ | Δ % | p | test | verdict |")
	fmt.Fprintln(w, "|---|---|---:|---:|---:|---:|---:|---|---|")
	for _, r := range c.Rows {
		v := r.verdictText()
		if r.Verdict == Better || r.Verdict == Worse {
			v = "**" + v + "**"
		}
		fmt.Fprintf(w, "| %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", mdCell(r.Subject), mdCell(r.metricLabel()),
			fmtNum(r.A), fmtNum(r.B), fmtNum(r.Delta), fmtPct(r.DeltaPct), fmtP(r.P), r.Method, mdCell(v))
	}
	_, err := fmt.Fprintf(w, "\n%s. %s\n", c.Summary(), c.MethodNote())
	return err
}

func mdCell(s string) string { return strings.ReplaceAll(s, "|", `\|`) }

// WriteJSON writes comparisons as one indented JSON array.
func WriteJSON(w io.Writer, cs []*Comparison) error {
	b, err := json.MarshalIndent(cs, "", "  ")
	if err != nil {
		return fmt.Errorf("compare: encode: %w", err)
	}
	_, err = w.Write(append(b, '\n'))
	return err
}
