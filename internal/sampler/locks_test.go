package sampler

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/erplab/erplab/internal/opmap"
)

// relationLocks counts by hand the relation locks pid holds, in and
// outside the fast path.
func relationLocks(t *testing.T, c *pgx.Conn, pid uint32) (fast, outside int) {
	t.Helper()
	if err := c.QueryRow(context.Background(), `SELECT count(*) FILTER (WHERE fastpath), count(*) FILTER (WHERE NOT fastpath)
FROM pg_locks WHERE pid = $1 AND locktype = 'relation' AND granted`, int32(pid)).Scan(&fast, &outside); err != nil {
		t.Fatal(err)
	}
	return fast, outside
}

// TestLocksPerOperation: a key operation holds a transaction open that
// read 30 tables (each with its primary key's index: 60 relations, more
// than the 16 fast-path slots); a backend outside any operation holds a
// few. One sample and a session's summary record for the operation
// exactly what pg_locks shows by hand, and nothing for the other backend.
func TestLocksPerOperation(t *testing.T) {
	dsn := srv.NewDatabase(t)
	ctx := context.Background()
	admin := connect(t, dsn)
	var reads []string
	for i := 1; i <= 30; i++ {
		if _, err := admin.Exec(ctx, fmt.Sprintf("CREATE TABLE t%02d (id int PRIMARY KEY)", i)); err != nil {
			t.Fatal(err)
		}
		reads = append(reads, fmt.Sprintf("(SELECT count(*) FROM t%02d WHERE id > 0)", i))
	}
	m := opmap.New([]string{"narrow", "wide"})
	wide, other := connect(t, dsn), connect(t, dsn)
	m.Begin(backendPID(t, wide), 1)
	for _, x := range []struct {
		c   *pgx.Conn
		sql string
	}{{wide, "SELECT " + strings.Join(reads, " + ")}, {other, "SELECT " + strings.Join(reads[:3], " + ")}} {
		if _, err := x.c.Exec(ctx, "BEGIN"); err != nil {
			t.Fatal(err)
		}
		if _, err := x.c.Exec(ctx, x.sql); err != nil {
			t.Fatal(err)
		}
	}
	fast, outside := relationLocks(t, admin, backendPID(t, wide))
	if fast != FastPathSlots || outside < 30 {
		t.Fatalf("by hand: %d fast-path and %d other relation locks, want %d and at least 30 (the test's premise)", fast, outside, FastPathSlots)
	}
	if f, o := relationLocks(t, admin, backendPID(t, other)); f+o == 0 {
		t.Fatalf("by hand: the backend outside any operation holds no relation lock")
	}

	s, err := New(ctx, connect(t, dsn), Options{Ops: m, Locks: true})
	if err != nil {
		t.Fatal(err)
	}
	smp, err := s.Sample(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want := BackendLocks{Op: "wide", PID: int32(backendPID(t, wide)), FastPath: fast, Outside: outside}
	if len(smp.Locks) != 1 || smp.Locks[0] != want {
		t.Errorf("sample's locks %+v, want only %+v", smp.Locks, want)
	}

	ss, err := Start(ctx, dsn, time.Now(), SessionOptions{Interval: 200 * time.Millisecond, Options: Options{Ops: m, Locks: true}})
	if err != nil {
		t.Fatal(err)
	}
	defer ss.Stop()
	waitFor(t, "three samples", func() bool { return len(ss.Snapshot().Series) >= 3 })
	ss.Stop()
	l := ss.Snapshot().Locks
	x, ok := l.OpLocksFor("wide")
	if !ok || len(l.Operations) != 1 {
		t.Fatalf("session's locks %+v, want only wide", l)
	}
	held := fast + outside
	if x.Samples < 3 || x.HeldMax != held || x.HeldMaxOutside != outside || x.HeldP50 != held || x.HeldP95 != held ||
		x.OutsideMax != outside || x.OutsideP50 != outside || x.OutsideP95 != outside {
		t.Errorf("wide %+v, want %d held, %d outside at every sample", x, held, outside)
	}
	if l.FastPathSlots != 16 {
		t.Errorf("fast-path slots %d", l.FastPathSlots)
	}
}

// TestLocksWithoutOps: without an op map every backend holding relation
// locks counts, unnamed (erplab doctor).
func TestLocksWithoutOps(t *testing.T) {
	dsn := srv.NewDatabase(t)
	ctx := context.Background()
	admin, c := connect(t, dsn), connect(t, dsn)
	if _, err := admin.Exec(ctx, "CREATE TABLE a (id int PRIMARY KEY)"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Exec(ctx, "BEGIN"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Exec(ctx, "LOCK TABLE a IN ACCESS EXCLUSIVE MODE"); err != nil {
		t.Fatal(err)
	}
	fast, outside := relationLocks(t, admin, backendPID(t, c))
	s, err := New(ctx, connect(t, dsn), Options{Locks: true})
	if err != nil {
		t.Fatal(err)
	}
	smp, err := s.Sample(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want := BackendLocks{PID: int32(backendPID(t, c)), FastPath: fast, Outside: outside}
	if len(smp.Locks) != 1 || smp.Locks[0] != want || outside != 1 {
		t.Errorf("sample's locks %+v, want only %+v (a strong lock is outside the fast path)", smp.Locks, want)
	}
}

// TestLockSummary: nearest-rank percentiles, the maximum's own outside
// count, backends without relation locks left out, most held first.
func TestLockSummary(t *testing.T) {
	aggs := map[string]*lockAgg{}
	add := func(op string, fast, outside int) {
		if aggs[op] == nil {
			aggs[op] = &lockAgg{}
		}
		aggs[op].add(BackendLocks{Op: op, FastPath: fast, Outside: outside})
	}
	for i := 0; i < 19; i++ {
		add("document_form", 16, 20)
	}
	add("document_form", 16, 35) // 51 held, 35 outside
	add("document_form", 0, 0)
	add("item_lookup", 3, 0)
	add("idle_op", 0, 0)
	l := lockSummary(aggs)
	if len(l.Operations) != 2 || l.Operations[0].Operation != "document_form" {
		t.Fatalf("%+v", l.Operations)
	}
	d := l.Operations[0]
	want := OpLocks{Operation: "document_form", Samples: 20, HeldMax: 51, HeldMaxOutside: 35, HeldP50: 36, HeldP95: 36, OutsideMax: 35, OutsideP50: 20, OutsideP95: 20}
	if d != want {
		t.Errorf("got %+v\nwant %+v", d, want)
	}
	const phrase = "holds up to 51 relation locks, 35 outside the 16 fast-path slots (median 36, 20 outside; p95 36, 20 outside; 20 backend-samples)"
	if got := d.Phrase(); got != phrase {
		t.Errorf("phrase %q\nwant   %q", got, phrase)
	}
}
