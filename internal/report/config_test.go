package report

import (
	"bytes"
	"regexp"
	"strings"
	"testing"

	"github.com/erplab/erplab/internal/apdex"
)

// abRuns loads an `erplab ab` pair recorded on this machine: a baseline
// and a variant with settings:tuned.conf (work_mem 16MB,
// random_page_cost 1.1), erp workload, 10 VUs for 15 s.
func abRuns(t *testing.T) []Run {
	t.Helper()
	runs, err := Load([]string{"testdata/ab-tuned/baseline-1.json", "testdata/ab-tuned/tuned-1.json"})
	if err != nil {
		t.Fatal(err)
	}
	return runs
}

func htmlOf(t *testing.T, runs []Run) string {
	t.Helper()
	var buf bytes.Buffer
	if err := WriteHTML(&buf, runs); err != nil {
		t.Fatal(err)
	}
	return buf.String()
}

// The page opens with what differs between the runs: the remedy and what
// it changed, the variant, the two settings; nothing that is the same.
func TestReportShowsWhatDiffersFirst(t *testing.T) {
	runs := abRuns(t)
	var keys []string
	for _, it := range configItems(runs) {
		if it.Differs {
			keys = append(keys, it.Section+"/"+it.Key+"="+strings.Join(it.Values, "|"))
		}
	}
	want := []string{
		"remedies/remedies=none|settings:/tmp/win-runs/tuned.conf: work_mem 4MB → 16MB, random_page_cost 4 → 1.1",
		"remedies/ab variant=baseline, temp style 1c, warm (server not restarted between runs)|tuned, temp style 1c, warm (server not restarted between runs)",
		"server/random_page_cost=4|1.1",
		"server/work_mem=4MB|16MB",
	}
	if strings.Join(keys, "\n") != strings.Join(want, "\n") {
		t.Fatalf("differing items:\n%s\nwant:\n%s", strings.Join(keys, "\n"), strings.Join(want, "\n"))
	}
	page := htmlOf(t, runs)
	differs := strings.Index(page, `id="differs"`)
	summary := strings.Index(page, `id="summary"`)
	if differs < 0 || summary < differs {
		t.Fatalf("what differs at %d, summary at %d: want it first", differs, summary)
	}
	box := page[differs:summary]
	for _, s := range []string{"work_mem", "16MB", "random_page_cost", "settings:/tmp/win-runs/tuned.conf"} {
		if !strings.Contains(box, s) {
			t.Errorf("what differs lacks %q", s)
		}
	}
	for _, s := range []string{"shared_buffers", "max_vus", "erplab version"} {
		if strings.Contains(box, s) {
			t.Errorf("what differs shows %q, which is the same in both runs", s)
		}
	}
	// A run compared with itself differs in nothing.
	same := htmlOf(t, []Run{runs[0], runs[0]})
	if !strings.Contains(same, "Nothing recorded differs") {
		t.Error("a run against itself does not say that nothing differs")
	}
}

// APDEX is printed as the run summary prints it everywhere: two decimals
// truncated, "*" under 100 samples, NS; never the three decimals of old.
func TestReportUsesTheCLIsAPDEXFormat(t *testing.T) {
	runs := abRuns(t)
	page := htmlOf(t, runs)
	var md bytes.Buffer
	if err := WriteMarkdown(&md, runs); err != nil {
		t.Fatal(err)
	}
	for _, r := range runs {
		for _, op := range r.Doc.Operations {
			cell := op.Apdex.ValueString()
			if op.Apdex.SmallSample() != strings.HasSuffix(cell, "*") {
				t.Fatalf("%s: %q", op.Name, cell)
			}
			if !strings.Contains(page, ">"+cell+" ") || !strings.Contains(md.String(), "| "+cell+" ") {
				t.Errorf("%s %s: APDEX %q not in the page or the markdown", r.Name, op.Name, cell)
			}
		}
		if s := r.Doc.Integral.String() + " (" + r.Doc.Integral.Rating + ")"; !strings.Contains(page, s) || !strings.Contains(md.String(), s) {
			t.Errorf("%s: integral %q not shown", r.Name, s)
		}
	}
	// document_form of the baseline: 9 samples, 0.888... -> 0.88*.
	if op := runs[0].op("document_form"); op.Apdex.Samples != 9 || op.Apdex.ValueString() != "0.88*" {
		t.Fatalf("document_form %+v", op.Apdex)
	}
	if regexp.MustCompile(`>[01]\.\d{3}\b`).MatchString(page) {
		t.Error("page shows a value with three decimals")
	}
	if !strings.Contains(page, "fewer than 100 samples") || !strings.Contains(md.String(), "fewer than 100 samples") {
		t.Error("no note on the * of small samples")
	}
	if strings.Contains(page, "NS (NS)") || strings.Contains(md.String(), "NS (NS)") {
		t.Error("NS rated NS")
	}
	if apdex.FormatValue(0.9399) != "0.93" {
		t.Fatal("FormatValue rounds")
	}
}

