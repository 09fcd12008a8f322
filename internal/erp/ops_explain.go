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
// operation 7 (the item analysis report with OR over subqueries, and its
// = ANY (ARRAY(subquery)) rewrite) and key operation 2 (the sales invoice
// form's header and lines) with the parameters one execution would use.
// vu logs in on its first use as in Execute; nothing is left on conn.
func (w *Workload) ExplainableQueries(ctx context.Context, conn *pgx.Conn, vu *workload.VU) ([]ExplainQuery, error) {
	if w.err != nil {
		return nil, w.err
	}
	s, err := w.session(ctx, conn, vu)
	if err != nil {
		return nil, err
	}
	q := s.snap.q
	orArgs := orReportArgs(vu.Rand, s).args()
	ref, err := w.pickDocument(ctx, conn, vu.Rand, s, salesInvoice)
	if err != nil {
		return nil, fmt.Errorf("erp explain: %w", err)
	}
	ops := w.Operations()
	return []ExplainQuery{
		{Op: ops[OpORSubqueryReport].Name, Name: "report", SQL: q.or.Report, Args: orArgs},
		{Op: ops[OpORSubqueryReport].Name, Name: "report_any", SQL: q.or.ReportAny, Args: orArgs},
		{Op: ops[OpDocumentForm].Name, Name: "header", SQL: q.form.HeaderSalesInvoice, Args: []any{ref}},
		{Op: ops[OpDocumentForm].Name, Name: "lines", SQL: q.form.LinesSalesInvoice, Args: []any{ref}},
	}, nil
}
