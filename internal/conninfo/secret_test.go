package conninfo_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/erplab/erplab/internal/conninfo"
)

// Each case's password contains "Hunter"; argv must not.
var splitCases = []struct {
	name, in, argv string
	pw             string // "-" for none
}{
	{"kv bare", "host=h password=Hunter2 user=u", "host=h  user=u", "Hunter2"},
	{"kv quoted with space, quote and backslash", `host=h password='a Hunter\'s \\pw' user=u dbname=d`, "host=h  user=u dbname=d", `a Hunter's \pw`},
	{"kv escaped bare", `password=Hunter\ two host=h`, " host=h", "Hunter two"},
	{"kv spaces around =", "host=h password = 'Hunter 3' port=5432", "host=h  port=5432", "Hunter 3"},
	{"kv last wins", "password=xHunterA host=h password=Hunter", " host=h ", "Hunter"},
	{"kv empty password", "host=h password='' user=u", "host=h  user=u", ""},
	{"kv sslpassword kept", "host=h user=u", "host=h user=u", "-"},
	{"kv no password", "host=/tmp port=5432 user=u dbname='my db'", "host=/tmp port=5432 user=u dbname='my db'", "-"},
	{"url userinfo percent-encoded", "postgres://bob:p%40Hunter%2Fw%3Fd%25@h:5432/db?sslmode=disable", "postgres://bob@h:5432/db?sslmode=disable", "p@Hunter/w?d%"},
	{"url userinfo plus kept", "postgresql://bob:Hunter+1@h/db", "postgresql://bob@h/db", "Hunter+1"},
	{"url query password", "postgres://bob@h/db?password=Hunter%26x&sslmode=disable", "postgres://bob@h/db?sslmode=disable", "Hunter&x"},
	{"url query password plus kept", "postgres://bob@h/db?sslmode=disable&password=Hunter+x", "postgres://bob@h/db?sslmode=disable", "Hunter+x"},
	{"url query wins over userinfo", "postgres://bob:xHunterA@h/db?password=Hunter", "postgres://bob@h/db", "Hunter"},
	{"url multi-host", "postgres://bob:Hunter@h1:5432,h2:5433/db", "postgres://bob@h1:5432,h2:5433/db", "Hunter"},
	{"url unencoded @ (last one ends userinfo)", "postgres://bob:Hun@ter@h/db", "postgres://bob@h/db", "Hun@ter"},
	{"url no password", "postgres://bob@h:5432/db?application_name=a@b", "postgres://bob@h:5432/db?application_name=a@b", "-"},
	{"url no userinfo, @ in query", "postgres://h?application_name=a@b", "postgres://h?application_name=a@b", "-"},
	{"empty", "", "", "-"},
}

func TestSplit(t *testing.T) {
	for _, tc := range splitCases {
		t.Run(tc.name, func(t *testing.T) {
			argv, env, err := conninfo.Split(tc.in)
			if err != nil {
				t.Fatalf("Split(%q): %v", tc.in, err)
			}
			if argv != tc.argv {
				t.Errorf("argv %q, want %q", argv, tc.argv)
			}
			if strings.Contains(strings.ToLower(argv), "hunter") {
				t.Errorf("argv %q holds the password", argv)
			}
			if tc.pw == "-" {
				if env != nil {
					t.Errorf("env %q, want none", env)
				}
				return
			}
			if len(env) != 1 || env[0] != "PGPASSWORD="+tc.pw {
				t.Errorf("env %q, want [PGPASSWORD=%s]", env, tc.pw)
			}
			if !conninfo.HasPassword(tc.in) || conninfo.HasPassword(argv) {
				t.Errorf("HasPassword: %v for the input, %v for argv", conninfo.HasPassword(tc.in), conninfo.HasPassword(argv))
			}
		})
	}
}

