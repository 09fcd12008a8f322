package conninfo_test

import (
	"strings"
	"testing"

	"github.com/erplab/erplab/internal/conninfo"
	"github.com/jackc/pgx/v5/pgconn"
)

// Every password in these cases contains "secret" (any case) or "hunter";
// outputs must not.
var redactCases = []struct{ in, want string }{
	// URI form.
	{"postgres://u:secret@h/db", "postgres://u:xxxxx@h/db"},
	{"postgresql://u:secret@h1:5432,h2:5433/db?sslmode=disable", "postgresql://u:xxxxx@h1:5432,h2:5433/db?sslmode=disable"},
	{"postgres://u@h/db?password=secret&sslmode=require", "postgres://u@h/db?password=xxxxx&sslmode=require"},
	{"postgres://u@h/db?sslmode=require&sslpassword=secret", "postgres://u@h/db?sslmode=require&sslpassword=xxxxx"},
	{"postgres://u@h/db?pass%77ord=secret", "postgres://u@h/db?pass%77ord=xxxxx"},
	{"postgres://u:se%40cret@h/db", "postgres://u:xxxxx@h/db"},
	{"postgres://u:hun@ter@h/db", "postgres://u:xxxxx@h/db"},
	{"postgres://u:hun/ter@h/db", "postgres://u:xxxxx@h/db"},
	{"postgres://u:hun?ter@h/db?sslmode=disable", "postgres://u:xxxxx@h/db?sslmode=disable"},
	{"postgres://u:hun/ter@h/db@x?application_name=a", "postgres://u:xxxxx@x?application_name=a"},
	{"postgres://u:secret@", "postgres://u:xxxxx@"},
	{"postgres://u:secret", "postgres://u:xxxxx"},
	{"postgres://u:secret/db", "postgres://u:xxxxx/db"},
	{"  POSTGRES://u:secret@h", "  POSTGRES://u:xxxxx@h"},
	{"pg://u:secret@h", "pg://u:xxxxx@h"},
	{"postgres://u:@h/db", "postgres://u:xxxxx@h/db"},
	// No password: unchanged.
	{"postgres://h:5432/db?application_name=a@b", "postgres://h:5432/db?application_name=a@b"},
	{"postgres://h/db?options=-c%20a:b@c", "postgres://h/db?options=-c%20a:b@c"},
	{"postgres://[::1]:5432/db", "postgres://[::1]:5432/db"},
	{"postgres://u@h", "postgres://u@h"},
	{"postgres://", "postgres://"},
	// Keyword/value form.
	{"host=h password=secret user=u", "host=h password=xxxxx user=u"},
	{"host=h password='a secret' user=u", "host=h password=xxxxx user=u"},
	{"password = secret host=h", "password = xxxxx host=h"},
	{`password='it\'s secret' host=h`, "password=xxxxx host=h"},
	{`password=a\ secret host=h`, "password=xxxxx host=h"},
	{"password='unterminated secret host=h", "password=xxxxx"},
	{"host=h password=two secret words user=u", "host=h password=xxxxx xxxxx xxxxx user=u"},
	{"PassWord=secret", "PassWord=xxxxx"},
	{"host=h sslpassword=secret", "host=h sslpassword=xxxxx"},
	{"password='a'secret host=h", "password=xxxxx host=h"},
	{"host=h\tpassword=secret\nuser=u", "host=h\tpassword=xxxxx\nuser=u"},
	{"password=", "password=xxxxx"},
	{`password=secret\`, "password=xxxxx"},
	{"host=h user=u dbname=d", "host=h user=u dbname=d"},
	{"application_name=password=x host=h", "application_name=password=x host=h"},
	{"", ""},
	{"garbage", "garbage"},
}

func TestRedact(t *testing.T) {
	for _, tc := range redactCases {
		got := conninfo.Redact(tc.in)
		if got != tc.want {
			t.Errorf("Redact(%q) = %q, want %q", tc.in, got, tc.want)
		}
		low := strings.ToLower(got)
		if strings.Contains(low, "secret") || strings.Contains(low, "hunter") || strings.Contains(low, "ter@") {
			t.Errorf("Redact(%q) = %q leaks the password", tc.in, got)
		}
	}
}

// TestRedactKeepsValidDSN checks that a redacted valid DSN still parses
// (pgconn.ParseConfig) to the same server, user and database.
func TestRedactKeepsValidDSN(t *testing.T) {
	for _, dsn := range []string{
		"postgres://alice:s3cr%2Ft@db.example.com:6543/erp?sslmode=disable&application_name=lab",
		"host=db.example.com port=6543 user=alice password='p w' dbname=erp sslmode=disable",
	} {
		orig, err := pgconn.ParseConfig(dsn)
		if err != nil {
			t.Fatalf("ParseConfig(original): %v", err)
		}
		red, err := pgconn.ParseConfig(conninfo.Redact(dsn))
		if err != nil {
			t.Fatalf("ParseConfig(Redact(%q)): %v", dsn, err)
		}
		if red.Host != orig.Host || red.Port != orig.Port || red.User != orig.User || red.Database != orig.Database {
			t.Errorf("Redact changed the target: %s:%d %s/%s, want %s:%d %s/%s",
				red.Host, red.Port, red.User, red.Database, orig.Host, orig.Port, orig.User, orig.Database)
		}
		if red.Password != conninfo.Mask {
			t.Errorf("redacted password = %q, want %q", red.Password, conninfo.Mask)
		}
	}
}

func TestFromEnvOrFlag(t *testing.T) {
	for _, name := range []string{"PGHOST", "PGHOSTADDR", "PGPORT", "PGDATABASE", "PGUSER", "PGPASSWORD",
		"PGSERVICE", "PGSSLMODE", "PGREQUIRESSL", "PGSSLCERT", "PGSSLKEY", "PGSSLROOTCERT", "PGTARGETSESSIONATTRS"} {
		t.Setenv(name, "")
	}
	t.Setenv("PGAPPNAME", "erplab") // tuning only: does not name a server

	if dsn, given := conninfo.FromEnvOrFlag(""); given || dsn != "" {
		t.Fatalf("no flag, no env: got (%q, %v), want (\"\", false)", dsn, given)
	}
	if dsn, given := conninfo.FromEnvOrFlag("host=x"); !given || dsn != "host=x" {
		t.Fatalf("flag: got (%q, %v), want (\"host=x\", true)", dsn, given)
	}
	t.Setenv("PGPORT", "5433")
	if dsn, given := conninfo.FromEnvOrFlag(""); !given || dsn != "" {
		t.Fatalf("PGPORT set: got (%q, %v), want (\"\", true)", dsn, given)
	}
	if got := conninfo.EnvVarsSet(); len(got) != 1 || got[0] != "PGPORT" {
		t.Fatalf("EnvVarsSet() = %v, want [PGPORT]", got)
	}
	if dsn, given := conninfo.FromEnvOrFlag("host=y"); !given || dsn != "host=y" {
		t.Fatalf("flag and env: got (%q, %v), want the flag", dsn, given)
	}
}

// A command line as a results document keeps it: the password of --dsn
// (both spellings) and of a positional connection string is hidden, every
// other argument unchanged.
func TestRedactArgs(t *testing.T) {
	in := []string{"erplab", "capacity", "--dsn", "postgres://u:s3cretpw@127.0.0.1:1/db", "--dsn=host=h password=kvsecret user=u",
		"host=h password='a b'", "--users", "10"}
	got := strings.Join(conninfo.RedactArgs(in), " ")
	for _, secret := range []string{"s3cretpw", "kvsecret", "'a b'"} {
		if strings.Contains(got, secret) {
			t.Errorf("%q in %q", secret, got)
		}
	}
	if want := "erplab capacity --dsn postgres://u:xxxxx@127.0.0.1:1/db --dsn=host=h password=xxxxx user=u host=h password=xxxxx --users 10"; got != want {
		t.Errorf("got  %q\nwant %q", got, want)
	}
	if conninfo.RedactArgs(nil) != nil || in[3] != "postgres://u:s3cretpw@127.0.0.1:1/db" {
		t.Error("RedactArgs changed its input or made a nil line non-nil")
	}
}
