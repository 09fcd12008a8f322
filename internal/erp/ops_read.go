package erp

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/erplab/erplab/internal/workload"
)

// docKind is a document type of the key operations: its table number and
// its statements.
type docKind struct {
	name  string
	num   int
	sales bool // posts sales movements too
	post  func(q *querySet) *postSQL
	// pickBefore, pickAfter, page, header and lines return the kind's
	// statements of documents.sql, document_list.sql, document_form.sql.
	pickBefore, pickAfter, page, header, lines func(q *querySet) string
}

var (
	salesInvoice = &docKind{
		name: "sales invoice", num: NumSalesInvoice, sales: true,
		post:       func(q *querySet) *postSQL { return &q.postSales },
		pickBefore: func(q *querySet) string { return q.documents.PickSalesInvoiceBefore },
		pickAfter:  func(q *querySet) string { return q.documents.PickSalesInvoiceAfter },
		page:       func(q *querySet) string { return q.list.PageSalesInvoices },
		header:     func(q *querySet) string { return q.form.HeaderSalesInvoice },
		lines:      func(q *querySet) string { return q.form.LinesSalesInvoice },
	}
	goodsReceipt = &docKind{
		name: "goods receipt", num: NumGoodsReceipt,
		post:       func(q *querySet) *postSQL { return &q.postReceipt },
		pickBefore: func(q *querySet) string { return q.documents.PickGoodsReceiptBefore },
		pickAfter:  func(q *querySet) string { return q.documents.PickGoodsReceiptAfter },
		page:       func(q *querySet) string { return q.list.PageGoodsReceipts },
		header:     func(q *querySet) string { return q.form.HeaderGoodsReceipt },
		lines:      func(q *querySet) string { return q.form.LinesGoodsReceipt },
	}
)

// rtref is the kind's 4-byte recorder type code.
func (k *docKind) rtref() []byte {
	b := RTRef(k.num)
	return b[:]
}

// kindFor is the document type a role's user works with in lists and
// forms: receipts for warehouse keepers and purchasing managers (mostly),
// sales invoices for the others.
func kindFor(vu *workload.VU) *docKind {
	switch vu.Role {
	case "warehouse_keeper", "purchasing_manager":
		if vu.Rand.IntN(5) > 0 {
			return goodsReceipt
		}
		return salesInvoice
	case "sales_manager", "accountant", "planner":
		return salesInvoice
	}
	if vu.Rand.IntN(3) == 0 {
		return goodsReceipt
	}
	return salesInvoice
}

// maxRef is the largest reference: a keyset start after every document.
var maxRef = bytes.Repeat([]byte{0xff}, 16)

// documentList runs key operation 1. The page starts at the newest
// document (half the time), continues after the previous page of the same
// kind (scrolling), or starts at a recent moment (jumping to a date); from
// overrides the choice (tests).
func (w *Workload) documentList(ctx context.Context, conn *pgx.Conn, vu *workload.VU, s *vuSession, from *listCursor) (res opResult, err error) {
	q := s.snap.q
	kind := kindFor(vu)
	at, after := HistoryEnd, maxRef
	switch {
	case from != nil:
		kind, at, after = from.kind, from.at, from.ref
	case s.cursor.ok && s.cursor.kind == kind && vu.Rand.IntN(10) < 3:
		at, after = s.cursor.at, s.cursor.ref
	case vu.Rand.IntN(10) < 5:
	default:
		at = recentMoment(vu.Rand, 60)
	}
	tt := w.tempTables(conn, &q.temp)
	defer func() {
		if rerr := tt.releaseAll(ctx); err == nil && rerr != nil {
			err = rerr
		}
	}()
	name, err := tt.get(ctx, shapeRLSValues)
	if err != nil {
		return res, err
	}
	if _, err := conn.Exec(ctx, withTemp(q.list.FillRLSValues, name, ""), execMode, s.user); err != nil {
		return res, fmt.Errorf("fill RLS values: %w", err)
	}
	if err := tt.analyze(ctx, name); err != nil {
		return res, fmt.Errorf("analyze RLS values: %w", err)
	}
	rows, err := conn.Query(ctx, withTemp(kind.page(q), name, ""), execMode, ts(at), after, w.opts.ListPageSize)
	if err != nil {
		return res, fmt.Errorf("page: %w", err)
	}
	var last listCursor
	for rows.Next() {
		var ref []byte
		var date time.Time
		var number, cp, wh, org *string
		var posted, marked bool
		var amount float64
		if err := rows.Scan(&ref, &date, &number, &posted, &marked, &amount, &cp, &wh, &org); err != nil {
			rows.Close()
			return res, fmt.Errorf("page: %w", err)
		}
		res.Rows++
		last = listCursor{ok: true, kind: kind, at: date, ref: ref}
	}
	if err := rows.Err(); err != nil {
		return res, fmt.Errorf("page: %w", err)
	}
	s.cursor = last // a short page ends the scrolling
	if res.Rows < w.opts.ListPageSize {
		s.cursor.ok = false
	}
	return res, nil
}

