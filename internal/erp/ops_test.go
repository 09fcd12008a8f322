package erp

import (
	"context"
	"errors"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/erplab/erplab/internal/workload"
)

// opsScale is the data scale of the key-operation tests (builds in well
// under a second).
const opsScale = 0.01

// opsSetup makes a fresh database and sets the workload up in it through
// Workload.Setup (which runs Init).
func opsSetup(t *testing.T, w *Workload, scale float64) *pgxpool.Pool {
	t.Helper()
	pool := srv.Pool(t, srv.NewDatabase(t))
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if err := w.Setup(ctx, pool, workload.SetupOptions{Scale: scale, Seed: 7}); err != nil {
		t.Fatalf("Setup: %v", err)
	}
	return pool
}

func opsVU(id int, role string) *workload.VU {
	return &workload.VU{ID: id, Role: role, Rand: rand.New(rand.NewPCG(11, uint64(id)))}
}

// opsCheck runs Check and fails the test on mismatches or negative stock.
func opsCheck(t *testing.T, pool *pgxpool.Pool) {
	t.Helper()
	rep, err := Check(context.Background(), pool)
	if err != nil {
		t.Fatalf("Check: %v", err)
	}
	if !rep.OK() || rep.NegativeBalances != 0 {
		t.Errorf("Check after the operations: %d mismatches, %d negative balances, want 0 and 0:\n%s",
			rep.Mismatches, rep.NegativeBalances, rep)
	}
}

func TestQueryFilesLoad(t *testing.T) {
	plain, err := loadQueries(false)
	if err != nil {
		t.Fatal(err)
	}
	sep, err := loadQueries(true)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(plain.goodsReg.EnsureTotals, SeparatorColumn) {
		t.Errorf("without the separator, ensure_totals mentions %s:\n%s", SeparatorColumn, plain.goodsReg.EnsureTotals)
	}
	for _, s := range []string{sep.goodsReg.EnsureTotals, sep.postSales.InsertLines, sep.list.PageSalesInvoices} {
		if !strings.Contains(s, SeparatorColumn) {
			t.Errorf("with the separator, a statement lacks %s:\n%s", SeparatorColumn, s)
		}
	}
	if strings.Contains(plain.or.Report, "{tt}") || strings.Contains(plain.or.ReportAny, "{tt}") {
		t.Errorf("or_subquery_report reads a temp table; it is one statement on the registers and the item catalog:\n%s", plain.or.Report)
	}
	if !strings.Contains(sep.or.Report, "b."+SeparatorColumn+" = 0") || strings.Contains(plain.or.Report, SeparatorColumn) {
		t.Errorf("or_subquery_report: the separator condition inside the subqueries is missing or always there:\n%s", sep.or.Report)
	}
	if _, err := splitNamed("-- name: a\nSELECT 1\n-- name: a\nSELECT 2"); err == nil {
		t.Error("splitNamed accepted a duplicate name")
	}
	if got := New(WorkloadOptions{TempStyle: "mssql"}).Setup(context.Background(), nil, workload.SetupOptions{}); got == nil ||
		!strings.Contains(got.Error(), "mssql") {
		t.Errorf("unknown temp style: Setup error %v, want one naming it", got)
	}
	if err := workload.Validate(New(WorkloadOptions{})); err != nil {
		t.Errorf("Validate: %v", err)
	}
}

