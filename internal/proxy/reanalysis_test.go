package proxy

import (
	"context"
	"slices"
	"testing"

	"github.com/jackc/pgx/v5"
)

// The server analyses a statement's text again where the proxy's decision
// cannot follow: a prepared statement (SQL PREPARE or a named Parse) is
// re-planned from its stored text after DDL, and a function or a DO block
// can change search_path unseen. The rewritten arm keeps the arm as
// written in a branch the planner removes (rewrite's guardOpen), so the
// server then raises the original's error instead of answering from
// ARRAY(SELECT int[]) flattened into matches (the trial's reports: 3 and
// 342 rows through the proxy where the direct statement fails with 42883).
func TestReanalysisGivesTheOriginalsError(t *testing.T) {
	ctx := context.Background()
	const schema = `
CREATE TABLE ra (id int); CREATE INDEX ON ra (id); INSERT INTO ra SELECT generate_series(1, 10);
CREATE TABLE w5 (x int); INSERT INTO w5 VALUES (1), (2);
CREATE TABLE uu (x int); INSERT INTO uu VALUES (4);
CREATE SCHEMA s2; CREATE TABLE s2.uu (x int[]); INSERT INTO s2.uu VALUES ('{1,2,3}');
CREATE FUNCTION to_s2() RETURNS void LANGUAGE sql AS $$SELECT set_config('search_path', 's2, public', false)$$;
ANALYZE;`
	const q = "SELECT count(*) FROM ra WHERE id = $1 OR id IN (SELECT x FROM w5)"
	const alter = "ALTER TABLE w5 ALTER COLUMN x TYPE int[] USING ARRAY[x]"
	const qu = "SELECT count(*) FROM ra WHERE id = 9 OR id IN (SELECT x FROM uu)"
	simple := pgx.QueryExecModeSimpleProtocol
	cases := []struct {
		name string
		run  func(c *pgx.Conn) []string
	}{
		{"SQL PREPARE, then DDL", func(c *pgx.Conn) []string {
			return []string{
				raw(c, "PREPARE p(int) AS "+q),
				outcome(ctx, c, "EXECUTE p(5)", simple),
				outcome(ctx, c, alter, simple),
				outcome(ctx, c, "EXECUTE p(5)", simple),
			}
		}},
		{"named Parse, then DDL", func(c *pgx.Conn) []string {
			if _, err := c.Prepare(ctx, "named", q); err != nil {
				return []string{sqlstate(err)}
			}
			return []string{
				outcome(ctx, c, "named", 5),
				outcome(ctx, c, alter, simple),
				outcome(ctx, c, "named", 5),
				outcome(ctx, c, "named", 6),
			}
		}},
		{"search_path set in a DO block", func(c *pgx.Conn) []string {
			return []string{
				outcome(ctx, c, qu, simple),
				outcome(ctx, c, "DO $$BEGIN PERFORM set_config('search_path', 's2, public', false); END$$", simple),
				outcome(ctx, c, qu+" -- after DO", simple),
				outcome(ctx, c, qu+" -- after DO, extended"),
			}
		}},
		{"search_path set in a function", func(c *pgx.Conn) []string {
			return []string{
				outcome(ctx, c, qu, simple),
				outcome(ctx, c, "SELECT to_s2()", simple),
				outcome(ctx, c, qu+" -- after the function", simple),
				outcome(ctx, c, qu+" -- after the function, extended"),
			}
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			want, got, p := directThenProxied(t, schema, c.run)
			if len(got) != len(want) {
				t.Fatalf("through the proxy %q, direct %q", got, want)
			}
			for i := range want {
				if got[i] != want[i] {
					t.Errorf("step %d: through the proxy %q, direct %q", i+1, got[i], want[i])
				}
			}
			if want[len(want)-1] != "ERROR 42883" {
				t.Errorf("direct: %q, want the last step to fail with 42883", want)
			}
			if p.Stats().Rewrites == 0 {
				t.Errorf("the proxy rewrote nothing (%+v): the case tests nothing", p.Stats())
			}
		})
	}
}

// raw sends sql as one simple Query, as psql does (pgx's simple protocol
// would fill in $n), and returns "" or the SQLSTATE.
func raw(c *pgx.Conn, sql string) string {
	if _, err := c.PgConn().Exec(context.Background(), sql).ReadAll(); err != nil {
		return sqlstate(err)
	}
	return ""
}

