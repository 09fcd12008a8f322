package engine_test

import (
	"context"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/erplab/erplab/internal/engine"
	"github.com/erplab/erplab/internal/record"
	"github.com/erplab/erplab/internal/results"
	"github.com/erplab/erplab/internal/workload"
)

// sampleLog collects every recorded execution (Config.OnSample).
type sampleLog struct {
	mu sync.Mutex
	s  []record.Sample
}

func (l *sampleLog) add(s record.Sample) {
	l.mu.Lock()
	l.s = append(l.s, s)
	l.mu.Unlock()
}

// runOn runs w on the database dsn with a pool of poolSize connections;
// atStart is called just before the run starts.
func runOn(t *testing.T, dsn string, w workload.Workload, cfg engine.Config, poolSize int, atStart func()) (engine.Outcome, []results.OpResult, *record.Recorder, error) {
	t.Helper()
	cfg.Workload = w
	if cfg.Roles == nil {
		cfg.Roles = w.Roles()
	}
	pool := poolOf(t, srv.Pool(t, dsn), poolSize)
	atStart()
	rec := record.New(ops(w), time.Now(), cfg.Warmup, time.Second)
	out, err := engine.Run(context.Background(), pool, cfg, rec)
	return out, rec.Results(out.Elapsed - cfg.Warmup), rec, err
}

// checkArrivals asserts that every arrival of an open-model run is
// accounted for: executed (scored or warm-up), skipped, cut short, or left
// in the backlog.
func checkArrivals(t *testing.T, out engine.Outcome, res []results.OpResult) {
	t.Helper()
	var n int64
	for _, r := range res {
		n += r.Count + r.WarmupCount + r.Skipped + r.WarmupSkipped
	}
	if n+out.Cancelled+out.BacklogLeft != out.Arrivals {
		t.Fatalf("arrivals %d != executed and skipped %d + cut short %d + backlog left %d", out.Arrivals, n, out.Cancelled, out.BacklogLeft)
	}
}

// At a constant rate the number of arrivals in a run is Poisson: 750
// expected in 3 s at 250/s (standard deviation 27); the band is ±20 %.
// The lag of each execution is recorded apart.
func TestOpenModelPoissonArrivals(t *testing.T) {
	w := oneOp("SELECT 1", time.Second)
	rate, err := engine.ConstantRate(250)
	if err != nil {
		t.Fatal(err)
	}
	out, res, rec, err := run(t, w, engine.Config{
		Stages:      []engine.Stage{{Duration: 0, Target: 4}, {Duration: 3 * time.Second, Target: 4}},
		Rate:        rate,
		Connections: 4,
		Seed:        11,
	}, 4)
	if err != nil {
		t.Fatal(err)
	}
	want := engine.ExpectedArrivals(rate, 3*time.Second)
	if a := float64(out.Arrivals); a < 0.8*want || a > 1.2*want {
		t.Fatalf("%d arrivals in 3 s at 250/s, want %.0f ± 20 %%", out.Arrivals, want)
	}
	checkArrivals(t, out, res)
	r := res[0]
	if r.Count == 0 || r.Errors != 0 || r.Skipped != 0 {
		t.Fatalf("count %d errors %d skipped %d", r.Count, r.Errors, r.Skipped)
	}
	if r.Lag.P50 <= 0 || r.Lag.Max > r.Response.Max {
		t.Fatalf("lag %+v (want recorded, within the response time %+v)", r.Lag, r.Response)
	}
	var inSeries int64
	for _, iv := range rec.Series() {
		inSeries += iv.Count
	}
	if inSeries != r.Count {
		t.Fatalf("series sum %d != count %d", inSeries, r.Count)
	}
}

// A rate ramping from 0 to 400/s over 3 s: 150 arrivals expected in the
// first half, 450 in the second.
func TestOpenModelRampingRate(t *testing.T) {
	w := oneOp("SELECT 1", time.Second)
	var log sampleLog
	rate := []engine.RateStage{{Duration: 3 * time.Second, Rate: 400}}
	out, res, rec, err := run(t, w, engine.Config{
		Stages:      []engine.Stage{{Duration: 0, Target: 4}, {Duration: 3 * time.Second, Target: 4}},
		Rate:        rate,
		Connections: 4,
		Seed:        3,
		OnSample:    log.add,
	}, 4)
	if err != nil {
		t.Fatal(err)
	}
	checkArrivals(t, out, res)
	if a := float64(out.Arrivals); a < 480 || a > 720 {
		t.Fatalf("%d arrivals, want 600 ± 20 %%", out.Arrivals)
	}
	half := rec.Start().Add(1500 * time.Millisecond)
	var first, second int
	for _, s := range log.s {
		if s.Scheduled.Before(half) {
			first++
		} else {
			second++
		}
	}
	if first+second != int(res[0].Count) || second <= 2*first {
		t.Fatalf("scheduled in the first half %d, second %d (of %d); want about 150 and 450", first, second, res[0].Count)
	}
}

