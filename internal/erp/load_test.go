package erp

import (
	"context"
	"errors"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/erplab/erplab/internal/pgtest"
	"github.com/erplab/erplab/internal/workload"
)

// srv is the package's test cluster. Tests of this package (also ops
// tests) share it; there is one TestMain per package and it is here.
var srv *pgtest.Server

func TestMain(m *testing.M) { os.Exit(pgtest.Run(m, &srv)) }

// testScale is the scale the tests build (seconds to load).
const testScale = 0.01

func initDB(t *testing.T, opts Options) (*pgxpool.Pool, LoadStats) {
	t.Helper()
	pool := srv.Pool(t, srv.NewDatabase(t))
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	st, err := Init(ctx, pool, opts)
	if err != nil {
		t.Fatalf("Init(%+v): %v", opts, err)
	}
	return pool, st
}

func count(t *testing.T, pool *pgxpool.Pool, sql string) int64 {
	t.Helper()
	var n int64
	if err := pool.QueryRow(context.Background(), sql).Scan(&n); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	return n
}

func TestInitScaleSmall(t *testing.T) {
	pool, st := initDB(t, Options{Scale: testScale, Seed: 1, Progress: t.Logf})
	ctx := context.Background()
	t.Logf("loaded %d rows, %d COPY bytes, database +%d bytes in %v (copy %v, index %v, analyze %v)",
		st.Rows, st.CopyBytes, st.Bytes, st.Duration, st.CopyDuration, st.IndexDuration, st.AnalyzeDuration)

	// Row counts: exact where the plan fixes them, ranges where they
	// depend on the stock simulation.
	exact := map[string]int64{
		TableSalesInvoices: 1000, TableItems: 200 + 5, TableCounterparties: 100 + 3,
		TableContracts: 100 + 10, TableOrganizations: 2, TableWarehouses: 4, TableUsers: 20,
		TableCurrencies: 3, TableUnits: 5, TableVATRates: 4, TablePriceTypes: 3, TableAccessKeys: 4,
		TableRLSKeyValues: 8,
	}
	for table, want := range exact {
		if got := count(t, pool, "SELECT count(*) FROM "+table); got != want {
			t.Errorf("%s: %d rows, want %d", table, got, want)
		}
		if st.PerTable[table] != want {
			t.Errorf("LoadStats.PerTable[%s] = %d, want %d", table, st.PerTable[table], want)
		}
	}
	ranges := []struct {
		sql    string
		lo, hi int64
	}{
		// Receipts follow demand: about a quarter as many as invoices.
		{"SELECT count(*) FROM " + TableGoodsReceipts, 125, 500},
		{"SELECT count(*) FROM " + TableSalesInvoiceLines, 5000, 9000},
		{"SELECT avg(n)::int FROM (SELECT count(*) n FROM " + TableSalesInvoiceLines + " GROUP BY _document187_idrref) x", 6, 9},
		{"SELECT count(*) FROM " + TableGoodsMovements, 6000, 12000},
		{"SELECT count(*) FROM " + TableSalesMovements, 5000, 9000},
		{"SELECT count(*) FROM " + TableGoodsBalanceTotals, 1000, 100000},
		{"SELECT count(*) FROM " + TableSalesTurnoverTotals, 1000, 9000},
		{"SELECT count(*) FROM " + TablePrices, 200 * 3 * 2, 200 * 3 * 7},
		{"SELECT count(*) FROM " + TableRLSObjectKeys + " WHERE _fld1401_rtref = '\\x000000bb'::bytea", 1000, 1000},
		{"SELECT count(*) FROM (SELECT _idrref FROM " + TableSalesInvoices + " UNION ALL SELECT _idrref FROM " + TableGoodsReceipts +
			") d LEFT JOIN " + TableRLSObjectKeys + " k ON k._fld1401_rrref = d._idrref WHERE k._fld1401_rrref IS NULL", 0, 0},
		{"SELECT count(*) FROM " + TableRLSUserValues, 20, 60},
		// Unposted documents have no movements: a few, not many.
		{"SELECT count(*) FROM " + TableSalesInvoices + " WHERE NOT _posted", 1, 50},
		// Documents span the 24 months up to 2026-10-31.
		{"SELECT count(DISTINCT date_trunc('month', _date_time)) FROM " + TableSalesInvoices, 24, 24},
		{"SELECT count(*) FROM " + TableSalesInvoices + " WHERE _date_time < '2024-11-01' OR _date_time >= '2026-11-01'", 0, 0},
		{"SELECT count(*) FROM " + TableSalesInvoices + " WHERE _date_time >= '2026-10-25'", 1, 100},
		// Stock never goes negative.
		{"SELECT count(*) FROM " + TableGoodsBalanceTotals + " WHERE _fld1237 < 0", 0, 0},
	}
	for _, r := range ranges {
		if got := count(t, pool, r.sql); got < r.lo || got > r.hi {
			t.Errorf("%s = %d, want %d..%d", r.sql, got, r.lo, r.hi)
		}
	}
	// Skew: the most sold item has far more lines than the median item.
	top := count(t, pool, "SELECT max(n) FROM (SELECT count(*) n FROM "+TableSalesInvoiceLines+" GROUP BY _fld3022rref) x")
	med := count(t, pool, "SELECT percentile_disc(0.5) WITHIN GROUP (ORDER BY n) FROM (SELECT count(*) n FROM "+TableSalesInvoiceLines+" GROUP BY _fld3022rref) x")
	if top < 10*med {
		t.Errorf("item skew: top item %d lines, median %d: want top >= 10x median", top, med)
	}
	// Weekdays are heavier than Sundays.
	wd := count(t, pool, "SELECT count(*) FROM "+TableSalesInvoices+" WHERE extract(isodow FROM _date_time) = 3")
	sun := count(t, pool, "SELECT count(*) FROM "+TableSalesInvoices+" WHERE extract(isodow FROM _date_time) = 7")
	if wd < 3*sun {
		t.Errorf("Wednesdays %d documents, Sundays %d: want Wednesdays >= 3x Sundays", wd, sun)
	}
	// Header amounts equal the sum of their lines.
	if n := count(t, pool, `SELECT count(*) FROM `+TableSalesInvoices+` d
		WHERE d._fld3009 <> (SELECT coalesce(sum(_fld3026), 0) FROM `+TableSalesInvoiceLines+` l WHERE l._document187_idrref = d._idrref)`); n != 0 {
		t.Errorf("%d sales invoices whose amount is not the sum of their lines", n)
	}
	// Sales lines are priced at the slice-last price of the document's
	// price type.
	if n := count(t, pool, `SELECT count(*) FROM `+TableSalesInvoiceLines+` l JOIN `+TableSalesInvoices+` d ON d._idrref = l._document187_idrref
		WHERE l._fld3025 <> (SELECT p._fld1303 FROM `+TablePrices+` p
		  WHERE p._fld1301rref = d._fld3006rref AND p._fld1302rref = l._fld3022rref AND p._period <= d._date_time
		  ORDER BY p._period DESC LIMIT 1)`); n != 0 {
		t.Errorf("%d sales lines not at the slice-last price", n)
	}

	rep, err := Check(ctx, pool)
	if err != nil {
		t.Fatalf("Check: %v", err)
	}
	t.Logf("check:\n%s", rep)
	if !rep.OK() || rep.NegativeBalances != 0 {
		t.Errorf("Check: %d mismatches, %d negative balances, want 0 and 0", rep.Mismatches, rep.NegativeBalances)
	}
	for _, c := range rep.Registers {
		if c.Compared == 0 {
			t.Errorf("Check %s compared nothing", c.Name)
		}
	}

	// A broken total is caught.
	if _, err := pool.Exec(ctx, "UPDATE "+TableGoodsBalanceTotals+" SET _fld1237 = _fld1237 + 1 WHERE ctid = (SELECT min(ctid) FROM "+TableGoodsBalanceTotals+" WHERE _period = '3999-11-01')"); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, "DELETE FROM "+TableSalesTurnoverTotals+" WHERE ctid = (SELECT min(ctid) FROM "+TableSalesTurnoverTotals+")"); err != nil {
		t.Fatal(err)
	}
	rep, err = Check(ctx, pool)
	if err != nil {
		t.Fatalf("Check: %v", err)
	}
	if rep.Registers[1].Mismatches != 1 || rep.Registers[2].Mismatches != 1 || rep.Registers[0].Mismatches != 0 {
		t.Errorf("after breaking one current total and one turnover total: %s", rep)
	}

	// Init again with the same parameters reuses the data set.
	st2, err := Init(ctx, pool, Options{Scale: testScale, Seed: 1})
	if err != nil || !st2.Reused {
		t.Errorf("second Init: reused %v, err %v; want reused", st2.Reused, err)
	}
	// With another seed it refuses.
	if _, err := Init(ctx, pool, Options{Scale: testScale, Seed: 2}); !errors.Is(err, ErrInstalledDifferent) {
		t.Errorf("Init with another seed: %v, want ErrInstalledDifferent", err)
	}
	meta, ok, err := Installed(ctx, pool)
	if err != nil || !ok || !meta.Ready || meta.Scale != testScale || meta.Seed != 1 || len(meta.Tables) != len(AllTables()) {
		t.Errorf("Installed = %+v, %v, %v", meta, ok, err)
	}
}

