package report

import (
	"bytes"
	"html"
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
	var b bytes.Buffer
	if err := WriteCapacityHTML(&b, doc); err != nil {
		t.Fatal(err)
	}
	page := b.String()
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
