package replay

import (
	"strings"
	"testing"

	"github.com/erplab/erplab/internal/capture/load"
	"github.com/erplab/erplab/internal/results"
)

// The summary's lag line gives each figure with its own unit, as the
// latency tables do ("4.78s", not "4.78s ms").
func TestSummaryLagUnits(t *testing.T) {
	var b strings.Builder
	res := &Result{Doc: &results.Document{Status: "completed"}, Fidelity: Fidelity{Lag: &results.Latency{P50: 4780, P99: 0.5, Max: 12}}}
	PrintSummary(&b, res, &load.Source{})
	if want := "lag behind schedule p50 4.78s, p99 500µs, max 12ms\n"; !strings.Contains(b.String(), want) {
		t.Errorf("summary lacks %q:\n%s", want, b.String())
	}
}