// tableMD5 is the md5 of a table's rows in a fixed order.
func tableMD5(t *testing.T, pool *pgxpool.Pool, table, order string) string {
	t.Helper()
	var s string
	q := "SELECT md5(string_agg(x::text, '|' ORDER BY " + order + ")) FROM " + table + " x"
	if err := pool.QueryRow(context.Background(), q).Scan(&s); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	return s
}

func TestInitDeterministic(t *testing.T) {
	a, _ := initDB(t, Options{Scale: testScale, Seed: 7, Parallel: 3})
	b, _ := initDB(t, Options{Scale: testScale, Seed: 7, Parallel: 1})
	c, _ := initDB(t, Options{Scale: testScale, Seed: 8})
	for _, tc := range []struct{ table, order string }{
		{TableSalesInvoices, "_idrref"},
		{TableSalesInvoiceLines, "_document187_idrref, _keyfield"},
		{TableGoodsMovements, "_recordertref, _recorderrref, _lineno"},
		{TableGoodsBalanceTotals, "_period, _fld1235rref, _fld1236rref"},
		{TableSalesTurnoverTotals, "_period, _fld1261rref, _fld1262rref, _fld1263rref"},
		{TableItems, "_idrref"},
		{TablePrices, "_fld1301rref, _fld1302rref, _period"},
	} {
		ha, hb, hc := tableMD5(t, a, tc.table, tc.order), tableMD5(t, b, tc.table, tc.order), tableMD5(t, c, tc.table, tc.order)
		if ha != hb {
			t.Errorf("%s: same seed, different content (%s vs %s)", tc.table, ha, hb)
		}
		if ha == hc {
			t.Errorf("%s: different seeds, same content %s", tc.table, ha)
		}
	}
}

