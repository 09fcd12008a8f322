package engine_test

import (
	"context"
	"errors"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/erplab/erplab/internal/engine"
	"github.com/erplab/erplab/internal/pgtest"
	"github.com/erplab/erplab/internal/record"
	"github.com/erplab/erplab/internal/results"
	"github.com/erplab/erplab/internal/workload"
)

var srv *pgtest.Server

func TestMain(m *testing.M) { os.Exit(pgtest.Run(m, &srv)) }

// sqlWorkload runs one SQL statement per operation; an empty statement is a
// no-op that does not touch the connection.
type sqlWorkload struct {
	ops   []workload.Operation
	sql   []string
	roles []workload.Role
}

func (w *sqlWorkload) Name() string                     { return "test" }
func (w *sqlWorkload) Operations() []workload.Operation { return w.ops }
func (w *sqlWorkload) Roles() []workload.Role           { return w.roles }
func (w *sqlWorkload) Setup(context.Context, *pgxpool.Pool, workload.SetupOptions) error {
	return nil
}
func (w *sqlWorkload) Execute(ctx context.Context, conn *pgx.Conn, _ *workload.VU, op int) error {
	if w.sql[op] == "" {
		return nil
	}
	_, err := conn.Exec(ctx, w.sql[op])
	return err
}

// oneOp is a workload of a single operation.
func oneOp(sql string, target time.Duration) *sqlWorkload {
	return &sqlWorkload{
		ops:   []workload.Operation{{Name: "op", Target: target, Priority: 1}},
		sql:   []string{sql},
		roles: []workload.Role{{Name: "user", Share: 1, Mix: map[string]float64{"op": 1}}},
	}
}

func ops(w workload.Workload) []record.OpInfo {
	var out []record.OpInfo
	for _, o := range w.Operations() {
		out = append(out, record.OpInfo{Name: o.Name, Target: o.Target, Priority: o.Priority})
	}
	return out
}

func run(t *testing.T, w workload.Workload, cfg engine.Config, poolSize int) (engine.Outcome, []results.OpResult, *record.Recorder, error) {
	t.Helper()
	pool := srv.Pool(t, srv.NewDatabase(t))
	cfg.Workload = w
	if cfg.Roles == nil {
		cfg.Roles = w.Roles()
	}
	rec := record.New(ops(w), time.Now(), cfg.Warmup, time.Second)
	out, err := engine.Run(context.Background(), poolOf(t, pool, poolSize), cfg, rec)
	return out, rec.Results(out.Elapsed - cfg.Warmup), rec, err
}

// poolOf returns a pool on the same database limited to size connections.
func poolOf(t testing.TB, p *pgxpool.Pool, size int) *pgxpool.Pool {
	t.Helper()
	cfg := p.Config()
	cfg.MaxConns = int32(size)
	np, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(np.Close)
	return np
}

// With a known operation cost (pg_sleep 50 ms) and a fixed think time of
// 50 ms, each VU completes at most one operation per 100 ms: 4 VUs over
// 3 s give at most 4*30 (+4 in flight) operations, and on any machine that
// is not starved well over half of that.
func TestOperationCountFollowsThinkTimeAndCost(t *testing.T) {
	w := oneOp("SELECT pg_sleep(0.05)", time.Second)
	out, res, _, err := run(t, w, engine.Config{
		Stages:      []engine.Stage{{Duration: 0, Target: 4}, {Duration: 3 * time.Second, Target: 4}},
		Think:       engine.ThinkTime{Kind: "fixed", Min: 50 * time.Millisecond},
		Connections: 4,
	}, 4)
	if err != nil {
		t.Fatal(err)
	}
	if out.Status != "completed" {
		t.Fatalf("status %q", out.Status)
	}
	n := res[0].Count
	if n > 124 || n < 60 {
		t.Fatalf("operations = %d, want about 4 VUs x 3 s / 100 ms = 120 (60..124)", n)
	}
	if res[0].Errors != 0 {
		t.Fatalf("errors = %d", res[0].Errors)
	}
	if res[0].DB.P50 < 50 {
		t.Fatalf("db p50 %.1f ms is below the 50 ms pg_sleep", res[0].DB.P50)
	}
	if res[0].Apdex.Value != 1 {
		t.Fatalf("APDEX %v, want 1 (all far below T = 1 s)", res[0].Apdex)
	}
}

