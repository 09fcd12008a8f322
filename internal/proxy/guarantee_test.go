package proxy

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// The statements: a subquery over a catalog column whose rewritten
// form the server rejects (42704, pg_node_tree has no array type), and an
// int compared with an int[] subquery (42883 direct; ARRAY(SELECT int[])
// would flatten it into rows).
const (
	catalogColumn = "SELECT count(*) FROM tt WHERE tt.s = 'x' OR tt.s IN (SELECT adbin FROM pg_attrdef)"
	arraySubquery = "SELECT id FROM ta WHERE id IN (SELECT tags FROM tb2) OR id = 3"
	goodStatement = "SELECT count(*) FROM t WHERE t.a = $1 OR t.a IN (SELECT u.x FROM u)"
)

const guaranteeSchema = `
CREATE TABLE ta (id int); CREATE INDEX ON ta (id); INSERT INTO ta SELECT generate_series(1, 10);
CREATE TABLE tb2 (tags int[]); INSERT INTO tb2 VALUES ('{1,2}'), ('{7,8}');
CREATE TABLE tt (s text); CREATE INDEX ON tt (s); INSERT INTO tt VALUES ('x'), ('y');
CREATE TABLE tb (v int); INSERT INTO tb VALUES (2), (4);
CREATE SCHEMA s2; CREATE TABLE s2.tb (v int[]); INSERT INTO s2.tb VALUES ('{2}');
CREATE TABLE arrs (v int); INSERT INTO arrs VALUES (3);
ANALYZE;`

// outcome runs sql with args (mode first when given) and returns its rows
// as sorted text, or its SQLSTATE.
func outcome(ctx context.Context, q interface {
	Query(context.Context, string, ...any) (pgx.Rows, error)
}, sql string, args ...any) string {
	r, err := q.Query(ctx, sql, args...)
	if err != nil {
		return sqlstate(err)
	}
	var out []string
	for r.Next() {
		v, err := r.Values()
		if err != nil {
			return sqlstate(err)
		}
		out = append(out, fmt.Sprint(v...))
	}
	if err := r.Err(); err != nil {
		return sqlstate(err)
	}
	slices.Sort(out)
	return strings.Join(out, ",")
}

func sqlstate(err error) string {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return "ERROR " + pe.Code
	}
	return "ERROR " + err.Error()
}

// noRejections fails t unless the server never rejected a rewritten
// statement in a client's session.
func noRejections(t *testing.T, p *Proxy) {
	t.Helper()
	if s := p.Stats(); s.Fallbacks != 0 || s.FallbackErrors != 0 {
		t.Errorf("a rewritten statement reached a session and was rejected: fallbacks %d, passed on %d", s.Fallbacks, s.FallbackErrors)
	}
}

