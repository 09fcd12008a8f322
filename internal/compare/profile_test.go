package compare_test

import (
	"math"
	"testing"

	"github.com/erplab/erplab/internal/compare"
	"github.com/erplab/erplab/internal/results"
)

// The profiles of two runs recorded with erplab run --profile
// (internal/profile/testdata) side by side: one row per subsystem.
func TestProfileRows(t *testing.T) {
	sel, err := results.Read("../profile/testdata/run-select-only.json")
	if err != nil {
		t.Fatal(err)
	}
	churn, err := results.Read("../profile/testdata/run-temp-churn.json")
	if err != nil {
		t.Fatal(err)
	}
	c, err := compare.Compare("select", sel, "churn", churn, compare.Options{})
	if err != nil {
		t.Fatal(err)
	}
	fs := c.Find("cpu file system", "share_pct")
	if fs == nil || fs.Section != "profile" || fs.A != 0.71 || fs.B != 48.16 || fs.Note == "" || !math.IsNaN(fs.P) {
		t.Fatalf("file-system row: %+v", fs)
	}
	n := 0
	for _, r := range c.Rows {
		if r.Section == "profile" {
			n++
		}
	}
	if n != 13 {
		t.Errorf("%d profile rows, want one per subsystem (13)", n)
	}
	// Rounds: tested over the rounds (two identical rounds per side: a
	// permutation p-value of 1/3, no verdict).
	cr, err := compare.CompareRounds([]string{"s1", "s2"}, []*results.Document{sel, sel}, []string{"c1", "c2"}, []*results.Document{churn, churn}, compare.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if r := cr.Find("cpu file system", "share_pct"); r == nil || r.Method != compare.MethodRounds || r.A != 0.71 || r.B != 48.16 || math.Abs(r.P-1.0/3) > 1e-9 {
		t.Errorf("rounds: file-system row %+v", r)
	}
	// A side without profiles: no rows.
	c, err = compare.Compare("a", sel, "b", threeRuns(t)[0], compare.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if c.Find("cpu file system", "share_pct") != nil {
		t.Error("profile rows without a profile on one side")
	}
}
