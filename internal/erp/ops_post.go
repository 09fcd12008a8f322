package erp

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/erplab/erplab/internal/workload"
)

// steps runs the statements of one transaction in order, keeping the first
// error (wrapped with the step's name) and skipping the rest after it, so a
// posting reads as the list of its statements.
type steps struct {
	ctx context.Context
	tx  pgx.Tx
	err error
}

func (s *steps) exec(step, sql string, args ...any) { s.count(step, sql, args...) }

// count is exec returning the number of rows the statement affected.
func (s *steps) count(step, sql string, args ...any) int {
	if s.err != nil {
		return 0
	}
	tag, err := s.tx.Exec(s.ctx, sql, append([]any{execMode}, args...)...)
	if err != nil {
		s.err = fmt.Errorf("%s: %w", step, err)
		return 0
	}
	return int(tag.RowsAffected())
}

// countTrue runs a statement returning one boolean per row and counts the
// true ones.
func (s *steps) countTrue(step, sql string, args ...any) int {
	if s.err != nil {
		return 0
	}
	rows, err := s.tx.Query(s.ctx, sql, append([]any{execMode}, args...)...)
	if err != nil {
		s.err = fmt.Errorf("%s: %w", step, err)
		return 0
	}
	n := 0
	for rows.Next() {
		var b bool
		if err := rows.Scan(&b); err != nil {
			rows.Close()
			s.err = fmt.Errorf("%s: %w", step, err)
			return n
		}
		if b {
			n++
		}
	}
	if err := rows.Err(); err != nil {
		s.err = fmt.Errorf("%s: %w", step, err)
	}
	return n
}

// drain runs a query and reads its rows (SELECT ... FOR UPDATE).
func (s *steps) drain(step, sql string, args ...any) int {
	if s.err != nil {
		return 0
	}
	rows, err := s.tx.Query(s.ctx, sql, append([]any{execMode}, args...)...)
	if err != nil {
		s.err = fmt.Errorf("%s: %w", step, err)
		return 0
	}
	n := 0
	for rows.Next() {
		n++
	}
	if err := rows.Err(); err != nil {
		s.err = fmt.Errorf("%s: %w", step, err)
	}
	return n
}

// inTx runs fn in a transaction on conn, committing when fn returns nil and
// rolling back otherwise; the rollback runs even when ctx is done, so conn
// is left outside a transaction whenever the server is reachable.
func inTx(ctx context.Context, conn *pgx.Conn, fn func(tx pgx.Tx) error) error {
	tx, err := conn.Begin(ctx)
	if err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	if err := fn(tx); err != nil {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		_ = tx.Rollback(rctx) // the error that matters is fn's
		return err
	}
	if err := tx.Commit(ctx); err != nil {
		return fmt.Errorf("commit: %w", err)
	}
	return nil
}

// docLines are a document's tabular part as the application holds it:
// quantities in thousandths, prices in cents.
type docLines struct {
	keyfield, item, unit, vat [][]byte
	lineno                    []int32
	qtyMilli, priceCents      []int64
}

// postRandom runs key operations 3 and 4: the user opens a recent document
// of their warehouse, edits some quantities and posts it.
func (w *Workload) postRandom(ctx context.Context, conn *pgx.Conn, vu *workload.VU, s *vuSession, kind *docKind) (opResult, error) {
	ref, err := w.pickDocument(ctx, conn, vu.Rand, s, kind)
	if err != nil {
		return opResult{}, err
	}
	return w.post(ctx, conn, s.snap, kind, ref, vu.Rand)
}

