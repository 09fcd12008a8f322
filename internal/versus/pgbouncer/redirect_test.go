package pgbouncer

import (
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
)

// A URL upstream is redirected to the proxy's port like a key=value one.
func TestRedirectURL(t *testing.T) {
	for _, up := range []string{"postgresql://bob:s%27cret@127.0.0.1:5999/bench", "host=/tmp port=5999 user=bob password='s\\'cret' dbname=bench"} {
		cfg, err := pgconn.ParseConfig(redirect(up, 7777))
		if err != nil {
			t.Fatalf("%s: %v", up, err)
		}
		if cfg.Host != "127.0.0.1" || cfg.Port != 7777 || cfg.User != "bob" || cfg.Database != "bench" || cfg.Password != "s'cret" {
			t.Fatalf("%s -> %s:%d user %s db %s pw %q", up, cfg.Host, cfg.Port, cfg.User, cfg.Database, cfg.Password)
		}
	}
}

// pgbouncer.ini connection-string values are single-quoted with a quote
// doubled (pgbouncer's loader.c), not libpq's backslash escapes.
func TestBouncerQuote(t *testing.T) {
	for in, want := range map[string]string{"x": "'x'", "it's a pw": "'it''s a pw'", `a\b`: `'a\b'`} {
		if got := bouncerQuote(in); got != want {
			t.Errorf("bouncerQuote(%q) = %q, want %q", in, got, want)
		}
	}
}
