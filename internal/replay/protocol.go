package replay

import (
	"bytes"
	"context"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/erplab/erplab/internal/capture"
	"github.com/erplab/erplab/internal/engine"
)

// outcome is what the server answered a replayed statement: its command
// tag, the rows it returned or affected (summed over the commands of a
// simple Query), its SQLSTATE ("" for success, engine's client-side codes
// for an error the server did not send).
type outcome struct {
	tag      string
	rows     int64
	sqlState string
}

// statement sends one statement with the captured protocol, waits for its
// answer and records it. The gates learn that it was sent as soon as its
// messages are written, and that its transaction ended when it answers.
// A lost connection ends the session (errSession).
func (ru *runner) statement(ctx context.Context, st *step) error {
	ru.next++
	ru.dur.Store(st.ev.Duration)
	ru.seq.Store(ru.next)
	sent := func() {
		if ru.g != nil {
			ru.g.markSent(st.order)
		}
	}
	if st.group >= 0 {
		ru.r.ops.Begin(ru.conn.PID(), st.group)
	}
	begin := time.Now()
	out, err := ru.send(ctx, st, sent)
	end := time.Now()
	ru.r.ops.End(ru.conn.PID())
	ru.seq.Store(0)
	if ru.g != nil {
		ru.g.markEnded(st.ends)
	}
	if ru.bypass && txEnded(&st.ev) {
		ru.bypass = false // released until its transaction ended: it has
	}
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		out.sqlState = engine.SQLState(err)
	}
	ru.r.observe(ru.copy, st, ru.name, begin, end, out)
	if ru.conn.IsClosed() {
		return errSession{"connection lost"}
	}
	return nil
}

// send runs st on the session's connection; sent is called once its
// messages are written.
func (ru *runner) send(ctx context.Context, st *step, sent func()) (outcome, error) {
	c, e := ru.conn, &st.ev
	switch e.Kind {
	case capture.KindQuery:
		mrr := c.Exec(ctx, st.sql)
		sent()
		return readAll(mrr)
	case capture.KindPrepare:
		sent()
		if st.merged {
			return outcome{}, nil // sent with the Execute that follows
		}
		_, err := c.Prepare(ctx, e.Name, st.sql, ru.r.paramOIDs(e.ParamOIDs, e.TypeNames))
		return outcome{}, err
	case capture.KindExecute:
		return ru.execute(ctx, st, sent)
	default: // capture.KindCopy
		sent()
		tag, err := c.CopyFrom(ctx, bytes.NewReader(e.Data), st.sql)
		return outcome{tag: tag.String(), rows: tag.RowsAffected()}, err
	}
}

// execute sends an Execute (with its Parse when unnamed, as libpq's
// PQexecParams does) in a pipeline of its own, so that sent is called
// once its messages are written: pgconn's ExecParams and ExecPrepared
// return at the statement's first answer, after any lock wait, and the
// gates would hold every later statement behind that wait.
func (ru *runner) execute(ctx context.Context, st *step, sent func()) (outcome, error) {
	e := &st.ev
	p := ru.conn.StartPipeline(ctx)
	if st.unnamed {
		p.SendQueryParams(st.sql, e.Values, ru.r.paramOIDs(st.oids, st.types), e.Formats, e.ResultFormats)
	} else {
		p.SendQueryPrepared(e.Name, e.Values, e.Formats, e.ResultFormats)
	}
	if err := p.Sync(); err != nil {
		return outcome{}, err // the connection is closed
	}
	sent()
	var out outcome
	res, err := p.GetResults()
	if rr, ok := res.(*pgconn.ResultReader); ok && err == nil {
		var tag pgconn.CommandTag
		tag, err = rr.Close()
		out = outcome{tag: tag.String(), rows: tag.RowsAffected()}
	}
	if cerr := p.Close(); err == nil {
		err = cerr
	}
	return out, err
}

// readAll reads every result of a simple Query without keeping rows: the
// last command tag, the rows summed, the first error.
func readAll(mrr *pgconn.MultiResultReader) (outcome, error) {
	var out outcome
	for mrr.NextResult() {
		tag, err := mrr.ResultReader().Close()
		if err != nil {
			break // Close of the MultiResultReader returns it
		}
		out.tag = tag.String()
		out.rows += tag.RowsAffected()
	}
	return out, mrr.Close()
}

// txEnded reports whether the session is out of a transaction after e:
// its status is idle, or unknown after a statement (a Parse says
// nothing).
func txEnded(e *capture.Event) bool {
	return e.TxAfter == "I" || e.TxAfter == "" && e.Kind != capture.KindPrepare
}
