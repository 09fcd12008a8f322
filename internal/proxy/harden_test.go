package proxy

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"runtime"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgproto3"

	"github.com/erplab/erplab/internal/rewrite"
)

// deepStatement crashed the proxy (SIGSEGV in the C parser) before
// CheckLimits; a direct connection gets "stack depth limit exceeded".
func deepStatement() string {
	return "select 1 where 1=0 or 1 in (select 1) or 0=(" + strings.Repeat("1+", 30000) + "1)"
}

func TestDeepStatementPassesThrough(t *testing.T) {
	ctx := context.Background()
	dsn, direct := setup(t)
	p, addr := startProxy(t, false)
	other := proxiedConn(t, dsn, addr)
	conn, err := pgx.Connect(ctx, viaProxy(t, dsn, addr))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	for _, mode := range []pgx.QueryExecMode{pgx.QueryExecModeSimpleProtocol, pgx.QueryExecModeExec} {
		want := outcome(ctx, direct, deepStatement(), mode)
		got := outcome(ctx, conn, deepStatement(), mode)
		if got != want || want == "" {
			t.Errorf("%v: through the proxy %q, direct %q", mode, got, want)
		}
		t.Logf("%v: the server's answer %q", mode, want)
	}
	if s := p.Stats(); s.NotParsed == 0 || s.Rewrites != 0 {
		t.Errorf("stats: not parsed %d, rewrites %d; want the statement counted as not parsed", s.NotParsed, s.Rewrites)
	}
	if !strings.Contains(p.Stats().String(), "not parsed: too large/deep") {
		t.Errorf("summary lacks the not-parsed count:\n%s", p.Stats())
	}
	// The proxy serves on: the other session, and a new one.
	var n int
	if err := other.QueryRow(ctx, "SELECT count(*) FROM t WHERE t.a = 1 OR t.a IN (SELECT u.x FROM u)").Scan(&n); err != nil || n != 31 {
		t.Fatalf("other session: %d, %v", n, err)
	}
	fresh, err := pgx.Connect(ctx, viaProxy(t, dsn, addr))
	if err != nil {
		t.Fatalf("new session after the deep statement: %v", err)
	}
	fresh.Close(ctx)
}

// hijacked is a session logged in through dsn, idle, taken over from
// pgconn: its backend's PID and its connection.
func hijacked(t *testing.T, dsn string) (uint32, net.Conn) {
	t.Helper()
	cfg, err := pgconn.ParseConfig(dsn)
	if err != nil {
		t.Fatal(err)
	}
	return hijackedConfig(t, cfg)
}

// plainConfig is the configuration of viaProxy(dsn, addr) without TLS:
// one connection, whose first write is the startup message.
func plainConfig(t *testing.T, dsn, addr string) *pgconn.Config {
	t.Helper()
	cfg, err := pgconn.ParseConfig(viaProxy(t, dsn, addr))
	if err != nil {
		t.Fatal(err)
	}
	cfg.TLSConfig, cfg.Fallbacks = nil, nil
	return cfg
}

// hijackedConfig is hijacked for a parsed configuration. SyncConn comes
// first: when a write of the login took over 15 ms (a loaded machine),
// pgconn's slow-write timer started its background reader, and Stop
// lets the read in progress finish, so without SyncConn that goroutine
// would take the next bytes the server sends (the FATAL of
// pg_terminate_backend) away from the hijacked connection
// (TestUpstreamCloseRelayedAtOnce/tcp read "" then EOF in 1 of 200 runs
// beside two busy loops).
func hijackedConfig(t *testing.T, cfg *pgconn.Config) (uint32, net.Conn) {
	t.Helper()
	ctx := context.Background()
	pc, err := pgconn.ConnectConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	pid := pc.PID()
	if err := pc.SyncConn(ctx); err != nil {
		t.Fatal(err)
	}
	hj, err := pc.Hijack()
	if err != nil {
		t.Fatal(err)
	}
	return pid, hj.Conn
}

