package erp

import (
	"context"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"sync/atomic"
	"time"
)

// A warehouse stream generates, in time order, everything one warehouse
// produces: goods receipts and sales invoices with their lines, the goods
// register's movements and monthly balance totals, the sales register's
// movements, and the RLS object -> access key rows of its documents. All
// goods movements of a (warehouse, item) pair come from one stream, so the
// stream can keep stock and guarantee it never goes negative: a sales line
// takes at most the stock on hand, and stock falling under a reorder point
// queues a replenishment that the next receipt of that warehouse brings.
// The stream's randomness is PCG(seed, "warehouse", w).

// line is one document line in the making.
type line struct {
	item   int
	qty    int64 // thousandths of a unit
	price  int64 // cents
	amount int64 // cents, VAT included
	vat    int64 // cents
}

type whStream struct {
	p   *plan
	w   int
	e   *emitter
	rng *rand.Rand

	org, dept       int
	whRef, orgRef   Ref
	deptRef, keyRef Ref
	currency        Ref
	usersHere       []int

	stock    []int64 // thousandths per item
	queued   []bool
	queue    []int32 // FIFO of items to replenish
	queueDay []int32 // day each queued item was queued
	qhead    int
	today    int
	stocked  []bool  // item ever had stock here
	touched  []int32 // items ever stocked, for totals
	dd       func(item int) float64

	salesSeq, recvSeq  int // document ids within the warehouse
	yearSales, yearRcv int // number sequences within the year
	year               int
	lastReceipt        Ref
	haveReceipt        bool

	lines  []line
	counts []int
	times  []int32
	numBuf []byte
	docs   *atomic.Int64
}

// itemDemand is item popularity: prob[i] is the probability that a sales
// line asks for item index i (its Zipf rank's probability). Read-only,
// shared by the warehouse streams.
type itemDemand struct{ prob []float64 }

func (p *plan) itemDemand() itemDemand {
	prob := make([]float64, p.items)
	for r := 0; r < p.items; r++ {
		prob[p.itemPerm.of(r)] = p.itemZipf.prob(r)
	}
	return itemDemand{prob: prob}
}

// meanQty is the mean quantity (units) of a sales line.
const meanQty = 2.2

// genWarehouse runs the stream of warehouse w (see the comment at the top
// of this file), counting sales invoices in docs.
func (p *plan) genWarehouse(ctx context.Context, w int, demand itemDemand, e *emitter, docs *atomic.Int64) error {
	s := &whStream{
		p: p, w: w, e: e, rng: streamRand(p.seed, "warehouse", uint64(w)),
		org: p.warehouseOrg(w), dept: p.warehouseDept(w),
		stock: make([]int64, p.items), queued: make([]bool, p.items), stocked: make([]bool, p.items),
		docs: docs, year: -1,
	}
	s.whRef, s.orgRef, s.deptRef = p.warehouseRef(w), p.orgRef(s.org), p.deptRef(s.dept)
	s.keyRef, s.currency = p.accessKeyRef(w), p.currencyRef(0)
	for u := w; u < p.users; u += p.warehouses {
		s.usersHere = append(s.usersHere, u)
	}
	if len(s.usersHere) == 0 {
		s.usersHere = append(s.usersHere, w%p.users)
	}
	// Expected sales lines per day in this warehouse, times units per line.
	perDay := float64(p.salesPerWarehouse[w]) * meanLines / float64(p.days) * meanQty
	s.dd = func(item int) float64 { return perDay * demand.prob[item] }

	if err := s.opening(); err != nil {
		return err
	}
	for d := 0; d < p.days; d++ {
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := s.day(d); err != nil {
			return err
		}
		if d+1 == p.days || p.monthOfDay[d+1] != p.monthOfDay[d] {
			if err := s.totals(p.monthStartMicros[p.monthOfDay[d]]); err != nil {
				return err
			}
		}
	}
	if err := s.totals(CurrentPeriod.UnixMicro()); err != nil {
		return err
	}
	return e.flush()
}