// A ramp stage reaches the requested VU counts, rising step by step.
func TestRampReachesTargets(t *testing.T) {
	w := oneOp("SELECT 1", time.Second)
	out, _, rec, err := run(t, w, engine.Config{
		Stages: []engine.Stage{{Duration: 2 * time.Second, Target: 6}, {Duration: 1500 * time.Millisecond, Target: 6},
			{Duration: time.Second, Target: 2}},
		Think:       engine.ThinkTime{Kind: "fixed", Min: 20 * time.Millisecond},
		Connections: 6,
	}, 6)
	if err != nil {
		t.Fatal(err)
	}
	if out.MaxVUs != 6 {
		t.Fatalf("max VUs %d, want 6", out.MaxVUs)
	}
	s := rec.Series()
	if len(s) < 4 {
		t.Fatalf("series has %d intervals", len(s))
	}
	if s[0].VUs < 1 || s[0].VUs > 4 {
		t.Fatalf("after 1 s of a 2 s ramp to 6: %d VUs, want 2..4", s[0].VUs)
	}
	if s[2].VUs != 6 {
		t.Fatalf("at 3 s (holding): %d VUs, want 6", s[2].VUs)
	}
	if last := s[len(s)-2]; last.VUs >= 6 {
		t.Fatalf("ramping down to 2: still %d VUs at t=%.1f", last.VUs, last.T)
	}
}

// More VUs than connections: VUs queue for a connection, and the wait is
// recorded apart from the time in the database.
func TestPoolWaitWhenVUsExceedConnections(t *testing.T) {
	w := oneOp("SELECT pg_sleep(0.03)", time.Second)
	_, res, rec, err := run(t, w, engine.Config{
		Stages:      []engine.Stage{{Duration: 0, Target: 8}, {Duration: 2 * time.Second, Target: 8}},
		Think:       engine.ThinkTime{Kind: "fixed"},
		Connections: 2,
	}, 2)
	if err != nil {
		t.Fatal(err)
	}
	r := res[0]
	// 8 VUs on 2 connections: a VU waits for about 3 others' operations.
	if r.PoolWait.P50 < r.DB.P50 {
		t.Fatalf("pool wait p50 %.1f ms < db p50 %.1f ms; want the queue to dominate", r.PoolWait.P50, r.DB.P50)
	}
	var maxWaiters int64
	for _, iv := range rec.Series() {
		maxWaiters = max(maxWaiters, iv.PoolWaitersMax)
	}
	if maxWaiters < 4 {
		t.Fatalf("max pool waiters %d, want >= 4 of 8 VUs waiting", maxWaiters)
	}
	// The same load with a connection each: no queue.
	_, res2, _, err := run(t, w, engine.Config{
		Stages:      []engine.Stage{{Duration: 0, Target: 8}, {Duration: time.Second, Target: 8}},
		Think:       engine.ThinkTime{Kind: "fixed"},
		Connections: 0,
	}, 8)
	if err != nil {
		t.Fatal(err)
	}
	if res2[0].PoolWait.Max > 1 {
		t.Fatalf("a connection per VU: pool wait max %.2f ms, want none", res2[0].PoolWait.Max)
	}
}

// SQL errors are counted by SQLSTATE and do not stop the run; a
// terminated backend is replaced and the VU goes on.
func TestErrorsBySQLStateAndLostConnections(t *testing.T) {
	w := &sqlWorkload{
		ops: []workload.Operation{
			{Name: "div0", Target: time.Second, Priority: 1},
			{Name: "killself", Target: time.Second, Priority: 1},
			{Name: "ok", Target: time.Second, Priority: 1},
		},
		sql:   []string{"SELECT 1/0", "SELECT pg_terminate_backend(pg_backend_pid())", "SELECT 1"},
		roles: []workload.Role{{Name: "u", Share: 1, Mix: map[string]float64{"div0": 1, "killself": 1, "ok": 3}}},
	}
	out, res, _, err := run(t, w, engine.Config{
		Stages:      []engine.Stage{{Duration: 0, Target: 3}, {Duration: 2 * time.Second, Target: 3}},
		Think:       engine.ThinkTime{Kind: "fixed", Min: 10 * time.Millisecond},
		Connections: 3,
	}, 3)
	if err != nil {
		t.Fatal(err)
	}
	if out.Status != "completed" {
		t.Fatalf("status %q", out.Status)
	}
	byName := map[string]results.OpResult{}
	for _, r := range res {
		byName[r.Name] = r
	}
	d := byName["div0"]
	if d.Errors == 0 || d.Errors != d.Count || d.ErrorsBySQLState["22012"] != d.Errors {
		t.Fatalf("div0: count %d errors %d by state %v; want all 22012", d.Count, d.Errors, d.ErrorsBySQLState)
	}
	k := byName["killself"]
	if k.Errors == 0 || k.ErrorsBySQLState["57P01"]+k.ErrorsBySQLState[engine.CodeConnectionFailure] != k.Errors {
		t.Fatalf("killself: errors %d by state %v; want 57P01/08006", k.Errors, k.ErrorsBySQLState)
	}
	if o := byName["ok"]; o.Count < 20 || o.Errors != 0 {
		t.Fatalf("ok: count %d errors %d; VUs should go on after errors", o.Count, o.Errors)
	}
	if d.Apdex.Value != 0 {
		t.Fatalf("div0 APDEX %v: errors must count as frustrated", d.Apdex)
	}
}

