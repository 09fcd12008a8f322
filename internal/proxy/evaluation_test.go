package proxy

import (
	"context"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// Issue #29: the rewritten arm evaluates its subquery when the scan
// starts (an InitPlan), also on an empty table and for rows the
// original's OR had settled without it. On the table emptied since its
// statistics (read by a BitmapOr of index scans) the direct
// statement gives no row where the rewritten one raised 22012, and a
// STABLE function's NOTICE came only through the proxy (twice). The
// guard leaves such arms as written; a plain equality subquery is still
// rewritten; a client's failed transaction changes nothing.
func TestSubqueryEvaluatedOnlyWhenNeeded(t *testing.T) {
	ctx := context.Background()
	const schema = `
CREATE TABLE empty_e (k int) WITH (autovacuum_enabled = off); CREATE INDEX ON empty_e (k);
CREATE TABLE full_e (k int); CREATE INDEX ON full_e (k); INSERT INTO full_e SELECT generate_series(1, 1000);
CREATE TABLE s (x int); INSERT INTO s VALUES (1), (7);
CREATE FUNCTION noisy(int) RETURNS int STABLE LANGUAGE plpgsql AS $$BEGIN RAISE NOTICE 'noisy %', $1; RETURN $1; END$$;
INSERT INTO empty_e SELECT generate_series(1, 10000);
ANALYZE;
DELETE FROM empty_e;`
	const (
		division = "SELECT * FROM empty_e WHERE k = 1 OR k IN (SELECT 1/(x-x) FROM s)"
		notice   = "SELECT * FROM empty_e WHERE k = 1 OR k IN (SELECT noisy(x) FROM s)"
		plain    = "SELECT count(*) FROM full_e WHERE k = 1 OR k IN (SELECT s.x FROM s WHERE s.x > 2)"
	)
	simple := pgx.QueryExecModeSimpleProtocol
	var mu sync.Mutex
	var notices []string
	// run runs the steps on c; rewrites counts the statements the proxy
	// rewrote (nil direct), and rewritten says which steps it rewrote.
	run := func(c *pgx.Conn, rewrites func() uint64) (out []string, rewritten []bool) {
		step := func(sql string, args ...any) {
			mu.Lock()
			notices = notices[:0]
			mu.Unlock()
			var before uint64
			if rewrites != nil {
				before = rewrites()
			}
			o := outcome(ctx, c, sql, args...)
			mu.Lock()
			out = append(out, o+"; notices: "+strings.Join(notices, ","))
			mu.Unlock()
			rewritten = append(rewritten, rewrites != nil && rewrites() > before)
		}
		step(division, simple)
		step(division)
		step(notice, simple)
		step(notice)
		step(plain, simple)
		step(plain)
		// A client in a failed transaction, then out of it.
		step("BEGIN", simple)
		step("SELECT 1/0", simple)
		step(division, simple)
		step(plain)
		step("ROLLBACK", simple)
		step(division)
		step(plain, simple)
		return out, rewritten
	}
	connect := func(dsn string) *pgx.Conn {
		cfg, err := pgx.ParseConfig(dsn)
		if err != nil {
			t.Fatal(err)
		}
		cfg.OnNotice = func(_ *pgconn.PgConn, n *pgconn.Notice) {
			mu.Lock()
			notices = append(notices, n.Message)
			mu.Unlock()
		}
		c, err := pgx.ConnectConfig(ctx, cfg)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close(context.Background()) })
		return c
	}
	dsn, direct := setup(t)
	if _, err := direct.Exec(ctx, schema); err != nil {
		t.Fatal(err)
	}
	want, _ := run(connect(dsn), nil)
	p, addr := startProxy(t, false)
	got, rewritten := run(connect(viaProxy(t, dsn, addr)), func() uint64 { return p.Stats().Rewrites })
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("step %d: through the proxy %q, direct %q", i+1, got[i], want[i])
		}
	}
	// The plain arm is rewritten; the others never (in the failed
	// transaction the server answers 25P02 to either form).
	for i, rw := range map[int]bool{0: false, 1: false, 2: false, 3: false, 4: true, 5: true, 8: false, 11: false, 12: true} {
		if rewritten[i] != rw {
			t.Errorf("step %d: rewritten %v, want %v (steps rewritten: %v)", i+1, rewritten[i], rw, rewritten)
		}
	}
}
