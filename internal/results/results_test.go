package results

import (
	"bufio"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the golden rebuilt documents in testdata")

// rawIntervals decodes the interval lines of a stream independently of
// ReadStream (a torn last line is skipped), for sums to check against.
func rawIntervals(t *testing.T, path string) []Interval {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []Interval
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<24)
	for sc.Scan() {
		var l struct {
			Type     string
			Interval *Interval
		}
		if json.Unmarshal(sc.Bytes(), &l) == nil && l.Type == "interval" {
			out = append(out, *l.Interval)
		}
	}
	return out
}

// The stream of a complete run reads as the document: same operations,
// totals, integral and series.
func TestReadCompleteStreamEqualsDocument(t *testing.T) {
	doc, err := Read("testdata/complete.json")
	if err != nil {
		t.Fatal(err)
	}
	st, err := Read("testdata/complete.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	if doc.Status != "completed" || doc.Schema != 3 || len(doc.Operations) != 5 { // recorded with schema 3
		t.Fatalf("document: status %q schema %d, %d operations", doc.Status, doc.Schema, len(doc.Operations))
	}
	if !reflect.DeepEqual(doc.Operations, st.Operations) || doc.Totals != st.Totals || doc.Integral != st.Integral ||
		!reflect.DeepEqual(doc.Series, st.Series) || doc.Status != st.Status || !doc.EndedAt.Equal(st.EndedAt) {
		t.Fatalf("stream reads differently from the document:\n%+v\n%+v", st.Totals, doc.Totals)
	}
}

// Rebuilt from the intervals alone, a complete run's operations equal the
// recorder's final figures exactly: counts, zones, APDEX, percentiles and
// the histogram itself.
func TestRebuildIsExact(t *testing.T) {
	h, series, summary, err := ReadStream("testdata/complete.jsonl")
	if err != nil || summary == nil {
		t.Fatalf("summary %v, err %v", summary, err)
	}
	d, err := Rebuild(h, series)
	if err != nil {
		t.Fatal(err)
	}
	for i, got := range d.Operations {
		want := summary.Operations[i]
		if got.Name != want.Name || got.Count != want.Count || got.Errors != want.Errors || got.Zones != want.Zones ||
			got.Apdex != want.Apdex || got.Response != want.Response || got.Histogram != want.Histogram || got.TargetMs != want.TargetMs {
			t.Errorf("%s rebuilt:\n%+v\nrecorded:\n%+v", want.Name, got, want)
		}
	}
	if d.Totals.Count != summary.Totals.Count || d.Totals.Count == 0 || d.Integral != summary.Integral {
		t.Errorf("totals %+v integral %+v, recorded %+v %+v", d.Totals, d.Integral, summary.Totals, summary.Integral)
	}
}

// A killed run (no summary) and the same with a torn last line read as a
// document rebuilt from header and intervals: counts are the interval
// sums, the status says what happened, and the whole document matches the
// golden file.
func TestReadKilledStream(t *testing.T) {
	for _, name := range []string{"killed", "torn"} {
		t.Run(name, func(t *testing.T) {
			path := "testdata/" + name + ".jsonl"
			d, err := Read(path)
			if err != nil {
				t.Fatal(err)
			}
			ivs := rawIntervals(t, path)
			if len(d.Series) != len(ivs) || len(ivs) != 6 {
				t.Fatalf("%d intervals, want %d (6)", len(d.Series), len(ivs))
			}
			if want := "killed: stream ended at t=6s without a summary"; string(d.Status) != want {
				t.Errorf("status %q, want %q", d.Status, want)
			}
			var total int64
			for _, op := range d.Operations {
				var n, errs, sat int64
				for _, iv := range ivs {
					n += iv.Ops[op.Name].Count
					errs += iv.Ops[op.Name].Errors
					sat += iv.Ops[op.Name].Zones.Satisfied
				}
				if op.Count != n || op.Errors != errs || op.Zones.Satisfied != sat || n == 0 {
					t.Errorf("%s: count %d errors %d satisfied %d, intervals sum to %d %d %d", op.Name, op.Count, op.Errors, op.Zones.Satisfied, n, errs, sat)
				}
				if op.Response.P95 <= 0 || op.Response.P95 > op.Response.Max || op.Apdex.Samples != n {
					t.Errorf("%s: response %+v apdex %+v", op.Name, op.Response, op.Apdex)
				}
				total += n
			}
			if d.Totals.Count != total || d.Totals.ScoredSeconds != 6 {
				t.Errorf("totals %+v, want count %d over 6 s", d.Totals, total)
			}
			golden(t, "testdata/killed.rebuilt.json", d)
		})
	}
}

