package engine

import (
	"context"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/erplab/erplab/internal/opmap"
)

// The tracer counts a text for the operation the virtual user runs, and
// nothing between operations or outside the engine's contexts.
func TestTracerCountsPerOperation(t *testing.T) {
	m := opmap.New([]string{"a", "b"})
	e := &run{cfg: Config{Ops: m}}
	ctx := e.traceContext(context.Background())
	vt := traceOf(ctx)
	if vt == nil {
		t.Fatal("no vuTrace in the context of a run with Ops")
	}
	tr := Tracer{}
	send := func(ctx context.Context, sql string) {
		tr.TraceQueryStart(ctx, nil, pgx.TraceQueryStartData{SQL: sql})
	}
	send(ctx, "SELECT 0") // between operations
	vt.op = 1
	send(ctx, "SELECT 1")
	send(context.WithoutCancel(ctx), "SELECT 1") // a context derived from the engine's
	tr.TraceBatchQuery(ctx, nil, pgx.TraceBatchQueryData{SQL: "SELECT 2"})
	vt.op = opmap.Idle
	send(context.Background(), "SELECT 3") // not the engine's
	got, dropped := m.Texts().Counts()
	want := map[opmap.OpText]int64{{Op: 1, SQL: "SELECT 1"}: 2, {Op: 1, SQL: "SELECT 2"}: 1}
	if len(got) != len(want) || dropped != 0 {
		t.Fatalf("counts %v (dropped %d), want %v", got, dropped, want)
	}
	for k, n := range want {
		if got[k] != n {
			t.Fatalf("counts %v, want %v", got, want)
		}
	}
	if (&run{}).traceContext(ctx) != ctx {
		t.Error("a run without Ops wraps the context")
	}
}

// BenchmarkTracerQuery is the tracer's cost per statement sent in an
// operation: a context lookup and an uncontended lock around a map
// increment keyed by the text (an erp-sized text of 3 kB), one
// recorder per goroutine as per virtual user.
func BenchmarkTracerQuery(b *testing.B) {
	m := opmap.New([]string{"op"})
	e := &run{cfg: Config{Ops: m}}
	sql := "SELECT " + strings.Repeat("x._fld1000, ", 250) + "1 FROM t x WHERE x.id = $1"
	b.RunParallel(func(pb *testing.PB) {
		ctx := e.traceContext(context.Background())
		traceOf(ctx).op = 0
		var tr Tracer
		for pb.Next() {
			tr.TraceQueryStart(ctx, nil, pgx.TraceQueryStartData{SQL: sql})
		}
	})
}