// pickDocument draws a document of kind in one of the user's warehouses,
// recent ones more likely (documents.sql).
func (w *Workload) pickDocument(ctx context.Context, conn *pgx.Conn, r *rand.Rand, s *vuSession, kind *docKind) ([]byte, error) {
	q := s.snap.q
	moment := recentMoment(r, recentMeanDays)
	wh := s.warehouse(r)
	for _, sql := range []string{kind.pickBefore(q), kind.pickAfter(q)} {
		var ref []byte
		err := conn.QueryRow(ctx, sql, execMode, ts(moment), wh).Scan(&ref)
		if err == nil {
			return ref, nil
		}
		if !errors.Is(err, pgx.ErrNoRows) {
			return nil, fmt.Errorf("pick a %s: %w", kind.name, err)
		}
	}
	return nil, fmt.Errorf("pick a %s: warehouse %x has none", kind.name, wh)
}

// documentForm runs key operation 2: the header query (20+ relations) and
// the lines query of a document.
func (w *Workload) documentForm(ctx context.Context, conn *pgx.Conn, vu *workload.VU, s *vuSession) (opResult, error) {
	kind := kindFor(vu)
	ref, err := w.pickDocument(ctx, conn, vu.Rand, s, kind)
	if err != nil {
		return opResult{}, err
	}
	return w.openForm(ctx, conn, s.snap.q, kind, ref)
}

func (w *Workload) openForm(ctx context.Context, conn *pgx.Conn, q *querySet, kind *docKind, ref []byte) (opResult, error) {
	var res opResult
	n, err := countRows(ctx, conn, kind.header(q), ref)
	if err != nil {
		return res, fmt.Errorf("header: %w", err)
	}
	res.Rows = n
	if res.Lines, err = countRows(ctx, conn, kind.lines(q), ref); err != nil {
		return res, fmt.Errorf("lines: %w", err)
	}
	return res, nil
}

// countRows runs a query and reads (and counts) every row, as a client
// that shows them does.
func countRows(ctx context.Context, conn *pgx.Conn, sql string, args ...any) (int, error) {
	rows, err := conn.Query(ctx, sql, append([]any{execMode}, args...)...)
	if err != nil {
		return 0, err
	}
	defer rows.Close()
	n := 0
	for rows.Next() {
		if _, err := rows.Values(); err != nil {
			return n, err
		}
		n++
	}
	return n, rows.Err()
}

