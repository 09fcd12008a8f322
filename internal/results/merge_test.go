package results

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/HdrHistogram/hdrhistogram-go"
)

// readSegments reads the three recorded segment documents of run r1
// (erplab run --segment I/3 --run-id r1 on one server, smoke workload,
// --stage 2s:10 --stage 3s:10).
func readSegments(t *testing.T) []*Document {
	t.Helper()
	var docs []*Document
	for _, n := range []string{"r1-1of3.json", "r1-2of3.json", "r1-3of3.json"} {
		d, err := Read(filepath.Join("testdata", "segments", n))
		if err != nil {
			t.Fatal(err)
		}
		docs = append(docs, d)
	}
	return docs
}

// The merge adds counts and zones and recomputes the percentiles from
// the added histograms: each operation's merged p99 equals the p99 of
// the union of every segment's interval histograms (another path to the
// same samples), and totals, series gauges and stages are the sums.
func TestMergeIsExact(t *testing.T) {
	docs := readSegments(t)
	m, err := Merge(docs, MergeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := Validate(m); err != nil {
		t.Fatalf("merged document: %v", err)
	}
	var count, errs int64
	for _, d := range docs {
		count += d.Totals.Count
		errs += d.Totals.Errors
	}
	if m.Totals.Count != count || m.Totals.Errors != errs || count == 0 {
		t.Fatalf("merged totals %d/%d, segments sum to %d/%d", m.Totals.Count, m.Totals.Errors, count, errs)
	}
	for _, op := range m.Operations {
		union := hdrhistogram.New(1, 3600_000_000, 3)
		var n int64
		for _, d := range docs {
			for _, iv := range d.Series {
				oi, ok := iv.Ops[op.Name]
				if !ok || oi.Histogram == "" {
					continue
				}
				h, err := hdrhistogram.Decode([]byte(oi.Histogram))
				if err != nil {
					t.Fatal(err)
				}
				union.Merge(h)
			}
			for _, o := range d.Operations {
				if o.Name == op.Name {
					n += o.Count
				}
			}
		}
		if op.Count != n {
			t.Errorf("%s: merged count %d, segments %d", op.Name, op.Count, n)
		}
		if union.TotalCount() == 0 {
			continue
		}
		want := Summarize(union)
		if op.Response.P99 != want.P99 || op.Response.P50 != want.P50 || op.Response.Max != want.Max {
			t.Errorf("%s: merged p50/p99/max %g/%g/%g, union of the samples %g/%g/%g", op.Name, op.Response.P50, op.Response.P99, op.Response.Max, want.P50, want.P99, want.Max)
		}
		if op.Zones.Total() != op.Count+op.Skipped+op.CutShort.Scored() {
			t.Errorf("%s: zones %d", op.Name, op.Zones.Total())
		}
	}
	var vus int64
	for _, d := range docs {
		vus += d.Series[len(d.Series)/2].VUs
	}
	if got := m.Series[len(m.Series)/2].VUs; got != vus || vus != 10 {
		t.Errorf("merged VUs mid-run %d, segments sum to %d (want the profile's 10)", got, vus)
	}
	if len(m.Stages) != 2 || m.Stages[0].Count+m.Stages[1].Count != m.Totals.Count {
		t.Errorf("merged stages %+v, want 2 summing to %d", m.Stages, m.Totals.Count)
	}
	if m.Merged == nil || len(m.Merged.Segments) != 3 || m.Merged.Partial || m.RunID != "r1" || m.Status != "completed" {
		t.Errorf("merge info %+v, run %q, status %q", m.Merged, m.RunID, m.Status)
	}
	// The order of the files does not matter.
	m2, err := Merge([]*Document{docs[2], docs[0], docs[1]}, MergeOptions{})
	if err != nil || m2.Operations[0].Response != m.Operations[0].Response || m2.Totals != m.Totals {
		t.Errorf("merge in another order: %v, %+v vs %+v", err, m2.Totals, m.Totals)
	}
}

func TestMergeRefusals(t *testing.T) {
	fresh := func() []*Document { return readSegments(t) }
	oneLine := func(t *testing.T, err error, want string) {
		t.Helper()
		if err == nil || !strings.Contains(err.Error(), want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("error %v, want one line with %q", err, want)
		}
	}
	d := fresh()
	_, err := Merge([]*Document{d[0], d[2]}, MergeOptions{})
	oneLine(t, err, "segment 2/3 of run \"r1\" missing")
	if !errors.Is(err, ErrIncomplete) {
		t.Errorf("missing segment: %v does not wrap ErrIncomplete", err)
	}
	p, err := Merge([]*Document{d[0], d[2]}, MergeOptions{AllowPartial: true})
	if err != nil || !p.Merged.Partial || len(p.Merged.Missing) != 1 || p.Merged.Missing[0] != "2/3" || !strings.HasPrefix(p.Status, "partial") {
		t.Errorf("--allow-partial: %v, %+v, status %q", err, p.Merged, p.Status)
	}
	_, err = Merge([]*Document{d[0], d[1]}, MergeOptions{})
	oneLine(t, err, "segment 3/3 of run")

	_, err = Merge([]*Document{d[0], d[1], d[1], d[2]}, MergeOptions{Files: []string{"a", "b", "c", "d"}})
	oneLine(t, err, "segment 2/3 is given twice (b and c)")

	d = fresh()
	d[1].RunID = "r2"
	_, err = Merge(d, MergeOptions{})
	oneLine(t, err, "not of run \"r1\"")

	d = fresh()
	d[2].ConfigHash = "sha256:0000000000000000"
	_, err = Merge(d, MergeOptions{})
	oneLine(t, err, "ran another configuration")

	d = fresh()
	d[1].Segment.From = "1/4"
	_, err = Merge(d, MergeOptions{})
	oneLine(t, err, "segments overlap")

	d = fresh()
	d[1].Segment.To = "1/2"
	_, err = Merge(d, MergeOptions{})
	oneLine(t, err, "1/2:2/3 of run")

	d = fresh()
	d[1].Segment = nil
	_, err = Merge(d, MergeOptions{})
	oneLine(t, err, "is not a segment")

	d = fresh()
	d[2].Segment.Incomplete = []string{"late start: began 3s after --start-at"}
	_, err = Merge(d, MergeOptions{})
	oneLine(t, err, "segment 3/3 late start")
	if p, err := Merge(d, MergeOptions{AllowPartial: true}); err != nil || !p.Merged.Partial || !strings.Contains(p.Status, "late start") {
		t.Errorf("--allow-partial with an incomplete segment: %v, status %q", err, p.Status)
	}
}

func BenchmarkMerge(b *testing.B) {
	var docs []*Document
	for _, n := range []string{"r1-1of3.json", "r1-2of3.json", "r1-3of3.json"} {
		d, err := Read(filepath.Join("testdata", "segments", n))
		if err != nil {
			b.Fatal(err)
		}
		docs = append(docs, d)
	}
	b.ResetTimer()
	for range b.N {
		if _, err := Merge(docs, MergeOptions{}); err != nil {
			b.Fatal(err)
		}
	}
}
