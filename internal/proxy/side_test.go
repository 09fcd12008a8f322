package proxy

import (
	"context"
	"log/slog"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
)

// The --upstream user may not act as the client's user: the warning says
// so and names the GRANT (the trial's report: it said "GRANT CONNECT on
// the database", which is not the cause), and the client's statement runs
// unchanged.
func TestSideConnectionRoleNotGranted(t *testing.T) {
	ctx := context.Background()
	dsn, direct := setup(t)
	const role = "erplab_side_nogrant"
	if _, err := direct.Exec(ctx, "DROP ROLE IF EXISTS "+role+"; CREATE ROLE "+role+" LOGIN"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = direct.Exec(context.Background(), "DROP ROLE IF EXISTS "+role) })
	var logs syncWriter
	p, addr := startProxyConfig(t, Config{Upstream: srv.DSN(t, "postgres") + " user=" + role,
		Logger: slog.New(slog.NewTextHandler(&logs, nil))}, false)
	conn := proxiedConn(t, dsn, addr)
	const q = "SELECT count(*) FROM t WHERE t.a = 4 OR t.a IN (SELECT u.x FROM u)"
	if got, want := outcome(ctx, conn, q, pgx.QueryExecModeSimpleProtocol), outcome(ctx, direct, q, pgx.QueryExecModeSimpleProtocol); got != want {
		t.Errorf("through the proxy %q, direct %q", got, want)
	}
	if s := p.Stats(); s.Rewrites != 0 {
		t.Errorf("rewrites %d without a side connection", s.Rewrites)
	}
	l := logs.String()
	if !strings.Contains(l, `may not SET ROLE \"`) || !strings.Contains(l, `GRANT \"`) || !strings.Contains(l, ` TO \"`+role+`\"`) || strings.Contains(l, "GRANT CONNECT") {
		t.Errorf("log:\n%s\nwant the role the side connection may not set and the GRANT that fixes it", l)
	}
}