// TestOperationsOnce runs every key operation once per temp-table style on
// one connection and checks what each returned; then totals must still
// equal movements.
func TestOperationsOnce(t *testing.T) {
	setupW := New(WorkloadOptions{})
	pool := opsSetup(t, setupW, opsScale)
	ctx := context.Background()
	for _, style := range []string{TempStyle1C, TempStyleLsFusion} {
		t.Run(style, func(t *testing.T) {
			w := New(WorkloadOptions{TempStyle: style})
			pc, err := pool.Acquire(ctx)
			if err != nil {
				t.Fatal(err)
			}
			defer pc.Release()
			conn := pc.Conn()
			vu := opsVU(1, "sales_manager")
			for op := 0; op < numOps; op++ {
				name := w.Operations()[op].Name
				start := time.Now()
				res, err := w.execute(ctx, conn, vu, op)
				took := time.Since(start)
				if err != nil {
					t.Errorf("%s: %v", name, err)
					continue
				}
				t.Logf("%-22s %8.1f ms  %+v", name, float64(took.Microseconds())/1000, res)
				if st := conn.PgConn().TxStatus(); st != 'I' {
					t.Errorf("%s left the connection in transaction status %q", name, st)
				}
				switch op {
				case OpDocumentList:
					if res.Rows < 1 || res.Rows > w.opts.ListPageSize {
						t.Errorf("%s: %d rows, want 1..%d", name, res.Rows, w.opts.ListPageSize)
					}
				case OpDocumentForm:
					if res.Rows != 1 {
						t.Errorf("%s: header returned %d rows, want 1", name, res.Rows)
					}
				case OpPostSalesInvoice, OpPostGoodsReceipt:
					if res.Docs != 1 || (res.Rows == 0 && !res.Refused) {
						t.Errorf("%s: %+v, want one document with lines posted", name, res)
					}
				case OpStockBalanceReport, OpSalesTurnoverReport, OpORSubqueryReport, OpItemPicker:
					if res.Rows == 0 {
						t.Errorf("%s: no rows", name)
					}
				case OpTempTableStorm:
					if res.Docs != stormRounds {
						t.Errorf("%s: %d rounds, want %d", name, res.Docs, stormRounds)
					}
				case OpRepostDay:
					if res.Docs == 0 || res.Rows == 0 {
						t.Errorf("%s: %+v, want documents with lines re-posted", name, res)
					}
				case OpRecomputeMonth:
					// Totals were kept consistent by the postings above:
					// recomputation finds values and changes nothing.
					if res.Rows == 0 || res.Docs != 0 {
						t.Errorf("%s: %d fresh values, %d totals rows changed; want > 0 and 0", name, res.Rows, res.Docs)
					}
				}
			}

			// A first page from the newest document is a full page.
			s := vu.State.(*vuSession)
			res, err := w.documentList(ctx, conn, vu, s, &listCursor{ok: true, kind: salesInvoice, at: HistoryEnd, ref: maxRef})
			if err != nil || res.Rows != w.opts.ListPageSize {
				t.Errorf("first list page: %d rows, err %v; want %d", res.Rows, err, w.opts.ListPageSize)
			}
			// Forms of a few documents: always the header, and lines.
			lines := 0
			for i := 0; i < 5; i++ {
				res, err := w.execute(ctx, conn, vu, OpDocumentForm)
				if err != nil || res.Rows != 1 {
					t.Errorf("form: %+v, %v", res, err)
				}
				lines += res.Lines
			}
			if lines == 0 {
				t.Error("five document forms showed no lines")
			}

			// Temporary tables left on the connection: none in the 1C
			// style, exactly the cached ones in the lsFusion style.
			var left int
			if err := conn.QueryRow(ctx, `SELECT count(*) FROM pg_class WHERE relnamespace = pg_my_temp_schema() AND relkind = 'r'`).Scan(&left); err != nil {
				t.Fatal(err)
			}
			cached := w.cachedTempTables(conn)
			switch style {
			case TempStyle1C:
				if left != 0 || cached != 0 {
					t.Errorf("1C style: %d temp tables left on the connection, %d cached; want 0, 0", left, cached)
				}
			case TempStyleLsFusion:
				if cached == 0 || left != cached {
					t.Errorf("lsFusion style: %d temp tables on the connection, %d cached; want the same, > 0", left, cached)
				}
				var empty bool
				if err := conn.QueryRow(ctx, `SELECT NOT EXISTS (SELECT 1 FROM t_0)`).Scan(&empty); err != nil || !empty {
					t.Errorf("cached t_0 should be empty (truncated): empty=%v err=%v", empty, err)
				}
				// The cached table the next storm takes, dropped behind the
				// cache's back: that storm fails (42P01), returning the table
				// fails (TRUNCATE), so it is dropped from the cache, and the
				// storm after works with a new table.
				w.tmu.Lock()
				free := w.temps[conn].free[shapeGoods]
				lost := free[len(free)-1]
				w.tmu.Unlock()
				if _, err := conn.Exec(ctx, `DROP TABLE `+lost); err != nil {
					t.Fatal(err)
				}
				_, err := w.execute(ctx, conn, vu, OpTempTableStorm)
				var pgErr *pgconn.PgError
				if !errors.As(err, &pgErr) || pgErr.Code != "42P01" {
					t.Errorf("storm on a lost cached table %s: %v, want SQLSTATE 42P01", lost, err)
				}
				if _, err := w.execute(ctx, conn, vu, OpTempTableStorm); err != nil {
					t.Errorf("storm after the cache forgot the lost table: %v", err)
				}
				w.tmu.Lock()
				for _, name := range w.temps[conn].free[shapeGoods] {
					if name == lost {
						t.Errorf("the lost table %s is still in the cache", lost)
					}
				}
				w.tmu.Unlock()
			}
		})
	}
	opsCheck(t, pool)
}

