package sampler

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/erplab/erplab/internal/opmap"
	"github.com/erplab/erplab/internal/pgtest"
)

func backendPID(t testing.TB, c *pgx.Conn) uint32 {
	t.Helper()
	return c.PgConn().PID()
}

// TestOpWaitsAndStatements runs two key operations on known backends: one
// sleeps, one is blocked on an advisory lock, a third backend runs the
// sleep outside any operation. One sample attributes each wait to its
// operation; the session's pg_stat_statements delta attributes each
// statement to the operation it was seen in and leaves the unseen one
// unattributed.
func TestOpWaitsAndStatements(t *testing.T) {
	dsn := srv.NewDatabase(t)
	admin := connect(t, dsn)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	pgtest.NeedExtension(t, dsn, "pg_stat_statements")
	if _, err := admin.Exec(ctx, "CREATE EXTENSION IF NOT EXISTS pg_stat_statements"); err != nil {
		t.Fatal(err)
	}
	m := opmap.New([]string{"blocked", "sleeper"})
	ss, err := Start(ctx, dsn, time.Now(), SessionOptions{Interval: 200 * time.Millisecond, Options: Options{Ops: m}})
	if err != nil {
		t.Fatal(err)
	}
	defer ss.Stop()
	// The opening pg_stat_statements snapshot follows the first sample:
	// once a second one is there, it is taken.
	waitFor(t, "two samples", func() bool { return len(ss.Snapshot().Series) >= 2 })

	holder := connect(t, dsn)
	if _, err := holder.Exec(ctx, "SELECT pg_advisory_lock(7)"); err != nil {
		t.Fatal(err)
	}
	blocked, sleeper, outside := connect(t, dsn), connect(t, dsn), connect(t, dsn)
	m.Begin(backendPID(t, blocked), 0)
	m.Begin(backendPID(t, sleeper), 1)
	var wg sync.WaitGroup
	for _, x := range []struct {
		c   *pgx.Conn
		sql string
	}{{blocked, "SELECT pg_advisory_lock(7)"}, {sleeper, "SELECT pg_sleep(4)"}, {outside, "SELECT 1, pg_sleep(4)"}} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := x.c.Exec(ctx, x.sql); err != nil {
				t.Error(err)
			}
		}()
	}
	waitActivity(t, holder, map[string]int{"active": 3, "idle": 2, "wait:PgSleep": 2, "wait:advisory": 1})
	var got *Sample
	waitFor(t, "a sample of both operations", func() bool {
		got = ss.Latest()
		return got != nil && got.OpWaits["sleeper"]["Timeout:PgSleep"] == 1 && got.OpWaits["blocked"]["Lock:advisory"] == 1
	})
	if len(got.OpWaits) != 2 || len(got.OpWaits["sleeper"]) != 1 || len(got.OpWaits["blocked"]) != 1 || got.OpUnattributed != 0 {
		t.Errorf("op waits %v (unattributed %d), want exactly one sleeper in PgSleep and one blocked in advisory", got.OpWaits, got.OpUnattributed)
	}
	if got.Waits["Timeout:PgSleep"] != 2 {
		t.Errorf("waits %v: want the outside sleeper too", got.Waits)
	}
	time.Sleep(600 * time.Millisecond) // a few more samples
	if _, err := holder.Exec(ctx, "SELECT pg_advisory_unlock(7)"); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	m.End(backendPID(t, blocked))
	m.End(backendPID(t, sleeper))
	ss.Stop()

	st := ss.Statements()
	if st == nil || st.Note != "" {
		t.Fatalf("statements %+v", st)
	}
	byQuery := map[string]Statement{}
	for _, s := range st.Top {
		byQuery[s.Query] = s
	}
	lock, sleep, out := byQuery["SELECT pg_advisory_lock($1)"], byQuery["SELECT pg_sleep($1)"], byQuery["SELECT $1, pg_sleep($2)"]
	if lock.Calls != 2 || lock.Operations["blocked"] != 1 { // the holder's and the blocked one's: same statement
		t.Errorf("advisory lock statement %+v, want 2 calls attributed to blocked", lock)
	}
	if sleep.Calls != 1 || sleep.Operations["sleeper"] != 1 || len(sleep.Operations) != 1 || sleep.ExecMs < 3900 {
		t.Errorf("sleep statement %+v, want 1 call of 4 s attributed to sleeper", sleep)
	}
	if out.Calls != 1 || len(out.Operations) != 0 {
		t.Errorf("outside statement %+v, want 1 call, unattributed", out)
	}
	ops := map[string]OpStatements{}
	for _, o := range st.Operations {
		ops[o.Operation] = o
	}
	if ops["sleeper"].Calls != 1 || ops["sleeper"].ExecMs < 3900 || ops["blocked"].Calls != 2 {
		t.Errorf("per operation %+v", st.Operations)
	}
	if ops[""].Calls < 1 || st.Operations[len(st.Operations)-1].Operation != "" {
		t.Errorf("unattributed not last or missing: %+v", st.Operations)
	}
	if !st.TrackPlanning {
		t.Errorf("pgcluster preloads with track_planning on: %+v", st)
	}
}

// TestStatementsAbsent: without the extension in the database the session
// says how to enable it and nothing fails.
func TestStatementsAbsent(t *testing.T) {
	dsn := srv.NewDatabase(t)
	ss, err := Start(context.Background(), dsn, time.Now(), SessionOptions{Interval: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, "a sample", func() bool { return ss.Latest() != nil })
	ss.Stop()
	st := ss.Statements()
	if st == nil || len(st.Top) != 0 || st.Note == "" {
		t.Fatalf("statements %+v, want a note and no statements", st)
	}
	t.Log(st.Note)
	o, err := ReadObservations(ss.Observations())
	if err != nil || o.Statements == nil || o.Statements.Note != st.Note || o.Cost.Samples < 1 {
		t.Fatalf("observations %+v %v", o, err)
	}
}

// TestStatementsAfterLostConnection: the sampler's connection is lost
// between samples (its backend terminated); the closing pg_stat_statements
// snapshot reconnects instead of leaving the run without statements (an
// ab round on a loaded host lost them so).
func TestStatementsAfterLostConnection(t *testing.T) {
	dsn := srv.NewDatabase(t)
	admin := connect(t, dsn)
	ctx := context.Background()
	pgtest.NeedExtension(t, dsn, "pg_stat_statements")
	if _, err := admin.Exec(ctx, "CREATE EXTENSION IF NOT EXISTS pg_stat_statements"); err != nil {
		t.Fatal(err)
	}
	// One sample and the opening snapshot, then no sample for an hour.
	ss, err := Start(ctx, dsn, time.Now(), SessionOptions{Interval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	defer ss.Stop()
	pid := ss.s.info.BackendPID
	waitFor(t, "the opening snapshot", func() bool {
		var n int
		err := admin.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE pid = $1 AND state = 'idle'
			AND query LIKE '%pg_stat_statements_info%'`, pid).Scan(&n)
		return err == nil && n == 1
	})
	if _, err := admin.Exec(ctx, "SELECT 42 AS lost"); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.Exec(ctx, "SELECT pg_terminate_backend($1)", pid); err != nil {
		t.Fatal(err)
	}
	ss.Stop()
	st := ss.Statements()
	if st == nil || st.Note != "" || st.Count == 0 {
		t.Fatalf("statements %+v, want the delta read on a new connection", st)
	}
	found := false
	for _, s := range st.Top {
		found = found || s.Query == "SELECT $1 AS lost"
	}
	if !found {
		t.Errorf("statement run before the loss missing from %+v", st.Top)
	}
}
