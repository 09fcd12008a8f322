package compare_test

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/erplab/erplab/internal/apdex"
	"github.com/erplab/erplab/internal/compare"
	"github.com/erplab/erplab/internal/engine"
	"github.com/erplab/erplab/internal/loadtest"
	"github.com/erplab/erplab/internal/pgtest"
	"github.com/erplab/erplab/internal/results"
	"github.com/erplab/erplab/internal/workload"
	"github.com/erplab/erplab/internal/workload/smoke"
)

var srv *pgtest.Server

// rerecord makes threeRuns run the load tests again on a test PostgreSQL
// server and rewrite testdata/{a,a2,slow}.json: go test -run . -record.
var rerecord = flag.Bool("record", false, "re-record testdata/*.json with real runs on a test PostgreSQL server")

// TestMain starts a server only to re-record: the comparisons read
// recorded runs.
func TestMain(m *testing.M) { os.Exit(pgtest.RunIf(m, &srv, rerecord)) }

// slowed is the smoke workload with pg_sleep(Sleep) added to one key
// operation: a deliberately slower variant.
type slowed struct {
	*smoke.Workload
	op    string
	sleep time.Duration
}

func (s slowed) Execute(ctx context.Context, conn *pgx.Conn, vu *workload.VU, op int) error {
	if err := s.Workload.Execute(ctx, conn, vu, op); err != nil {
		return err
	}
	if s.Workload.Operations()[op].Name == s.op {
		_, err := conn.Exec(ctx, "SELECT pg_sleep($1)", s.sleep.Seconds())
		return err
	}
	return nil
}

// runFiles are the three recorded runs the tests compare: baseline, the
// same configuration again, and the variant with item_lookup slowed.
var runFiles = [3]string{"testdata/a.json", "testdata/a2.json", "testdata/slow.json"}

// threeRuns reads the three recorded runs (re-recording them first under
// -record).
func threeRuns(t *testing.T) [3]*results.Document {
	t.Helper()
	if *rerecord {
		recordRuns(t)
	}
	var docs [3]*results.Document
	for i, p := range runFiles {
		d, err := results.Read(p)
		if err != nil {
			t.Fatal(err)
		}
		docs[i] = d
	}
	return docs
}

var recordOnce sync.Once

// recordRuns performs the three smoke runs at the same time, each on its
// own fresh database of the test server, so that whatever else the
// machine does meets all three alike, and writes them to runFiles.
func recordRuns(t *testing.T) {
	t.Helper()
	var runErr error
	recordOnce.Do(func() {
		dsns := [3]string{srv.NewDatabase(t), srv.NewDatabase(t), srv.NewDatabase(t)}
		wls := [3]workload.Workload{smoke.New(), smoke.New(), slowed{smoke.New(), "item_lookup", 40 * time.Millisecond}}
		var wg sync.WaitGroup
		var mu sync.Mutex
		for i := range 3 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				opts := loadtest.Options{
					DSN: dsns[i], Workload: wls[i], Scale: 0.1, Seed: 7,
					Stages:      []engine.Stage{{Duration: 0, Target: 6}, {Duration: 10 * time.Second, Target: 6}},
					Think:       engine.ThinkTime{Kind: "uniform", Min: 10 * time.Millisecond, Max: 30 * time.Millisecond},
					Connections: 3, Interval: time.Second, Observe: true,
					Out: runFiles[i], Version: "test",
				}
				_, err := loadtest.Run(context.Background(), opts, io.Discard)
				if err == nil { // the stream the run wrote before its document
					err = os.Remove(strings.TrimSuffix(runFiles[i], ".json") + ".jsonl")
				}
				mu.Lock()
				defer mu.Unlock()
				if err != nil && runErr == nil {
					runErr = err
				}
			}()
		}
		wg.Wait()
	})
	if runErr != nil {
		t.Fatalf("load test: %v", runErr)
	}
}

// The same configuration run twice gives no significant difference on
// any row, although the raw numbers differ.
func TestSameConfigurationNoDifference(t *testing.T) {
	d := threeRuns(t)
	c, err := compare.Compare("a", d[0], "a2", d[1], compare.Options{})
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := c.WriteText(&buf); err != nil {
		t.Fatal(err)
	}
	t.Logf("\n%s", buf.String())
	for _, r := range c.Rows {
		if r.Verdict == compare.Better || r.Verdict == compare.Worse {
			t.Errorf("%s %s: %s (A %.3f B %.3f p %.5f)", r.Subject, r.Metric, r.Verdict, r.A, r.B, r.P)
		}
	}
	// The comparison really tested something: the key rows have p-values
	// and the two runs' numbers are not identical.
	p50 := c.Find("item_lookup", "p50_ms")
	tput := c.Find("integral", "per_second")
	if p50 == nil || tput == nil || math.IsNaN(p50.P) || math.IsNaN(tput.P) {
		t.Fatalf("key rows untested: %+v %+v", p50, tput)
	}
	if p50.A == p50.B && tput.A == tput.B {
		t.Fatalf("the two runs have identical figures; not two runs?")
	}
	if c.Find("host CPU", "system_pct") == nil || c.Find("catalog", "growth_bytes") == nil {
		t.Fatalf("observation rows missing:\n%s", buf.String())
	}
}

