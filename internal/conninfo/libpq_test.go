package conninfo

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
)

func TestWithDBName(t *testing.T) {
	flags := []Param{{"host", "/a"}, {"port", "5433"}, {"user", "u"}}
	for _, c := range []struct {
		params []Param
		dbname string
		want   string
	}{
		{flags, "bench", "host=/a port=5433 user=u dbname=bench"},
		{flags, "", "host=/a port=5433 user=u"},
		{[]Param{{"host", "/a b"}, {"user", ""}}, "it's", `host='/a b' dbname='it\'s'`},
		{flags, "dbname=b host=/c", "host=/a port=5433 user=u dbname=b host=/c"},
		{nil, "service=mysvc", "service=mysvc"},
		{flags, "postgresql:///bench?host=/tmp/x&port=5477", "postgresql:///bench?host=/tmp/x&port=5477&user=u"},
		{flags, "postgres://v@h:1/db", "postgres://v@h:1/db"},
		{flags, "postgres://h/db", "postgres://h/db?port=5433&user=u"},
		{[]Param{{"host", "/a"}, {"application_name", "pgbench x"}}, "postgresql://", "postgresql://?host=%2Fa&application_name=pgbench%20x"},
		{flags, "postgresql:///db?", "postgresql:///db?host=%2Fa&port=5433&user=u"},
		{flags, "postgresql:///db?dbname=x&user=w", "postgresql:///db?dbname=x&user=w&host=%2Fa&port=5433"},
	} {
		got := WithDBName(c.params, c.dbname)
		if got != c.want {
			t.Errorf("WithDBName(%v, %q) = %q, want %q", c.params, c.dbname, got, c.want)
			continue
		}
		// What pgx reads: the expanded parameters win over the flags.
		if c.dbname == "service=mysvc" {
			continue
		}
		if _, err := pgconn.ParseConfig(got); err != nil {
			t.Errorf("%q: %v", got, err)
		}
	}
	cfg, err := pgconn.ParseConfig(WithDBName(flags, "postgresql:///bench?host=/tmp/x&port=5477"))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Host != "/tmp/x" || cfg.Port != 5477 || cfg.User != "u" || cfg.Database != "bench" {
		t.Errorf("URI over flags: host %q port %d user %q db %q", cfg.Host, cfg.Port, cfg.User, cfg.Database)
	}
	cfg, err = pgconn.ParseConfig(WithDBName(append(flags, Param{"application_name", "pgbench"}), "dbname=bench application_name=x"))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Host != "/a" || cfg.Database != "bench" || cfg.RuntimeParams["application_name"] != "x" {
		t.Errorf("key/value over flags: host %q db %q app %q", cfg.Host, cfg.Database, cfg.RuntimeParams["application_name"])
	}
}

func TestIsConnString(t *testing.T) {
	for s, want := range map[string]bool{
		"bench": false, "a=b": true, "postgresql://": true, "postgres:///x": true,
		"postgresx://": false, "Postgresql://h": false, "": false,
	} {
		if IsConnString(s) != want {
			t.Errorf("IsConnString(%q) = %v", s, !want)
		}
	}
}

