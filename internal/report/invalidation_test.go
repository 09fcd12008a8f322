package report_test

import (
	"bytes"
	"strings"
	"testing"

	"github.com/erplab/erplab/internal/report"
)

// A run recorded with the invalidation probes (erplab run --workload erp
// --users 10 --think 0, 30 s, as root) shows its counts in HTML and
// Markdown, the whole run's and its key operations'; messages read, not
// counted, are "-"; a run without them adds no section.
func TestInvalidationSection(t *testing.T) {
	runs, err := report.Load([]string{"testdata/inval-erp.json"})
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := report.WriteHTML(&buf, runs); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`id="invalidation"`, `<td class="l">all</td><td>137</td><td>8</td><td>4.34</td><td>924</td><td>29.28</td><td>87.04</td><td>17551/s msg</td><td>-</td>`,
		`<td class="l">stock_balance_report</td><td>94</td>`} {
		if !strings.Contains(buf.String(), want) {
			t.Errorf("page lacks %q", want)
		}
	}
	buf.Reset()
	if err := report.WriteMarkdown(&buf, runs); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(buf.String(), "| inval-erp | all | 137 | 8 | 4.34 | 924 | 29.28 | 87.04 | 17551/s msg | - |") {
		t.Errorf("markdown lacks the run's row:\n%s", buf.String())
	}
	other, err := report.Load([]string{"testdata/erp.json"})
	if err != nil {
		t.Fatal(err)
	}
	buf.Reset()
	if err := report.WriteHTML(&buf, other); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(buf.String(), `id="invalidation"`) {
		t.Error("invalidation section without counts")
	}
}
