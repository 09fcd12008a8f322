package pgtest

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/erplab/erplab/internal/profile"
)

// Optional pieces of the test machine. The suite needs only Go and the
// PostgreSQL server (Debian's postgresql); a test that uses anything else
// calls one of the Need functions below, which skips it with one line
// naming the piece and the Debian package that brings it. .ci/run
// installs them all, so CI runs these tests; a fresh machine skips them.

// debianPackage is the Debian package that brings piece.
func debianPackage(piece string) string {
	switch piece {
	case "pg_wait_sampling":
		return "postgresql-<major>-pg-wait-sampling"
	case "pg_stat_statements", "pgstattuple", "pg_visibility":
		return "postgresql-contrib"
	case "perf":
		return "linux-perf"
	case "chromium", "pgbouncer", "pgreplay":
		return piece
	}
	return "?"
}

// Need skips t when err, the outcome of looking for the optional piece
// (a program or an extension), is not nil: "needs pgbouncer (Debian
// package pgbouncer): <err>", on one line.
func Need(t testing.TB, piece string, err error) {
	t.Helper()
	if err == nil {
		return
	}
	msg := err.Error()
	if i := strings.IndexByte(msg, '\n'); i >= 0 {
		msg = msg[:i]
	}
	t.Skipf("needs %s (Debian package %s): %s", piece, debianPackage(piece), msg)
}

// NeedProgram returns the path of the first of names found (exec.LookPath:
// a name on PATH or a path), or skips t (Need) naming the piece, names[0].
func NeedProgram(t testing.TB, names ...string) string {
	t.Helper()
	for _, n := range names {
		if p, err := exec.LookPath(n); err == nil {
			return p
		}
	}
	Need(t, names[0], fmt.Errorf("not installed (looked for %s)", strings.Join(names, ", ")))
	return ""
}

// NeedPerf returns the perf binary when it can sample every CPU here
// (profile.Check: installed, runs for this kernel, permitted), or skips t
// with the reason (Need).
func NeedPerf(t testing.TB) string {
	t.Helper()
	perf, _, err := profile.Check(context.Background(), profile.Host{})
	Need(t, "perf", err)
	return perf
}

// NeedExtension skips t (Need) unless the server of dsn has the extension
// installed (pg_available_extensions: its control file is there, so
// CREATE EXTENSION can work).
func NeedExtension(t testing.TB, dsn, ext string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), adminTimeout)
	defer cancel()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	defer conn.Close(context.Background())
	var ok bool
	if err := conn.QueryRow(ctx, "SELECT EXISTS (SELECT FROM pg_catalog.pg_available_extensions WHERE name = $1)", ext).Scan(&ok); err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	if !ok {
		Need(t, ext, errors.New("the extension is not installed on the server (not in pg_available_extensions)"))
	}
}
