package erp

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
)

// catalogChunk is the number of catalog rows one generation task writes.
const catalogChunk = 10000

// Word lists for names. ASCII on purpose: ILIKE case folding of non-ASCII
// letters depends on the database's locale, ASCII does not.
const (
	wordsItemNoun = "Bolt Nut Screw Washer Anchor Bracket Hinge Handle Lock Cable Wire Socket Switch Lamp " +
		"Fuse Relay Pipe Valve Fitting Tap Hose Clamp Filter Pump Drill Saw Hammer Wrench Pliers " +
		"Chisel Sander Grinder Paint Primer Varnish Glue Sealant Tape Brush Roller Ladder Shelf " +
		"Cabinet Drawer Panel Board Beam Tile Brick Tray Bucket Gloves Mask Helmet Boots Jacket"
	wordsMaterial = "steel stainless brass copper aluminium plastic nylon rubber oak pine birch glass " +
		"ceramic zinc-plated galvanized"
	wordsBrand = "Norvik Kraftwerk Ironhill Bluecrest Stahlmann Polaris Vector Atlas Zenith Orion " +
		"Granite Falcon Meridian Summit Titan Nordic Baltic Ural Volga Sever Alpha Delta Sigma Omega Ladoga"
	wordsGroup = "Fasteners Electrical Plumbing Tools Paints Adhesives Furniture Building Safety " +
		"Garden Lighting Hardware Storage Flooring Heating"
	wordsCP1 = "North South East West Central Grand Prime First United Global Metro Silver Golden " +
		"Green Blue Red Star Sun River Lake Forest Stone Iron Steel"
	wordsCP2 = "wind field trade stroy snab service tech build line port market house group invest " +
		"logistic supply"
	wordsCPSuffix = "LLC JSC PJSC Ltd Inc Group Trading"
	wordsFirst    = "Ivan Petr Anna Maria Olga Sergey Dmitry Elena Nikolay Irina Pavel Tatiana Alexey Natalia Oleg"
	wordsLast     = "Ivanov Petrov Sidorov Smirnov Kuznetsov Popov Vasiliev Sokolov Mikhailov Novikov " +
		"Fedorov Morozov Volkov Alekseev Lebedev Semenov Egorov Pavlov Kozlov Stepanov"
)

// words splits a word list.
func words(list string) []string { return strings.Fields(list) }

// codeN formats a catalog code: prefix followed by n zero-padded to width.
func codeN(dst []byte, prefix string, n, width int) []byte {
	dst = append(dst[:0], prefix...)
	var d [20]byte
	digits := strconv.AppendInt(d[:0], int64(n), 10)
	for i := len(digits); i < width; i++ {
		dst = append(dst, '0')
	}
	return append(dst, digits...)
}

// digitsN returns n pseudo-random decimal digits from x (tax ids).
func digitsN(dst []byte, x uint64, n int) []byte {
	dst = dst[:0]
	for i := 0; i < n; i++ {
		dst = append(dst, byte('0'+x%10))
		x /= 10
		if x == 0 {
			x = mix64(uint64(i) + 77)
		}
	}
	return dst
}

// catHead writes the columns every catalog starts with: _idrref, _version,
// _marked, _predefinedid (the empty reference: nothing is predefined).
func catHead(b *copyBuf, ref *Ref, version int32, marked bool) {
	var zero Ref
	b.ref(ref)
	b.int4(version)
	b.boolean(marked)
	b.ref(&zero)
}

