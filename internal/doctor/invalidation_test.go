package doctor

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/erplab/erplab/internal/leftover"
	"github.com/erplab/erplab/internal/profile"
	"github.com/erplab/erplab/internal/sampler"
)

// TestInvalidationChainReal forces a catalog cache reset while the
// probes count (a backend blocked on a lock cannot catch up while
// another creates and drops 1500 temp tables, then runs a statement),
// then runs the doctor: invalidation-chain warns and quotes the reset,
// the messages and the clean-ups, and the probes are gone.
func TestInvalidationChainReal(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("not root: adding uprobes needs root")
	}
	if _, _, err := profile.Check(context.Background(), profile.Host{}); err != nil {
		t.Skipf("no perf: %v", err)
	}
	state := t.TempDir()
	if err := os.Chmod(state, 0o700); err != nil {
		t.Fatal(err)
	}
	t.Setenv(leftover.EnvStateDir, state)
	dsn := newDatabase(t)
	ctx := context.Background()
	rec, err := profile.BeginInval(ctx, dsn, profile.InvalOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer rec.Abort()
	a, b := dial(t, dsn), dial(t, dsn)
	exec(t, b, "SELECT pg_advisory_lock(4343)")
	locked := make(chan error, 1)
	go func() {
		_, err := a.Exec(ctx, "SELECT pg_advisory_lock(4343)")
		locked <- err
	}()
	deadline := time.Now().Add(time.Minute)
	for n := 0; n == 0 && time.Now().Before(deadline); {
		if err := b.QueryRow(ctx, "SELECT count(*) FROM pg_stat_activity WHERE pid = $1 AND wait_event_type = 'Lock'", int(a.PgConn().PID())).Scan(&n); err != nil {
			t.Fatal(err)
		}
	}
	exec(t, b, `DO $$ BEGIN FOR i IN 1..1500 LOOP
		CREATE TEMP TABLE erplab_chain_t(a int PRIMARY KEY); DROP TABLE erplab_chain_t; COMMIT; END LOOP; END $$`)
	exec(t, b, "SELECT pg_advisory_unlock(4343)")
	if err := <-locked; err != nil {
		t.Fatal(err)
	}
	exec(t, a, "SELECT count(*) FROM pg_class")
	// the check ends the recording, which flushes what perf buffers
	rep := run(t, Options{DSN: dsn, Only: []string{"invalidation-chain"}, Sample: time.Second, Windows: 1, Interval: 200 * time.Millisecond,
		Host: sampler.HostOff, Catalogs: &sampler.OtherCatalogs{}, Invalidation: InvalFacts{Recording: rec}})
	f := find(t, rep, "invalidation-chain")
	t.Logf("%s: %s\n%s", f.Severity, f.Summary, strings.Join(evTexts(f), "\n"))
	if f.Severity != Warning || f.Metrics["resets"] < 1 || f.Metrics["backends_reset"] < 1 {
		t.Errorf("invalidation-chain %s: %s, metrics %v", f.Severity, f.Summary, f.Metrics)
	}
	if !strings.Contains(f.Summary, "temp-table creates/s -> ") || !strings.Contains(f.Summary, "catalog cache resets on") || !strings.Contains(f.Summary, "-> LockManager") {
		t.Errorf("summary names no chain: %s", f.Summary)
	}
	if f.Metrics["inserted_per_s"] <= 0 || f.Metrics["cleanups_per_s"] <= 0 {
		t.Errorf("metrics %v: want messages and clean-ups", f.Metrics)
	}
}

// Without the probes the check is not checked, names why in one line and
// quotes the estimate.
func TestInvalidationChainUnavailable(t *testing.T) {
	dsn := newDatabase(t)
	rep := run(t, Options{DSN: dsn, Only: []string{"invalidation-chain"}, Sample: 500 * time.Millisecond, Windows: 1, Interval: 100 * time.Millisecond,
		Host: sampler.HostOff, Catalogs: &sampler.OtherCatalogs{}, Invalidation: InvalFacts{Unavailable: "profile: adding uprobes (perf probe) needs root"}})
	f := find(t, rep, "invalidation-chain")
	if f.Severity != NotChecked || !strings.Contains(f.Needs, "could not run: adding uprobes (perf probe) needs root; estimate from catalog changes: ~") || strings.Contains(f.Needs, "\n") {
		t.Errorf("%s: needs %q", f.Severity, f.Needs)
	}
}
