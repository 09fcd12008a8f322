package sampler

import (
	"context"
	"strings"
	"testing"
	"time"
)

func TestProfileRates(t *testing.T) {
	prev := map[string]int64{"LWLock:LockManager": 1000, "CPU": 500, "gone": 10}
	cur := map[string]int64{"LWLock:LockManager": 1750, "CPU": 700, "IO:DataFileRead": 30, "gone": 4}
	// 1 s at 10 ms: 100 ticks.
	got := profileRates(prev, cur, 1, 10)
	want := map[string]float64{"LWLock:LockManager": 7.5, "CPU": 2, "IO:DataFileRead": 0.3, "gone": 0.04}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s: %v, want %v (all: %v)", k, got[k], v, got)
		}
	}
	s := &Sample{Sessions: Sessions{Active: 10}, Waits: map[string]int{"CPU": 10}, WaitProfile: got}
	if line := Line(s); !strings.HasPrefix(line, "active 10 (pg_wait_sampling: LWLock:LockManager 7.5, CPU 2.0) idle 0") {
		t.Errorf("line %q", line)
	}
}

// TestWaitSampling reads pg_wait_sampling's profile on a real server:
// the package's cluster preloads it when it is installed
// (postgresql-15-pg-wait-sampling; pgtest.Options.WaitSampling), and the
// test skips saying so otherwise.
func TestWaitSampling(t *testing.T) {
	srv.NeedWaitSampling(t)
	dsn := srv.NewDatabase(t)
	c := connect(t, dsn)
	if _, err := c.Exec(context.Background(), "CREATE EXTENSION pg_wait_sampling"); err != nil {
		t.Fatalf("pg_wait_sampling preloaded but CREATE EXTENSION failed: %v", err)
	}
	s := newSampler(t, dsn, Options{Host: HostOff})
	if !s.Info().WaitSampling || s.Info().WaitSamplingPeriodMs != 10 {
		t.Fatalf("info %+v: want pg_wait_sampling detected with its 10 ms period", s.Info())
	}
	sleeper := connect(t, dsn)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go sleeper.Exec(ctx, "SELECT pg_sleep(60)") //nolint:errcheck // cancelled at the end
	waitFor(t, "the sleeper", func() bool { return sample(t, s).Waits["Timeout:PgSleep"] == 1 })
	time.Sleep(time.Second)
	x := sample(t, s)
	// One session slept through the whole interval: about 1.0 mean
	// sessions in Timeout:PgSleep (less when a loaded machine delays the
	// collector's 10 ms ticks).
	if v := x.WaitProfile["Timeout:PgSleep"]; v < 0.5 || v > 1.3 {
		t.Errorf("profile %v: want about one session in Timeout:PgSleep", x.WaitProfile)
	}
	if _, ok := x.WaitProfile["Client:ClientRead"]; ok {
		t.Errorf("profile %v: idle waits must be left out", x.WaitProfile)
	}
}
