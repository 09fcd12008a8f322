package proxy

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
)

// The erp report's shape (internal/erp/queries/
// or_subquery_report.sql): a register filtered by OR over subqueries of
// the item catalog with LIKE patterns that are parameters. LIKE fails on
// a pattern ending with its escape character, and ARRAY(subquery) runs
// where the original's hashed SubPlan may never run (an empty register),
// so the proxy rewrites such a statement per execution: each Bind whose
// patterns cannot fail runs the rewritten statement, any other the
// original under the client's name.
const condSchema = `
CREATE TABLE cat (id int PRIMARY KEY, descr varchar(50), art varchar(20));
INSERT INTO cat SELECT g, 'Drill ' || g, 'ART-' || g FROM generate_series(1, 2000) g;
CREATE INDEX ON cat (descr); CREATE INDEX ON cat (art);
CREATE TABLE reg (item int, period int, qty int); CREATE INDEX ON reg (item, period);
INSERT INTO reg SELECT g % 2000 + 1, g % 100, 1 FROM generate_series(1, 20000) g;
CREATE TABLE reg0 (item int, period int, qty int); CREATE INDEX ON reg0 (item, period);
ANALYZE;`

// condReport is the report over a register (%s: reg or reg0).
const condReport = `SELECT count(*), sum(m.qty) FROM reg m WHERE m.period < $1
  AND (m.item IN (SELECT a.id FROM cat a WHERE a.descr LIKE $2) OR m.item IN (SELECT c.id FROM cat c WHERE c.art LIKE $3))`

const condReportEmpty = `SELECT count(*), sum(m.qty) FROM reg0 m WHERE m.period < $1
  AND (m.item IN (SELECT a.id FROM cat a WHERE a.descr LIKE $2) OR m.item IN (SELECT c.id FROM cat c WHERE c.art LIKE $3))`

