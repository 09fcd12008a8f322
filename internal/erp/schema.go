// Package erp is erplab's ERP workload: a database laid out the way the
// 1C:Enterprise 8 platform lays out a trade configuration on PostgreSQL
// (catalogs _referenceN, documents _documentN with tabular parts
// _documentN_vtM, accumulation registers _accumrgN with totals tables
// _accumrgtN / _accumrgtnN, periodic information registers _inforgN, 16-byte
// bytea references), deterministic data at a scale factor, a fast parallel
// loader and a consistency check that register totals equal the sums of
// their movements.
//
// The physical schema is schema.sql (embedded); its header comment describes
// every table and column. Go code refers to tables through the constants
// below or the [Tables] mapping returned by [Names], never by guessing
// strings.
//
// Scale 1 is about 1 GB: ~100,000 sales invoices of ~8 lines, ~25,000 goods
// receipts (+ opening-stock receipts), 20,000 items, 10,000 counterparties,
// 24 months of history ending on [HistoryEnd].
//
// It is a service, knowing no command and no plugin:
// internal/workload/erp registers it as the workload "erp", and package
// disk times its operations on each storage path (`erplab disk --macro`).
package erp

import (
	_ "embed"
	"encoding/binary"
	"fmt"
	"strings"
	"text/template"
	"time"

	"github.com/erplab/erplab/internal/workload"
)

//go:embed schema.sql
var schemaSQL string

// Table numbers: the N of _referenceN, _documentN, _accumrgN, _inforgN. A
// reference to an object of such a table carries N as its 4-byte "rtref"
// type code in composite fields and in _recordertref (see [RTRef]).
const (
	NumOrganizations  = 19
	NumCurrencies     = 24
	NumUnits          = 27
	NumVATRates       = 29
	NumDepartments    = 31
	NumPriceTypes     = 33
	NumUsers          = 37
	NumItems          = 42
	NumCounterparties = 58
	NumContracts      = 61
	NumWarehouses     = 71
	NumAccessKeys     = 80
	NumSalesInvoice   = 187
	NumGoodsReceipt   = 190
)

// Physical table names (lower case, as on PostgreSQL). Column meanings are
// in schema.sql.
const (
	TableOrganizations       = "_reference19"
	TableCurrencies          = "_reference24"
	TableUnits               = "_reference27"
	TableVATRates            = "_reference29"
	TableDepartments         = "_reference31"
	TablePriceTypes          = "_reference33"
	TableUsers               = "_reference37"
	TableItems               = "_reference42"
	TableCounterparties      = "_reference58"
	TableContracts           = "_reference61"
	TableWarehouses          = "_reference71"
	TableAccessKeys          = "_reference80"
	TableSalesInvoices       = "_document187"
	TableSalesInvoiceLines   = "_document187_vt3020"
	TableGoodsReceipts       = "_document190"
	TableGoodsReceiptLines   = "_document190_vt3120"
	TableGoodsMovements      = "_accumrg1234"
	TableGoodsBalanceTotals  = "_accumrgt1239"
	TableSalesMovements      = "_accumrg1260"
	TableSalesTurnoverTotals = "_accumrgtn1270"
	TablePrices              = "_inforg1300"
	TableRLSObjectKeys       = "_inforg1400"
	TableRLSKeyValues        = "_inforg1410"
	TableRLSUserValues       = "_inforg1420"
	// TableMeta is erplab's marker table: what Init created (see [Meta]).
	TableMeta = workload.MarkerTable
	// SeparatorColumn is the data-separator column added as the first
	// column of every table and index when Options.Separator is set.
	SeparatorColumn = "_fld1000"
)

// Composite-type tags (the _fldN_type byte) and other platform constants.
const (
	// TypeUndefined tags an empty composite value (rtref and rrref zero).
	TypeUndefined byte = 0x01
	// TypeRef tags a composite value holding a reference (rtref + rrref).
	TypeRef byte = 0x08
	// RecordKindReceipt and RecordKindExpense are _recordkind values.
	RecordKindReceipt = 0
	RecordKindExpense = 1
)

// Price type indexes (the generator's order in _reference33): purchase
// prices feed goods receipts, wholesale and retail prices feed sales.
const (
	PriceTypePurchase  = 0
	PriceTypeWholesale = 1
	PriceTypeRetail    = 2
)

// CurrentPeriod is the _period of the current-balance rows of balance
// totals tables (1C stores current totals at 3999-11-01).
var CurrentPeriod = time.Date(3999, 11, 1, 0, 0, 0, 0, time.UTC)

// HistoryStart and HistoryEnd bound the generated documents: 24 months,
// HistoryStart inclusive, HistoryEnd exclusive (the last document date is
// 2026-10-31). Fixed, not "now", so that data is deterministic.
var (
	HistoryStart = time.Date(2024, 11, 1, 0, 0, 0, 0, time.UTC)
	HistoryEnd   = time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
)

// EmptyDate is the platform's empty date value (0001-01-01 00:00:00).
var EmptyDate = time.Date(1, 1, 1, 0, 0, 0, 0, time.UTC)

// RTRef returns the 4-byte big-endian type code of table number n, as stored
// in _recordertref and _fldN_rtref (e.g. 187 -> 00 00 00 bb).
func RTRef(n int) [4]byte {
	var b [4]byte
	binary.BigEndian.PutUint32(b[:], uint32(n))
	return b
}

