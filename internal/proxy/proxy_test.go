package proxy

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/erplab/erplab/internal/pgtest"
)

var srv *pgtest.Server

func TestMain(m *testing.M) { os.Exit(pgtest.Run(m, &srv)) }

// startProxy runs a proxy in front of the test cluster for the test.
func startProxy(t testing.TB, shadow bool) (*Proxy, string) {
	t.Helper()
	return startProxyPlain(t, shadow, false)
}

// plainConn hides the connection's file descriptor (syscall.Conn), as a
// TLS connection or a wrapper would: the relay then uses Read and Write.
type plainConn struct{ net.Conn }

type plainListener struct{ net.Listener }

func (l plainListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return plainConn{c}, nil
}

// startProxyPlain is startProxy; with plain, both sides of every session
// are plainConns.
func startProxyPlain(t testing.TB, shadow, plain bool) (*Proxy, string) {
	t.Helper()
	return startProxyConfig(t, Config{Upstream: srv.DSN(t, "postgres"), Shadow: shadow}, plain)
}

// startProxyConfig is startProxyPlain with a Config of the test's.
func startProxyConfig(t testing.TB, cfg Config, plain bool) (*Proxy, string) {
	t.Helper()
	p, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	var ln net.Listener
	ln, err = net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	if plain {
		ln = plainListener{ln}
		p.wrapUp = func(c net.Conn) net.Conn { return plainConn{c} }
	}
	serveProxy(t, p, ln)
	return p, ln.Addr().String()
}

// serveProxy warms p up and serves ln until the test ends.
func serveProxy(t testing.TB, p *Proxy, ln net.Listener) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	// As erplab proxy does: the side connection is ready before clients
	// come (and its warm-up does not run beside a measurement).
	if err := p.Warm(ctx); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- p.Serve(ctx, ln) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("serve: %v", err)
		}
	})
}

// viaProxy is dsn (the test cluster's, a key=value DSN) redirected to the
// proxy at addr, with libpq's default sslmode=prefer.
// proxiedConn is a pgx connection to dsn's database through the proxy at
// addr, closed when the test ends (before the proxy stops).
func proxiedConn(t testing.TB, dsn, addr string) *pgx.Conn {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, viaProxy(t, dsn, addr))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(ctx) })
	return conn
}

func viaProxy(t testing.TB, dsn, addr string) string {
	t.Helper()
	host, port, _ := net.SplitHostPort(addr)
	var kept []string
	for _, kv := range strings.Fields(dsn) {
		if strings.HasPrefix(kv, "host=") || strings.HasPrefix(kv, "port=") || strings.HasPrefix(kv, "sslmode=") {
			continue
		}
		kept = append(kept, kv)
	}
	return strings.Join(append(kept, "host="+host, "port="+port, "sslmode=prefer"), " ")
}

const schema = `
CREATE TABLE t (a int, b int, c text);
CREATE INDEX t_a ON t (a);
CREATE TABLE u (x int, y int);
CREATE TABLE e (x int);
INSERT INTO t SELECT g % 500, g % 7, 'row ' || g FROM generate_series(1, 5000) g;
INSERT INTO t VALUES (NULL, 1, 'null a'), (NULL, 2, 'null a 2'), (3, NULL, 'dup 3');
INSERT INTO u VALUES (1, 1), (2, NULL), (NULL, 3), (2, 2), (3, 3), (3, 3);
ANALYZE t; ANALYZE u; ANALYZE e;`

func setup(t *testing.T) (dsn string, direct *pgxpool.Pool) {
	t.Helper()
	dsn = srv.NewDatabase(t)
	direct = srv.Pool(t, dsn)
	if _, err := direct.Exec(context.Background(), schema); err != nil {
		t.Fatal(err)
	}
	return dsn, direct
}

