package sampler

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/erplab/erplab/internal/pgtest"
	"github.com/erplab/erplab/internal/storm"
)

var srv *pgtest.Server

func TestMain(m *testing.M) { os.Exit(pgtest.RunWith(m, &srv, pgtest.Options{WaitSampling: true})) }

func connect(t testing.TB, dsn string) *pgx.Conn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close(context.Background()) })
	return c
}

func newSampler(t testing.TB, dsn string, opts Options) *Sampler {
	t.Helper()
	s, err := Connect(context.Background(), dsn, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close(context.Background()) })
	return s
}

func sample(t testing.TB, s *Sampler) *Sample {
	t.Helper()
	x, err := s.Sample(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return x
}

// waitFor polls cond every 50 ms until it returns true or 20 s pass.
func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if cond() {
			return
		}
	}
	t.Fatalf("timed out waiting for %s", what)
}

// waitActivity waits until pg_stat_activity shows exactly the client
// backends described by want (state or "wait:<event>" -> count) besides
// the checking connection itself, read with an independent query on conn.
func waitActivity(t testing.TB, conn *pgx.Conn, want map[string]int) {
	t.Helper()
	waitFor(t, fmt.Sprintf("activity %v", want), func() bool {
		rows, err := conn.Query(context.Background(), `
			SELECT coalesce(state, 'null'), coalesce(wait_event, '') FROM pg_stat_activity
			WHERE backend_type = 'client backend' AND pid <> pg_backend_pid()`)
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]int{}
		for rows.Next() {
			var st, we string
			if err := rows.Scan(&st, &we); err != nil {
				t.Fatal(err)
			}
			got[st]++
			if we != "" && st == "active" {
				got["wait:"+we]++
			}
		}
		if rows.Err() != nil {
			t.Fatal(rows.Err())
		}
		for k, v := range want {
			if got[k] != v {
				return false
			}
		}
		for k, v := range got {
			if _, ok := want[k]; !ok && v != 0 && !strings.HasPrefix(k, "wait:") {
				return false
			}
		}
		return true
	})
}

// TestSessionsKnownActivity creates N sessions in pg_sleep, M idle in
// transaction and K blocked on an advisory lock that one idle session
// holds, and checks the sampler's counts and wait events exactly.
func TestSessionsKnownActivity(t *testing.T) {
	const N, M, K = 3, 2, 4
	dsn := srv.NewDatabase(t)
	s := newSampler(t, dsn, Options{Queries: 20})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	holder := connect(t, dsn)
	if _, err := holder.Exec(ctx, "SELECT pg_advisory_lock(42)"); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel() // cancels the sleeping and blocked statements first
	run := func(sql string) {
		c := connect(t, dsn)
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, _ = c.Exec(ctx, sql) // ends with ctx cancel
		}()
	}
	for range N {
		run("SELECT pg_sleep(60)")
	}
	for range K {
		run("SELECT pg_advisory_lock(42)")
	}
	for range M {
		c := connect(t, dsn)
		if _, err := c.Exec(ctx, "BEGIN; SELECT 1"); err != nil {
			t.Fatal(err)
		}
	}
	// The holder checks: it is idle (holding its lock) when the sampler
	// runs. The sampler's own connection is the one idle session it sees.
	waitActivity(t, holder, map[string]int{"active": N + K, "idle": 1, "idle in transaction": M, "wait:PgSleep": N, "wait:advisory": K})

	got := sample(t, s)
	want := Sessions{Active: N + K, Idle: 1, IdleInTransaction: M}
	if got.Sessions != want {
		t.Errorf("sessions %+v, want %+v", got.Sessions, want)
	}
	wantWaits := map[string]int{"Timeout:PgSleep": N, "Lock:advisory": K}
	if fmt.Sprint(got.Waits) != fmt.Sprint(wantWaits) {
		t.Errorf("waits %v, want %v", got.Waits, wantWaits)
	}
	if len(got.Queries) != N+K {
		t.Fatalf("%d queries listed, want %d: %+v", len(got.Queries), N+K, got.Queries)
	}
	for i, q := range got.Queries {
		if i > 0 && q.Duration > got.Queries[i-1].Duration {
			t.Errorf("queries not oldest first: %v after %v", q.Duration, got.Queries[i-1].Duration)
		}
		switch {
		case q.Wait == "Lock:advisory" && q.Text == "SELECT pg_advisory_lock(42)":
		case q.Wait == "Timeout:PgSleep" && q.Text == "SELECT pg_sleep(60)":
		default:
			t.Errorf("unexpected query %+v", q)
		}
	}
	info := s.Info()
	if !info.Local || !info.HostSampled || !info.StatsPrivileged || info.VersionNum < 120000 {
		t.Errorf("info %+v", info)
	}
	if got.Host == nil || got.Host.Mem.Total == 0 {
		t.Errorf("local server but no host sample: %+v %s", got.Host, got.HostError)
	}
	if n := s.HostCPUs(); n < 1 { // top's crowd rule needs it (issue #33)
		t.Errorf("local server: HostCPUs %d", n)
	}
}

