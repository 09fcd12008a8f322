package replay

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/erplab/erplab/internal/capture"
)

// rowSchema is one row that two sessions update: v = 1, then A adds 1
// and B doubles, so (1+1)*2 = 4 only in that order (1*2+1 = 3 in the
// other); and the functions the scenarios wait with, in the server, for
// what the other session does (never on the client's clock).
const rowSchema = `CREATE TABLE x (id int PRIMARY KEY, v int); INSERT INTO x VALUES (1, 1);
-- until the query q returns true, or cap seconds
CREATE FUNCTION wait_until(q text, cap float8) RETURNS bool LANGUAGE plpgsql AS $$
DECLARE t0 timestamptz := clock_timestamp(); ok bool;
BEGIN
  LOOP
    PERFORM pg_stat_clear_snapshot();
    EXECUTE q INTO ok;
    EXIT WHEN ok OR clock_timestamp() - t0 > make_interval(secs => cap);
    PERFORM pg_sleep(0.01);
  END LOOP;
  RETURN true;
END$$;
-- until order-B waits on a lock and the replay's monitor has polled since
CREATE FUNCTION seen_waiting(cap float8) RETURNS bool LANGUAGE plpgsql AS $$
DECLARE t1 timestamptz;
BEGIN
  PERFORM wait_until($q$SELECT EXISTS (SELECT 1 FROM pg_stat_activity WHERE datname = current_database()
    AND application_name = 'order-B' AND wait_event_type = 'Lock')$q$, cap);
  t1 := clock_timestamp();
  PERFORM wait_until(format($q$SELECT EXISTS (SELECT 1 FROM pg_stat_activity WHERE datname = current_database()
    AND application_name = 'erplab-replay-monitor' AND state = 'idle' AND query_start > %L)$q$, t1), cap);
  RETURN true;
END$$;`

// waitUntil is a call of wait_until(q, cap): it returns when q does, in
// the server, or after cap seconds.
func waitUntil(q string, cap int) string {
	return "wait_until('" + strings.ReplaceAll(q, "'", "''") + "', " + strconv.Itoa(cap) + ")"
}

// activity is a query: does session app exist with cond (a
// pg_stat_activity predicate)?
func activity(app, cond string) string {
	return "SELECT EXISTS (SELECT 1 FROM pg_stat_activity WHERE datname = current_database() AND application_name = '" +
		app + "' AND " + cond + ")"
}

// changed is a query: has the row's change been committed?
const changed = "SELECT EXISTS (SELECT 1 FROM x WHERE id = 1 AND v <> 1)"

// untilAHoldsTheRow waits, in the server, until session A has updated the
// row (it has a transaction id and runs or ran something else since) or
// has committed it.
var untilAHoldsTheRow = "SELECT " + waitUntil("SELECT ("+changed+") OR ("+
	activity("order-A", "backend_xid IS NOT NULL AND query NOT LIKE 'UPDATE%'")+")", 60)

// commitOrder is the captured history: A updates the row, runs hold in
// its transaction and commits; B starts after A's commit, waits (in the
// server) until A holds the row or has committed it, and doubles it.
// Without the gates B's first statement is due at once, so B overtakes A
// and its UPDATE waits on A's row lock.
func commitOrder(hold string) []capture.Event {
	s := &script{}
	a := s.session("A", "order-A", 0)
	b := s.session("B", "order-B", 5)
	a.query("BEGIN", 5, 0, "BEGIN")
	a.query("UPDATE x SET v = v + 1 WHERE id = 1", 5, 1, "UPDATE 1")
	a.query(hold, 200_000, 1, "SELECT 1")
	a.query("COMMIT", 5, 0, "COMMIT")
	a.disconnect()
	b.t = a.t + 5
	b.query(untilAHoldsTheRow, 100, 1, "SELECT 1")
	b.query("UPDATE x SET v = v * 2 WHERE id = 1", 5, 1, "UPDATE 1")
	b.disconnect()
	return s.sorted()
}

func value(t *testing.T, pool *pgxpool.Pool) int {
	t.Helper()
	var v int
	if err := pool.QueryRow(context.Background(), "SELECT v FROM x WHERE id = 1").Scan(&v); err != nil {
		t.Fatal(err)
	}
	return v
}

// TestCommitOrderKept: with the gates, B's statements wait for A's
// commit, so B never waits on A's lock and the row ends as only the
// captured order makes it.
func TestCommitOrderKept(t *testing.T) {
	res, pool := replayOnto(t, rowSchema, commitOrder("SELECT pg_sleep(0.2)"), Options{Poll: 20 * time.Millisecond})
	if v := value(t, pool); v != 4 {
		t.Errorf("v = %d, want 4 (A's +1, then B's *2)", v)
	}
	if f := res.Fidelity; f.LockWaits != 0 || f.Reordered != 0 || f.Failed != 0 {
		t.Errorf("lock waits %d, reordered %d, failed %d: want none", f.LockWaits, f.Reordered, f.Failed)
	}
}