// TestPostingsConcurrentKeepTotals runs the posting operations (3, 4, 10,
// 11) from several VUs at once; no operation may fail and totals must equal
// movements afterwards.
func TestPostingsConcurrentKeepTotals(t *testing.T) {
	w := New(WorkloadOptions{})
	pool := opsSetup(t, w, opsScale)
	ctx := context.Background()
	const vus, perVU = 4, 30
	var (
		wg     sync.WaitGroup
		mu     sync.Mutex
		errs   []error
		counts [numOps]int
	)
	for i := 1; i <= vus; i++ {
		wg.Add(1)
		go func(id int) {
			defer wg.Done()
			pc, err := pool.Acquire(ctx)
			if err != nil {
				mu.Lock()
				errs = append(errs, err)
				mu.Unlock()
				return
			}
			defer pc.Release()
			vu := opsVU(id, "warehouse_keeper")
			for k := 0; k < perVU; k++ {
				op := []int{OpPostSalesInvoice, OpPostGoodsReceipt, OpRepostDay, OpRecomputeMonth}[pickWeighted(vu.Rand, 10, 10, 2, 1)]
				_, err := w.execute(ctx, pc.Conn(), vu, op)
				mu.Lock()
				counts[op]++
				if err != nil {
					errs = append(errs, err)
				}
				mu.Unlock()
			}
		}(i)
	}
	wg.Wait()
	t.Logf("ran sales %d, receipts %d, re-post day %d, recompute month %d; refused %v",
		counts[OpPostSalesInvoice], counts[OpPostGoodsReceipt], counts[OpRepostDay], counts[OpRecomputeMonth], w.Refused())
	for _, err := range errs {
		var pgErr *pgconn.PgError
		code := ""
		if errors.As(err, &pgErr) {
			code = pgErr.Code
		}
		t.Errorf("operation failed (SQLSTATE %q): %v", code, err)
	}
	opsCheck(t, pool)
	// Header amounts still equal the sums of their (rewritten) lines.
	var bad int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM _document187 d
		WHERE d._fld3009 <> (SELECT coalesce(sum(_fld3026), 0) FROM _document187_vt3020 l WHERE l._document187_idrref = d._idrref)`).Scan(&bad); err != nil {
		t.Fatal(err)
	}
	if bad != 0 {
		t.Errorf("%d sales invoices whose amount is not the sum of their lines", bad)
	}
	var bumped int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM _document187 WHERE _version > 3`).Scan(&bumped); err != nil {
		t.Fatal(err)
	}
	if bumped == 0 {
		t.Error("no sales invoice has a bumped _version after the postings")
	}
}

// TestOperationsSeparator runs every operation once on a data set with the
// data separator column.
func TestOperationsSeparator(t *testing.T) {
	w := New(WorkloadOptions{Separator: true, TempStyle: TempStyleLsFusion})
	pool := opsSetup(t, w, opsScale)
	ctx := context.Background()
	pc, err := pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer pc.Release()
	vu := opsVU(3, "accountant")
	for op := 0; op < numOps; op++ {
		if _, err := w.execute(ctx, pc.Conn(), vu, op); err != nil {
			t.Errorf("%s: %v", w.Operations()[op].Name, err)
		}
	}
	if s := vu.State.(*vuSession); !s.snap.sep {
		t.Error("the session did not detect the separator")
	}
	opsCheck(t, pool)
}

// The whole-history turnover report reads every month the short one does
// and more.
func TestTurnoverWholeHistory(t *testing.T) {
	ctx := context.Background()
	dsn := srv.NewDatabase(t)
	pool := srv.Pool(t, dsn)
	if _, err := Init(ctx, pool, Options{Scale: 0.01, Seed: 3}); err != nil {
		t.Fatal(err)
	}
	conn, err := pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	rows := func(whole bool) int {
		w := New(WorkloadOptions{TurnoverWholeHistory: whole})
		vu := &workload.VU{ID: 1, Rand: rand.New(rand.NewPCG(3, 1))}
		res, err := w.execute(ctx, conn.Conn(), vu, OpSalesTurnoverReport)
		if err != nil {
			t.Fatal(err)
		}
		return res.Rows
	}
	short, whole := rows(false), rows(true)
	if whole < short || whole == 0 {
		t.Fatalf("whole history %d rows, recent months %d", whole, short)
	}
}

// TestLikePrefix checks key operation 7's LIKE patterns on the server: a
// prefix holding the wildcards and the escape character matches itself
// and longer strings only.
func TestLikePrefix(t *testing.T) {
	pool := srv.Pool(t, srv.DSN(t, "postgres"))
	const prefix = `Bolt 50%_x\y`
	pattern := likePrefix(prefix) + "%"
	for s, want := range map[string]bool{
		prefix:             true,
		prefix + " Summit": true,
		`Bolt 50%ax\y`:     false, // _ is literal
		`Bolt 50abx\y`:     false, // % is literal
		`Bolt 50%_xy`:      false, // \ is literal
	} {
		var got bool
		if err := pool.QueryRow(context.Background(), "SELECT $1::text LIKE $2", s, pattern).Scan(&got); err != nil {
			t.Fatal(err)
		}
		if got != want {
			t.Errorf("%q LIKE %q = %v, want %v", s, pattern, got, want)
		}
	}
}