// What a child reads from argv + env is what the parent read from the
// DSN: same server, user, database, password and parameters (pgx's
// parser; PGPASSWORD and passfiles of the test environment kept out).
func TestSplitSameConfig(t *testing.T) {
	t.Setenv("PGPASSFILE", filepath.Join(t.TempDir(), "none"))
	for _, tc := range splitCases {
		if tc.in == "" || strings.Contains(tc.name, "unencoded") {
			continue // "" reads the environment; pgx and libpq disagree on a raw '@'
		}
		t.Run(tc.name, func(t *testing.T) {
			os.Unsetenv("PGPASSWORD")
			want, err := pgconn.ParseConfig(tc.in)
			if err != nil {
				t.Fatalf("parent: %v", err)
			}
			argv, env, err := conninfo.Split(tc.in)
			if err != nil {
				t.Fatal(err)
			}
			for _, e := range env {
				k, v, _ := strings.Cut(e, "=")
				t.Setenv(k, v)
			}
			got, err := pgconn.ParseConfig(argv)
			if err != nil {
				t.Fatalf("child: %v", err)
			}
			if got.Host != want.Host || got.Port != want.Port || got.User != want.User || got.Database != want.Database ||
				got.Password != want.Password || len(got.Fallbacks) != len(want.Fallbacks) {
				t.Errorf("child %s:%d %s/%s pw %q, parent %s:%d %s/%s pw %q", got.Host, got.Port, got.User, got.Database, got.Password,
					want.Host, want.Port, want.User, want.Database, want.Password)
			}
			for k, v := range want.RuntimeParams {
				if got.RuntimeParams[k] != v {
					t.Errorf("parameter %s: child %q, parent %q", k, got.RuntimeParams[k], v)
				}
			}
		})
	}
}

// A password only in the environment stays there: nothing to split, and
// the child inherits it.
func TestSplitPasswordOnlyInEnv(t *testing.T) {
	t.Setenv("PGPASSWORD", "Hunter-env")
	dsn := "host=/tmp port=5999 user=u dbname=d"
	argv, env, err := conninfo.Split(dsn)
	if err != nil || argv != dsn || env != nil {
		t.Fatalf("Split = %q, %q, %v; want the DSN unchanged and no env", argv, env, err)
	}
	if conninfo.HasPassword(dsn) || conninfo.ArgvWarning("--dsn", dsn, "--dsn-file", "") != "" {
		t.Fatal("a DSN without a password counts as holding one")
	}
	cfg, err := pgconn.ParseConfig(argv)
	if err != nil || cfg.Password != "Hunter-env" {
		t.Fatalf("child reads password %q (%v), want the environment's", cfg.Password, err)
	}
}