// stockBalance runs key operation 5 for the user's warehouses: the current
// balance half the time, else the balance at a past moment read forward
// from the previous month's totals or backward from the month's own.
func (w *Workload) stockBalance(ctx context.Context, conn *pgx.Conn, vu *workload.VU, s *vuSession) (opResult, error) {
	q := s.snap.q
	pt := s.snap.priceTypes[PriceTypeWholesale]
	var (
		n   int
		err error
	)
	if vu.Rand.IntN(2) == 0 {
		n, err = countRows(ctx, conn, q.balance.Current, s.warehouses, ts(HistoryEnd), pt)
	} else {
		at := recentMoment(vu.Rand, 60)
		m := monthStart(at)
		if at.Day() <= 15 {
			n, err = countRows(ctx, conn, q.balance.Forward, s.warehouses, ts(at), pt, ts(at), ts(m), ts(m.AddDate(0, -1, 0)))
		} else {
			n, err = countRows(ctx, conn, q.balance.Backward, s.warehouses, ts(at), pt, ts(at), ts(m), ts(m.AddDate(0, 1, 0)))
		}
	}
	return opResult{Rows: n}, err
}

// salesTurnover runs key operation 6: N calendar months (1, 3, 6 or 12)
// ending at a recent moment, for one of the user's organizations.
func (w *Workload) salesTurnover(ctx context.Context, conn *pgx.Conn, vu *workload.VU, s *vuSession) (opResult, error) {
	months := []int{1, 3, 6, 12}[pickWeighted(vu.Rand, 3, 4, 2, 1)]
	end := recentMoment(vu.Rand, 15)
	tail := monthStart(end)
	from := tail.AddDate(0, -(months - 1), 0)
	if w.opts.TurnoverWholeHistory {
		end = HistoryEnd
		tail, from = monthStart(end), monthStart(HistoryStart)
	}
	n, err := countRows(ctx, conn, s.snap.q.turnover.Report, s.org(vu.Rand), ts(from), ts(tail), ts(end))
	return opResult{Rows: n}, err
}

// orReport holds the parameters of one execution of key operation 7: the
// item the report is about, seen through the report's filter.
type orReport struct {
	// group is the item's group (_parentidrref).
	group []byte
	// kind is a LIKE pattern matching the descriptions of the same kind
	// of item: the description's first word and " %" ("Drill %").
	kind string
	// product is a LIKE pattern matching the same product under any
	// brand: the description without its last word (the brand) and " %"
	// ("Drill steel 12x40 %").
	product string
	// series is a LIKE pattern matching the articles of the item's
	// product line: the article without its last three characters and
	// "%" ("BAL-363%" for BAL-363679); the article itself when it has
	// fewer than four characters (generated articles have ten).
	series string
	// from and to bound the report's period [from, to): 12 months ending
	// at the end of the history or up to two months before; the sales are
	// compared with [from - 1 year, from).
	from, to time.Time
}

// args returns the report statement's arguments $1..$7.
func (a orReport) args() []any {
	return []any{a.group, a.kind, a.product, ts(a.from), ts(a.to), ts(a.from.AddDate(-1, 0, 0)), a.series}
}

// orReportArgs draws the parameters of key operation 7: an item drawn
// uniformly from the catalog (an assortment review goes through every
// item, not only the best sellers) and 12 months ending at the end of the
// history or up to two months before.
func orReportArgs(r *rand.Rand, s *vuSession) orReport {
	k := r.IntN(len(s.snap.items))
	words := strings.Fields(s.snap.itemNames[k])
	a := orReport{group: s.snap.itemParent[k], kind: "%", product: "%"}
	if len(words) > 0 {
		a.kind = likePrefix(words[0]) + " %"
		a.product = likePrefix(strings.Join(words[:max(1, len(words)-1)], " ")) + " %"
	}
	a.series = likePrefix(s.snap.itemArticle[k])
	if art := []rune(s.snap.itemArticle[k]); len(art) > 3 {
		a.series = likePrefix(string(art[:len(art)-3])) + "%"
	}
	a.to = HistoryEnd.AddDate(0, -r.IntN(3), 0)
	a.from = a.to.AddDate(-1, 0, 0)
	return a
}

