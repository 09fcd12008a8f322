package erp

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/erplab/erplab/internal/rewrite"
)

// explainScale is the data scale of the EXPLAIN tests: large enough that
// index scans of a few items' movements beat sequential scans of the
// registers for the planner (at 0.01 a register has about 30 pages).
const explainScale = 0.1

// planNode is the part of an EXPLAIN (FORMAT JSON) plan node the tests read
// (PostgreSQL docs, "EXPLAIN"; the key names are ExplainPropertyText
// labels of src/backend/commands/explain.c).
type planNode struct {
	NodeType     string     `json:"Node Type"`
	RelationName string     `json:"Relation Name"`
	IndexName    string     `json:"Index Name"`
	Filter       string     `json:"Filter"`
	Plans        []planNode `json:"Plans"`
}

type explained struct {
	Plan          planNode `json:"Plan"`
	PlanningTime  float64  `json:"Planning Time"`  // ms
	ExecutionTime float64  `json:"Execution Time"` // ms
}

// explain runs EXPLAIN (options, FORMAT JSON) of q on conn, sending the
// arguments as Execute does.
func explain(t *testing.T, conn *pgx.Conn, options string, q ExplainQuery) explained {
	t.Helper()
	var raw []byte
	args := append([]any{execMode}, q.Args...)
	if err := conn.QueryRow(context.Background(), "EXPLAIN ("+options+", FORMAT JSON) "+q.SQL, args...).Scan(&raw); err != nil {
		t.Fatalf("EXPLAIN %s/%s: %v", q.Op, q.Name, err)
	}
	var out []explained
	if err := json.Unmarshal(raw, &out); err != nil || len(out) != 1 {
		t.Fatalf("EXPLAIN %s/%s: cannot read the JSON plan (%v): %s", q.Op, q.Name, err, raw)
	}
	return out[0]
}

// scans lists, for every plan node reading relation rel, its node type;
// index names are those of any index scan in the plan (a Bitmap Heap Scan
// names the relation, its Bitmap Index Scan child the index).
func scans(n planNode, rel string, types, indexes *[]string) {
	if n.RelationName == rel {
		*types = append(*types, n.NodeType)
	}
	if n.IndexName != "" {
		*indexes = append(*indexes, n.IndexName)
	}
	for _, c := range n.Plans {
		scans(c, rel, types, indexes)
	}
}

// seqScans lists the relations read by a Seq Scan or Parallel Seq Scan
// anywhere in the plan, with each such scan's filter.
func seqScans(n planNode, out map[string][]string) {
	if n.NodeType == "Seq Scan" || n.NodeType == "Parallel Seq Scan" {
		out[n.RelationName] = append(out[n.RelationName], n.Filter)
	}
	for _, c := range n.Plans {
		seqScans(c, out)
	}
}