func TestNoErrorTheOriginalWouldNotGive(t *testing.T) {
	ctx := context.Background()
	dsn, direct := setup(t)
	if _, err := direct.Exec(ctx, guaranteeSchema); err != nil {
		t.Fatal(err)
	}
	wantCatalog := outcome(ctx, direct, catalogColumn)
	wantArray := outcome(ctx, direct, arraySubquery)
	wantGood := outcome(ctx, direct, goodStatement, 7)
	if wantCatalog != "1" || wantArray != "ERROR 42883" {
		t.Fatalf("direct: %q, %q", wantCatalog, wantArray)
	}
	// Each case on a fresh proxy, so that its statements are first seen
	// there (no decision cached).
	connect := func(t *testing.T) (*Proxy, *pgx.Conn) {
		p, addr := startProxy(t, false)
		return p, proxiedConn(t, dsn, addr)
	}
	check := func(t *testing.T, what, got, want string) {
		t.Helper()
		if got != want {
			t.Errorf("%s: through the proxy %q, direct %q", what, got, want)
		}
	}
	t.Run("inside BEGIN", func(t *testing.T) {
		p, conn := connect(t)
		for _, mode := range []pgx.QueryExecMode{pgx.QueryExecModeSimpleProtocol, pgx.QueryExecModeExec, pgx.QueryExecModeCacheStatement} {
			tx, err := conn.Begin(ctx)
			if err != nil {
				t.Fatal(err)
			}
			check(t, "catalog column in a transaction", outcome(ctx, tx, catalogColumn+" -- "+mode.String(), mode), wantCatalog)
			check(t, "good statement in a transaction", outcome(ctx, tx, goodStatement+" -- "+mode.String(), mode, 7), wantGood)
			check(t, "the transaction goes on", outcome(ctx, tx, "SELECT 1", mode), "1")
			check(t, "array subquery in a transaction", outcome(ctx, tx, arraySubquery+" -- "+mode.String(), mode), wantArray)
			_ = tx.Rollback(ctx)
		}
		noRejections(t, p)
		if s := p.Stats(); s.ValidationFailures == 0 || s.Rewrites == 0 {
			t.Errorf("stats %+v: want validation failures and rewrites", s)
		}
	})
	t.Run("pipeline", func(t *testing.T) {
		p, conn := connect(t)
		b := &pgx.Batch{}
		for i := 0; i < 5; i++ {
			b.Queue("SELECT $1::int", i)
			b.Queue(catalogColumn)
			b.Queue(goodStatement, 7)
			b.Queue(catalogColumn + " -- second")
		}
		br := conn.SendBatch(ctx, b)
		for i := 0; i < 5; i++ {
			var echo, n1, n2, n3 int
			if err := br.QueryRow().Scan(&echo); err != nil || echo != i {
				t.Fatalf("echo %d (%v)", echo, err)
			}
			for _, n := range []*int{&n1, &n2, &n3} {
				if err := br.QueryRow().Scan(n); err != nil {
					t.Fatalf("batch %d: %v", i, err)
				}
			}
			check(t, "catalog column in a batch", fmt.Sprint(n1), wantCatalog)
			check(t, "good statement in a batch", fmt.Sprint(n2), wantGood)
			check(t, "catalog column again in a batch", fmt.Sprint(n3), wantCatalog)
		}
		if err := br.Close(); err != nil {
			t.Fatal(err)
		}
		// Extended messages without Sync between them (a pipeline).
		pl := conn.PgConn().StartPipeline(ctx)
		pl.SendQueryParams("SELECT 1", nil, nil, nil, nil)
		pl.SendQueryParams(catalogColumn+" -- pipeline", nil, nil, nil, nil)
		pl.SendQueryParams(arraySubquery+" -- pipeline", nil, nil, nil, nil)
		if err := pl.Sync(); err != nil {
			t.Fatal(err)
		}
		var got []string
		for {
			r, err := pl.GetResults()
			if err != nil {
				got = append(got, sqlstate(err))
				continue
			}
			if r == nil {
				break
			}
			if rr, ok := r.(*pgconn.ResultReader); ok {
				res := rr.Read()
				if res.Err != nil {
					got = append(got, sqlstate(res.Err))
				} else {
					got = append(got, fmt.Sprint(len(res.Rows)))
				}
			}
			if _, ok := r.(*pgconn.PipelineSync); ok {
				break
			}
		}
		if err := pl.Close(); err != nil && !strings.Contains(sqlstate(err), "42883") {
			t.Fatal(err)
		}
		if len(got) < 3 || got[0] != "1" || got[1] != "1" || got[2] != "ERROR 42883" {
			t.Errorf("pipeline results %v, want [1 1 ERROR 42883]", got)
		}
		noRejections(t, p)
	})
	t.Run("multi-statement Query", func(t *testing.T) {
		p, conn := connect(t)
		res, err := conn.PgConn().Exec(ctx, "SELECT 1; "+catalogColumn+"; SELECT count(*) FROM t WHERE t.a = 7 OR t.a IN (SELECT u.x FROM u); SELECT 2").ReadAll()
		if err != nil || len(res) != 4 || string(res[1].Rows[0][0]) != wantCatalog || string(res[3].Rows[0][0]) != "2" {
			t.Fatalf("results %+v, %v", res, err)
		}
		check(t, "rewritten statement of a multi-statement Query", string(res[2].Rows[0][0]), wantGood)
		_, err = conn.PgConn().Exec(ctx, "SELECT 1; "+arraySubquery).ReadAll()
		check(t, "array subquery in a multi-statement Query", sqlstate(err), wantArray)
		noRejections(t, p)
		if s := p.Stats(); s.Rewrites == 0 {
			t.Errorf("nothing rewritten: %+v", s)
		}
	})
	t.Run("prepared statements re-bound many times, DISCARD ALL", func(t *testing.T) {
		p, conn := connect(t)
		for round := 0; round < 2; round++ {
			if _, err := conn.Prepare(ctx, "cat", catalogColumn); err != nil {
				t.Fatal(err)
			}
			if _, err := conn.Prepare(ctx, "good", goodStatement); err != nil {
				t.Fatal(err)
			}
			for i := 0; i < 50; i++ {
				check(t, "prepared catalog column", outcome(ctx, conn, "cat"), wantCatalog)
				check(t, "prepared good statement", outcome(ctx, conn, "good", i%10), outcome(ctx, direct, goodStatement, i%10))
			}
			// DISCARD ALL drops the prepared statements; the next round
			// prepares them again.
			if _, err := conn.Exec(ctx, "DISCARD ALL"); err != nil {
				t.Fatal(err)
			}
			if err := conn.DeallocateAll(ctx); err != nil {
				t.Fatal(err)
			}
		}
		noRejections(t, p)
		if s := p.Stats(); s.Rewrites < 2 || s.ContextUnknown != 0 {
			t.Errorf("stats %+v", s)
		}
	})
}