// TestParallelWorkersFolded runs a parallel query: the leader is one active
// session, its workers are counted apart and listed with the leader.
func TestParallelWorkersFolded(t *testing.T) {
	dsn := srv.NewDatabase(t)
	s := newSampler(t, dsn, Options{Queries: 5})
	c := connect(t, dsn)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	for _, q := range []string{
		// Six pages of ~1.5 kB rows: parallel seq scan hands out blocks,
		// so every worker gets some rows to sleep on.
		"CREATE TABLE p (g int, pad text)",
		"ALTER TABLE p ALTER pad SET STORAGE PLAIN",
		"INSERT INTO p SELECT g, repeat('x', 1500) FROM generate_series(1, 30) g",
		"ANALYZE p",
		"SET max_parallel_workers_per_gather = 2",
		"SET parallel_setup_cost = 0",
		"SET parallel_tuple_cost = 0",
		"SET min_parallel_table_scan_size = 0",
		"ALTER TABLE p SET (parallel_workers = 2)",
	} {
		if _, err := c.Exec(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	done := make(chan error, 1)
	go func() {
		_, err := c.Exec(ctx, "SELECT count(*) FROM p WHERE pg_sleep(0.1) IS NOT NULL")
		done <- err
	}()
	var got *Sample
	waitFor(t, "parallel workers", func() bool {
		got = sample(t, s)
		return got.ParallelWorkers > 0
	})
	if got.Sessions.Active != 1 {
		t.Errorf("active sessions %d, want 1 (the leader; workers folded)", got.Sessions.Active)
	}
	if len(got.Queries) != 1 || (s.Info().VersionNum >= 130000 && got.Queries[0].Workers != got.ParallelWorkers) {
		t.Errorf("queries %+v, want the leader with %d workers", got.Queries, got.ParallelWorkers)
	}
	cancel()
	<-done
}

// TestCatalogChurn creates temporary tables with indexes (keeping half,
// dropping half) and checks catalog sizes and insert/delete rates rise.
func TestCatalogChurn(t *testing.T) {
	dsn := srv.NewDatabase(t)
	s := newSampler(t, dsn, Options{Host: HostOff})
	base := sample(t, s)
	if len(base.Catalog) != 5 {
		t.Fatalf("catalog rows %+v, want 5", base.Catalog)
	}
	c := connect(t, dsn)
	ctx := context.Background()
	const tables = 60
	for i := range tables {
		if _, err := c.Exec(ctx, fmt.Sprintf("CREATE TEMP TABLE tt%d (id int PRIMARY KEY, v text, w numeric); CREATE INDEX ON tt%[1]d (v)", i)); err != nil {
			t.Fatal(err)
		}
	}
	for i := 0; i < tables; i += 2 {
		if _, err := c.Exec(ctx, fmt.Sprintf("DROP TABLE tt%d", i)); err != nil {
			t.Fatal(err)
		}
	}
	kept := sample(t, s)
	sizeKept := kept.CatalogBytes() // half the tables still exist
	// An idle backend flushes its statistics only after 10 s
	// (PGSTAT_IDLE_INTERVAL); one that exits flushes them at once. Exiting
	// also drops the other half of the temp tables.
	c.Close(ctx)
	byName := func(x *Sample) map[string]CatalogRel {
		m := map[string]CatalogRel{}
		for _, r := range x.Catalog {
			m[r.Name] = r
		}
		return m
	}
	b := byName(base)
	// The statistics may already have been flushed by the sample above:
	// its rates count too.
	ins, del := byName(kept)["pg_class"].InsPerS, byName(kept)["pg_class"].DelPerS
	var last *Sample
	// Backends flush table statistics when idle, at most once a second.
	waitFor(t, "catalog statistics", func() bool {
		last = sample(t, s)
		m := byName(last)
		ins += m["pg_class"].InsPerS
		del += m["pg_class"].DelPerS
		return m["pg_class"].Ins-b["pg_class"].Ins >= 4*tables && m["pg_class"].Del-b["pg_class"].Del >= 4*tables
	})
	m := byName(last)
	if ins <= 0 || del <= 0 {
		t.Errorf("pg_class insert rate sum %.2f, delete rate sum %.2f: want > 0", ins, del)
	}
	for _, rel := range []string{"pg_class", "pg_attribute", "pg_depend", "pg_type", "pg_index"} {
		if m[rel].Ins <= b[rel].Ins || m[rel].Del <= b[rel].Del {
			t.Errorf("%s: n_tup_ins %d -> %d, n_tup_del %d -> %d: want both to rise", rel, b[rel].Ins, m[rel].Ins, b[rel].Del, m[rel].Del)
		}
	}
	if sizeKept <= base.CatalogBytes() {
		t.Errorf("catalog size %d -> %d bytes with %d temp tables, want growth", base.CatalogBytes(), sizeKept, tables/2)
	}
	if m["pg_attribute"].Bytes <= b["pg_attribute"].Bytes {
		t.Errorf("pg_attribute %d -> %d bytes, want growth", b["pg_attribute"].Bytes, m["pg_attribute"].Bytes)
	}
}

// TestTempFiles sorts with a tiny work_mem and checks temp files appear.
func TestTempFiles(t *testing.T) {
	dsn := srv.NewDatabase(t)
	s := newSampler(t, dsn, Options{Host: HostOff})
	base := sample(t, s)
	c := connect(t, dsn)
	ctx := context.Background()
	if _, err := c.Exec(ctx, "SET work_mem = '64kB'"); err != nil {
		t.Fatal(err)
	}
	var n int64
	if err := c.QueryRow(ctx, "SELECT count(*) FROM (SELECT g FROM generate_series(1, 200000) g ORDER BY g DESC) s").Scan(&n); err != nil {
		t.Fatal(err)
	}
	c.Close(ctx) // an exiting backend flushes its statistics at once
	var rate, bytesRate float64
	var last *Sample
	waitFor(t, "temp files in pg_stat_database", func() bool {
		last = sample(t, s)
		if last.DB != nil {
			rate += last.DB.TempFiles
			bytesRate += last.DB.TempBytes
		}
		return last.DBTotals.TempFiles > base.DBTotals.TempFiles
	})
	if rate <= 0 || bytesRate <= 0 {
		t.Errorf("temp files rate sum %.2f, bytes rate sum %.2f: want > 0", rate, bytesRate)
	}
	if d := last.DBTotals.TempBytes - base.DBTotals.TempBytes; d < 200000*4 {
		t.Errorf("temp bytes grew by %d, want at least the sorted data (%d)", d, 200000*4)
	}
	if last.DBTotals.XactCommit <= base.DBTotals.XactCommit {
		t.Errorf("commits did not rise: %d -> %d", base.DBTotals.XactCommit, last.DBTotals.XactCommit)
	}
}

// countingConn counts writes to the server: one write per round trip.
type countingConn struct {
	net.Conn
	writes *atomic.Int64
}

func (c countingConn) Write(b []byte) (int, error) {
	c.writes.Add(1)
	return c.Conn.Write(b)
}

// connectCounting opens a connection whose writes are counted.
func connectCounting(t testing.TB, dsn string) (*pgx.Conn, *atomic.Int64) {
	t.Helper()
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		t.Fatal(err)
	}
	var writes atomic.Int64
	dial := cfg.DialFunc
	cfg.DialFunc = func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := dial(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return countingConn{Conn: c, writes: &writes}, nil
	}
	conn, err := pgx.ConnectConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	return conn, &writes
}

// TestOneRoundTripPerSample checks that a sample, all sources and the
// query list included, is one write to the server after the first.
func TestOneRoundTripPerSample(t *testing.T) {
	conn, writes := connectCounting(t, srv.DSN(t, "postgres"))
	s, err := New(context.Background(), conn, Options{Queries: 10})
	if err != nil {
		t.Fatal(err)
	}
	sample(t, s) // prepares the statements
	before := writes.Load()
	const n = 5
	for range n {
		sample(t, s)
	}
	if got := writes.Load() - before; got != n {
		t.Errorf("%d writes for %d samples, want one each", got, n)
	}
	// The sampler's own backend is active while it samples, yet never
	// counted nor listed.
	x := sample(t, s)
	if x.Sessions.Active != 0 || len(x.Queries) != 0 {
		t.Errorf("the sampler sees itself: %+v %+v", x.Sessions, x.Queries)
	}
}

// TestSessionStorm runs a Session at 100 ms and makes a real storm:
// sessions pile up on an advisory lock within a second.
func TestSessionStorm(t *testing.T) {
	dsn := srv.NewDatabase(t)
	holder := connect(t, dsn)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if _, err := holder.Exec(ctx, "SELECT pg_advisory_lock(7)"); err != nil {
		t.Fatal(err)
	}
	const K = 12
	conns := make([]*pgx.Conn, K)
	for i := range conns {
		conns[i] = connect(t, dsn)
	}
	var stormsSeen atomic.Int64
	var samplesSeen atomic.Int64
	start := time.Now()
	sess, err := Start(ctx, dsn, start, SessionOptions{
		Interval: 100 * time.Millisecond,
		Options:  Options{Host: HostOff},
		Rule:     storm.Rule{Window: 3 * time.Second, Factor: 4, MinActive: 10, CPUSaturated: 90, EndRatio: 0.5},
		OnSample: func(*Sample) { samplesSeen.Add(1) },
		OnStorm:  func(e storm.Event) { stormsSeen.Add(1) },
	})
	if err != nil {
		t.Fatal(err)
	}
	defer sess.Stop()
	waitFor(t, "a few calm samples", func() bool { return samplesSeen.Load() >= 3 })

	var wg sync.WaitGroup
	for _, c := range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// Transaction-level: each waiter releases the lock at its
			// statement's end, so all get through after the holder.
			_, _ = c.Exec(ctx, "SELECT pg_advisory_xact_lock(7)")
		}()
	}
	waitFor(t, "the storm", func() bool { return stormsSeen.Load() >= 1 })
	// Release: the waiters get the lock one after another and finish.
	if _, err := holder.Exec(ctx, "SELECT pg_advisory_unlock(7)"); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	waitFor(t, "the storm to end", func() bool { return stormsSeen.Load() >= 2 })
	sess.Stop()

	o, err := ReadObservations(sess.Observations())
	if err != nil {
		t.Fatal(err)
	}
	if len(o.Storms) != 1 {
		t.Fatalf("storms %+v, want 1", o.Storms)
	}
	e := o.Storms[0]
	if e.WaitEvent != "Lock:advisory" || e.To < 10 || e.From != 0 || e.EndT == nil || e.CPUKnown {
		t.Errorf("storm %+v", e)
	}
	if !strings.HasPrefix(e.Message, "Lock:advisory storm: active 0 -> ") || !strings.HasSuffix(e.Message, ", CPU n/a") {
		t.Errorf("message %q", e.Message)
	}
	if len(o.Series) < 5 || o.Format != ObservationsFormat || o.IntervalS != 0.1 {
		t.Fatalf("observations: %d points, format %q, interval %v", len(o.Series), o.Format, o.IntervalS)
	}
	for i := 1; i < len(o.Series); i++ {
		if o.Series[i].T <= o.Series[i-1].T {
			t.Fatalf("T not increasing at %d: %v then %v", i, o.Series[i-1].T, o.Series[i].T)
		}
	}
	if o.Cost.Samples != int64(len(o.Series)) || o.Cost.RoundTripMeanMs <= 0 || o.Cost.RoundTripsPerSample != 1 {
		t.Errorf("cost %+v for %d points", o.Cost, len(o.Series))
	}
	if e.T < o.Series[0].T || e.T > o.Series[len(o.Series)-1].T {
		t.Errorf("storm at t=%v outside the series", e.T)
	}
}

