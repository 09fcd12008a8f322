package smoke_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"os"
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
