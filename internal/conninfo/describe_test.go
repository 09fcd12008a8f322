package conninfo_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/erplab/erplab/internal/conninfo"
	"github.com/erplab/erplab/internal/pgtest"
	"github.com/jackc/pgx/v5"
)

var srv *pgtest.Server

func TestMain(m *testing.M) { os.Exit(pgtest.Run(m, &srv)) }

// password is put in every DSN below; Describe must never show it.
const password = "hunter2-S3cret"

// connectErr connects with pgx and returns the error, failing the test if
// the connection succeeds.
func connectErr(t *testing.T, dsn string) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, dsn)
	if err == nil {
		conn.Close(ctx)
		t.Fatalf("connect to %q succeeded, want an error", conninfo.Redact(dsn))
	}
	return err
}

// checkDescribe asserts Describe(err) == want and hides the password.
func checkDescribe(t *testing.T, err error, want string) {
	t.Helper()
	got := conninfo.Describe(err)
	if got != want {
		t.Errorf("Describe:\n got  %s\n want %s\n (error: %s)", got, want, conninfo.Redact(err.Error()))
	}
	for _, part := range []string{password, "hunter2", "S3cret"} {
		if strings.Contains(got, part) {
			t.Errorf("Describe leaks the password: %s", got)
		}
	}
	if strings.Contains(got, "\n") {
		t.Errorf("Describe is not one line: %q", got)
	}
}

func TestDescribeNil(t *testing.T) {
	if got := conninfo.Describe(nil); got != "" {
		t.Fatalf("Describe(nil) = %q", got)
	}
}

func TestDescribeConnectionRefused(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close() // nothing listens there now
	err = connectErr(t, fmt.Sprintf("host=127.0.0.1 port=%d user=postgres password=%s dbname=postgres sslmode=disable", port, password))
	checkDescribe(t, err, fmt.Sprintf("cannot reach server at 127.0.0.1:%d: connection refused; is PostgreSQL running there? check host and port in --dsn", port))
}

func TestDescribeNoSocket(t *testing.T) {
	dir := t.TempDir()
	err := connectErr(t, fmt.Sprintf("host=%s port=5432 user=postgres password=%s sslmode=disable", dir, password))
	checkDescribe(t, err, fmt.Sprintf("cannot reach server at %s/.s.PGSQL.5432: no such socket; is PostgreSQL running there? check host and port in --dsn", dir))
}

func TestDescribeMissingDatabase(t *testing.T) {
	err := connectErr(t, srv.DSN(t, "no_such_db")+" password="+password)
	checkDescribe(t, err, `database "no_such_db" does not exist; create it or pass another dbname in --dsn`)
}

func TestDescribeMissingRole(t *testing.T) {
	err := connectErr(t, srv.DSN(t, "postgres")+" user=no_such_role password="+password)
	checkDescribe(t, err, `authentication failed: role "no_such_role" does not exist; check user and password in --dsn (or PGUSER/PGPASSWORD, ~/.pgpass) and the server's pg_hba.conf`)
}

