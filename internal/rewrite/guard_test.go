package rewrite

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
)

// guardSchema: e is empty, so a rewritten arm's InitPlan is the only
// evaluation of its subquery; s has a row where x - x is 0.
const guardSchema = `
CREATE TABLE e (k int, u uuid, b bytea, t text, f float8); CREATE INDEX ON e (k); CREATE INDEX ON e (u); CREATE INDEX ON e (b); CREATE INDEX ON e (t); CREATE INDEX ON e (f);
CREATE TABLE s (x int, u uuid, b bytea, t text, f float8, d date, n numeric(7,0));
INSERT INTO s VALUES (1, '00000000-0000-0000-0000-000000000001', '\x01', 'a', 1.5, '2024-01-01', 0);
CREATE FUNCTION noisy(int) RETURNS int STABLE LANGUAGE plpgsql AS $$BEGIN RAISE NOTICE 'noisy %', $1; RETURN $1; END$$;
CREATE DOMAIN pos AS int CHECK (VALUE > 0);
CREATE VIEW sdiv AS SELECT 10 / s.x AS x FROM s;
CREATE VIEW splain AS SELECT s.x FROM s WHERE s.t = 'a';
CREATE TABLE rls (x int); ALTER TABLE rls ENABLE ROW LEVEL SECURITY;
CREATE SCHEMA lp; CREATE SCHEMA nlp;
CREATE FUNCTION lp.g(int) RETURNS int IMMUTABLE LEAKPROOF LANGUAGE sql AS 'SELECT $1';
CREATE FUNCTION nlp.g(int) RETURNS int IMMUTABLE LANGUAGE sql AS 'SELECT $1';
ANALYZE;`