// The session's search_path decides which table a name means: the side
// connection validates with it, and a change the proxy cannot follow
// stops rewriting for the session.
func TestSearchPathAndSchemaChanges(t *testing.T) {
	ctx := context.Background()
	dsn, direct := setup(t)
	if _, err := direct.Exec(ctx, guaranteeSchema); err != nil {
		t.Fatal(err)
	}
	p, addr := startProxy(t, false)
	conn := proxiedConn(t, dsn, addr)
	const q = "SELECT id FROM ta WHERE ta.id = 1 OR ta.id IN (SELECT tb.v FROM tb)"
	run := func(t *testing.T, what, want string, wantRewrite bool) {
		t.Helper()
		before := p.Stats().Rewrites
		got := outcome(ctx, conn, q, pgx.QueryExecModeSimpleProtocol)
		if got != want {
			t.Errorf("%s: %q, want %q", what, got, want)
		}
		if rewrote := p.Stats().Rewrites > before; rewrote != wantRewrite {
			t.Errorf("%s: rewritten %v, want %v", what, rewrote, wantRewrite)
		}
	}
	run(t, "default search_path", "1,2,4", true)
	if _, err := conn.Exec(ctx, "SET search_path = s2, public"); err != nil {
		t.Fatal(err)
	}
	run(t, "s2.tb (int[]) first in the path", "ERROR 42883", false)
	if _, err := conn.Exec(ctx, "RESET search_path"); err != nil {
		t.Fatal(err)
	}
	run(t, "after RESET", "1,2,4", true)
	tx, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, "SET LOCAL search_path = s2, public"); err != nil {
		t.Fatal(err)
	}
	got := outcome(ctx, tx, q, pgx.QueryExecModeSimpleProtocol)
	_ = tx.Rollback(ctx)
	if got != "ERROR 42883" {
		t.Errorf("SET LOCAL: %q", got)
	}
	if p.Stats().ContextUnknown == 0 {
		t.Error("SET LOCAL search_path did not stop rewriting")
	}
	run(t, "after SET LOCAL (context unknown)", "1,2,4", false)
	if _, err := conn.Exec(ctx, "DISCARD ALL"); err != nil {
		t.Fatal(err)
	}
	run(t, "after DISCARD ALL", "1,2,4", true)
	// A temporary table the session creates hides public.tb: the
	// decisions naming tb are dropped; dropping it brings them back.
	if _, err := conn.Exec(ctx, "CREATE TEMP TABLE tb (v int[]); INSERT INTO tb VALUES ('{2}')"); err != nil {
		t.Fatal(err)
	}
	run(t, "a temporary tb (int[]) hides public.tb", "ERROR 42883", false)
	if _, err := conn.Exec(ctx, "DROP TABLE tb"); err != nil {
		t.Fatal(err)
	}
	run(t, "after DROP TABLE of the temporary tb", "1,2,4", true)
	// A text that creates the hiding table itself is not rewritten (its
	// statements would be validated against the state before it).
	_, err = conn.PgConn().Exec(ctx, "CREATE TEMP TABLE tb (v int[]); INSERT INTO tb VALUES ('{2}'); "+q).ReadAll()
	if got := sqlstate(err); got != "ERROR 42883" {
		t.Errorf("CREATE TEMP TABLE and the statement in one Query: %q", got)
	}
	// A schema change through the proxy drops the decisions at once.
	if _, err := conn.Exec(ctx, "ALTER TABLE tb ALTER COLUMN v TYPE int[] USING ARRAY[v]"); err != nil {
		t.Fatal(err)
	}
	run(t, "after ALTER TABLE through the proxy", "ERROR 42883", false)
	noRejections(t, p)
	if p.Stats().Invalidations == 0 {
		t.Error("no schema change seen")
	}
}

// A session whose startup packet sets search_path is validated with it.
func TestStartupSearchPath(t *testing.T) {
	ctx := context.Background()
	dsn, direct := setup(t)
	if _, err := direct.Exec(ctx, guaranteeSchema); err != nil {
		t.Fatal(err)
	}
	p, addr := startProxy(t, false)
	cfg, err := pgx.ParseConfig(viaProxy(t, dsn, addr))
	if err != nil {
		t.Fatal(err)
	}
	cfg.RuntimeParams["options"] = "-c search_path=s2,public"
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	const q = "SELECT id FROM ta WHERE ta.id = 1 OR ta.id IN (SELECT tb.v FROM tb)"
	if got := outcome(ctx, conn, q); got != "ERROR 42883" {
		t.Fatalf("through the proxy with s2 first: %q", got)
	}
	if s := p.Stats(); s.Rewrites != 0 {
		t.Fatalf("rewritten with the wrong search_path: %+v", s)
	}
}
