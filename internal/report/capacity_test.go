package report

import (
	"bytes"
	"fmt"
	"html"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/erplab/erplab/internal/capacity"
	"github.com/erplab/erplab/internal/compare"
	"github.com/erplab/erplab/internal/results"
)

// capacityDoc is a capacity document of the two recorded steps of
// internal/capacity's known-answer search (18 users good, 19 bad).
func capacityDoc(t *testing.T) *capacity.Document {
	t.Helper()
	doc := &capacity.Document{Format: capacity.Format, Schema: capacity.SchemaVersion, Workload: "queue", Model: "closed", Unit: "users",
		Target: capacity.TargetJSON{Apdex: 0.85, ErrorRatePct: 1}, Search: capacity.SearchJSON{Start: 5, Max: 80, Step: "x2", ResolutionPct: 5}}
	for i, c := range []struct {
		file string
		load float64
	}{{"good-18.json", 18}, {"bad-19.json", 19}} {
		d, err := results.Read(filepath.Join("..", "capacity", "testdata", c.file))
		if err != nil {
			t.Fatal(err)
		}
		est, err := compare.Estimate(d, compare.Options{})
		if err != nil {
			t.Fatal(err)
		}
		res, err := capacity.ResourcesOf(d)
		if err != nil {
			t.Fatal(err)
		}
		j := capacity.Judge(d, est, res, capacity.Target{Apdex: 0.85, ErrorRate: 0.01}, capacity.Generator{CPU: 0.1, Cores: 2})
		doc.Steps = append(doc.Steps, capacity.NewStep(i+1, c.load, 1, d, "steps/"+c.file, est, res, j))
	}
	doc.Conclude(18, 19, capacity.Stop{Kind: capacity.StopConverged})
	return doc
}

func TestCapacityPage(t *testing.T) {
	doc := capacityDoc(t)
	// a document written before command lines were redacted at the source
	doc.CommandLine = []string{"erplab", "capacity", "--dsn", "postgres://u:s3cretpw@127.0.0.1:1/db"}
	var b bytes.Buffer
	if err := WriteCapacityHTML(&b, doc); err != nil {
		t.Fatal(err)
	}
	page := b.String()
	if strings.Contains(page, "s3cretpw") || !strings.Contains(page, "postgres://u:xxxxx@") {
		t.Error("the page shows the command line's password or no command line")
	}
	for _, want := range []string{html.EscapeString(doc.Result.Line), `id="chart-capacity-apdex"`, `id="chart-capacity-throughput"`, `id="chart-capacity-p95"`, `id="chart-capacity-waits"`,
		"capacity 18", "first bad 19", "target 0.85", "Timeout:PgSleep"} {
		if !strings.Contains(page, want) {
			t.Errorf("page lacks %q", want)
		}
	}
	if n := strings.Count(page, "<svg"); n != 4 {
		t.Errorf("%d charts, want 4", n)
	}
	b.Reset()
	if err := WriteCapacityMarkdown(&b, doc); err != nil {
		t.Fatal(err)
	}
	md := b.String()
	if !strings.Contains(md, "| 2 | 19 | bad | 0.7") || !strings.Contains(md, "**"+doc.Result.Line+"**") {
		t.Errorf("markdown:\n%s", md)
	}
}

// TestCapacityABPage renders the recorded A/B document of
// internal/capacity's TestABMovesTheKnee (baseline 8 users, variant
// nojit at least 16): the verdict, both sides with their searches, the
// common loads and one chart with a curve per side and each side's
// capacity marked.
func TestCapacityABPage(t *testing.T) {
	d, err := capacity.ReadAB(filepath.Join("testdata", "capacity-ab.json"))
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if err := WriteCapacityABHTML(&b, d); err != nil {
		t.Fatal(err)
	}
	page := html.UnescapeString(b.String())
	for _, want := range []string{d.Verdicts[0].Line, `id="chart-capacity-ab-apdex"`, "baseline capacity 8", "nojit capacity 16",
		"target 0.85", "at least 16", "limited by the pool of 2 connections", "<td>8</td>", "<td>16</td>"} {
		if !strings.Contains(page, want) {
			t.Errorf("page lacks %q", want)
		}
	}
	if strings.Contains(page, "<td>12</td>") {
		t.Errorf("12 users (the baseline's only) is in the common loads")
	}
	if n := strings.Count(page, "<svg"); n != 1 {
		t.Errorf("%d charts, want 1", n)
	}
	b.Reset()
	if err := WriteCapacityABMarkdown(&b, d); err != nil {
		t.Fatal(err)
	}
	if md := b.String(); !strings.Contains(md, "**nojit: capacity 8 users -> at least 16 users (+100 %); inconclusive: one round each**") || !strings.Contains(md, "| baseline | none | 8 |") {
		t.Errorf("markdown:\n%s", md)
	}
}

