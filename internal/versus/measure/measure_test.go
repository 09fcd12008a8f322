package measure

import (
	"context"
	"os/exec"
	"testing"
)

func TestSpreadOf(t *testing.T) {
	v := []float64{3, 1, 2, 10}
	if s := SpreadOf(v); s != (Spread{Median: 2.5, Min: 1, Max: 10}) {
		t.Errorf("even: %+v", s)
	}
	if v[0] != 3 {
		t.Error("the input was sorted")
	}
	if s := SpreadOf([]float64{4, 1, 9}); s != (Spread{Median: 4, Min: 1, Max: 9}) {
		t.Errorf("odd: %+v", s)
	}
	if s := SpreadOf(nil); s != (Spread{}) {
		t.Errorf("empty: %+v", s)
	}
}

// TestRunCPU: a child that burns CPU reports CPU time; an interrupted
// one returns the context's error.
func TestRunCPU(t *testing.T) {
	ctx := context.Background()
	wall, cpu, err := Run(ctx, exec.CommandContext(ctx, "sh", "-c", "i=0; while [ $i -lt 200000 ]; do i=$((i+1)); done"))
	if err != nil || cpu <= 0 || wall <= 0 {
		t.Errorf("wall %s, cpu %s, err %v", wall, cpu, err)
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, _, err := Run(cctx, exec.CommandContext(cctx, "sleep", "5")); err != context.Canceled {
		t.Errorf("cancelled: %v", err)
	}
}
