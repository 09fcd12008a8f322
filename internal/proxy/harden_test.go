package proxy

import (
	"bytes"
	"context"
	"io"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
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
	other, err := pgx.Connect(ctx, viaProxy(t, dsn, addr))
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close(ctx)
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
			up := dsn
			if network == "tcp" {
				up = tcpUpstream(t, dsn)
			}
			_, addr := startProxyConfig(t, Config{Upstream: up}, false)
			var lat []time.Duration
			for i := 0; i < 20; i++ {
				pc, err := pgconn.Connect(ctx, viaProxy(t, dsn, addr))
				if err != nil {
					t.Fatal(err)
				}
				pid := pc.PID()
				hj, err := pc.Hijack()
				if err != nil {
					t.Fatal(err)
				}
				t0 := time.Now()
				if _, err := direct.Exec(ctx, "SELECT pg_terminate_backend($1)", pid); err != nil {
					t.Fatal(err)
				}
				_ = hj.Conn.SetReadDeadline(time.Now().Add(10 * time.Second))
				got, err := io.ReadAll(hj.Conn)
				lat = append(lat, time.Since(t0))
				hj.Conn.Close()
				if err != nil {
					t.Errorf("try %d: no EOF after the server's FATAL (%d bytes read): %v", i, len(got), err)
					continue
				}
				if len(got) == 0 || got[0] != 'E' || !bytes.Contains(got, []byte("57P01")) {
					t.Fatalf("try %d: read %q, want the server's FATAL 57P01", i, got)
				}
			}
			slices.Sort(lat)
			t.Logf("%s upstream: FATAL then EOF in median %v, max %v over %d tries", network, lat[len(lat)/2], lat[len(lat)-1], len(lat))
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
		after time.Duration
		data  []byte
		err   error
	}
	results := make(chan result, clients)
	t0 := time.Now()
	for i := 0; i < clients; i++ {
		pc, err := pgconn.Connect(ctx, viaProxy(t, dsn, addr))
		if err != nil {
			t.Fatal(err)
		}
		hj, err := pc.Hijack()
		if err != nil {
			t.Fatal(err)
		}
		go func() {
			defer hj.Conn.Close()
			_ = hj.Conn.SetReadDeadline(time.Now().Add(60 * time.Second))
			b, err := io.ReadAll(hj.Conn)
			results <- result{time.Since(t0), b, err}
		}()
	}
	t0 = time.Now()
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
		worst = max(worst, r.after)
	}
	t.Logf("restart took %v; the last of %d clients saw EOF %v after it began", restarted, clients, worst)
	if worst > restarted+10*time.Second {
		t.Errorf("EOF %v after the restart began (it took %v)", worst, restarted)
	}
}