func TestForeignTablesAndDrop(t *testing.T) {
	ctx := context.Background()
	pool := srv.Pool(t, srv.NewDatabase(t))
	if _, err := pool.Exec(ctx, "CREATE TABLE customer_data (id int PRIMARY KEY, note text); INSERT INTO customer_data VALUES (1, 'keep me')"); err != nil {
		t.Fatal(err)
	}
	foreign, err := workload.ForeignTables(ctx, pool)
	if err != nil || len(foreign) != 1 || foreign[0] != "public.customer_data" {
		t.Fatalf("ForeignTables = %v, %v; want [public.customer_data]", foreign, err)
	}
	_, err = Init(ctx, pool, Options{Scale: testScale, Seed: 1})
	if !errors.Is(err, workload.ErrForeignDatabase) || !strings.Contains(err.Error(), "public.customer_data") {
		t.Fatalf("Init on a foreign database: %v; want ErrForeignDatabase naming public.customer_data", err)
	}
	if _, ok, err := Installed(ctx, pool); ok || err != nil {
		t.Fatalf("after a refused Init: Installed ok=%v err=%v; want nothing installed", ok, err)
	}
	if _, err := Init(ctx, pool, Options{Scale: testScale, Seed: 1, Force: true}); err != nil {
		t.Fatalf("Init with Force: %v", err)
	}
	// Our own tables are not foreign.
	foreign, err = workload.ForeignTables(ctx, pool)
	if err != nil || len(foreign) != 1 {
		t.Errorf("ForeignTables after Init = %v, %v; want only public.customer_data", foreign, err)
	}
	if err := Drop(ctx, pool); err != nil {
		t.Fatalf("Drop: %v", err)
	}
	var left []string
	rows, err := pool.Query(ctx, "SELECT relname FROM pg_class WHERE relkind = 'r' AND relnamespace = 'public'::regnamespace ORDER BY 1")
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			t.Fatal(err)
		}
		left = append(left, s)
	}
	if len(left) != 1 || left[0] != "customer_data" {
		t.Errorf("tables after Drop: %v, want [customer_data]", left)
	}
	if n := count(t, pool, "SELECT count(*) FROM customer_data WHERE note = 'keep me'"); n != 1 {
		t.Errorf("customer_data lost its row")
	}
	// Drop without a marker does nothing.
	if err := Drop(ctx, pool); err != nil {
		t.Errorf("second Drop: %v", err)
	}
}

func TestInitSeparator(t *testing.T) {
	pool, _ := initDB(t, Options{Scale: testScale, Seed: 3, Separator: true})
	ctx := context.Background()
	// Every index of every ERP table starts with the separator column.
	rows, err := pool.Query(ctx, `
SELECT i.indexrelid::regclass::text, a.attname
FROM pg_index i
JOIN pg_class t ON t.oid = i.indrelid
JOIN pg_attribute a ON a.attrelid = t.oid AND a.attnum = i.indkey[0]
WHERE t.relname = ANY ($1)`, AllTables())
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for rows.Next() {
		var idx, col string
		if err := rows.Scan(&idx, &col); err != nil {
			t.Fatal(err)
		}
		n++
		if col != SeparatorColumn {
			t.Errorf("index %s starts with %s, want %s", idx, col, SeparatorColumn)
		}
	}
	s, err := RenderSchema(true)
	if err != nil {
		t.Fatal(err)
	}
	if n != len(s.Indexes) || n < 60 {
		t.Errorf("%d indexes found, schema has %d", n, len(s.Indexes))
	}
	if c := count(t, pool, "SELECT count(*) FROM "+TableSalesInvoices+" WHERE "+SeparatorColumn+" <> 0"); c != 0 {
		t.Errorf("%d rows with a non-zero separator", c)
	}
	rep, err := Check(ctx, pool)
	if err != nil || !rep.OK() {
		t.Errorf("Check with separator: %v\n%s", err, rep)
	}
}

