package results

import (
	"errors"
	"path/filepath"
	"slices"
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

// withServer records the server identity erplab run keeps in
// environment.server.
func withServer(d *Document, sysID, db string) {
	d.Environment = []byte(`{"server":{"version":"15.8","system_identifier":"` + sysID + `","database":"` + db + `"}}`)
}

// Segments that ran against another server or database are foreign;
// an unrecorded identity (older documents) is not compared.
func TestMergeServerIdentity(t *testing.T) {
	files := MergeOptions{Files: []string{"a", "b", "c"}}
	d := readSegments(t)
	for _, x := range d {
		withServer(x, "7301", "seg")
	}
	if _, err := Merge(d, files); err != nil {
		t.Fatalf("one server: %v", err)
	}
	withServer(d[2], "7301", "seg3")
	_, err := Merge(d, files)
	if want := `merge: c (segment 3/3) ran against another server than a (segment 1/3): database "seg3", not "seg": a foreign segment`; err == nil || err.Error() != want {
		t.Errorf("another database: %v, want %s", err, want)
	}
	withServer(d[1], "9999", "seg")
	withServer(d[2], "7301", "seg")
	_, err = Merge(d, files)
	if err == nil || !strings.Contains(err.Error(), "b (segment 2/3) ran against another server than a (segment 1/3): system identifier 9999, not 7301") || errors.Is(err, ErrIncomplete) {
		t.Errorf("another cluster: %v", err)
	}
	d[1].Environment = nil
	if _, err := Merge(d, files); err != nil {
		t.Errorf("one identity unrecorded: %v", err)
	}
}

// A restarted segment with its earlier attempt is an incomplete set
// naming the restart; --allow-partial uses the completed attempt (else
// the latest) and says which. The partial status says each reason once.
func TestMergeRestartedSegment(t *testing.T) {
	d := readSegments(t)
	d[2].Status, d[2].Segment.Incomplete = "interrupted", []string{"run interrupted"}
	r := *d[2]
	seg := *d[2].Segment
	r.Segment, r.Status = &seg, "completed"
	seg.Restart, seg.Incomplete = 2, []string{"restarted: an earlier attempt of this segment left c"}
	docs := []*Document{d[0], d[1], d[2], &r}
	opts := MergeOptions{Files: []string{"a", "b", "c", "c2"}}
	_, err := Merge(docs, opts)
	if want := "merge: incomplete set of segments: segment 3/3 restarted (2 attempts: c, c2); --allow-partial merges it anyway"; !errors.Is(err, ErrIncomplete) || err.Error() != want {
		t.Errorf("restart and its earlier attempt: %v, want %s", err, want)
	}
	opts.AllowPartial = true
	m, err := Merge(docs, opts)
	if err != nil {
		t.Fatal(err)
	}
	if got := m.Merged.Segments[2].File; len(m.Merged.Segments) != 3 || got != "c2" {
		t.Errorf("used %q of %d segments, want c2 of 3", got, len(m.Merged.Segments))
	}
	if want := []string{"segment 3/3: used the attempt c2 (completed), left out c"}; !slices.Equal(m.Merged.Notes, want) {
		t.Errorf("notes %q, want %q", m.Merged.Notes, want)
	}
	if want := "partial (--allow-partial): segment 3/3 restarted (2 attempts: c, c2)"; m.Status != want || !m.Merged.Partial {
		t.Errorf("status %q, want %q", m.Status, want)
	}
	// No attempt completed: the latest is used.
	r.Status = "interrupted"
	m, err = Merge(docs, opts)
	if err != nil || m.Merged.Segments[2].File != "c2" || !strings.Contains(m.Merged.Notes[0], "(the latest, none completed)") {
		t.Errorf("no completed attempt: %v, notes %q", err, m.Merged.Notes)
	}
	if want := "partial (--allow-partial): segment 3/3 restarted (2 attempts: c, c2); segment 3/3 run interrupted"; m.Status != want {
		t.Errorf("status %q, want %q", m.Status, want)
	}

	// An interrupted agent: said once, and no "completed" after it.
	d = readSegments(t)
	d[1].Status, d[1].Segment.Incomplete = "interrupted", []string{"run interrupted"}
	m, err = Merge(d, MergeOptions{AllowPartial: true})
	if want := "partial (--allow-partial): segment 2/3 run interrupted"; err != nil || m.Status != want {
		t.Errorf("interrupted agent: %v, status %q, want %q", err, m.Status, want)
	}
	d = readSegments(t)
	d[0].Segment.Incomplete = []string{"late start: began 3s after --start-at"}
	m, err = Merge(d[:2], MergeOptions{AllowPartial: true})
	if want := "partial (--allow-partial): segment 3/3 missing; segment 1/3 late start: began 3s after --start-at"; err != nil || m.Status != want {
		t.Errorf("late and missing: %v, status %q, want %q", err, m.Status, want)
	}
}
