package report

import (
	"testing"

	"github.com/erplab/erplab/internal/results"
)

// TestThroughputOfThinnedSeries: the throughput chart divides a coarse
// point's executions by the time it covers (span_s), so a soak's folded
// part draws at the rate of its intervals, and the charts of a thinned
// run render.
func TestThroughputOfThinnedSeries(t *testing.T) {
	d, err := results.Read("../results/testdata/soak-thinned.json")
	if err != nil {
		t.Fatal(err)
	}
	runs := []Run{{Name: "soak", Doc: d}}
	want := map[float64]float64{}
	for _, iv := range d.Series {
		if iv.SpanS > 0 {
			want[iv.T] = float64(iv.Count) / iv.SpanS
		}
	}
	got := map[float64]float64{}
	for _, xy := range throughputPoints(runs[0]) {
		got[xy.X] = xy.Y
	}
	for x, y := range want {
		if g, ok := got[x]; !ok || g != y {
			t.Fatalf("coarse point at %g s: throughput %g (drawn %v), want %g", x, g, ok, y)
		}
	}
	if len(want) == 0 {
		t.Fatal("no coarse point in the thinned run")
	}
	if _, err := Charts(runs); err != nil {
		t.Fatal(err)
	}
}