// orderQty is the replenishment quantity (thousandths) of item.
func (s *whStream) orderQty(item int) int64 {
	u := math.Round(s.dd(item) * coverDays)
	if u < 5 {
		u = 5
	}
	if u > 50 {
		u = math.Ceil(u/10) * 10
	}
	return int64(u) * 1000
}

// reorderPoint is the stock (thousandths) under which item is reordered.
func (s *whStream) reorderPoint(item int) int64 {
	return int64(math.Max(1, math.Ceil(s.dd(item)*reorderDays))) * 1000
}

func (s *whStream) enqueue(item int) {
	if !s.queued[item] {
		s.queued[item] = true
		s.queue = append(s.queue, int32(item))
		s.queueDay = append(s.queueDay, int32(s.today))
	}
}

func (s *whStream) dequeue() (int, bool) {
	if s.qhead == len(s.queue) {
		if s.qhead > 0 {
			s.queue, s.queueDay, s.qhead = s.queue[:0], s.queueDay[:0], 0
		}
		return 0, false
	}
	it := int(s.queue[s.qhead])
	s.qhead++
	s.queued[it] = false
	return it, true
}

func (s *whStream) addStock(item int, q int64) {
	if !s.stocked[item] {
		s.stocked[item] = true
		s.touched = append(s.touched, int32(item))
	}
	s.stock[item] += q
}

// newYear restarts document numbering when the year of t changes.
func (s *whStream) newYear(t time.Time) {
	if t.Year() != s.year {
		s.year = t.Year()
		s.yearSales, s.yearRcv = 0, 0
	}
}

// number formats a document number "WW-00001234" (11 characters).
func (s *whStream) number(seq int) []byte {
	b := append(s.numBuf[:0], whCode(s.w)...)
	b = append(b, '-')
	var digits [20]byte
	d := strconv.AppendInt(digits[:0], int64(seq), 10)
	for i := len(d); i < 8; i++ {
		b = append(b, '0')
	}
	b = append(b, d...)
	s.numBuf = b
	return b
}

// priceLine fills price, amount and VAT of l at price type pt on day d.
func (s *whStream) priceLine(l *line, pt, d int) {
	sch := s.p.schedule(l.item)
	l.price = sch.priceAt(d, pt)
	l.amount = (l.qty*l.price + 500) / 1000
	rate := vatPercent(s.p.itemVAT(l.item))
	l.vat = (l.amount*rate*2 + (100 + rate)) / (2 * (100 + rate)) // rounded half up
}

// opening writes the opening-stock receipts on the first morning: every
// item expected to sell at least one unit a month gets a replenishment
// quantity, 50 lines per document.
func (s *whStream) opening() error {
	p := s.p
	var items []int
	for r := 0; r < p.items; r++ {
		it := p.itemPerm.of(r)
		if s.dd(it)*coverDays < 1 {
			break // popularity falls with rank
		}
		items = append(items, it)
	}
	t0 := p.dayStartMicros[0] + 7*3600*1e6
	for k := 0; len(items) > 0; k++ {
		n := min(openingLinesPerDoc, len(items))
		s.lines = s.lines[:0]
		for _, it := range items[:n] {
			l := line{item: it, qty: s.orderQty(it)}
			s.priceLine(&l, PriceTypePurchase, 0)
			s.lines = append(s.lines, l)
		}
		items = items[n:]
		if err := s.receipt(t0+int64(k)*60e6, 0, 0, "Opening balance", true); err != nil {
			return err
		}
	}
	return nil
}

// drawLines is the number of lines of a new document: 1 + exponential with
// mean meanLines-1, at most 40.
func (s *whStream) drawLines() int {
	return min(40, 1+int(s.rng.ExpFloat64()*(meanLines-1)))
}

// sortedTimes returns n sorted times of day (seconds) in [from, to).
func (s *whStream) sortedTimes(n int, from, to int32) []int32 {
	s.times = s.times[:0]
	for i := 0; i < n; i++ {
		s.times = append(s.times, from+int32(s.rng.IntN(int(to-from))))
	}
	slices.Sort(s.times)
	return s.times
}

