package report_test

import (
	"bytes"
	"strings"
	"testing"

	"github.com/erplab/erplab/internal/report"
)

// churnRun is a recorded `erplab run` of the erp workload's temp-table
// churn (temp_table_storm and document_form, 100 VUs, think 0) on a 2-core
// machine, with waits per key operation, pg_stat_statements and churn
// figures in its observations.
const churnRun = "testdata/churn.json"

func TestOperationSections(t *testing.T) {
	runs, md := markdownOf(t, []string{churnRun})
	o := runs[0].Obs
	totals := o.OpWaitTotals()
	if len(totals["temp_table_storm"]) == 0 || o.Statements == nil || len(o.Statements.Top) == 0 {
		t.Fatalf("recorded run lacks op waits or statements: %v %+v", totals, o.Statements)
	}
	for _, want := range []string{"### Waits per key operation", "| churn | temp_table_storm |", "### Top statements", "### Temp-relation file churn", "| churn | document_form |"} {
		if !strings.Contains(md, want) {
			t.Errorf("markdown lacks %q", want)
		}
	}
	var buf bytes.Buffer
	if err := report.WriteHTML(&buf, runs); err != nil {
		t.Fatal(err)
	}
	html := buf.String()
	for _, want := range []string{`id="opwaits"`, `id="statements"`, `id="churn"`, "temp_table_storm"} {
		if !strings.Contains(html, want) {
			t.Errorf("HTML lacks %q", want)
		}
	}
}