// bgReaderConn holds its first Write until pgconn's background reader
// has read the whole login reply (up to ReadyForQuery) and waits in a
// further Read: the state a Connect leaves when the write of its startup
// message took over pgconn's 15 ms slow-write timer. It needs a login
// without password (the startup message the only write): at an
// authentication request it lets the write go and sets asked.
type bgReaderConn struct {
	net.Conn
	mu      sync.Mutex
	writes  int
	read    []byte        // the bytes read during the first write
	done    bool          // read ends with ReadyForQuery, or asked
	asked   bool          // the server asked for a password
	waiting chan struct{} // closed when a Read begins once done
}

func (c *bgReaderConn) Read(b []byte) (int, error) {
	c.mu.Lock()
	if c.done && c.writes == 1 {
		select {
		case <-c.waiting:
		default:
			close(c.waiting)
		}
	}
	c.mu.Unlock()
	n, err := c.Conn.Read(b)
	c.mu.Lock()
	if c.writes == 1 && !c.done {
		c.read = append(c.read, b[:n]...)
		for m := c.read; len(m) >= 5; {
			size := 1 + int(binary.BigEndian.Uint32(m[1:5]))
			if size < 5 || len(m) < size {
				break
			}
			if m[0] == 'R' && size >= 9 && binary.BigEndian.Uint32(m[5:9]) != 0 {
				c.asked = true
			}
			c.done = c.asked || size == len(m) && m[0] == 'Z'
			m = m[size:]
		}
	}
	c.mu.Unlock()
	return n, err
}

func (c *bgReaderConn) Write(b []byte) (int, error) {
	n, err := c.Conn.Write(b)
	c.mu.Lock()
	c.writes++
	first := c.writes == 1
	c.mu.Unlock()
	if first && err == nil {
		<-c.waiting // pgconn's timer starts the background reader after 15 ms
	}
	return n, err
}

// hijacked hands over every byte the server sends after the login, even
// when pgconn's background reader was left in a Read by Connect (see
// hijackedConfig): without SyncConn this read "" then EOF every time.
func TestHijackedAfterBackgroundRead(t *testing.T) {
	ctx := context.Background()
	dsn, direct := setup(t)
	_, addr := startProxyConfig(t, Config{Upstream: dsn}, false) // the private socket: no password
	cfg := plainConfig(t, dsn, addr)
	var d net.Dialer
	var bc *bgReaderConn
	cfg.DialFunc = func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := d.DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		bc = &bgReaderConn{Conn: c, waiting: make(chan struct{})}
		return bc, nil
	}
	pid, conn := hijackedConfig(t, cfg)
	defer conn.Close()
	if bc.asked {
		t.Fatal("the login asked for a password: the startup message was not the only write")
	}
	if _, err := direct.Exec(ctx, "SELECT pg_terminate_backend($1)", pid); err != nil {
		t.Fatal(err)
	}
	_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	got, err := io.ReadAll(conn)
	if err != nil || !terminated(got) {
		t.Fatalf("read %d bytes %q, %v; want the server's FATAL 57P01 then EOF", len(got), got, err)
	}
}

// tcpUpstream is dsn's database on the test cluster over 127.0.0.1.
func tcpUpstream(t *testing.T, dsn string) string {
	t.Helper()
	cfg, err := pgconn.ParseConfig(dsn)
	if err != nil {
		t.Fatal(err)
	}
	c := srv.Cluster(t)
	if !c.TCP() {
		t.Skip("the test cluster does not listen on TCP")
	}
	return c.DSNAt("127.0.0.1", c.Port(), cfg.Database)
}

// upstreamVia is dsn's database on the test cluster over network:
// "unix" (dsn itself, the private socket) or "tcp" (tcpUpstream).
func upstreamVia(t *testing.T, dsn, network string) string {
	t.Helper()
	if network == "tcp" {
		return tcpUpstream(t, dsn)
	}
	return dsn
}

// terminated reports whether b, all a client read until EOF, starts with
// the FATAL 57P01 of pg_terminate_backend.
func terminated(b []byte) bool {
	return len(b) > 0 && b[0] == 'E' && bytes.Contains(b, []byte("57P01"))
}

