package loadtest_test

import (
	"bufio"
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/erplab/erplab/internal/engine"
	"github.com/erplab/erplab/internal/loadtest"
	"github.com/erplab/erplab/internal/results"
	"github.com/erplab/erplab/internal/workload"
)

// lockWorkload has two key operations that both wait for advisory lock 42
// (held by the test), one with T = 100 ms, one with T = 10 s; VUs of role
// "a" run only the first, of role "b" only the second.
type lockWorkload struct{}

func (lockWorkload) Name() string { return "locktest" }
func (lockWorkload) Setup(context.Context, *pgxpool.Pool, workload.SetupOptions) error {
	return nil
}
func (lockWorkload) Operations() []workload.Operation {
	return []workload.Operation{
		{Name: "short_t", Target: 100 * time.Millisecond, Priority: 1},
		{Name: "long_t", Target: 10 * time.Second, Priority: 1},
	}
}
func (lockWorkload) Roles() []workload.Role {
	return []workload.Role{
		{Name: "a", Share: 1, Mix: map[string]float64{"short_t": 1}},
		{Name: "b", Share: 1, Mix: map[string]float64{"long_t": 1}},
	}
}
func (lockWorkload) Execute(ctx context.Context, conn *pgx.Conn, _ *workload.VU, _ int) error {
	_, err := conn.Exec(ctx, `SELECT pg_advisory_xact_lock(42)`)
	return err
}

// A pool-saturated run whose operations are all still waiting at the end
// (two connections blocked on a lock the test holds, four VUs queued for
// them): the operations past 4T are scored frustrated, the others only
// counted, and the results, the stream, a rebuild from the stream and the
// summary all say so.
func TestCutShortPastFourTScoredFrustrated(t *testing.T) {
	dsn := srv.NewDatabase(t)
	holder, err := pgx.Connect(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Close(context.Background())
	if _, err := holder.Exec(context.Background(), `SELECT pg_advisory_lock(42)`); err != nil {
		t.Fatal(err)
	}
	opts := loadtest.Options{
		DSN: dsn, Workload: lockWorkload{}, Seed: 1,
		Stages:      []engine.Stage{{Duration: 0, Target: 6}, {Duration: time.Second, Target: 6}},
		Connections: 2, GracefulStop: 500 * time.Millisecond, Interval: time.Second,
		Out: filepath.Join(t.TempDir(), "r.json"), Version: "test",
	}
	var out bytes.Buffer
	res, err := loadtest.Run(context.Background(), opts, &out)
	if err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	doc, err := results.Read(res.Path)
	if err != nil {
		t.Fatal(err)
	}
	short, long := doc.Operations[0], doc.Operations[1]
	// Three VUs per role; none finished, all were cut short after
	// 1.5 s, past 4T = 400 ms for short_t, within 4T = 40 s for long_t.
	if c := short.CutShort; short.Count != 0 || c == nil || c.Frustrated != 3 || c.NotScored != 0 || c.FrustratedMaxMs <= 400 {
		t.Fatalf("short_t: count %d cut short %+v\n%s", short.Count, c, out.String())
	}
	if short.Zones.Frustrated != 3 || short.Apdex.Samples != 3 || short.Apdex.Value != 0 {
		t.Fatalf("short_t: zones %+v APDEX %+v, want 3 frustrated, 0 over 3 samples", short.Zones, short.Apdex)
	}
	if c := long.CutShort; long.Count != 0 || c == nil || c.Frustrated != 0 || c.NotScored != 3 || c.NotScoredMaxMs <= 0 || c.NotScoredMaxMs > 40000 {
		t.Fatalf("long_t: count %d cut short %+v", long.Count, c)
	}
	if !long.Apdex.NS() || long.Zones.Total() != 0 {
		t.Fatalf("long_t: zones %+v APDEX %+v, want NS", long.Zones, long.Apdex)
	}
	// Before, the run scored NS: its longest waits were dropped.
	if doc.Integral.NS() || doc.Integral.Value != 0 {
		t.Fatalf("integral %+v, want 0 (short_t's frustrated cut-short executions)", doc.Integral)
	}
	s := out.String()
	for _, want := range []string{
		"(6 operations cut short at the end: 3 scored frustrated, 3 not scored)",
		"short_t: 3 past 4T = 400ms, scored frustrated (longest ",
		"long_t: 3 not scored (longest ",
	} {
		if !strings.Contains(s, want) {
			t.Fatalf("summary lacks %q:\n%s", want, s)
		}
	}
	// The stream's last interval carries the scored cut-short executions,
	// so the stream of a run killed after it rebuilds the same APDEX.
	header, series, _, err := results.ReadStream(res.StreamPath)
	if err != nil {
		t.Fatal(err)
	}
	if n := len(series); n == 0 || series[n-1].Ops["short_t"].CutShort != 3 || series[n-1].Ops["short_t"].Zones.Frustrated != 3 {
		t.Fatalf("last interval %+v of %d", series[len(series)-1], len(series))
	}
	killed := filepath.Join(t.TempDir(), "killed.jsonl")
	writeWithoutSummary(t, res.StreamPath, killed)
	rb, err := results.Read(killed)
	if err != nil {
		t.Fatal(err)
	}
	if header == nil || rb.Operations[0].Zones != short.Zones || rb.Operations[0].CutShort.Scored() != 3 || rb.Integral != doc.Integral {
		t.Fatalf("rebuilt: %+v %+v integral %+v", rb.Operations[0].Zones, rb.Operations[0].CutShort, rb.Integral)
	}
}

// writeWithoutSummary copies a stream without its summary line, as a run
// killed after its last interval leaves it.
func writeWithoutSummary(t *testing.T, from, to string) {
	t.Helper()
	f, err := os.Open(from)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var b bytes.Buffer
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<24)
	for sc.Scan() {
		if !strings.HasPrefix(sc.Text(), `{"type":"summary"`) {
			b.Write(sc.Bytes())
			b.WriteByte('\n')
		}
	}
	if err := os.WriteFile(to, b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}

// A profile of several steps gives per-step figures in the results and
// the summary; they add up to the run's.
func TestStagedRunHasStageFigures(t *testing.T) {
	opts := smokeOptions(t, srv.NewDatabase(t), 0)
	opts.Stages = []engine.Stage{{Duration: 2 * time.Second, Target: 2}, {Duration: 2 * time.Second, Target: 4}}
	opts.Observe = false
	var out bytes.Buffer
	res, err := loadtest.Run(context.Background(), opts, &out)
	if err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	doc := res.Doc
	if len(doc.Stages) != 2 || doc.Stages[0].Stage != 1 || doc.Stages[1].FromVUs != 2 || doc.Stages[1].TargetVUs != 4 {
		t.Fatalf("stages %+v", doc.Stages)
	}
	if n := doc.Stages[0].Count + doc.Stages[1].Count; n != doc.Totals.Count || doc.Stages[0].Count == 0 {
		t.Fatalf("steps count %d + %d, run %d", doc.Stages[0].Count, doc.Stages[1].Count, doc.Totals.Count)
	}
	s := out.String()
	for _, want := range []string{"per stage (executions counted in the stage in which they completed):", " 0-2s  0->2  item_lookup ", "2->4  item_lookup "} {
		if !strings.Contains(s, want) {
			t.Fatalf("summary lacks %q:\n%s", want, s)
		}
	}
	if strings.Count(s, "all (integral)") != 3 {
		t.Fatalf("want the run's and two steps' integral rows:\n%s", s)
	}
}