// TxPerVU: each VU stops after exactly that many operations, errors
// included, and the run completes then, long before the stages' bound.
func TestTxPerVU(t *testing.T) {
	w := &sqlWorkload{
		ops: []workload.Operation{
			{Name: "ok", Target: time.Second, Priority: 1},
			{Name: "div0", Target: time.Second, Priority: 1},
		},
		sql:   []string{"SELECT 1", "SELECT 1/0"},
		roles: []workload.Role{{Name: "u", Share: 1, Mix: map[string]float64{"ok": 3, "div0": 1}}},
	}
	bound := []engine.Stage{{Duration: 0, Target: 3}, {Duration: time.Minute, Target: 3}}
	out, res, _, err := run(t, w, engine.Config{Stages: bound, TxPerVU: 40, Connections: 3}, 3)
	if err != nil {
		t.Fatal(err)
	}
	if n := res[0].Count + res[1].Count; n != 120 || res[1].Errors == 0 {
		t.Fatalf("closed model: %d operations (%d failed), want 3 VUs x 40 = 120 with errors", n, res[1].Errors)
	}
	if out.Status != "completed" || out.Unfinished != 0 || out.Elapsed >= time.Minute {
		t.Fatalf("closed model: %q after %s, %d unfinished", out.Status, out.Elapsed, out.Unfinished)
	}

	rate, _ := engine.ConstantRate(300)
	out, res, _, err = run(t, w, engine.Config{Stages: bound, Rate: rate, TxPerVU: 25, Connections: 3}, 3)
	if err != nil {
		t.Fatal(err)
	}
	if n := res[0].Count + res[1].Count; n != 75 {
		t.Fatalf("open model: %d operations, want 3 x 25 = 75", n)
	}
	if out.Status != "completed" || out.Unfinished != 0 || out.Elapsed >= time.Minute {
		t.Fatalf("open model: %q after %s, %d unfinished", out.Status, out.Elapsed, out.Unfinished)
	}
	checkArrivals(t, out, res)

	// The stages bound the time: VUs cut short are unfinished.
	out, _, _, err = run(t, w, engine.Config{
		Stages:  []engine.Stage{{Duration: 0, Target: 2}, {Duration: 500 * time.Millisecond, Target: 2}},
		TxPerVU: 1 << 30, Think: engine.ThinkTime{Kind: "fixed", Min: 10 * time.Millisecond}, Connections: 2,
	}, 2)
	if err != nil {
		t.Fatal(err)
	}
	if out.Unfinished != 2 {
		t.Fatalf("time bound: %d VUs unfinished, want 2", out.Unfinished)
	}
}

// stallDB creates a database with one row that the stall tests lock.
func stallDB(t *testing.T) string {
	t.Helper()
	dsn := srv.NewDatabase(t)
	if _, err := srv.Pool(t, dsn).Exec(context.Background(), "CREATE TABLE stall (id int PRIMARY KEY, n int); INSERT INTO stall VALUES (1, 0)"); err != nil {
		t.Fatal(err)
	}
	return dsn
}

// lockOp locks the stalled row in a transaction, then holds it for sleep
// (SELECT pg_sleep), so that operations on it are serialised; commits are
// asynchronous to keep fsync out of the figures.
func lockOp(sleep string) *sqlWorkload {
	sql := "BEGIN; SET LOCAL synchronous_commit = off; SELECT 1 FROM stall WHERE id = 1 FOR UPDATE;"
	if sleep != "" {
		sql += " SELECT pg_sleep(" + sleep + ");"
	}
	sql += " COMMIT"
	return oneOp(sql, time.Second)
}

// stall is a row lock held by another connection: sent is when the lock
// was asked for, locked when it was held, releasing when the ROLLBACK
// that releases it was sent, released when it returned.
type stall struct{ sent, locked, releasing, released time.Time }

// max is an upper bound of how long the server held the lock.
func (s stall) max() time.Duration { return s.released.Sub(s.sent) }

// min is a lower bound of it.
func (s stall) min() time.Duration { return s.releasing.Sub(s.locked) }

// holdRowLock locks the stalled row from its own connection and returns
// once it is held; the channel yields the times after the release, hold
// later.
func holdRowLock(t *testing.T, dsn string, hold time.Duration) <-chan stall {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	var st stall
	st.sent = time.Now()
	if _, err := conn.Exec(ctx, "BEGIN; SELECT 1 FROM stall WHERE id = 1 FOR UPDATE"); err != nil {
		t.Fatal(err)
	}
	st.locked = time.Now()
	done := make(chan stall, 1)
	go func() {
		defer conn.Close(ctx)
		time.Sleep(hold)
		st.releasing = time.Now()
		if _, err := conn.Exec(ctx, "ROLLBACK"); err != nil {
			t.Error(err)
		}
		st.released = time.Now()
		done <- st
	}()
	return done
}