func guardDB(t *testing.T) *pgx.Conn {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, srv.NewDatabase(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	if _, err := conn.Exec(ctx, guardSchema); err != nil {
		t.Fatal(err)
	}
	return conn
}

// TestSubqueryGuard: an arm is rewritten only when its subquery evaluates
// nothing that could fail or have a side effect, as the server resolves
// it; the veto names what and where (the arm's operator). The two cases
// of issue #29 first: on the empty e, direct gives no row where the
// rewritten form raised 22012 (its InitPlan runs when the scan starts),
// and a STABLE function's NOTICE came only through the proxy.
func TestSubqueryGuard(t *testing.T) {
	ctx := context.Background()
	conn := guardDB(t)
	cat := NewPGCatalogConn(conn)
	if _, err := cat.LearnBuiltins(ctx); err != nil {
		t.Fatal(err)
	}
	cases := []struct{ in, veto string }{
		{"SELECT * FROM e WHERE k = 1 OR k IN (SELECT 1/(x-x) FROM s)", "the subquery calls int4mi (operator -, not leakproof): evaluating it where the original did not could raise an error"},
		{"SELECT * FROM e WHERE k = 1 OR k IN (SELECT 1/s.x FROM s)", "the subquery calls int4div (operator /, not leakproof): evaluating it where the original did not could raise an error"},
		{"SELECT * FROM e WHERE k = 1 OR k IN (SELECT noisy(s.x) FROM s)", "the subquery calls noisy (not leakproof)"},
		// What still fires: equality and comparison of int, uuid,
		// bytea, text (all leakproof), constants, views of those.
		{"SELECT * FROM e WHERE k = 1 OR k IN (SELECT s.x FROM s WHERE s.x = 5)", ""},
		{"SELECT * FROM e WHERE u = '00000000-0000-0000-0000-000000000002' OR u IN (SELECT s.u FROM s WHERE s.u > '00000000-0000-0000-0000-000000000000' AND s.b = '\\x01')", ""},
		{"SELECT * FROM e WHERE b = '\\x02' OR b IN (SELECT s.b FROM s WHERE s.b <> '\\x03' AND s.t >= 'a' AND s.x IN (1, 2))", ""},
		{"SELECT * FROM e WHERE t = $1 OR t IN (SELECT s.t FROM s WHERE s.x = $2 AND s.u = $3)", ""},
		{"SELECT * FROM e WHERE k = 1 OR k IN (SELECT splain.x FROM splain)", ""},
		// numeric comparisons: not marked leakproof, reviewed error-free
		// (1C's separators are numeric columns).
		{"SELECT * FROM e WHERE k = 1 OR k IN (SELECT s.x FROM s WHERE s.n = $1 AND s.n >= 0)", ""},
		{"SELECT * FROM e WHERE k = 1 OR k IN (SELECT s.x FROM s ORDER BY 1 LIMIT 5 OFFSET 0)", ""},
		// An immutable function of constants is folded by the planner
		// for both forms: float8(numeric) of 2.5.
		{"SELECT * FROM e WHERE f = 1 OR f IN (SELECT s.f FROM s WHERE s.f >= 2.5)", ""},
		// Not a parameter: a generic plan evaluates 10 / $1 at run time.
		{"SELECT * FROM e WHERE k = 1 OR k IN (SELECT s.x FROM s WHERE s.x = 10 / $1)", "calls int4div (operator /, not leakproof)"},
		// The server's resolution, with the connection's search_path.
		{"SELECT * FROM e WHERE k = 1 OR k IN (SELECT lp.g(s.x) FROM s)", ""},
		{"SELECT * FROM e WHERE k = 1 OR k IN (SELECT nlp.g(s.x) FROM s)", "calls g (not leakproof)"},
		// What the catalog cannot vouch for.
		{"SELECT * FROM e WHERE k = 1 OR k IN (SELECT s.t::int FROM s)", "converts a value to integer through its text form (an I/O conversion, which can fail on bad input)"},
		{"SELECT * FROM e WHERE k = 1 OR k IN (SELECT s.x::pos FROM s)", "casts a value to domain pos, whose constraints can fail"},
		{"SELECT * FROM e WHERE k = 1 OR k IN (SELECT (SELECT s.x FROM s) FROM s)", "holds a scalar subquery, which fails when it returns more than one row"},
		{"SELECT * FROM e WHERE k = 1 OR k IN (SELECT s.x FROM s LIMIT -1)", "LIMIT is not a non-negative integer constant"},
		{"SELECT * FROM e WHERE k = 1 OR k IN (SELECT s.x FROM s OFFSET $1)", "OFFSET is not a non-negative integer constant"},
		{"SELECT * FROM e WHERE k = 1 OR k IN (SELECT sdiv.x FROM sdiv)", "the subquery (in view sdiv) calls int4div (operator /, not leakproof)"},
		{"SELECT * FROM e WHERE k = 1 OR k IN (SELECT max(s.x) FROM s)", "calls int4larger (of aggregate max, not leakproof)"},
		{"SELECT * FROM e WHERE k = 1 OR k IN (SELECT rls.x FROM rls)", "reads table rls, which has row-level security"},
		{"SELECT * FROM e WHERE k = 1 OR k IN (WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM r) SELECT r.n FROM r)", "recursive WITH query"},
		// LIKE: see TestLikeGuard.
		{"SELECT * FROM e WHERE t = 'x' OR t IN (SELECT s.t FROM s WHERE s.t LIKE 'a%\\')", "calls textlike with pattern \"a%\\\\\", which ends with an escape character"},
		{"SELECT * FROM e WHERE t = 'x' OR t IN (SELECT s.t FROM s WHERE s.t LIKE $1 ESCAPE '#')", "calls like_escape (not leakproof)"},
		{"SELECT * FROM e WHERE t = 'x' OR t IN (SELECT s.t FROM s WHERE s.t ILIKE $1)", "calls texticlike (operator ~~*, not leakproof)"},
		{"SELECT * FROM e WHERE t = 'x' OR t IN (SELECT s.t FROM s WHERE s.t LIKE $1 || 'a')", "calls textcat (operator ||, not leakproof)"},
		{"SELECT * FROM e WHERE k = 1 OR k IN (SELECT s.x FROM s WHERE s.d > current_date - 30)", "calls date_mii (operator -, not leakproof)"},
	}
	for _, c := range cases {
		r, err := Rewrite(ctx, c.in, Options{Catalog: cat, Types: cat})
		if err != nil {
			t.Fatalf("%s: %v", c.in, err)
		}
		if c.veto == "" {
			if !r.Changed || !r.Validated {
				t.Errorf("%s: %s; want it rewritten", c.in, r.Explain())
			}
		} else if r.Changed || len(r.Vetoes) != 1 || !strings.Contains(r.Vetoes[0].Reason, c.veto) {
			t.Errorf("%s: %s; want the veto %q", c.in, r.Explain(), c.veto)
		} else if at := strings.Index(c.in, " IN ("); r.Vetoes[0].Location != at+1 {
			t.Errorf("%s: vetoed at %d, want %d (the arm's IN)", c.in, r.Vetoes[0].Location, at+1)
		}
		if s := conn.PgConn().TxStatus(); s != 'I' {
			t.Fatalf("%s: the connection is left in transaction status %c", c.in, s)
		}
	}
	// Unqualified, g is the search_path's: the view is created with the
	// connection's path, as the statement would be resolved.
	for _, c := range []struct {
		path string
		want bool
	}{{"lp, public", true}, {"nlp, public", false}} {
		if _, err := conn.Exec(ctx, "SET search_path = "+c.path); err != nil {
			t.Fatal(err)
		}
		cat := NewPGCatalogConn(conn)
		r, err := Rewrite(ctx, "SELECT * FROM e WHERE k = 1 OR k IN (SELECT g(s.x) FROM s)", Options{Catalog: cat, Types: cat})
		if err != nil || r.Changed != c.want {
			t.Errorf("search_path %s: %s, %v; want changed=%v", c.path, r.Explain(), err, c.want)
		}
	}
	// Nothing the guard created is left.
	var n int
	if err := conn.QueryRow(ctx, "SELECT count(*) FROM pg_class WHERE relname = 'erplab_guard'").Scan(&n); err != nil || n != 0 {
		t.Fatalf("views left: %d, %v", n, err)
	}
}

// TestGuardConnectionState: the guard's view leaves a connection's own
// transaction as it was (a savepoint), says so for one that has failed,
// and vetoes when the role may not create temporary objects.
func TestGuardConnectionState(t *testing.T) {
	ctx := context.Background()
	conn := guardDB(t)
	const q = "SELECT * FROM e WHERE k = 1 OR k IN (SELECT s.x FROM s)"
	if _, err := conn.Exec(ctx, "BEGIN; CREATE TEMP TABLE mine (a int)"); err != nil {
		t.Fatal(err)
	}
	cat := NewPGCatalogConn(conn)
	if r, err := Rewrite(ctx, q, Options{Catalog: cat, Types: cat}); err != nil || !r.Changed {
		t.Fatalf("in a transaction: %s, %v", r.Explain(), err)
	}
	if s := conn.PgConn().TxStatus(); s != 'T' {
		t.Fatalf("transaction status %c after the decision, want T", s)
	}
	var n int
	if err := conn.QueryRow(ctx, "SELECT count(*) FROM mine").Scan(&n); err != nil {
		t.Fatalf("the transaction's own table: %v", err)
	}
	_, _ = conn.Exec(ctx, "SELECT 1/0")
	if r, err := Rewrite(ctx, q, Options{Catalog: cat, Types: cat}); err == nil && r.Changed {
		t.Fatalf("in a failed transaction: %s", r.Explain())
	}
	if _, err := conn.Exec(ctx, "ROLLBACK"); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, "CREATE ROLE notemp; GRANT SELECT ON e, s TO notemp; REVOKE TEMPORARY ON DATABASE "+pgx.Identifier{conn.Config().Database}.Sanitize()+" FROM PUBLIC; SET ROLE notemp"); err != nil {
		t.Fatal(err)
	}
	defer func() { _, _ = conn.Exec(ctx, "RESET ROLE") }()
	r, err := Rewrite(ctx, q, Options{Catalog: cat, Types: cat})
	if err != nil || r.Changed || !strings.Contains(r.Explain(), "does not create a view of the subquery (42501") {
		t.Fatalf("without TEMPORARY: %s, %v", r.Explain(), err)
	}
	if s := conn.PgConn().TxStatus(); s != 'I' {
		t.Fatalf("transaction status %c after a refused view, want I", s)
	}
}

