package doctor

import (
	"context"
	"fmt"
	"slices"
	"sort"

	pg_query "github.com/pganalyze/pg_query_go/v6"
	"google.golang.org/protobuf/proto"

	"github.com/erplab/erplab/internal/rewrite"
)

// Sources of the statistics-target rule.
const (
	srcStatsTarget = "https://www.postgresql.org/docs/current/runtime-config-query.html#GUC-DEFAULT-STATISTICS-TARGET; https://www.postgresql.org/docs/current/sql-altertable.html (SET STATISTICS)"
	srcPgStats     = "https://www.postgresql.org/docs/current/view-pg-stats.html"
	srcEqjoinsel   = "src/backend/utils/adt/selfuncs.c (eqjoinsel_inner: compares the MCV lists of both join sides pairwise, O(n x m) per clause)"
	srcFieldStats  = "docs/field-notes.md section 1 (a join planned in 91 ms against 0.2 ms execution: statistics target 10000, large MCV lists on the join keys)"
)

// Thresholds of the statistics-target rule: a column's statistics
// target or MCV list is large at or above these.
const (
	statsTargetLarge = 1000
	mcvLarge         = 1000
)

// joinColStat is one column's statistics (pg_stats) with its
// statistics target (pg_attribute.attstattarget, or
// default_statistics_target when it is -1 or NULL).
type joinColStat struct {
	Schema    string `json:"schema"`
	Table     string `json:"table"`
	Column    string `json:"column"`
	Target    int    `json:"target"`
	MCV       int    `json:"mcv"`
	Histogram int    `json:"histogram"`
}

func (c joinColStat) String() string {
	return fmt.Sprintf("%s.%s.%s: statistics target %d, %d most common values, %d histogram bounds", c.Schema, c.Table, c.Column, c.Target, c.MCV, c.Histogram)
}

// largeStatsSQL lists the connected database's columns whose statistics
// target or MCV list is large ($1: the threshold for both).
const largeStatsSQL = `SELECT s.schemaname::text, s.tablename::text, s.attname::text,
       CASE WHEN coalesce(a.attstattarget, -1) < 0 THEN current_setting('default_statistics_target')::int4 ELSE a.attstattarget::int4 END,
       coalesce(pg_catalog.array_length(s.most_common_vals, 1), 0), coalesce(pg_catalog.array_length(s.histogram_bounds, 1), 0)
FROM pg_catalog.pg_stats s
JOIN pg_catalog.pg_namespace n ON n.nspname = s.schemaname
JOIN pg_catalog.pg_class c ON c.relnamespace = n.oid AND c.relname = s.tablename
JOIN pg_catalog.pg_attribute a ON a.attrelid = c.oid AND a.attname = s.attname
WHERE s.schemaname NOT IN ('pg_catalog', 'information_schema')
  AND (coalesce(pg_catalog.array_length(s.most_common_vals, 1), 0) >= $1
       OR (CASE WHEN coalesce(a.attstattarget, -1) < 0 THEN current_setting('default_statistics_target')::int4 ELSE a.attstattarget::int4 END) >= $1)
ORDER BY 5 DESC, 4 DESC, 1, 2, 3
LIMIT 200`

// joinStats loads the large-statistics columns (or the recorded ones).
func (e *env) joinStats(ctx context.Context) ([]joinColStat, error) {
	if e.rec != nil {
		if e.rec.JoinStats == nil {
			return nil, errNotRecorded("join_stats")
		}
		return e.rec.JoinStats, nil
	}
	rows, err := e.conn.Query(ctx, largeStatsSQL, statsTargetLarge)
	if err != nil {
		return nil, err
	}
	var out []joinColStat
	var c joinColStat
	for rows.Next() {
		if err := rows.Scan(&c.Schema, &c.Table, &c.Column, &c.Target, &c.MCV, &c.Histogram); err != nil {
			rows.Close()
			return nil, err
		}
		out = append(out, c)
	}
	return out, rows.Err()
}

// joinColumns parses sql (pg_query, through rewrite.Parse) and returns the relations it reads
// (RangeVar names, unqualified) and the column names compared by an
// equality between two column references (a.x = b.y: a join clause,
// in JOIN ON or WHERE). Errors: the parser's, for text that does not
// parse, or rewrite's *LimitError for text too large or deep for it.
func joinColumns(sql string) (rels, cols []string, err error) {
	tree, err := rewrite.Parse(sql)
	if err != nil {
		return nil, nil, fmt.Errorf("parse: %w", err)
	}
	rewrite.Walk(tree, func(m proto.Message) bool {
		switch n := m.(type) {
		case *pg_query.RangeVar:
			rels = append(rels, n.Relname)
		case *pg_query.A_Expr:
			if n.Kind != pg_query.A_Expr_Kind_AEXPR_OP || len(n.Name) != 1 || n.Name[0].GetString_().GetSval() != "=" {
				return true
			}
			l, r := n.GetLexpr().GetColumnRef(), n.GetRexpr().GetColumnRef()
			if l == nil || r == nil {
				return true
			}
			for _, cr := range []*pg_query.ColumnRef{l, r} {
				if f := cr.GetFields(); len(f) > 0 {
					if name := f[len(f)-1].GetString_().GetSval(); name != "" {
						cols = append(cols, name)
					}
				}
			}
		}
		return true
	})
	return rels, cols, nil
}

// statsHit is a large-statistics column used as a join key by a
// statement that plans slowly.
type statsHit struct {
	col  joinColStat
	stmt pgssRow
}