// A variant with 40 ms of pg_sleep in item_lookup (target 50 ms, normally
// about a millisecond): one run per side shows the effect on that
// operation's latency and APDEX, its interval clear of the minimum effect,
// but decides nothing (#31: replication is the unit of proof); the rounds
// hint names a row and how many rounds a side would decide it.
func TestSlowedOperationIsWorse(t *testing.T) {
	d := threeRuns(t)
	c, err := compare.Compare("a", d[0], "slow", d[2], compare.Options{})
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := c.WriteMarkdown(&buf); err != nil {
		t.Fatal(err)
	}
	t.Logf("\n%s", buf.String())
	for _, m := range []string{"p50_ms", "p95_ms", "apdex"} {
		r := c.Find("item_lookup", m)
		if r == nil || r.Verdict != compare.OneRoundEach || !(r.Lo > r.MinDelta || r.Hi < -r.MinDelta) {
			t.Errorf("item_lookup %s: %+v, want a clear effect, one round each", m, r)
		}
	}
	if r := c.Find("item_lookup", "p50_ms"); r != nil && r.B < 40 {
		t.Errorf("slowed p50 %.1f ms, want >= 40 ms (the injected sleep)", r.B)
	}
	if strings.Contains(buf.String(), "**worse**") || c.RoundsHint == nil || !strings.Contains(buf.String(), c.RoundsHint.Line) {
		t.Errorf("markdown has a worse verdict or lacks the rounds hint")
	}
	// Swapped, the same rows with the opposite effect.
	back, err := compare.Compare("slow", d[2], "a", d[0], compare.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if r := back.Find("item_lookup", "p50_ms"); r == nil || r.Verdict != compare.OneRoundEach || !(r.Hi < -r.MinDelta) {
		t.Errorf("swapped item_lookup p50: %+v, want a clear fall, one round each", r)
	}
}

// Welch's t-test on the first example of Welch's t-test in Wikipedia
// ("Welch's t-test", Examples): t = -2.46, df ≈ 24.9, p = 0.021.
func TestWelchKnownExample(t *testing.T) {
	a1 := []float64{27.5, 21.0, 19.0, 23.6, 17.0, 17.9, 16.9, 20.1, 21.9, 22.6, 23.1, 19.6, 19.0, 21.7, 21.4}
	a2 := []float64{27.1, 22.0, 20.8, 23.4, 23.4, 23.5, 25.8, 22.0, 24.8, 20.2, 21.9, 22.1, 22.9, 20.5, 24.4}
	if p := compare.Welch(a1, a2); math.Abs(p-0.021) > 0.001 {
		t.Fatalf("Welch p = %.4f, want 0.021", p)
	}
}

// Mann-Whitney U: fully separated samples of 10 each give U = 0, z =
// (50-0.5)/sqrt(175) = 3.742, p = 0.000183; identical samples p = 1.
func TestMannWhitney(t *testing.T) {
	a := []float64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}
	b := []float64{11, 12, 13, 14, 15, 16, 17, 18, 19, 20}
	if p := compare.MannWhitney(a, b); math.Abs(p-0.000183) > 0.000005 {
		t.Fatalf("p = %.6f, want 0.000183", p)
	}
	if p := compare.MannWhitney(a, a); p < 0.99 {
		t.Fatalf("identical samples: p = %.4f, want ~1", p)
	}
}

// Holm: p = 0.01, 0.04, 0.03, 0.005 at alpha 0.05: sorted 0.005 <=
// 0.0125 and 0.01 <= 0.0167 are rejected, 0.03 > 0.025 stops.
func TestHolm(t *testing.T) {
	got := compare.Holm([]float64{0.01, 0.04, 0.03, 0.005, math.NaN()}, 0.05)
	want := []bool{true, false, false, true, false}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("holm = %v, want %v", got, want)
		}
	}
}

func TestBadOptions(t *testing.T) {
	d := &results.Document{}
	if _, err := compare.Compare("a", d, "b", d, compare.Options{Alpha: 2}); err == nil {
		t.Fatal("alpha 2 accepted")
	}
}

