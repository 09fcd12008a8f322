package sampler

import (
	"context"
	"os"
	"path/filepath"
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

// TestWaitSampling reads pg_wait_sampling's profile on a real server when
// the extension is installed next to the server binaries; it is not on
// this project's CI machines (Debian ships it as
// postgresql-15-pg-wait-sampling), so the test says so and skips.
func TestWaitSampling(t *testing.T) {
	bin := srv.BinDir(t)
	if _, err := os.Stat(filepath.Join(bin, "..", "lib", "pg_wait_sampling.so")); err != nil {
		t.Skipf("pg_wait_sampling is not installed (no %s): install postgresql-15-pg-wait-sampling to run this test", filepath.Join(bin, "..", "lib", "pg_wait_sampling.so"))
	}
	// The shared cluster does not preload it: a cluster of its own would;
	// until a machine has it, detection is what is tested below.
	dsn := srv.NewDatabase(t)
	c := connect(t, dsn)
	if _, err := c.Exec(context.Background(), "CREATE EXTENSION pg_wait_sampling"); err != nil {
		t.Skipf("pg_wait_sampling installed but not loadable here: %v", err)
	}
	s := newSampler(t, dsn, Options{Host: HostOff})
	if !s.Info().WaitSampling {
		t.Skip("pg_wait_sampling created but its library is not preloaded (shared_preload_libraries)")
	}
	go c.Exec(context.Background(), "SELECT pg_sleep(2)") //nolint:errcheck // ends by itself
	sample(t, s)
	time.Sleep(time.Second)
	x := sample(t, s)
	if x.WaitProfile["Timeout:PgSleep"] < 0.5 {
		t.Errorf("profile %v: want about one session in PgSleep", x.WaitProfile)
	}
}
