// Package pgtest is the shared test harness: one throwaway PostgreSQL
// cluster (internal/pgcluster) per test package, started in TestMain and
// torn down after the tests, plus helpers for fresh databases and pools.
//
// Usage:
//
//	var srv *pgtest.Server
//
//	func TestMain(m *testing.M) { os.Exit(pgtest.Run(m, &srv)) }
//
//	func TestX(t *testing.T) {
//		pool := srv.Pool(t, srv.NewDatabase(t))
//		...
//	}
package pgtest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/erplab/erplab/internal/pgcluster"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Cluster sizing for tests.
const (
	// MaxConnections is max_connections of the test cluster: room for a
	// few pools of tens of connections running at once.
	MaxConnections = 200
	// SharedBuffers is shared_buffers of the test cluster; small, since
	// two packages' clusters may run at once on a CI box.
	SharedBuffers = "128MB"
	// startTimeout bounds cluster start-up in Run.
	startTimeout = 2 * time.Minute
	// adminTimeout bounds CREATE/DROP DATABASE in NewDatabase.
	adminTimeout = time.Minute
)

// Server is the per-package test cluster handed out by Run.
type Server struct {
	cluster *pgcluster.Cluster
	seq     atomic.Int64
}

// Run starts one cluster (MaxConnections, SharedBuffers), stores it in *srv,
// runs the tests and stops the cluster, returning the exit code for
// os.Exit. Without server binaries it prints one line saying how to install
// them and returns 1 (the suite fails: CI installs them). SIGINT or SIGTERM
// during the tests stops the cluster (removing its directory) and exits
// with status 1.
func Run(m *testing.M, srv **Server) int {
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(sigs)

	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	startDone := make(chan struct{})
	go func() { // a signal during start-up cancels it; Start then cleans up
		select {
		case <-sigs:
			cancel()
		case <-startDone:
		}
	}()
	c, err := pgcluster.Start(ctx, pgcluster.Options{
		MaxConnections: MaxConnections,
		SharedBuffers:  SharedBuffers,
		// A test binary killed by -timeout cannot run Stop; do not leave
		// a server behind then.
		StopWithParent: true,
		// Tests of connection errors (internal/conninfo) reach it over
		// 127.0.0.1 too (scram-sha-256 with the cluster's password), and
		// provoke errors that follow authentication (unknown role,
		// missing database) with dummy passwords over the private socket.
		TCP:         true,
		TrustSocket: true,
	})
	close(startDone)
	cancel()
	if err != nil {
		if errors.Is(err, pgcluster.ErrNoServer) {
			fmt.Fprintf(os.Stderr, "pgtest: %v\n", err)
		} else {
			fmt.Fprintf(os.Stderr, "pgtest: cannot start the test PostgreSQL cluster: %v\n", err)
		}
		return 1
	}
	s := &Server{cluster: c}
	*srv = s

	done := make(chan struct{})
	defer close(done)
	go func() {
		select {
		case sig := <-sigs:
			fmt.Fprintf(os.Stderr, "pgtest: %v: stopping the test PostgreSQL cluster\n", sig)
			if err := c.Stop(); err != nil {
				fmt.Fprintf(os.Stderr, "pgtest: %v\n", err)
			}
			os.Exit(1)
		case <-done:
		}
	}()

	code := m.Run()
	if err := c.Stop(); err != nil {
		fmt.Fprintf(os.Stderr, "pgtest: stop cluster: %v\n", err)
		if code == 0 {
			code = 1
		}
	}
	return code
}

// DSN returns the key/value DSN of dbname on the test cluster: Unix socket,
// superuser "postgres", the password in a passfile, e.g. "host=/tmp/erplab-pg-1a2b3c4d5e6f/sock
// port=40001 user=postgres dbname=x sslmode=disable passfile=/tmp/erplab-pg-1a2b3c4d5e6f/pgpass".
func (s *Server) DSN(dbname string) string { return s.cluster.DSN(dbname) }

// Cluster is the underlying cluster (directory, port, version...).
func (s *Server) Cluster() *pgcluster.Cluster { return s.cluster }

// BinDir is the directory of the server binaries (pgbench, psql and
// pg_ctl are usually there too).
func (s *Server) BinDir() string { return s.cluster.BinDir() }

// NewDatabase creates an empty database with a unique name derived from the
// test name, drops it (WITH (FORCE), closing leftover sessions) in
// t.Cleanup, and returns its DSN. It fails the test on error.
func (s *Server) NewDatabase(t testing.TB) string {
	t.Helper()
	name := s.dbName(t.Name())
	ctx, cancel := context.WithTimeout(context.Background(), adminTimeout)
	defer cancel()
	if err := s.cluster.CreateDatabase(ctx, name); err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), adminTimeout)
		defer cancel()
		conn, err := pgx.Connect(ctx, s.DSN("postgres"))
		if err != nil {
			t.Errorf("pgtest: drop database %q: %v", name, err)
			return
		}
		defer conn.Close(ctx)
		if _, err := conn.Exec(ctx, "DROP DATABASE IF EXISTS "+pgx.Identifier{name}.Sanitize()+" WITH (FORCE)"); err != nil {
			t.Errorf("pgtest: drop database %q: %v", name, err)
		}
	})
	return s.DSN(name)
}

// dbName makes a database name from a test name: lower-case letters,
// digits and '_' of the name (at most 40), then a per-server sequence number,
// well under PostgreSQL's 63-byte identifier limit (NAMEDATALEN - 1).
func (s *Server) dbName(testName string) string {
	var b strings.Builder
	b.WriteString("t_")
	for _, r := range strings.ToLower(testName) {
		if b.Len() >= 42 {
			break
		}
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9':
			b.WriteRune(r)
		default:
			b.WriteByte('_')
		}
	}
	return fmt.Sprintf("%s_%d", b.String(), s.seq.Add(1))
}

// Pool opens a pgxpool on dsn, checks it with a ping and closes it in
// t.Cleanup (before the database of an earlier NewDatabase is dropped). It
// fails the test on error.
func (s *Server) Pool(t testing.TB, dsn string) *pgxpool.Pool {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), adminTimeout)
	defer cancel()
	pool, err := pgxpool.New(ctx, dsn)
	if err != nil {
		t.Fatalf("pgtest: open pool: %v", err)
	}
	t.Cleanup(pool.Close)
	if err := pool.Ping(ctx); err != nil {
		t.Fatalf("pgtest: ping pool: %v", err)
	}
	return pool
}
