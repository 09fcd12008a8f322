package script

import (
	"context"
	"strconv"
	"testing"

	"github.com/erplab/erplab/internal/pgbench/expr"
	"github.com/erplab/erplab/internal/pgtest"
)

// scaleOneTables creates pgbench's four tables at scale 1 (1 branch, 10
// tellers, 100,000 accounts, as pgbench -i -s 1 with its primary keys) in
// a new database and returns its DSN.
func scaleOneTables(t testing.TB) string {
	dsn := srv.NewDatabase(t)
	conn := connect(t, dsn)
	for _, sql := range []string{
		`CREATE TABLE pgbench_branches (bid int PRIMARY KEY, bbalance int, filler char(88)) WITH (fillfactor=100)`,
		`CREATE TABLE pgbench_tellers (tid int PRIMARY KEY, bid int, tbalance int, filler char(84)) WITH (fillfactor=100)`,
		`CREATE TABLE pgbench_accounts (aid int PRIMARY KEY, bid int, abalance int, filler char(84)) WITH (fillfactor=100)`,
		`CREATE TABLE pgbench_history (tid int, bid int, aid int, delta int, mtime timestamp, filler char(22))`,
		`INSERT INTO pgbench_branches SELECT 1, 0`,
		`INSERT INTO pgbench_tellers SELECT g, 1, 0 FROM generate_series(1, 10) g`,
		`INSERT INTO pgbench_accounts SELECT g, 1, 0, '' FROM generate_series(1, 100000) g`,
		`VACUUM ANALYZE`,
	} {
		query(t, conn, sql)
	}
	return dsn
}

// TestTransactionAllocations runs builtin transactions in the prepared
// and simple modes on a real server and asserts that, once the statements
// are prepared, a transaction allocates nothing: select-only,
// simple-update and tpcb-like (which also checks, through pgbench_history,
// that each run did its INSERT).
func TestTransactionAllocations(t *testing.T) {
	pgtest.SkipShort(t)
	dsn := scaleOneTables(t)
	conn := connect(t, dsn)
	check := connect(t, dsn)
	for _, tc := range []struct {
		mode Mode
		name string
	}{{Prepared, "select-only"}, {Prepared, "simple-update"}, {Prepared, "tpcb-like"}, {Simple, "select-only"}, {Simple, "tpcb-like"}} {
		name := tc.mode.String() + " " + tc.name
		s, err := Builtin(tc.name)
		if err != nil {
			t.Fatal(err)
		}
		plan := expr.NewSeeds(1).Plan(1, 1, true)
		c, err := NewClient([]*Script{s}, Options{Mode: tc.mode, Rand: plan.Clients[0],
			DefaultSeed: plan.DefaultSeed, RandomSeed: plan.RandomSeed})
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		ctx := context.Background()
		if res := c.Run(ctx, conn, 0); res.Err != nil { // prepares (prepared mode)
			t.Fatalf("%s: %v", name, res.Err)
		}
		before := query(t, check, "SELECT count(*) FROM pgbench_history")[0][0]
		const runs = 100
		allocs := testing.AllocsPerRun(runs, func() {
			if res := c.Run(ctx, conn, 0); res.Err != nil || res.Failed {
				t.Fatalf("%s: failed: %v", name, res.Err)
			}
		})
		if allocs != 0 {
			t.Errorf("%s: %.2f allocations per transaction, want 0", name, allocs)
		}
		after := query(t, check, "SELECT count(*) FROM pgbench_history")[0][0]
		b, _ := strconv.Atoi(before)
		a, _ := strconv.Atoi(after)
		want := 0
		if tc.name != "select-only" {
			want = runs + 1 // AllocsPerRun runs once more to warm up
		}
		if a-b != want {
			t.Errorf("%s: %d rows added to pgbench_history, want %d", name, a-b, want)
		}
	}
}