// The server's close reaches the client at once: after
// pg_terminate_backend the client reads the FATAL and then EOF, without
// sending anything (5 of 20 tries waited about 75 s: the FIN came in
// the same readiness event as the FATAL and the relay waited for
// another).
func TestUpstreamCloseRelayedAtOnce(t *testing.T) {
	ctx := context.Background()
	dsn, direct := setup(t)
	for _, network := range []string{"unix", "tcp"} {
		t.Run(network, func(t *testing.T) {
			up := upstreamVia(t, dsn, network)
			_, addr := startProxyConfig(t, Config{Upstream: up}, false)
			var lat []time.Duration
			for i := 0; i < 20; i++ {
				pid, conn := hijacked(t, viaProxy(t, dsn, addr))
				t0 := time.Now()
				if _, err := direct.Exec(ctx, "SELECT pg_terminate_backend($1)", pid); err != nil {
					t.Fatal(err)
				}
				_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
				got, err := io.ReadAll(conn)
				lat = append(lat, time.Since(t0))
				conn.Close()
				if err != nil {
					t.Errorf("try %d: no EOF after the server's FATAL (read %d bytes %q in %v): %v", i, len(got), got, lat[i], err)
					continue
				}
				if !terminated(got) {
					t.Fatalf("try %d: read %d bytes %q then EOF in %v, want the server's FATAL 57P01", i, len(got), got, lat[i])
				}
			}
			slices.Sort(lat)
			t.Logf("%s upstream: FATAL then EOF in median %v, max %v over %d tries", network, lat[len(lat)/2], lat[len(lat)-1], len(lat))
		})
	}
}

// heldConn is an accepted client connection whose next Write, once hold
// is set, closes entered and waits until release is closed. Close closes
// closed once the connection is closed. It has no file descriptor (as
// plainConn), so the session writes the client with Write.
type heldConn struct {
	net.Conn
	hold                     atomic.Bool
	entered, release, closed chan struct{}
	closeOnce                sync.Once
}

func (c *heldConn) Write(b []byte) (int, error) {
	if c.hold.Swap(false) {
		close(c.entered)
		<-c.release
	}
	return c.Conn.Write(b)
}

func (c *heldConn) Close() error {
	err := c.Conn.Close()
	c.closeOnce.Do(func() { close(c.closed) })
	return err
}

// heldListener sends each connection it accepts, a heldConn, on conns.
type heldListener struct {
	net.Listener
	conns chan *heldConn
}

func (l heldListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	hc := &heldConn{Conn: c, entered: make(chan struct{}), release: make(chan struct{}), closed: make(chan struct{})}
	select {
	case l.conns <- hc:
	default:
	}
	return hc, nil
}

// A server's close does not lose the upstream's last bytes the relay
// still holds: here the FATAL of pg_terminate_backend, read and being
// written to the client (held there, as when the client's socket is
// full) while the backend exits. The client reads the FATAL then EOF,
// and the session counts one hang-up. (The hang-up watcher that looked
// at sockets with recv(MSG_PEEK) once closed such a session: the client
// read "" then EOF.)
func TestHangupAfterUnrelayedBytes(t *testing.T) {
	ctx := context.Background()
	dsn, direct := setup(t)
	for _, network := range []string{"unix", "tcp"} {
		t.Run(network, func(t *testing.T) {
			up := upstreamVia(t, dsn, network)
			p, err := New(Config{Upstream: up})
			if err != nil {
				t.Fatal(err)
			}
			tcp, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			ln := heldListener{tcp, make(chan *heldConn, 1)}
			serveProxy(t, p, ln)
			cfg := plainConfig(t, dsn, tcp.Addr().String())
			pid, conn := hijackedConfig(t, cfg)
			defer conn.Close()
			hc := <-ln.conns
			p.mu.Lock()
			n := len(p.sessions)
			p.mu.Unlock()
			if n != 1 {
				t.Fatalf("%d sessions, want 1", n)
			}
			hangups := p.Stats().Hangups
			hc.hold.Store(true)
			if _, err := direct.Exec(ctx, "SELECT pg_terminate_backend($1)", pid); err != nil {
				t.Fatal(err)
			}
			<-hc.entered // the relay read the FATAL and writes it
			waitGone(t, direct, pid)
			close(hc.release)
			_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
			got, err := io.ReadAll(conn)
			if err != nil || !terminated(got) {
				t.Fatalf("read %d bytes %q, %v; want the server's FATAL 57P01 then EOF", len(got), got, err)
			}
			if h := p.Stats().Hangups - hangups; h != 1 {
				t.Errorf("%d hang-ups counted, want 1", h)
			}
		})
	}
}