// An error that is not about the rewritten text leaves the rewrite in
// use (the trial's report: 25P02 in an aborted transaction, or a run-time
// error both forms raise, marked the statement "never rewrite"): the
// client gets the server's error as directly, and the same text is
// rewritten again afterwards.
func TestUnrelatedErrorKeepsTheRewrite(t *testing.T) {
	ctx := context.Background()
	dsn, _ := setup(t)
	simple := pgx.QueryExecModeSimpleProtocol
	const q = "SELECT count(*) FROM t WHERE t.a = 4 OR t.a IN (SELECT u.x FROM u)"
	// (The division is the outer query's: one in the subquery would keep
	// the arm as written, see TestSubqueryEvaluatedOnlyWhenNeeded.)
	const zero = "SELECT count(*) / 0 FROM t WHERE t.a = 4 OR t.a IN (SELECT u.x FROM u)"
	steps := func(c *pgx.Conn) []string {
		return []string{
			raw(c, "BEGIN; SELECT 1/0"),
			outcome(ctx, c, q, simple),
			raw(c, "ROLLBACK"),
			outcome(ctx, c, q, simple),
			outcome(ctx, c, zero, simple),
			outcome(ctx, c, zero, simple),
		}
	}
	dc, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer dc.Close(ctx)
	want := steps(dc)
	p, addr := startProxy(t, false)
	c := proxiedConn(t, dsn, addr)
	before := p.Stats().Rewrites
	got := steps(c)
	if !slices.Equal(got, want) {
		t.Errorf("through the proxy %q, direct %q", got, want)
	}
	if want[1] != "ERROR 25P02" || want[4] != "ERROR 22012" {
		t.Errorf("direct %q: want 25P02 in the aborted transaction and 22012", want)
	}
	s := p.Stats()
	if s.Rewrites-before < 4 {
		t.Errorf("rewrites %d: want each of the 4 statements after the first error rewritten", s.Rewrites-before)
	}
	noRejections(t, p)
}

// PREPARE name(types) AS ...: a subquery that uses a later parameter but
// not $1 is described with the declared types (the second trial's report:
// "could not determine data type of parameter $1", a Seq Scan kept), and
// is rewritten with the same rows as directly.
func TestPrepareDeclaredTypes(t *testing.T) {
	ctx := context.Background()
	const schema = `CREATE TABLE a3 (id int PRIMARY KEY, b bigint); CREATE INDEX ON a3 (b);
INSERT INTO a3 SELECT g, g * 10 FROM generate_series(1, 100) g;
CREATE TABLE s3 (bi bigint); INSERT INTO s3 VALUES (20), (30), (990); ANALYZE;`
	steps := func(c *pgx.Conn) []string {
		return []string{
			raw(c, "PREPARE g(int, bigint) AS SELECT id FROM a3 WHERE id = $1 OR b IN (SELECT bi FROM s3 WHERE bi < $2)"),
			outcome(ctx, c, "EXECUTE g(5, 100)", pgx.QueryExecModeSimpleProtocol),
			outcome(ctx, c, "EXECUTE g(7, 1000)", pgx.QueryExecModeSimpleProtocol),
		}
	}
	want, got, p := directThenProxied(t, schema, steps)
	if !slices.Equal(got, want) || want[1] != "2,3,5" || want[2] != "2,3,7,99" {
		t.Errorf("through the proxy %q, direct %q", got, want)
	}
	if s := p.Stats(); s.Rewrites != 1 {
		t.Errorf("rewrites %d, want the PREPARE rewritten: %s", s.Rewrites, s)
	}
}

// directThenProxied runs steps on a fresh database with schema over a
// direct connection (want), then on another fresh one through a fresh
// proxy (got): steps that change the schema start from the same state.
func directThenProxied(t *testing.T, schema string, steps func(*pgx.Conn) []string) (want, got []string, p *Proxy) {
	t.Helper()
	ctx := context.Background()
	fresh := func() string {
		dsn, direct := setup(t)
		if _, err := direct.Exec(ctx, schema); err != nil {
			t.Fatal(err)
		}
		return dsn
	}
	dc, err := pgx.Connect(ctx, fresh())
	if err != nil {
		t.Fatal(err)
	}
	defer dc.Close(ctx)
	want = steps(dc)
	dsn := fresh()
	p, addr := startProxy(t, false)
	return want, steps(proxiedConn(t, dsn, addr)), p
}
