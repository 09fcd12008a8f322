package results

import (
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/HdrHistogram/hdrhistogram-go"
)

// readSegments reads the three recorded segment documents of run r1
// (erplab run --segment I/3 --run-id r1 on one server, smoke workload,
// --stage 2s:10 --stage 3s:10).
func readSegments(t testing.TB) []*Document {
	return readDocs(t, "segments", "r1-1of3.json", "r1-2of3.json", "r1-3of3.json")
}

// readDocs reads the documents named under testdata/dir.
func readDocs(tb testing.TB, dir string, names ...string) []*Document {
	tb.Helper()
	var docs []*Document
	for _, n := range names {
		d, err := Read(filepath.Join("testdata", dir, n))
		if err != nil {
			tb.Fatal(err)
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
	if err != nil || !p.Merged.Partial || len(p.Merged.Missing) != 1 || p.Merged.Missing[0] != "2/3" || !strings.HasPrefix(string(p.Status), "partial") {
		t.Errorf("--allow-partial: %v, %+v, status %q", err, p.Merged, p.Status)
	}
	_, err = Merge([]*Document{d[0], d[1]}, MergeOptions{})
	oneLine(t, err, "segment 3/3 of run")
	// One segment given: the missing ones by index, the given one by
	// index and file, not the gap's bounds ("1/3:1").
	_, err = Merge([]*Document{d[0]}, MergeOptions{Files: []string{"r1-1of3.json"}})
	oneLine(t, err, `segments 2/3 and 3/3 of run "r1" missing (1 of 3 segments given: 1/3 (r1-1of3.json))`)
	p, err = Merge([]*Document{d[2]}, MergeOptions{AllowPartial: true})
	if err != nil || strings.Join(p.Merged.Missing, " ") != "1/3 2/3" || !strings.Contains(string(p.Status), "segments 1/3 and 2/3 missing") {
		t.Errorf("--allow-partial of 3/3 alone: %v, missing %q, status %q", err, p.Merged.Missing, p.Status)
	}

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
	if p, err := Merge(d, MergeOptions{AllowPartial: true}); err != nil || !p.Merged.Partial || !strings.Contains(string(p.Status), "late start") {
		t.Errorf("--allow-partial with an incomplete segment: %v, status %q", err, p.Status)
	}
}

func BenchmarkMerge(b *testing.B) {
	docs := readSegments(b)
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
	if want := "partial (--allow-partial): segment 3/3 restarted (2 attempts: c, c2)"; string(m.Status) != want || !m.Merged.Partial {
		t.Errorf("status %q, want %q", m.Status, want)
	}
	// No attempt completed: the latest is used.
	r.Status = "interrupted"
	m, err = Merge(docs, opts)
	if err != nil || m.Merged.Segments[2].File != "c2" || !strings.Contains(m.Merged.Notes[0], "(the latest, none completed)") {
		t.Errorf("no completed attempt: %v, notes %q", err, m.Merged.Notes)
	}
	if want := "partial (--allow-partial): segment 3/3 restarted (2 attempts: c, c2); segment 3/3 run interrupted"; string(m.Status) != want {
		t.Errorf("status %q, want %q", m.Status, want)
	}

	// An interrupted agent: said once, and no "completed" after it.
	d = readSegments(t)
	d[1].Status, d[1].Segment.Incomplete = "interrupted", []string{"run interrupted"}
	m, err = Merge(d, MergeOptions{AllowPartial: true})
	if want := "partial (--allow-partial): segment 2/3 run interrupted"; err != nil || string(m.Status) != want {
		t.Errorf("interrupted agent: %v, status %q, want %q", err, m.Status, want)
	}
	d = readSegments(t)
	d[0].Segment.Incomplete = []string{"late start: began 3s after --start-at"}
	m, err = Merge(d[:2], MergeOptions{AllowPartial: true})
	if want := "partial (--allow-partial): segment 3/3 missing; segment 1/3 late start: began 3s after --start-at"; err != nil || string(m.Status) != want {
		t.Errorf("late and missing: %v, status %q, want %q", err, m.Status, want)
	}
}

// readExtraSegments reads the three recorded segment documents of run r2
// (erplab run --segment I/3 --run-id r2 on one server, smoke workload,
// --stage 2s:10 --stage 3s:10 --interval 1s, observations on; segment 2
// with --stress cpu=1, segment 3 with --profile): every segment has
// extra.catalog (equal: the catalogs did not grow) and
// extra.observations, segment 2 extra.stress, segment 3 extra.profile.
func readExtraSegments(t *testing.T) []*Document {
	return readDocs(t, "segments-extra", "r2-1of3.json", "r2-2of3.json", "r2-3of3.json")
}

// jsonEqual reports whether two JSON texts hold the same value.
func jsonEqual(t *testing.T, a, b json.RawMessage) bool {
	t.Helper()
	if len(a) == 0 || len(b) == 0 {
		return len(a) == len(b)
	}
	var va, vb any
	if err := json.Unmarshal(a, &va); err != nil {
		t.Fatalf("%.60s: %v", a, err)
	}
	if err := json.Unmarshal(b, &vb); err != nil {
		t.Fatalf("%.60s: %v", b, err)
	}
	return reflect.DeepEqual(va, vb)
}

// The merge loses no segment's extra: a section equal in every segment
// (catalog) is kept once; the server as each agent saw it (observations,
// profile) is kept per segment, extra holding the first piece's that has
// one; a load machine's stress only per segment; all of it survives a
// write and a read.
func TestMergeKeepsEverySegmentsExtra(t *testing.T) {
	docs := readExtraSegments(t)
	m, err := Merge(docs, MergeOptions{Files: []string{"a", "b", "c"}})
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "merged.json")
	if err := m.WriteFile(path, DefaultPerm); err != nil {
		t.Fatal(err)
	}
	if m, err = Read(path); err != nil {
		t.Fatal(err)
	}
	if err := Validate(m); err != nil {
		t.Fatalf("merged document: %v", err)
	}
	var keys []string
	for k := range m.Extra {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	if want := []string{"catalog", "observations", "profile"}; !slices.Equal(keys, want) {
		t.Errorf("merged extra has %q, want %q", keys, want)
	}
	if !jsonEqual(t, m.Extra["catalog"], docs[0].Extra["catalog"]) {
		t.Errorf("extra.catalog %s, want the segments' (equal) %s", m.Extra["catalog"], docs[0].Extra["catalog"])
	}
	if !jsonEqual(t, m.Extra["observations"], docs[0].Extra["observations"]) {
		t.Errorf("extra.observations is not segment 1/3's")
	}
	if !jsonEqual(t, m.Extra["profile"], docs[2].Extra["profile"]) {
		t.Errorf("extra.profile is not segment 3/3's (the only one)")
	}
	want := [][]string{{"observations"}, {"observations", "stress"}, {"observations", "profile"}}
	for k, s := range m.Merged.Segments {
		var got []string
		for key, v := range s.Extra {
			got = append(got, key)
			if !jsonEqual(t, v, docs[k].Extra[key]) {
				t.Errorf("merged.segments[%d].extra.%s is not segment %s's", k, key, docs[k].Segment.Label())
			}
		}
		slices.Sort(got)
		if !slices.Equal(got, want[k]) {
			t.Errorf("merged.segments[%d].extra has %q, want %q", k, got, want[k])
		}
	}
	if len(m.Merged.Notes) != 0 {
		t.Errorf("notes %q, want none (every section known)", m.Merged.Notes)
	}
	for k, s := range m.Merged.Segments {
		if s.HostFacts != nil {
			t.Errorf("merged.segments[%d].host_facts %s, want none (one machine)", k, s.HostFacts)
		}
	}

	// Agents on other machines: each segment keeps its machine's facts.
	var env map[string]any
	if err := json.Unmarshal(docs[1].Environment, &env); err != nil {
		t.Fatal(err)
	}
	host, _ := env["host"].(map[string]any)
	if host["hostname"] != "vm" {
		t.Fatalf("testdata: environment.host %v", env["host"])
	}
	host["hostname"] = "agent2"
	if docs[1].Environment, err = json.Marshal(env); err != nil {
		t.Fatal(err)
	}
	if m, err = Merge(docs, MergeOptions{}); err != nil {
		t.Fatal(err)
	}
	for k, s := range m.Merged.Segments {
		var h struct {
			Hostname string `json:"hostname"`
			CPUs     int    `json:"cpus"`
		}
		if err := json.Unmarshal(s.HostFacts, &h); err != nil || h.Hostname != []string{"vm", "agent2", "vm"}[k] || h.CPUs == 0 {
			t.Errorf("merged.segments[%d].host_facts %s: %v", k, s.HostFacts, err)
		}
	}
}

// Sections that must be the same on every agent (experiment, remedies)
// stay once when they are, and are refused in one line when a segment
// has another value or none; an unknown section that differs is kept
// per segment with a note, once when equal; catalog growth is the run's
// span: before of the segment that started first, after of the one that
// ended last.
func TestMergeExtraRules(t *testing.T) {
	files := MergeOptions{Files: []string{"a", "b", "c"}}
	withExtra := func(key string, vals ...string) []*Document {
		d := readSegments(t)
		for i, v := range vals {
			if v != "" {
				d[i].Extra[key] = json.RawMessage(v)
			}
		}
		return d
	}
	exp := `{"variant":"v1","round":1,"database":"seg","template_copy":"","temp_style":"","cache":"warm"}`
	m, err := Merge(withExtra("experiment", exp, exp, exp), files)
	if err != nil || !jsonEqual(t, m.Extra["experiment"], json.RawMessage(exp)) || m.Merged.Segments[1].Extra != nil {
		t.Errorf("the same experiment: %v, extra.experiment %s, segment 2/3 extra %v", err, m.Extra["experiment"], m.Merged.Segments[1].Extra)
	}
	other := strings.Replace(exp, `"round":1`, `"round":2`, 1)
	_, err = Merge(withExtra("experiment", exp, other, exp), files)
	if want := "merge: b (segment 2/3) has another extra.experiment than a (segment 1/3): the agents must run the same experiment"; err == nil || err.Error() != want {
		t.Errorf("another experiment: %v, want %s", err, want)
	}
	_, err = Merge(withExtra("remedies", `[]`, `[]`, ""), files)
	if want := "merge: c (segment 3/3) has no extra.remedies, a (segment 1/3) has one: the agents must run the same experiment"; err == nil || err.Error() != want {
		t.Errorf("remedies in two segments of three: %v, want %s", err, want)
	}

	// A killed agent's stream, rebuilt, has no extra at all: not refused.
	d := withExtra("experiment", exp, exp, "")
	d[2].Extra = nil
	if m, err = Merge(d, files); err != nil || !jsonEqual(t, m.Extra["experiment"], json.RawMessage(exp)) {
		t.Errorf("experiment with a segment without extra: %v", err)
	}

	m, err = Merge(withExtra("proxy_x", `{"n":1}`, `{"n":2}`, ""), files)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := m.Extra["proxy_x"]; ok || string(m.Merged.Segments[1].Extra["proxy_x"]) != `{"n":2}` || m.Merged.Segments[2].Extra != nil {
		t.Errorf("unknown section differing: extra %s, segments' %v", m.Extra["proxy_x"], m.Merged.Segments)
	}
	if want := []string{"extra.proxy_x is not the same in every segment: kept per segment (merged.segments[].extra.proxy_x)"}; !slices.Equal(m.Merged.Notes, want) {
		t.Errorf("notes %q, want %q", m.Merged.Notes, want)
	}
	m, err = Merge(withExtra("proxy_x", `{"n":1}`, `{ "n": 1 }`, `{"n":1}`), files)
	if err != nil || string(m.Extra["proxy_x"]) != `{"n":1}` || m.Merged.Segments[1].Extra != nil || len(m.Merged.Notes) != 0 {
		t.Errorf("unknown section equal: %v, extra %s, notes %q", err, m.Extra["proxy_x"], m.Merged.Notes)
	}

	// r1: segment 3/3 started first, 2/3 ended last.
	cat := func(before, after int) string {
		return fmt.Sprintf(`{"before_bytes":{"pg_class":%d},"after_bytes":{"pg_class":%d}}`, before, after)
	}
	d = withExtra("catalog", cat(200, 300), cat(210, 320), cat(190, 290))
	if !d[2].StartedAt.Before(d[0].StartedAt) || !d[2].StartedAt.Before(d[1].StartedAt) || !d[1].EndedAt.After(d[0].EndedAt) || !d[1].EndedAt.After(d[2].EndedAt) {
		t.Fatal("testdata: r1's segment 3/3 no longer starts first or 2/3 ends last")
	}
	m, err = Merge(d, files)
	if err != nil || !jsonEqual(t, m.Extra["catalog"], json.RawMessage(cat(190, 320))) {
		t.Errorf("catalog span: %v, extra.catalog %s, want %s", err, m.Extra["catalog"], cat(190, 320))
	}
	for k, s := range m.Merged.Segments {
		if !jsonEqual(t, s.Extra["catalog"], d[k].Extra["catalog"]) {
			t.Errorf("merged.segments[%d].extra.catalog %s, want %s", k, s.Extra["catalog"], d[k].Extra["catalog"])
		}
	}
}
