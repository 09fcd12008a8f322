package erp

import (
	"context"
	"encoding/json"
	"slices"
	"testing"

	"github.com/jackc/pgx/v5"
)

// explainScale is the data scale of the EXPLAIN tests: large enough that
// an index scan of a few customers' sales beats a sequential scan of the
// sales register for the planner (at 0.01 the register has 30 pages).
const explainScale = 0.1

// planNode is the part of an EXPLAIN (FORMAT JSON) plan node the tests read
// (PostgreSQL docs, "EXPLAIN"; the key names are ExplainPropertyText
// labels of src/backend/commands/explain.c).
type planNode struct {
	NodeType     string     `json:"Node Type"`
	RelationName string     `json:"Relation Name"`
	IndexName    string     `json:"Index Name"`
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
// to reproduce on stock PostgreSQL: the OR-subquery report (operation 7)
// scans the sales register sequentially although an index leads with the
// filtered column, while its = ANY (ARRAY(subquery)) rewrite uses that
// index; and the document form (operation 2) takes longer to plan than to
// execute.
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
	qs, cleanup, err := w.ExplainableQueries(ctx, conn, opsVU(5, "accountant"))
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := cleanup(ctx); err != nil {
			t.Error(err)
		}
	}()

	const orOp, register, customerIndex = "or_subquery_report", TableSalesMovements, "_accumrg1260_bydims1269_rtrn"
	t.Run("or_subquery_seq_scan", func(t *testing.T) {
		var types, indexes []string
		scans(explain(t, conn, "COSTS ON", findQuery(t, qs, orOp, "report")).Plan, register, &types, &indexes)
		t.Logf("OR form: %s scanned by %v, indexes %v", register, types, indexes)
		if !slices.Equal(types, []string{"Seq Scan"}) {
			t.Errorf("OR form: %s scanned by %v, want one Seq Scan", register, types)
		}
		if slices.Contains(indexes, customerIndex) {
			t.Errorf("OR form uses %s; stock PostgreSQL should not", customerIndex)
		}
	})
	t.Run("any_array_uses_index", func(t *testing.T) {
		var types, indexes []string
		scans(explain(t, conn, "COSTS ON", findQuery(t, qs, orOp, "report_any")).Plan, register, &types, &indexes)
		t.Logf("= ANY form: %s scanned by %v, indexes %v", register, types, indexes)
		if slices.Contains(types, "Seq Scan") || !slices.Contains(indexes, customerIndex) {
			t.Errorf("= ANY form: %s scanned by %v with indexes %v, want a scan through %s", register, types, indexes, customerIndex)
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