func TestConditionalRewritePerBind(t *testing.T) {
	ctx := context.Background()
	steps := func(c *pgx.Conn) []string {
		out := []string{raw(c, "SET plan_cache_mode = force_generic_plan")}
		for _, s := range []struct{ name, sql string }{{"rep", condReport}, {"rep0", condReportEmpty}} {
			if _, err := c.Prepare(ctx, s.name, s.sql); err != nil {
				return []string{sqlstate(err)}
			}
		}
		for _, args := range [][]any{
			{50, "Drill 1%", "ART-7%"},     // rewritten
			{50, `Drill 1%\`, "ART-7%"},    // a pattern ending with the escape: the original's error
			{50, `Drill 1\\`, "ART-7_"},    // an escaped backslash: rewritten
			{50, "Drill 12%", nil},         // NULL: rewritten
			{50, "Drill 3%", `ART-%\\\`},   // an odd run of three
			{50, "Drill 19%", "ART-1999%"}, // rewritten
			{-1, `Drill 1%\`, "ART-7%"},    // no row in the period: the original never runs the subquery
		} {
			out = append(out, outcome(ctx, c, "rep", args...), outcome(ctx, c, "rep0", args...))
		}
		return out
	}
	want, got, p := directThenProxied(t, condSchema, steps)
	if !slices.Equal(got, want) {
		t.Errorf("through the proxy %q,\ndirect %q", got, want)
	}
	if want[3] != "ERROR 22025" || want[4] != "0 <nil>" || want[13] != "0 <nil>" {
		t.Errorf("direct %q: want 22025 on the register, no error on the empty one nor out of the period", want)
	}
	s := p.Stats()
	if s.BindsRewritten != 8 || s.BindsOriginal != 6 {
		t.Errorf("executions rewritten %d, as written %d: want 8 and 6 (%s)", s.BindsRewritten, s.BindsOriginal, s)
	}
	noRejections(t, p)
}

// A Close (pgx's Deallocate) closes the private rewritten statement too, and a new
// Parse of the name with another text binds its own statements; the
// unnamed statement (pgx's describe-exec and exec modes) works the same.
func TestConditionalRewriteCloseAndUnnamed(t *testing.T) {
	ctx := context.Background()
	other := condReport + " AND m.qty > 0"
	var privs int
	steps := func(c *pgx.Conn) []string {
		out := []string{raw(c, "SET plan_cache_mode = force_generic_plan")}
		run := func(sql string, args ...any) {
			out = append(out, outcome(ctx, c, sql, args...))
		}
		for round, sql := range []string{condReportEmpty, other, condReport} {
			if round > 0 {
				if err := c.Deallocate(ctx, "rep"); err != nil {
					return append(out, sqlstate(err))
				}
			}
			if _, err := c.Prepare(ctx, "rep", sql); err != nil {
				return append(out, sqlstate(err))
			}
			run("rep", 50, `Drill 1%\`, "ART-7%")
			run("rep", 50, "Drill 1%", "ART-7%")
		}
		// A DEALLOCATE that fails drops nothing; one that succeeds
		// leaves the client's name unknown, as directly.
		out = append(out, raw(c, "BEGIN; SELECT 1/0"), raw(c, "DEALLOCATE rep"), raw(c, "ROLLBACK"))
		run("rep", -1, `Drill 1%\`, "ART-7%")
		out = append(out, raw(c, "DEALLOCATE rep"))
		run("rep", -1, `Drill 1%\`, "ART-7%")
		run("rep", 50, "Drill 1%", "ART-7%")
		for _, mode := range []pgx.QueryExecMode{pgx.QueryExecModeDescribeExec, pgx.QueryExecModeExec} {
			run(condReportEmpty, mode, 50, `Drill 1%\`, "ART-7%")
			run(condReportEmpty, mode, 50, "Drill 1%", "ART-7%")
			run(condReport, mode, 50, "Drill 1%", `ART-7%\`)
			run(condReport, mode, 50, "Drill 1%", "ART-7%")
		}
		run("SELECT name FROM pg_prepared_statements WHERE name NOT LIKE 'erplab\\_rw\\_%' AND name NOT LIKE 'stmtcache%'")
		if err := c.QueryRow(ctx, "SELECT count(*) FROM pg_prepared_statements WHERE name LIKE 'erplab\\_rw\\_%'").Scan(&privs); err != nil {
			return append(out, sqlstate(err))
		}
		return out
	}
	want, got, p := directThenProxied(t, condSchema, steps)
	if !slices.Equal(got, want) {
		t.Errorf("through the proxy %q,\ndirect %q", got, want)
	}
	if want[1] != "0 <nil>" || want[3] != "ERROR 22025" || want[10] != "0 <nil>" || want[12] != "ERROR 26000" {
		t.Errorf("direct %q: want no error on the empty register, 22025 on the other, none out of the period, 26000 after DEALLOCATE", want)
	}
	// Closed and deallocated statements' private statements are closed:
	// the last unnamed statement's remains.
	if privs != 1 {
		t.Errorf("%d private statements through the proxy, want 1", privs)
	}
	s := p.Stats()
	if s.BindsRewritten < 6 || s.BindsOriginal < 6 {
		t.Errorf("executions rewritten %d, as written %d: want at least 6 each (%s)", s.BindsRewritten, s.BindsOriginal, s)
	}
	noRejections(t, p)
}

// A Bind too large to gather (relayed as it arrives, its values unseen)
// of a conditional statement runs the original: here a pattern of many
// '%' ending with its escape, out of the period (no error directly; the
// rewritten statement's InitPlan would raise 22025).
func TestConditionalRewriteStreamedBind(t *testing.T) {
	ctx := context.Background()
	long := "Drill 1" + strings.Repeat("%", 5*streamMin) + `\`
	steps := func(c *pgx.Conn) []string {
		out := []string{raw(c, "SET plan_cache_mode = force_generic_plan")}
		if _, err := c.Prepare(ctx, "rep", condReport); err != nil {
			return append(out, sqlstate(err))
		}
		return append(out, outcome(ctx, c, "rep", -1, long, "ART-7%"), outcome(ctx, c, "rep", 50, "Drill 1%", "ART-7%"))
	}
	want, got, p := directThenProxied(t, condSchema, steps)
	if !slices.Equal(got, want) || want[1] != "0 <nil>" {
		t.Errorf("through the proxy %q,\ndirect %q (want no error out of the period)", got, want)
	}
	if s := p.Stats(); s.BindsOriginal != 1 || s.BindsRewritten != 1 {
		t.Errorf("executions rewritten %d, as written %d: want 1 and 1", s.BindsRewritten, s.BindsOriginal)
	}
}
