package engine_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/erplab/erplab/internal/engine"
	"github.com/erplab/erplab/internal/workload"
)

// stopWorkload runs SELECT 1 as its one operation, except that a VU's
// n-th execution, n = stopAt(VU id) (0 = never), runs SELECT 1/0 and
// fails with that error wrapped in workload.ErrStopVU. It counts the
// executions of every VU.
type stopWorkload struct {
	*sqlWorkload
	stopAt func(vu int) int
	mu     sync.Mutex
	ran    map[int]int // VU id -> executions
}

func newStopWorkload(stopAt func(vu int) int) *stopWorkload {
	return &stopWorkload{sqlWorkload: oneOp("SELECT 1", time.Second), stopAt: stopAt, ran: map[int]int{}}
}

func (w *stopWorkload) Setup(context.Context, *pgxpool.Pool, workload.SetupOptions) error {
	return nil
}

func (w *stopWorkload) Execute(ctx context.Context, conn *pgx.Conn, vu *workload.VU, _ int) error {
	w.mu.Lock()
	w.ran[vu.ID]++
	n := w.ran[vu.ID]
	w.mu.Unlock()
	if n != w.stopAt(vu.ID) {
		_, err := conn.Exec(ctx, "SELECT 1")
		return err
	}
	_, err := conn.Exec(ctx, "SELECT 1/0")
	if err == nil {
		return fmt.Errorf("SELECT 1/0 did not fail")
	}
	return fmt.Errorf("%w: %w", workload.ErrStopVU, err)
}

func (w *stopWorkload) runs() map[int]int {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := make(map[int]int, len(w.ran))
	for k, v := range w.ran {
		out[k] = v
	}
	return out
}

// A VU whose operation fails with workload.ErrStopVU records that failure
// (SQLSTATE of the wrapped error), stops for the rest of the run and is
// not replaced, while the other VUs go on; the run is completed and
// reports the aborted VU.
func TestErrStopVUStopsOnlyThatVU(t *testing.T) {
	// Closed model, no TxPerVU: VU 1 aborts on its 3rd operation; the
	// run lasts its whole 1 s.
	w := newStopWorkload(func(vu int) int { return map[int]int{1: 3}[vu] })
	out, res, rec, err := run(t, w, engine.Config{
		Stages:      []engine.Stage{{Duration: 0, Target: 2}, {Duration: time.Second, Target: 2}},
		Think:       engine.ThinkTime{Kind: "fixed", Min: 5 * time.Millisecond},
		Connections: 2,
	}, 2)
	if err != nil {
		t.Fatal(err)
	}
	ran := w.runs()
	if out.Status != "completed" || out.AbortedVUs != 1 || out.Unfinished != 0 || out.Elapsed < time.Second {
		t.Fatalf("closed: %q after %s, %d aborted, %d unfinished; want completed after the whole 1 s, 1 aborted", out.Status, out.Elapsed, out.AbortedVUs, out.Unfinished)
	}
	if len(ran) != 2 || ran[1] != 3 || ran[2] < 10 {
		t.Fatalf("closed: executions by VU %v; want VU 1 stopped at 3, VU 2 going on, no VU 3", ran)
	}
	r := res[0]
	if r.Errors != 1 || r.ErrorsBySQLState["22012"] != 1 || r.Count != int64(ran[1]+ran[2]) || r.Zones.Frustrated < 1 {
		t.Fatalf("closed: count %d errors %v zones %+v; want the abort recorded as a 22012 failure", r.Count, r.ErrorsBySQLState, r.Zones)
	}
	if tot := rec.Totals(out.Elapsed); tot.AbortedVUs != 1 || tot.Errors != 1 {
		t.Fatalf("closed: totals %+v", tot)
	}

	// With TxPerVU: VU 2 of 3 aborts on its 5th operation, the others run
	// their 20, and the run ends as soon as all have stopped, far inside
	// the 1 min bound; the aborted VU is not unfinished.
	w = newStopWorkload(func(vu int) int { return map[int]int{2: 5}[vu] })
	out, res, _, err = run(t, w, engine.Config{
		Stages:      []engine.Stage{{Duration: 0, Target: 3}, {Duration: time.Minute, Target: 3}},
		TxPerVU:     20,
		Connections: 3,
	}, 3)
	if err != nil {
		t.Fatal(err)
	}
	ran = w.runs()
	if out.Status != "completed" || out.AbortedVUs != 1 || out.Unfinished != 0 || out.Elapsed >= time.Minute {
		t.Fatalf("TxPerVU: %q after %s, %d aborted, %d unfinished", out.Status, out.Elapsed, out.AbortedVUs, out.Unfinished)
	}
	if len(ran) != 3 || ran[1] != 20 || ran[2] != 5 || ran[3] != 20 || res[0].Count != 45 || res[0].Errors != 1 {
		t.Fatalf("TxPerVU: executions by VU %v, count %d, errors %d; want 20, 5, 20 = 45 with 1 error", ran, res[0].Count, res[0].Errors)
	}
}

// When every VU has aborted the run ends early, also in the open model
// without TxPerVU, and every arrival up to then is still accounted for.
func TestAllVUsAbortedEndsTheRun(t *testing.T) {
	w := newStopWorkload(func(int) int { return 3 })
	rate, _ := engine.ConstantRate(200)
	out, res, rec, err := run(t, w, engine.Config{
		Stages:      []engine.Stage{{Duration: 0, Target: 2}, {Duration: time.Minute, Target: 2}},
		Rate:        rate,
		Connections: 2,
		Seed:        5,
	}, 2)
	if err != nil {
		t.Fatal(err)
	}
	if out.Status != "completed" || out.AbortedVUs != 2 || out.Elapsed >= time.Minute {
		t.Fatalf("%q after %s with %d VUs aborted; want completed early with 2", out.Status, out.Elapsed, out.AbortedVUs)
	}
	if ran := w.runs(); len(ran) != 2 || ran[1] != 3 || ran[2] != 3 {
		t.Fatalf("executions by VU %v, want 3 each and no replacement", ran)
	}
	if r := res[0]; r.Count != 6 || r.Errors != 2 {
		t.Fatalf("count %d errors %d, want 6 and 2", r.Count, r.Errors)
	}
	checkArrivals(t, out, res)
	if tot := rec.Totals(out.Elapsed); tot.AbortedVUs != 2 {
		t.Fatalf("totals %+v", tot)
	}
}