// Tables maps the roles of the ERP model to physical table names; see
// schema.sql for columns. Obtain it with [Names].
type Tables struct {
	Organizations, Currencies, Units, VATRates, Departments, PriceTypes string
	Users, Items, Counterparties, Contracts, Warehouses, AccessKeys     string

	SalesInvoices, SalesInvoiceLines string
	GoodsReceipts, GoodsReceiptLines string

	// GoodsMovements is the goods-in-warehouses balance register,
	// GoodsBalanceTotals its totals; SalesMovements the sales turnover
	// register, SalesTurnoverTotals its monthly turnovers.
	GoodsMovements, GoodsBalanceTotals  string
	SalesMovements, SalesTurnoverTotals string

	// Prices is the periodic prices register; RLS* are the record-level
	// security registers: object -> access key, access key -> value,
	// user -> value.
	Prices                                     string
	RLSObjectKeys, RLSKeyValues, RLSUserValues string
}

// Names returns the table mapping.
func Names() Tables {
	return Tables{
		Organizations: TableOrganizations, Currencies: TableCurrencies, Units: TableUnits,
		VATRates: TableVATRates, Departments: TableDepartments, PriceTypes: TablePriceTypes,
		Users: TableUsers, Items: TableItems, Counterparties: TableCounterparties,
		Contracts: TableContracts, Warehouses: TableWarehouses, AccessKeys: TableAccessKeys,
		SalesInvoices: TableSalesInvoices, SalesInvoiceLines: TableSalesInvoiceLines,
		GoodsReceipts: TableGoodsReceipts, GoodsReceiptLines: TableGoodsReceiptLines,
		GoodsMovements: TableGoodsMovements, GoodsBalanceTotals: TableGoodsBalanceTotals,
		SalesMovements: TableSalesMovements, SalesTurnoverTotals: TableSalesTurnoverTotals,
		Prices: TablePrices, RLSObjectKeys: TableRLSObjectKeys, RLSKeyValues: TableRLSKeyValues,
		RLSUserValues: TableRLSUserValues,
	}
}

// AllTables lists every data table of schema.sql in creation order (the
// marker table is not included).
func AllTables() []string {
	return []string{
		TableOrganizations, TableCurrencies, TableUnits, TableVATRates, TableDepartments,
		TablePriceTypes, TableUsers, TableItems, TableCounterparties, TableContracts,
		TableWarehouses, TableAccessKeys,
		TableSalesInvoices, TableSalesInvoiceLines, TableGoodsReceipts, TableGoodsReceiptLines,
		TableGoodsMovements, TableGoodsBalanceTotals, TableSalesMovements, TableSalesTurnoverTotals,
		TablePrices, TableRLSObjectKeys, TableRLSKeyValues, TableRLSUserValues,
	}
}

// indexMarker separates table DDL from index DDL in schema.sql.
const indexMarker = "-- erplab:indexes"

// IndexStmt is one CREATE INDEX statement of schema.sql.
type IndexStmt struct {
	Table string // table the index is on
	Name  string // index name
	SQL   string // the statement, without the trailing semicolon
}

// Schema is schema.sql rendered for one Separator setting.
type Schema struct {
	// Tables is the DDL creating every table (several statements, run as
	// one simple-protocol batch).
	Tables string
	// Indexes are the index statements, one per index, in file order.
	Indexes []IndexStmt
}

// RenderSchema renders schema.sql with or without the data separator.
// It fails only if the embedded file is malformed.
func RenderSchema(separator bool) (Schema, error) {
	sepCol, sep := "", ""
	if separator {
		sepCol = SeparatorColumn + " numeric(7,0) NOT NULL,"
		sep = SeparatorColumn + ", "
	}
	tmpl, err := template.New("schema.sql").Funcs(template.FuncMap{
		"sepcol": func() string { return sepCol },
		"sep":    func() string { return sep },
	}).Parse(schemaSQL)
	if err != nil {
		return Schema{}, fmt.Errorf("erp: parse schema.sql template: %w", err)
	}
	var sb strings.Builder
	if err := tmpl.Execute(&sb, nil); err != nil {
		return Schema{}, fmt.Errorf("erp: render schema.sql: %w", err)
	}
	tables, indexes, ok := strings.Cut(sb.String(), "\n"+indexMarker+"\n")
	if !ok {
		return Schema{}, fmt.Errorf("erp: schema.sql lacks the %q line", indexMarker)
	}
	s := Schema{Tables: tables}
	for _, line := range strings.Split(indexes, "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "--") {
			continue
		}
		// Each line is "CREATE [UNIQUE] INDEX name ON table (...);" — a
		// fixed layout we write ourselves, read by fields.
		f := strings.Fields(line)
		i := 2
		if len(f) > 2 && f[1] == "UNIQUE" {
			i = 3
		}
		if len(f) < i+3 || f[i+1] != "ON" {
			return Schema{}, fmt.Errorf("erp: schema.sql: index line not in the form CREATE [UNIQUE] INDEX name ON table (...): %q", line)
		}
		s.Indexes = append(s.Indexes, IndexStmt{
			Name:  f[i],
			Table: f[i+2],
			SQL:   strings.TrimSuffix(line, ";"),
		})
	}
	return s, nil
}
