package compare

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"strings"
	"text/tabwriter"

	"github.com/erplab/erplab/internal/apdex"
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

// fmtValue prints a side's value (A or B) of r: an APDEX score as every
// erplab table prints it (apdex.FormatValue: two decimals, truncated, so
// compare, the run summary and the report show the same figure), other
// metrics with fmtNum.
func (r Row) fmtValue(v float64) string {
	if r.Metric == "apdex" && !math.IsNaN(v) {
		return apdex.FormatValue(v)
	}
	return fmtNum(v)
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

// fmtCI is the interval "[lo, hi]" of a row, "-" when untested.
func fmtCI(r Row) string {
	if math.IsNaN(r.Lo) || math.IsNaN(r.Hi) {
		return "-"
	}
	return "[" + fmtNum(r.Lo) + ", " + fmtNum(r.Hi) + "]"
}

// UntestedReason says why r has no p-value, "" when it has one: its Note
// (e.g. "too few points (3, 4; need 5)"), "no samples in A" (B, on either
// side) when a side has no value, otherwise "nothing varies: the same
// value on both sides)".
func (r Row) UntestedReason() string {
	switch {
	case r.Tested():
		return ""
	case r.Note != "":
		return r.Note
	case math.IsNaN(r.A) && math.IsNaN(r.B):
		return "no samples on either side"
	case math.IsNaN(r.A):
		return "no samples in A"
	case math.IsNaN(r.B):
		return "no samples in B"
	default:
		return "nothing varies: the same value on both sides"
	}
}

// NoIntervalReason says why r has no 95 % interval, "" when it has one:
// its Note, or UntestedReason.
func (r Row) NoIntervalReason() string {
	switch {
	case !math.IsNaN(r.Lo) && !math.IsNaN(r.Hi):
		return ""
	case r.Note != "":
		return r.Note
	default:
		return r.UntestedReason()
	}
}

// Brief is the row on one line, rounded as in the tables (APDEX two
// decimals truncated, fmtNum, fmtP): "temp_churn apdex: A 0.95 -> B 0.59,
// delta -0.360 [-0.601, -0.119], p 0.0290: worse". A row without an
// interval says why instead of printing one: "... delta 0.00, not tested
// (nothing varies: the same value on both sides): no significant
// difference", or with a p-value "..., p 0.1000, no interval (no
// variation within either side: permutation p-value only): ...".
func (r Row) Brief() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s: A %s -> B %s", r.Subject, r.Metric, r.fmtValue(r.A), r.fmtValue(r.B))
	if !math.IsNaN(r.Delta) {
		b.WriteString(", delta " + fmtNum(r.Delta))
	}
	switch why := r.NoIntervalReason(); {
	case why == "":
		fmt.Fprintf(&b, " %s, p %s", fmtCI(r), fmtP(r.P))
	case !r.Tested():
		b.WriteString(", not tested (" + why + ")")
	default:
		fmt.Fprintf(&b, ", p %s, no interval (%s)", fmtP(r.P), why)
	}
	b.WriteString(": " + string(r.Verdict))
	return b.String()
}

func (r Row) verdictText() string {
	if r.Note != "" && r.Verdict == NotApplicable {
		return string(r.Verdict) + ": " + r.Note
	}
	return string(r.Verdict)
}

// Summary is the one-line count of verdicts, e.g.
// "2 better, 1 worse, 40 no significant difference, 3 n/a".
func (c *Comparison) Summary() string { return summaryOf(c.Rows) }

func summaryOf(rows []Row) string {
	parts := []string{}
	for _, v := range []Verdict{Better, Worse, Higher, Lower, Starved, NoDifference, OneRoundEach, NotApplicable} {
		n := 0
		for _, r := range rows {
			if r.Verdict == v {
				n++
			}
		}
		if n > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", n, v))
		}
	}
	return strings.Join(parts, ", ")
}

// rowsOf returns the rows of role (RolePrimary, RoleExploratory).
func (c *Comparison) rowsOf(role string) []Row {
	var out []Row
	for _, r := range c.Rows {
		if r.Role == role {
			out = append(out, r)
		}
	}
	return out
}

// Section headings of a comparison with primary rows.
const (
	PrimaryHeading     = "PRIMARY ROWS (pre-declared, confirmatory: Holm over these alone decides the verdict)"
	ExploratoryHeading = "EXPLORATORY ROWS (Holm over these in a family of their own: reported for insight, not the verdict)"
)

// tail is the summary at the end of a table: the verdict counts and,
// with primary rows, the exploratory counts and the primary verdict line.
func (c *Comparison) tail() string {
	if c.Primary == nil {
		return c.Summary()
	}
	return "exploratory rows: " + c.exploratorySummary() + "\n" + c.Primary.Line()
}

// exploratorySummary is the verdict count of the exploratory rows, "none"
// without any.
func (c *Comparison) exploratorySummary() string {
	if s := summaryOf(c.rowsOf(RoleExploratory)); s != "" {
		return s
	}
	return "none"
}