// The stall test: the row every operation needs is locked by another
// connection for 2 s.
//
// Open model: arrivals at 300/s for the first 1.5 s of the run only, all
// inside the stall (the lock is taken just before the run starts), on 2
// workers. Every transaction scheduled during the stall completes after
// the release, so its latency is at least (release - its scheduled start)
// - asserted per transaction. After the release the backlog drains one
// operation at a time, each holding the row for at least 5 ms: slower
// than the 3.3 ms between arrivals, so the k-th transaction waits about
// k x 1.7 ms longer than its distance from the start of the stall, and all
// but the first few have a latency above the whole stall. Hence p99 (even
// p50) >= the stall, with hundreds of ms to spare; the run lasts 6 s so
// the drain ends inside it. The stall is taken at its upper bound (from
// asking for the lock to the return of its release).
//
// Closed model, the same stall and operation, 2 VUs without think time:
// the 2 operations caught by the stall take about 2 s, and the VUs then
// run hundreds of quick ones, so p99 stays far below the stall: the
// coordinated omission the open model avoids.
func TestStallOpenVersusClosed(t *testing.T) {
	dsn := stallDB(t)
	w := lockOp("0.005")
	var log sampleLog
	rate := []engine.RateStage{{Duration: 0, Rate: 300}, {Duration: 1500 * time.Millisecond, Rate: 300}, {Duration: 0, Rate: 0}}
	var released <-chan stall
	lock := func() { released = holdRowLock(t, dsn, 2*time.Second) }
	out, res, rec, err := runOn(t, dsn, w, engine.Config{
		Stages:      []engine.Stage{{Duration: 0, Target: 2}, {Duration: 6 * time.Second, Target: 2}},
		Rate:        rate,
		Connections: 2,
		Seed:        1,
		OnSample:    log.add,
	}, 2, lock)
	if err != nil {
		t.Fatal(err)
	}
	st := <-released
	checkArrivals(t, out, res)
	r := res[0]
	if r.Errors != 0 || len(log.s) != int(r.Count) || r.Count < 100 {
		t.Fatalf("open: %d executions (%d logged), %d errors", r.Count, len(log.s), r.Errors)
	}
	sort.Slice(log.s, func(i, j int) bool { return log.s[i].Scheduled.Before(log.s[j].Scheduled) })
	for i, s := range log.s {
		if s.Scheduled.Before(st.locked) || !s.Scheduled.Before(st.releasing) {
			t.Fatalf("design: transaction %d scheduled at %s, outside the stall %s..%s",
				i, s.Scheduled.Sub(rec.Start()), st.locked.Sub(rec.Start()), st.releasing.Sub(rec.Start()))
		}
		if floor := st.releasing.Sub(s.Scheduled); s.Response() < floor {
			t.Fatalf("transaction %d scheduled %s before the release took %s", i, floor, s.Response())
		}
		// Both workers were blocked until the release: every later
		// arrival started after it.
		if i >= 2 && s.Start.Before(st.releasing) {
			t.Fatalf("transaction %d started at %s, before the release at %s", i, s.Start.Sub(rec.Start()), st.releasing.Sub(rec.Start()))
		}
	}
	stallMs := float64(st.max()) / float64(time.Millisecond)
	if r.Response.P99 < stallMs || r.Response.Max < stallMs {
		t.Fatalf("open: p99 %.0f ms, max %.0f ms; want both >= the stall %.0f ms", r.Response.P99, r.Response.Max, stallMs)
	}
	if float64(st.min())/float64(time.Millisecond) < 1900 {
		t.Fatalf("the lock was held only %s", st.min())
	}
	var backlogMax int64
	for _, iv := range rec.Series() {
		backlogMax = max(backlogMax, iv.BacklogMax)
	}
	if backlogMax < 100 {
		t.Fatalf("open: backlog max %d during the stall, want >= 100 (300/s, workers blocked)", backlogMax)
	}

	// The same stall in the closed model. The VUs run a count of
	// operations (TxPerVU), not a time: p99 stays below the stall when
	// the 2 caught operations are under 1 % of them, and a run of 5 s on
	// a loaded machine did only 99 (5 ms operations took 30: p99 was a
	// caught one). The stage only bounds the run.
	const closedTx = 250
	log.s = nil
	cout, res, _, err := runOn(t, dsn, w, engine.Config{
		Stages:      []engine.Stage{{Duration: 0, Target: 2}, {Duration: time.Minute, Target: 2}},
		Think:       engine.ThinkTime{Kind: "fixed"},
		Connections: 2,
		TxPerVU:     closedTx,
		OnSample:    log.add,
	}, 2, lock)
	if err != nil {
		t.Fatal(err)
	}
	st = <-released
	c := res[0]
	if c.Count+c.WarmupCount != 2*closedTx || cout.Unfinished != 0 {
		t.Fatalf("closed: %d operations, %d VUs unfinished; want 2 x %d within the minute", c.Count+c.WarmupCount, cout.Unfinished, closedTx)
	}
	var caught int
	var floor time.Duration
	for _, s := range log.s {
		if s.Start.Before(st.releasing) {
			caught++
			f := st.releasing.Sub(s.Start)
			if s.Response() < f {
				t.Fatalf("closed: an operation started %s before the release took %s", f, s.Response())
			}
			floor = max(floor, f)
		}
	}
	stallMs = float64(st.min()) / float64(time.Millisecond)
	if caught == 0 || caught > 2 || c.Response.Max < 0.999*float64(floor)/float64(time.Millisecond) {
		t.Fatalf("closed: %d operations caught by the stall (want 1..2), max %.0f ms", caught, c.Response.Max)
	}
	if c.Response.P99 >= stallMs/2 {
		t.Fatalf("closed: p99 %.0f ms of %d operations; want far below the stall %.0f ms (coordinated omission)", c.Response.P99, c.Count, stallMs)
	}
	t.Logf("stall %.0f ms: open p50 %.0f p99 %.0f max %.0f ms (%d tx); closed p50 %.1f p99 %.1f max %.0f ms (%d tx)",
		float64(st.max())/1e6, r.Response.P50, r.Response.P99, r.Response.Max, r.Count, c.Response.P50, c.Response.P99, c.Response.Max, c.Count)
}

