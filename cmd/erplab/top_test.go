package main

import (
	"bytes"
	"context"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/erplab/erplab/internal/exitcode"
	"github.com/erplab/erplab/internal/pgcluster"
	"github.com/erplab/erplab/internal/pgtest"
)

// runRoot runs the erplab command tree in-process with args and returns
// stdout and the error.
func runRoot(t *testing.T, args ...string) (string, error) {
	t.Helper()
	for _, v := range []string{"PGHOST", "PGHOSTADDR", "PGPORT", "PGDATABASE", "PGUSER", "PGPASSWORD", "PGSERVICE"} {
		t.Setenv(v, "")
	}
	root := newRoot()
	var out bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&out)
	root.SetArgs(args)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	err := root.ExecuteContext(ctx)
	return out.String(), err
}

func TestTopUsageErrors(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"top", "--once"}, "top needs a server: give --dsn or set PGHOST"},
		{[]string{"top", "--dsn", "host=/x", "--once", "--count", "2"}, "--once and --count exclude each other"},
		{[]string{"top", "--dsn", "host=/x", "--interval", "10ms"}, "--interval must be at least 100ms"},
		{[]string{"top", "--dsn", "host=/x", "--count", "-1"}, "--count must be >= 0"},
		{[]string{"top", "--dsn", "host=/x", "--once", "--view", "locks"}, "unknown view \"locks\""},
	} {
		_, err := runRoot(t, c.args...)
		if err == nil || !strings.Contains(err.Error(), c.want) || int(exitcode.Of(err)) != exitUsage {
			t.Errorf("%v: error %v, want exit %d and %q", c.args, err, exitUsage, c.want)
		}
	}
	// No password in a connection error.
	_, err := runRoot(t, "top", "--once", "--dsn", "host=/nonexistent port=1 user=u password=hunter2")
	if err == nil || strings.Contains(err.Error(), "hunter2") || strings.Contains(err.Error(), "\n") {
		t.Errorf("connection error: %v", err)
	}
}

// TestTopOnceCommand runs `erplab top --once` in-process against a
// throwaway server and checks both tables are printed.
func TestTopOnceCommand(t *testing.T) {
	pgtest.SkipShort(t) // builds the binary and starts an embedded server
	ctx := context.Background()
	c, err := pgcluster.Start(ctx, pgcluster.Options{MaxConnections: 20, SharedBuffers: "128MB", StopWithParent: true})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Stop()
	out, err := runRoot(t, "top", "--dsn", c.DSN("postgres"), "--once", "--interval", "200ms", "--metrics-addr", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	for _, want := range []string{"serving metrics at http://127.0.0.1:", "erplab top - PostgreSQL ", "\nSESSIONS BY STATE ",
		"\nidle                                  0\n", "\nACTIVE SESSIONS BY WAIT EVENT ", "\n(no active sessions)\n",
		"\nLONGEST-RUNNING ACTIVE QUERIES\n"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}

// `top --once --view sessions` and `--view blocking` print those screens,
// filtered by --state, from the embedded server.
func TestTopViewsCommand(t *testing.T) {
	pgtest.SkipShort(t)
	ctx := context.Background()
	c, err := pgcluster.Start(ctx, pgcluster.Options{MaxConnections: 20, SharedBuffers: "128MB", StopWithParent: true})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Stop()
	out, err := runRoot(t, "top", "--dsn", c.DSN("postgres"), "--once", "--interval", "200ms", "--view", "sessions", "--state", "active")
	if err != nil || !strings.Contains(out, "sessions of every database, filter state=active: 0 shown") {
		t.Errorf("sessions view: %v\n%s", err, out)
	}
	out, err = runRoot(t, "top", "--dsn", c.DSN("postgres"), "--once", "--interval", "200ms", "--view", "blocking")
	if err != nil || !strings.Contains(out, "blocking: no session waits for a lock held by another") {
		t.Errorf("blocking view: %v\n%s", err, out)
	}
}

// top as a role without pg_monitor degrades instead of failing (it read
// the superuser-only shared_preload_libraries: 42501): one note line
// names the GRANT, the superuser's session counts as "other", and the
// sessions view lists it with what the role may see.
func TestTopWithoutMonitor(t *testing.T) {
	dsn := srv.NewDatabase(t)
	role, roleDSN := srv.NewRole(t, dsn)
	admin, err := pgx.Connect(context.Background(), dsn) // hidden from the role
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(context.Background())
	var pid int
	if err := admin.QueryRow(context.Background(), "SELECT pg_backend_pid()").Scan(&pid); err != nil {
		t.Fatal(err)
	}
	out, err := runRoot(t, "top", "--dsn", roleDSN, "--once", "--interval", "200ms")
	note := "note: role " + role + " lacks pg_read_all_stats (GRANT pg_monitor TO " + role + "): other users' sessions count as \"other\""
	if err != nil || !strings.Contains(out, note) || !regexp.MustCompile(`\nother +[1-9]\d*\n`).MatchString(out) {
		t.Errorf("top --once as %s: %v\n%s\nwant the line %q and other sessions counted", role, err, out, note)
	}
	out, err = runRoot(t, "top", "--dsn", roleDSN, "--once", "--interval", "200ms", "--view", "sessions")
	if row := regexp.MustCompile(`(?m)^\s*` + strconv.Itoa(pid) + `\s+\S+\s+postgres\s.*<insufficient`).FindString(out); err != nil || row == "" {
		t.Errorf("sessions view as %s lacks the superuser's session %d: %v\n%s", role, pid, err, out)
	}
}
