package results

import (
	"strings"
	"testing"

	"github.com/HdrHistogram/hdrhistogram-go"
)

// thinnedFile is a real soak's results whose series the recorder thinned:
// erplab run --workload smoke --users 2 --soak --window 10s
// --soak-horizon 20s --duration 75s --observe=false on the embedded
// server: coarse points with span_s, then the horizon's full points.
const thinnedFile = "testdata/soak-thinned.json"

// TestThinnedDocument: a thinned document reads and validates, its
// coarse points cover the time since the previous point, and the sums
// and merged histograms over its series still equal the operations'
// results and the figures of a span (SpanFigures) the whole run's.
func TestThinnedDocument(t *testing.T) {
	d, err := Read(thinnedFile)
	if err != nil {
		t.Fatal(err)
	}
	if err := Validate(d); err != nil {
		t.Fatal(err)
	}
	coarse, prev := 0, 0.0
	for _, iv := range d.Series {
		if iv.SpanS > 0 {
			coarse++
			if iv.SpanS <= iv.T-prev-1e-3 || iv.SpanS < 2 {
				t.Fatalf("coarse point at %g s: span_s %g after %g", iv.T, iv.SpanS, prev)
			}
		}
		prev = iv.T
	}
	if coarse < 2 || coarse == len(d.Series) {
		t.Fatalf("%d coarse points of %d: want a thinned series", coarse, len(d.Series))
	}
	for _, op := range d.Operations {
		var n int64
		var m histMerger
		for i, iv := range d.Series {
			oi := iv.Ops[op.Name]
			n += oi.Count
			if err := m.add(oi.Histogram, op.Name); err != nil {
				t.Fatalf("series[%d]: %v", i, err)
			}
		}
		whole, err := hdrhistogram.Decode([]byte(op.Histogram))
		if err != nil {
			t.Fatal(err)
		}
		if n != op.Count || (op.Count > op.Errors && m.h.ValueAtQuantile(95) != whole.ValueAtQuantile(95)) {
			t.Fatalf("%s: series sum %d, p95 %d µs; operation %d, %d µs", op.Name, n, m.h.ValueAtQuantile(95), op.Count, whole.ValueAtQuantile(95))
		}
	}
	span, err := SpanFigures(d, 0, d.Series[len(d.Series)-1].T)
	if err != nil {
		t.Fatal(err)
	}
	if span.Count != d.Totals.Count {
		t.Fatalf("SpanFigures over the run: %d executions, totals %d", span.Count, d.Totals.Count)
	}
	// a coarse point whose span_s does not match its place is refused
	for i := range d.Series {
		if d.Series[i].SpanS > 0 {
			d.Series[i].SpanS += 5
			err := Validate(d)
			if err == nil || !strings.Contains(err.Error(), "span_s") {
				t.Fatalf("Validate with a wrong span_s: %v", err)
			}
			break
		}
	}
}

// TestMergeThinnedSegments: segments thinned alike merge, keeping the
// coarse points' span_s; segments thinned differently (a soak warning in
// one only) are refused with a one-line error naming the point.
func TestMergeThinnedSegments(t *testing.T) {
	docs := readSegments(t)
	for _, d := range docs {
		f, err := Fold(0, d.Series[:2])
		if err != nil {
			t.Fatal(err)
		}
		d.Series = append([]Interval{f}, d.Series[2:]...)
	}
	m, err := Merge(docs, MergeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if m.Series[0].SpanS != docs[0].Series[0].SpanS || m.Series[0].SpanS == 0 {
		t.Fatalf("merged series[0].span_s %g, segments' %g", m.Series[0].SpanS, docs[0].Series[0].SpanS)
	}
	docs[1].Series[0].SpanS = 0
	if _, err := Merge(docs, MergeOptions{}); err == nil || !strings.Contains(err.Error(), "series[0]: thinned differently") {
		t.Fatalf("merge of differently thinned segments: %v", err)
	}
}
