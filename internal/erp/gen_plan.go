package erp

import (
	"fmt"
	"math"
	"sort"
	"time"
)

// Nominal sizes at scale 1 (about 1 GB with indexes).
const (
	baseSalesInvoices = 100000
	baseItems         = 20000
	baseCounterparts  = 10000
	// itemTheta and cpTheta are the Zipf skews of item and counterparty
	// popularity.
	itemTheta = 0.99
	cpTheta   = 0.8
	// meanLines is the mean number of lines of a document.
	meanLines = 8
	// openingLinesPerDoc is the line count of opening-stock receipts.
	openingLinesPerDoc = 50
	// coverDays is how many days of expected demand a replenishment brings;
	// reorderDays is the stock (in days of demand) that triggers one.
	coverDays   = 30
	reorderDays = 7
	// receiptLines is the typical line count of a goods receipt.
	receiptLines = 10
	// maxWaitDays is how long a replenishment may wait for a fuller
	// receipt.
	maxWaitDays = 7
	// MaxScale bounds Options.Scale (about 1 TB).
	MaxScale = 1000
)

// plan holds every count and distribution of one generated database. It is
// computed once from (scale, seed) and only read afterwards, so generator
// goroutines share it.
type plan struct {
	scale float64
	seed  uint64
	seedK uint64 // reference-derivation key
	sep   bool

	orgs, departments, users, warehouses        int
	itemGroups, items, cpGroups, counterparties int
	suppliers, contracts                        int
	salesDocs                                   int
	days                                        int
	start                                       time.Time
	itemZipf, cpZipf, supZipf                   *zipf
	itemPerm, cpPerm                            perm
	salesPerDay                                 [][]int32 // [warehouse][day]
	receiving                                   []int8    // max receipts a warehouse takes on a day (-1 = no limit)
	salesPerWarehouse                           []int
	dayStartMicros                              []int64 // Unix µs of each day's midnight
	monthOfDay                                  []int   // month index of each day
	months                                      int
	monthStartMicros                            []int64
}

func scaled(base float64, scale float64, min int) int {
	n := int(math.Round(base * scale))
	if n < min {
		return min
	}
	return n
}

func newPlan(scale float64, seed uint64, sep bool) (*plan, error) {
	if !(scale > 0) || scale > MaxScale || math.IsNaN(scale) {
		return nil, fmt.Errorf("erp: scale must be > 0 and <= %d, got %g", MaxScale, scale)
	}
	p := &plan{scale: scale, seed: seed, seedK: mix64(seed ^ 0x243f6a8885a308d3), sep: sep}
	p.orgs = scaled(3*math.Cbrt(scale), 1, 2)
	p.warehouses = scaled(10*math.Sqrt(scale), 1, 4)
	if p.warehouses > 1000 {
		p.warehouses = 1000 // document numbers hold a 2-character base-36 warehouse code
	}
	p.departments = scaled(20*math.Sqrt(scale), 1, 3)
	p.users = scaled(200*math.Sqrt(scale), 1, 20)
	p.items = scaled(baseItems, scale, 200)
	p.itemGroups = max(5, p.items/200)
	p.counterparties = scaled(baseCounterparts, scale, 100)
	p.cpGroups = max(3, p.counterparties/500)
	p.suppliers = (p.counterparties + 9) / 10
	p.contracts = p.counterparties + p.suppliers
	p.salesDocs = scaled(baseSalesInvoices, scale, 100)
	p.start = HistoryStart
	p.days = int(HistoryEnd.Sub(HistoryStart).Hours() / 24)
	p.itemZipf = newZipf(p.items, itemTheta)
	p.cpZipf = newZipf(p.counterparties, cpTheta)
	p.supZipf = newZipf(p.suppliers, cpTheta)
	p.itemPerm = newPerm(p.items, mix64(seed^1))
	p.cpPerm = newPerm(p.counterparties, mix64(seed^2))

	p.dayStartMicros = make([]int64, p.days)
	p.monthOfDay = make([]int, p.days)
	salesW := make([]float64, p.days)
	p.receiving = make([]int8, p.days)
	month := -1
	prevMonth := time.Month(0)
	for d := 0; d < p.days; d++ {
		t := p.start.AddDate(0, 0, d)
		p.dayStartMicros[d] = t.UnixMicro()
		if t.Month() != prevMonth {
			month++
			prevMonth = t.Month()
			p.monthStartMicros = append(p.monthStartMicros, t.UnixMicro())
		}
		p.monthOfDay[d] = month
		salesW[d] = dayWeight(t, float64(d)/float64(p.days))
		p.receiving[d] = receivingLimit(t)
	}
	p.months = month + 1

	// Warehouses differ in size: weight 1/(w+1)^0.6.
	whW := make([]float64, p.warehouses)
	for w := range whW {
		whW[w] = 1 / math.Pow(float64(w+1), 0.6)
	}
	p.salesPerWarehouse = allocate(p.salesDocs, whW)
	p.salesPerDay = make([][]int32, p.warehouses)
	for w := 0; w < p.warehouses; w++ {
		p.salesPerDay[w] = toInt32(allocate(p.salesPerWarehouse[w], salesW))
	}
	return p, nil
}

