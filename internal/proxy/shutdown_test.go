package proxy

import (
	"context"
	"errors"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
)

// pgConnect opens a pgconn session through the proxy at addr.
func pgConnect(t *testing.T, dsn, addr string) *pgconn.PgConn {
	t.Helper()
	c, err := pgconn.Connect(context.Background(), strings.Replace(viaProxy(t, dsn, addr), "sslmode=prefer", "sslmode=disable", 1))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close(context.Background()) })
	return c
}

// runSQL runs sql on c and returns its rows' first column as text.
func runSQL(ctx context.Context, c *pgconn.PgConn, sql string) ([]string, error) {
	rs, err := c.Exec(ctx, sql).ReadAll()
	if err != nil {
		return nil, err
	}
	var out []string
	for _, r := range rs {
		if r.Err != nil {
			return nil, r.Err
		}
		for _, row := range r.Rows {
			out = append(out, string(row[0]))
		}
	}
	return out, nil
}

// wantFatal checks that err is the proxy's FATAL code with a message
// containing msg.
func wantFatal(t *testing.T, what string, err error, code, msg string) {
	t.Helper()
	var pe *pgconn.PgError
	if !errors.As(err, &pe) || pe.Code != code || pe.Severity != "FATAL" || !strings.Contains(pe.Message, msg) {
		t.Fatalf("%s: %v, want FATAL %s %q", what, err, code, msg)
	}
}

// A safe shutdown: the listener closes; an idle session gets FATAL
// 57P01 at once; a session inside BEGIN keeps working until COMMIT, then
// gets it; a long statement finishes and returns its rows; Shutdown
// returns once all are gone, having cut none.
func TestShutdownWaitsForTransactions(t *testing.T) {
	ctx := context.Background()
	dsn, direct := setup(t)
	if _, err := direct.Exec(ctx, "CREATE TABLE drained (n int)"); err != nil {
		t.Fatal(err)
	}
	p, addr := startProxyConfig(t, Config{Upstream: srv.DSN(t, "postgres")}, false)
	idle := pgConnect(t, dsn, addr)
	inTx := pgConnect(t, dsn, addr)
	long := pgConnect(t, dsn, addr)
	if _, err := runSQL(ctx, inTx, "BEGIN; INSERT INTO drained VALUES (1)"); err != nil {
		t.Fatal(err)
	}
	if _, err := runSQL(ctx, idle, "SELECT 1"); err != nil {
		t.Fatal(err)
	}
	longRows := make(chan []string, 1)
	longErr := make(chan error, 1)
	go func() {
		rows, err := runSQL(ctx, long, "SELECT 42 FROM pg_sleep(1)")
		longRows <- rows
		longErr <- err
	}()
	// the statement is running upstream
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		var n int
		if err := direct.QueryRow(ctx, "SELECT count(*) FROM pg_stat_activity WHERE query = 'SELECT 42 FROM pg_sleep(1)' AND state = 'active'").Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the long statement does not run")
		}
	}
	d := p.StartShutdown()
	if d.Ended != 1 || d.Waiting != 2 {
		t.Errorf("at the start of the shutdown: %+v, want 1 ended (idle), 2 waiting", d)
	}
	done := make(chan int, 1)
	go func() { done <- p.Shutdown(ctx) }()
	if c, err := net.DialTimeout("tcp", addr, 5*time.Second); err == nil {
		c.Close()
		t.Error("a new connection after the shutdown started was accepted")
	}
	_, err := runSQL(ctx, idle, "SELECT 1")
	wantFatal(t, "idle session", err, "57P01", "terminating connection because the proxy is shutting down")
	for _, q := range []string{"INSERT INTO drained VALUES (2)", "SELECT count(*) FROM drained"} {
		if rows, err := runSQL(ctx, inTx, q); err != nil {
			t.Fatalf("inside BEGIN after the shutdown started: %s: %v", q, err)
		} else if q[0] == 'S' && (len(rows) != 1 || rows[0] != "2") {
			t.Fatalf("%s: %v, want 2", q, rows)
		}
	}
	if _, err := runSQL(ctx, inTx, "COMMIT"); err != nil {
		t.Fatalf("COMMIT after the shutdown started: %v", err)
	}
	_, err = runSQL(ctx, inTx, "SELECT 1")
	wantFatal(t, "after COMMIT", err, "57P01", "shutting down")
	if rows, err := <-longRows, <-longErr; err != nil || len(rows) != 1 || rows[0] != "42" {
		t.Fatalf("the long statement: %v, %v, want its row 42", rows, err)
	}
	_, err = runSQL(ctx, long, "SELECT 1")
	wantFatal(t, "after the long statement", err, "57P01", "shutting down")
	if cut := <-done; cut != 0 {
		t.Errorf("Shutdown cut %d sessions, want 0", cut)
	}
	var n int
	if err := direct.QueryRow(ctx, "SELECT count(*) FROM drained").Scan(&n); err != nil || n != 2 {
		t.Errorf("committed rows: %d, %v, want 2", n, err)
	}
	if s := p.Stats(); s.ShutdownIdle != 3 || s.ShutdownCut != 0 {
		t.Errorf("stats: %d ended idle, %d cut; want 3, 0", s.ShutdownIdle, s.ShutdownCut)
	}
}