// MethodNote explains the verdicts in one paragraph.
func (c *Comparison) MethodNote() string {
	var how string
	if c.RoundsA == 1 && c.RoundsB == 1 {
		how = "one run per side: each row's B-A with a 95 % interval and p-value from the bootstrap standard error of " +
			"moving-block resamples of the runs' intervals and observation samples (block length max(n^1/3, autocorrelation lag))"
	} else {
		how = fmt.Sprintf("%d and %d rounds: each row's value per round, B-A of the round means with Welch's t interval and p-value over rounds",
			c.RoundsA, c.RoundsB)
	}
	family := fmt.Sprintf("over all %d tested rows (of %d listed)", c.tested(), len(c.Rows))
	if c.Primary != nil {
		family = fmt.Sprintf("within its family (the primary rows, declared before the runs, decide the verdict: %d of %d tested; "+
			"the exploratory rows form a family of their own: %s)", c.Primary.Family, len(c.PrimaryRows()), c.Primary.exploratoryCount())
	}
	rounds := ""
	if c.RoundsA == 1 {
		rounds = "with rounds only (one run per side decides nothing), "
	}
	return fmt.Sprintf("Method: %s. Verdicts: better/worse %swhen the p-value is significant after Holm's correction %s "+
		"at family-wise alpha %g, the whole interval lies beyond the minimum effect (max(%g %% of A, the metric's floor)) "+
		"and the starvation difference could not explain it. "+
		"Host CPU rows are the server's own process tree. See internal/compare/doc.go.", how, rounds, family, c.Alpha, 100*c.MinEffect)
}

func (c *Comparison) tested() int {
	n := 0
	for _, r := range c.Rows {
		if r.Tested() {
			n++
		}
	}
	return n
}

// WriteText writes the comparison as an aligned table.
func (c *Comparison) WriteText(w io.Writer) error {
	fmt.Fprintf(w, "baseline A: %s\nvariant  B: %s\n", c.Baseline, c.Variant)
	for _, s := range c.Warnings {
		fmt.Fprintf(w, "warning: %s\n", s)
	}
	fmt.Fprintf(w, "%s\n\n", c.Noise.Line())
	if c.RoundsHint != nil {
		fmt.Fprintf(w, "%s\n\n", c.RoundsHint.Line)
	}
	if c.Primary == nil {
		if err := writeTextRows(w, c.Rows); err != nil {
			return err
		}
	} else {
		fmt.Fprintln(w, PrimaryHeading)
		if err := writeTextRows(w, c.rowsOf(RolePrimary)); err != nil {
			return err
		}
		fmt.Fprintf(w, "\n%s\n", ExploratoryHeading)
		if err := writeTextRows(w, c.rowsOf(RoleExploratory)); err != nil {
			return err
		}
	}
	c.writeSlower(w, false)
	_, err := fmt.Fprintf(w, "\n%s\n%s\n", c.tail(), c.MethodNote())
	return err
}

// writeTextRows writes rows as an aligned table, a blank line between
// sections.
func writeTextRows(w io.Writer, rows []Row) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "SUBJECT\tMETRIC\tA\tB\tDELTA\tDELTA %\t95% CI OF DELTA\tP\tVERDICT")
	section := ""
	for _, r := range rows {
		if r.Section != section {
			if section != "" {
				fmt.Fprintln(tw, "\t\t\t\t\t\t\t\t")
			}
			section = r.Section
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", r.Subject, r.metricLabel(), r.fmtValue(r.A), r.fmtValue(r.B),
			fmtNum(r.Delta), fmtPct(r.DeltaPct), fmtCI(r), fmtP(r.P), r.verdictText())
	}
	if err := tw.Flush(); err != nil {
		return fmt.Errorf("compare: write: %w", err)
	}
	return nil
}

// WriteMarkdown writes the comparison as a Markdown table.
func (c *Comparison) WriteMarkdown(w io.Writer) error {
	fmt.Fprintf(w, "### %s vs %s\n\n", mdCell(c.Baseline), mdCell(c.Variant))
	for _, s := range c.Warnings {
		fmt.Fprintf(w, "> warning: %s\n", s)
	}
	fmt.Fprintf(w, "%s\n\n", c.Noise.Line())
	if c.RoundsHint != nil {
		fmt.Fprintf(w, "%s\n\n", c.RoundsHint.Line)
	}
	if c.Primary == nil {
		writeMarkdownRows(w, c.Rows)
	} else {
		fmt.Fprintf(w, "**%s**\n\n", PrimaryHeading)
		writeMarkdownRows(w, c.rowsOf(RolePrimary))
		fmt.Fprintf(w, "\n%s\n\n", ExploratoryHeading)
		writeMarkdownRows(w, c.rowsOf(RoleExploratory))
	}
	c.writeSlower(w, true)
	if c.Primary != nil {
		_, err := fmt.Fprintf(w, "\nExploratory rows: %s.\n\n**%s**\n\n%s\n", c.exploratorySummary(), mdCell(c.Primary.Line()), c.MethodNote())
		return err
	}
	_, err := fmt.Fprintf(w, "\n%s. %s\n", c.Summary(), c.MethodNote())
	return err
}

func writeMarkdownRows(w io.Writer, rows []Row) {
	fmt.Fprintln(w, "| subject | metric | A | B | Δ | Δ % | 95 % CI of Δ | p | verdict |")
	fmt.Fprintln(w, "|---|---|---:|---:|---:|---:|---:|---:|---|")
	for _, r := range rows {
		v := r.verdictText()
		if r.Verdict == Better || r.Verdict == Worse {
			v = "**" + v + "**"
		}
		fmt.Fprintf(w, "| %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", mdCell(r.Subject), mdCell(r.metricLabel()),
			r.fmtValue(r.A), r.fmtValue(r.B), fmtNum(r.Delta), fmtPct(r.DeltaPct), fmtCI(r), fmtP(r.P), mdCell(v))
	}
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
