package smoke_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"os"
	"strings"
	"testing"

	"github.com/erplab/erplab/internal/pgtest"
	"github.com/erplab/erplab/internal/workload"
	"github.com/erplab/erplab/internal/workload/smoke"
)

var srv *pgtest.Server

func TestMain(m *testing.M) { os.Exit(pgtest.Run(m, &srv)) }

func TestSetupAndEveryOperation(t *testing.T) {
	ctx := context.Background()
	pool := srv.Pool(t, srv.NewDatabase(t))
	w := smoke.New()
	if err := workload.Validate(w); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 2; i++ { // idempotent
		if err := w.Setup(ctx, pool, workload.SetupOptions{Scale: 0.05}); err != nil {
			t.Fatal(err)
		}
	}
	var items int
	pool.QueryRow(ctx, `SELECT count(*) FROM erplab_smoke.items`).Scan(&items)
	if items != 500 {
		t.Fatalf("items = %d, want 10000 x 0.05 = 500", items)
	}
	conn, err := pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	vu := &workload.VU{ID: 1, Rand: rand.New(rand.NewPCG(1, 1))}
	for op := range w.Operations() {
		if err := w.Execute(ctx, conn.Conn(), vu, op); err != nil {
			t.Fatalf("%s: %v", w.Operations()[op].Name, err)
		}
		if s := conn.Conn().PgConn().TxStatus(); s != 'I' {
			t.Fatalf("%s left the connection in transaction state %c", w.Operations()[op].Name, s)
		}
	}
	var orders int
	pool.QueryRow(ctx, `SELECT count(*) FROM erplab_smoke.orders`).Scan(&orders)
	if orders != 1 {
		t.Fatalf("orders = %d after one post_order", orders)
	}
	var temps int
	conn.QueryRow(ctx, `SELECT count(*) FROM pg_class WHERE relname = 'smoke_tt'`).Scan(&temps)
	if temps != 0 {
		t.Fatal("temp_churn left its temp table")
	}
}

func TestSetupRefusesForeignTables(t *testing.T) {
	ctx := context.Background()
	pool := srv.Pool(t, srv.NewDatabase(t))
	pool.Exec(ctx, `CREATE TABLE public.ledger (id int)`)
	err := smoke.New().Setup(ctx, pool, workload.SetupOptions{Scale: 0.01})
	if !errors.Is(err, workload.ErrForeignDatabase) {
		t.Fatalf("err = %v", err)
	}
	if err := smoke.New().Setup(ctx, pool, workload.SetupOptions{Scale: 0.01, Force: true}); err != nil {
		t.Fatalf("with Force: %v", err)
	}
}

// The guard counts every kind of object in every schema erplab did not
// create, not only tables: a database holding only a view, only a foreign
// table (a handler-less FDW is enough to make one), a sequence, a type or
// a function is refused too, and nothing is written into it.
func TestSetupRefusesEveryObjectKind(t *testing.T) {
	ctx := context.Background()
	for _, c := range []struct{ name, sql, want string }{
		{"view", `CREATE VIEW public.v AS SELECT 1 AS one`, "public.v (view)"},
		{"matview", `CREATE MATERIALIZED VIEW public.mv AS SELECT 1 AS one`, "public.mv (materialized view)"},
		{"foreign_table", `CREATE FOREIGN DATA WRAPPER dummy; CREATE SERVER nowhere FOREIGN DATA WRAPPER dummy;
			CREATE FOREIGN TABLE public.remote (id int) SERVER nowhere`, "public.remote (foreign table)"},
		{"partitioned", `CREATE TABLE public.p (id int) PARTITION BY RANGE (id)`, "public.p"},
		{"sequence", `CREATE SEQUENCE public.invoice_no`, "public.invoice_no (sequence)"},
		{"composite", `CREATE TYPE public.pair AS (a int, b int)`, "public.pair (type)"},
		{"enum", `CREATE TYPE public.mood AS ENUM ('ok')`, "public.mood (type)"},
		{"function", `CREATE FUNCTION public.f(int) RETURNS int LANGUAGE sql AS 'SELECT $1'`, "public.f(integer) (function)"},
		{"other_schema", `CREATE SCHEMA acct; CREATE VIEW acct.v AS SELECT 1 AS one`, "acct.v (view)"},
	} {
		t.Run(c.name, func(t *testing.T) {
			pool := srv.Pool(t, srv.NewDatabase(t))
			if _, err := pool.Exec(ctx, c.sql); err != nil {
				t.Fatal(err)
			}
			err := smoke.New().Setup(ctx, pool, workload.SetupOptions{Scale: 0.01})
			if !errors.Is(err, workload.ErrForeignDatabase) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("err = %v, want ErrForeignDatabase naming %s", err, c.want)
			}
			var n int
			if err := pool.QueryRow(ctx, `SELECT count(*) FROM pg_namespace WHERE nspname = 'erplab_smoke'`).Scan(&n); err != nil || n != 0 {
				t.Fatalf("schema erplab_smoke created (%d, %v) after the refusal", n, err)
			}
		})
	}
	// An empty database, and erplab's own schema once made, are fine.
	pool := srv.Pool(t, srv.NewDatabase(t))
	for range 2 {
		if err := smoke.New().Setup(ctx, pool, workload.SetupOptions{Scale: 0.01}); err != nil {
			t.Fatalf("Setup in a fresh database: %v", err)
		}
	}
}
