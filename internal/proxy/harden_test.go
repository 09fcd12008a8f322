package proxy

import (
	"context"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
)

// deepStatement crashed the proxy (SIGSEGV in the C parser) before
// CheckLimits; a direct connection gets "stack depth limit exceeded".
func deepStatement() string {
	return "select 1 where 1=0 or 1 in (select 1) or 0=(" + strings.Repeat("1+", 30000) + "1)"
}

func TestDeepStatementPassesThrough(t *testing.T) {
	ctx := context.Background()
	dsn, direct := setup(t)
	p, addr := startProxy(t, false)
	other, err := pgx.Connect(ctx, viaProxy(t, dsn, addr))
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close(ctx)
	conn, err := pgx.Connect(ctx, viaProxy(t, dsn, addr))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	for _, mode := range []pgx.QueryExecMode{pgx.QueryExecModeSimpleProtocol, pgx.QueryExecModeExec} {
		want := outcome(ctx, direct, deepStatement(), mode)
		got := outcome(ctx, conn, deepStatement(), mode)
		if got != want || want == "" {
			t.Errorf("%v: through the proxy %q, direct %q", mode, got, want)
		}
		t.Logf("%v: the server's answer %q", mode, want)
	}
	if s := p.Stats(); s.NotParsed == 0 || s.Rewrites != 0 {
		t.Errorf("stats: not parsed %d, rewrites %d; want the statement counted as not parsed", s.NotParsed, s.Rewrites)
	}
	if !strings.Contains(p.Stats().String(), "not parsed: too large/deep") {
		t.Errorf("summary lacks the not-parsed count:\n%s", p.Stats())
	}
	// The proxy serves on: the other session, and a new one.
	var n int
	if err := other.QueryRow(ctx, "SELECT count(*) FROM t WHERE t.a = 1 OR t.a IN (SELECT u.x FROM u)").Scan(&n); err != nil || n != 31 {
		t.Fatalf("other session: %d, %v", n, err)
	}
	fresh, err := pgx.Connect(ctx, viaProxy(t, dsn, addr))
	if err != nil {
		t.Fatalf("new session after the deep statement: %v", err)
	}
	fresh.Close(ctx)
}
