// Package pgtest is the shared test harness: one throwaway PostgreSQL
// cluster (internal/pgcluster) per test package, started in TestMain and
// torn down after the tests, plus helpers for fresh databases and pools.
//
// Under go test -short no cluster is started: every Server method takes the
// test and skips it ("needs a PostgreSQL server"), so a package's pure tests
// run on a machine without server binaries. Without -short a missing server
// fails the whole package, as before.
//
// Usage:
//
//	var srv *pgtest.Server
//
//	func TestMain(m *testing.M) { os.Exit(pgtest.Run(m, &srv)) }
//
//	func TestX(t *testing.T) {
//		pool := srv.Pool(t, srv.NewDatabase(t)) // skips under -short
//		...
//	}
package pgtest

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"maps"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/erplab/erplab/internal/leftover"
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

// Server is the per-package test cluster handed out by Run. Under -short it
// has no cluster and every method skips the calling test.
type Server struct {
	cluster *pgcluster.Cluster
	seq     atomic.Int64
	// skip is the reason of the skip when there is no cluster.
	skip string
	// waitSkip is why pg_wait_sampling is not preloaded ("" when it is).
	waitSkip string
}

// SkipReason is the message of the skip under -short.
const SkipReason = "needs a PostgreSQL server (skipped under -short)"

// need skips t when s has no cluster (go test -short) and returns the
// cluster otherwise.
func (s *Server) need(t testing.TB) *pgcluster.Cluster {
	t.Helper()
	if s == nil || s.cluster == nil {
		why := SkipReason
		if s != nil && s.skip != "" {
			why = s.skip
		}
		t.Skip(why)
	}
	return s.cluster
}

// Run starts one cluster (MaxConnections, SharedBuffers), stores it in *srv,
// runs the tests and stops the cluster, returning the exit code for
// os.Exit. Under -short it starts nothing and stores a Server whose
// methods skip the test calling them. Without server binaries it prints one
// line saying how to install them and returns 1 (the suite fails: CI installs them). SIGINT or SIGTERM
// during the tests stops the cluster (removing its directory) and exits
// with status 1.
func Run(m *testing.M, srv **Server) int { return RunWith(m, srv, Options{}) }

// RunIf is Run when *need is true after the flags are parsed (e.g. a
// -record flag asking for real runs to record testdata from), and
// otherwise runs the tests without a cluster, as under -short: the
// package's tests read recorded data and need no server.
func RunIf(m *testing.M, srv **Server, need *bool) int {
	defer ownState()()
	flag.Parse()
	if !*need {
		*srv = &Server{skip: "needs a PostgreSQL server: only to record testdata (see the package's record flag)"}
		return m.Run()
	}
	return Run(m, srv)
}

// ownState gives the test binary a crash-safe record of its own
// (leftover.EnvStateDir, a fresh directory under os.TempDir()) unless one
// is set already, so that the leftover sweep every erplab command runs at
// its start sees only what this package's tests made: test packages run
// in parallel, and one package's deliberate leftovers (killed commands,
// orphaned clusters) must neither be cleaned by another package's erplab
// commands nor add a "cleaned up" line to their output. The returned func
// sweeps what the tests left in it (nothing, normally) and removes it.
func ownState() func() {
	if os.Getenv(leftover.EnvStateDir) != "" {
		return func() {}
	}
	dir, err := os.MkdirTemp("", "erplab-test-state-")
	if err != nil {
		return func() {}
	}
	os.Setenv(leftover.EnvStateDir, dir)
	return func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		_, _ = leftover.Sweep(ctx, os.Stderr)
		_ = os.RemoveAll(dir)
		os.Unsetenv(leftover.EnvStateDir)
	}
}

// Options adjust the cluster of RunWith; zero fields take Run's values.
type Options struct {
	// MaxConnections and SharedBuffers default to the package constants.
	MaxConnections int
	SharedBuffers  string
	// Settings are extra postgresql.conf settings (name -> value), e.g.
	// shared_preload_libraries.
	Settings map[string]string
	// WaitSampling preloads pg_wait_sampling (after pg_stat_statements
	// and any library Settings preload) when its library is installed
	// next to the server binaries (<bindir>/../lib/pg_wait_sampling.so);
	// Server.NeedWaitSampling says whether it is. Its collector wakes
	// every 10 ms: only packages that test it ask for it.
	WaitSampling bool
}

// waitSamplingLib is the library of the pg_wait_sampling extension.
const waitSamplingLib = "pg_wait_sampling"

// preloadWaitSampling adds pg_wait_sampling to the shared_preload_libraries
// of settings (after pg_stat_statements when its library is there, since
// Settings replace pgcluster's preload) when both are installed in the
// lib directory beside binDir, and returns the settings and "" or, when
// it is not installed, settings unchanged and the reason.
func preloadWaitSampling(binDir string, settings map[string]string) (map[string]string, string) {
	lib := filepath.Join(binDir, "..", "lib")
	if _, err := os.Stat(filepath.Join(lib, waitSamplingLib+".so")); err != nil {
		return settings, fmt.Sprintf("not installed (no %s)", filepath.Join(lib, waitSamplingLib+".so"))
	}
	out := maps.Clone(settings)
	if out == nil {
		out = map[string]string{}
	}
	libs := out["shared_preload_libraries"]
	if libs == "" {
		if _, err := os.Stat(filepath.Join(lib, "pg_stat_statements.so")); err == nil {
			libs = "pg_stat_statements"
			if _, ok := out["pg_stat_statements.track_planning"]; !ok {
				out["pg_stat_statements.track_planning"] = "on"
			}
		}
	}
	if libs != "" {
		libs += ","
	}
	out["shared_preload_libraries"] = libs + waitSamplingLib
	return out, ""
}