// genSmallCatalogs writes organizations, currencies, units, VAT rates,
// departments, price types, users, warehouses, access keys and the two
// access-value RLS registers.
func (p *plan) genSmallCatalogs(ctx context.Context, e *emitter) error {
	rng := streamRand(p.seed, "small catalogs", 0)
	var buf []byte

	b := e.get(tOrganizations)
	orgNames := words(wordsCP1)
	for i := 0; i < p.orgs; i++ {
		r := p.orgRef(i)
		b.row(8)
		catHead(b, &r, 1, false)
		buf = codeN(buf, "", i+1, 9)
		b.textBytes(buf)
		b.text(fmt.Sprintf("Trade House %s %d LLC", orgNames[i%len(orgNames)], i+1))
		buf = digitsN(buf, p.attr(10, i), 10)
		b.textBytes(buf)
		b.text(fmt.Sprintf("O%d", i+1))
	}

	b = e.get(tCurrencies)
	for i, c := range [][3]string{{"643", "RUB", "Russian ruble"}, {"840", "USD", "US dollar"}, {"978", "EUR", "Euro"}} {
		r := p.currencyRef(i)
		b.row(7)
		catHead(b, &r, 1, false)
		b.text(c[0])
		b.text(c[1])
		b.text(c[2])
	}

	b = e.get(tUnits)
	for i, u := range [][3]string{{"796", "pcs", "Piece"}, {"166", "kg", "Kilogram"}, {"006", "m", "Metre"}, {"112", "l", "Litre"}, {"778", "pack", "Package"}} {
		r := p.unitRef(i)
		b.row(7)
		catHead(b, &r, 1, false)
		b.text(u[0])
		b.text(u[1])
		b.text(u[2])
	}

	b = e.get(tVATRates)
	for i, v := range []string{"20%", "10%", "0%", "Without VAT"} {
		r := p.vatRef(i)
		b.row(7)
		catHead(b, &r, 1, false)
		b.text(strconv.Itoa(i + 1))
		b.text(v)
		b.numeric(vatPercent(i)*100, 2)
	}

	b = e.get(tDepartments)
	for i := 0; i < p.departments; i++ {
		r := p.deptRef(i)
		b.row(7)
		catHead(b, &r, 1, false)
		buf = codeN(buf, "", i+1, 9)
		b.textBytes(buf)
		b.text(fmt.Sprintf("Sales department %d", i+1))
		o := p.orgRef(i % p.orgs)
		b.ref(&o)
	}

	b = e.get(tPriceTypes)
	for i, name := range []string{"Purchase", "Wholesale", "Retail"} {
		r := p.priceTypeRef(i)
		b.row(8)
		catHead(b, &r, 1, false)
		buf = codeN(buf, "", i+1, 9)
		b.textBytes(buf)
		b.text(name)
		c := p.currencyRef(0)
		b.ref(&c)
		b.boolean(true)
	}

	b = e.get(tUsers)
	first, last := words(wordsFirst), words(wordsLast)
	for u := 0; u < p.users; u++ {
		r := p.userRef(u)
		b.row(10)
		catHead(b, &r, int32(1+rng.IntN(5)), false)
		buf = codeN(buf, "", u+1, 9)
		b.textBytes(buf)
		b.text(last[rng.IntN(len(last))] + " " + first[rng.IntN(len(first))])
		buf = codeN(buf, "user", u+1, 4)
		b.textBytes(buf)
		d := p.deptRef(u % p.departments)
		b.ref(&d)
		w := p.warehouseRef(p.userWarehouse(u))
		b.ref(&w)
		b.boolean(false)
	}

	b = e.get(tWarehouses)
	for w := 0; w < p.warehouses; w++ {
		r := p.warehouseRef(w)
		b.row(10)
		catHead(b, &r, 1, false)
		buf = codeN(buf, "", w+1, 9)
		b.textBytes(buf)
		kind := "Store"
		if w%3 == 0 {
			kind = "Main warehouse"
		}
		b.text(fmt.Sprintf("%s %s-%d", kind, whCode(w), w+1))
		o := p.orgRef(p.warehouseOrg(w))
		b.ref(&o)
		u := p.userRef(w % p.users)
		b.ref(&u)
		d := p.deptRef(p.warehouseDept(w))
		b.ref(&d)
		pt := p.priceTypeRef(PriceTypeRetail)
		b.ref(&pt)
	}

	b = e.get(tAccessKeys)
	for w := 0; w < p.warehouses; w++ {
		r := p.accessKeyRef(w)
		b.row(6)
		catHead(b, &r, 1, false)
		buf = codeN(buf, "", w+1, 9)
		b.textBytes(buf)
		b.text(fmt.Sprintf("Organization %d, warehouse %s", p.warehouseOrg(w)+1, whCode(w)))
	}

	// Access key -> allowed values: the warehouse's organization and the
	// warehouse itself.
	b = e.get(tRLSKeyValues)
	for w := 0; w < p.warehouses; w++ {
		k := p.accessKeyRef(w)
		o := p.orgRef(p.warehouseOrg(w))
		wr := p.warehouseRef(w)
		b.row(4)
		b.ref(&k)
		b.composite(NumOrganizations, &o)
		b.row(4)
		b.ref(&k)
		b.composite(NumWarehouses, &wr)
	}

	// User -> allowed values: the home warehouse; every 7th user a second
	// warehouse; every 5th user the home warehouse's whole organization;
	// user 0 (the administrator) every organization.
	b = e.get(tRLSUserValues)
	for u := 0; u < p.users; u++ {
		ur := p.userRef(u)
		home := p.userWarehouse(u)
		wr := p.warehouseRef(home)
		b.row(4)
		b.ref(&ur)
		b.composite(NumWarehouses, &wr)
		if u%7 == 3 && p.warehouses > 1 {
			other := (home + 1 + int(p.attr(11, u)%uint64(p.warehouses-1))) % p.warehouses
			wr2 := p.warehouseRef(other)
			b.row(4)
			b.ref(&ur)
			b.composite(NumWarehouses, &wr2)
		}
		switch {
		case u == 0:
			for o := 0; o < p.orgs; o++ {
				or := p.orgRef(o)
				b.row(4)
				b.ref(&ur)
				b.composite(NumOrganizations, &or)
			}
		case u%5 == 0:
			or := p.orgRef(p.warehouseOrg(home))
			b.row(4)
			b.ref(&ur)
			b.composite(NumOrganizations, &or)
		}
	}
	return e.flush()
}

