package main

import (
	"context"
	"errors"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/erplab/erplab/internal/pgcluster"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// smartShutdown puts c into a smart shutdown (SIGTERM to the postmaster,
// as pg_ctl stop -m smart) held by a session of its own, so that the
// server stays "shutting down", refusing new connections with 57P03,
// until release; it waits for the first refusal, then ends the run's
// sessions (application_name erplab...) so that the run must reconnect.
// release closes the held session and waits for the postmaster to exit.
func smartShutdown(t *testing.T, c *pgcluster.Cluster) (release func()) {
	t.Helper()
	ctx := context.Background()
	held, err := pgx.Connect(ctx, c.DSN("postgres"))
	if err != nil {
		t.Fatal(err)
	}
	pid := c.PID()
	release = func() {
		held.Close(ctx)
		for deadline := time.Now().Add(time.Minute); syscall.Kill(pid, 0) == nil; time.Sleep(20 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("postmaster %d still runs a minute after its smart shutdown was released", pid)
			}
		}
	}
	t.Cleanup(func() { held.Close(ctx) })
	if err := syscall.Kill(pid, syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(20 * time.Millisecond) {
		conn, err := pgconn.Connect(ctx, c.DSN("postgres"))
		if err == nil {
			conn.Close(ctx)
		}
		var pgErr *pgconn.PgError
		if errors.As(err, &pgErr) && pgErr.Code == "57P03" && strings.Contains(pgErr.Message, "shutting down") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no 57P03 \"shutting down\" a minute after SIGTERM (last: %v)", err)
		}
	}
	if _, err := held.Exec(ctx, "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name LIKE 'erplab%'"); err != nil {
		t.Fatal(err)
	}
	return release
}

// A server stuck in "shutting down" (a smart shutdown that another
// session holds) refuses the run's new connections with 57P03 "the
// database system is shutting down": that server is going, not coming
// back. For --server-gone-after the run is aborted, lost the server,
// exit 7, the progress line saying so meanwhile; in the last seconds of
// a run (less than --server-gone-after) the run ends "lost", exit 7,
// not "completed" with exit 0.
func TestServerShuttingDownCLI(t *testing.T) {
	c, _, _ := freezableCluster(t)
	dsn := newDatabase(t, c, "s")

	cmd, buf, exited := startRun(t, dsn, "60s", "--server-gone-after", "3s")
	waitFor(t, buf, exited, " 1s/1m0s ")
	release := smartShutdown(t, c)
	select {
	case <-exited:
	case <-time.After(2 * time.Minute):
		t.Fatalf("still running 2 min after the shutdown:\n%s", buf.String())
	}
	s := buf.String()
	if code := cmd.ProcessState.ExitCode(); code != exitNotAnswering {
		t.Fatalf("exit %d, want %d\n%s", code, exitNotAnswering, s)
	}
	for _, want := range []string{"[server shutting down for ", "run aborted: lost the server: no operation succeeded for ", "the database system is shutting down (SQLSTATE 57P03)"} {
		if !strings.Contains(s, want) {
			t.Fatalf("output lacks %q:\n%s", want, s)
		}
	}
	logLines(t, s, "[server shutting down", "run aborted", "erplab: ")
	release()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := c.Restart(ctx); err != nil {
		t.Fatal(err)
	}

	// Shut down less than --server-gone-after (30 s) before the end.
	cmd, buf, exited = startRun(t, dsn, "20s")
	waitFor(t, buf, exited, " 1s/20s ")
	release = smartShutdown(t, c)
	defer release()
	<-exited
	s = buf.String()
	if code := cmd.ProcessState.ExitCode(); code != exitNotAnswering {
		t.Fatalf("exit %d, want %d\n%s", code, exitNotAnswering, s)
	}
	for _, want := range []string{"run lost: no operation succeeded from t=", " s to the end (the server was shutting down, refusing connections)", "errors by SQLSTATE: 57P03 x"} {
		if !strings.Contains(s, want) {
			t.Fatalf("output lacks %q:\n%s", want, s)
		}
	}
	logLines(t, s, "run lost", "errors by SQLSTATE", "erplab: ")
}

// logLines logs the lines of out that contain any of subs.
func logLines(t *testing.T, out string, subs ...string) {
	t.Helper()
	for _, l := range strings.Split(out, "\n") {
		for _, sub := range subs {
			if strings.Contains(l, sub) {
				t.Log(l)
				break
			}
		}
	}
}
