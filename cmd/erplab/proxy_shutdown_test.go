package main

import (
	"bufio"
	"context"
	"errors"
	"net"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
)

// proxyUnderTest is an 'erplab proxy' process: where it listens, its
// standard error line by line, and its standard output.
type proxyUnderTest struct {
	cmd    *exec.Cmd
	dsn    string // the database's DSN through the proxy
	addr   string
	lines  chan string
	stdout *strings.Builder
}

// startProxyProcess starts 'erplab proxy' in front of dsn with extra
// flags and waits until it listens.
func startProxyProcess(t *testing.T, dsn string, flags ...string) *proxyUnderTest {
	t.Helper()
	cmd := erplab(t, t.TempDir(), append([]string{"proxy", "--listen", "127.0.0.1:0", "--upstream", dsn}, flags...)...)
	p := &proxyUnderTest{cmd: cmd, lines: make(chan string, 100), stdout: new(strings.Builder)}
	addr, _, sc, _ := startListening(t, cmd, p.stdout)
	t.Cleanup(func() { _ = cmd.Process.Kill() })
	go func(sc *bufio.Scanner) {
		for sc.Scan() {
			p.lines <- sc.Text()
		}
		close(p.lines)
	}(sc)
	host, port, _ := strings.Cut(addr, ":")
	p.addr, p.dsn = addr, dsn+" host="+host+" port="+port+" sslmode=disable"
	return p
}

// waitLine returns the first line of standard error containing s.
func (p *proxyUnderTest) waitLine(t *testing.T, s string) string {
	t.Helper()
	timeout := time.After(60 * time.Second)
	for {
		select {
		case l, ok := <-p.lines:
			if !ok {
				t.Fatalf("the proxy's standard error ended without %q", s)
			}
			if strings.Contains(l, s) {
				return l
			}
		case <-timeout:
			t.Fatalf("no line %q from the proxy", s)
		}
	}
}

// exit waits for the process and returns its exit code.
func (p *proxyUnderTest) exit(t *testing.T) int {
	t.Helper()
	go func() {
		for range p.lines {
		}
	}()
	err := p.cmd.Wait()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.ExitCode()
	}
	if err != nil {
		t.Fatal(err)
	}
	return 0
}

func connectVia(t *testing.T, dsn string) *pgconn.PgConn {
	t.Helper()
	c, err := pgconn.Connect(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close(context.Background()) })
	return c
}

// sql runs q on c and returns the first column of its last row.
func sql(c *pgconn.PgConn, q string) (string, error) {
	rs, err := c.Exec(context.Background(), q).ReadAll()
	if err != nil {
		return "", err
	}
	last := ""
	for _, r := range rs {
		if r.Err != nil {
			return "", r.Err
		}
		for _, row := range r.Rows {
			last = string(row[0])
		}
	}
	return last, nil
}

func wantAdminShutdown(t *testing.T, what string, err error, msg string) {
	t.Helper()
	var pe *pgconn.PgError
	if !errors.As(err, &pe) || pe.Code != "57P01" || pe.Severity != "FATAL" || !strings.Contains(pe.Message, msg) {
		t.Fatalf("%s: %v, want FATAL 57P01 %q", what, err, msg)
	}
}

// waitActive waits until the server runs statement q.
func waitActive(t *testing.T, dsn, q string) {
	t.Helper()
	pool := srv.Pool(t, dsn)
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		var n int
		if err := pool.QueryRow(context.Background(), "SELECT count(*) FROM pg_stat_activity WHERE query = $1 AND state = 'active'", q).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n > 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%q does not run", q)
		}
	}
}