// Parameters are tables of values, not JSON.
func TestReportParametersAsTables(t *testing.T) {
	runs := abRuns(t)
	page := htmlOf(t, runs)
	env := page[strings.Index(page, `id="environment"`):]
	for _, s := range []string{`[{`, `{&#34;`, `&#34;duration_s&#34;`, `"mix"`} {
		if strings.Contains(env, s) {
			t.Errorf("environment section shows raw JSON %q", s)
		}
	}
	for _, s := range []string{
		`<td class="l key">stages</td><td class="l">0s:10 15s:10</td>`,
		`<td class="l key">role accountant</td><td class="l">share 2: document_form 20, document_list 25,`,
		`<td class="l">temp_table_storm</td><td>200ms</td><td>2</td>`,
		`<tr class="diff"><td class="l key">work_mem</td><td class="l">4MB</td><td class="l">16MB</td></tr>`,
	} {
		if !strings.Contains(env, s) {
			t.Errorf("environment section lacks %s", s)
		}
	}
}

// The runs are told apart by Okabe-Ito blue and orange, not by red and
// green.
func TestReportColourBlindSafePalette(t *testing.T) {
	runs := abRuns(t)
	page := htmlOf(t, runs)
	for _, s := range []string{`class="swatch" style="background:#0072b2"`, `class="swatch" style="background:#e69f00"`} {
		if !strings.Contains(page, s) {
			t.Errorf("page lacks run swatch %s", s)
		}
	}
	charts, err := Charts(runs)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range charts {
		if c.ID != "apdex" {
			continue
		}
		if !strings.Contains(c.SVG, "fill:#0072B2") || !strings.Contains(c.SVG, "fill:#E69F00") {
			t.Error("APDEX bars not in blue and orange")
		}
		// plotutil's former first colours: red and green.
		if strings.Contains(c.SVG, "#EE2E2F") || strings.Contains(c.SVG, "#008C48") {
			t.Error("APDEX bars in red and green")
		}
		return
	}
	t.Fatal("no APDEX chart")
}

// A run of several steps gets an APDEX-per-stage table, in the page and
// the markdown, with the step figures of its results.
func TestReportStageTable(t *testing.T) {
	runs, err := Load([]string{"testdata/stages/stages.json"})
	if err != nil {
		t.Fatal(err)
	}
	st := runs[0].Doc.Stages
	if len(st) != 2 {
		t.Fatalf("%d stages", len(st))
	}
	page := htmlOf(t, runs)
	var md bytes.Buffer
	if err := WriteMarkdown(&md, runs); err != nil {
		t.Fatal(err)
	}
	p95 := fmtMs(st[1].Operations[0].Response.P95)
	for _, s := range []string{`id="stages"`, `<td>2 → 8</td>`, `<td class="r-` + st[1].Integral.Rating + `">` + st[1].Integral.String() + `</td>`, st[1].Operations[0].Apdex.ValueString() + ", " + p95} {
		if !strings.Contains(page, s) {
			t.Errorf("page lacks %q", s)
		}
	}
	if !strings.Contains(md.String(), "| stages | 3 | 4.0–8.1 s | 2 → 8 | 270.3 | 0.99 | "+st[1].Operations[0].Apdex.ValueString()+", "+p95+" |") {
		t.Errorf("markdown lacks the second step:\n%s", md.String())
	}
	// One-step runs have no such table.
	if strings.Contains(htmlOf(t, abRuns(t)), `id="stages"`) {
		t.Error("one-step runs show a stage table")
	}
}