// When Shutdown's context ends, the sessions still in a transaction or a
// statement are ended at once: FATAL 57P01, the statement cancelled, the
// transaction rolled back.
func TestShutdownDeadlineEndsSessions(t *testing.T) {
	ctx := context.Background()
	dsn, direct := setup(t)
	if _, err := direct.Exec(ctx, "CREATE TABLE cut (n int)"); err != nil {
		t.Fatal(err)
	}
	p, addr := startProxyConfig(t, Config{Upstream: srv.DSN(t, "postgres")}, false)
	inTx := pgConnect(t, dsn, addr)
	long := pgConnect(t, dsn, addr)
	if _, err := runSQL(ctx, inTx, "BEGIN; INSERT INTO cut VALUES (1)"); err != nil {
		t.Fatal(err)
	}
	longErr := make(chan error, 1)
	go func() {
		_, err := runSQL(ctx, long, "SELECT pg_sleep(600)")
		longErr <- err
	}()
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		var n int
		if err := direct.QueryRow(ctx, "SELECT count(*) FROM pg_stat_activity WHERE query = 'SELECT pg_sleep(600)'").Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the long statement does not run")
		}
	}
	if d := p.StartShutdown(); d.Ended != 0 || d.Waiting != 2 {
		t.Errorf("at the start: %+v, want 2 waiting", d)
	}
	sctx, cancel := context.WithCancel(ctx)
	done := make(chan int, 1)
	go func() { done <- p.Shutdown(sctx) }()
	cancel() // the second signal
	if cut := <-done; cut != 2 {
		t.Errorf("Shutdown cut %d sessions, want 2", cut)
	}
	wantFatal(t, "the long statement", <-longErr, "57P01", "without waiting")
	_, err := runSQL(ctx, inTx, "SELECT 1")
	wantFatal(t, "inside BEGIN", err, "57P01", "without waiting")
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		var n int
		if err := direct.QueryRow(ctx, "SELECT count(*) FROM pg_stat_activity WHERE query IN ('SELECT pg_sleep(600)', 'BEGIN; INSERT INTO cut VALUES (1)')").Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d backends of cut sessions still there", n)
		}
	}
	var n int
	if err := direct.QueryRow(ctx, "SELECT count(*) FROM cut").Scan(&n); err != nil || n != 0 {
		t.Errorf("rows of the cut transaction: %d, %v, want 0 (rolled back)", n, err)
	}
	if s := p.Stats(); s.ShutdownCut != 2 {
		t.Errorf("stats: %d cut, want 2", s.ShutdownCut)
	}
}

