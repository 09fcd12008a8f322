package erp

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/erplab/erplab/internal/workload"
)

// ExplainQuery is one statement of a key operation with the parameters of
// one execution, for EXPLAIN: run "EXPLAIN (...) " + SQL with Args on the
// connection given to ExplainableQueries, sending Args the way Execute does
// (pgx.QueryExecModeExec; timestamps are pgtype.Timestamp).
type ExplainQuery struct {
	// Op is the key operation's name, e.g. "or_subquery_report".
	Op string
	// Name says which statement: "report", "report_any" (the = ANY
	// rewrite of the same report, not run by the workload), "header",
	// "lines".
	Name string
	SQL  string
	Args []any
}

// ExplainableQueries returns, for virtual user vu, the statements of key
// operation 7 (the OR-subquery report, and its = ANY (ARRAY(subquery))
// rewrite) and key operation 2 (the sales invoice form's header and lines)
// with the parameters one execution would use. Operation 7 reads a
// temporary table: it is created and filled on conn now (1C style), so the
// statements must be explained on conn, and cleanup (which drops it) called
// afterwards. vu logs in on its first use as in Execute.
func (w *Workload) ExplainableQueries(ctx context.Context, conn *pgx.Conn, vu *workload.VU) (qs []ExplainQuery, cleanup func(context.Context) error, err error) {
	if w.err != nil {
		return nil, nil, w.err
	}
	s, err := w.session(ctx, conn, vu)
	if err != nil {
		return nil, nil, err
	}
	q := s.snap.q
	tt := &tempTables{w: w, conn: conn, q: &q.temp} // 1C style whatever the options
	cleanup = func(ctx context.Context) error { return tt.releaseAll(ctx) }
	name, err := w.fillCustomers(ctx, conn, tt, s)
	if err != nil {
		_ = cleanup(ctx) // report the fill error
		return nil, nil, fmt.Errorf("erp explain: %w", err)
	}
	cp, from, to := orReportArgs(vu.Rand, s)
	orArgs := []any{cp, ts(from), ts(to)}
	ref, err := w.pickDocument(ctx, conn, vu.Rand, s, salesInvoice)
	if err != nil {
		_ = cleanup(ctx)
		return nil, nil, fmt.Errorf("erp explain: %w", err)
	}
	ops := w.Operations()
	qs = []ExplainQuery{
		{Op: ops[OpORSubqueryReport].Name, Name: "report", SQL: withTemp(q.or.Report, name, ""), Args: orArgs},
		{Op: ops[OpORSubqueryReport].Name, Name: "report_any", SQL: withTemp(q.or.ReportAny, name, ""), Args: orArgs},
		{Op: ops[OpDocumentForm].Name, Name: "header", SQL: q.form.HeaderSalesInvoice, Args: []any{ref}},
		{Op: ops[OpDocumentForm].Name, Name: "lines", SQL: q.form.LinesSalesInvoice, Args: []any{ref}},
	}
	return qs, cleanup, nil
}
