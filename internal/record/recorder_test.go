package record

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"

	"github.com/erplab/erplab/internal/apdex"
	"github.com/erplab/erplab/internal/results"
)

var t0 = time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)

func testOps() []OpInfo {
	return []OpInfo{{Name: "a", Target: 100 * time.Millisecond, Priority: 1}, {Name: "b", Target: time.Second, Priority: 2}}
}

func TestRecordScoresAndIntervals(t *testing.T) {
	r := New(testOps(), t0, time.Second, time.Second)
	// warm-up: not scored
	r.Record(Sample{Op: 0, Start: t0.Add(500 * time.Millisecond), DB: 10 * time.Millisecond})
	r.Record(Sample{Op: 0, Start: t0.Add(600 * time.Millisecond), SQLState: "22012"})
	// samples land in the interval in which they are recorded (completed)
	ivs := r.Tick(t0.Add(time.Second))
	// second 1..2: 3 samples of a: satisfied, tolerating (wait+db=300ms), frustrated (error)
	r.Record(Sample{Op: 0, Start: t0.Add(1100 * time.Millisecond), DB: 50 * time.Millisecond})
	r.Record(Sample{Op: 0, Start: t0.Add(1200 * time.Millisecond), Wait: 200 * time.Millisecond, DB: 100 * time.Millisecond})
	r.Record(Sample{Op: 0, Start: t0.Add(1300 * time.Millisecond), SQLState: "40P01"})
	ivs = append(ivs, r.Tick(t0.Add(2*time.Second))...)
	if len(ivs) != 2 {
		t.Fatalf("Tick closed %d intervals, want 2", len(ivs))
	}
	if !ivs[0].Warmup || ivs[1].Warmup {
		t.Fatalf("warm-up marks %v %v", ivs[0].Warmup, ivs[1].Warmup)
	}
	if ivs[0].Count != 0 || ivs[1].Count != 3 || ivs[1].Errors != 1 {
		t.Fatalf("interval counts %d, %d/%d", ivs[0].Count, ivs[1].Count, ivs[1].Errors)
	}
	a := ivs[1].Ops["a"]
	if a.Max < 299 || a.Max > 301 {
		t.Fatalf("interval max %.1f ms, want 300", a.Max)
	}
	// a sample in the third second lands in a partial interval at Finish
	r.Record(Sample{Op: 1, Start: t0.Add(2100 * time.Millisecond), DB: 2 * time.Second})
	fin := r.Finish(t0.Add(2500 * time.Millisecond))
	if len(fin) != 1 || fin[0].T != 2.5 || fin[0].Ops["b"].Count != 1 {
		t.Fatalf("Finish = %+v", fin)
	}
	res := r.Results(1500 * time.Millisecond)
	ra := res[0]
	if ra.Count != 3 || ra.Errors != 1 || ra.WarmupCount != 2 || ra.WarmupErrors != 1 {
		t.Fatalf("a: count %d errors %d warmup %d/%d", ra.Count, ra.Errors, ra.WarmupCount, ra.WarmupErrors)
	}
	// (1 satisfied + 1 tolerating/2) / 3 = 0.5
	if ra.Apdex.Value != 0.5 || ra.Apdex.Samples != 3 {
		t.Fatalf("a APDEX %+v, want 0.5 over 3", ra.Apdex)
	}
	if ra.ErrorsBySQLState["40P01"] != 1 || len(ra.ErrorsBySQLState) != 1 {
		t.Fatalf("a by SQLSTATE %v", ra.ErrorsBySQLState)
	}
	if ra.PoolWait.Max < 199 || ra.PoolWait.Max > 201 {
		t.Fatalf("pool wait max %.1f", ra.PoolWait.Max)
	}
	if ra.PerSecond != 2 {
		t.Fatalf("per second %.2f, want 3 / 1.5 s = 2", ra.PerSecond)
	}
	// b: one sample of 2 s against T = 1 s: tolerating -> 0.5
	if res[1].Apdex.Value != 0.5 {
		t.Fatalf("b APDEX %v", res[1].Apdex)
	}
	// integral: weights 1 (p1) and 0.5 (p2 of max 2): (0.5*1 + 0.5*0.5)/1.5 = 0.5
	if v, ok := results.Integral(res); !ok || v != 0.5 {
		t.Fatalf("integral %v %v", v, ok)
	}
	h, err := hdrhistogram.Decode([]byte(ra.Histogram))
	if err != nil || h.TotalCount() != 2 {
		t.Fatalf("decoded histogram: %v, count %d (want the 2 successes)", err, h.TotalCount())
	}
}

