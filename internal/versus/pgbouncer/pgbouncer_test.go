package pgbouncer

import (
	"context"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/erplab/erplab/internal/pgtest"
)

var srv *pgtest.Server

func TestMain(m *testing.M) { os.Exit(pgtest.Run(m, &srv)) }

func pgbench(t testing.TB) string {
	if p := filepath.Join(srv.BinDir(t), "pgbench"); fileExists(p) {
		return p
	}
	return "pgbench"
}

func fileExists(p string) bool { _, err := os.Stat(p); return err == nil }

func bench(t *testing.T, bouncer string, aa bool, rounds int, modes ...string) []Result {
	t.Helper()
	ctx := context.Background()
	dsn := srv.NewDatabase(t)
	if _, err := Run(ctx, Options{Upstream: dsn, PgBench: pgbench(t)}); err == nil || !strings.Contains(err.Error(), "no pgbench tables") {
		t.Fatalf("want a no-pgbench-tables error, got %v", err)
	}
	if err := Init(ctx, pgbench(t), dsn, 1); err != nil {
		t.Fatal(err)
	}
	rs, err := Run(ctx, Options{Upstream: dsn, Duration: time.Second, Clients: []int{2}, Modes: modes,
		PgBench: pgbench(t), PgBouncer: bouncer, Rounds: rounds, AA: aa})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("\n%s", Table(rs))
	return rs
}

// checkResults checks rs: two cells (modes or rounds), each with one run
// per target in targets' order rotated by the round.
func checkResults(t *testing.T, rs []Result, targets ...string) {
	t.Helper()
	if len(rs) != 2*len(targets) {
		t.Fatalf("%d results, want %d", len(rs), 2*len(targets))
	}
	for i, r := range rs {
		want := targets[(i+r.Round)%len(targets)]
		if r.Target != want || r.TPS <= 0 || r.Count <= 0 || r.P50 <= 0 || r.P99 < r.P50 {
			t.Errorf("result %d: %+v, want target %s", i, r, want)
		}
	}
}

func TestBenchDirectAndProxy(t *testing.T) {
	checkResults(t, bench(t, "", false, 1, "simple", "prepared"), "direct", "erplab proxy")
}

// Two rounds of one cell: the second runs the targets in a rotated order;
// with the A/A PgBouncer, a second PgBouncer is a target of its own and
// the table has its head-to-head lines.
func TestBenchPgBouncer(t *testing.T) {
	b, err := FindPgBouncer()
	pgtest.Need(t, "pgbouncer", err)
	rs := bench(t, b, false, 2, "extended")
	checkResults(t, rs, "direct", "erplab proxy", "pgbouncer")
	if rs[3].Round != 1 || rs[3].Target != "erplab proxy" {
		t.Errorf("round 2 starts with %+v, want erplab proxy", rs[3])
	}
	rs = bench(t, b, true, 2, "prepared")
	checkResults(t, rs, "direct", "erplab proxy", "pgbouncer", AATarget)
	if got := Table(rs); !strings.Contains(got, AATarget+" / pgbouncer per round") {
		t.Errorf("A/A table:\n%s", got)
	}
	if _, err := Run(context.Background(), Options{Upstream: srv.DSN(t, "postgres"), AA: true}); err == nil || !strings.Contains(err.Error(), "needs pgbouncer") {
		t.Errorf("A/A without pgbouncer: %v", err)
	}
}

// The floor relay is a target of its own, started for its runs only:
// with it (and PgBouncer when installed) the rounds rotate over every
// target, the table has the floor's lines, and the floor's extra P is
// given back.
func TestBenchFloor(t *testing.T) {
	ctx := context.Background()
	dsn := srv.NewDatabase(t)
	if err := Init(ctx, pgbench(t), dsn, 1); err != nil {
		t.Fatal(err)
	}
	b, _ := FindPgBouncer()
	targets := []string{"direct", "erplab proxy"}
	if b != "" {
		targets = append(targets, "pgbouncer")
	}
	targets = append(targets, FloorTarget)
	procs := runtime.GOMAXPROCS(0)
	rs, err := Run(ctx, Options{Upstream: dsn, Duration: time.Second, Clients: []int{2}, Modes: []string{"prepared"},
		PgBench: pgbench(t), PgBouncer: b, Rounds: 2, Floor: true})
	if err != nil {
		t.Fatal(err)
	}
	checkResults(t, rs, targets...)
	got := Table(rs)
	t.Logf("\n%s", got)
	want := []string{"floor relay: tps p50 p99", "floor relay +", "erplab proxy / floor relay per round"}
	if b != "" {
		want = append(want, "floor relay / pgbouncer per round")
	}
	for _, w := range want {
		if !strings.Contains(got, w) {
			t.Errorf("table lacks %q:\n%s", w, got)
		}
	}
	if n := runtime.GOMAXPROCS(0); n != procs {
		t.Errorf("GOMAXPROCS %d after the bench, want %d", n, procs)
	}
}