func (s *whStream) day(d int) error {
	p := s.p
	s.today = d
	// Receipts in the morning (07:30-09:00), before the day's sales: the
	// queued replenishments, about receiptLines lines per document, once a
	// document's worth is pending or the oldest has waited maxWaitDays.
	pending := len(s.queue) - s.qhead
	if lim := int(p.receiving[d]); lim != 0 && pending > 0 &&
		(pending >= receiptLines || d-int(s.queueDay[s.qhead]) >= maxWaitDays) {
		k := (pending + receiptLines - 1) / receiptLines
		if lim > 0 {
			k = min(k, lim)
		}
		s.counts = s.counts[:0]
		for j := 0; j < k; j++ {
			n := min(40, (pending+k-j-1)/(k-j))
			s.counts = append(s.counts, n)
			pending -= n
		}
		for k, sec := range s.sortedTimes(len(s.counts), 7*3600+1800, 9*3600) {
			s.lines = s.lines[:0]
			for len(s.lines) < s.counts[k] {
				it, _ := s.dequeue()
				l := line{item: it, qty: s.orderQty(it)}
				s.priceLine(&l, PriceTypePurchase, d)
				s.lines = append(s.lines, l)
			}
			sup := p.supZipf.rank(s.rng.Float64())
			if err := s.receipt(p.dayStartMicros[d]+int64(sec)*1e6, d, sup, "", false); err != nil {
				return err
			}
		}
	}
	// Sales from 09:00 to 20:00.
	ns := int(p.salesPerDay[s.w][d])
	for _, sec := range s.sortedTimes(ns, 9*3600, 20*3600) {
		if err := s.sale(p.dayStartMicros[d]+int64(sec)*1e6, d); err != nil {
			return err
		}
	}
	return nil
}

func (s *whStream) inLines(item int) bool {
	for i := range s.lines {
		if s.lines[i].item == item {
			return true
		}
	}
	return false
}

// saleQty draws a sales line quantity (thousandths): 1 + geometric units,
// fractional for items sold by weight.
func (s *whStream) saleQty(item int) int64 {
	u := int64(1)
	for u < 50 && s.rng.Float64() < 0.55 {
		u++
	}
	q := u * 1000
	if s.p.itemUnit(item) == 1 { // kg
		q -= int64(s.rng.IntN(1000))
	}
	return q
}

