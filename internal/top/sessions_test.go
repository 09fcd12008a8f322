package top

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	tea "github.com/charmbracelet/bubbletea"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/erplab/erplab/internal/pgtest"
	"github.com/erplab/erplab/internal/sampler"
	"github.com/erplab/erplab/internal/storm"
)

// waitFor polls ReadSessions until ok accepts them.
func waitFor(t *testing.T, conn *pgx.Conn, f Filter, what string, ok func([]Session) bool) []Session {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		ss, err := ReadSessions(context.Background(), conn, f)
		if err != nil {
			t.Fatal(err)
		}
		if ok(ss) {
			return ss
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: sessions %+v", what, ss)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Two sessions make a blocking chain: the holder is the root blocker,
// the waiter hangs under it waiting for a transactionid lock; the plain
// blocking view prints the chain; the filter by application narrows the
// sessions view to the waiter.
func TestBlockingChain(t *testing.T) {
	pgtest.SkipShort(t)
	dsn := srv.NewDatabase(t)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	setup := connect(t, dsn)
	if _, err := setup.Exec(ctx, "CREATE TABLE acc (id int PRIMARY KEY, v int); INSERT INTO acc VALUES (1, 0)"); err != nil {
		t.Fatal(err)
	}
	holder := connect(t, dsn)
	for _, q := range []string{"SET application_name = 'holder app'", "BEGIN", "UPDATE acc SET v = v + 1 WHERE id = 1"} {
		if _, err := holder.Exec(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	waiter := connect(t, dsn)
	if _, err := waiter.Exec(ctx, "SET application_name = 'waiter app'"); err != nil {
		t.Fatal(err)
	}
	wg.Add(1)
	go func() { defer wg.Done(); _, _ = waiter.Exec(ctx, "UPDATE acc SET v = v + 1 WHERE id = 1") }()
	mon := connect(t, dsn)
	var hpid, wpid int
	_ = holder.QueryRow(ctx, "SELECT pg_backend_pid()").Scan(&hpid)
	ss := waitFor(t, mon, Filter{}, "waiter blocked", func(ss []Session) bool {
		for _, s := range ss {
			if s.Application == "waiter app" && len(s.BlockedBy) == 1 && s.BlockedBy[0] == hpid {
				wpid = s.PID
				return true
			}
		}
		return false
	})
	roots := Blocking(ss)
	if len(roots) != 1 || roots[0].Session.PID != hpid || len(roots[0].Children) != 1 || roots[0].Children[0].Session.PID != wpid ||
		roots[0].Children[0].Session.LockType() != "transactionid" || roots[0].Session.State != "idle in transaction" {
		t.Fatalf("blocking forest %+v", roots)
	}
	s, err := sampler.Connect(ctx, dsn, sampler.Options{Queries: DefaultQueries})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(context.Background())
	var out bytes.Buffer
	if err := Print(ctx, &out, s, Options{Interval: 200 * time.Millisecond, Width: 200, Conn: mon, View: ViewBlocking}, 1); err != nil {
		t.Fatal(err)
	}
	text := out.String()
	for _, want := range []string{"blocking: 1 root blockers, 1 blocked sessions", "holder app) idle in transaction for", "[blocks 1]", "└ pid ", "(waiter app) waits for lock transactionid for"} {
		if !strings.Contains(text, want) {
			t.Errorf("blocking view lacks %q:\n%s", want, text)
		}
	}
	only, err := ReadSessions(ctx, mon, Filter{Application: "waiter app", State: "active"})
	if err != nil || len(only) != 1 || only[0].PID != wpid {
		t.Errorf("filtered sessions %+v %v", only, err)
	}
	if none, err := ReadSessions(ctx, mon, Filter{Database: "no_such_db"}); err != nil || len(none) != 0 {
		t.Errorf("database filter: %+v %v", none, err)
	}
	if _, err := holder.Exec(ctx, "ROLLBACK"); err != nil {
		t.Fatal(err)
	}
}

// A parallel query whose workers sleep: the leader's row counts both
// workers' Timeout:PgSleep waits beside its own IPC:ExecuteGather, and
// sessions of another database are listed too.
func TestParallelWorkersOnLeader(t *testing.T) {
	pgtest.SkipShort(t)
	dsn := srv.NewDatabase(t)
	other := srv.NewDatabase(t)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	q := connect(t, dsn)
	for _, sql := range []string{
		"CREATE TABLE pt AS SELECT g AS id FROM generate_series(1, 2000) g", "ANALYZE pt",
		"SET application_name = 'parallel leader'", "SET max_parallel_workers_per_gather = 2", "SET parallel_setup_cost = 0",
		"SET parallel_tuple_cost = 0", "SET min_parallel_table_scan_size = 0", "SET parallel_leader_participation = off",
	} {
		if _, err := q.Exec(ctx, sql); err != nil {
			t.Fatal(err)
		}
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		_, _ = q.Exec(ctx, "SELECT count(*) FROM pt WHERE pg_sleep(0.02) IS NOT NULL")
	}()
	mon := connect(t, other) // connected to another database
	ss := waitFor(t, mon, Filter{}, "parallel workers", func(ss []Session) bool {
		for _, s := range ss {
			// The leader is between two waits for a moment now and
			// then (CI sampled it on CPU once): wait for a sample that
			// has it waiting.
			if s.Application == "parallel leader" && s.Workers == 2 && s.WorkerWaits["Timeout:PgSleep"] == 2 && s.Wait == "IPC:ExecuteGather" {
				return true
			}
		}
		return false
	})
	for _, s := range ss {
		if s.Application != "parallel leader" {
			continue
		}
		if s.Wait != "IPC:ExecuteGather" || s.Waits()["Timeout:PgSleep"] != 2 || !strings.Contains(waitsText(s), "IPC:ExecuteGather + 2 workers: Timeout:PgSleep 2") {
			t.Errorf("leader row %+v: %s", s, waitsText(s))
		}
		if !strings.HasPrefix(s.Database, "t_testparallelworkersonleader") {
			t.Errorf("leader's database %q", s.Database)
		}
	}
	cancel()
}

// Cancel of a pg_sleep session: Kill returns true and the session's
// statement fails with query_canceled; FullQuery reads its text first;
// terminate of a pid that does not exist sends nothing.
func TestCancelSleep(t *testing.T) {
	pgtest.SkipShort(t)
	dsn := srv.NewDatabase(t)
	ctx := context.Background()
	sleeper := connect(t, dsn)
	var pid int
	if err := sleeper.QueryRow(ctx, "SELECT pg_backend_pid()").Scan(&pid); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { _, err := sleeper.Exec(ctx, "SELECT pg_sleep(60) /* to be cancelled */"); done <- err }()
	mon := connect(t, dsn)
	waitFor(t, mon, Filter{State: "active"}, "sleeper active", func(ss []Session) bool {
		for _, s := range ss {
			if s.PID == pid && s.Wait == "Timeout:PgSleep" {
				return true
			}
		}
		return false
	})
	if q, err := FullQuery(ctx, mon, pid); err != nil || q != "SELECT pg_sleep(60) /* to be cancelled */" {
		t.Errorf("full query %q %v", q, err)
	}
	ok, err := Kill(ctx, mon, pid, Cancel)
	if err != nil || !ok {
		t.Fatalf("cancel: %v %v", ok, err)
	}
	select {
	case err := <-done:
		var pe *pgconn.PgError
		if !errors.As(err, &pe) || pe.Code != "57014" {
			t.Errorf("cancelled statement: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the sleep was not cancelled")
	}
	if ok, err := Kill(ctx, mon, 1<<30, Terminate); err != nil || ok {
		t.Errorf("terminate of a missing pid: %v %v", ok, err)
	}
	if _, err := Kill(ctx, mon, pid, "stop"); err == nil {
		t.Error("unknown signal accepted")
	}
}

// The sessions and blocking views rendered from recorded sessions
// (testdata/sessions.json): a lock chain of three, a parallel leader
// with workers' waits, the selected row and its full query.
func TestRenderRecordedSessions(t *testing.T) {
	b, err := os.ReadFile("testdata/sessions.json")
	if err != nil {
		t.Fatal(err)
	}
	var ss []Session
	if err := json.Unmarshal(b, &ss); err != nil {
		t.Fatal(err)
	}
	text := strings.Join(renderSessions(ss, Filter{Database: "erp"}, 2, "SELECT d.id\nFROM doc d"), "\n")
	for _, want := range []string{
		"sessions of every database, filter database=erp: 5 shown, 4 active, 2 parallel workers",
		"> 4102",
		"IPC:ExecuteGather + 2 workers: IO:DataFileRead 1, LWLock:BufferMapping 1",
		"[blocked by 4100]",
		"full query of pid 4102 (erp@erp, 1C report):\nSELECT d.id\nFROM doc d",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("sessions view lacks %q:\n%s", want, text)
		}
	}
	bl := strings.Join(renderBlocking(Blocking(ss)), "\n")
	want := `blocking: 1 root blockers, 2 blocked sessions (pg_blocking_pids)
pid 4100 erp@erp (1C posting) idle in transaction for 2m05s, transaction open 2m10s [blocks 1]: UPDATE stock SET qty = qty - $1 WHERE item = $2
└ pid 4101 erp@erp (1C posting) waits for lock transactionid for 40.0 s [blocks 1]: UPDATE stock SET qty = qty - $1 WHERE item = $2
  └ pid 4103 erp@erp (1C posting) waits for lock tuple for 12.0 s: UPDATE stock SET qty = qty - $1 WHERE item = $2`
	if bl != want {
		t.Errorf("blocking view:\n%s\nwant:\n%s", bl, want)
	}
	if got := renderBlocking(nil); len(got) != 1 || !strings.Contains(got[0], "no session waits") {
		t.Errorf("empty blocking view %q", got)
	}
}

// The interactive keys: v to the sessions view, c asks, any key but y
// aborts, y sends the cancel (the pg_sleep session's statement fails),
// enter reads the full query.
func TestModelCancelConfirm(t *testing.T) {
	pgtest.SkipShort(t)
	dsn := srv.NewDatabase(t)
	ctx := context.Background()
	sleeper := connect(t, dsn)
	var pid int
	if err := sleeper.QueryRow(ctx, "SELECT pg_backend_pid()").Scan(&pid); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { _, err := sleeper.Exec(ctx, "SELECT pg_sleep(60)"); done <- err }()
	mon := connect(t, dsn)
	ss := waitFor(t, mon, Filter{}, "sleeper", func(ss []Session) bool {
		return len(ss) > 0 && ss[0].PID == pid && ss[0].Wait == "Timeout:PgSleep"
	})
	st, err := newState(sampler.Info{}, storm.Rule{}, 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	m := &model{ctx: ctx, st: st, opts: Options{Conn: mon}, sessions: ss, width: 200}
	press := func(k string) tea.Cmd {
		t.Helper()
		_, cmd := m.Update(tea.KeyMsg(tea.Key{Type: tea.KeyRunes, Runes: []rune(k)}))
		return cmd
	}
	press("v")
	if m.view != ViewSessions {
		t.Fatalf("view %s", m.view)
	}
	press("c")
	if m.confirm != Cancel || !strings.Contains(m.View(), "cancel the query of pid") {
		t.Fatalf("no confirmation: %q", m.note)
	}
	if cmd := press("n"); cmd != nil || !strings.Contains(m.note, "not sent") {
		t.Fatalf("abort: %q", m.note)
	}
	press("c")
	cmd := press("y")
	if cmd == nil {
		t.Fatal("confirmed cancel returned no command")
	}
	m.Update(cmd())
	if !strings.Contains(m.note, "sent") || strings.Contains(m.note, "not sent") {
		t.Errorf("note %q", m.note)
	}
	select {
	case err := <-done:
		var pe *pgconn.PgError
		if !errors.As(err, &pe) || pe.Code != "57014" {
			t.Errorf("statement after cancel: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("not cancelled")
	}
}