// Strings Split cannot take apart safely are refused, without quoting them.
func TestSplitRefusesMalformed(t *testing.T) {
	for _, in := range []string{
		"host=h password='unterminated Hunter",
		"host=h password='a'Hunter",
		"host=h password=two Hunter words",
		`host=h password=Hunter\`,
		"postgres://bob:Hun?ter@h/db",
		"postgres://bob:Hun/ter@h/db",
		"postgres://bob:Hunter%zz@h/db",
	} {
		argv, env, err := conninfo.Split(in)
		if err == nil {
			t.Errorf("Split(%q) = %q, %q; want an error", in, argv, env)
			continue
		}
		if strings.Contains(strings.ToLower(err.Error()), "hun") {
			t.Errorf("Split(%q) error quotes the password: %v", in, err)
		}
		if !conninfo.HasPassword(in) {
			t.Errorf("HasPassword(%q) = false", in)
		}
	}
}

func TestArgvWarning(t *testing.T) {
	w := conninfo.ArgvWarning("--upstream", "host=h password='Hunter 1'", "--upstream-file", "ERPLAB_UPSTREAM")
	want := "warning: the password in --upstream is visible to every user of this host (ps, /proc); pass it in PGPASSWORD or ~/.pgpass (PGPASSFILE), or the whole DSN in ERPLAB_UPSTREAM or a 0600 file with --upstream-file"
	if w != want {
		t.Fatalf("warning\n %q, want\n %q", w, want)
	}
	if conninfo.ArgvWarning("--dsn", "postgres://u@h/db", "--dsn-file", "") != "" {
		t.Fatal("warning without a password")
	}
	if w := conninfo.ArgvWarning("--dsn", "postgres://u:Hunter@h/db", "--dsn-file", ""); w == "" || strings.Contains(w, "Hunter") {
		t.Fatalf("URL password: warning %q", w)
	}
	if w := conninfo.ArgvWarning("--dsn", "host=/tmp/s port=5432 password='' passfile=/tmp/p", "--dsn-file", ""); w != "" {
		t.Fatalf("empty password (erplab's throwaway server's DSN): warning %q", w)
	}
}

func TestReadFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "dsn")
	if err := os.WriteFile(path, []byte("  host=h password=Hunter\n\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if got, err := conninfo.ReadFile(path); err != nil || got != "host=h password=Hunter" {
		t.Fatalf("ReadFile = %q, %v", got, err)
	}
	for _, mode := range []os.FileMode{0o640, 0o604, 0o660, 0o644} {
		if err := os.Chmod(path, mode); err != nil {
			t.Fatal(err)
		}
		_, err := conninfo.ReadFile(path)
		if err == nil || !strings.Contains(err.Error(), "group or world access") || strings.Contains(err.Error(), "Hunter") {
			t.Errorf("mode %04o: %v, want a refusal without the content", mode, err)
		}
	}
	if err := os.Chmod(path, 0o400); err != nil {
		t.Fatal(err)
	}
	if _, err := conninfo.ReadFile(path); err != nil {
		t.Errorf("mode 0400 refused: %v", err)
	}
	if _, err := conninfo.ReadFile(dir); err == nil {
		t.Error("a directory was accepted")
	}
	if _, err := conninfo.ReadFile(filepath.Join(dir, "missing")); err == nil {
		t.Error("a missing file was accepted")
	}
}

func TestSourceResolve(t *testing.T) {
	for _, k := range []string{"PGHOST", "PGHOSTADDR", "PGPORT", "PGDATABASE", "PGUSER", "PGPASSWORD", "PGSERVICE",
		"PGSSLMODE", "PGREQUIRESSL", "PGSSLCERT", "PGSSLKEY", "PGSSLROOTCERT", "PGTARGETSESSIONATTRS"} {
		t.Setenv(k, "")
	}
	path := filepath.Join(t.TempDir(), "up")
	if err := os.WriteFile(path, []byte("host=file\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	src := conninfo.Source{Flag: "--upstream", FileFlag: "--upstream-file", EnvVar: "ERPLAB_UPSTREAM"}
	t.Setenv("ERPLAB_UPSTREAM", "host=env")
	check := func(s conninfo.Source, dsn string, given, warn bool) {
		t.Helper()
		d, g, w, err := s.Resolve()
		if err != nil || d != dsn || g != given || (w != "") != warn {
			t.Errorf("%+v: Resolve = %q, %v, %q, %v; want %q, %v, warning %v", s, d, g, w, err, dsn, given, warn)
		}
	}
	flag := src
	flag.FlagValue = "host=flag password=Hunter"
	check(flag, "host=flag password=Hunter", true, true)
	file := src
	file.File = path
	check(file, "host=file", true, false)
	check(src, "host=env", true, false)
	t.Setenv("ERPLAB_UPSTREAM", "")
	check(src, "", false, false)
	t.Setenv("PGHOST", "/tmp")
	check(src, "", true, false)
	both := flag
	both.File = path
	if _, _, _, err := both.Resolve(); err == nil {
		t.Error("--upstream and --upstream-file together were accepted")
	}
}

func TestQuoteValue(t *testing.T) {
	for in, want := range map[string]string{"x": "x", "": "''", "a b": "'a b'", `it's`: `'it\'s'`, `a\b`: `'a\\b'`} {
		if got := conninfo.QuoteValue(in); got != want {
			t.Errorf("QuoteValue(%q) = %q, want %q", in, got, want)
		}
	}
}