// An upstream restart (fast shutdown) closes every idle session of the
// proxy at once, as a direct connection would see (pgbench -P through
// the proxy exited 75 s after one).
func TestUpstreamRestartRelayedAtOnce(t *testing.T) {
	ctx := context.Background()
	dsn, _ := setup(t)
	_, addr := startProxyConfig(t, Config{Upstream: tcpUpstream(t, dsn)}, false)
	const clients = 10
	type result struct {
		at   time.Time // when the client saw EOF
		data []byte
		err  error
	}
	results := make(chan result, clients)
	for i := 0; i < clients; i++ {
		_, conn := hijacked(t, viaProxy(t, dsn, addr))
		go func() {
			defer conn.Close()
			_ = conn.SetReadDeadline(time.Now().Add(60 * time.Second))
			b, err := io.ReadAll(conn)
			results <- result{time.Now(), b, err}
		}()
	}
	t0 := time.Now()
	if err := srv.Cluster(t).Restart(ctx); err != nil {
		t.Fatal(err)
	}
	restarted := time.Since(t0)
	var worst time.Duration
	for i := 0; i < clients; i++ {
		r := <-results
		if r.err != nil || !bytes.Contains(r.data, []byte("57P01")) {
			t.Errorf("client %d: read %q, %v; want the FATAL 57P01 then EOF", i, r.data, r.err)
		}
		worst = max(worst, r.at.Sub(t0))
	}
	t.Logf("restart took %v; the last of %d clients saw EOF %v after it began", restarted, clients, worst)
	if worst > restarted+10*time.Second {
		t.Errorf("EOF %v after the restart began (it took %v)", worst, restarted)
	}
}

// startupPacket is a protocol startup message of version major.minor.
func startupPacket(major, minor uint16, params ...string) []byte {
	b := []byte{0, 0, 0, 0, byte(major >> 8), byte(major), byte(minor >> 8), byte(minor)}
	for _, p := range params {
		b = append(append(b, p...), 0)
	}
	b = append(b, 0)
	binary.BigEndian.PutUint32(b, uint32(len(b)))
	return b
}

// readUntilAuthRequest reads upstream messages relayed by the proxy until
// an authentication request other than AuthenticationOk, and returns its
// code.
func readUntilAuthRequest(t *testing.T, c net.Conn) uint32 {
	t.Helper()
	fe := pgproto3.NewFrontend(c, c)
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	for {
		m, err := fe.Receive()
		if err != nil {
			t.Fatalf("waiting for an authentication request: %v", err)
		}
		switch m := m.(type) {
		case *pgproto3.AuthenticationSASL:
			return authSASL
		case *pgproto3.AuthenticationMD5Password:
			return authMD5Password
		case *pgproto3.AuthenticationCleartextPassword:
			return authCleartextPassword
		case *pgproto3.ErrorResponse:
			t.Fatalf("error before an authentication request: %s %s", m.Code, m.Message)
		}
	}
}

func dbName(t *testing.T, dsn string) string {
	t.Helper()
	cfg, err := pgconn.ParseConfig(dsn)
	if err != nil {
		t.Fatal(err)
	}
	return cfg.Database
}

func (p *Proxy) hasSide(db string) bool {
	p.catMu.Lock()
	defer p.catMu.Unlock()
	for k := range p.sides {
		if k.db == db {
			return true
		}
	}
	return false
}

