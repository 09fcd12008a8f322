package results

import (
	"fmt"
	"math"
	"strings"
)

// Validate checks a document: the format name and schema version are
// known, the required fields (workload, started_at, status, every
// operation's name, unique) are present, counts are not negative and
// errors do not exceed counts, each operation's APDEX zones total its
// count plus skipped arrivals plus cut-short executions scored frustrated, and the totals equal the sums over the
// operations, and a thinned series' coarse point covers the time since
// the previous point (span_s). The error is one line naming the first field found wrong,
// e.g. `totals.count: 10, but the operations sum to 12`.
func Validate(d *Document) error {
	if d == nil {
		return fmt.Errorf("no document")
	}
	if d.Format != Format {
		return fmt.Errorf("format: %q, want %q", d.Format, Format)
	}
	if d.Schema < 0 || d.Schema > SchemaVersion {
		return fmt.Errorf("schema: %d, this erplab reads up to %d", d.Schema, SchemaVersion)
	}
	switch {
	case d.Workload == "":
		return fmt.Errorf("workload: missing")
	case d.StartedAt.IsZero():
		return fmt.Errorf("started_at: missing")
	case d.Status == "":
		return fmt.Errorf("status: missing")
	}
	// A rebuild from intervals without zones (schema 1) has no APDEX.
	noZones := strings.HasPrefix(string(d.Status), string(StatusKilled))
	var sum Totals
	seen := map[string]bool{}
	for i, op := range d.Operations {
		f := func(field string) string { return fmt.Sprintf("operations[%d].%s", i, field) }
		switch {
		case op.Name == "":
			return fmt.Errorf("%s: missing", f("name"))
		case seen[op.Name]:
			return fmt.Errorf("%s: %q appears twice", f("name"), op.Name)
		case op.Count < 0:
			return fmt.Errorf("%s: %d is negative", f("count"), op.Count)
		case op.Errors < 0 || op.Errors > op.Count:
			return fmt.Errorf("%s: %d, outside 0..count (%d)", f("errors"), op.Errors, op.Count)
		}
		seen[op.Name] = true
		if z, cut := op.Zones.Total(), op.CutShort.Scored(); z != op.Count+op.Skipped+cut && !(noZones && z == 0) {
			if cut > 0 {
				return fmt.Errorf("%s: total %d, want count + skipped + cut_short.frustrated = %d", f("zones"), z, op.Count+op.Skipped+cut)
			}
			return fmt.Errorf("%s: total %d, want count + skipped = %d", f("zones"), z, op.Count+op.Skipped)
		}
		sum.AddOp(op)
	}
	for _, c := range []struct {
		field     string
		got, want int64
	}{
		{"count", d.Totals.Count, sum.Count},
		{"errors", d.Totals.Errors, sum.Errors},
		{"skipped", d.Totals.Skipped, sum.Skipped},
		{"late", d.Totals.Late, sum.Late},
		{"retries", d.Totals.Retries, sum.Retries},
		{"retried", d.Totals.Retried, sum.Retried},
	} {
		if c.got != c.want {
			return fmt.Errorf("totals.%s: %d, but the operations sum to %d", c.field, c.got, c.want)
		}
	}
	return validateSpans(d.Series)
}

// validateSpans checks the coarse points of a thinned series: span_s is
// the time since the previous point (0.001 s of rounding allowed).
func validateSpans(series []Interval) error {
	prev := 0.0
	for i, iv := range series {
		if iv.SpanS < 0 || (iv.SpanS > 0 && math.Abs(iv.SpanS-(iv.T-prev)) > 1e-3) {
			return fmt.Errorf("series[%d].span_s: %g, but the point follows the previous one by %g s", i, iv.SpanS, iv.T-prev)
		}
		prev = iv.T
	}
	return nil
}