// post posts document ref of kind in one transaction (post_*.sql,
// register_goods.sql, register_sales.sql). With edit non-nil about a third
// of the lines get one unit more or less (never below one unit), as a user
// edits a document before posting; with nil the lines are written back
// unchanged (re-posting). A posting that would leave a current balance
// below zero is rolled back and reported as Refused, not as an error.
func (w *Workload) post(ctx context.Context, conn *pgx.Conn, snap *snapshot, kind *docKind, ref []byte, edit *rand.Rand) (opResult, error) {
	q := snap.q
	p := kind.post(q)
	g, sr := &q.goodsReg, &q.salesReg
	rt := kind.rtref()
	res := opResult{Docs: 1}
	err := inTx(ctx, conn, func(tx pgx.Tx) error {
		var (
			date        time.Time
			org, cp, wh []byte
			lines       docLines
		)
		// 1. The header row first: postings of one document queue here.
		if err := tx.QueryRow(ctx, p.LockDocument, execMode, ref).Scan(&date, &org, &cp, &wh); err != nil {
			return fmt.Errorf("lock document: %w", err)
		}
		// 2. Rewrite the lines.
		rows, err := tx.Query(ctx, p.ReadLines, execMode, ref)
		if err != nil {
			return fmt.Errorf("read lines: %w", err)
		}
		for rows.Next() {
			var kf, item, unit, vat []byte
			var ln int32
			var qty, price int64
			if err := rows.Scan(&kf, &ln, &item, &unit, &qty, &price, &vat); err != nil {
				rows.Close()
				return fmt.Errorf("read lines: %w", err)
			}
			if edit != nil && edit.IntN(3) == 0 {
				if d := int64(1000 - 2000*edit.IntN(2)); qty+d >= 1000 {
					qty += d
				}
			}
			lines.keyfield = append(lines.keyfield, kf)
			lines.lineno = append(lines.lineno, ln)
			lines.item = append(lines.item, item)
			lines.unit = append(lines.unit, unit)
			lines.qtyMilli = append(lines.qtyMilli, qty)
			lines.priceCents = append(lines.priceCents, price)
			lines.vat = append(lines.vat, vat)
		}
		if err := rows.Err(); err != nil {
			return fmt.Errorf("read lines: %w", err)
		}
		res.Rows = len(lines.lineno)
		month := monthStart(date)
		st := &steps{ctx: ctx, tx: tx}
		st.exec("delete lines", p.DeleteLines, ref)
		st.exec("insert lines", p.InsertLines, ref, lines.keyfield, lines.lineno, lines.item, lines.unit,
			lines.qtyMilli, lines.priceCents, lines.vat)
		st.exec("write header", p.WriteHeader, ref)
		// 3. Temp tables: the new record sets and the totals changes.
		st.exec("create goods movements", g.CreateMovements)
		st.exec("index goods movements", g.IndexMovements)
		st.exec("fill goods movements", p.FillGoodsMovements, ref, wh)
		st.exec("analyze goods movements", g.AnalyzeMovements)
		st.exec("create goods changes", g.CreateChanges)
		st.exec("index goods changes", g.IndexChanges)
		st.exec("fill goods changes", g.FillChanges, rt, ref, ts(month), ts(snap.lastMonth))
		st.exec("analyze goods changes", g.AnalyzeChanges)
		if kind.sales {
			st.exec("create sales movements", sr.CreateMovements)
			st.exec("index sales movements", sr.IndexMovements)
			st.exec("fill sales movements", p.FillSalesMovements, ref, org, cp)
			st.exec("analyze sales movements", sr.AnalyzeMovements)
			st.exec("create sales changes", sr.CreateChanges)
			st.exec("index sales changes", sr.IndexChanges)
			st.exec("fill sales changes", sr.FillChanges, rt, ref, ts(month))
			st.exec("analyze sales changes", sr.AnalyzeChanges)
		}
		// 4. Lock the totals rows: balance totals, then turnover totals,
		// each in key order.
		st.exec("ensure balance totals", g.EnsureTotals)
		st.drain("lock balance totals", g.LockTotals)
		if kind.sales {
			st.exec("ensure turnover totals", sr.EnsureTotals)
			st.drain("lock turnover totals", sr.LockTotals)
		}
		// 5. Replace the recorder's movements; 6. update the totals.
		st.exec("delete goods movements", g.DeleteMovements, rt, ref)
		st.exec("insert goods movements", g.InsertMovements, rt, ref, ts(date))
		if kind.sales {
			st.exec("delete sales movements", sr.DeleteMovements, rt, ref)
			st.exec("insert sales movements", sr.InsertMovements, rt, ref, ts(date))
		}
		st.exec("update balance totals", g.UpdateTotals)
		if kind.sales {
			st.exec("update turnover totals", sr.UpdateTotals)
		}
		if st.err != nil {
			return st.err
		}
		// 7. Negative stock: refuse (roll back) like the platform does.
		var negative int64
		if err := tx.QueryRow(ctx, g.NegativeBalances, execMode).Scan(&negative); err != nil {
			return fmt.Errorf("check negative stock: %w", err)
		}
		if negative > 0 {
			return errRefused
		}
		// 8. Drop the temp tables.
		st.exec("drop goods temp tables", g.DropTempTables)
		if kind.sales {
			st.exec("drop sales temp tables", sr.DropTempTables)
		}
		return st.err
	})
	if errors.Is(err, errRefused) {
		res.Refused = true
		return res, nil
	}
	if err != nil {
		return res, fmt.Errorf("%s %x: %w", kind.name, ref, err)
	}
	return res, nil
}