// A client that has not authenticated makes the proxy connect nowhere: a
// startup packet naming database X opened side connections to X with the
// proxy's own credentials before.
func TestNoSideConnectionBeforeAuthentication(t *testing.T) {
	ctx := context.Background()
	dsn, direct := setup(t)
	victimDSN := srv.NewDatabase(t)
	victim := dbName(t, victimDSN)
	p, addr := startProxyConfig(t, Config{Upstream: tcpUpstream(t, dsn)}, false)
	// A wrong password, then a client that never answers the request.
	wrong := strings.Replace(viaProxy(t, victimDSN, addr), "passfile=", "password=wrong passfile=/nonexistent/", 1)
	if _, err := pgconn.Connect(ctx, wrong); sqlstate(err) != "ERROR 28P01" {
		t.Fatalf("wrong password: %v, want 28P01", err)
	}
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Write(startupPacket(3, 0, "user", "postgres", "database", victim)); err != nil {
		t.Fatal(err)
	}
	if code := readUntilAuthRequest(t, c); code != authSASL {
		t.Fatalf("authentication request %d, want SASL", code)
	}
	for i := 0; i < 10; i++ { // a second: the side connection started at once before
		var n int
		if err := direct.QueryRow(ctx, "SELECT count(*) FROM pg_stat_activity WHERE datname = $1", victim).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n != 0 || p.hasSide(victim) {
			t.Fatalf("%d backends in database %s (side entry %v) for a client that did not authenticate", n, victim, p.hasSide(victim))
		}
		time.Sleep(100 * time.Millisecond)
	}
	// An authenticated client of that database gets its side connection.
	conn, err := pgx.Connect(ctx, viaProxy(t, victimDSN, addr))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	deadline := time.Now().Add(10 * time.Second)
	for !p.hasSide(victim) && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if !p.hasSide(victim) {
		t.Fatal("no side connection for an authenticated client's database")
	}
}

// memory is the process's resident set and Go heap, in bytes, after a GC.
func memory(t *testing.T) (rss, heap uint64) {
	t.Helper()
	runtime.GC()
	debug.FreeOSMemory()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if f := strings.Fields(l); len(f) >= 2 && f[0] == "VmRSS:" {
			kb, _ := strconv.ParseUint(f[1], 10, 64)
			rss = kb << 10
		}
	}
	return rss, ms.HeapInuse
}

// floodMessage announces a message of typ of announced bytes after the
// setup the caller did on c and writes up to send bytes of it; it returns
// the bytes written before the proxy's close stopped it.
func floodMessage(c net.Conn, typ byte, announced uint32, send int) int {
	hdr := []byte{typ, 0, 0, 0, 0}
	binary.BigEndian.PutUint32(hdr[1:], announced)
	if _, err := c.Write(hdr); err != nil {
		return 0
	}
	chunk := make([]byte, 1<<20)
	sent := 0
	_ = c.SetWriteDeadline(time.Now().Add(30 * time.Second))
	for sent < send {
		n, err := c.Write(chunk)
		sent += n
		if err != nil {
			break
		}
	}
	return sent
}

// A client announcing a 1 GiB password message is disconnected at once;
// the proxy's memory does not grow (it grew 300 MB per client before).
func TestOversizedMessagesDisconnect(t *testing.T) {
	ctx := context.Background()
	dsn, _ := setup(t)
	p, addr := startProxyConfig(t, Config{Upstream: tcpUpstream(t, dsn), MaxMessageSize: 1 << 20}, false)
	rss0, heap0 := memory(t)
	const clients = 4
	sent := make(chan int, clients)
	for i := 0; i < clients; i++ {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if _, err := c.Write(startupPacket(3, 0, "user", "postgres", "database", dbName(t, dsn))); err != nil {
			t.Fatal(err)
		}
		if code := readUntilAuthRequest(t, c); code != authSASL {
			t.Fatalf("authentication request %d, want SASL", code)
		}
		go func() { sent <- floodMessage(c, 'p', 1<<30, 256<<20) }()
	}
	total := 0
	for i := 0; i < clients; i++ {
		total += <-sent
	}
	rss1, heap1 := memory(t)
	t.Logf("4 clients announcing 1 GiB password messages: %d MiB written before the proxy closed them; proxy RSS %d -> %d MiB, Go heap in use %d -> %d MiB",
		total>>20, rss0>>20, rss1>>20, heap0>>20, heap1>>20)
	if total >= clients*(256<<20) {
		t.Errorf("the proxy read all %d MiB of the announced messages", total>>20)
	}
	if heap1 > heap0+32<<20 {
		t.Errorf("Go heap grew from %d to %d MiB", heap0>>20, heap1>>20)
	}
	if s := p.Stats(); s.Oversized < clients {
		t.Errorf("oversized %d, want %d", s.Oversized, clients)
	}
	// After authentication: Config.MaxMessageSize (1 MiB here).
	_, hc := hijacked(t, viaProxy(t, dsn, addr))
	defer hc.Close()
	floodMessage(hc, 'Q', 512<<20, 64<<20)
	_ = hc.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.ReadAll(hc); err != nil && !errors.Is(err, syscall.ECONNRESET) {
		t.Fatalf("a 512 MiB Query over a 1 MiB limit: no close: %v", err)
	}
	var n int
	conn := proxiedConn(t, dsn, addr)
	if err := conn.QueryRow(ctx, "SELECT length($1::text)", strings.Repeat("x", 900<<10)).Scan(&n); err != nil || n != 900<<10 {
		t.Fatalf("a 900 KiB parameter under the 1 MiB limit: %d, %v", n, err)
	}
}

