package rawsock_test

import (
	"context"
	"errors"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/erplab/erplab/internal/conninfo"
	"github.com/erplab/erplab/internal/pgtest"
	"github.com/erplab/erplab/internal/rawsock"
)

var srv *pgtest.Server

func TestMain(m *testing.M) { os.Exit(pgtest.Run(m, &srv)) }

// Queries through raw connections: a small and a 4 MB result, a 3 MB
// parameter, the connections really wrapped (on Linux).
func TestPoolThroughRawSockets(t *testing.T) {
	ctx := context.Background()
	pool, err := conninfo.OpenPool(ctx, srv.DSN(t, "postgres"), 2, conninfo.RawSockets())
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	c, err := pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Release()
	_, wrapped := c.Conn().PgConn().Conn().(*rawsock.Conn)
	if rawsock.Supported && !wrapped {
		t.Fatalf("connection is a %T, not a *rawsock.Conn", c.Conn().PgConn().Conn())
	}
	var n int
	if err := c.QueryRow(ctx, "select 41 + 1").Scan(&n); err != nil || n != 42 {
		t.Fatalf("select: %d, %v", n, err)
	}
	var big string
	if err := c.QueryRow(ctx, "select repeat('x', 4*1024*1024)").Scan(&big); err != nil || len(big) != 4*1024*1024 {
		t.Fatalf("4 MB result: %d bytes, %v", len(big), err)
	}
	param := strings.Repeat("y", 3*1024*1024)
	if err := c.QueryRow(ctx, "select length($1::text)", param).Scan(&n); err != nil || n != len(param) {
		t.Fatalf("3 MB parameter: length %d, %v", n, err)
	}
}

// A query cancelled by its context returns promptly (pgconn sets a
// deadline on the connection: the raw read honours it), and the pool
// goes on serving.
func TestCancelThroughRawSockets(t *testing.T) {
	pool, err := conninfo.OpenPool(context.Background(), srv.DSN(t, "postgres"), 2, conninfo.RawSockets())
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err = pool.Exec(ctx, "select pg_sleep(10)")
	if err == nil || !errors.Is(err, context.DeadlineExceeded) && !strings.Contains(err.Error(), "timeout") {
		t.Fatalf("err = %v, want a deadline error", err)
	}
	// Not a timing threshold on speed: 10 s would mean the read ignored
	// the deadline and waited for the server.
	if time.Since(start) > 8*time.Second {
		t.Fatalf("cancel took %s: the raw read did not honour the deadline", time.Since(start))
	}
	var n int
	if err := pool.QueryRow(context.Background(), "select 7").Scan(&n); err != nil || n != 7 {
		t.Fatalf("after cancel: %d, %v", n, err)
	}
}

// The server closing the connection reads as the end of the stream.
func TestServerCloseIsEOF(t *testing.T) {
	ctx := context.Background()
	cfg, err := pgx.ParseConfig(srv.DSN(t, "postgres"))
	if err != nil {
		t.Fatal(err)
	}
	dial := cfg.DialFunc
	cfg.DialFunc = func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := dial(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return rawsock.Wrap(c), nil
	}
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	_, err = conn.Exec(ctx, "select pg_terminate_backend(pg_backend_pid())")
	if err == nil {
		t.Fatal("terminated backend: no error")
	}
	if !conn.IsClosed() {
		t.Fatal("connection not closed after the server went away")
	}
}

// A round trip through a raw connection allocates nothing in rawsock
// (pgconn's own allocations are counted too, so compare with and without).
func BenchmarkRoundTrip(b *testing.B) {
	for _, raw := range []bool{false, true} {
		name := "net"
		if raw {
			name = "rawsock"
		}
		b.Run(name, func(b *testing.B) {
			ctx := context.Background()
			var opts []conninfo.PoolOption
			if raw {
				opts = append(opts, conninfo.RawSockets())
			}
			pool, err := conninfo.OpenPool(ctx, srv.DSN(b, "postgres"), 1, opts...)
			if err != nil {
				b.Fatal(err)
			}
			defer pool.Close()
			c, err := pool.Acquire(ctx)
			if err != nil {
				b.Fatal(err)
			}
			defer c.Release()
			pc := c.Conn().PgConn()
			b.ReportAllocs()
			for b.Loop() {
				if _, err := pc.Exec(ctx, "select 1").ReadAll(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