// backendsAfterRun records, at each progress line (written after a run
// and its target's release), how many backends the upstream database
// has besides the check's own and erplab's side connections.
type backendsAfterRun struct {
	t     *testing.T
	conn  *pgx.Conn
	db    string
	lines []string
	count []int
}

func (b *backendsAfterRun) Write(p []byte) (int, error) {
	// A backend whose client PgBouncer has just closed may still be
	// exiting (CI saw one, once): poll for a moment. Without the
	// release PgBouncer keeps them for 10 minutes.
	var n int
	for deadline := time.Now().Add(2 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if err := b.conn.QueryRow(context.Background(), "SELECT count(*) FROM pg_stat_activity WHERE datname = $1 AND pid <> pg_backend_pid() AND application_name IS DISTINCT FROM 'erplab proxy (side)'", b.db).Scan(&n); err != nil {
			b.t.Error(err)
		}
		if n == 0 || time.Now().After(deadline) {
			break
		}
	}
	b.lines = append(b.lines, string(p))
	b.count = append(b.count, n)
	return len(p), nil
}

// After a PgBouncer's run its server connections are closed (RECONNECT
// on its admin console), so the next target's clients find the server's
// connection slots free: no backend but the erplab proxy's side
// connection is left when the progress line of a PgBouncer run is
// written (each PgBouncer also closed the one its readiness check made).
func TestPgBouncerReleasesItsServers(t *testing.T) {
	b, err := FindPgBouncer()
	pgtest.Need(t, "pgbouncer", err)
	ctx := context.Background()
	dsn := srv.NewDatabase(t)
	if err := Init(ctx, pgbench(t), dsn, 1); err != nil {
		t.Fatal(err)
	}
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	w := &backendsAfterRun{t: t, conn: conn, db: conn.Config().Database}
	if _, err := Run(ctx, Options{Upstream: dsn, Duration: time.Second, Clients: []int{4}, Modes: []string{"simple"},
		PgBench: pgbench(t), PgBouncer: b, AA: true, Progress: w}); err != nil {
		t.Fatal(err)
	}
	seen := 0
	for i, l := range w.lines {
		if strings.Contains(l, "pgbouncer") {
			seen++
			if w.count[i] != 0 {
				t.Errorf("%d backends left after %q", w.count[i], strings.TrimSpace(l))
			}
		}
	}
	if seen != 2 {
		t.Errorf("%d PgBouncer runs, want 2: %q", seen, w.lines)
	}
}

// Table reports medians over rounds and pairs each proxy run with the
// direct run of its round.
func TestTableMedians(t *testing.T) {
	us := func(n int) time.Duration { return time.Duration(n) * time.Microsecond }
	var rs []Result
	for round, v := range []struct{ dTPS, dP50, pTPS, pP50 float64 }{
		{1000, 100, 800, 150}, // added 50, ratio 0.8
		{500, 300, 450, 310},  // added 10, ratio 0.9
		{900, 110, 450, 190},  // added 80, ratio 0.5
	} {
		rs = append(rs,
			Result{Target: "direct", Mode: "simple", Clients: 1, TPS: v.dTPS, P50: us(int(v.dP50)), P99: us(int(v.dP50) * 2), Round: round},
			Result{Target: "erplab proxy", Mode: "simple", Clients: 1, TPS: v.pTPS, P50: us(int(v.pP50)), P99: us(int(v.pP50) * 2), Round: round})
	}
	got := Table(rs)
	for _, want := range []string{"medians of 3 rounds", "erplab proxy +50/+100 µs 0.80", "    900   110 µs"} {
		if !strings.Contains(got, want) {
			t.Errorf("table lacks %q:\n%s", want, got)
		}
	}
}