// TestDescribeWrongPassword makes the test cluster ask for a password over
// TCP for one role (pg_hba.conf line, then pg_reload_conf) and connects with
// a wrong one.
func TestDescribeWrongPassword(t *testing.T) {
	ctx := context.Background()
	admin := srv.Pool(t, srv.DSN(t, "postgres"))
	if _, err := admin.Exec(ctx, "CREATE ROLE pw_user LOGIN PASSWORD 'right-Passw0rd'"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = admin.Exec(context.Background(), "DROP ROLE pw_user") })

	hba := filepath.Join(srv.Cluster(t).DataDir(), "pg_hba.conf")
	orig, err := os.ReadFile(hba)
	if err != nil {
		t.Fatal(err)
	}
	// os.WriteFile keeps the existing file's owner and mode.
	if err := os.WriteFile(hba, append([]byte("host all pw_user 127.0.0.1/32 scram-sha-256\n"), orig...), 0o600); err != nil {
		t.Fatal(err)
	}
	reload := func() {
		var ok bool
		if err := admin.QueryRow(context.Background(), "SELECT pg_reload_conf()").Scan(&ok); err != nil || !ok {
			t.Fatalf("pg_reload_conf: %v %v", ok, err)
		}
	}
	reload()
	t.Cleanup(func() {
		if err := os.WriteFile(hba, orig, 0o600); err != nil {
			t.Error(err)
		}
		reload()
	})

	tcp := func(pw string) string {
		return fmt.Sprintf("host=127.0.0.1 port=%d user=pw_user password=%s dbname=postgres sslmode=disable",
			srv.Cluster(t).Port(), pw)
	}
	// The right password works once the new rule is loaded, so the rule is
	// really in force when the wrong one is rejected.
	deadline := time.Now().Add(10 * time.Second)
	for {
		conn, err := pgx.Connect(ctx, tcp("right-Passw0rd"))
		if err == nil {
			conn.Close(ctx)
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("right password rejected: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	var err2 error
	for {
		conn, err := pgx.Connect(ctx, tcp(password))
		if err != nil {
			err2 = err
			break
		}
		conn.Close(ctx) // trust rule still active: the reload has not landed yet
		if time.Now().After(deadline) {
			t.Fatal("wrong password accepted: pg_hba.conf change not in effect")
		}
		time.Sleep(20 * time.Millisecond)
	}
	checkDescribe(t, err2, `authentication failed: password authentication failed for user "pw_user"; check user and password in --dsn (or PGUSER/PGPASSWORD, ~/.pgpass) and the server's pg_hba.conf`)
}

func TestDescribeTooManyConnections(t *testing.T) {
	ctx := context.Background()
	admin := srv.Pool(t, srv.DSN(t, "postgres"))
	if _, err := admin.Exec(ctx, "CREATE ROLE limited_user LOGIN CONNECTION LIMIT 0"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = admin.Exec(context.Background(), "DROP ROLE limited_user") })
	err := connectErr(t, srv.DSN(t, "postgres")+" user=limited_user password="+password)
	checkDescribe(t, err, `server refused the connection: too many connections for role "limited_user"; lower the number of connections (virtual users, pool size) or raise max_connections`)
}

func TestDescribeNoConnectPrivilege(t *testing.T) {
	ctx := context.Background()
	dsn := srv.NewDatabase(t)
	admin := srv.Pool(t, srv.DSN(t, "postgres"))
	var db string
	if err := srv.Pool(t, dsn).QueryRow(ctx, "SELECT current_database()").Scan(&db); err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{
		"CREATE ROLE noconnect_user LOGIN",
		"REVOKE CONNECT ON DATABASE " + pgx.Identifier{db}.Sanitize() + " FROM PUBLIC",
	} {
		if _, err := admin.Exec(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() { _, _ = admin.Exec(context.Background(), "DROP ROLE noconnect_user") })
	err := connectErr(t, dsn+" user=noconnect_user password="+password)
	checkDescribe(t, err, fmt.Sprintf(`not allowed to connect: permission denied for database "%s"; GRANT CONNECT on the database or pass another user in --dsn`, db))
}

func TestDescribeTLSRefused(t *testing.T) {
	err := connectErr(t, fmt.Sprintf("host=127.0.0.1 port=%d user=postgres password=%s sslmode=require",
		srv.Cluster(t).Port(), password))
	checkDescribe(t, err, fmt.Sprintf("server at 127.0.0.1:%d does not accept TLS (SSL); use sslmode=disable or sslmode=prefer in --dsn", srv.Cluster(t).Port()))
}

func TestDescribeInvalidDSN(t *testing.T) {
	cases := []struct{ dsn, want string }{
		{"host=h port=notaport password=" + password, "invalid --dsn: invalid port"},
		{"host=h password=hunter2 S3cret dbname=x", `invalid --dsn: failed to parse as keyword/value (missing "=" after "xxxxx" in connection info string)`},
		{"postgres://u:hunter2%zzS3cret@h/db", "invalid --dsn: failed to parse as URL"},
	}
	for _, tc := range cases {
		err := connectErr(t, tc.dsn)
		got := conninfo.Describe(err)
		// The exact wording after the prefix comes from pgx; check the
		// start and that no part of the password shows.
		if !strings.HasPrefix(got, tc.want) {
			t.Errorf("Describe(%s):\n got  %s\n want prefix %s", conninfo.Redact(tc.dsn), got, tc.want)
		}
		for _, part := range []string{password, "hunter2", "S3cret", "%zz"} {
			if strings.Contains(got, part) {
				t.Errorf("Describe leaks %q: %s", part, got)
			}
		}
	}
}

func TestDescribeOtherErrors(t *testing.T) {
	if got := conninfo.Describe(errors.New("boom")); got != "cannot connect: boom" {
		t.Errorf("Describe(plain error) = %q", got)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := pgx.Connect(ctx, srv.DSN(t, "postgres"))
	if err == nil {
		t.Fatal("connect with a cancelled context succeeded")
	}
	want := fmt.Sprintf("connection attempt at %s/.s.PGSQL.%d cancelled", srv.Cluster(t).SocketDir(), srv.Cluster(t).Port())
	if got := conninfo.Describe(err); got != want {
		t.Errorf("Describe(cancelled) = %q, want %q", got, want)
	}
}

// TestDescribeDNS formats a resolver failure; the error value is built by
// hand because name resolution in CI sandboxes may hang instead of failing.
func TestDescribeDNS(t *testing.T) {
	err := fmt.Errorf("hostname resolving error: %w", &net.DNSError{Err: "no such host", Name: "db.invalid", IsNotFound: true})
	want := `cannot resolve host "db.invalid": no such host; check host in --dsn`
	if got := conninfo.Describe(err); got != want {
		t.Errorf("Describe(DNS error) = %q, want %q", got, want)
	}
}
