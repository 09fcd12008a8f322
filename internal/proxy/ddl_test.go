package proxy

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// The user's report: a function that changes a subquery column's type,
// called through the proxy, must drop the cached decision (a DO block
// and CALL as well, and each execution of a prepared call); a stable
// function must not.
const ddlSchema = `
CREATE TABLE ta (id int PRIMARY KEY); INSERT INTO ta SELECT generate_series(1, 10);
CREATE TABLE w3 (x int); INSERT INTO w3 VALUES (1);
CREATE FUNCTION f_toggle() RETURNS void LANGUAGE plpgsql AS $$
BEGIN
  IF (SELECT format_type(atttypid, NULL) FROM pg_attribute WHERE attrelid = 'w3'::regclass AND attname = 'x') = 'integer' THEN
    EXECUTE 'ALTER TABLE w3 ALTER x TYPE int[] USING array[x, 2, 3]';
  ELSE
    EXECUTE 'ALTER TABLE w3 ALTER x TYPE int USING x[1]';
  END IF;
END $$;
CREATE PROCEDURE p_toggle() LANGUAGE sql AS $$ SELECT f_toggle() $$;
CREATE FUNCTION f_stable() RETURNS int LANGUAGE plpgsql STABLE AS $$ BEGIN RETURN 1; END $$;`

const ddlQuery = "SELECT count(*) FROM ta WHERE id = 5 OR id IN (SELECT x FROM w3)"

func TestSchemaChangeByFunction(t *testing.T) {
	ctx := context.Background()
	dsn, direct := setup(t)
	if _, err := direct.Exec(ctx, ddlSchema); err != nil {
		t.Fatal(err)
	}
	p, addr := startProxy(t, false)
	conn := proxiedConn(t, dsn, addr)
	// run checks the query through the proxy against the direct answer.
	run := func(what string) {
		t.Helper()
		want := outcome(ctx, direct, ddlQuery, pgx.QueryExecModeSimpleProtocol)
		if got := outcome(ctx, conn, ddlQuery, pgx.QueryExecModeSimpleProtocol); got != want {
			t.Errorf("%s: through the proxy %q, direct %q", what, got, want)
		}
	}
	toggles := []struct {
		what string
		sql  string
		mode pgx.QueryExecMode
	}{
		{"SELECT f_toggle()", "SELECT f_toggle()", pgx.QueryExecModeSimpleProtocol},
		{"SELECT F_Toggle() in an expression", "SELECT 1 FROM (SELECT public.F_Toggle()) x", pgx.QueryExecModeSimpleProtocol},
		{"a DO block", "DO $$ BEGIN PERFORM f_toggle(); END $$", pgx.QueryExecModeSimpleProtocol},
		{"CALL", "CALL p_toggle()", pgx.QueryExecModeSimpleProtocol},
		// Prepared once (prepared: no sql), then each execution is a
		// Bind only.
		{"a prepared SELECT f_toggle()", "", 0},
		{"a prepared SELECT f_toggle() again", "", 0},
		{"a prepared SELECT f_toggle() a third time", "", 0},
	}
	if _, err := conn.PgConn().Prepare(ctx, "toggle", "SELECT f_toggle()", nil); err != nil {
		t.Fatal(err)
	}
	run("int column")
	if p.Stats().Rewrites == 0 {
		t.Fatal("the query was not rewritten: nothing to test")
	}
	for _, tg := range toggles {
		if tg.sql == "" {
			if err := conn.PgConn().ExecPrepared(ctx, "toggle", nil, nil, nil).Read().Err; err != nil {
				t.Fatalf("%s: %v", tg.what, err)
			}
		} else if _, err := conn.Exec(ctx, tg.sql, tg.mode); err != nil {
			t.Fatalf("%s: %v", tg.what, err)
		}
		run("after " + tg.what)
		run("after " + tg.what + ", cached")
	}
	before := p.Stats().Invalidations
	if _, err := conn.Exec(ctx, "SELECT f_stable()", pgx.QueryExecModeSimpleProtocol); err != nil {
		t.Fatal(err)
	}
	if n := p.Stats().Invalidations - before; n != 0 {
		t.Errorf("a stable function's call made %d invalidations, want 0", n)
	}
	// A new volatile function, created through the proxy, is known at once.
	if _, err := conn.Exec(ctx, "CREATE FUNCTION f_new() RETURNS void LANGUAGE sql AS 'SELECT f_toggle()'"); err != nil {
		t.Fatal(err)
	}
	run("before f_new")
	if _, err := conn.Exec(ctx, "SELECT f_new()", pgx.QueryExecModeSimpleProtocol); err != nil {
		t.Fatal(err)
	}
	run("after SELECT f_new()")
	noRejections(t, p)
	var sides int
	if err := direct.QueryRow(ctx, "SELECT count(*) FROM pg_stat_activity WHERE application_name = $1", SideApplicationName).Scan(&sides); err != nil || sides == 0 {
		t.Errorf("side connections named %q in pg_stat_activity: %d (%v), want some", SideApplicationName, sides, err)
	}
}