// dayWeight returns the relative sales volume of day t: weekdays heavier
// than weekends, month-end peaks, the New Year holidays (1-8 January)
// quiet, and 30 % growth over the history (progress in [0,1)).
func dayWeight(t time.Time, progress float64) float64 {
	w := 1.0
	switch t.Weekday() {
	case time.Saturday:
		w = 0.3
	case time.Sunday:
		w = 0.12
	}
	last := time.Date(t.Year(), t.Month()+1, 0, 0, 0, 0, 0, time.UTC).Day()
	switch {
	case t.Day() == last:
		w *= 2.2
	case t.Day() >= last-2:
		w *= 1.6
	}
	if t.Month() == time.January && t.Day() <= 8 {
		w *= 0.2
	}
	return w * (1 + 0.3*progress)
}

// receivingLimit is how many goods receipts a warehouse takes on day t:
// none on Sundays and 1-8 January, one on Saturdays, any number (-1) on
// other days. Receipts are demand-driven (see whStream).
func receivingLimit(t time.Time) int8 {
	switch {
	case t.Weekday() == time.Sunday, t.Month() == time.January && t.Day() <= 8:
		return 0
	case t.Weekday() == time.Saturday:
		return 1
	}
	return -1
}

// allocate splits total into len(weights) integer parts proportional to
// weights by the largest-remainder method; ties go to the lower index.
// Deterministic, no randomness.
func allocate(total int, weights []float64) []int {
	out := make([]int, len(weights))
	sum := 0.0
	for _, w := range weights {
		sum += w
	}
	if sum <= 0 || total <= 0 {
		return out
	}
	type rem struct {
		i int
		r float64
	}
	rems := make([]rem, len(weights))
	given := 0
	for i, w := range weights {
		e := float64(total) * w / sum
		out[i] = int(e)
		given += out[i]
		rems[i] = rem{i, e - float64(out[i])}
	}
	sort.SliceStable(rems, func(a, b int) bool { return rems[a].r > rems[b].r })
	for k := 0; given < total; k++ {
		out[rems[k%len(rems)].i]++
		given++
	}
	return out
}

func toInt32(a []int) []int32 {
	out := make([]int32, len(a))
	for i, v := range a {
		out[i] = int32(v)
	}
	return out
}

// ---- object references and attributes derived from (seed, index) ----

func (p *plan) orgRef(i int) Ref       { return makeRef(p.seedK, NumOrganizations, uint64(i)) }
func (p *plan) currencyRef(i int) Ref  { return makeRef(p.seedK, NumCurrencies, uint64(i)) }
func (p *plan) unitRef(i int) Ref      { return makeRef(p.seedK, NumUnits, uint64(i)) }
func (p *plan) vatRef(i int) Ref       { return makeRef(p.seedK, NumVATRates, uint64(i)) }
func (p *plan) deptRef(i int) Ref      { return makeRef(p.seedK, NumDepartments, uint64(i)) }
func (p *plan) priceTypeRef(i int) Ref { return makeRef(p.seedK, NumPriceTypes, uint64(i)) }
func (p *plan) userRef(i int) Ref      { return makeRef(p.seedK, NumUsers, uint64(i)) }
func (p *plan) itemRef(i int) Ref      { return makeRef(p.seedK, NumItems, uint64(i)) }
func (p *plan) itemGroupRef(g int) Ref { return makeRef(p.seedK, NumItems, 1<<40|uint64(g)) }
func (p *plan) cpRef(i int) Ref        { return makeRef(p.seedK, NumCounterparties, uint64(i)) }
func (p *plan) cpGroupRef(g int) Ref   { return makeRef(p.seedK, NumCounterparties, 1<<40|uint64(g)) }
func (p *plan) contractRef(i int) Ref  { return makeRef(p.seedK, NumContracts, uint64(i)) }
func (p *plan) warehouseRef(i int) Ref { return makeRef(p.seedK, NumWarehouses, uint64(i)) }
func (p *plan) accessKeyRef(i int) Ref { return makeRef(p.seedK, NumAccessKeys, uint64(i)) }
func (p *plan) salesRef(w, seq int) Ref {
	return makeRef(p.seedK, NumSalesInvoice, uint64(w)<<32|uint64(seq))
}
func (p *plan) receiptRef(w, seq int) Ref {
	return makeRef(p.seedK, NumGoodsReceipt, uint64(w)<<32|uint64(seq))
}