// TestSeparateCapacities draws two capacity documents (report a.json
// b.json) on one chart: both curves and both capacities marked, no
// verdict.
func TestSeparateCapacities(t *testing.T) {
	a, b := capacityDoc(t), capacityDoc(t)
	a.Status, b.Status = "completed", "completed"
	b.Result.Capacity = 9 // as if another search had found less
	d := capacity.Separate([]string{"monday", "tuesday"}, []*capacity.Document{a, b})
	if len(d.Sides) != 2 || len(d.Verdicts) != 0 || len(d.Common) != 2 || d.Unit != "users" {
		t.Fatalf("sides %d, verdicts %d, common %d, unit %q", len(d.Sides), len(d.Verdicts), len(d.Common), d.Unit)
	}
	var buf bytes.Buffer
	if err := WriteCapacityABHTML(&buf, d); err != nil {
		t.Fatal(err)
	}
	page := html.UnescapeString(buf.String())
	for _, want := range []string{"monday capacity 18", "tuesday capacity 9", "Separate searches: not an A/B experiment", "<td>18</td>", "<td>19</td>"} {
		if !strings.Contains(page, want) {
			t.Errorf("page lacks %q", want)
		}
	}
	if strings.Contains(page, "rank-sum") || strings.Contains(page, "A/B:") {
		t.Errorf("separate searches carry A/B wording")
	}
}

// TestCapacityChartsLimitsAndNoWaits: a --p95 limit is drawn on the p95
// chart, the waits' axis is 0-100 %, and without any wait observed the
// waits chart says so in its title.
func TestCapacityChartsLimitsAndNoWaits(t *testing.T) {
	doc := capacityDoc(t)
	doc.Target.P95Ms = map[string]float64{"serve": 250}
	charts, err := CapacityCharts(doc)
	if err != nil {
		t.Fatal(err)
	}
	if len(charts) != 4 || !strings.Contains(charts[2].SVG, "serve limit 250ms") || !strings.Contains(charts[3].SVG, ">100<") {
		t.Fatalf("%d charts; p95 chart has the limit: %v; waits axis to 100: %v", len(charts), strings.Contains(charts[2].SVG, "serve limit"), strings.Contains(charts[3].SVG, ">100<"))
	}
	for i := range doc.Steps {
		doc.Steps[i].Resources.Waits = nil
	}
	if charts, err = CapacityCharts(doc); err != nil || len(charts) != 4 || !strings.Contains(charts[3].SVG, "none observed") {
		t.Fatalf("without waits: %d charts, err %v", len(charts), err)
	}
}

// TestCapacityABMarkdownComplete: the markdown report carries the
// status, the common loads with round labels and, for a killed run, says
// its writer is gone.
func TestCapacityABMarkdownComplete(t *testing.T) {
	d, err := capacity.ReadAB(filepath.Join("testdata", "capacity-ab.json"))
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if err := WriteCapacityABMarkdown(&b, d); err != nil {
		t.Fatal(err)
	}
	md := b.String()
	for _, want := range []string{"Status: completed.", "APDEX at the loads every side ran", "| users | baseline | nojit |", "| 8 | r1 0.90 | r1 0.99 |", "(2 steps, max reached"} {
		if !strings.Contains(md, want) {
			t.Errorf("markdown lacks %q:\n%s", want, md)
		}
	}
	d.Status, d.PID, d.Host = "running", 0, ""
	b.Reset()
	if err := WriteCapacityABHTML(&b, d); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "Status: running or killed (no writing process recorded).") {
		t.Errorf("a running document without its writer reads as running")
	}
}

// TestCapacityPageKilledSearch: the page and the Markdown of a search
// whose document still says "running" but whose writing process is gone
// say it is incomplete, naming the pid; a finished one says its status.
func TestCapacityPageKilledSearch(t *testing.T) {
	gone := exec.Command("true")
	if err := gone.Run(); err != nil {
		t.Fatal(err)
	}
	doc := capacityDoc(t)
	host, _ := os.Hostname()
	doc.Status, doc.Writer = "running", capacity.Writer{PID: gone.Process.Pid, Host: host}
	want := fmt.Sprintf("Status: incomplete (the writing process, pid %d, is gone).", gone.Process.Pid)
	var b bytes.Buffer
	if err := WriteCapacityHTML(&b, doc); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "<p>"+want) {
		t.Errorf("page lacks %q", want)
	}
	b.Reset()
	if err := WriteCapacityMarkdown(&b, doc); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "**\n\n"+want+"\n") {
		t.Errorf("markdown lacks %q:\n%s", want, b.String())
	}
	doc.Status = "completed"
	b.Reset()
	if err := WriteCapacityMarkdown(&b, doc); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "\nStatus: completed.\n") {
		t.Errorf("markdown lacks the status:\n%s", b.String())
	}
}
