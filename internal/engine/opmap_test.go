package engine_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/erplab/erplab/internal/engine"
	"github.com/erplab/erplab/internal/opmap"
	"github.com/erplab/erplab/internal/pgtest"
	"github.com/erplab/erplab/internal/workload"
)

// mapCheck is a workload whose operations ask the server for their backend
// PID and check that the engine's map names the running operation on it.
type mapCheck struct {
	sqlWorkload
	m          *opmap.Map
	seen, miss atomic.Int64
	// calls and both make the first two executions wait for each other:
	// each holds a pool connection, so both of the pool's connections
	// serve operations (left to chance, one connection did all 34
	// executions of a loaded machine's run).
	calls atomic.Int64
	both  chan struct{}
}

func (w *mapCheck) Execute(ctx context.Context, conn *pgx.Conn, _ *workload.VU, op int) error {
	if k := w.calls.Add(1); k <= 2 {
		if k == 2 {
			close(w.both)
		}
		select {
		case <-w.both:
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(30 * time.Second):
			// The check below fails with one backend.
		}
	}
	var pid uint32
	if err := conn.QueryRow(ctx, "SELECT pg_backend_pid()").Scan(&pid); err != nil {
		return err
	}
	if got, ok := w.m.Op(pid); ok && got == op {
		w.seen.Add(1)
	} else {
		w.miss.Add(1)
	}
	return nil
}

func TestOpMapTracksBackends(t *testing.T) {
	pgtest.SkipShort(t)
	base := &sqlWorkload{
		ops:   []workload.Operation{{Name: "a", Target: time.Second, Priority: 1}, {Name: "b", Target: time.Second, Priority: 1}},
		sql:   []string{"", ""},
		roles: []workload.Role{{Name: "user", Share: 1, Mix: map[string]float64{"a": 1, "b": 1}}},
	}
	w := &mapCheck{sqlWorkload: *base, m: opmap.New([]string{"a", "b"}), both: make(chan struct{})}
	out, res, _, err := run(t, w, engine.Config{
		Stages: []engine.Stage{{Duration: time.Second, Target: 3}}, Connections: 2, Ops: w.m,
		Think: engine.ThinkTime{Kind: "fixed", Min: 10 * time.Millisecond},
	}, 2)
	if err != nil {
		t.Fatal(err)
	}
	n := res[0].Count + res[1].Count + res[0].WarmupCount + res[1].WarmupCount
	if w.miss.Load() != 0 || w.seen.Load() != n || n == 0 {
		t.Fatalf("%s: map named the running op %d times, missed %d, of %d executions", out.Status, w.seen.Load(), w.miss.Load(), n)
	}
	var seq int64
	snap := w.m.Snapshot(nil)
	for pid, s := range snap {
		if s.Op != opmap.Idle {
			t.Errorf("pid %d still in op %d after the run", pid, s.Op)
		}
		seq += int64(s.Seq)
	}
	if len(snap) != 2 || seq != n {
		t.Errorf("%d backends with %d executions, want 2 backends (the pool) and %d", len(snap), seq, n)
	}
}