// TestLikeGuard: LIKE raises an error only for a pattern ending with an
// odd run of backslashes (or a nondeterministic collation, or a stack
// overflow: see the review in guard.go), so a constant pattern is judged
// at once and a parameter's is left to each execution (BindChecks: every
// parameter of the subquery).
func TestLikeGuard(t *testing.T) {
	ctx := context.Background()
	conn := guardDB(t)
	cat := NewPGCatalogConn(conn)
	cases := []struct {
		in     string
		checks []int
	}{
		{"SELECT * FROM e WHERE t = 'x' OR t IN (SELECT s.t FROM s WHERE s.t LIKE $1)", []int{1}},
		// $3 is an int: not a pattern.
		{"SELECT * FROM e WHERE t = $1 OR t IN (SELECT s.t FROM s WHERE s.x = $3 AND s.t NOT LIKE $2)", []int{2}},
		{"SELECT * FROM e WHERE t = $1 OR t IN (SELECT s.t FROM s WHERE s.t = $3 AND s.t NOT LIKE $2)", []int{2, 3}},
		{"SELECT * FROM e WHERE t = 'x' OR t IN (SELECT s.t FROM s WHERE s.t LIKE 'a\\\\%')", nil},
		{"SELECT * FROM e WHERE t = 'x' OR t IN (SELECT s.t FROM s WHERE s.t COLLATE \"C\" LIKE $1)", []int{1}},
		{"SELECT * FROM e WHERE t = 'x' OR t IN (SELECT s.t FROM s WHERE s.t LIKE 'a%' OR s.t LIKE $1::varchar)", []int{1}},
	}
	for _, c := range cases {
		r, err := Rewrite(ctx, c.in, Options{Catalog: cat, Types: cat})
		if err != nil {
			t.Fatalf("%s: %v", c.in, err)
		}
		if !r.Changed || !r.Validated || !slices.Equal(r.BindChecks, c.checks) {
			t.Errorf("%s: %s, checks %v; want it rewritten, checks %v", c.in, r.Explain(), r.BindChecks, c.checks)
		}
	}
	for p, want := range map[string]bool{"": true, "a%": true, `a\`: false, `a\\`: true, `\\\`: false, `a\%`: true,
		strings.Repeat("%", MaxLikePercents): true, strings.Repeat("%", MaxLikePercents+1): false} {
		if got := LikePatternSafe([]byte(p)); got != want {
			t.Errorf("LikePatternSafe(%q) = %v, want %v", p, got, want)
		}
	}
}
