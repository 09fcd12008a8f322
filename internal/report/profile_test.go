package report_test

import (
	"bytes"
	"strings"
	"testing"

	"github.com/erplab/erplab/internal/report"
)

// profiledRuns are two runs recorded with erplab run --profile
// (internal/profile/testdata): pgbench select-only and a temp-table churn.
var profiledRuns = []string{"../profile/testdata/run-select-only.json", "../profile/testdata/run-temp-churn.json"}

func TestProfileSection(t *testing.T) {
	runs, err := report.Load(profiledRuns)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := report.WriteHTML(&buf, runs); err != nil {
		t.Fatal(err)
	}
	page := buf.String()
	for _, want := range []string{`id="profile"`, "<td>0.7 %</td><td>48.2 %</td>", "<title>recently_deleted_[k]", "run-temp-churn: top functions"} {
		if !strings.Contains(page, want) {
			t.Errorf("page lacks %q", want)
		}
	}
	if strings.Contains(page, "<script") {
		t.Error("page holds a script")
	}
	buf.Reset()
	if err := report.WriteMarkdown(&buf, runs); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(buf.String(), "| file system | 0.7 % | 48.2 % |") {
		t.Errorf("markdown lacks the file-system row:\n%s", buf.String())
	}
	// Runs without a profile: no section.
	plain, err := report.Load(runPaths)
	if err != nil {
		t.Fatal(err)
	}
	buf.Reset()
	if err := report.WriteHTML(&buf, plain); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(buf.String(), `id="profile"`) {
		t.Error("profile section without profiles")
	}
}

// A run recorded with samples per key operation (erplab run --workload
// erp --profile) shows them in HTML and Markdown.
func TestProfileSectionPerOperation(t *testing.T) {
	runs, err := report.Load([]string{"../profile/testdata/run-erp-profiled.json"})
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := report.WriteHTML(&buf, runs); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"run-erp-profiled: by key operation", "690 samples taken while a key operation ran", "<td class=\"l\">temp_table_storm</td><td>67</td><td>9.4 %</td><td class=\"l\">file system 52 %"} {
		if !strings.Contains(buf.String(), want) {
			t.Errorf("page lacks %q", want)
		}
	}
	buf.Reset()
	if err := report.WriteMarkdown(&buf, runs); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(buf.String(), "| temp_table_storm | 67 | 9.4 % | file system 52 %") {
		t.Errorf("markdown lacks the temp_table_storm row:\n%s", buf.String())
	}
}