// TestOrderNoneWaitsOnLocks: without the gates (as pgreplay) B overtakes
// A and waits on A's row lock, which the monitor counts (A holds the row
// until the monitor has polled while B waited).
func TestOrderNoneWaitsOnLocks(t *testing.T) {
	res, pool := replayOnto(t, rowSchema, commitOrder("SELECT seen_waiting(60)"), Options{Order: OrderNone, Poll: 20 * time.Millisecond})
	if f := res.Fidelity; f.LockWaits < 1 || f.Reordered != 0 {
		t.Errorf("lock waits %d, reordered %d: want B's wait counted and no reorder", f.LockWaits, f.Reordered)
	}
	if v := value(t, pool); v != 4 {
		t.Errorf("v = %d, want 4 (B waited for A's commit)", v)
	}
}

// TestAutocommitOrder: A's autocommit UPDATE waits (in the server) before
// it touches the row, until the row has changed or 3 s passed, and it
// ended before B started. Gate a alone (A was sent first) would let B's
// UPDATE run during A's wait and change the row first, as it does
// without gates; gate b holds B until A has committed.
func TestAutocommitOrder(t *testing.T) {
	s := &script{}
	a := s.session("A", "order-A", 0)
	b := s.session("B", "order-B", 0)
	a.query("UPDATE x SET v = v + 1 WHERE id = 1 AND (SELECT "+waitUntil(changed, 3)+")", 500_000, 1, "UPDATE 1")
	b.t = a.t + 10
	b.query("UPDATE x SET v = v * 2 WHERE id = 1", 5, 1, "UPDATE 1")
	a.disconnect()
	b.disconnect()
	events := s.sorted()
	_, pool := replayOnto(t, rowSchema, events, Options{})
	if v := value(t, pool); v != 4 {
		t.Errorf("gates: v = %d, want 4 (A's +1 committed before B's *2)", v)
	}
	_, pool = replayOnto(t, rowSchema, events, Options{Order: OrderNone})
	if v := value(t, pool); v != 3 {
		t.Errorf("no gates: v = %d, want 3 (B overtook A's wait)", v)
	}
}

// TestWatchdogReleases: a capture no server could have produced (B
// updated the row A held, without waiting, and committed before A) makes
// the gates wait on each other: A's COMMIT waits for B's, B's UPDATE
// waits on A's row lock (B's statement before it waits, in the server,
// until A holds the row). The cycle (B waits on A's lock, A's gate on
// B's statement) is seen and A's gate released at once, not after B's
// captured duration and the margin (an hour here); the replay finishes,
// the reorder counted and named.
func TestWatchdogReleases(t *testing.T) {
	s := &script{}
	a := s.session("A", "order-A", 0)
	b := s.session("B", "order-B", 15)
	a.query("BEGIN", 5, 0, "BEGIN")
	a.query("UPDATE x SET v = v + 1 WHERE id = 1", 5, 1, "UPDATE 1")
	b.query("BEGIN", 5, 0, "BEGIN")
	b.query("SELECT "+waitUntil(activity("order-A", "backend_xid IS NOT NULL AND state = 'idle in transaction'"), 60), 5, 1, "SELECT 1")
	b.query("UPDATE x SET v = v * 2 WHERE id = 1", 5, 1, "UPDATE 1")
	b.query("COMMIT", 5, 0, "COMMIT")
	a.t = b.t + 100
	a.query("COMMIT", 5, 0, "COMMIT")
	a.disconnect()
	b.disconnect()
	res, pool := replayOnto(t, rowSchema, s.sorted(), Options{Margin: time.Hour})
	f := res.Fidelity
	if f.Reordered < 1 || len(f.Reorders) == 0 || f.Reorders[0].Waiter != "B" || f.Reorders[0].Released != "A" {
		t.Fatalf("reordered %d %+v: want A released for B", f.Reordered, f.Reorders)
	}
	if v := value(t, pool); v != 4 || f.Failed != 0 {
		t.Errorf("v = %d, failed %d: want 4 (A's +1, then B's *2) and no error", v, f.Failed)
	}
}

// TestExecuteWaitsInServer: B's prepared UPDATE waited in the capture on
// A's row lock, and A's next statement started meanwhile. The gates let
// A's statement go once B's Execute is written, not once it answers
// (which is after A's commit): the replay keeps the captured order with
// no reorder. Sent at its answer, B's Execute would hold A at its gate
// while B waits on A's lock, a cycle only a release ends.
func TestExecuteWaitsInServer(t *testing.T) {
	s := &script{}
	a := s.session("A", "order-A", 0)
	a.query("BEGIN", 5, 0, "BEGIN")
	a.query("UPDATE x SET v = v + 1 WHERE id = 1", 5, 1, "UPDATE 1")
	b := s.session("B", "order-B", 40)
	b.prepare("dbl", "UPDATE x SET v = v * 2 WHERE id = $1", []uint32{23}, nil)
	b.execute("dbl", "", nil, [][]byte{[]byte("1")}, 1000, 1, "UPDATE 1")
	b.disconnect()
	a.t = 100
	a.query("SELECT 1", 5, 1, "SELECT 1")
	a.query("COMMIT", 5, 0, "COMMIT")
	a.disconnect()
	res, pool := replayOnto(t, rowSchema, s.sorted(), Options{Poll: 20 * time.Millisecond})
	if f := res.Fidelity; f.Reordered != 0 || f.Failed != 0 {
		t.Errorf("reordered %d %+v, failed %d: want the captured order kept", f.Reordered, f.Reorders, f.Failed)
	}
	if v := value(t, pool); v != 4 {
		t.Errorf("v = %d, want 4 (A's +1, then B's *2)", v)
	}
}
