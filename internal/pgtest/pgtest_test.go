package pgtest_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/erplab/erplab/internal/pgtest"
	"github.com/jackc/pgx/v5"
)

var srv *pgtest.Server

// envChild makes the test binary a child for TestSignalStopsCluster.
const envChild = "PGTEST_SIGNAL_CHILD"

func TestMain(m *testing.M) { os.Exit(pgtest.Run(m, &srv)) }

func TestNewDatabaseIsFreshAndDropped(t *testing.T) {
	var name, dsn1, dsn2 string
	t.Run("sub", func(t *testing.T) {
		dsn1 = srv.NewDatabase(t)
		dsn2 = srv.NewDatabase(t)
		if dsn1 == dsn2 {
			t.Fatalf("two NewDatabase calls returned the same DSN %q", dsn1)
		}
		pool := srv.Pool(t, dsn1)
		ctx := context.Background()
		if err := pool.QueryRow(ctx, "SELECT current_database()").Scan(&name); err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(dsn1, "dbname="+name) {
			t.Fatalf("current_database() = %q, DSN %q", name, dsn1)
		}
		var tables int
		if err := pool.QueryRow(ctx, "SELECT count(*) FROM pg_tables WHERE schemaname = 'public'").Scan(&tables); err != nil {
			t.Fatal(err)
		}
		if tables != 0 {
			t.Fatalf("fresh database has %d public tables", tables)
		}
		// A session left open must not block the drop (WITH (FORCE)).
		conn, err := pgx.Connect(ctx, dsn2)
		if err != nil {
			t.Fatal(err)
		}
		_ = conn // deliberately not closed
	})
	conn, err := pgx.Connect(context.Background(), srv.DSN(t, "postgres"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	var n int
	if err := conn.QueryRow(context.Background(),
		"SELECT count(*) FROM pg_database WHERE datname LIKE 't_testnewdatabaseisfreshanddropped%'").Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 0 {
		t.Fatalf("%d test databases left after cleanup (first was %q)", n, name)
	}
}

func TestClusterSettings(t *testing.T) {
	pool := srv.Pool(t, srv.DSN(t, "postgres"))
	var maxConn, sb string
	ctx := context.Background()
	if err := pool.QueryRow(ctx, "SHOW max_connections").Scan(&maxConn); err != nil {
		t.Fatal(err)
	}
	if err := pool.QueryRow(ctx, "SHOW shared_buffers").Scan(&sb); err != nil {
		t.Fatal(err)
	}
	if maxConn != strconv.Itoa(pgtest.MaxConnections) || sb != pgtest.SharedBuffers {
		t.Fatalf("max_connections=%s shared_buffers=%s, want %d and %s", maxConn, sb, pgtest.MaxConnections, pgtest.SharedBuffers)
	}
	if _, err := os.Stat(filepath.Join(srv.BinDir(t), "postgres")); err != nil {
		t.Fatalf("BinDir %q: %v", srv.BinDir(t), err)
	}
	if srv.Cluster(t).Dir() == "" || srv.Cluster(t).Port() == 0 {
		t.Fatalf("cluster dir %q port %d", srv.Cluster(t).Dir(), srv.Cluster(t).Port())
	}
}

// TestSignalChild is the child half of TestSignalStopsCluster: it reports
// its cluster and blocks until the signal ends the process.
func TestSignalChild(t *testing.T) {
	if os.Getenv(envChild) == "" {
		t.Skip("child mode of TestSignalStopsCluster only")
	}
	fmt.Printf("CLUSTER %s %d\n", srv.Cluster(t).Dir(), srv.Cluster(t).PID())
	time.Sleep(time.Minute)
	t.Fatal("no signal arrived")
}

func TestSignalStopsCluster(t *testing.T) {
	if os.Getenv(envChild) != "" {
		t.Skip("in child")
	}
	pgtest.SkipShort(t)
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe, "-test.run=^TestSignalChild$", "-test.v")
	cmd.Env = append(os.Environ(), envChild+"=1")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	var dir string
	var pid int
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		if f := strings.Fields(sc.Text()); len(f) == 3 && f[0] == "CLUSTER" {
			dir = f[1]
			pid, _ = strconv.Atoi(f[2])
			break
		}
	}
	if dir == "" || pid == 0 {
		t.Fatalf("child did not report its cluster (scan error %v)", sc.Err())
	}
	if _, err := os.Stat(dir); err != nil {
		t.Fatalf("child cluster dir: %v", err)
	}
	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	go func() { _, _ = bufio.NewReader(out).WriteTo(devNull{}) }()
	err = cmd.Wait()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 1 {
		t.Fatalf("child exit: %v, want exit status 1", err)
	}
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("cluster dir %s still there after SIGINT (stat: %v)", dir, err)
	}
	if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
		t.Fatalf("postmaster pid %d still exists after SIGINT (kill -0: %v)", pid, err)
	}
}

type devNull struct{}

func (devNull) Write(p []byte) (int, error) { return len(p), nil }

// Without server binaries (ERPLAB_PG_BINDIR=/nonexistent), -short skips
// every test that uses the Server and the package passes; without -short
// the package fails, naming the missing binaries.
func TestNoServerBinaries(t *testing.T) {
	if os.Getenv(envChild) != "" {
		t.Skip("in child")
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	run := func(args ...string) (string, error) {
		cmd := exec.Command(exe, append(args, "-test.run=^(TestNewDatabaseIsFreshAndDropped|TestClusterSettings)$", "-test.v")...)
		cmd.Env = append(os.Environ(), "ERPLAB_PG_BINDIR=/nonexistent")
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	out, err := run("-test.short")
	if err != nil {
		t.Fatalf("-short without server binaries: %v\n%s", err, out)
	}
	for _, name := range []string{"TestNewDatabaseIsFreshAndDropped", "TestClusterSettings"} {
		if !strings.Contains(out, "--- SKIP: "+name) {
			t.Errorf("-short: %s not skipped:\n%s", name, out)
		}
	}
	if !strings.Contains(out, pgtest.SkipReason) {
		t.Errorf("-short: skip reason %q missing:\n%s", pgtest.SkipReason, out)
	}
	out, err = run()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 1 {
		t.Fatalf("without -short and without server binaries: %v, want exit status 1\n%s", err, out)
	}
	if !strings.Contains(out, "pgtest: ") || !strings.Contains(out, "/nonexistent") {
		t.Errorf("without -short: the failure does not name the missing binaries:\n%s", out)
	}
}