// A message over Config.MaxMessageSize gets FATAL 54000 naming the limit
// and the flag before the close (it was a bare close: "unexpected EOF"),
// also while the client is still writing a long one; a client over
// Config.MaxClients gets 53300 with the limit in its detail.
func TestLimitsAnswerWithFatal(t *testing.T) {
	ctx := context.Background()
	dsn, _ := setup(t)
	p, addr := startProxyConfig(t, Config{Upstream: srv.DSN(t, "postgres"), MaxMessageSize: 1 << 20, MaxClients: 3}, false)
	for _, size := range []int{2 << 20, 64 << 20} {
		c := pgConnect(t, dsn, addr)
		_, err := runSQL(ctx, c, "SELECT '"+strings.Repeat("x", size)+"'")
		wantFatal(t, "an oversized Query", err, "54000", "exceeds the proxy's limit of 1048576 bytes (erplab proxy --max-message-size)")
	}
	if s := p.Stats(); s.Oversized != 2 {
		t.Errorf("oversized %d, want 2", s.Oversized)
	}
	var open []*pgconn.PgConn
	for i := 0; i < 3; i++ {
		open = append(open, pgConnect(t, dsn, addr))
	}
	_, err := pgconn.Connect(ctx, strings.Replace(viaProxy(t, dsn, addr), "sslmode=prefer", "sslmode=disable", 1))
	var pe *pgconn.PgError
	if !errors.As(err, &pe) || pe.Code != "53300" || pe.Message != "sorry, too many clients already" ||
		pe.Detail != "erplab proxy serves at most 3 clients at once (--max-clients)." {
		t.Fatalf("a fourth client: %v (detail %q), want 53300 with the limit", err, detailOf(err))
	}
	_ = open
}

func detailOf(err error) string {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return pe.Detail
	}
	return ""
}

// A client sending statement after statement while the proxy shuts
// down: each one either runs and answers, or is not forwarded and gets
// the FATAL; never a statement that ran but answered with the FATAL, nor
// another error.
func TestShutdownBetweenStatements(t *testing.T) {
	ctx := context.Background()
	dsn, direct := setup(t)
	if _, err := direct.Exec(ctx, "CREATE TABLE busy (n int)"); err != nil {
		t.Fatal(err)
	}
	p, addr := startProxyConfig(t, Config{Upstream: srv.DSN(t, "postgres")}, false)
	c := pgConnect(t, dsn, addr)
	answered := 0
	var last error
	for i := 1; ; i++ {
		if i == 50 {
			go p.Shutdown(ctx)
		}
		// the extended protocol: Parse, Bind, Describe, Execute, Sync in one write
		rr := c.ExecParams(ctx, "INSERT INTO busy VALUES ($1)", [][]byte{[]byte(strconv.Itoa(i))}, nil, nil, nil).Read()
		if rr.Err != nil {
			last = rr.Err
			break
		}
		answered = i
	}
	wantFatal(t, "the statement after the shutdown started", last, "57P01", "shutting down")
	var n, maxN int
	if err := direct.QueryRow(ctx, "SELECT count(*), coalesce(max(n), 0) FROM busy").Scan(&n, &maxN); err != nil {
		t.Fatal(err)
	}
	if n != answered || maxN != answered {
		t.Errorf("%d statements answered, %d rows (max %d) in the table", answered, n, maxN)
	}
}

// A connection accepted before the shutdown that sends its startup
// packet after it gets FATAL 57P01 "the proxy is shutting down".
func TestShutdownRefusesLogins(t *testing.T) {
	ctx := context.Background()
	dsn, _ := setup(t)
	p, addr := startProxyConfig(t, Config{Upstream: srv.DSN(t, "postgres")}, false)
	pre, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer pre.Close()
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(time.Millisecond) {
		p.mu.Lock()
		n := len(p.starting)
		p.mu.Unlock()
		if n == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the connection was not accepted")
		}
	}
	if d := p.StartShutdown(); d.LoggingIn != 1 || d.Ended+d.Waiting != 0 {
		t.Errorf("at the start: %+v, want 1 logging in", d)
	}
	cfg, err := pgconn.ParseConfig(strings.Replace(viaProxy(t, dsn, addr), "sslmode=prefer", "sslmode=disable", 1))
	if err != nil {
		t.Fatal(err)
	}
	cfg.DialFunc = func(context.Context, string, string) (net.Conn, error) { return pre, nil }
	_, err = pgconn.ConnectConfig(ctx, cfg)
	wantFatal(t, "a login after the shutdown started", err, "57P01", "the proxy is shutting down")
	if cut := p.Shutdown(ctx); cut != 0 {
		t.Errorf("cut %d", cut)
	}
}