func TestHistogramClampsExtremes(t *testing.T) {
	r := New(testOps(), t0, 0, time.Second)
	r.Record(Sample{Op: 0, Start: t0, DB: 0})
	r.Record(Sample{Op: 0, Start: t0, DB: 3 * time.Hour})
	res := r.Results(time.Second)[0]
	if res.Count != 2 || res.Response.Max < 3599000 {
		t.Fatalf("count %d max %.0f ms; want the 3 h sample clamped to 1 h", res.Count, res.Response.Max)
	}
}

func TestDocumentRoundTrip(t *testing.T) {
	r := New(testOps(), t0, 0, time.Second)
	r.Record(Sample{Op: 0, Start: t0, DB: 20 * time.Millisecond})
	d := &results.Document{Format: results.Format, Workload: "w", StartedAt: t0, Operations: r.Results(time.Second), Totals: r.Totals(time.Second), Status: "completed"}
	v, ok := results.Integral(d.Operations)
	d.Integral = results.NewIntegralScore(v, ok)
	path := filepath.Join(t.TempDir(), "r.json")
	if err := d.WriteFile(path, results.DefaultPerm); err != nil {
		t.Fatal(err)
	}
	back, err := results.Read(path)
	if err != nil {
		t.Fatal(err)
	}
	if back.Operations[0].Apdex.Value != 1 || back.Operations[1].Apdex.Samples != 0 || back.Integral.Value != 1 || back.Integral.Rating != "excellent" {
		t.Fatalf("round trip: %+v %+v", back.Operations, back.Integral)
	}
	if _, err := os.Stat(path + ".tmp"); !os.IsNotExist(err) {
		t.Fatal("temp file left behind")
	}
}

// BenchmarkRecord is the cost of recording one sample (histograms, APDEX
// zone, interval), single goroutine and contended by all CPUs.
func BenchmarkRecord(b *testing.B) {
	r := New(testOps(), t0, 0, time.Second)
	s := Sample{Op: 0, Start: t0, Wait: 100 * time.Microsecond, DB: 3 * time.Millisecond}
	b.Run("serial", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			s.DB = time.Duration(i%5000) * time.Microsecond
			r.Record(s)
		}
	})
	b.Run("parallel", func(b *testing.B) {
		b.RunParallel(func(pb *testing.PB) {
			s := s
			i := 0
			for pb.Next() {
				i++
				s.Op = i & 1
				s.DB = time.Duration(i%5000) * time.Microsecond
				r.Record(s)
			}
		})
	})
}