// WithPassfile makes pgx's password-file lookup libpq's, from a file
// written here (no server involved: only the resulting DSN is read).
func TestWithPassfile(t *testing.T) {
	t.Setenv(PasswordEnv, "")
	dir := t.TempDir()
	pass := filepath.Join(dir, "pgpass")
	write := func(content string, mode os.FileMode) {
		t.Helper()
		if err := os.WriteFile(pass, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(pass, mode); err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv("PGPASSFILE", pass)
	password := func(dsn string) string {
		t.Helper()
		cfg, err := pgconn.ParseConfig(WithPassfile(dsn))
		if err != nil {
			t.Fatal(err)
		}
		return cfg.Password
	}
	sock := "host=/tmp/trialpg port=5477 dbname=bench user=pwuser"
	write("/tmp/trialpg:5477:bench:pwuser:pw123\n", 0o600)
	if got := password(sock); got != "pw123" {
		t.Errorf("socket-directory line: password %q, want pw123", got)
	}
	if got := password("postgresql:///bench?host=/tmp/trialpg&port=5477&user=pwuser"); got != "pw123" {
		t.Errorf("socket-directory line, URI: password %q, want pw123", got)
	}
	if got := WithPassfile(sock); !strings.Contains(Redact(got), "password="+Mask) || strings.Contains(Redact(got), "pw123") {
		t.Errorf("redacted: %q", Redact(got))
	}
	write("localhost:5477:bench:pwuser:pw123\n", 0o600)
	if got := password(sock); got != "" {
		t.Errorf("localhost line, socket /tmp/trialpg: password %q, want none (libpq)", got)
	}
	if got := password("host=" + DefaultSocketDir + " port=5477 dbname=bench user=pwuser"); got != "pw123" {
		t.Errorf("localhost line, default socket directory: password %q, want pw123", got)
	}
	if got := password("host=localhost port=5477 dbname=bench user=pwuser"); got != "pw123" {
		t.Errorf("localhost line over TCP: password %q", got)
	}
	// No dbname: libpq matches the user name.
	write("/tmp/trialpg:5477:pwuser:pwuser:pw9\n", 0o600)
	if got := password("host=/tmp/trialpg port=5477 user=pwuser"); got != "pw9" {
		t.Errorf("no dbname: password %q, want pw9", got)
	}
	// An explicit password wins; PGPASSWORD too (WithPassfile leaves it).
	write("/tmp/trialpg:5477:bench:pwuser:pw123\n", 0o600)
	if got := password(sock + " password=other"); got != "other" {
		t.Errorf("explicit password: %q", got)
	}
	if got := WithPassfile(sock + " password=other"); got != sock+" password=other" {
		t.Errorf("explicit password changed the DSN: %q", got)
	}
	t.Setenv(PasswordEnv, "fromenv")
	if got := password(sock); got != "fromenv" {
		t.Errorf("PGPASSWORD: %q", got)
	}
	t.Setenv(PasswordEnv, "")
	// libpq ignores a file others may read.
	write("*:*:*:*:pw123\n", 0o644)
	if got := password(sock); got != "" {
		t.Errorf("mode 0644: password %q, want none", got)
	}
	// The DSN's passfile wins over PGPASSFILE.
	other := filepath.Join(dir, "other")
	if err := os.WriteFile(other, []byte("/tmp/trialpg:*:*:*:pwX\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if got := password(sock + " passfile=" + other); got != "pwX" {
		t.Errorf("passfile in DSN: %q", got)
	}
	if got := WithPassfile("port=abc"); got != "port=abc" {
		t.Errorf("unparsable DSN changed: %q", got)
	}
}

func TestRedactArgsGlued(t *testing.T) {
	in := []string{"-dpassword=s3cret", "--dbname=postgresql://u:s3cret@h/db", "-nSdpostgres://u:s3cret@h/db",
		"--dbname=host=h password=s3cret", "-d", "host=h password='s3cret'", "postgresql:///b?password=s3cret", "-c10"}
	out := RedactArgs(in)
	for i, a := range out {
		if strings.Contains(a, "s3cret") {
			t.Errorf("%q -> %q", in[i], a)
		}
	}
	if out[7] != "-c10" || out[1] != "--dbname=postgresql://u:"+Mask+"@h/db" {
		t.Errorf("changed: %q", out)
	}
}

func TestIsParam(t *testing.T) {
	for arg, want := range map[string]bool{
		"port=1": true, "host=/tmp": true, "sslmode=": true, "load_balance_hosts=random": true,
		"x=1": false, "port": false, "SELECT a=1": false, "Port=1": false, "=1": false, "file.sql": false,
	} {
		if got := IsParam(arg); got != want {
			t.Errorf("IsParam(%q) = %v, want %v", arg, got, want)
		}
	}
}