// SIGINT to 'erplab proxy' is PgBouncer's safe shutdown: it stops
// listening, says how many sessions it waits for, closes an idle one at
// once with FATAL 57P01, lets one inside BEGIN work until COMMIT and a
// long query return its rows, each then getting the FATAL; a second
// SIGINT ends the session still in a transaction (FATAL) and exits 130
// after the summary.
func TestProxySIGINTWaitsForTransactions(t *testing.T) {
	dsn := srv.NewDatabase(t)
	if _, err := srv.Pool(t, dsn).Exec(context.Background(), "CREATE TABLE t (n int)"); err != nil {
		t.Fatal(err)
	}
	p := startProxyProcess(t, dsn, "--shutdown-timeout", "10m")
	idle, inTx, long, stuck := connectVia(t, p.dsn), connectVia(t, p.dsn), connectVia(t, p.dsn), connectVia(t, p.dsn)
	for c, q := range map[*pgconn.PgConn]string{idle: "SELECT 1", inTx: "BEGIN; INSERT INTO t VALUES (1)", stuck: "BEGIN; INSERT INTO t VALUES (100)"} {
		if _, err := sql(c, q); err != nil {
			t.Fatal(err)
		}
	}
	const longQuery = "SELECT 42 FROM pg_sleep(1)"
	longDone := make(chan string, 1)
	go func() {
		v, err := sql(long, longQuery)
		if err != nil {
			v = err.Error()
		}
		longDone <- v
	}()
	waitActive(t, dsn, longQuery)
	_ = p.cmd.Process.Signal(syscall.SIGINT)
	line := p.waitLine(t, "shutting down")
	if !strings.Contains(line, "SIGINT: shutting down: no new connections, 1 idle session(s) closed, waiting for 3 session(s) to finish their transaction") {
		t.Errorf("shutdown line: %s", line)
	}
	if c, err := net.DialTimeout("tcp", p.addr, 5*time.Second); err == nil {
		c.Close()
		t.Error("a new connection after SIGINT was accepted")
	}
	_, err := sql(idle, "SELECT 1")
	wantAdminShutdown(t, "the idle session", err, "shutting down")
	if v, err := sql(inTx, "INSERT INTO t VALUES (2); SELECT count(*) FROM t"); err != nil || v != "2" {
		t.Fatalf("inside BEGIN after SIGINT: %q, %v (want 2 rows seen)", v, err)
	}
	if _, err := sql(inTx, "COMMIT"); err != nil {
		t.Fatalf("COMMIT after SIGINT: %v", err)
	}
	_, err = sql(inTx, "SELECT 1")
	wantAdminShutdown(t, "after COMMIT", err, "shutting down")
	if v := <-longDone; v != "42" {
		t.Fatalf("the long query: %s, want its row 42", v)
	}
	_, err = sql(long, "SELECT 1")
	wantAdminShutdown(t, "after the long query", err, "shutting down")
	time.Sleep(100 * time.Millisecond) // not the same signal delivered twice (duplicateSignal)
	_ = p.cmd.Process.Signal(syscall.SIGINT)
	if l := p.waitLine(t, "without waiting"); !strings.Contains(l, "SIGINT: ended 1 session(s) without waiting") {
		t.Errorf("second SIGINT line: %s", l)
	}
	_, err = sql(stuck, "SELECT 1")
	wantAdminShutdown(t, "the session still in a transaction", err, "without waiting")
	if code := p.exit(t); code != 130 {
		t.Errorf("exit code %d after a second SIGINT, want 130", code)
	}
	out := p.stdout.String()
	if !strings.Contains(out, "sessions 4 ") || !strings.Contains(out, "shutdown: sessions ended between transactions 3, without waiting 1") {
		t.Errorf("summary:\n%s", out)
	}
	var n int
	if err := srv.Pool(t, dsn).QueryRow(context.Background(), "SELECT count(*) FROM t").Scan(&n); err != nil || n != 2 {
		t.Errorf("rows: %d, %v; want 2 (the committed transaction's, not the ended one's)", n, err)
	}
}

