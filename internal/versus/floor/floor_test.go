//go:build linux

package floor

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/erplab/erplab/internal/pgtest"
)

var srv *pgtest.Server

func TestMain(m *testing.M) { os.Exit(pgtest.Run(m, &srv)) }

// start runs a Relay in front of the test server's database dsn and
// returns it with the DSN that reaches the server through it.
func start(t *testing.T, dsn string) (*Relay, string) {
	t.Helper()
	cfg, err := pgconn.ParseConfig(dsn)
	if err != nil {
		t.Fatal(err)
	}
	network, addr := pgconn.NetworkAddress(cfg.Host, cfg.Port)
	r, err := Start(func() (net.Conn, error) { return net.Dial(network, addr) })
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	via := fmt.Sprintf("user=%s dbname=%s host=127.0.0.1 port=%d sslmode=disable", cfg.User, cfg.Database, r.Addr().Port)
	if cfg.Password != "" {
		via += " password=" + cfg.Password
	}
	return r, via
}

func openFds(t *testing.T) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	return len(ents)
}

// TestRelayCarriesEveryProtocol runs the same statements direct and
// through the relay in pgx's simple and extended protocols, with a
// result of several MiB (more than the relay's buffer and the sockets'
// buffers, so sends wait for room) and from 16 connections at once, and
// compares the answers; Close then leaves no descriptor open and
// GOMAXPROCS as it was.
func TestRelayCarriesEveryProtocol(t *testing.T) {
	ctx := context.Background()
	dsn := srv.NewDatabase(t)
	procs := runtime.GOMAXPROCS(0)
	fds := openFds(t)
	r, via := start(t, dsn)
	if got := runtime.GOMAXPROCS(0); got != procs+1 {
		t.Fatalf("GOMAXPROCS %d while the relay runs, want %d", got, procs+1)
	}
	const q = "SELECT count(*), sum(length(s)) FROM (SELECT repeat(md5(g::text), 40) AS s FROM generate_series(1, $1::int) g) x"
	big := "SELECT string_agg(repeat(md5(g::text), 4), ',') FROM generate_series(1, 20000) g"
	var want string
	direct, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	if err := direct.QueryRow(ctx, big).Scan(&want); err != nil {
		t.Fatal(err)
	}
	direct.Close(ctx)
	if len(want) < 2<<20 {
		t.Fatalf("the large answer is %d bytes, want at least 2 MiB", len(want))
	}
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for i := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cfg, err := pgx.ParseConfig(via)
			if err != nil {
				errs <- err
				return
			}
			if i%2 == 1 {
				cfg.DefaultQueryExecMode = pgx.QueryExecModeSimpleProtocol
			}
			c, err := pgx.ConnectConfig(ctx, cfg)
			if err != nil {
				errs <- err
				return
			}
			defer c.Close(ctx)
			for n := 1; n <= 200; n++ {
				var count, sum int64
				if err := c.QueryRow(ctx, q, n).Scan(&count, &sum); err != nil {
					errs <- err
					return
				}
				if count != int64(n) || sum != int64(n*32*40) {
					errs <- fmt.Errorf("connection %d, n=%d: count %d, sum %d", i, n, count, sum)
					return
				}
			}
			var got string
			if err := c.QueryRow(ctx, big).Scan(&got); err != nil {
				errs <- err
				return
			}
			if got != want {
				errs <- fmt.Errorf("connection %d: the large answer differs (%d bytes, want %d)", i, len(got), len(want))
			}
			// A server error passes through as it is.
			_, err = c.Exec(ctx, "SELECT 1/0")
			if pe := (*pgconn.PgError)(nil); err == nil || !errors.As(err, &pe) || pe.Code != "22012" {
				errs <- fmt.Errorf("connection %d: SELECT 1/0 gave %v, want SQLSTATE 22012", i, err)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	// A client that goes away ends its pair: the server's backend ends.
	c, err := pgx.Connect(ctx, via)
	if err != nil {
		t.Fatal(err)
	}
	var pid int
	if err := c.QueryRow(ctx, "SELECT pg_backend_pid()").Scan(&pid); err != nil {
		t.Fatal(err)
	}
	c.Close(ctx)
	watch, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer watch.Close(ctx)
	deadline := time.Now().Add(10 * time.Second)
	for {
		var n int
		if err := watch.QueryRow(ctx, "SELECT count(*) FROM pg_stat_activity WHERE pid = $1", pid).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("backend %d still there 10 s after its client closed", pid)
		}
		time.Sleep(20 * time.Millisecond)
	}
	r.Close()
	r.Close() // a second Close does nothing
	if got := runtime.GOMAXPROCS(0); got != procs {
		t.Fatalf("GOMAXPROCS %d after Close, want %d", got, procs)
	}
	waitFds(t, fds+1) // +1: watch
}

// TestCloseWithOpenSessions closes the relay while clients are connected:
// their connections end (a query then fails) and no descriptor stays.
func TestCloseWithOpenSessions(t *testing.T) {
	ctx := context.Background()
	dsn := srv.NewDatabase(t)
	fds := openFds(t)
	r, via := start(t, dsn)
	var conns []*pgx.Conn
	for range 4 {
		c, err := pgx.Connect(ctx, via)
		if err != nil {
			t.Fatal(err)
		}
		conns = append(conns, c)
	}
	r.Close()
	for i, c := range conns {
		cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		if _, err := c.Exec(cctx, "SELECT 1"); err == nil {
			t.Errorf("connection %d still answers after Close", i)
		}
		cancel()
		c.Close(ctx)
	}
	// pgx closes a broken connection's socket in a goroutine of its own
	// (pgconn's asyncClose): wait for it.
	waitFds(t, fds)
}

// waitFds waits up to 20 s for the process to hold want descriptors.
func waitFds(t *testing.T, want int) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		got := openFds(t)
		if got == want {
			return
		}
		if time.Now().After(deadline) {
			ents, _ := os.ReadDir("/proc/self/fd")
			for _, e := range ents {
				l, _ := os.Readlink("/proc/self/fd/" + e.Name())
				t.Log(e.Name(), l)
			}
			t.Fatalf("%d descriptors open after Close, want %d", got, want)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