// The window docs/design/proxy-guarantees.md documents: a schema change made around the proxy
// is not seen until Flush or the decision's time-out. A cached rewrite
// whose subquery column became an array fails with the server's 42883,
// as the original does (its kept arm is analysed too); other type changes
// keep the operator resolution (the cached rewrite answers as the server
// does).
func TestSchemaChangeAroundTheProxy(t *testing.T) {
	ctx := context.Background()
	dsn, direct := setup(t)
	if _, err := direct.Exec(ctx, ddlSchema); err != nil {
		t.Fatal(err)
	}
	const ttl = 2 * time.Second
	p, addr := startProxyConfig(t, Config{Upstream: srv.DSN(t, "postgres"), DecisionTTL: ttl}, false)
	conn := proxiedConn(t, dsn, addr)
	both := func() (proxied, straight string) {
		return outcome(ctx, conn, ddlQuery, pgx.QueryExecModeSimpleProtocol), outcome(ctx, direct, ddlQuery, pgx.QueryExecModeSimpleProtocol)
	}
	alter := func(to string) {
		t.Helper()
		if _, err := direct.Exec(ctx, "ALTER TABLE w3 ALTER x TYPE "+to+" USING x::"+to); err != nil {
			t.Fatal(err)
		}
	}
	toInt := func() {
		t.Helper()
		if _, err := direct.Exec(ctx, "ALTER TABLE w3 ALTER x TYPE int USING x[1]"); err != nil {
			t.Fatal(err)
		}
	}
	for _, to := range []string{"bigint", "numeric", "text"} {
		alter("int")
		p.Flush()
		if got, want := both(); got != want || got != "2" {
			t.Fatalf("int: through the proxy %q, direct %q, want 2", got, want)
		}
		rewrites := p.Stats().Rewrites
		alter(to)
		got, want := both()
		if p.Stats().Rewrites == rewrites {
			t.Errorf("int -> %s: the cached rewrite was not used", to)
		}
		if got != want {
			t.Errorf("int -> %s: the cached rewrite gives %q, the server %q", to, got, want)
		}
	}
	alter("int")
	p.Flush()
	if got, _ := both(); got != "2" {
		t.Fatalf("int: %q", got)
	}
	if _, err := direct.Exec(ctx, "ALTER TABLE w3 ALTER x TYPE int[] USING array[x, 2, 3]"); err != nil {
		t.Fatal(err)
	}
	// The cached rewrite is used, and its kept original arm (rewrite's
	// guardOpen) fails as the original does: before the guard this
	// answered 4.
	rewrites := p.Stats().Rewrites
	if got, want := both(); got != want || want != "ERROR 42883" {
		t.Errorf("int -> int[] around the proxy, within the time-out: through the proxy %q, direct %q; want ERROR 42883 both", got, want)
	}
	if p.Stats().Rewrites == rewrites {
		t.Errorf("int -> int[]: the cached rewrite was not used")
	}
	p.Flush()
	if got, want := both(); got != want {
		t.Errorf("after Flush: through the proxy %q, direct %q", got, want)
	}
	// Back to int, cached, to int[] again: the time-out ends the window.
	toInt()
	p.Flush()
	both()
	if _, err := direct.Exec(ctx, "ALTER TABLE w3 ALTER x TYPE int[] USING array[x, 2, 3]"); err != nil {
		t.Fatal(err)
	}
	time.Sleep(ttl + 100*time.Millisecond)
	if got, want := both(); got != want {
		t.Errorf("after the time-out: through the proxy %q, direct %q", got, want)
	}
}