func init() {
	register(Check{ID: "statistics-targets", Title: "Large statistics targets and MCV lists on join columns", order: secStatements + 20, run: checkStatisticsTargets,
		Rule:    "warning when a column with a statistics target or MCV list of >= 1000 (pg_stats, attstattarget, default_statistics_target) is a join key (a.x = b.y, parsed with pg_query) of a statement that plans >= 5 ms and longer than it runs; info when such columns exist without that evidence",
		Why:     "The planner compares the most-common-value lists of both sides of every join clause, so a target of thousands turns a 1 ms plan into 100 ms; join_collapse_limit does not help.",
		Sources: []string{srcStatsTarget, srcPgStats, srcEqjoinsel, srcPgss, srcFieldStats}})
}

func checkStatisticsTargets(ctx context.Context, e *env) result {
	cols, err := e.joinStats(ctx)
	if err != nil {
		return failed(err)
	}
	ev := []Evidence{{Text: "default_statistics_target = " + e.show("default_statistics_target"), From: "pg_settings"}}
	m := map[string]float64{"large_columns": float64(len(cols))}
	for i, c := range cols {
		if i == maxListed {
			ev = append(ev, Evidence{Text: fmt.Sprintf("... and %d more", len(cols)-maxListed), From: "pg_stats"})
			break
		}
		ev = append(ev, Evidence{Text: c.String(), From: "pg_stats, pg_attribute.attstattarget (database " + e.srv.Database + ")"})
	}
	if len(cols) > 0 {
		m["largest_mcv"], m["largest_target"] = float64(cols[0].MCV), float64(slices.MaxFunc(cols, func(a, b joinColStat) int { return a.Target - b.Target }).Target)
	}
	// The planning evidence: slow-planning statements joining on them.
	var hits []statsHit
	st := e.statements(ctx)
	if st.needs == "" && st.trackPlanning {
		for _, r := range slowPlanning(st.rows) {
			rels, jc, err := joinColumns(r.Query)
			if err != nil {
				continue
			}
			for _, c := range cols {
				if slices.Contains(rels, c.Table) && slices.Contains(jc, c.Column) {
					hits = append(hits, statsHit{col: c, stmt: r})
				}
			}
		}
	}
	sort.SliceStable(hits, func(i, j int) bool { return hits[i].stmt.TotalPlanMs > hits[j].stmt.TotalPlanMs })
	var stmts []Statement
	seen := map[int64]bool{}
	for _, h := range hits {
		ev = append(ev, Evidence{Text: fmt.Sprintf("queryid %d joins on %s.%s (MCV %d, target %d) and plans %.1f ms vs %.1f ms execution (%.0f %% of its time planning): %s",
			h.stmt.QueryID, h.col.Table, h.col.Column, h.col.MCV, h.col.Target, h.stmt.meanPlanMs(), h.stmt.meanExecMs(), 100*h.stmt.planShare(), clip(h.stmt.Query, 120)), From: "pg_stat_statements, pg_query"})
		if !seen[h.stmt.QueryID] {
			seen[h.stmt.QueryID] = true
			stmts = append(stmts, h.stmt.statement("joins on "+h.col.Table+"."+h.col.Column))
		}
	}
	m["slow_joins"] = float64(len(hits))
	fixFor := func(cs []joinColStat) []string {
		var fix []string
		done := map[string]bool{}
		for _, c := range cs {
			k := c.Schema + "." + c.Table + "." + c.Column
			if done[k] {
				continue
			}
			done[k] = true
			t := quoteQualified(c.Schema + "." + c.Table)
			fix = append(fix, fmt.Sprintf("ALTER TABLE %s ALTER COLUMN %s SET STATISTICS -1;   -- back to default_statistics_target (%s); or a few hundred if estimates need it", t, quoteQualified(c.Column), e.show("default_statistics_target")),
				fmt.Sprintf("ANALYZE %s;", t))
		}
		return append(fix, "-- then compare 'Planning Time' of EXPLAIN (SUMMARY) <statement> before and after")
	}
	switch {
	case len(hits) > 0:
		var hc []joinColStat
		for _, h := range hits {
			hc = append(hc, h.col)
		}
		h := hits[0]
		return result{sev: Warning, summary: fmt.Sprintf("%d slow-planning statements join on columns with large statistics (worst: queryid %d on %s.%s, %d most common values, target %d: %.1f ms planning vs %.1f ms execution)",
			len(stmts), h.stmt.QueryID, h.col.Table, h.col.Column, h.col.MCV, h.col.Target, h.stmt.meanPlanMs(), h.stmt.meanExecMs()), evidence: ev, metrics: m, fix: fixFor(hc), stmts: stmts}
	case len(cols) > 0:
		why := "no slow-planning statement joins on them"
		switch {
		case st.needs != "":
			why = "planning not measured (" + st.needs + ")"
		case !st.trackPlanning:
			why = "planning not measured (pg_stat_statements.track_planning = off)"
		}
		return result{sev: Info, summary: fmt.Sprintf("%d columns have a statistics target or MCV list of %d or more (largest MCV list %d on %s.%s); %s", len(cols), statsTargetLarge, cols[0].MCV, cols[0].Table, cols[0].Column, why), evidence: ev, metrics: m, fix: fixFor(cols[:min(len(cols), 3)])}
	}
	return result{sev: OK, summary: fmt.Sprintf("no column has a statistics target or MCV list of %d or more (default_statistics_target = %s)", statsTargetLarge, e.show("default_statistics_target")), evidence: ev, metrics: m}
}