// genItems writes item rows [from, to) of _reference42; chunk 0 also
// writes the item groups.
func (p *plan) genItems(ctx context.Context, e *emitter, chunk int) error {
	rng := streamRand(p.seed, TableItems, uint64(chunk))
	nouns, mats, brands, groups := words(wordsItemNoun), words(wordsMaterial), words(wordsBrand), words(wordsGroup)
	var code, desc, art, long []byte
	var zeroRef Ref
	b := e.get(tItems)
	if chunk == 0 {
		for g := 0; g < p.itemGroups; g++ {
			r := p.itemGroupRef(g)
			b.row(14)
			catHead(b, &r, 1, false)
			b.ref(&zeroRef)
			b.boolean(false) // a group
			code = codeN(code, "GR-", g+1, 8)
			b.textBytes(code)
			b.text(groups[g%len(groups)] + " " + strconv.Itoa(g/len(groups)+1))
			b.text("")
			b.ref(&zeroRef)
			b.ref(&zeroRef)
			b.numeric(0, 3)
			b.boolean(false)
			b.text("")
		}
	}
	from, to := chunk*catalogChunk, min(p.items, (chunk+1)*catalogChunk)
	for i := from; i < to; i++ {
		b = e.get(tItems) // check may have handed the previous buffer on
		r := p.itemRef(i)
		noun, mat, brand := nouns[rng.IntN(len(nouns))], mats[rng.IntN(len(mats))], brands[rng.IntN(len(brands))]
		size := strconv.Itoa(2+rng.IntN(48)) + "x" + strconv.Itoa(5+5*rng.IntN(40))
		b.row(14)
		catHead(b, &r, int32(1+rng.IntN(4)), rng.IntN(200) == 0)
		g := p.itemGroupRef(int(int64(i) * int64(p.itemGroups) / int64(p.items)))
		b.ref(&g)
		b.boolean(true) // an element
		code = codeN(code, "IT-", i+1, 8)
		b.textBytes(code)
		desc = append(desc[:0], noun...)
		desc = append(desc, ' ')
		desc = append(desc, mat...)
		desc = append(desc, ' ')
		desc = append(desc, size...)
		desc = append(desc, ' ')
		desc = append(desc, brand...)
		b.textBytes(desc)
		art = append(art[:0], strings.ToUpper(brand[:3])...)
		art = append(art, '-')
		art = strconv.AppendInt(art, int64(100000+rng.IntN(900000)), 10)
		b.textBytes(art)
		u := p.unitRef(p.itemUnit(i))
		b.ref(&u)
		v := p.vatRef(p.itemVAT(i))
		b.ref(&v)
		b.numeric(int64(10+rng.IntN(50000)), 3)
		b.boolean(false)
		long = append(long[:0], "High-quality "...)
		long = append(long, strings.ToLower(noun)...)
		long = append(long, " made of "...)
		long = append(long, mat...)
		long = append(long, " by "...)
		long = append(long, brand...)
		long = append(long, ". Size "...)
		long = append(long, size...)
		long = append(long, ". "...)
		long = appendFiller(long, rng, 20+rng.IntN(160))
		b.textBytes(long)
		if err := e.check(tItems); err != nil {
			return err
		}
	}
	return e.flush()
}

// appendFiller appends about n characters of catalogue prose.
func appendFiller(dst []byte, rng *rand.Rand, n int) []byte {
	const prose = "Suitable for professional and household use. Meets GOST and ISO requirements. " +
		"Delivered in a protective package. Store in a dry place. Warranty twelve months. " +
		"Compatible with standard accessories. Resistant to corrosion and wear. "
	start := rng.IntN(len(prose) / 2)
	end := min(len(prose), start+n)
	return append(dst, prose[start:end]...)
}