// Open-model samples: warm-up decided by the scheduled start, lag added
// to the response time and kept in its own histogram, late executions
// above the latency limit, skipped arrivals, retries, and the backlog
// gauges of the intervals.
func TestOpenModelFigures(t *testing.T) {
	r := New(testOps(), t0, time.Second, time.Second)
	r.SetLatencyLimit(200 * time.Millisecond)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	// Scheduled in the warm-up, started after it: warm-up.
	r.Record(Sample{Op: 0, Scheduled: at(900), Start: at(1200), DB: time.Millisecond})
	r.RecordSkipped(0, at(950))
	r.SetBacklog(5, 9)
	ivs := r.Tick(at(1000))
	r.SetBacklog(2, 3)
	// lag 300 ms + wait 10 + db 40 = 350 ms: late
	r.Record(Sample{Op: 0, Scheduled: at(1100), Start: at(1400), Wait: 10 * time.Millisecond, DB: 40 * time.Millisecond, Retries: 2})
	// no lag, 50 ms: not late
	r.Record(Sample{Op: 0, Scheduled: at(1500), Start: at(1500), DB: 50 * time.Millisecond})
	// an error with 100 ms lag: lag recorded, never late
	r.Record(Sample{Op: 0, Scheduled: at(1600), Start: at(1700), DB: 500 * time.Millisecond, SQLState: "40001", Retries: 3})
	r.RecordSkipped(0, at(1800))
	r.RecordSkipped(1, at(1850))
	ivs = append(ivs, r.Tick(at(2000))...)
	if len(ivs) != 2 {
		t.Fatalf("%d intervals", len(ivs))
	}
	if ivs[0].Backlog != 5 || ivs[0].BacklogMax != 9 || ivs[1].Backlog != 2 || ivs[1].BacklogMax != 5 {
		t.Fatalf("backlog %d/%d then %d/%d, want 5/9 then 2/5 (the max starts from the last value)",
			ivs[0].Backlog, ivs[0].BacklogMax, ivs[1].Backlog, ivs[1].BacklogMax)
	}
	iv := ivs[1]
	if iv.Count != 3 || iv.Skipped != 2 || iv.Late != 1 || iv.Ops["a"].Skipped != 1 || iv.Ops["a"].Late != 1 || iv.Ops["b"].Skipped != 1 || iv.Ops["b"].Count != 0 {
		t.Fatalf("interval: %+v", iv)
	}
	if ivs[0].Skipped != 0 {
		t.Fatalf("warm-up skip in the series: %+v", ivs[0])
	}
	r.SetBacklogLeft(4)
	res := r.Results(time.Second)
	a := res[0]
	if a.Count != 3 || a.WarmupCount != 1 || a.Skipped != 1 || a.WarmupSkipped != 1 || a.Late != 1 || a.Retries != 5 || a.Retried != 2 {
		t.Fatalf("a: count %d warm %d skipped %d warm skipped %d late %d retries %d retried %d", a.Count, a.WarmupCount, a.Skipped, a.WarmupSkipped, a.Late, a.Retries, a.Retried)
	}
	// successes of 350 and 50 ms
	if a.Response.StdDev < 149 || a.Response.StdDev > 151 {
		t.Fatalf("response stddev %.1f ms, want 150", a.Response.StdDev)
	}
	if a.Response.Max < 349 || a.Response.Max > 351 {
		t.Fatalf("response max %.1f ms, want 350 (lag included)", a.Response.Max)
	}
	if a.Lag.Max < 299 || a.Lag.Max > 301 || a.Lag.P50 < 99 || a.Lag.P50 > 101 {
		t.Fatalf("lag %+v, want max 300, p50 100 (0, 100, 300 ms)", a.Lag)
	}
	if a.DB.Max > 51 {
		t.Fatalf("db max %.1f ms: the lag leaked into the database time", a.DB.Max)
	}
	// APDEX (T = 100 ms): 50 ms satisfied, 350 ms tolerating, the error
	// and the scored skipped arrival frustrated; the warm-up skip is not
	// scored.
	if want := (apdex.Counts{Satisfied: 1, Tolerating: 1, Frustrated: 2}); a.Zones != want || a.Apdex.Samples != 4 || a.Apdex.Value != 0.375 {
		t.Fatalf("a: zones %+v, APDEX %v over %d; want %+v, 0.375 over 4 (count 3 + skipped 1)", a.Zones, a.Apdex.Value, a.Apdex.Samples, want)
	}
	// b was only skipped: no execution, yet an APDEX of 0, not NS.
	if b := res[1]; b.Count != 0 || b.Skipped != 1 || b.Zones.Frustrated != 1 || b.Apdex.NS() || b.Apdex.Value != 0 || b.Response.Max != 0 {
		t.Fatalf("b: count %d skipped %d zones %+v APDEX %v response %+v", b.Count, b.Skipped, b.Zones, b.Apdex, b.Response)
	}
	r.SetAbortedVUs(2)
	tot := r.Totals(2 * time.Second)
	if tot.Count != 3 || tot.Errors != 1 || tot.Skipped != 2 || tot.Late != 1 || tot.Retries != 5 || tot.Retried != 2 || tot.BacklogLeft != 4 || tot.AbortedVUs != 2 || tot.PerSecond != 1.5 {
		t.Fatalf("totals %+v", tot)
	}
	if b, err := json.Marshal(tot); err != nil || !strings.Contains(string(b), `"aborted_vus":2`) {
		t.Fatalf("totals JSON %s (%v)", b, err)
	}
	s := r.Snapshot()
	if s.Skipped != 2 || s.Late != 1 || s.Backlog != 2 {
		t.Fatalf("snapshot %+v", s)
	}
	if v, ok := results.Integral(res); !ok || s.Apdex != v || !s.ApdexOK {
		t.Fatalf("snapshot APDEX %v (%v), results' integral %v (%v)", s.Apdex, s.ApdexOK, v, ok)
	}
}

// Without a latency limit nothing is late; a closed-model run writes none
// of the open model's fields (backward-compatible JSON).
func TestClosedModelJSONHasNoOpenFields(t *testing.T) {
	r := New(testOps(), t0, 0, time.Second)
	r.Record(Sample{Op: 0, Start: t0, DB: 3 * time.Second})
	ivs := r.Finish(t0.Add(1500 * time.Millisecond))
	res := r.Results(time.Second)
	if res[0].Late != 0 {
		t.Fatalf("late %d without a limit", res[0].Late)
	}
	d := results.Document{Format: results.Format, Operations: res, Totals: r.Totals(time.Second), Series: ivs}
	b, err := json.Marshal(d)
	if err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{`"lag"`, `"skipped"`, `"late"`, `"retries"`, `"retried"`, `"backlog`, `"warmup_skipped"`, `"aborted_vus"`} {
		if strings.Contains(string(b), key) {
			t.Errorf("closed-model JSON has %s: %s", key, b)
		}
	}
}

