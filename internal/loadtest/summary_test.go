package loadtest_test

import (
	"bytes"
	"strings"
	"testing"

	"github.com/erplab/erplab/internal/apdex"
	"github.com/erplab/erplab/internal/engine"
	"github.com/erplab/erplab/internal/loadtest"
	"github.com/erplab/erplab/internal/results"
)

// The summary's table prints "NS" for an operation without samples: a
// line under it says what NS means; a run where every operation has
// samples has no such line.
func TestSummaryExplainsNS(t *testing.T) {
	doc, err := results.Read("../compare/testdata/base.json")
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	loadtest.PrintSummary(&out, doc, engine.Outcome{})
	if strings.Contains(out.String(), "NS") {
		t.Fatalf("every operation has samples, yet:\n%s", out.String())
	}
	doc.Operations[0].Apdex = apdex.Score{Target: doc.Operations[0].Apdex.Target}
	out.Reset()
	loadtest.PrintSummary(&out, doc, engine.Outcome{})
	if !strings.Contains(out.String(), " NS ") || !strings.Contains(out.String(), "\nNS: no samples: no execution of the operation was scored") {
		t.Errorf("an NS operation without the legend:\n%s", out.String())
	}
}
