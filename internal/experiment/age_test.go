package experiment

import (
	"context"
	"encoding/json"
	"io"
	"path/filepath"
	"testing"
	"time"

	"github.com/erplab/erplab/internal/loadtest"
	"github.com/erplab/erplab/internal/results"
)

// TestAgedRun: with Config.Age every run database is aged by a run of
// its own before the measured run: the aging executed operations and
// grew the run database's catalog, the measured run starts after the
// aging ended and on the grown catalog, and its results record age_s
// and the aging but count only their own operations.
func TestAgedRun(t *testing.T) {
	ensureTemplate(t)
	outDir := filepath.Join(t.TempDir(), "ab")
	const age = 3 * time.Second
	load := loadOpts(t, 2*time.Second, 3, "temp_table_storm=1,document_list=1")
	load.Observe = true
	oc, err := Run(context.Background(), Config{
		Cluster: srv.Cluster(t), Template: testTemplate, NewWorkload: newERP, Flags: baseFlags,
		Load: load, Age: age, OutDir: outDir,
	}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if len(oc.Runs) != 1 {
		t.Fatalf("want 1 run, got %d", len(oc.Runs))
	}
	doc, err := results.Read(filepath.Join(outDir, "baseline-1.json"))
	if err != nil {
		t.Fatal(err)
	}
	var e Experiment
	if err := json.Unmarshal(doc.Extra["experiment"], &e); err != nil {
		t.Fatalf("extra.experiment %s: %v", doc.Extra["experiment"], err)
	}
	a := e.Aging
	if e.AgeS != age.Seconds() || a == nil || a.Seconds != age.Seconds() || a.Users != 3 {
		t.Fatalf("extra.experiment: age_s %g, aging %+v; want %g s at 3 users", e.AgeS, a, age.Seconds())
	}
	// The data was aged: the aging run executed operations and its temp
	// tables grew the catalog of the run database.
	if a.Operations == 0 || a.Catalog == nil {
		t.Fatalf("aging: %+v", a)
	}
	if b, f := a.Catalog.Before["pg_attribute"], a.Catalog.After["pg_attribute"]; f <= b {
		t.Fatalf("aging did not grow pg_attribute: %d -> %d bytes", b, f)
	}
	// The measured run is not the aging run: it starts after the aging
	// ended, on the aged catalog.
	if !doc.StartedAt.After(a.EndedAt) || !a.EndedAt.After(a.StartedAt) {
		t.Fatalf("aging %s .. %s, measured run started %s", a.StartedAt, a.EndedAt, doc.StartedAt)
	}
	var cat loadtest.CatalogGrowth
	if err := json.Unmarshal(doc.Extra["catalog"], &cat); err != nil {
		t.Fatalf("extra.catalog %s: %v", doc.Extra["catalog"], err)
	}
	if got, before := cat.Before["pg_attribute"], a.Catalog.Before["pg_attribute"]; got <= before {
		t.Fatalf("the measured run started on pg_attribute %d bytes, the run database had %d before the aging: not aged", got, before)
	}
	// Its figures are its own: every execution it counts started in its
	// span (no warm-up, none of the aging's), and the observations start
	// with it.
	var n int64
	for _, op := range doc.Operations {
		n += op.Count
		if op.WarmupCount != 0 {
			t.Fatalf("%s: %d warm-up executions", op.Name, op.WarmupCount)
		}
	}
	if n == 0 {
		t.Fatal("the measured run counted no executions")
	}
	if _, ok := doc.Extra["observations"]; !ok {
		t.Fatal("the measured run has no observations")
	}
}
