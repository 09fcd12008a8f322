package doctor

import (
	"context"
	"fmt"
	"sort"
	"strings"

	"github.com/jackc/pgx/v5"
)

// Sources of the statement rules.
const (
	srcPgss          = "https://www.postgresql.org/docs/current/pgstatstatements.html"
	srcCollapse      = "https://www.postgresql.org/docs/current/runtime-config-query.html#GUC-JOIN-COLLAPSE-LIMIT"
	srcExplicitJoins = "https://www.postgresql.org/docs/current/explicit-joins.html"
	srcGEQO          = "https://www.postgresql.org/docs/current/geqo.html"
	srcIndexOr       = "https://www.postgresql.org/docs/current/indexes-bitmap-scans.html; src/backend/optimizer/path/indxpath.c (OR arms must be index clauses)"
	srcFieldPlanning = "docs/field-notes.md section 1 (planning 300-500 ms vs execution of ms; lower *_collapse_limit gave ~50 ms)"
	srcFieldOR       = "docs/field-notes.md section 1 (OR over subqueries: 4-15 s, 8,000 runs; rewritten: 1 ms)"
)

// Thresholds of the statement checks.
const (
	// A statement plans slowly when it was planned at least planMinPlans
	// times, its mean planning time is at least planSlowMs and above its
	// mean execution time (the field's 26-join form: 28.8 ms planning,
	// 1.5 ms execution).
	planMinPlans = 5
	planSlowMs   = 5.0
	// planShareWarn: planning at or above this share of plan+execution
	// time over all statements, with at least planTotalMinMs of planning.
	planShareWarn  = 0.20
	planTotalMinMs = 10_000.0
	// OR-over-subquery statements are a warning when together they used
	// at least orTotalWarnMs of execution time (an ERP platform generates
	// many texts of one query shape), or one used orMeanWarnMs per call.
	orTotalWarnMs = 1000.0
	orMeanWarnMs  = 100.0
	// maxListed statements are named in the evidence.
	maxListed = 5
)

func pgssNotChecked(st *pgssState) result { return notChecked(st.needs) }

func checkPlanningTime(ctx context.Context, e *env) result {
	st := e.statements(ctx)
	if st.needs != "" {
		return pgssNotChecked(st)
	}
	if !st.trackPlanning {
		return notChecked("pg_stat_statements.track_planning = on (ALTER SYSTEM SET pg_stat_statements.track_planning = on; SELECT pg_reload_conf();)")
	}
	settings := Evidence{Text: fmt.Sprintf("join_collapse_limit = %s, from_collapse_limit = %s, geqo = %s, geqo_threshold = %s",
		e.show("join_collapse_limit"), e.show("from_collapse_limit"), e.show("geqo"), e.show("geqo_threshold")), From: "pg_settings"}
	var plan, exec float64
	for _, r := range st.rows {
		plan += r.TotalPlanMs
		exec += r.TotalExecMs
	}
	slow := slowPlanning(st.rows)
	share := plan / max(plan+exec, 1e-9)
	ev := []Evidence{{Text: fmt.Sprintf("%d statements: planning %.0f ms, execution %.0f ms (planning %.1f %% of the total)", len(st.rows), plan, exec, 100*share), From: "pg_stat_statements.total_plan_time, total_exec_time"}, settings}
	for i, r := range slow {
		if i == maxListed {
			ev = append(ev, Evidence{Text: fmt.Sprintf("... and %d more", len(slow)-maxListed), From: "pg_stat_statements"})
			break
		}
		ev = append(ev, Evidence{Text: fmt.Sprintf("queryid %d (%s): planning %.1f ms vs execution %.1f ms on average (%.0f %% of its time planning), %d plans, %d calls: %s",
			r.QueryID, r.Database, r.meanPlanMs(), r.meanExecMs(), 100*r.planShare(), r.Plans, r.Calls, clip(r.Query, 120)), From: "pg_stat_statements"})
	}
	m := map[string]float64{"plan_ms": round2(plan), "exec_ms": round2(exec), "plan_share_pct": round2(100 * share), "slow_statements": float64(len(slow))}
	var stmts []Statement
	for _, r := range slow {
		stmts = append(stmts, r.statement(fmt.Sprintf("plans slower than it runs: %.0f %% of its time planning", 100*r.planShare())))
	}
	db := pgx.Identifier{e.srv.Database}.Sanitize()
	fix := []string{
		"-- check one statement: SET join_collapse_limit = 4; SET from_collapse_limit = 4; EXPLAIN (SUMMARY) <statement>;   -- compare 'Planning Time'",
		fmt.Sprintf("ALTER DATABASE %s SET join_collapse_limit = 4;   -- new sessions; the planner then keeps the written JOIN order beyond 4 items", db),
		fmt.Sprintf("ALTER DATABASE %s SET from_collapse_limit = 4;", db),
		fmt.Sprintf("ALTER DATABASE %s SET geqo_threshold = 8;   -- or let the genetic optimizer take many-JOIN queries earlier", db),
	}
	switch {
	case len(slow) > 0:
		r := slow[0]
		fix = append(fix, "# large statistics targets or MCV lists on the join columns also slow planning (eqjoinsel compares the MCV lists of both sides): see check statistics-targets")
		return result{sev: Warning, summary: fmt.Sprintf("%d statements plan longer than they run (worst: queryid %d, %.1f ms planning vs %.1f ms execution, %.0f %% of its time planning)", len(slow), r.QueryID, r.meanPlanMs(), r.meanExecMs(), 100*r.planShare()), evidence: ev, metrics: m, fix: fix, stmts: stmts}
	case share >= planShareWarn && plan >= planTotalMinMs:
		return result{sev: Warning, summary: fmt.Sprintf("planning is %.0f %% of statement time", 100*share), evidence: ev, metrics: m, fix: fix}
	}
	return result{sev: OK, summary: fmt.Sprintf("planning is %.1f %% of statement time (%.0f ms of %.0f ms, %d statements); no statement plans %.0f ms or more and slower than it runs", 100*share, plan, plan+exec, len(st.rows), planSlowMs), evidence: ev, metrics: m}
}