func (s *whStream) sale(t int64, d int) error {
	p := s.p
	cp := p.cpPerm.of(p.cpZipf.rank(s.rng.Float64()))
	pt := p.cpPriceType(cp)
	// 0.7 % drafts and 0.3 % marked for deletion: lines but no movements.
	roll := s.rng.IntN(1000)
	posted, marked := roll >= 10, roll < 3
	n := s.drawLines()
	s.lines = s.lines[:0]
	for k := 0; k < n; k++ {
		it := -1
		for try := 0; try < 4; try++ {
			c := p.itemPerm.of(p.itemZipf.rank(s.rng.Float64()))
			if s.inLines(c) {
				continue
			}
			if s.stock[c] > 0 {
				it = c
				break
			}
			if try == 0 { // the item asked for first gets reordered
				s.enqueue(c)
			}
		}
		if it < 0 {
			continue
		}
		q := min(s.saleQty(it), s.stock[it])
		if posted {
			s.stock[it] -= q
			if s.stock[it] < s.reorderPoint(it) {
				s.enqueue(it)
			}
		}
		l := line{item: it, qty: q}
		s.priceLine(&l, pt, d)
		s.lines = append(s.lines, l)
	}
	if len(s.lines) == 0 {
		posted = false // nothing in stock: an unposted empty draft
	}

	tt := time.UnixMicro(t).UTC()
	s.newYear(tt)
	s.yearSales++
	ref := p.salesRef(s.w, s.salesSeq)
	s.salesSeq++
	var sum, vat int64
	for i := range s.lines {
		sum += s.lines[i].amount
		vat += s.lines[i].vat
	}
	user := s.usersHere[s.rng.IntN(len(s.usersHere))]
	baseTable := 0
	if s.haveReceipt && s.rng.IntN(5) == 0 {
		baseTable = NumGoodsReceipt
	}
	comment := ""
	if s.rng.IntN(10) == 0 {
		comment = commentText(s.rng.IntN(numComments))
	}

	h := s.e.get(tSalesInvoices)
	h.row(21)
	h.ref(&ref)
	h.int4(int32(1 + s.rng.IntN(3)))
	h.boolean(marked)
	h.ts(t)
	h.ts(yearStart(tt))
	h.textBytes(s.number(s.yearSales))
	h.boolean(posted)
	r := s.orgRef
	h.ref(&r)
	r = p.cpRef(cp)
	h.ref(&r)
	r = p.contractRef(cp)
	h.ref(&r)
	h.ref(&s.whRef)
	h.ref(&s.currency)
	r = p.priceTypeRef(pt)
	h.ref(&r)
	r = p.userRef(user)
	h.ref(&r)
	h.ref(&s.deptRef)
	h.numeric(sum, 2)
	h.numeric(vat, 2)
	h.composite(baseTable, &s.lastReceipt)
	h.text(comment)
	if err := s.e.check(tSalesInvoices); err != nil {
		return err
	}

	if err := s.writeLines(tSalesInvoiceLines, &ref); err != nil {
		return err
	}
	if posted {
		gm := s.e.get(tGoodsMovements)
		sm := s.e.get(tSalesMovements)
		cpRef := p.cpRef(cp)
		for i := range s.lines {
			l := &s.lines[i]
			ir := p.itemRef(l.item)
			gm.row(9)
			gm.ts(t)
			gm.rtref(NumSalesInvoice)
			gm.ref(&ref)
			gm.numeric(int64(i+1), 0)
			gm.boolean(true)
			gm.numeric(RecordKindExpense, 0)
			gm.ref(&s.whRef)
			gm.ref(&ir)
			gm.numeric(l.qty, 3)

			sm.row(11)
			sm.ts(t)
			sm.rtref(NumSalesInvoice)
			sm.ref(&ref)
			sm.numeric(int64(i+1), 0)
			sm.boolean(true)
			sm.ref(&s.orgRef)
			sm.ref(&cpRef)
			sm.ref(&ir)
			sm.numeric(l.qty, 3)
			sm.numeric(l.amount, 2)
			sm.numeric(l.vat, 2)
		}
		if err := s.e.check(tGoodsMovements); err != nil {
			return err
		}
		if err := s.e.check(tSalesMovements); err != nil {
			return err
		}
	}
	s.docs.Add(1)
	return s.objectKey(NumSalesInvoice, &ref)
}