// TestSessionObservationsJSON checks the recorded section's shape and the
// sampler's measured cost on a local server.
func TestSessionObservationsJSON(t *testing.T) {
	dsn := srv.NewDatabase(t)
	start := time.Now().Add(-2 * time.Second) // a run that started earlier
	var n atomic.Int64
	sess, err := Start(context.Background(), dsn, start, SessionOptions{Interval: 100 * time.Millisecond,
		OnSample: func(*Sample) { n.Add(1) }})
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, "samples", func() bool { return n.Load() >= 4 })
	if line := sess.ProgressLine(); !strings.HasPrefix(line, "active 0 idle ") || !strings.Contains(line, "| server tps ") {
		t.Errorf("progress line %q", line)
	}
	sess.Stop()
	sess.Stop() // idempotent
	raw := sess.Observations()
	var generic map[string]any
	if err := json.Unmarshal(raw, &generic); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"format", "interval_s", "server", "storm_rule", "sampler_cost", "series", "storms"} {
		if _, ok := generic[k]; !ok {
			t.Errorf("observations lack %q: %s", k, raw[:min(len(raw), 300)])
		}
	}
	o, err := ReadObservations(raw)
	if err != nil {
		t.Fatal(err)
	}
	if o.Series[0].T < 2 {
		t.Errorf("first T %v, want >= 2 (seconds since the given start)", o.Series[0].T)
	}
	p := o.Series[len(o.Series)-1]
	if p.Host == nil || p.DB == nil || len(p.Catalog) != 5 || p.Host.CPU.Idle+p.Host.CPU.Busy+p.Host.CPU.Iowait == 0 {
		t.Errorf("last point lacks host, db or catalog: %+v", p)
	}
	if !o.Server.HostSampled || o.Cost.BackendCPUMs < 0 || o.Cost.Samples < 4 {
		t.Errorf("server %+v cost %+v", o.Server, o.Cost)
	}
	if _, err := ReadObservations(json.RawMessage(`{"format":"x"}`)); err == nil {
		t.Error("wrong format accepted")
	}
}

