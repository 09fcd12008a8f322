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

// TestExecuteAllocations: a built-in transaction (select-only prepared
// and simple, tpcb-like prepared), through the workload's Execute with a
// cancellable context as the engine gives it, allocates nothing once the
// client has prepared its statements (the engine's side:
// engine.TestOperationAllocations).
func TestExecuteAllocations(t *testing.T) {
	pgtest.SkipShort(t)
	dsn := srv.NewDatabase(t)
	pool := srv.Pool(t, dsn)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if _, err := tables.Init(ctx, pool, tables.Options{Scale: 1, Force: true}); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		script string
		mode   script.Mode
	}{{"select-only", script.Prepared}, {"select-only", script.Simple}, {"tpcb-like", script.Prepared}} {
		name := c.script + " " + c.mode.String()
		w, err := wpgbench.New(wpgbench.Options{Scripts: []*script.Script{builtin(t, c.script)}, Mode: c.mode, Clients: 1, NoVacuum: true})
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
		vu := &workload.VU{ID: 1, Rand: rand.New(rand.NewPCG(1, 1))}
		if err := w.Execute(ctx, conn.Conn(), vu, 0); err != nil { // prepares
			t.Fatal(err)
		}
		allocs := testing.AllocsPerRun(200, func() {
			if err := w.Execute(ctx, conn.Conn(), vu, 0); err != nil {
				t.Fatal(err)
			}
		})
		conn.Release()
		if allocs != 0 {
			t.Errorf("%s: %.2f allocations per transaction, want 0", name, allocs)
		}
	}
}