// receipt writes a goods receipt of s.lines at time t (Unix µs) on day d
// from supplier sup and books its stock.
func (s *whStream) receipt(t int64, d int, sup int, comment string, opening bool) error {
	p := s.p
	tt := time.UnixMicro(t).UTC()
	s.newYear(tt)
	s.yearRcv++
	ref := p.receiptRef(s.w, s.recvSeq)
	s.recvSeq++
	var sum, vat int64
	for i := range s.lines {
		sum += s.lines[i].amount
		vat += s.lines[i].vat
		s.addStock(s.lines[i].item, s.lines[i].qty)
	}
	user := s.usersHere[s.rng.IntN(len(s.usersHere))]
	cp := p.supplierCP(sup)

	h := s.e.get(tGoodsReceipts)
	h.row(22)
	h.ref(&ref)
	h.int4(int32(1 + s.rng.IntN(3)))
	h.boolean(false)
	h.ts(t)
	h.ts(yearStart(tt))
	h.textBytes(s.number(s.yearRcv))
	h.boolean(true)
	h.ref(&s.orgRef)
	r := p.cpRef(cp)
	h.ref(&r)
	r = p.contractRef(p.purchaseContract(sup))
	h.ref(&r)
	h.ref(&s.whRef)
	h.ref(&s.currency)
	r = p.priceTypeRef(PriceTypePurchase)
	h.ref(&r)
	r = p.userRef(user)
	h.ref(&r)
	h.numeric(sum, 2)
	h.numeric(vat, 2)
	h.composite(0, nil)
	h.text(comment)
	if opening {
		h.text("")
		h.tsTime(EmptyDate)
	} else {
		h.text(strconv.Itoa(1 + s.rng.IntN(999999)))
		h.ts(p.dayStartMicros[max(0, d-s.rng.IntN(4))])
	}
	if err := s.e.check(tGoodsReceipts); err != nil {
		return err
	}
	if err := s.writeLines(tGoodsReceiptLines, &ref); err != nil {
		return err
	}
	gm := s.e.get(tGoodsMovements)
	for i := range s.lines {
		l := &s.lines[i]
		ir := p.itemRef(l.item)
		gm.row(9)
		gm.ts(t)
		gm.rtref(NumGoodsReceipt)
		gm.ref(&ref)
		gm.numeric(int64(i+1), 0)
		gm.boolean(true)
		gm.numeric(RecordKindReceipt, 0)
		gm.ref(&s.whRef)
		gm.ref(&ir)
		gm.numeric(l.qty, 3)
	}
	if err := s.e.check(tGoodsMovements); err != nil {
		return err
	}
	s.lastReceipt, s.haveReceipt = ref, true
	return s.objectKey(NumGoodsReceipt, &ref)
}

// writeLines writes s.lines as the tabular part id of document ref (both
// tabular parts have the same column layout).
func (s *whStream) writeLines(id tableID, ref *Ref) error {
	p := s.p
	b := s.e.get(id)
	for i := range s.lines {
		l := &s.lines[i]
		b.row(10)
		b.ref(ref)
		b.b = append(b.b, 0, 0, 0, 4, 0, 0, byte((i+1)>>8), byte(i+1))
		b.numeric(int64(i+1), 0)
		r := p.itemRef(l.item)
		b.ref(&r)
		r = p.unitRef(p.itemUnit(l.item))
		b.ref(&r)
		b.numeric(l.qty, 3)
		b.numeric(l.price, 2)
		b.numeric(l.amount, 2)
		r = p.vatRef(p.itemVAT(l.item))
		b.ref(&r)
		b.numeric(l.vat, 2)
	}
	return s.e.check(id)
}

// objectKey writes the RLS row document -> the warehouse's access key.
func (s *whStream) objectKey(table int, ref *Ref) error {
	k := s.e.get(tRLSObjectKeys)
	k.row(4)
	k.composite(table, ref)
	k.ref(&s.keyRef)
	return s.e.check(tRLSObjectKeys)
}

// totals writes the balance-totals rows at period (Unix µs): the current
// stock of every item this warehouse ever stocked, when non-zero.
func (s *whStream) totals(period int64) error {
	b := s.e.get(tGoodsBalanceTotals)
	for _, it := range s.touched {
		q := s.stock[it]
		if q == 0 {
			continue
		}
		ir := s.p.itemRef(int(it))
		b.row(5)
		b.ts(period)
		b.ref(&s.whRef)
		b.ref(&ir)
		b.numeric(q, 3)
		b.numeric(0, 0)
	}
	return s.e.check(tGoodsBalanceTotals)
}

// yearStart is the Unix µs of 1 January 00:00 of t's year (_numberprefix).
func yearStart(t time.Time) int64 {
	return time.Date(t.Year(), 1, 1, 0, 0, 0, 0, time.UTC).UnixMicro()
}

// numComments is the number of distinct document comments.
const numComments = 8

// commentText is the occasional document comment number i.
func commentText(i int) string {
	return [numComments]string{
		"Urgent", "Deliver before noon", "Customer pickup", "Call before delivery",
		"Partial shipment", "Paid in advance", "Check quality on arrival", "Repeat order",
	}[i]
}