// diffQueries have NULLs, empty subqueries and duplicates on both sides.
var diffQueries = []struct {
	sql      string
	args     []any
	rewrites bool
}{
	{"SELECT t.a, t.b, t.c FROM t WHERE t.a = $1 OR t.a IN (SELECT u.x FROM u)", []any{10}, true},
	{"SELECT t.a, t.c FROM t WHERE t.a IN (SELECT u.x FROM u) OR t.a IN (SELECT u.y FROM u)", nil, true},
	{"SELECT t.a, t.c FROM t WHERE t.a = 4 OR t.a IN (SELECT e.x FROM e)", nil, true},
	{"SELECT t.a, (t.a = 1 OR t.a IN (SELECT u.y FROM u)) AS m FROM t WHERE t.b = 1", nil, true},
	{"SELECT count(*) FROM t WHERE t.a = $1 OR t.a = ANY (SELECT u.x FROM u WHERE u.y > $2)", []any{499, 1}, true},
	{"SELECT t.c FROM t WHERE t.a IS NULL OR t.a IN (SELECT u.x FROM u)", nil, false},
	{"SELECT t.c FROM t WHERE t.a NOT IN (SELECT u.x FROM u WHERE u.x IS NOT NULL) OR t.a = 1", nil, false},
	{"SELECT t.c FROM t WHERE t.a = 2 OR t.a IN (SELECT u.x FROM u WHERE u.y = t.b)", nil, false},
	{"SELECT t.a, count(*) FROM t WHERE t.a IN (1, 2) OR t.a IN (SELECT u.x FROM u) GROUP BY t.a", nil, true},
}

func rows(t *testing.T, ctx context.Context, q interface {
	Query(context.Context, string, ...any) (pgx.Rows, error)
}, sql string, args ...any) []string {
	t.Helper()
	r, err := q.Query(ctx, sql, args...)
	if err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	var out []string
	for r.Next() {
		v, err := r.Values()
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, fmt.Sprint(v...))
	}
	if err := r.Err(); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	slices.Sort(out)
	return out
}

func TestDifferential(t *testing.T) {
	ctx := context.Background()
	dsn, direct := setup(t)
	p, addr := startProxy(t, false)
	for _, mode := range []pgx.QueryExecMode{pgx.QueryExecModeCacheStatement, pgx.QueryExecModeExec, pgx.QueryExecModeSimpleProtocol} {
		t.Run(mode.String(), func(t *testing.T) {
			cfg, err := pgx.ParseConfig(viaProxy(t, dsn, addr))
			if err != nil {
				t.Fatal(err)
			}
			cfg.DefaultQueryExecMode = mode
			conn, err := pgx.ConnectConfig(ctx, cfg)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close(ctx)
			for _, q := range diffQueries {
				before := p.Stats().Rewrites
				want := rows(t, ctx, direct, q.sql, q.args...)
				got := rows(t, ctx, conn, q.sql, q.args...)
				if !slices.Equal(got, want) {
					t.Errorf("%s: through the proxy %d rows %v, direct %d rows %v", q.sql, len(got), got, len(want), want)
				}
				if rewrote := p.Stats().Rewrites > before; rewrote != q.rewrites {
					t.Errorf("%s: rewritten=%v, want %v", q.sql, rewrote, q.rewrites)
				}
			}
		})
	}
	if s := p.Stats(); s.Fallbacks != 0 || s.CacheHits == 0 || s.Fired[RuleName()] == 0 {
		t.Errorf("stats %+v", s)
	}
}

// RuleName is the rule the tests expect to fire.
func RuleName() string { return "or_any_array" }

