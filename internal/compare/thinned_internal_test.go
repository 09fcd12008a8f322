package compare

import (
	"testing"

	"github.com/erplab/erplab/internal/results"
)

// TestThinnedSeriesLeavesCoarsePointsOut: compare's statistics resample
// equal intervals, so a soak's coarse points (span_s) are left out of
// them, and a thinned run still compares with itself.
func TestThinnedSeriesLeavesCoarsePointsOut(t *testing.T) {
	d, err := results.Read("../results/testdata/soak-thinned.json")
	if err != nil {
		t.Fatal(err)
	}
	rd, err := prepare(d)
	if err != nil {
		t.Fatal(err)
	}
	coarse := 0
	for _, iv := range d.Series {
		if iv.SpanS > 0 {
			coarse++
		}
	}
	for _, iv := range rd.ivs {
		if iv.SpanS > 0 {
			t.Fatalf("interval at %g s (span_s %g) among the resampled intervals", iv.T, iv.SpanS)
		}
	}
	if coarse == 0 || len(rd.ivs) < len(d.Series)-coarse-2 {
		t.Fatalf("%d coarse points, %d of %d points resampled", coarse, len(rd.ivs), len(d.Series))
	}
	c, err := Compare("a", d, "b", d, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Rows) == 0 {
		t.Fatal("no rows")
	}
}