// slowPlanning returns the statements that plan slowly (see planSlowMs),
// most planning time first.
func slowPlanning(rows []pgssRow) []pgssRow {
	var slow []pgssRow
	for _, r := range rows {
		if r.Plans >= planMinPlans && r.meanPlanMs() >= planSlowMs && r.meanPlanMs() > r.meanExecMs() {
			slow = append(slow, r)
		}
	}
	sort.SliceStable(slow, func(i, j int) bool { return slow[i].TotalPlanMs > slow[j].TotalPlanMs })
	return slow
}

// orHit is a statement of pg_stat_statements with OR-over-subquery filters.
type orHit struct {
	row  pgssRow
	hits []ORSubquery
}

func checkORSubquery(ctx context.Context, e *env) result {
	st := e.statements(ctx)
	if st.needs != "" {
		return pgssNotChecked(st)
	}
	var found []orHit
	var unparsed, hidden int
	for _, r := range st.rows {
		if r.Query == "<insufficient privilege>" {
			hidden++
			continue
		}
		hits, err := FindORSubqueries(r.Query)
		if err != nil {
			unparsed++
			continue
		}
		if len(hits) > 0 {
			found = append(found, orHit{row: r, hits: hits})
		}
	}
	sort.SliceStable(found, func(i, j int) bool { return found[i].row.TotalExecMs > found[j].row.TotalExecMs })
	ev := []Evidence{{Text: fmt.Sprintf("%d statements parsed with the PostgreSQL grammar (pg_query), %d did not parse, %d hidden (no pg_read_all_stats)", len(st.rows)-unparsed-hidden, unparsed, hidden),
		From: "pg_stat_statements.query"}}
	m := map[string]float64{"statements": float64(len(found))}
	if len(found) == 0 {
		return result{sev: OK, summary: "no statement filters one column with OR over a subquery", evidence: ev, metrics: m}
	}
	sev := Info
	var stmts []Statement
	var totalMs float64
	var calls int64
	for i, f := range found {
		r := f.row
		totalMs += r.TotalExecMs
		calls += r.Calls
		if r.meanExecMs() >= orMeanWarnMs {
			sev = Warning
		}
		cols := make([]string, len(f.hits))
		for j, h := range f.hits {
			cols[j] = h.String()
		}
		note := strings.Join(cols, "; ")
		stmts = append(stmts, r.statement(note))
		if i < maxListed {
			ev = append(ev, Evidence{Text: fmt.Sprintf("queryid %d (%s): %s; %d calls, %.1f ms mean, %.0f ms total: %s",
				r.QueryID, r.Database, note, r.Calls, r.meanExecMs(), r.TotalExecMs, clip(r.Query, 200)), From: "pg_stat_statements"})
		}
	}
	if len(found) > maxListed {
		ev = append(ev, Evidence{Text: fmt.Sprintf("... and %d more", len(found)-maxListed), From: "pg_stat_statements"})
	}
	if totalMs >= orTotalWarnMs {
		sev = Warning
	}
	m["total_exec_ms"], m["calls"] = round2(totalMs), float64(calls)
	top := found[0]
	fix := []string{
		fmt.Sprintf("-- EXPLAIN the statement (queryid %d) with real values: a Seq Scan on the filtered table confirms it", top.row.QueryID),
		"-- rewrite so each arm can use the index: col IN (SELECT ... UNION ALL SELECT $1), or one SELECT per arm joined by UNION",
		"-- when the SQL is generated by a platform that cannot change it: put erplab's rewriting proxy between the application and the server",
		"erplab proxy --listen 127.0.0.1:6433 --upstream '<this server's DSN>'   # rewrites col IN (subquery) arms to col = ANY (ARRAY(subquery)) on the wire",
		"erplab rewrite --dsn '<DSN>' --explain --analyze < statement.sql   # both plans side by side first",
	}
	return result{sev: sev, summary: fmt.Sprintf("%d statements filter one column with OR over a subquery, %d calls, %.0f ms of execution (worst: queryid %d on column %s, %.0f ms)",
		len(found), calls, totalMs, top.row.QueryID, top.hits[0].Column, top.row.TotalExecMs),
		evidence: ev, metrics: m, fix: fix, stmts: stmts}
}