// genCounterparties writes counterparty rows of one chunk (chunk 0 also the
// groups) and their contracts.
func (p *plan) genCounterparties(ctx context.Context, e *emitter, chunk int) error {
	rng := streamRand(p.seed, TableCounterparties, uint64(chunk))
	w1, w2, suf := words(wordsCP1), words(wordsCP2), words(wordsCPSuffix)
	var code, name, buf []byte
	var zeroRef Ref
	b := e.get(tCounterparties)
	if chunk == 0 {
		for g := 0; g < p.cpGroups; g++ {
			r := p.cpGroupRef(g)
			b.row(14)
			catHead(b, &r, 1, false)
			b.ref(&zeroRef)
			b.boolean(false)
			code = codeN(code, "CG-", g+1, 8)
			b.textBytes(code)
			b.text("Region " + strconv.Itoa(g+1))
			b.text("")
			b.text("")
			b.text("")
			b.ref(&zeroRef)
			b.boolean(false)
			b.boolean(false)
		}
	}
	from, to := chunk*catalogChunk, min(p.counterparties, (chunk+1)*catalogChunk)
	for i := from; i < to; i++ {
		b = e.get(tCounterparties) // check may have handed the previous buffer on
		r := p.cpRef(i)
		b.row(14)
		catHead(b, &r, int32(1+rng.IntN(6)), rng.IntN(300) == 0)
		g := p.cpGroupRef(i % p.cpGroups)
		b.ref(&g)
		b.boolean(true)
		code = codeN(code, "CP-", i+1, 8)
		b.textBytes(code)
		a, c, s := w1[rng.IntN(len(w1))], w2[rng.IntN(len(w2))], suf[rng.IntN(len(suf))]
		name = append(name[:0], a...)
		name = append(name, c...)
		name = append(name, ' ')
		name = append(name, s...)
		b.textBytes(name)
		buf = digitsN(buf, p.attr(12, i), 10)
		b.textBytes(buf)
		buf = digitsN(buf, p.attr(13, i), 9)
		b.textBytes(buf)
		name = append(name[:0], "Company \""...)
		name = append(name, a...)
		name = append(name, c...)
		name = append(name, "\" "...)
		name = append(name, s...)
		name = append(name, ", "...)
		name = appendFiller(name, rng, 10+rng.IntN(60))
		b.textBytes(name)
		u := p.userRef(int(p.attr(14, i) % uint64(p.users)))
		b.ref(&u)
		b.boolean(true)
		b.boolean(i%10 == 0)
		if err := e.check(tCounterparties); err != nil {
			return err
		}
		// Contracts: the main sales contract of i, and a purchase
		// contract when i is a supplier.
		p.contractRow(e, i, i, false)
		if i%10 == 0 {
			s := i / 10
			p.contractRow(e, p.purchaseContract(s), i, true)
		}
		if err := e.check(tContracts); err != nil {
			return err
		}
	}
	return e.flush()
}

func (p *plan) contractRow(e *emitter, idx, cp int, purchase bool) {
	b := e.get(tContracts)
	r := p.contractRef(idx)
	b.row(11)
	catHead(b, &r, 1, false)
	o := p.cpRef(cp)
	b.ref(&o)
	var code []byte
	code = codeN(code, "", idx+1, 9)
	b.textBytes(code)
	pt, kind, title := p.cpPriceType(cp), int64(0), "Sales contract No. "
	if purchase {
		pt, kind, title = PriceTypePurchase, 1, "Purchase contract No. "
	}
	b.text(title + strconv.Itoa(idx+1))
	org := p.orgRef(cp % p.orgs)
	b.ref(&org)
	c := p.currencyRef(0)
	b.ref(&c)
	ptr := p.priceTypeRef(pt)
	b.ref(&ptr)
	b.numeric(kind, 0)
}

// genPrices writes the price history rows of items of one chunk: for each
// price type a row at the history start and one per price change.
func (p *plan) genPrices(ctx context.Context, e *emitter, chunk int) error {
	cur := p.currencyRef(0)
	from, to := chunk*catalogChunk, min(p.items, (chunk+1)*catalogChunk)
	for i := from; i < to; i++ {
		b := e.get(tPrices) // check may have handed the previous buffer on
		s := p.schedule(i)
		ir := p.itemRef(i)
		for t := 0; t < 3; t++ {
			pt := p.priceTypeRef(t)
			for k := 0; k <= s.n; k++ {
				day := 0
				if k > 0 {
					day = int(s.days[k-1])
				}
				b.row(5)
				b.ts(p.dayStartMicros[day])
				b.ref(&pt)
				b.ref(&ir)
				b.numeric(s.priceAfter(k, t), 2)
				b.ref(&cur)
			}
		}
		if err := e.check(tPrices); err != nil {
			return err
		}
	}
	return e.flush()
}
