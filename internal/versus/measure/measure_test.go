package measure

import (
	"context"
	"os"
	"os/exec"
	"runtime"
	"testing"
	"time"
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

// TestRunUsagePeakRSS: a child that touches 64 MiB and stays a moment
// reports a peak resident size of at least that; true(1), run from this
// process after it touched 128 MiB itself, reports a fraction of that
// (its rusage maxrss would hold this process's size).
func TestRunUsagePeakRSS(t *testing.T) {
	if os.Getenv("MEASURE_TOUCH") != "" {
		b := make([]byte, 64<<20)
		for i := range b {
			if i%4096 == 0 {
				b[i] = 1
			}
		}
		time.Sleep(5 * SampleEvery)
		return
	}
	ctx := context.Background()
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestRunUsagePeakRSS$")
	cmd.Env = append(os.Environ(), "MEASURE_TOUCH=1")
	big, err := RunUsage(ctx, cmd)
	if err != nil || big.PeakRSS < 64<<20 || big.PeakAnon < 64<<20 || big.PeakAnon > big.PeakRSS || big.CPU <= 0 {
		t.Fatalf("touching 64 MiB: %+v, %v", big, err)
	}
	own := make([]byte, 128<<20)
	for i := 0; i < len(own); i += 4096 {
		own[i] = 1
	}
	small, err := RunUsage(ctx, exec.CommandContext(ctx, "sh", "-c", "sleep 0.1"))
	if err != nil || small.PeakRSS <= 0 || small.PeakRSS >= 32<<20 {
		t.Fatalf("sh sleeping under a 128 MiB parent: %+v, %v", small, err)
	}
	runtime.KeepAlive(own)
}
