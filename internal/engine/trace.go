package engine

import (
	"context"

	"github.com/jackc/pgx/v5"

	"github.com/erplab/erplab/internal/opmap"
)

// traceKey is the context key of a virtual user's *vuTrace.
type traceKey struct{}

// vuTrace is what the query tracer needs of one virtual user: where its
// texts are counted and the key operation it runs now (opmap.Idle
// between operations). Written and read on the user's goroutine only
// (pgx calls tracers on the caller's).
type vuTrace struct {
	rec *opmap.Recorder
	op  int
}

// traceContext returns ctx carrying a new vuTrace for one virtual user,
// counting into the run's Config.Ops texts; ctx itself without Ops.
func (e *run) traceContext(ctx context.Context) context.Context {
	rec := e.cfg.Ops.Texts().Recorder()
	if rec == nil {
		return ctx
	}
	return context.WithValue(ctx, traceKey{}, &vuTrace{rec: rec, op: opmap.Idle})
}

// traceOf is the vuTrace ctx carries, nil when none.
func traceOf(ctx context.Context) *vuTrace {
	vt, _ := ctx.Value(traceKey{}).(*vuTrace)
	return vt
}

// Tracer is a pgx tracer (pgx.QueryTracer, pgx.BatchTracer) for the
// connections the engine hands to a workload: each statement text sent
// while a key operation runs, through the context the engine gave the
// workload's Execute (or one derived from it), is counted for that
// operation in the run's Config.Ops texts (opmap.Texts), by which the
// samplers attribute pg_stat_statements rows to operations exactly.
// Outside a run's operations it does nothing. Set it as
// pgx.ConnConfig.Tracer of the run's pool.
type Tracer struct{}

var (
	_ pgx.QueryTracer = Tracer{}
	_ pgx.BatchTracer = Tracer{}
)

func note(ctx context.Context, sql string) {
	if vt := traceOf(ctx); vt != nil {
		vt.rec.Add(vt.op, sql)
	}
}

// TraceQueryStart counts data.SQL for the running operation.
func (Tracer) TraceQueryStart(ctx context.Context, _ *pgx.Conn, data pgx.TraceQueryStartData) context.Context {
	note(ctx, data.SQL)
	return ctx
}

// TraceQueryEnd does nothing.
func (Tracer) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

// TraceBatchStart does nothing (the batch's queries are counted one by
// one).
func (Tracer) TraceBatchStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceBatchStartData) context.Context {
	return ctx
}

// TraceBatchQuery counts data.SQL for the running operation.
func (Tracer) TraceBatchQuery(ctx context.Context, _ *pgx.Conn, data pgx.TraceBatchQueryData) {
	note(ctx, data.SQL)
}

// TraceBatchEnd does nothing.
func (Tracer) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData) {}