// Rows with undefined numbers (an operation without samples) encode as
// JSON with nulls instead of failing.
func TestRowJSONUndefinedNumbers(t *testing.T) {
	r := compare.Row{Section: "operation", Subject: "x", Metric: "p50_ms", A: math.NaN(), B: 2, Delta: math.NaN(), DeltaPct: math.Inf(1), P: math.NaN()}
	b, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), `"a":null`) || !strings.Contains(string(b), `"b":2`) || !strings.Contains(string(b), `"p":null`) {
		t.Fatalf("%s", b)
	}
}

// The comparison of the recorded runs gives the figures of those runs:
// item_lookup's p95 and APDEX of each side, and the verdict rows. The
// numbers are the recorded runs' own; -record makes new runs with other
// numbers, so the test is skipped then (update the numbers after
// re-recording).
func TestRecordedFigures(t *testing.T) {
	if *rerecord {
		t.Skip("figures of the committed recordings")
	}
	d := threeRuns(t)
	c, err := compare.Compare("a", d[0], "slow", d[2], compare.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range []struct {
		subject, metric string
		a, b, tol       float64
		verdict         compare.Verdict
	}{
		{"item_lookup", "p95_ms", 10.615, 76.543, 0.0005, compare.OneRoundEach},
		{"item_lookup", "apdex", 0.9994, 0.7657, 0.0005, compare.OneRoundEach},
		{"integral", "per_second", 190.3, 103.8, 0.05, compare.OneRoundEach},
		{"item_lookup", "error_pct", 0, 0, 0, compare.NoDifference},
	} {
		r := c.Find(w.subject, w.metric)
		if r == nil {
			t.Errorf("no row %s %s", w.subject, w.metric)
			continue
		}
		if math.Abs(r.A-w.a) > w.tol || math.Abs(r.B-w.b) > w.tol || r.Verdict != w.verdict {
			t.Errorf("%s %s: A %v B %v %s, want A %v B %v %s", w.subject, w.metric, r.A, r.B, r.Verdict, w.a, w.b, w.verdict)
		}
	}
	// The row's figures are the document's: A's p95 is the recorded
	// operation's p95.
	for _, op := range d[0].Operations {
		if op.Name == "item_lookup" {
			if r := c.Find("item_lookup", "p95_ms"); r.A != op.Response.P95 {
				t.Errorf("row p95 %v, document p95 %v", r.A, op.Response.P95)
			}
		}
	}
}

// compare prints APDEX scores as the run summary and the report do
// (apdex.FormatValue, two decimals truncated): the A and B cells of every
// apdex row are the runs' own figures, in text and Markdown.
func TestApdexFormattedAsEverywhere(t *testing.T) {
	d := threeRuns(t)
	c, err := compare.Compare("a", d[0], "slow", d[2], compare.Options{})
	if err != nil {
		t.Fatal(err)
	}
	var text, md bytes.Buffer
	if err := c.WriteText(&text); err != nil {
		t.Fatal(err)
	}
	if err := c.WriteMarkdown(&md); err != nil {
		t.Fatal(err)
	}
	checked := 0
	for _, op := range d[0].Operations {
		r := c.Find(op.Name, "apdex")
		var b *results.OpResult
		for i := range d[2].Operations {
			if d[2].Operations[i].Name == op.Name {
				b = &d[2].Operations[i]
			}
		}
		if r == nil || b == nil || op.Apdex.NS() || b.Apdex.NS() {
			continue
		}
		a, bs := strings.TrimSuffix(op.Apdex.ValueString(), "*"), strings.TrimSuffix(b.Apdex.ValueString(), "*")
		if r.A != op.Apdex.Value || apdex.FormatValue(r.A) != a {
			t.Errorf("%s: row A %v, run's %s", op.Name, r.A, a)
		}
		cell := fmt.Sprintf("| %s | apdex | %s | %s |", op.Name, a, bs)
		if !strings.Contains(md.String(), cell) {
			t.Errorf("markdown lacks %q", cell)
		}
		if !regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(op.Name) + `\s+apdex\s+` + regexp.QuoteMeta(a) + `\s+` + regexp.QuoteMeta(bs) + `\s`).MatchString(text.String()) {
			t.Errorf("text lacks %s apdex %s %s:\n%s", op.Name, a, bs, text.String())
		}
		checked++
	}
	if checked == 0 {
		t.Fatal("no apdex row compared")
	}
	if r := c.Find("integral", "apdex"); r != nil && !strings.Contains(md.String(), "| "+d[0].Integral.String()+" | "+d[2].Integral.String()+" |") {
		t.Errorf("integral cells are not %s and %s:\n%s", d[0].Integral.String(), d[2].Integral.String(), md.String())
	}
}
