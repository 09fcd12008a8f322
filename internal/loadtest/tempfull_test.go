package loadtest

import (
	"bytes"
	"strings"
	"testing"

	"github.com/erplab/erplab/internal/engine"
	"github.com/erplab/erplab/internal/results"
)

// TestSummaryTempTablespaceFull prints the summary of a recorded run of
// temp_table_storm against a full tmpfs temp tablespace
// (internal/results/testdata/tempfull-run.json, recorded by cmd/erplab's
// TestRunTempTablespaceFull): after the SQLSTATE counts, the finding from
// the errors' message, the trap and the size; a run without it prints
// none of it.
func TestSummaryTempTablespaceFull(t *testing.T) {
	doc, err := results.Read("../results/testdata/tempfull-run.json")
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	PrintSummary(&out, doc, engine.Outcome{})
	s := out.String()
	for _, want := range []string{
		"errors by SQLSTATE: 53100 x201\ntemp tablespace full: temp_table_storm failed 201 of 201 times with 53100 disk_full on a temp table's file",
		"the temp tablespace pg_tblspc/16623 (a tmpfs when erplab's tmpfs remedy made it) is full\n",
		"\n  the trap: only DROP TABLE frees its space: once it is full, INSERT into a temp table fails and so does TRUNCATE",
		"\n  the size: size it at twice the peak use of a run without 53100",
	} {
		if !strings.Contains(s, want) {
			t.Errorf("summary lacks %q:\n%s", want, s)
		}
	}
	for i := range doc.Operations {
		doc.Operations[i].ErrorExamples = nil
	}
	out.Reset()
	PrintSummary(&out, doc, engine.Outcome{})
	if strings.Contains(out.String(), "temp tablespace full") {
		t.Errorf("finding without the errors' messages:\n%s", out.String())
	}
}
