package doctor

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/erplab/erplab/internal/sampler"
)

// envLockManagerSessions sets TestLockManagerReal's session count.
const envLockManagerSessions = "ERPLAB_LOCKMANAGER_SESSIONS"

// TestLockManagerReal produces lock-manager contention for real: N
// sessions (ERPLAB_LOCKMANAGER_SESSIONS, default 20, at most 40: the
// package cluster has max_connections 50) each count a hash-
// partitioned table of 200 empty partitions without pruning, in a loop:
// every statement locks 201 relations, far over the 16 fast-path slots
// of a backend, so the locks go to the shared lock table and its 16
// LWLock:LockManager partitions. lwlock-waits must warn (>= 20 % of
// active sessions in LockManager/LockFastPath in the worst window). With
// pg_wait_sampling preloaded its profile gives the figures. On this
// 2-core machine (load 30-36 from other work) 8, 20 and 40 sessions gave
// 32, 67 and 48 % mean (42, 73, 52 % worst window).
func TestLockManagerReal(t *testing.T) {
	n := 20
	if v, err := strconv.Atoi(os.Getenv(envLockManagerSessions)); err == nil && v > 0 {
		n = min(v, 40)
	}
	dsn := newDatabase(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	setup := dial(t, dsn)
	var ddl strings.Builder
	ddl.WriteString("CREATE TABLE parts (id int, v int) PARTITION BY HASH (id);\n")
	for i := 0; i < 200; i++ {
		fmt.Fprintf(&ddl, "CREATE TABLE parts_%d PARTITION OF parts FOR VALUES WITH (MODULUS 200, REMAINDER %d);\n", i, i)
	}
	exec(t, setup, ddl.String())
	// Parallel workers would take the same locks and add their own waits.
	exec(t, setup, "ALTER DATABASE "+pgx.Identifier{setup.Config().Database}.Sanitize()+" SET max_parallel_workers_per_gather = 0")
	if _, err := setup.Exec(ctx, "CREATE EXTENSION IF NOT EXISTS pg_wait_sampling"); err != nil {
		t.Logf("pg_wait_sampling not available: %v (waits from pg_stat_activity)", err)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var stmts int
	for i := 0; i < n; i++ {
		c := dial(t, dsn)
		wg.Add(1)
		go func(c *pgx.Conn) {
			defer wg.Done()
			k := 0
			for ctx.Err() == nil {
				var cnt int64
				if err := c.QueryRow(ctx, "SELECT count(*) FROM parts").Scan(&cnt); err != nil {
					break
				}
				k++
			}
			mu.Lock()
			stmts += k
			mu.Unlock()
		}(c)
	}
	time.Sleep(time.Second)
	// By hand: a backend in the middle of the statement holds the table's
	// and its 200 partitions' locks, 16 in its fast-path slots.
	var byHand [2]int
	deadline := time.Now().Add(time.Minute)
	for byHand[0]+byHand[1] != 201 && time.Now().Before(deadline) {
		if err := setup.QueryRow(ctx, `SELECT count(*) FILTER (WHERE fastpath), count(*) FILTER (WHERE NOT fastpath) FROM pg_locks
WHERE locktype = 'relation' AND granted AND pid <> pg_backend_pid() GROUP BY pid ORDER BY count(*) DESC LIMIT 1`).Scan(&byHand[0], &byHand[1]); err != nil && err != pgx.ErrNoRows {
			t.Fatal(err)
		}
	}
	if byHand != [2]int{16, 185} {
		t.Fatalf("by hand: no backend seen holding 201 relation locks, 185 outside the fast path (last %v)", byHand)
	}
	rep := run(t, Options{DSN: dsn, Only: []string{"lwlock-waits"}, Sample: 1500 * time.Millisecond, Windows: 3, Interval: 200 * time.Millisecond, Host: sampler.HostOff, Catalogs: &sampler.OtherCatalogs{}})
	cancel()
	wg.Wait()
	f := find(t, rep, "lwlock-waits")
	t.Logf("%d sessions, %d statements; %s: %s\n%s\nmetrics %v", n, stmts, f.Severity, f.Summary, strings.Join(evTexts(f), "\n"), f.Metrics)
	if f.Severity != Warning && f.Severity != Critical {
		t.Errorf("lwlock-waits %s: %s (LockManager worst %.1f %%)", f.Severity, f.Summary, f.Metrics["lockmanager_worst_pct"])
	}
	// The finding quotes what pg_locks showed by hand.
	if f.Metrics["relation_locks_max"] != 201 || f.Metrics["relation_locks_max_outside_fastpath"] != float64(byHand[1]) {
		t.Errorf("relation locks max %v, %v outside the fast path; by hand 201, %d", f.Metrics["relation_locks_max"], f.Metrics["relation_locks_max_outside_fastpath"], byHand[1])
	}
	if want := "a backend holds up to 201 relation locks, 185 outside the 16 fast-path slots"; !strings.Contains(f.Summary, want) {
		t.Errorf("summary %q lacks %q", f.Summary, want)
	}
	if !strings.Contains(strings.Join(f.Fix, "\n"), "fewer partitions") {
		t.Errorf("fix %q names no reduction", f.Fix)
	}
}