func TestProtocol(t *testing.T) {
	ctx := context.Background()
	dsn, direct := setup(t)
	p, addr := startProxy(t, false)
	conn := proxiedConn(t, dsn, addr)

	t.Run("simple multi-statement", func(t *testing.T) {
		res, err := conn.PgConn().Exec(ctx, "SELECT 1; SELECT count(*) FROM t WHERE t.a = 1 OR t.a IN (SELECT u.x FROM u); SELECT 'x'").ReadAll()
		if err != nil {
			t.Fatal(err)
		}
		if len(res) != 3 || string(res[1].Rows[0][0]) != "31" || string(res[2].Rows[0][0]) != "x" {
			t.Fatalf("results %+v", res)
		}
	})
	t.Run("prepared named statement and portals", func(t *testing.T) {
		if _, err := conn.Prepare(ctx, "byA", "SELECT count(*) FROM t WHERE t.a = $1 OR t.a IN (SELECT u.x FROM u)"); err != nil {
			t.Fatal(err)
		}
		for _, a := range []int{1, 100, 1000} {
			var got, want int
			if err := conn.QueryRow(ctx, "byA", a).Scan(&got); err != nil {
				t.Fatal(err)
			}
			if err := direct.QueryRow(ctx, "SELECT count(*) FROM t WHERE t.a = $1 OR t.a IN (SELECT u.x FROM u)", a).Scan(&want); err != nil {
				t.Fatal(err)
			}
			if got != want {
				t.Fatalf("a=%d: %d via proxy, %d direct", a, got, want)
			}
		}
	})
	t.Run("batch pipeline", func(t *testing.T) {
		b := &pgx.Batch{}
		for i := 0; i < 20; i++ {
			b.Queue("SELECT count(*) FROM t WHERE t.a = $1 OR t.a IN (SELECT u.y FROM u)", i)
			b.Queue("SELECT $1::int", i)
		}
		br := conn.SendBatch(ctx, b)
		for i := 0; i < 20; i++ {
			var n, echo int
			if err := br.QueryRow().Scan(&n); err != nil {
				t.Fatal(err)
			}
			if err := br.QueryRow().Scan(&echo); err != nil || echo != i {
				t.Fatalf("echo %d, want %d (%v): reordered?", echo, i, err)
			}
		}
		if err := br.Close(); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("copy from and to", func(t *testing.T) {
		n, err := conn.CopyFrom(ctx, pgx.Identifier{"e"}, []string{"x"}, pgx.CopyFromSlice(1000, func(i int) ([]any, error) { return []any{i}, nil }))
		if err != nil || n != 1000 {
			t.Fatalf("copy from: %d, %v", n, err)
		}
		var sb strings.Builder
		tag, err := conn.PgConn().CopyTo(ctx, &sb, "COPY (SELECT x FROM e ORDER BY x) TO STDOUT")
		if err != nil || tag.RowsAffected() != 1000 || !strings.HasPrefix(sb.String(), "0\n1\n2\n") {
			t.Fatalf("copy to: %v %v %.20q", tag, err, sb.String())
		}
		if _, err := conn.Exec(ctx, "TRUNCATE e"); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("error and recovery", func(t *testing.T) {
		_, err := conn.Exec(ctx, "SELECT 1/0")
		var pe *pgconn.PgError
		if !errors.As(err, &pe) || pe.Code != "22012" {
			t.Fatalf("want division_by_zero, got %v", err)
		}
		var one int
		if err := conn.QueryRow(ctx, "SELECT 1").Scan(&one); err != nil || one != 1 {
			t.Fatalf("after error: %d %v", one, err)
		}
	})
	t.Run("cancel pg_sleep", func(t *testing.T) {
		before := p.Stats().Cancels
		if _, err := conn.Exec(ctx, "SET application_name = 'to-cancel'"); err != nil {
			t.Fatal(err)
		}
		errc := make(chan error, 1)
		go func() { _, err := conn.Exec(ctx, "SELECT pg_sleep(30)"); errc <- err }()
		waitFor(t, direct, "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'to-cancel' AND state = 'active'", 1)
		if err := conn.PgConn().CancelRequest(ctx); err != nil {
			t.Fatal(err)
		}
		err := <-errc
		var pe *pgconn.PgError
		if !errors.As(err, &pe) || pe.Code != "57014" {
			t.Fatalf("want query_canceled (57014), got %v", err)
		}
		if p.Stats().Cancels != before+1 {
			t.Fatalf("cancels forwarded %d, want %d", p.Stats().Cancels, before+1)
		}
	})
	t.Run("parameter status", func(t *testing.T) {
		if _, err := conn.Exec(ctx, "SET application_name = 'via-proxy'"); err != nil {
			t.Fatal(err)
		}
		if got := conn.PgConn().ParameterStatus("application_name"); got != "via-proxy" {
			t.Fatalf("application_name %q", got)
		}
	})
	if s := p.Stats(); s.Rewrites == 0 || s.Sessions == 0 {
		t.Errorf("stats %+v", s)
	}
}

// Messages larger than the relay buffer (32 KiB) in both directions, and
// results spanning many reads, pass byte for byte, over sockets and over
// connections without a file descriptor.
func TestLargeMessages(t *testing.T) {
	ctx := context.Background()
	dsn, _ := setup(t)
	big := strings.Repeat("0123456789abcdef", 200_000) // 3.2 MB
	for _, plain := range []bool{false, true} {
		t.Run(fmt.Sprintf("plain=%v", plain), func(t *testing.T) {
			p, addr := startProxyPlain(t, false, plain)
			conn, err := pgx.Connect(ctx, viaProxy(t, dsn, addr))
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close(ctx)
			for _, mode := range []pgx.QueryExecMode{pgx.QueryExecModeCacheStatement, pgx.QueryExecModeSimpleProtocol} {
				var got string
				if err := conn.QueryRow(ctx, "SELECT $1::text || 'z'", mode, big).Scan(&got); err != nil {
					t.Fatalf("%v: %v", mode, err)
				}
				if got != big+"z" {
					t.Fatalf("%v: %d bytes back, want %d", mode, len(got), len(big)+1)
				}
			}
			var rows, chars int
			r, err := conn.Query(ctx, "SELECT g, repeat('x', g % 300) FROM generate_series(1, 20000) g")
			if err != nil {
				t.Fatal(err)
			}
			for r.Next() {
				var g int
				var s string
				if err := r.Scan(&g, &s); err != nil {
					t.Fatal(err)
				}
				rows++
				if len(s) != g%300 {
					t.Fatalf("row %d: %d bytes", g, len(s))
				}
				chars += len(s)
			}
			if err := r.Err(); err != nil {
				t.Fatal(err)
			}
			if rows != 20000 || chars != 2980200 {
				t.Fatalf("%d rows, %d bytes", rows, chars)
			}
			var n int
			if err := conn.QueryRow(ctx, "SELECT count(*) FROM t WHERE t.a = 1 OR t.a IN (SELECT u.x FROM u)").Scan(&n); err != nil || n != 31 {
				t.Fatalf("rewritten query: %d, %v", n, err)
			}
			if p.Stats().Rewrites == 0 {
				t.Fatal("not rewritten")
			}
		})
	}
}

// TestFallback exercises the last line of defence: a session whose
// objects differ from what the side connection validated, in a way the
// proxy cannot see. Here a function the session calls creates temporary
// tables that hide the public ones the decisions were made with (the
// proxy sees "INSERT INTO mk_on", whose trigger runs mk(): no DDL, no call), so the cached rewrite reaches a
// server that rejects it.
func TestFallback(t *testing.T) {
	ctx := context.Background()
	dsn, direct := setup(t)
	if _, err := direct.Exec(ctx, `CREATE TABLE arrs (v int, w int); INSERT INTO arrs VALUES (3, 1);
CREATE FUNCTION mk() RETURNS void LANGUAGE plpgsql AS $$
BEGIN
  CREATE TEMP TABLE t (a int[]); INSERT INTO t VALUES ('{1}'), ('{3}'), ('{5}'), (NULL);
  CREATE TEMP TABLE arrs (v int[], w int[]); INSERT INTO arrs VALUES ('{3}', '{1}'), ('{3}', NULL), (NULL, NULL);
END $$;
CREATE FUNCTION mk_trg() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN PERFORM mk(); RETURN NEW; END $$;
CREATE TABLE mk_on (x int); CREATE TRIGGER mk_on_ins BEFORE INSERT ON mk_on FOR EACH ROW EXECUTE FUNCTION mk_trg()`); err != nil {
		t.Fatal(err)
	}
	p, addr := startProxy(t, false)
	conn := proxiedConn(t, dsn, addr)
	// The session's temporary t (an int[] column) hides public.t (int,
	// indexed): ARRAY(SELECT int[]) is a 2-D int array, so "int[] = ANY
	// (int[][])" has no operator. The upstream rejects the rewrite; the
	// original runs.
	const base = "SELECT count(*) FROM t WHERE t.a IN (SELECT arrs.v FROM arrs) OR t.a IN (SELECT arrs.w FROM arrs)"
	modes := []pgx.QueryExecMode{pgx.QueryExecModeSimpleProtocol, pgx.QueryExecModeExec, pgx.QueryExecModeCacheStatement}
	query := func(mode pgx.QueryExecMode) string { return fmt.Sprintf("%s -- %d", base, mode) }
	flushed, inTx := base+" -- flushed", base+" -- in a transaction"
	// Decided, validated and used on the public tables first.
	for _, q := range []string{query(modes[0]), query(modes[1]), query(modes[2]), flushed, inTx} {
		before := p.Stats().Rewrites
		var n int
		if err := conn.QueryRow(ctx, q, pgx.QueryExecModeExec).Scan(&n); err != nil || n != 21 {
			t.Fatalf("%s on the public tables: %d, %v", q, n, err)
		}
		if p.Stats().Rewrites != before+1 {
			t.Fatalf("%s: not rewritten (%+v)", q, p.Stats())
		}
	}
	if _, err := conn.Exec(ctx, "INSERT INTO mk_on VALUES (1)"); err != nil {
		t.Fatal(err)
	}
	for _, mode := range modes {
		q := query(mode)
		const want = 2
		for i := 0; i < 2; i++ {
			before := p.Stats()
			var got int
			if err := conn.QueryRow(ctx, q, mode).Scan(&got); err != nil {
				t.Fatalf("%v run %d: %v", mode, i, err)
			}
			after := p.Stats()
			if got != want {
				t.Fatalf("%v: %d via proxy, want %d", mode, got, want)
			}
			wantFallbacks := before.Fallbacks
			if i == 0 {
				wantFallbacks++
			}
			if after.Fallbacks != wantFallbacks || (i == 1 && after.Rewrites != before.Rewrites) {
				t.Fatalf("%v run %d: fallbacks %d (want %d), rewrites %d -> %d", mode, i, after.Fallbacks, wantFallbacks, before.Rewrites, after.Rewrites)
			}
		}
	}
	// The two cases the proxy cannot repair without injecting messages:
	// the statement's error is passed on once, then it is never rewritten.
	t.Run("after a Flush the error is passed on at once", func(t *testing.T) {
		pl := conn.PgConn().StartPipeline(ctx)
		pl.SendPrepare("flushed", flushed, nil)
		pl.SendFlushRequest()
		if err := pl.Flush(); err != nil {
			t.Fatal(err)
		}
		// No Sync yet: the client waits for the Parse's answer.
		if _, err := pl.GetResults(); err == nil {
			t.Fatal("want the rewritten statement's error before any Sync")
		}
		if err := pl.Sync(); err != nil {
			t.Fatal(err)
		}
		if err := pl.Close(); err != nil {
			var pe *pgconn.PgError
			if !errors.As(err, &pe) {
				t.Fatalf("close pipeline: %v", err)
			}
		}
		var n int
		if err := conn.QueryRow(ctx, flushed, pgx.QueryExecModeExec).Scan(&n); err != nil || n != 2 {
			t.Fatalf("second run must send the original: %d, %v", n, err)
		}
	})
	t.Run("in a transaction the error is passed on once", func(t *testing.T) {
		tx, err := conn.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var n int
		err = tx.QueryRow(ctx, inTx, pgx.QueryExecModeSimpleProtocol).Scan(&n)
		_ = tx.Rollback(ctx)
		if err == nil {
			t.Fatal("want the rewritten statement's error inside the transaction")
		}
		if err := conn.QueryRow(ctx, inTx, pgx.QueryExecModeSimpleProtocol).Scan(&n); err != nil {
			t.Fatalf("second run must send the original: %v", err)
		}
		if p.Stats().FallbackErrors != 2 {
			t.Fatalf("fallback errors %d", p.Stats().FallbackErrors)
		}
	})
}

func TestShadow(t *testing.T) {
	ctx := context.Background()
	dsn, _ := setup(t)
	p, addr := startProxy(t, true)
	conn := proxiedConn(t, dsn, addr)
	var n int
	if err := conn.QueryRow(ctx, "SELECT count(*) FROM t WHERE t.a = 1 OR t.a IN (SELECT u.x FROM u)").Scan(&n); err != nil {
		t.Fatal(err)
	}
	if s := p.Stats(); s.Rewrites != 0 || s.Shadow != 1 {
		t.Fatalf("shadow: rewrites %d, shadow %d", s.Rewrites, s.Shadow)
	}
}

func TestSCRAM(t *testing.T) {
	ctx := context.Background()
	dsn, direct := setup(t)
	if _, err := direct.Exec(ctx, "SET password_encryption = 'scram-sha-256'; CREATE ROLE scram_user LOGIN PASSWORD 's3cret'; GRANT ALL ON t TO scram_user"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		// the GRANT is in the test's database: DROP OWNED there too, or
		// DROP ROLE fails and the next run (-count 2) finds the role
		_, _ = direct.Exec(context.Background(), "DROP OWNED BY scram_user")
		_, _ = srv.Pool(t, srv.DSN(t, "postgres")).Exec(context.Background(), "DROP OWNED BY scram_user; DROP ROLE scram_user")
	})
	restore := prependHBA(t, "local all scram_user scram-sha-256\n")
	defer restore()
	_, addr := startProxy(t, false)
	base := strings.Replace(viaProxy(t, dsn, addr), "user=postgres", "user=scram_user", 1)
	conn, err := pgx.Connect(ctx, base+" password=s3cret")
	if err != nil {
		t.Fatalf("SCRAM through the proxy: %v", err)
	}
	var n int
	if err := conn.QueryRow(ctx, "SELECT count(*) FROM t WHERE t.a = 1 OR t.a IN (SELECT u.x FROM u)").Scan(&n); err == nil {
		t.Fatal("scram_user may not read u; want permission denied")
	}
	if err := conn.QueryRow(ctx, "SELECT current_user = 'scram_user'").Scan(new(bool)); err != nil {
		t.Fatal(err)
	}
	conn.Close(ctx)
	_, err = pgx.Connect(ctx, base+" password=wrong")
	var pe *pgconn.PgError
	if !errors.As(err, &pe) || pe.Code != "28P01" {
		t.Fatalf("wrong password: want invalid_password (28P01), got %v", err)
	}
}

func TestClientKilledMidQuery(t *testing.T) {
	ctx := context.Background()
	dsn, direct := setup(t)
	_, addr := startProxy(t, false)
	conn, err := pgx.Connect(ctx, viaProxy(t, dsn, addr))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, "SET client_connection_check_interval = 100; SET application_name = 'killed-client'"); err != nil {
		t.Fatal(err)
	}
	errc := make(chan error, 1)
	go func() { _, err := conn.Exec(ctx, "SELECT pg_sleep(60)"); errc <- err }()
	waitFor(t, direct, "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'killed-client' AND state = 'active'", 1)
	_ = conn.PgConn().Conn().Close() // the client dies
	if err := <-errc; err == nil {
		t.Fatal("query on a killed connection succeeded")
	}
	waitFor(t, direct, "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'killed-client'", 0)
}

// waitFor polls q until it returns want (up to 20 s, a liveness bound,
// not a measured threshold).
func waitFor(t *testing.T, pool *pgxpool.Pool, q string, want int) {
	t.Helper()
	var got int
	for i := 0; i < 200; i++ {
		if err := pool.QueryRow(context.Background(), q).Scan(&got); err != nil {
			t.Fatal(err)
		}
		if got == want {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("%s: %d, want %d", q, got, want)
}

func TestPsqlAndPgbench(t *testing.T) {
	dsn, _ := setup(t)
	p, addr := startProxy(t, false)
	target := viaProxy(t, dsn, addr)
	bin := func(name string) string {
		if path := filepath.Join(srv.BinDir(t), name); fileExists(path) {
			return path
		}
		return name
	}
	out, err := exec.Command(bin("psql"), "-X", "-A", "-t", "-d", target, "-c",
		"SELECT count(*) FROM t WHERE t.a = 1 OR t.a IN (SELECT u.x FROM u)", "-c", "\\copy (SELECT 7) TO STDOUT").CombinedOutput()
	if err != nil || strings.TrimSpace(string(out)) != "31\n7" {
		t.Fatalf("psql: %v: %q", err, out)
	}
	if p.Stats().Rewrites == 0 {
		t.Fatal("psql's statement was not rewritten")
	}
	out, err = exec.Command(bin("pgbench"), "-i", "-s", "1", "-q", target).CombinedOutput()
	if err != nil {
		t.Fatalf("pgbench -i through the proxy: %v\n%s", err, out)
	}
	for _, mode := range []string{"simple", "extended", "prepared"} {
		out, err = exec.Command(bin("pgbench"), "-S", "-M", mode, "-c", "2", "-t", "200", "-n", target).CombinedOutput()
		if err != nil || !strings.Contains(string(out), "number of transactions actually processed: 400/400") {
			t.Fatalf("pgbench -M %s: %v\n%s", mode, err, out)
		}
	}
}

func fileExists(p string) bool { _, err := os.Stat(p); return err == nil }

func TestMayMatch(t *testing.T) {
	for s, want := range map[string]bool{
		"SELECT 1": true,
		"select * from t where a=1 or a in (select 1)":                      true,
		"SELECT * FROM orders WHERE id = 1":                                 false,
		"UPDATE t SET a = 1 WHERE a = ANY($1) OR b = 2 AND c IN (SELECT 1)": true,
		"INSERT INTO t VALUES (1)":                                          false,
	} {
		if s == "SELECT 1" {
			want = false
		}
		if got := mayMatch(s); got != want {
			t.Errorf("mayMatch(%q) = %v, want %v", s, got, want)
		}
	}
}

func TestEncryptionRequestsRefused(t *testing.T) {
	_, addr := startProxy(t, false)
	for _, code := range []uint32{gssEncRequestCode, sslRequestCode} {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		pkt := []byte{0, 0, 0, 8, byte(code >> 24), byte(code >> 16), byte(code >> 8), byte(code)}
		if _, err := c.Write(pkt); err != nil {
			t.Fatal(err)
		}
		var b [1]byte
		_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
		if _, err := c.Read(b[:]); err != nil || b[0] != 'N' {
			t.Fatalf("request %d: answer %q, %v; want N", code, b[0], err)
		}
		c.Close()
	}
}

func TestServerTerminatesSession(t *testing.T) {
	ctx := context.Background()
	dsn, direct := setup(t)
	_, addr := startProxy(t, false)
	conn := proxiedConn(t, dsn, addr)
	var pid int
	if err := conn.QueryRow(ctx, "SELECT pg_backend_pid()").Scan(&pid); err != nil {
		t.Fatal(err)
	}
	if _, err := direct.Exec(ctx, "SELECT pg_terminate_backend($1)", pid); err != nil {
		t.Fatal(err)
	}
	if err := conn.QueryRow(ctx, "SELECT 1").Scan(new(int)); err == nil {
		t.Fatal("query on a terminated session succeeded")
	}
	if !conn.IsClosed() {
		t.Fatal("client connection still open after the server ended the session")
	}
}

func TestMD5(t *testing.T) {
	ctx := context.Background()
	dsn, direct := setup(t)
	if _, err := direct.Exec(ctx, "SET password_encryption = 'md5'; CREATE ROLE md5_user LOGIN PASSWORD 'm5pass'"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_, _ = srv.Pool(t, srv.DSN(t, "postgres")).Exec(context.Background(), "DROP ROLE IF EXISTS md5_user")
	})
	restore := prependHBA(t, "local all md5_user md5\n")
	defer restore()
	_, addr := startProxy(t, false)
	base := strings.Replace(viaProxy(t, dsn, addr), "user=postgres", "user=md5_user", 1)
	conn, err := pgx.Connect(ctx, base+" password=m5pass")
	if err != nil {
		t.Fatalf("md5 through the proxy: %v", err)
	}
	conn.Close(ctx)
	_, err = pgx.Connect(ctx, base+" password=wrong")
	var pe *pgconn.PgError
	if !errors.As(err, &pe) || pe.Code != "28P01" {
		t.Fatalf("wrong password: want invalid_password (28P01), got %v", err)
	}
}

// prependHBA puts lines first in pg_hba.conf and reloads; the returned
// function restores the file.
func prependHBA(t *testing.T, lines string) func() {
	t.Helper()
	hba := filepath.Join(srv.Cluster(t).DataDir(), "pg_hba.conf")
	orig, err := os.ReadFile(hba)
	if err != nil {
		t.Fatal(err)
	}
	reload := func() {
		if _, err := srv.Pool(t, srv.DSN(t, "postgres")).Exec(context.Background(), "SELECT pg_reload_conf()"); err != nil {
			t.Error(err)
		}
	}
	if err := os.WriteFile(hba, append([]byte(lines), orig...), 0o600); err != nil {
		t.Fatal(err)
	}
	reload()
	return func() {
		if err := os.WriteFile(hba, orig, 0o600); err != nil {
			t.Error(err)
		}
		reload()
	}
}
