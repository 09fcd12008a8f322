package replay

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/erplab/erplab/internal/capture/load"
	"github.com/erplab/erplab/internal/results"
)

// maxProblemLines is how many bad source lines the summary names.
const maxProblemLines = 3

// PrintSummary writes a replay's summary as `erplab run` writes a run's:
// per key operation its count, errors, p50/p95/p99 and APDEX with the
// captured ("as in production") p50/p95 beside them, the integral APDEX,
// then the fidelity lines and the source's bad lines (the first few, and
// their count).
func PrintSummary(w io.Writer, res *Result, src *load.Source) {
	doc, f := res.Doc, res.Fidelity
	fmt.Fprintf(w, "\nreplay %s after %s\n\n", doc.Status, doc.EndedAt.Sub(doc.StartedAt).Round(100_000_000))
	captured := map[string]GroupFigures{}
	width := len("key operation")
	for _, g := range f.Groups {
		captured[g.Name] = g
	}
	for _, r := range doc.Operations {
		width = max(width, len(r.Name))
	}
	name := func(s string) string { return fmt.Sprintf("%-*s", width, s) }
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "%s\tT\tcount\terrors\tp50\tp95\tp99\tAPDEX [T]\tcaptured p50\tcaptured p95\t\n", name("key operation"))
	for _, r := range doc.Operations {
		c := captured[r.Name].Captured
		cp50, cp95 := "-", "-"
		if c.Count > 0 {
			cp50, cp95 = results.FormatMs(c.P50), results.FormatMs(c.P95)
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%s\t%s\t%s\t%s\t%s\t%s\t\n", name(r.Name), results.FormatMs(r.TargetMs), r.Count, r.Errors,
			results.FormatMs(r.Response.P50), results.FormatMs(r.Response.P95), results.FormatMs(r.Response.P99), r.Apdex.String(), cp50, cp95)
	}
	fmt.Fprintf(tw, "%s\t\t%d\t%d\t\t\t\t%s\t\t\t\n", name("all (integral)"), doc.Totals.Count, doc.Totals.Errors, doc.Integral.String())
	tw.Flush()
	fmt.Fprintf(w, "\nintegral APDEX %s (%s); captured p50/p95: the durations as in production\n\n", doc.Integral.String(), doc.Integral.Rating)
	printFidelity(w, f)
	printSource(w, src)
}

// printFidelity writes the fidelity lines.
func printFidelity(w io.Writer, f Fidelity) {
	fmt.Fprintf(w, "statements replayed %d (and %d prepares) in %d connections for %d captured sessions x %d\n",
		f.Statements, f.Prepares, f.Connections, f.Sessions, f.UsersX)
	prep := ""
	if f.PreparesFailed > 0 {
		prep = fmt.Sprintf(" (%d of them prepares, in no key operation)", f.PreparesFailed)
	}
	fmt.Fprintf(w, "failed %d%s: new (the capture did not have them) %s; as captured %s; captured but not replayed %s\n",
		f.Failed, prep, byCode(f.NewErrors), byCode(f.SameErrors), byCode(f.MissingErrors))
	fmt.Fprintf(w, "rows differing %d of %d compared\n", f.RowsDiffer, f.RowsCompared)
	if f.Lag != nil {
		fmt.Fprintf(w, "lag behind schedule p50 %s, p99 %s, max %s\n", results.FormatMs(f.Lag.P50), results.FormatMs(f.Lag.P99), results.FormatMs(f.Lag.Max))
	} else {
		fmt.Fprintln(w, "lag: none measured (--speed 0: as fast as possible)")
	}
	fmt.Fprintf(w, "lock waits %d, reordered %d (sessions let out of the captured order to end a wait cycle)\n", f.LockWaits, f.Reordered)
	fmt.Fprintf(w, "skipped %d%s\n", f.Skipped, reasons(f.SkippedBy))
	if f.ConnectFailures > 0 {
		fmt.Fprintf(w, "connections refused %d\n", f.ConnectFailures)
	}
	if len(f.UnknownTypes) > 0 {
		fmt.Fprintf(w, "types unknown on the target (left to the server): %s\n", strings.Join(f.UnknownTypes, ", "))
	}
	if f.Partial != "" {
		fmt.Fprintf(w, "partial source: %s: not the whole workload\n", f.Partial)
	}
}

// printSource writes the source's notes and bad lines.
func printSource(w io.Writer, src *load.Source) {
	if src == nil {
		return
	}
	for _, n := range src.Notes {
		fmt.Fprintf(w, "source: %s\n", n)
	}
	fmt.Fprintf(w, "source parse errors: %d bad lines\n", src.BadLines)
	for i, p := range src.Problems {
		if i == maxProblemLines {
			fmt.Fprintf(w, "  ... and %d more named in the results\n", len(src.Problems)-i)
			break
		}
		fmt.Fprintf(w, "  %s\n", p)
	}
}

// byCode is "none" or "40001 3, 23505 1".
func byCode(m map[string]int64) string {
	if len(m) == 0 {
		return "none"
	}
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(m)) {
		parts = append(parts, fmt.Sprintf("%s %d", k, m[k]))
	}
	return strings.Join(parts, ", ")
}

// reasons is "" or ": reason n, reason m".
func reasons(m map[string]int64) string {
	if len(m) == 0 {
		return ""
	}
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(m)) {
		parts = append(parts, fmt.Sprintf("%s %d", k, m[k]))
	}
	return ": " + strings.Join(parts, ", ")
}