// queryRows runs q on conn as Execute does and returns its rows as
// strings of their values, sorted (a multiset).
func queryRows(t *testing.T, conn *pgx.Conn, q ExplainQuery) []string {
	t.Helper()
	rows, err := conn.Query(context.Background(), q.SQL, append([]any{execMode}, q.Args...)...)
	if err != nil {
		t.Fatalf("%s/%s: %v", q.Op, q.Name, err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		v, err := rows.Values()
		if err != nil {
			t.Fatalf("%s/%s: %v", q.Op, q.Name, err)
		}
		out = append(out, fmt.Sprint(v...))
	}
	if err := rows.Err(); err != nil {
		t.Fatalf("%s/%s: %v", q.Op, q.Name, err)
	}
	slices.Sort(out)
	return out
}

func findQuery(t *testing.T, qs []ExplainQuery, op, name string) ExplainQuery {
	t.Helper()
	for _, q := range qs {
		if q.Op == op && q.Name == name {
			return q
		}
	}
	t.Fatalf("ExplainableQueries has no %s/%s", op, name)
	return ExplainQuery{}
}

// TestExplainKeyOperations asserts the two plan facts the workload exists
// to reproduce on stock PostgreSQL: the item analysis report (operation 7)
// reads both movement registers by sequential scans filtered by hashed
// SubPlans although an index leads with the item, while its = ANY
// (ARRAY(subquery)) rewrite (exactly what the rewrite rule produces) reads
// nothing sequentially and both registers through their item indexes, with
// the same result; and the document form (operation 2) takes longer to
// plan than to execute.
func TestExplainKeyOperations(t *testing.T) {
	w := New(WorkloadOptions{})
	pool := opsSetup(t, w, explainScale)
	ctx := context.Background()
	pc, err := pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer pc.Release()
	conn := pc.Conn()
	qs, err := w.ExplainableQueries(ctx, conn, opsVU(5, "accountant"))
	if err != nil {
		t.Fatal(err)
	}

	const orOp = "or_subquery_report"
	registers := map[string]string{ // register -> its index leading with the item
		TableGoodsMovements: "_accumrg1234_bydims1238_rtrn",
		TableSalesMovements: "_accumrg1260_bydims1268_rtrn",
	}
	report, reportAny := findQuery(t, qs, orOp, "report"), findQuery(t, qs, orOp, "report_any")
	t.Run("or_subquery_seq_scan", func(t *testing.T) {
		plan := explain(t, conn, "COSTS ON", report).Plan
		seq := map[string][]string{}
		seqScans(plan, seq)
		for reg, idx := range registers {
			var types, indexes []string
			scans(plan, reg, &types, &indexes)
			t.Logf("OR form: %s scanned by %v, filters %q", reg, types, seq[reg])
			if len(types) != 1 || len(seq[reg]) != 1 {
				t.Errorf("OR form: %s scanned by %v, want one (Parallel) Seq Scan", reg, types)
			}
			for _, f := range seq[reg] {
				if !strings.Contains(f, "hashed SubPlan") {
					t.Errorf("OR form: %s filter %q, want the OR evaluated by hashed SubPlans", reg, f)
				}
			}
			if slices.Contains(indexes, idx) {
				t.Errorf("OR form uses %s; stock PostgreSQL should not", idx)
			}
		}
	})
	t.Run("any_array_uses_index", func(t *testing.T) {
		plan := explain(t, conn, "COSTS ON", reportAny).Plan
		seq := map[string][]string{}
		seqScans(plan, seq)
		if len(seq) != 0 {
			t.Errorf("= ANY form reads %v sequentially; want every relation read by an index", seq)
		}
		for reg, idx := range registers {
			var types, indexes []string
			scans(plan, reg, &types, &indexes)
			t.Logf("= ANY form: %s scanned by %v, indexes %v", reg, types, indexes)
			if !slices.Contains(indexes, idx) {
				t.Errorf("= ANY form: %s scanned by %v with indexes %v, want a scan through %s", reg, types, indexes, idx)
			}
		}
	})
	// The rule's output is report_any's plan: its arms are report_any's
	// "= ANY (ARRAY(...))" with the arm as written kept in a CASE WHEN
	// false branch, which the planner removes.
	t.Run("any_array_is_the_rule_output", func(t *testing.T) {
		res, err := rewrite.Rewrite(ctx, report.SQL, rewrite.Options{Catalog: rewrite.NewPGCatalog(conn)})
		if err != nil {
			t.Fatal(err)
		}
		if len(res.Fired) != 6 {
			t.Errorf("rewrite of the report: %d firings (want 6: three arms in each register), vetoes %v\n%s", len(res.Fired), res.Vetoes, res.SQL)
		}
		ruled := report
		ruled.SQL = res.SQL
		got, want := explain(t, conn, "COSTS ON", ruled).Plan, explain(t, conn, "COSTS ON", reportAny).Plan
		for reg := range registers {
			var gt, gi, wt, wi []string
			scans(got, reg, &gt, &gi)
			scans(want, reg, &wt, &wi)
			if !slices.Equal(gt, wt) || !slices.Equal(gi, wi) {
				t.Errorf("%s: the rule's output scans it by %v with %v, report_any by %v with %v", reg, gt, gi, wt, wi)
			}
		}
	})
	t.Run("same_result", func(t *testing.T) {
		// The parameters of several executions (other VUs, other items).
		for id := 5; id < 10; id++ {
			qs := qs
			if id > 5 {
				if qs, err = w.ExplainableQueries(ctx, conn, opsVU(id, "planner")); err != nil {
					t.Fatal(err)
				}
			}
			report, reportAny := findQuery(t, qs, orOp, "report"), findQuery(t, qs, orOp, "report_any")
			direct, rewritten := queryRows(t, conn, report), queryRows(t, conn, reportAny)
			t.Logf("VU %d: report of %q: %d rows", id, report.Args[1], len(direct))
			if len(direct) == 0 {
				t.Errorf("VU %d: report: no rows; the item itself always matches the filter", id)
			}
			if !slices.Equal(direct, rewritten) {
				t.Errorf("VU %d: report and report_any differ:\n%v\n%v", id, direct, rewritten)
			}
		}
	})
	t.Run("form_planning_exceeds_execution", func(t *testing.T) {
		for _, name := range []string{"header", "lines"} {
			q := findQuery(t, qs, "document_form", name)
			explain(t, conn, "ANALYZE, SUMMARY", q) // warm the session's catalog caches
			// Medians of several runs: the comparison is of two timings of
			// one statement on one backend, not against a threshold.
			const runs = 7
			var plan, exec []float64
			for i := 0; i < runs; i++ {
				e := explain(t, conn, "ANALYZE, SUMMARY", q)
				plan = append(plan, e.PlanningTime)
				exec = append(exec, e.ExecutionTime)
			}
			slices.Sort(plan)
			slices.Sort(exec)
			t.Logf("form %s: median planning %.3f ms, execution %.3f ms", name, plan[runs/2], exec[runs/2])
			if name == "header" && plan[runs/2] <= exec[runs/2] {
				t.Errorf("form header: median planning time %.3f ms <= execution time %.3f ms; want planning above execution",
					plan[runs/2], exec[runs/2])
			}
		}
	})
}