func TestStartErrors(t *testing.T) {
	ctx := context.Background()
	if _, err := Start(ctx, srv.DSN(t, "postgres"), time.Now(), SessionOptions{Interval: 50 * time.Millisecond}); err == nil || !strings.Contains(err.Error(), "at least 100ms") {
		t.Errorf("short interval: %v", err)
	}
	if _, err := Start(ctx, srv.DSN(t, "postgres"), time.Now(), SessionOptions{Rule: storm.Rule{Factor: 2}}); err == nil {
		t.Error("invalid storm rule accepted")
	}
	_, err := Connect(ctx, "host=/nonexistent port=1 user=x password=sekrit dbname=y", Options{})
	if err == nil || strings.Contains(err.Error(), "sekrit") || strings.Contains(err.Error(), "\n") {
		t.Errorf("bad server: %v", err)
	}
}

// TestReconnect kills the sampler's backend; the next sample reconnects.
func TestReconnect(t *testing.T) {
	s := newSampler(t, srv.DSN(t, "postgres"), Options{Host: HostOff})
	sample(t, s)
	pid := s.Info().BackendPID
	admin := connect(t, srv.DSN(t, "postgres"))
	if _, err := admin.Exec(context.Background(), "SELECT pg_terminate_backend($1)", pid); err != nil {
		t.Fatal(err)
	}
	// The first sample after the kill may fail (the client learns of the
	// lost connection); then one reconnects.
	var got *Sample
	waitFor(t, "a sample on a new connection", func() bool {
		x, err := s.Sample(context.Background())
		got = x
		return err == nil
	})
	if s.Info().BackendPID == pid || got.DB == nil {
		t.Errorf("backend pid %d (was %d), db rates %+v", s.Info().BackendPID, pid, got.DB)
	}
}

// TestXminHorizon: a repeatable-read transaction holds a snapshot while
// another session uses transaction ids; the sample's xmin age counts
// them and its oldest transaction ages with the holder.
func TestXminHorizon(t *testing.T) {
	dsn := srv.NewDatabase(t)
	s := newSampler(t, dsn, Options{})
	ctx := context.Background()
	if got := sample(t, s); got.XminAge > 1 || got.OldestXactS != 0 {
		t.Errorf("no transaction open: xmin age %d, oldest %d s", got.XminAge, got.OldestXactS)
	}
	holder, burner := connect(t, dsn), connect(t, dsn)
	if _, err := holder.Exec(ctx, "BEGIN ISOLATION LEVEL REPEATABLE READ; SELECT 1"); err != nil {
		t.Fatal(err)
	}
	for range 5 {
		if _, err := burner.Exec(ctx, "SELECT pg_current_xact_id()"); err != nil {
			t.Fatal(err)
		}
	}
	var got *Sample
	waitFor(t, "the holder open for a second", func() bool { got = sample(t, s); return got.OldestXactS >= 1 })
	if got.XminAge < 5 {
		t.Errorf("xmin age %d after 5 transactions past the holder's snapshot, want >= 5", got.XminAge)
	}
}
