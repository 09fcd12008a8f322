package proxy

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// An error's position in a rewritten simple Query points where the
// client's own text has the token, as on a direct connection (the trial's
// report: psql showed no LINE and caret through the proxy): a later
// statement of the Query, and the arm kept as written when a schema
// change around the proxy makes it fail in a transaction. An error in
// another statement of the Query (before or after the rewritten one) is
// not the server rejecting the rewritten text: the rewrite stays.
func TestErrorPositionInRewrittenQuery(t *testing.T) {
	ctx := context.Background()
	dsn, direct := setup(t)
	p, addr := startProxy(t, false)
	conn := proxiedConn(t, dsn, addr)
	dc, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer dc.Close(ctx)
	// errAt runs sql as one simple Query and returns "SQLSTATE@position".
	errAt := func(c *pgx.Conn, sql string) string {
		_, err := c.PgConn().Exec(ctx, sql).ReadAll()
		var pe *pgconn.PgError
		if !errors.As(err, &pe) {
			return fmt.Sprintf("no server error: %v", err)
		}
		return fmt.Sprintf("%s@%d", pe.Code, pe.Position)
	}
	same := func(what, sql string) {
		t.Helper()
		before := p.Stats().Rewrites
		got, want := errAt(conn, sql), errAt(dc, sql)
		if got != want {
			t.Errorf("%s: through the proxy %s, direct %s", what, got, want)
		}
		if p.Stats().Rewrites == before {
			t.Errorf("%s: not rewritten: the case tests nothing", what)
		}
	}
	const q = "SELECT 'жж', count(*) FROM t WHERE t.a = 4 OR t.a IN (SELECT u.x FROM u)"
	same("a later statement, first use", q+"; SELECT * FROM nosuch2")
	same("a later statement, cached", q+";  SELECT * FROM nosuch2")
	same("a later statement, cached again", q+";  SELECT * FROM nosuch2")
	same("an earlier statement, first use", "SELECT * FROM nosuch3; "+q)
	same("an earlier statement, again", "SELECT * FROM nosuch3;  "+q)
	// An error in the later statement is not the server rejecting the
	// rewritten one: the rewrite stays (it was marked "never again").
	if s := p.Stats(); s.FallbackErrors != 0 || s.Fallbacks != 0 {
		t.Errorf("an error in another statement counted as a rejection: %s", s)
	}
	// The subquery's column becomes an array around the proxy: the kept
	// arm fails at its IN, as the original does.
	if _, err := conn.Exec(ctx, q+" -- cached", pgx.QueryExecModeSimpleProtocol); err != nil {
		t.Fatal(err)
	}
	if _, err := direct.Exec(ctx, "ALTER TABLE u ALTER x TYPE int[] USING ARRAY[x]"); err != nil {
		t.Fatal(err)
	}
	// Inside a transaction the rewritten text's error reaches the
	// client (at the start of an idle batch the original would be sent
	// instead), its position mapped into the kept arm.
	for _, c := range []*pgx.Conn{conn, dc} {
		if _, err := c.Exec(ctx, "BEGIN", pgx.QueryExecModeSimpleProtocol); err != nil {
			t.Fatal(err)
		}
	}
	same("the kept arm, cached decision, in a transaction", q+" -- cached")
	if s := p.Stats(); s.FallbackErrors != 1 {
		t.Errorf("rejections passed on %d, want the one in the transaction: %s", s.FallbackErrors, s)
	}
}
