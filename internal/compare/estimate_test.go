package compare_test

import (
	"math"
	"testing"

	"github.com/erplab/erplab/internal/compare"
	"github.com/erplab/erplab/internal/results"
)

// TestEstimateSingleRun: the integral APDEX of a recorded run with its
// block-bootstrap interval: the value is the run's own figure (from the
// scored intervals' zones), the interval holds it, lies in [0, 1] and has
// a width; a repeat gives the same figures (seeded).
func TestEstimateSingleRun(t *testing.T) {
	d, err := results.Read("testdata/aa-hog.json")
	if err != nil {
		t.Fatal(err)
	}
	e, err := compare.Estimate(d, compare.Options{})
	if err != nil {
		t.Fatal(err)
	}
	iv := e.Integral
	if math.Abs(iv.Value-d.Integral.Value) > 0.02 {
		t.Errorf("integral %.4f, document says %.4f", iv.Value, d.Integral.Value)
	}
	if !(iv.Lo < iv.Value && iv.Value < iv.Hi) || iv.Lo < 0 || iv.Hi > 1 || iv.Hi-iv.Lo < 0.001 {
		t.Errorf("interval [%.4f, %.4f] around %.4f", iv.Lo, iv.Hi, iv.Value)
	}
	if !iv.Straddles(iv.Value) || iv.Straddles(iv.Hi+0.01) {
		t.Error("Straddles")
	}
	if e.Points < compare.MinPoints || len(e.Apdex) != len(d.Operations) || len(e.P95) != len(d.Operations) {
		t.Errorf("points %d, %d op scores, %d p95", e.Points, len(e.Apdex), len(e.P95))
	}
	for _, op := range d.Operations {
		p := e.P95[op.Name]
		if op.Count-op.Errors > 0 && !(p.Value > 0) {
			t.Errorf("%s p95 %v", op.Name, p.Value)
		}
	}
	again, _ := compare.Estimate(d, compare.Options{})
	if again.Integral != e.Integral {
		t.Errorf("not reproducible: %+v then %+v", e.Integral, again.Integral)
	}
}