// Over Config.MaxClients a client gets PostgreSQL's "too many clients".
func TestMaxClients(t *testing.T) {
	ctx := context.Background()
	dsn, _ := setup(t)
	p, addr := startProxyConfig(t, Config{Upstream: srv.DSN(t, "postgres"), MaxClients: 2}, false)
	// sslmode=disable: with prefer, pgconn drops the connection the
	// proxy refused TLS on and opens another, while the first may still
	// count.
	viaProxy := func(t *testing.T, dsn, addr string) string {
		return strings.Replace(viaProxy(t, dsn, addr), "sslmode=prefer", "sslmode=disable", 1)
	}
	var open []*pgconn.PgConn
	for i := 0; i < 2; i++ {
		c, err := pgconn.Connect(ctx, viaProxy(t, dsn, addr))
		if err != nil {
			t.Fatal(err)
		}
		open = append(open, c)
	}
	_, err := pgconn.Connect(ctx, viaProxy(t, dsn, addr))
	var pe *pgconn.PgError
	if !errors.As(err, &pe) || pe.Code != "53300" || pe.Message != "sorry, too many clients already" {
		t.Fatalf("third client: %v, want 53300 too many clients", err)
	}
	// A client that asks for TLS first (libpq's and pgconn's sslmode=prefer,
	// psql's default) is told "no TLS" and then gets the FATAL, as from
	// PostgreSQL: before, the FATAL answered the SSLRequest and libpq
	// printed "server sent an error response during SSL exchange".
	prefer := strings.Replace(viaProxy(t, dsn, addr), "sslmode=disable", "sslmode=prefer", 1)
	_, err = pgconn.Connect(ctx, prefer)
	if !errors.As(err, &pe) || pe.Code != "53300" {
		t.Fatalf("third client asking for TLS first: %v, want 53300 too many clients", err)
	}
	if psql, err := exec.LookPath("psql"); err == nil { // libpq itself, sslmode=prefer
		out, _ := exec.CommandContext(ctx, psql, "-X", "-c", "select 1", prefer).CombinedOutput()
		if !strings.Contains(string(out), "sorry, too many clients already") {
			t.Fatalf("psql (sslmode=prefer) through a full proxy: %s, want the FATAL", out)
		}
	}
	if p.Stats().TooManyClients == 0 {
		t.Error("not counted")
	}
	open[0].Close(ctx)
	deadline := time.Now().Add(10 * time.Second)
	for {
		c, err := pgconn.Connect(ctx, viaProxy(t, dsn, addr))
		if err == nil {
			c.Close(ctx)
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after one client left: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	open[1].Close(ctx)
}

// A startup packet of a protocol the proxy does not take gets the
// server's own answer (the proxy closed silently before); a newer 3.x
// minor version is negotiated by the server.
func TestUnsupportedProtocolVersion(t *testing.T) {
	dsn, _ := setup(t)
	_, addr := startProxy(t, false)
	for _, v := range [][2]uint16{{4, 0}, {2, 0}, {3, 9}} {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.Write(startupPacket(v[0], v[1], "user", "postgres", "database", dbName(t, dsn))); err != nil {
			t.Fatal(err)
		}
		_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
		if v[0] != 3 {
			b, err := io.ReadAll(c)
			want := fmt.Sprintf("unsupported frontend protocol %d.%d", v[0], v[1])
			if err != nil || !bytes.Contains(b, []byte(want)) {
				t.Errorf("protocol %d.%d: read %q, %v; want the server's %q", v[0], v[1], b, err, want)
			}
		} else {
			fe := pgproto3.NewFrontend(c, c)
			m, err := fe.Receive()
			if _, ok := m.(*pgproto3.NegotiateProtocolVersion); !ok || err != nil {
				t.Errorf("protocol 3.9: first message %T, %v; want NegotiateProtocolVersion", m, err)
			}
			for err == nil {
				if _, ok := m.(*pgproto3.ReadyForQuery); ok {
					break
				}
				m, err = fe.Receive()
			}
			if err != nil {
				t.Errorf("protocol 3.9: %v before ReadyForQuery", err)
			}
		}
		c.Close()
	}
}

// syncWriter is a log destination safe for the proxy's goroutines.
type syncWriter struct {
	mu sync.Mutex
	b  strings.Builder
}

func (w *syncWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}

func (w *syncWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.String()
}

// A statement of more tokens than Config.MaxParseTokens (by default
// DefaultMaxParseTokens) is relayed unparsed, counted, and logged once;
// one under it is still decided (rewritten here).
func TestParseWorkBound(t *testing.T) {
	ctx := context.Background()
	dsn, direct := setup(t)
	var logs syncWriter
	p, addr := startProxyConfig(t, Config{Upstream: srv.DSN(t, "postgres"),
		Logger: slog.New(slog.NewTextHandler(&logs, nil))}, false)
	conn := proxiedConn(t, dsn, addr)
	// arms ORs of the rewritable shape: 9 tokens per arm.
	arms := func(n int, tag string) string {
		return "SELECT count(*) FROM t WHERE t.a = 1 OR " + strings.Repeat("t.a IN (SELECT u.x FROM u) OR ", n) + "t.a = 2 -- " + tag
	}
	// Over the bound, ORs the server plans away (7 tokens per arm).
	over := func(tag string) string {
		return "SELECT count(*) WHERE false AND (" + strings.Repeat("1 IN (SELECT 1) OR ", DefaultMaxParseTokens/7+100) + "true) -- " + tag
	}
	for _, tag := range []string{"first", "second"} {
		q := over(tag)
		if err := rewrite.CheckWork(q, DefaultMaxParseTokens); err == nil {
			t.Fatalf("%d bytes are within %d tokens", len(q), DefaultMaxParseTokens)
		}
		want := outcome(ctx, direct, q, pgx.QueryExecModeSimpleProtocol)
		got := outcome(ctx, conn, q, pgx.QueryExecModeSimpleProtocol)
		if got != want || want == "" {
			t.Fatalf("%s: through the proxy %q, direct %q", tag, got, want)
		}
	}
	s := p.Stats()
	if s.NotParsedTokens != 2 || s.Parses != 0 || s.Rewrites != 0 || s.NotParsed != 0 {
		t.Fatalf("stats: not parsed (tokens) %d, parses %d, rewrites %d, not parsed (size/depth) %d; want 2, 0, 0, 0",
			s.NotParsedTokens, s.Parses, s.Rewrites, s.NotParsed)
	}
	if n := strings.Count(logs.String(), "more tokens than"); n != 1 {
		t.Fatalf("logged %d times, want once:\n%s", n, logs.String())
	}
	if !strings.Contains(s.String(), "too many tokens 2)") {
		t.Fatalf("summary lacks the count:\n%s", s)
	}
	q := arms(100, "under")
	want := outcome(ctx, direct, q, pgx.QueryExecModeSimpleProtocol)
	if got := outcome(ctx, conn, q, pgx.QueryExecModeSimpleProtocol); got != want {
		t.Fatalf("under the bound: through the proxy %q, direct %q", got, want)
	}
	if s := p.Stats(); s.Parses != 1 || s.Rewrites != 1 || s.NotParsedTokens != 2 {
		t.Fatalf("under the bound: parses %d, rewrites %d, not parsed %d; want 1, 1, 2", s.Parses, s.Rewrites, s.NotParsedTokens)
	}
}