// SIGTERM shuts down the same way; --shutdown-timeout ends a session
// that stays in its transaction, and the exit is clean (0, summary).
func TestProxySIGTERMShutdownTimeout(t *testing.T) {
	dsn := srv.NewDatabase(t)
	p := startProxyProcess(t, dsn, "--shutdown-timeout", "1s")
	stuck := connectVia(t, p.dsn)
	if _, err := sql(stuck, "BEGIN"); err != nil {
		t.Fatal(err)
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	if l := p.waitLine(t, "shutting down"); !strings.Contains(l, "SIGTERM: shutting down: no new connections, 0 idle session(s) closed, waiting for 1 session(s)") {
		t.Errorf("shutdown line: %s", l)
	}
	if l := p.waitLine(t, "without waiting"); !strings.Contains(l, "--shutdown-timeout 1s reached: ended 1 session(s)") {
		t.Errorf("timeout line: %s", l)
	}
	_, err := sql(stuck, "SELECT 1")
	wantAdminShutdown(t, "the session in a transaction", err, "without waiting")
	if code := p.exit(t); code != 0 {
		t.Errorf("exit code %d, want 0", code)
	}
	if out := p.stdout.String(); !strings.Contains(out, "shutdown: sessions ended between transactions 0, without waiting 1") {
		t.Errorf("summary:\n%s", out)
	}
}

func TestProxyShutdownTimeoutFlag(t *testing.T) {
	checkUsageError(t, []string{"proxy", "--upstream", "host=/tmp", "--shutdown-timeout", "-1s"})
}

// SIGQUIT is PgBouncer's immediate shutdown: the sessions are ended at
// once (FATAL 57P01), the summary is printed, the exit is clean.
func TestProxySIGQUITEndsAtOnce(t *testing.T) {
	dsn := srv.NewDatabase(t)
	p := startProxyProcess(t, dsn)
	inTx := connectVia(t, p.dsn)
	if _, err := sql(inTx, "BEGIN"); err != nil {
		t.Fatal(err)
	}
	_ = p.cmd.Process.Signal(syscall.SIGQUIT)
	if l := p.waitLine(t, "without waiting"); !strings.Contains(l, "SIGQUIT: ended 1 session(s) without waiting") {
		t.Errorf("SIGQUIT line: %s", l)
	}
	_, err := sql(inTx, "SELECT 1")
	wantAdminShutdown(t, "the session in a transaction", err, "without waiting")
	if code := p.exit(t); code != 0 {
		t.Errorf("exit code %d, want 0", code)
	}
	if out := p.stdout.String(); !strings.Contains(out, "without waiting 1") {
		t.Errorf("summary:\n%s", out)
	}
}

// Started with SIGINT ignored (a script's background job), the proxy keeps
// it ignored, as every erplab command; its start line says so and names
// SIGTERM, which still shuts it down.
func TestProxySIGINTIgnoredNamesSIGTERM(t *testing.T) {
	dsn := srv.NewDatabase(t)
	inner := erplab(t, t.TempDir(), "proxy", "--listen", "127.0.0.1:0", "--upstream", dsn)
	// exec.Cmd cannot start a process with a signal ignored; sh's trap
	// "" can, and exec keeps it ignored.
	cmd := exec.Command("sh", append([]string{"-c", `trap "" INT; exec "$0" "$@"`}, inner.Args...)...)
	cmd.Dir, cmd.Env = inner.Dir, inner.Env
	var stdout strings.Builder
	_, line, sc, _ := startListening(t, cmd, &stdout)
	t.Cleanup(func() { _ = cmd.Process.Kill() })
	go func() {
		for sc.Scan() {
		}
	}()
	if !strings.Contains(line, "SIGINT is ignored") || !strings.Contains(line, "stop with SIGTERM") {
		t.Errorf("start line: %s", line)
	}
	_ = cmd.Process.Signal(syscall.SIGTERM)
	if err := cmd.Wait(); err != nil {
		t.Fatalf("after SIGTERM: %v", err)
	}
	if !strings.Contains(stdout.String(), "sessions 0 (connections 0)") { // the exit summary
		t.Errorf("summary:\n%s", stdout.String())
	}
}