// NeedWaitSampling skips t (Need) unless the cluster preloads
// pg_wait_sampling (Options.WaitSampling and the library installed),
// saying why.
func (s *Server) NeedWaitSampling(t testing.TB) {
	t.Helper()
	s.need(t)
	if s.waitSkip != "" {
		Need(t, waitSamplingLib, errors.New(s.waitSkip))
	}
}

// RunWith is Run with a cluster adjusted by opts (e.g. a preloaded
// library).
func RunWith(m *testing.M, srv **Server, opts Options) int {
	defer ownState()()
	flag.Parse() // testing.Short needs the flags parsed; m.Run parses again harmlessly
	if testing.Short() {
		*srv = &Server{}
		return m.Run()
	}
	if opts.MaxConnections == 0 {
		opts.MaxConnections = MaxConnections
	}
	if opts.SharedBuffers == "" {
		opts.SharedBuffers = SharedBuffers
	}
	waitSkip := "not preloaded in this package's test cluster (pgtest.Options.WaitSampling)"
	if opts.WaitSampling {
		waitSkip = "no server binaries"
		if bin, err := pgcluster.FindBinDir(); err == nil {
			opts.Settings, waitSkip = preloadWaitSampling(bin, opts.Settings)
		}
	}
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
		MaxConnections: opts.MaxConnections,
		SharedBuffers:  opts.SharedBuffers,
		Settings:       opts.Settings,
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
	s := &Server{cluster: c, waitSkip: waitSkip}
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
// It skips t under -short.
func (s *Server) DSN(t testing.TB, dbname string) string {
	t.Helper()
	return s.need(t).DSN(dbname)
}

// Cluster is the underlying cluster (directory, port, version...). It skips
// t under -short.
func (s *Server) Cluster(t testing.TB) *pgcluster.Cluster {
	t.Helper()
	return s.need(t)
}

// BinDir is the directory of the server binaries (pgbench, psql and
// pg_ctl are usually there too). It skips t under -short.
func (s *Server) BinDir(t testing.TB) string {
	t.Helper()
	return s.need(t).BinDir()
}

// NewDatabase creates an empty database with a unique name derived from the
// test name, drops it (WITH (FORCE), closing leftover sessions) in
// t.Cleanup, and returns its DSN. It fails the test on error and skips it
// under -short.
func (s *Server) NewDatabase(t testing.TB) string {
	t.Helper()
	c := s.need(t)
	name := s.dbName(t.Name())
	ctx, cancel := context.WithTimeout(context.Background(), adminTimeout)
	defer cancel()
	if err := c.CreateDatabase(ctx, name); err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), adminTimeout)
		defer cancel()
		conn, err := pgx.Connect(ctx, c.DSN("postgres"))
		if err != nil {
			t.Errorf("pgtest: drop database %q: %v", name, err)
			return
		}
		defer conn.Close(ctx)
		if _, err := conn.Exec(ctx, "DROP DATABASE IF EXISTS "+pgx.Identifier{name}.Sanitize()+" WITH (FORCE)"); err != nil {
			t.Errorf("pgtest: drop database %q: %v", name, err)
		}
	})
	return c.DSN(name)
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
// fails the test on error and skips it under -short.
func (s *Server) Pool(t testing.TB, dsn string) *pgxpool.Pool {
	t.Helper()
	s.need(t)
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

// SkipShort skips t under -short, for tests that start a cluster of their
// own (pgcluster.Start) instead of using the package's Server.
func SkipShort(t testing.TB) {
	t.Helper()
	if testing.Short() {
		t.Skip(SkipReason)
	}
}

// NewRole creates a LOGIN role with no privilege beyond PUBLIC's (no
// pg_monitor: other roles' sessions are hidden from it), drops it in
// t.Cleanup, and returns the role's name and dsn (a DSN of this cluster,
// from DSN or NewDatabase) connecting as it. The test cluster trusts its
// private socket, so the role needs no password there. It skips t under
// -short.
func (s *Server) NewRole(t testing.TB, dsn string) (role, roleDSN string) {
	t.Helper()
	c := s.need(t)
	role = s.dbName(t.Name())
	ctx, cancel := context.WithTimeout(context.Background(), adminTimeout)
	defer cancel()
	conn, err := pgx.Connect(ctx, c.DSN("postgres"))
	if err != nil {
		t.Fatalf("pgtest: create role: %v", err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(ctx, "CREATE ROLE "+pgx.Identifier{role}.Sanitize()+" LOGIN"); err != nil {
		t.Fatalf("pgtest: create role: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), adminTimeout)
		defer cancel()
		conn, err := pgx.Connect(ctx, c.DSN("postgres"))
		if err != nil {
			t.Errorf("pgtest: drop role %q: %v", role, err)
			return
		}
		defer conn.Close(ctx)
		if _, err := conn.Exec(ctx, "DROP ROLE IF EXISTS "+pgx.Identifier{role}.Sanitize()); err != nil {
			t.Errorf("pgtest: drop role %q: %v", role, err)
		}
	})
	return role, dsn + " user=" + role
}