func golden(t *testing.T, path string, d *Document) {
	t.Helper()
	got, err := json.MarshalIndent(d, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	if *update {
		if err := os.WriteFile(path, append(got, '\n'), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if strings.TrimSpace(string(want)) != string(got) {
		t.Errorf("%s differs from the rebuilt document (go test -update rewrites it)", path)
	}
}

// Files of schema 1 (before intervals carried zones and histograms) stay
// readable: a document as before, a killed stream with counts only.
func TestReadOldFormat(t *testing.T) {
	doc, err := Read("testdata/old-complete.json")
	if err != nil {
		t.Fatal(err)
	}
	if doc.Schema != 0 || doc.Totals.Count != 4440 || doc.Series[0].Ops["item_lookup"].Histogram != "" || doc.Operations[0].Histogram == "" {
		t.Fatalf("old document: schema %d totals %+v", doc.Schema, doc.Totals)
	}
	k, err := Read("testdata/old-killed.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasSuffix(string(k.Status), "(intervals of schema 1: no APDEX or latencies)") {
		t.Errorf("status %q", k.Status)
	}
	ref, err := Read("testdata/killed.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	for i, op := range k.Operations {
		if op.Count != ref.Operations[i].Count || op.Errors != ref.Operations[i].Errors || op.Apdex.Samples != 0 || op.Response.P50 != 0 {
			t.Errorf("%s: %+v", op.Name, op)
		}
	}
	if k.Integral.Rating != "ns" || k.Totals.Count != ref.Totals.Count {
		t.Errorf("integral %+v, totals %+v want count %d", k.Integral, k.Totals, ref.Totals.Count)
	}
}

func TestValidate(t *testing.T) {
	if _, err := Read("testdata/valid-minimal.json"); err != nil {
		t.Fatalf("minimal document: %v", err)
	}
	for file, want := range map[string]string{
		"format.json":            `format: "erplab-run/2", want "erplab-run/1"`,
		"schema-newer.json":      "schema: 7, this erplab reads up to 6",
		"no-workload.json":       "workload: missing",
		"no-started-at.json":     "started_at: missing",
		"no-status.json":         "status: missing",
		"op-no-name.json":        "operations[1].name: missing",
		"op-twice.json":          `operations[1].name: "a" appears twice`,
		"errors-over-count.json": "operations[1].errors: 6, outside 0..count (5)",
		"zones.json":             "operations[0].zones: total 11, want count + skipped = 10",
		"totals-count.json":      "totals.count: 14, but the operations sum to 15",
		"totals-errors.json":     "totals.errors: 0, but the operations sum to 1",
		"truncated.json":         "unexpected end of JSON input",
		"middle-line.jsonl":      "line 3: ",
	} {
		path := filepath.Join("testdata", "invalid", file)
		_, err := Read(path)
		if err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), path) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%s: error %v, want one line naming the file and %q", file, err, want)
		}
	}
}

func TestStreamSurvivesTornLine(t *testing.T) {
	path := filepath.Join(t.TempDir(), "run.jsonl")
	s, err := CreateStream(path, DefaultPerm)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Write(StreamLine{Type: "header", Header: &Document{Format: Format, Workload: "w"}}); err != nil {
		t.Fatal(err)
	}
	for i := 1; i <= 3; i++ {
		iv := Interval{T: float64(i), Count: int64(i)}
		if err := s.Write(StreamLine{Type: "interval", Interval: &iv}); err != nil {
			t.Fatal(err)
		}
	}
	// a killed run: the file ends mid-line, nothing closed
	f, _ := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	f.WriteString(`{"type":"interval","interval":{"t":4,`)
	f.Close()
	h, series, summary, err := ReadStream(path)
	if err != nil {
		t.Fatal(err)
	}
	if h == nil || h.Workload != "w" || len(series) != 3 || series[2].Count != 3 || summary != nil {
		t.Fatalf("header %v, %d intervals, summary %v", h, len(series), summary)
	}
}

func TestWriteFileAtomic(t *testing.T) {
	d, err := Read("testdata/valid-minimal.json")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	path := filepath.Join(dir, "r.json")
	if err := d.WriteFile(path, DefaultPerm); err != nil {
		t.Fatal(err)
	}
	back, err := Read(path)
	if err != nil || !reflect.DeepEqual(back.Operations, d.Operations) || back.Totals != d.Totals {
		t.Fatalf("round trip: %v", err)
	}
	if es, _ := os.ReadDir(dir); len(es) != 1 {
		t.Fatalf("temp file left behind: %v", es)
	}
	if st, err := os.Stat(path); err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("mode %v (%v), want 0600", st.Mode(), err)
	}
}

// A run killed before its first interval closed reads as an empty
// document: every operation of the header with no sample, APDEX "ns".
func TestReadHeaderOnlyStream(t *testing.T) {
	d, err := Read("testdata/header-only.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	if d.Status != "killed: stream ended at t=0s without a summary" || len(d.Operations) != 5 || d.Totals.Count != 0 ||
		d.Integral.Rating != "ns" || !d.EndedAt.Equal(d.StartedAt) || d.Operations[4].Name != "hour_report" || d.Operations[4].TargetMs != 500 {
		t.Fatalf("%+v", d)
	}
}