// The intervals carry per operation its zones, response-time histogram,
// errors by SQLSTATE and retries, so that summed and merged over the series
// they equal the operation's final results exactly (what results.Rebuild
// relies on for a killed run).
func TestIntervalsSumToResults(t *testing.T) {
	r := New(testOps(), t0, time.Second, time.Second)
	r.SetLatencyLimit(400 * time.Millisecond)
	for i := range 300 {
		at := t0.Add(time.Duration(i) * 13 * time.Millisecond)
		s := Sample{Op: i % 2, Start: at, Wait: time.Duration(i%7) * time.Millisecond, DB: time.Duration(i*3%900) * time.Millisecond}
		switch {
		case i%17 == 0:
			s.SQLState = "40001"
		case i%29 == 0:
			s.SQLState = "08006"
		}
		if i%11 == 0 {
			s.Retries = 2
		}
		r.Record(s)
		if i%23 == 0 {
			r.RecordSkipped(i%2, at)
		}
		r.Tick(at)
	}
	r.Finish(t0.Add(4100 * time.Millisecond))
	doc, err := results.Rebuild(&results.Document{
		Format: results.Format, Workload: "w", StartedAt: t0,
		Parameters: json.RawMessage(`{"warmup_s":1,"operations":[{"name":"a","target_ms":100,"priority":1},{"name":"b","target_ms":1000,"priority":2}]}`),
	}, r.Series())
	if err != nil {
		t.Fatal(err)
	}
	want := r.Results(3100 * time.Millisecond)
	for i, got := range doc.Operations {
		w := want[i]
		if got.Count != w.Count || got.Errors != w.Errors || got.Skipped != w.Skipped || got.Late != w.Late ||
			got.Retries != w.Retries || got.Retried != w.Retried || got.Zones != w.Zones || got.Apdex != w.Apdex ||
			got.Response != w.Response || got.Histogram != w.Histogram || len(got.ErrorsBySQLState) != len(w.ErrorsBySQLState) {
			t.Errorf("op %s rebuilt\n%+v\nwant\n%+v", w.Name, got, w)
		}
		for k, v := range w.ErrorsBySQLState {
			if got.ErrorsBySQLState[k] != v {
				t.Errorf("op %s %s: %d, want %d", w.Name, k, got.ErrorsBySQLState[k], v)
			}
		}
		if w.Count == 0 || w.Errors == 0 || w.Skipped == 0 || w.Retries == 0 {
			t.Errorf("op %s: the test should exercise every figure: %+v", w.Name, w)
		}
	}
	if tot := r.Totals(3100 * time.Millisecond); doc.Totals.Count != tot.Count || doc.Totals.Errors != tot.Errors || doc.Totals.PerSecond != tot.PerSecond {
		t.Errorf("totals %+v, want %+v", doc.Totals, tot)
	}
	if err := results.Validate(doc); err != nil {
		t.Error(err)
	}
}

// The first server message per SQLSTATE is kept (warm-up included), at
// most 512 bytes cut on a rune boundary; client-side errors carry none.
func TestErrorExamples(t *testing.T) {
	t0 := time.Now()
	r := New(testOps(), t0, time.Second, time.Second)
	long := strings.Repeat("é", 300) // 600 bytes
	for _, s := range []Sample{
		{Op: 0, Start: t0, SQLState: "53100", Message: `could not extend file "pg_tblspc/1/PG_15/5/t3_7": No space left on device`},
		{Op: 0, Start: t0.Add(2 * time.Second), SQLState: "53100", Message: "a later one"},
		{Op: 0, Start: t0.Add(2 * time.Second), SQLState: "08006"},
		{Op: 1, Start: t0.Add(2 * time.Second), SQLState: "XX000", Message: long},
	} {
		r.Record(s)
	}
	res := r.Results(time.Second)
	if got := res[0].ErrorExamples; len(got) != 1 || got["53100"] != `could not extend file "pg_tblspc/1/PG_15/5/t3_7": No space left on device` {
		t.Errorf("op 0 examples %q", got)
	}
	if got := res[1].ErrorExamples["XX000"]; len(got) != 512 || got != long[:512] {
		t.Errorf("op 1 example of %d bytes", len(got))
	}
	if res[0].ErrorsBySQLState["53100"] != 1 || res[0].WarmupErrors != 1 {
		t.Errorf("counts %v, warm-up errors %d", res[0].ErrorsBySQLState, res[0].WarmupErrors)
	}
}
