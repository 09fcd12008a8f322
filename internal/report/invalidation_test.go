package report_test

import (
	"bytes"
	"strings"
	"testing"

	"github.com/erplab/erplab/internal/report"
)

// A run recorded with the invalidation probes (erplab run --workload erp
// --mix temp_table_storm=1, 20 s, as root) shows its counts in HTML and
// Markdown, the whole run's and its key operation's; a run without them
// adds no section.
func TestInvalidationSection(t *testing.T) {
	runs, err := report.Load([]string{"testdata/inval-storm.json"})
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := report.WriteHTML(&buf, runs); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`id="invalidation"`, `<td class="l">all</td><td>15</td><td>9</td><td>0.69</td><td>664</td><td>30.44</td><td>80.90</td><td>22219/s msg</td>`,
		`<td class="l">temp_table_storm</td><td>12</td>`} {
		if !strings.Contains(buf.String(), want) {
			t.Errorf("page lacks %q", want)
		}
	}
	buf.Reset()
	if err := report.WriteMarkdown(&buf, runs); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(buf.String(), "| inval-storm | all | 15 | 9 | 0.69 | 664 | 30.44 | 80.90 | 22219/s msg | 305285/s msg |") {
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
