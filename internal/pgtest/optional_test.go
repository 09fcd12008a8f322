package pgtest_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/erplab/erplab/internal/pgtest"
)

// skipRecorder is a testing.TB that records a skip instead of ending the
// test (the Need functions return after Skipf when it does not stop).
type skipRecorder struct {
	testing.TB
	skip string
}

func (r *skipRecorder) Skipf(format string, args ...any) { r.skip = fmt.Sprintf(format, args...) }
func (r *skipRecorder) Skip(args ...any)                 { r.skip = fmt.Sprint(args...) }

// A missing optional piece skips with one line naming it and its Debian
// package; a present one does not skip.
func TestNeed(t *testing.T) {
	r := &skipRecorder{TB: t}
	pgtest.Need(r, "pgbouncer", errors.New("not found\nsecond line"))
	if want := "needs pgbouncer (Debian package pgbouncer): not found"; r.skip != want {
		t.Errorf("Need: skip %q, want %q", r.skip, want)
	}
	r = &skipRecorder{TB: t}
	pgtest.Need(r, "pgreplay", nil)
	if r.skip != "" {
		t.Errorf("Need with nil error skipped: %q", r.skip)
	}

	r = &skipRecorder{TB: t}
	if p := pgtest.NeedProgram(r, "erplab-no-such-program", "/nonexistent/erplab-no-such-program"); p != "" || r.skip != "needs erplab-no-such-program (Debian package ?): not installed (looked for erplab-no-such-program, /nonexistent/erplab-no-such-program)" {
		t.Errorf("NeedProgram of a missing program: %q, skip %q", p, r.skip)
	}
	r = &skipRecorder{TB: t}
	if p := pgtest.NeedProgram(r, "erplab-no-such-program", "sh"); p == "" || r.skip != "" {
		t.Errorf("NeedProgram(sh): %q, skip %q", p, r.skip)
	}
}

// NeedExtension asks the server: plpgsql is always available, an unknown
// extension skips naming it.
func TestNeedExtension(t *testing.T) {
	dsn := srv.DSN(t, "postgres")
	r := &skipRecorder{TB: t}
	pgtest.NeedExtension(r, dsn, "plpgsql")
	if r.skip != "" {
		t.Errorf("plpgsql: skip %q", r.skip)
	}
	pgtest.NeedExtension(r, dsn, "erplab_no_such_extension")
	if want := "needs erplab_no_such_extension (Debian package ?): the extension is not installed on the server (not in pg_available_extensions)"; r.skip != want {
		t.Errorf("unknown extension: skip %q, want %q", r.skip, want)
	}
}

// NewRole's role logs in, lacks pg_monitor, and is gone after the test.
func TestNewRole(t *testing.T) {
	ctx := context.Background()
	var role string
	t.Run("sub", func(t *testing.T) {
		var dsn string
		role, dsn = srv.NewRole(t, srv.NewDatabase(t))
		conn, err := pgx.Connect(ctx, dsn)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close(ctx)
		var user string
		var monitor bool
		if err := conn.QueryRow(ctx, "SELECT current_user::text, pg_has_role(current_user, 'pg_monitor', 'USAGE')").Scan(&user, &monitor); err != nil {
			t.Fatal(err)
		}
		if user != role || monitor {
			t.Errorf("connected as %q (pg_monitor %v), want %q without pg_monitor", user, monitor, role)
		}
	})
	conn, err := pgx.Connect(ctx, srv.DSN(t, "postgres"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var n int
	if err := conn.QueryRow(ctx, "SELECT count(*)::int4 FROM pg_roles WHERE rolname = $1", role).Scan(&n); err != nil || n != 0 {
		t.Errorf("role %q left after the test: %d (%v)", role, n, err)
	}
}
