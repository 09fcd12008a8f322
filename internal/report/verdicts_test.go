package report_test

import (
	"bytes"
	"encoding/json"
	"html"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/erplab/erplab/internal/compare"
	"github.com/erplab/erplab/internal/report"
	"github.com/erplab/erplab/internal/results"
)

// withRecipe copies the recorded ab run src into dir with
// extra.experiment.compare set to recipe (what ab now records) and
// returns the copy's path.
func withRecipe(t *testing.T, src, dir string, recipe compare.Recipe) string {
	t.Helper()
	b, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	exp := doc["extra"].(map[string]any)["experiment"].(map[string]any)
	rb, err := json.Marshal(recipe)
	if err != nil {
		t.Fatal(err)
	}
	var r any
	if err := json.Unmarshal(rb, &r); err != nil {
		t.Fatal(err)
	}
	exp["compare"] = r
	out, err := json.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, filepath.Base(src))
	if err := os.WriteFile(p, out, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// The report of an ab experiment's runs shows each variant's primary
// verdict with the same lines ab ends with (compare.Comparison.
// VerdictLines: the same wording, counts and rounding), whatever the
// order of the files. Recorded tmpfs experiment, 4 rounds a side
// (internal/compare/testdata/tmpfs-erp), the remedy's declared rows.
func TestReportShowsABVerdict(t *testing.T) {
	td := filepath.Join("..", "compare", "testdata", "tmpfs-erp")
	dir := t.TempDir()
	primary := compare.Recipe{Primary: []string{"integral:apdex", "temp_table_storm:apdex"}, PrimarySource: "tmpfs-temp-tablespace"}
	var as, bs, files []string
	for r := 4; r >= 1; r-- { // rounds out of order
		n := string(rune('0' + r))
		files = append(files, withRecipe(t, filepath.Join(td, "tmpfs-"+n+".json"), dir, primary),
			withRecipe(t, filepath.Join(td, "baseline-"+n+".json"), dir, compare.Recipe{}))
		as, bs = append([]string{filepath.Join(td, "baseline-"+n+".json")}, as...), append([]string{filepath.Join(td, "tmpfs-"+n+".json")}, bs...)
	}
	read := func(ps []string) []*results.Document {
		var ds []*results.Document
		for _, p := range ps {
			d, err := results.Read(p)
			if err != nil {
				t.Fatal(err)
			}
			ds = append(ds, d)
		}
		return ds
	}
	opts, err := primary.Options()
	if err != nil {
		t.Fatal(err)
	}
	c, err := compare.CompareRounds(as, read(as), bs, read(bs), opts)
	if err != nil {
		t.Fatal(err)
	}
	lines := c.VerdictLines()
	if len(lines) != 3 || !strings.HasPrefix(lines[0], "primary verdict: no significant difference (Holm over 2 tested primary rows declared by tmpfs-temp-tablespace; exploratory: ") {
		t.Fatalf("ab's lines: %q", lines)
	}
	runs, err := report.Load(files)
	if err != nil {
		t.Fatal(err)
	}
	var m, h bytes.Buffer
	if err := report.WriteMarkdown(&m, runs); err != nil {
		t.Fatal(err)
	}
	if err := report.WriteHTML(&h, runs); err != nil {
		t.Fatal(err)
	}
	ms, hs := m.String(), h.String()
	if !strings.Contains(ms, "### Verdicts of erplab ab") || !strings.Contains(ms, "**VERDICT tmpfs** (4 and 4 rounds): "+lines[0]+"\n") {
		t.Fatalf("markdown lacks the verdict line %q:\n%s", lines[0], ms)
	}
	if !strings.Contains(hs, "<strong>VERDICT tmpfs</strong> (4 and 4 rounds): "+html.EscapeString(lines[0])+"</p>") {
		t.Fatalf("HTML lacks the verdict line %q", lines[0])
	}
	for _, l := range lines[1:] {
		if !strings.Contains(ms, "\n- "+l+"\n") || !strings.Contains(hs, "<li>"+html.EscapeString(l)+"</li>") {
			t.Errorf("primary row line %q missing", l)
		}
	}

	// Runs without a recorded recipe (an older ab) have no verdicts
	// section: the report does not guess the primary rows.
	old, err := report.Load([]string{"testdata/ab-tuned/baseline-1.json", "testdata/ab-tuned/tuned-1.json"})
	if err != nil {
		t.Fatal(err)
	}
	m.Reset()
	if err := report.WriteMarkdown(&m, old); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(m.String(), "Verdicts of erplab ab") {
		t.Fatalf("verdicts without a recipe:\n%s", m.String())
	}
}