// Table puts erplab's proxy against PgBouncer per round: the median of
// the per-round tps and p99 ratios with the order-statistic interval of
// the median (6 rounds: [min, max], coverage 1 - 2/64) and the range;
// with fewer rounds, no interval.
func TestTableHeadToHead(t *testing.T) {
	us := func(n int) time.Duration { return time.Duration(n) * time.Microsecond }
	build := func(rounds int) []Result {
		var rs []Result
		for round := range rounds {
			// erplab tps 900..1400 against 1000: ratios 0.90, 1.00, ..., p99 200 against 100..
			e := 900 + 100*float64(round)
			rs = append(rs,
				Result{Target: "erplab proxy", Mode: "prepared", Clients: 8, TPS: e, P50: us(100), P99: us(200), Round: round},
				Result{Target: "pgbouncer", Mode: "prepared", Clients: 8, TPS: 1000, P50: us(100), P99: us(100 * (round + 1)), Round: round})
		}
		return rs
	}
	got := Table(build(6))
	// tps ratios 0.9 1.0 1.1 1.2 1.3 1.4: median 1.15, interval [0.90, 1.40];
	// p99 ratios 2, 1, 0.67, 0.5, 0.4, 0.33: median 0.58
	for _, want := range []string{
		"erplab proxy / pgbouncer per round",
		"prepared    8 | tps 1.15 [0.90, 1.40] (0.90-1.40) over 6 rounds | p99 0.58 [0.33, 2.00] (0.33-2.00) over 6 rounds",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("table lacks %q:\n%s", want, got)
		}
	}
	if got := Table(build(3)); !strings.Contains(got, "tps 1.00 [no interval: 6 rounds needed] (0.90-1.10) over 3 rounds") {
		t.Errorf("3 rounds:\n%s", got)
	}
	if got := Table(build(1)); strings.Contains(got, "per round") {
		t.Errorf("1 round has no head-to-head:\n%s", got)
	}
	// The A/A PgBouncer's own lines: tps 960..1160 against 1000 (ratios
	// 0.96..1.16: median 1.06), p99 100 against 100..600 (1 .. 0.17: 0.29).
	rs := build(6)
	for round := range 6 {
		rs = append(rs, Result{Target: AATarget, Mode: "prepared", Clients: 8, TPS: 960 + 40*float64(round), P50: us(100), P99: us(100), Round: round})
	}
	got = Table(rs)
	for _, want := range []string{
		"erplab proxy / pgbouncer per round",
		"pgbouncer A/A / pgbouncer per round",
		"prepared    8 | tps 1.06 [0.96, 1.16] (0.96-1.16) over 6 rounds | p99 0.29 [0.17, 1.00] (0.17-1.00) over 6 rounds",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("A/A table lacks %q:\n%s", want, got)
		}
	}
	// The A/A median is 6 % from 1.0: the cell gets the warning; one of
	// 1.00 gets none.
	if !strings.Contains(got, "warning: two identical PgBouncers differ by +6 % in tps here") {
		t.Errorf("no A/A warning:\n%s", got)
	}
	rs = build(6)
	for round := range 6 {
		rs = append(rs, Result{Target: AATarget, Mode: "prepared", Clients: 8, TPS: 1000, P50: us(100), P99: us(100), Round: round})
	}
	if got := Table(rs); strings.Contains(got, "warning") || !strings.Contains(got, AATarget+" / pgbouncer per round") {
		t.Errorf("A/A at 1.00:\n%s", got)
	}
	// The floor relay's lines: tps 1000..1100 against PgBouncer's 1000
	// (ratios 1.00..1.10: median 1.05), p99 100 against 100..600 (1 ..
	// 0.17: median 0.29); erplab's 900..1400 against the floor's
	// 1000..1100 (0.90, 0.98, 1.06, 1.13, 1.20, 1.27: median 1.09), p99
	// 200 against 100 (2.00).
	rs = build(6)
	for round := range 6 {
		rs = append(rs, Result{Target: FloorTarget, Mode: "prepared", Clients: 8, TPS: 1000 + 20*float64(round), P50: us(100), P99: us(100), Round: round})
	}
	got = Table(rs)
	for _, want := range []string{
		"floor relay / pgbouncer per round",
		"prepared    8 | tps 1.05 [1.00, 1.10] (1.00-1.10) over 6 rounds | p99 0.29 [0.17, 1.00] (0.17-1.00) over 6 rounds",
		"erplab proxy / floor relay per round",
		"prepared    8 | tps 1.09 [0.90, 1.27] (0.90-1.27) over 6 rounds | p99 2.00 [2.00, 2.00] (2.00-2.00) over 6 rounds",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("floor table lacks %q:\n%s", want, got)
		}
	}
	// Without PgBouncer the floor still gets erplab's line.
	var noBouncer []Result
	for _, r := range rs {
		if r.Target != "pgbouncer" {
			noBouncer = append(noBouncer, r)
		}
	}
	if got := Table(noBouncer); !strings.Contains(got, "erplab proxy / floor relay per round") || strings.Contains(got, "/ pgbouncer") {
		t.Errorf("floor without PgBouncer:\n%s", got)
	}
}
