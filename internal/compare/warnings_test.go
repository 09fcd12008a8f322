package compare

import (
	"strings"
	"testing"

	"github.com/erplab/erplab/internal/results"
)

// TestWarningsDurations: runs of another planned length are named; two
// replays of one capture whose run times differ are not (a replay has no
// load profile: "2 s and 2 s planned" read as a contradiction).
func TestWarningsDurations(t *testing.T) {
	doc := func(workload string, secs float64) *results.Document {
		return &results.Document{Workload: workload, Totals: results.Totals{ScoredSeconds: secs}}
	}
	w := warnings([]*results.Document{doc("smoke", 10)}, []*results.Document{doc("smoke", 20)})
	if len(w) != 1 || !strings.Contains(w[0], "durations differ") {
		t.Errorf("smoke 10 s and 20 s: %q", w)
	}
	if w := warnings([]*results.Document{doc("replay", 1.6)}, []*results.Document{doc("replay", 2.4)}); len(w) != 0 {
		t.Errorf("two replays: %q, want no warning", w)
	}
}