// attr returns 64 pseudo-random bits fixed for (what, i): attributes that
// several generators need (an item's VAT rate and unit) come from here, not
// from a chunk's stream.
func (p *plan) attr(what uint64, i int) uint64 {
	return mix64(p.seedK ^ what<<56 ^ uint64(i) ^ 0x13198a2e03707344)
}

// vatPercent is the rate in percent of VAT rate index i (_reference29:
// 20 %, 10 %, 0 %, without VAT).
func vatPercent(i int) int64 {
	switch i {
	case 0:
		return 20
	case 1:
		return 10
	}
	return 0
}

// itemVAT returns the VAT rate index of item i: 80 % at 20 %, 15 % at 10 %,
// 5 % at 0 %.
func (p *plan) itemVAT(i int) int {
	switch h := p.attr(1, i) % 100; {
	case h < 80:
		return 0
	case h < 95:
		return 1
	default:
		return 2
	}
}

// itemUnit returns the unit index of item i (0 pcs 70 %, 1 kg 15 %,
// 2 m, 3 l, 4 pack 5 % each). Items sold by weight get fractional
// quantities.
func (p *plan) itemUnit(i int) int {
	switch h := p.attr(2, i) % 100; {
	case h < 70:
		return 0
	case h < 85:
		return 1
	case h < 90:
		return 2
	case h < 95:
		return 3
	default:
		return 4
	}
}

// warehouseOrg is the organization owning warehouse w.
func (p *plan) warehouseOrg(w int) int { return w % p.orgs }

// warehouseDept is the department of warehouse w.
func (p *plan) warehouseDept(w int) int { return w % p.departments }

// userWarehouse is the home warehouse of user u.
func (p *plan) userWarehouse(u int) int { return u % p.warehouses }

// cpPriceType is the sales price type of counterparty c.
func (p *plan) cpPriceType(c int) int {
	if c%3 == 0 {
		return PriceTypeRetail
	}
	return PriceTypeWholesale
}

// supplierCP is the counterparty index of supplier s (every tenth).
func (p *plan) supplierCP(s int) int { return s * 10 }

// purchaseContract is the contract index of supplier s's purchase contract
// (after the counterparties' main contracts).
func (p *plan) purchaseContract(s int) int { return p.counterparties + s }

// maxPriceChanges bounds the price changes of one item and price type.
const maxPriceChanges = 6

// priceSchedule is an item's purchase price history: the price in kopecks
// (cents) from day 0, and up to maxPriceChanges changes.
type priceSchedule struct {
	base    int64
	n       int
	days    [maxPriceChanges]int32
	factors [maxPriceChanges]float64
}

// schedule derives item i's price history from (seed, i) alone, so the
// prices register and the documents agree without sharing state.
func (p *plan) schedule(i int) priceSchedule {
	var s priceSchedule
	g := streamPCG(p.seed, "prices", uint64(i))
	// Log-uniform base purchase price 10.00 .. 50,000.00.
	s.base = int64(math.Exp(math.Log(1000) + unitFloat(g.Uint64())*(math.Log(5000000)-math.Log(1000))))
	s.n = 1 + int(g.Uint64()%maxPriceChanges)
	for k := 0; k < s.n; k++ {
		s.days[k] = int32(30 + g.Uint64()%uint64(p.days-30))
		s.factors[k] = 0.98 + 0.12*unitFloat(g.Uint64())
	}
	// Insertion sort of the (day, factor) pairs by day.
	for a := 1; a < s.n; a++ {
		for b := a; b > 0 && s.days[b] < s.days[b-1]; b-- {
			s.days[b], s.days[b-1] = s.days[b-1], s.days[b]
			s.factors[b], s.factors[b-1] = s.factors[b-1], s.factors[b]
		}
	}
	// One change per day at most (the register is unique by period).
	for k := 1; k < s.n; k++ {
		if s.days[k] <= s.days[k-1] {
			s.days[k] = s.days[k-1] + 1
		}
		if int(s.days[k]) >= p.days {
			s.n = k
			break
		}
	}
	return s
}

// markup is the price of type t relative to the purchase price.
func markup(t int) float64 {
	switch t {
	case PriceTypeWholesale:
		return 1.25
	case PriceTypeRetail:
		return 1.45
	}
	return 1
}

// priceAfter returns the price (cents) of type t after the first k changes.
func (s *priceSchedule) priceAfter(k int, t int) int64 {
	v := float64(s.base)
	for j := 0; j < k; j++ {
		v *= s.factors[j]
	}
	return int64(math.Round(v * markup(t)))
}

// priceAt returns the price (cents) of type t on day d (the slice-last
// value: the latest change on or before d).
func (s *priceSchedule) priceAt(d int, t int) int64 {
	k := 0
	for k < s.n && int(s.days[k]) <= d {
		k++
	}
	return s.priceAfter(k, t)
}

// whCode is warehouse w as 2 base-36 digits, the document-number prefix.
func whCode(w int) string {
	const digits = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ"
	return string([]byte{digits[w/36%36], digits[w%36]})
}