// repostDay runs key operation 10: the last day at or before a recent
// moment that has posted documents, each document re-posted unchanged in
// its own transaction, in time order.
func (w *Workload) repostDay(ctx context.Context, conn *pgx.Conn, vu *workload.VU, s *vuSession) (opResult, error) {
	q := s.snap.q
	var day pgtype.Timestamp
	for _, at := range []time.Time{recentMoment(vu.Rand, 30), HistoryEnd} {
		if err := conn.QueryRow(ctx, q.repost.LastDay, execMode, ts(at)).Scan(&day); err != nil {
			return opResult{}, fmt.Errorf("find a day: %w", err)
		}
		if day.Valid {
			break
		}
	}
	if !day.Valid {
		return opResult{}, fmt.Errorf("find a day: no posted documents")
	}
	return w.repost(ctx, conn, s.snap, day.Time)
}

// repost re-posts every posted document of day.
func (w *Workload) repost(ctx context.Context, conn *pgx.Conn, snap *snapshot, day time.Time) (opResult, error) {
	type doc struct {
		kind int
		ref  []byte
	}
	rows, err := conn.Query(ctx, snap.q.repost.Documents, execMode, ts(day), ts(day.AddDate(0, 0, 1)))
	if err != nil {
		return opResult{}, fmt.Errorf("list documents: %w", err)
	}
	docs, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (doc, error) {
		var d doc
		var at time.Time
		return d, r.Scan(&d.kind, &d.ref, &at)
	})
	if err != nil {
		return opResult{}, fmt.Errorf("list documents: %w", err)
	}
	var res opResult
	for _, d := range docs {
		kind := salesInvoice
		if d.kind == NumGoodsReceipt {
			kind = goodsReceipt
		}
		r, err := w.post(ctx, conn, snap, kind, d.ref, nil)
		if err != nil {
			return res, err
		}
		res.Docs++
		res.Rows += r.Rows
		res.Refused = res.Refused || r.Refused
	}
	return res, nil
}

// recomputeMonth runs key operation 11 for a month drawn with a recency
// skew (recompute_month.sql).
func (w *Workload) recomputeMonth(ctx context.Context, conn *pgx.Conn, vu *workload.VU, s *vuSession) (opResult, error) {
	m := monthStart(recentMoment(vu.Rand, 60))
	if m.After(s.snap.lastMonth) {
		m = s.snap.lastMonth
	}
	return w.recompute(ctx, conn, s.snap, m)
}

// recompute recomputes the balance totals at the end of month m and the
// turnover totals of m in one transaction. Rows is the number of fresh
// (balance + turnover) values, Docs the number of totals rows whose value
// changed (non-zero rows deleted plus rows inserted; zero rows removed do
// not count).
func (w *Workload) recompute(ctx context.Context, conn *pgx.Conn, snap *snapshot, m time.Time) (opResult, error) {
	q := &snap.q.recompute
	next := m.AddDate(0, 1, 0)
	var res opResult
	err := inTx(ctx, conn, func(tx pgx.Tx) error {
		st := &steps{ctx: ctx, tx: tx}
		st.exec("lock totals", q.LockTotals)
		st.exec("create fresh balance", q.CreateFreshBalance)
		res.Rows += st.count("fill fresh balance", q.FillFreshBalance, ts(next))
		st.exec("index fresh balance", q.IndexFreshBalance)
		st.exec("analyze fresh balance", q.AnalyzeFreshBalance)
		res.Docs += st.countTrue("delete stale balance", q.DeleteStaleBalance, ts(m))
		res.Docs += st.count("insert missing balance", q.InsertMissingBalance, ts(m))
		st.exec("create fresh turnover", q.CreateFreshTurnover)
		res.Rows += st.count("fill fresh turnover", q.FillFreshTurnover, ts(m), ts(next))
		st.exec("index fresh turnover", q.IndexFreshTurnover)
		st.exec("analyze fresh turnover", q.AnalyzeFreshTurnover)
		res.Docs += st.countTrue("delete stale turnover", q.DeleteStaleTurnover, ts(m))
		res.Docs += st.count("insert missing turnover", q.InsertMissingTurnover, ts(m))
		st.exec("drop temp tables", q.DropTempTables)
		return st.err
	})
	if err != nil {
		return res, fmt.Errorf("month %s: %w", m.Format("2006-01"), err)
	}
	return res, nil
}
