package pgbench_test

import (
	"context"
	"math/rand/v2"
	"testing"

	wpgbench "github.com/erplab/erplab/internal/pgbench"
	"github.com/erplab/erplab/internal/pgbench/script"
	"github.com/erplab/erplab/internal/pgbench/tables"
	"github.com/erplab/erplab/internal/pgtest"
	"github.com/erplab/erplab/internal/workload"
)

// TestExecuteAllocations: a select-only transaction in the prepared
// mode, through the workload's Execute with a cancellable context as the
// engine gives it, allocates nothing once the client has prepared its
// statement (the engine's side: engine.TestOperationAllocations).
func TestExecuteAllocations(t *testing.T) {
	pgtest.SkipShort(t)
	dsn := srv.NewDatabase(t)
	pool := srv.Pool(t, dsn)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if _, err := tables.Init(ctx, pool, tables.Options{Scale: 1, Force: true}); err != nil {
		t.Fatal(err)
	}
	w, err := wpgbench.New(wpgbench.Options{Scripts: []*script.Script{builtin(t, "select-only")}, Mode: script.Prepared, Clients: 1, NoVacuum: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Setup(ctx, pool, workload.SetupOptions{}); err != nil {
		t.Fatal(err)
	}
	conn, err := pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	vu := &workload.VU{ID: 1, Rand: rand.New(rand.NewPCG(1, 1))}
	if err := w.Execute(ctx, conn.Conn(), vu, 0); err != nil { // prepares
		t.Fatal(err)
	}
	allocs := testing.AllocsPerRun(200, func() {
		if err := w.Execute(ctx, conn.Conn(), vu, 0); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 0 {
		t.Errorf("%.2f allocations per select-only transaction, want 0", allocs)
	}
}