// likePrefix escapes the LIKE wildcards % and _ and the escape character
// backslash in s, so that s + "%" matches the strings starting with s
// (PostgreSQL docs, "Pattern Matching", LIKE).
func likePrefix(s string) string {
	return strings.NewReplacer(`\`, `\\`, `%`, `\%`, `_`, `\_`).Replace(s)
}

// orSubqueryReport runs key operation 7: the item analysis report, whose
// filter on the item's attributes reaches the registers as "item IN
// (subquery) OR item IN (subquery)" (queries/or_subquery_report.sql). One
// statement, no temporary table.
func (w *Workload) orSubqueryReport(ctx context.Context, conn *pgx.Conn, vu *workload.VU, s *vuSession) (opResult, error) {
	n, err := countRows(ctx, conn, s.snap.q.or.Report, orReportArgs(vu.Rand, s).args()...)
	if err != nil {
		return opResult{Rows: n}, fmt.Errorf("item analysis report: %w", err)
	}
	return opResult{Rows: n}, nil
}

// itemPicker runs key operation 8.
func (w *Workload) itemPicker(ctx context.Context, conn *pgx.Conn, vu *workload.VU, s *vuSession) (opResult, error) {
	pattern := s.snap.searchPattern(vu.Rand)
	pt := s.snap.priceTypes[PriceTypeWholesale]
	if vu.Rand.IntN(3) == 0 {
		pt = s.snap.priceTypes[PriceTypeRetail]
	}
	n, err := countRows(ctx, conn, s.snap.q.picker.Search, pattern, ts(HistoryEnd), pt, s.warehouse(vu.Rand))
	return opResult{Rows: n}, err
}

// stormRounds is the number of rounds of key operation 9.
const stormRounds = 4

// tempStorm runs key operation 9: stormRounds rounds, each taking two temp
// tables (selection, valuation), filling and analyzing them, reading the
// result and returning them (1C: DROP; lsFusion: TRUNCATE into the cache).
func (w *Workload) tempStorm(ctx context.Context, conn *pgx.Conn, vu *workload.VU, s *vuSession) (res opResult, err error) {
	q := s.snap.q
	tt := w.tempTables(conn, &q.temp)
	defer func() {
		if rerr := tt.releaseAll(ctx); err == nil && rerr != nil {
			err = rerr
		}
	}()
	pt := s.snap.priceTypes[PriceTypeWholesale]
	for round := 0; round < stormRounds; round++ {
		wh := s.warehouse(vu.Rand)
		group := s.snap.itemGroups[vu.Rand.IntN(len(s.snap.itemGroups))]
		sel, err := tt.get(ctx, shapeGoods)
		if err != nil {
			return res, err
		}
		if _, err := conn.Exec(ctx, withTemp(q.storm.FillSelection, sel, ""), execMode, wh, group); err != nil {
			return res, fmt.Errorf("fill selection: %w", err)
		}
		if err := tt.analyze(ctx, sel); err != nil {
			return res, fmt.Errorf("analyze selection: %w", err)
		}
		val, err := tt.get(ctx, shapeGoods)
		if err != nil {
			return res, err
		}
		if _, err := conn.Exec(ctx, withTemp(q.storm.FillValuation, sel, val), execMode, ts(HistoryEnd), pt); err != nil {
			return res, fmt.Errorf("fill valuation: %w", err)
		}
		if err := tt.analyze(ctx, val); err != nil {
			return res, fmt.Errorf("analyze valuation: %w", err)
		}
		var n, groups int64
		var sum float64
		if err := conn.QueryRow(ctx, withTemp(q.storm.Read, sel, val), execMode).Scan(&n, &sum, &groups); err != nil {
			return res, fmt.Errorf("read: %w", err)
		}
		res.Rows += int(n)
		res.Docs++ // rounds done
		if err := tt.releaseAll(ctx); err != nil {
			return res, err
		}
	}
	return res, nil
}
