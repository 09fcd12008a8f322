package proxybench

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/erplab/erplab/internal/pgtest"
)

var srv *pgtest.Server

func TestMain(m *testing.M) { os.Exit(pgtest.Run(m, &srv)) }

func pgbench() string {
	if p := filepath.Join(srv.BinDir(), "pgbench"); fileExists(p) {
		return p
	}
	return "pgbench"
}

func fileExists(p string) bool { _, err := os.Stat(p); return err == nil }

func bench(t *testing.T, bouncer string) []Result {
	t.Helper()
	ctx := context.Background()
	dsn := srv.NewDatabase(t)
	if _, err := Run(ctx, Options{Upstream: dsn, PgBench: pgbench()}); err == nil || !strings.Contains(err.Error(), "no pgbench tables") {
		t.Fatalf("want a no-pgbench-tables error, got %v", err)
	}
	if err := Init(ctx, pgbench(), dsn, 1); err != nil {
		t.Fatal(err)
	}
	rs, err := Run(ctx, Options{Upstream: dsn, Duration: time.Second, Clients: []int{2}, Modes: []string{"simple", "prepared"},
		PgBench: pgbench(), PgBouncer: bouncer})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("\n%s", Table(rs))
	return rs
}

func checkResults(t *testing.T, rs []Result, targets ...string) {
	t.Helper()
	if len(rs) != 2*len(targets) {
		t.Fatalf("%d results, want %d", len(rs), 2*len(targets))
	}
	for i, r := range rs {
		if r.Target != targets[i%len(targets)] || r.TPS <= 0 || r.Count <= 0 || r.P50 <= 0 || r.P99 < r.P50 {
			t.Errorf("result %d: %+v", i, r)
		}
	}
}

func TestBenchDirectAndProxy(t *testing.T) {
	checkResults(t, bench(t, ""), "direct", "erplab proxy")
}

func TestBenchPgBouncer(t *testing.T) {
	b, err := FindPgBouncer()
	if err != nil {
		t.Skipf("skipping the PgBouncer comparison: %v", err)
	}
	checkResults(t, bench(t, b), "direct", "erplab proxy", "pgbouncer")
}