// TestLoadRate loads scale 0.05 (or $ERPLAB_LOAD_SCALE) and logs the load
// rate: rows/s and MB/s of COPY data and of database growth, per phase. It
// asserts only the result (Check), never a timing.
func TestLoadRate(t *testing.T) {
	scale := 0.05
	if s := os.Getenv("ERPLAB_LOAD_SCALE"); s != "" {
		v, err := strconv.ParseFloat(s, 64)
		if err != nil {
			t.Fatalf("ERPLAB_LOAD_SCALE=%q: %v", s, err)
		}
		scale = v
	}
	pool, st := initDB(t, Options{Scale: scale, Seed: 1, Progress: t.Logf})
	t.Logf("scale %g: %d rows, COPY %.1f MB, database +%.1f MB, total %.2f s",
		scale, st.Rows, mb(st.CopyBytes), mb(st.Bytes), st.Duration.Seconds())
	copied := st.Rows - st.PerTable[TableSalesTurnoverTotals] // the totals come from INSERT ... SELECT
	t.Logf("copy phase  %6.2f s: %.0f rows/s, %.1f MB/s of COPY data", st.CopyDuration.Seconds(),
		float64(copied)/st.CopyDuration.Seconds(), mb(st.CopyBytes)/st.CopyDuration.Seconds())
	t.Logf("index phase %6.2f s, vacuum analyze %6.2f s", st.IndexDuration.Seconds(), st.AnalyzeDuration.Seconds())
	t.Logf("overall: %.0f rows/s, %.1f MB/s of database growth", float64(st.Rows)/st.Duration.Seconds(), mb(st.Bytes)/st.Duration.Seconds())
	rows, err := pool.Query(context.Background(), `SELECT c.relname, pg_table_size(c.oid), pg_indexes_size(c.oid)
		FROM pg_class c WHERE c.relname = ANY ($1) ORDER BY 2 DESC`, AllTables())
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var name string
		var tb, ib int64
		if err := rows.Scan(&name, &tb, &ib); err != nil {
			t.Fatal(err)
		}
		t.Logf("  %-22s table %7.1f MB  indexes %7.1f MB", name, mb(tb), mb(ib))
	}
	t0 := time.Now()
	rep, err := Check(context.Background(), pool)
	if err != nil || !rep.OK() {
		t.Errorf("Check: %v\n%s", err, rep)
	}
	t.Logf("Check in %.1f s:\n%s", time.Since(t0).Seconds(), rep)
}

// An Init that fails (here: cancelled during the load) leaves nothing
// behind, and a data set left "loading" (an Init killed before it could
// clean up) is rebuilt by the next Init.
func TestInitCleansUpAfterFailure(t *testing.T) {
	pool := srv.Pool(t, srv.NewDatabase(t))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	progress := func(format string, args ...any) {
		if strings.HasPrefix(format, "erp: scale") { // tables exist, loading starts
			cancel()
		}
	}
	if _, err := Init(ctx, pool, Options{Scale: testScale, Seed: 1, Progress: progress}); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled Init: %v, want context.Canceled", err)
	}
	bg := context.Background()
	if n := count(t, pool, "SELECT count(*) FROM pg_class WHERE relkind = 'r' AND relnamespace = 'public'::regnamespace"); n != 0 {
		t.Errorf("%d tables left after a failed Init, want 0", n)
	}

	if _, err := Init(bg, pool, Options{Scale: testScale, Seed: 1}); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(bg, "UPDATE "+TableMeta+" SET value = 'loading' WHERE key = 'state'; DELETE FROM "+TableSalesInvoices); err != nil {
		t.Fatal(err)
	}
	st, err := Init(bg, pool, Options{Scale: testScale, Seed: 1})
	if err != nil || st.Reused {
		t.Fatalf("Init over an unfinished data set: reused %v, err %v; want a rebuild", st.Reused, err)
	}
	if n := count(t, pool, "SELECT count(*) FROM "+TableSalesInvoices); n != 1000 {
		t.Errorf("%d sales invoices after the rebuild, want 1000", n)
	}
}