// With a latency limit, the arrivals that waited behind a 1 s stall longer
// than the limit are skipped, not run (pgbench --latency-limit with
// --rate); the operations caught by the stall are late.
func TestOpenModelSkipsAboveLatencyLimit(t *testing.T) {
	dsn := stallDB(t)
	w := lockOp("")
	w.ops = append(w.ops, workload.Operation{Name: "op2", Target: time.Second, Priority: 1})
	w.sql = append(w.sql, w.sql[0])
	w.roles[0].Mix["op2"] = 1
	rate, _ := engine.ConstantRate(100)
	var released <-chan stall
	out, res, rec, err := runOn(t, dsn, w, engine.Config{
		Stages:       []engine.Stage{{Duration: 0, Target: 2}, {Duration: 3 * time.Second, Target: 2}},
		Rate:         rate,
		LatencyLimit: 200 * time.Millisecond,
		Connections:  2,
		Seed:         2,
	}, 2, func() { released = holdRowLock(t, dsn, time.Second) })
	if err != nil {
		t.Fatal(err)
	}
	<-released
	checkArrivals(t, out, res)
	// About 100/s x (1 s - 0.2 s) - 2 = 78 expected.
	skipped, late := res[0].Skipped+res[1].Skipped, res[0].Late+res[1].Late
	if skipped < 20 || res[0].Skipped == 0 || res[1].Skipped == 0 {
		t.Fatalf("skipped %d + %d, want about 78 over both operations", res[0].Skipped, res[1].Skipped)
	}
	if late < 2 {
		t.Fatalf("late %d, want the 2 operations caught by the stall", late)
	}
	// A skipped arrival is a user who got no service: frustrated in its
	// operation's APDEX, but neither counted as an execution nor in the
	// latencies.
	for _, r := range res {
		if r.Apdex.Samples != r.Count+r.Skipped || r.Zones.Total() != r.Count+r.Skipped || r.Zones.Frustrated < r.Skipped+r.Errors {
			t.Fatalf("%s: APDEX over %d samples, zones %+v; want count %d + skipped %d, at least %d frustrated",
				r.Name, r.Apdex.Samples, r.Zones, r.Count, r.Skipped, r.Skipped+r.Errors)
		}
		if ceiling := float64(r.Count) / float64(r.Count+r.Skipped); r.Apdex.Value > ceiling {
			t.Fatalf("%s: APDEX %.3f above %.3f, the share of arrivals served", r.Name, r.Apdex.Value, ceiling)
		}
	}
	var ivSkipped, ivLate int64
	for _, iv := range rec.Series() {
		ivSkipped += iv.Skipped
		ivLate += iv.Late
	}
	if ivSkipped != skipped || ivLate != late {
		t.Fatalf("series: %d skipped, %d late; totals %d, %d", ivSkipped, ivLate, skipped, late)
	}
	if tot := rec.Totals(out.Elapsed); tot.Skipped != skipped || tot.Late != late || tot.BacklogLeft != out.BacklogLeft {
		t.Fatalf("totals %+v", tot)
	}
}