func TestMaxErrorsAborts(t *testing.T) {
	w := oneOp("SELECT 1/0", time.Second)
	out, res, _, err := run(t, w, engine.Config{
		Stages:      []engine.Stage{{Duration: 0, Target: 2}, {Duration: 30 * time.Second, Target: 2}},
		Think:       engine.ThinkTime{Kind: "fixed", Min: 5 * time.Millisecond},
		Connections: 2,
		MaxErrors:   25,
	}, 2)
	if !errors.Is(err, engine.ErrAborted) {
		t.Fatalf("err = %v, want ErrAborted", err)
	}
	if out.Elapsed > 20*time.Second {
		t.Fatalf("aborted only after %s", out.Elapsed)
	}
	if res[0].Errors < 25 {
		t.Fatalf("errors %d < 25", res[0].Errors)
	}
}

func TestInterruptKeepsResults(t *testing.T) {
	w := oneOp("SELECT pg_sleep(0.01)", time.Second)
	pool := poolOf(t, srv.Pool(t, srv.NewDatabase(t)), 2)
	rec := record.New(ops(w), time.Now(), 0, time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), 1500*time.Millisecond)
	defer cancel()
	out, err := engine.Run(ctx, pool, engine.Config{
		Workload: w, Roles: w.Roles(),
		Stages:      []engine.Stage{{Duration: 0, Target: 2}, {Duration: time.Minute, Target: 2}},
		Think:       engine.ThinkTime{Kind: "fixed"},
		Connections: 2,
	}, rec)
	if err != nil {
		t.Fatal(err)
	}
	if out.Status != "interrupted" || out.Elapsed > 10*time.Second {
		t.Fatalf("status %q after %s", out.Status, out.Elapsed)
	}
	res := rec.Results(out.Elapsed)
	var inSeries int64
	for _, iv := range rec.Series() {
		inSeries += iv.Count
	}
	if res[0].Count < 10 || inSeries != res[0].Count {
		t.Fatalf("count %d, series sum %d: want the same, > 10", res[0].Count, inSeries)
	}
}

// Warm-up operations are counted apart and not scored.
func TestWarmupNotScored(t *testing.T) {
	w := oneOp("SELECT 1", time.Second)
	_, res, rec, err := run(t, w, engine.Config{
		Stages:      []engine.Stage{{Duration: 0, Target: 2}, {Duration: 2 * time.Second, Target: 2}},
		Warmup:      time.Second,
		Think:       engine.ThinkTime{Kind: "fixed", Min: 20 * time.Millisecond},
		Connections: 2,
	}, 2)
	if err != nil {
		t.Fatal(err)
	}
	r := res[0]
	if r.WarmupCount < 10 || r.Count < 10 {
		t.Fatalf("warm-up %d, scored %d: want both > 10", r.WarmupCount, r.Count)
	}
	if r.Apdex.Samples != r.Count {
		t.Fatalf("APDEX samples %d != scored count %d", r.Apdex.Samples, r.Count)
	}
	if !rec.Series()[0].Warmup || rec.Series()[len(rec.Series())-1].Warmup {
		t.Fatal("series warm-up marks wrong")
	}
}

// A connect the server refuses keeps the server's SQLSTATE (here 28000,
// no such role), and counts as a connection failure.
func TestRefusedConnectKeepsServerCode(t *testing.T) {
	w := oneOp("SELECT 1", time.Second)
	cfg, err := pgxpool.ParseConfig(srv.NewDatabase(t) + " user=no_such_role")
	if err != nil {
		t.Fatal(err)
	}
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	rec := record.New(ops(w), time.Now(), 0, time.Second)
	_, err = engine.Run(context.Background(), pool, engine.Config{
		Workload: w, Roles: w.Roles(),
		Stages:      []engine.Stage{{Duration: 0, Target: 1}, {Duration: 1500 * time.Millisecond, Target: 1}},
		Connections: 1,
	}, rec)
	if err != nil {
		t.Fatal(err)
	}
	r := rec.Results(time.Second)[0]
	if r.Errors == 0 || r.ErrorsBySQLState["28000"] != r.Errors {
		t.Fatalf("errors %d by state %v, want all 28000", r.Errors, r.ErrorsBySQLState)
	}
	// one connect attempt per second, not a spin
	if r.Errors > 3 {
		t.Fatalf("%d connect attempts in 1.5 s: the VU spins on a refusing server", r.Errors)
	}
}
