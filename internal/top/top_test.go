package top

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	tea "github.com/charmbracelet/bubbletea"
	"github.com/jackc/pgx/v5"

	"github.com/erplab/erplab/internal/pgtest"
	"github.com/erplab/erplab/internal/sampler"
	"github.com/erplab/erplab/internal/storm"
)

var srv *pgtest.Server

func TestMain(m *testing.M) { os.Exit(pgtest.RunWith(m, &srv, pgtest.Options{WaitSampling: true})) }

func connect(t *testing.T, dsn string) *pgx.Conn {
	t.Helper()
	c, err := pgx.Connect(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close(context.Background()) })
	return c
}

// TestPrintOnce is `erplab top --once` against a real server with known
// activity: two sessions in pg_sleep, one blocked on an advisory lock.
func TestPrintOnce(t *testing.T) {
	dsn := srv.NewDatabase(t)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	holder := connect(t, dsn)
	if _, err := holder.Exec(ctx, "SELECT pg_advisory_lock(5)"); err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{"SELECT pg_sleep(60)", "SELECT pg_sleep(60) /* second */", "SELECT pg_advisory_lock(5)"} {
		c := connect(t, dsn)
		wg.Add(1)
		go func() { defer wg.Done(); _, _ = c.Exec(ctx, q) }()
	}
	s, err := sampler.Connect(ctx, dsn, sampler.Options{Queries: DefaultQueries})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(context.Background())
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		x, err := s.Sample(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if x.Waits["Lock:advisory"] == 1 && x.Waits["Timeout:PgSleep"] == 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("activity did not start: %v", x.Waits)
		}
	}

	var out bytes.Buffer
	if err := Print(ctx, &out, s, Options{Interval: 200 * time.Millisecond, Width: 120}, 1); err != nil {
		t.Fatal(err)
	}
	text := out.String()
	for _, re := range []string{
		`(?m)^erplab top - PostgreSQL \d+\.\d+, database t_testprintonce_\d+ \(local\)`,
		`(?m)^tps \d+\.\d `,
		`(?m)^CPU \d+ % busy: user `,
		`(?m)^catalog \d+\.\d MiB \(\+.*/s\): attribute .* class .* depend .* index .* type `,
		`(?m)^catalog rows/s inserted/deleted: attribute \+\d+/-\d+, class `,
		`(?m)^SESSIONS BY STATE +COUNT$`,
		`(?m)^active +3$`,
		`(?m)^idle +1$`, // the lock holder; the sampler is not counted
		`(?m)^total +4$`,
		`(?m)^ACTIVE SESSIONS BY WAIT EVENT +COUNT  TREND$`,
		`(?m)^Timeout:PgSleep +2  [▁-█]{2}$`,
		`(?m)^Lock:advisory +1  [▁-█]{2}$`,
		`(?m)^LONGEST-RUNNING ACTIVE QUERIES$`,
		`(?m)^ +\d+ +\d+(\.\d)? (s|ms)  Lock:advisory +postgres@t_\S*… SELECT pg_advisory_lock\(5\)$`,
		`(?m)^ +\d+ +\d+(\.\d)? (s|ms)  Timeout:PgSleep +postgres@t_\S*… SELECT pg_sleep\(60\) /\* second \*/$`,
	} {
		if !regexp.MustCompile(re).MatchString(text) {
			t.Errorf("output lacks %s:\n%s", re, text)
		}
	}
	for i, l := range strings.Split(text, "\n") {
		if w := len([]rune(l)); w > 120 {
			t.Errorf("line %d is %d cells wide, want <= 120: %q", i, w, l)
		}
	}
	if strings.Contains(text, "\x1b[") {
		t.Error("plain output contains escape sequences")
	}
}

// TestPrintCount prints two snapshots; the trend grows by one per sample.
func TestPrintCount(t *testing.T) {
	s, err := sampler.Connect(context.Background(), srv.DSN(t, "postgres"), sampler.Options{Queries: 5})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(context.Background())
	var out bytes.Buffer
	if err := Print(context.Background(), &out, s, Options{Interval: 100 * time.Millisecond}, 2); err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(out.String(), TitleSessions); n != 2 {
		t.Errorf("%d snapshots, want 2:\n%s", n, out.String())
	}
	if err := Print(context.Background(), &out, s, Options{Interval: 10 * time.Millisecond}, 1); err == nil {
		t.Error("interval under 100ms accepted")
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := Print(ctx, &out, s, Options{}, 1); err == nil {
		t.Error("cancelled context: no error")
	}
}

// fakeSample builds a sample for view tests.
func fakeSample(at time.Time, active int, waits map[string]int) *sampler.Sample {
	return &sampler.Sample{
		Time:     at,
		Sessions: sampler.Sessions{Active: active, Idle: 600, IdleInTransaction: 3},
		Waits:    waits,
		DB:       &sampler.DBRates{TPS: 1234.5, Commits: 1230, Rollbacks: 4.5, TempFiles: 2, TempBytes: 3 << 20, BlksHit: 999, BlksRead: 1},
		Catalog:  []sampler.CatalogRel{{Name: "pg_class", Bytes: 30 << 20, InsPerS: 40, DelPerS: 38, GrowthBytes: 8192}},
		Host: &sampler.Host{Rates: true, CPU: sampler.CPU{User: 20, System: 15, Idle: 64, Busy: 35},
			Mem: sampler.Mem{Total: 24 << 30, Available: 20 << 30}},
		Queries: []sampler.Query{
			{PID: 101, User: "erp", Database: "erp", Duration: 12300 * time.Millisecond, Wait: "LWLock:LockManager",
				Text: "CREATE TEMPORARY TABLE tt_Документ_Реализация (id bytea, ref bytea, amount numeric) " + strings.Repeat("x", 200)},
			{PID: 102, User: "erp", Database: "erp", Duration: 800 * time.Millisecond, Wait: "CPU", Text: "SELECT 1", Workers: 2},
		},
	}
}

// TestRenderStorm feeds a synthetic storm and checks the header and trend.
func TestRenderStorm(t *testing.T) {
	var fired []storm.Event
	st, err := newState(sampler.Info{Version: "15.18 (Debian)", Database: "erp", Local: true, StatsPrivileged: true},
		storm.Rule{}, 0, func(e storm.Event) { fired = append(fired, e) })
	if err != nil {
		t.Fatal(err)
	}
	t0 := st.start
	for i, a := range []int{12, 12, 12, 240} {
		w := map[string]int{"CPU": 12}
		if a > 12 {
			w = map[string]int{"LWLock:LockManager": 200, "CPU": 40}
		}
		st.add(fakeSample(t0.Add(time.Duration(i+1)*time.Second), a, w))
	}
	if len(fired) != 1 || fired[0].WaitEvent != "LWLock:LockManager" {
		t.Fatalf("storms %+v", fired)
	}
	out := render(st, viewOpts{width: 100, interval: time.Second})
	for _, want := range []string{
		"STORM LWLock:LockManager storm: active 12 -> 240 in 1 s, CPU 35 %",
		"tps 1234.5 (commit 1230.0 rollback 4.5)  temp files 2.0/s 3.0 MiB/s  deadlocks 0.0/s  hit 99.9 %\n",
		"CPU 35 % busy: user 20.0 system 15.0 iowait 0.0 nice 0.0 irq 0.0 softirq 0.0 steal 0.0\n",
		"memory available 20.0 GiB of 24.0 GiB, dirty 0 B; tasks running 0, blocked on I/O 0\n",
		"catalog 30.0 MiB (+8.0 KiB/s): class 30.0 MiB\ncatalog rows/s inserted/deleted: class +40/-38\n",
		"LWLock:LockManager                  200  ▁▁▁█\n",
		"CPU                                  40  ▃▃▃█\n",
		"[+2 workers] SELECT 1",
		"CREATE TEMPORARY TABLE tt_Документ_Р…\n", // cut to the width
	} {
		if !strings.Contains(out, want) {
			t.Errorf("view lacks %q:\n%s", want, out)
		}
	}
	for _, l := range strings.Split(out, "\n") {
		if w := len([]rune(l)); w > 100 {
			t.Errorf("line of %d cells: %q", w, l)
		}
	}
	// Sort by name puts CPU first.
	out = render(st, viewOpts{width: 100, interval: time.Second, sort: SortName})
	if strings.Index(out, "\nCPU ") > strings.Index(out, "\nLWLock:LockManager ") {
		t.Errorf("sort by name: CPU after LWLock:\n%s", out)
	}
	// A short screen drops query rows, keeps the tables and the footer.
	out = render(st, viewOpts{width: 100, height: 26, interval: time.Second, footer: "q quit"})
	if n := strings.Count(out, "\n") + 1; n > 26 || !strings.HasSuffix(out, "q quit") || !strings.Contains(out, TitleWaits) {
		t.Errorf("short screen: %d lines:\n%s", n, out)
	}
}

// TestModelKeys drives the interactive model with key messages.
func TestModelKeys(t *testing.T) {
	st, _ := newState(sampler.Info{}, storm.Rule{}, 0, nil)
	m := &model{st: st, interval: time.Second, width: 100, height: 40}
	key := func(k string) {
		msg := tea.KeyMsg{Type: tea.KeyRunes, Runes: []rune(k)}
		if k == " " {
			msg = tea.KeyMsg{Type: tea.KeySpace, Runes: []rune{' '}}
		}
		m.Update(msg)
	}
	key("+")
	if m.interval != 2*time.Second {
		t.Errorf("+ from 1s: %s", m.interval)
	}
	for range 3 {
		key("-")
	}
	if m.interval != 200*time.Millisecond {
		t.Errorf("- x3 from 2s: %s", m.interval)
	}
	for range 5 {
		key("-")
	}
	if m.interval != 100*time.Millisecond {
		t.Errorf("interval floor: %s", m.interval)
	}
	key("p")
	if !m.paused || !strings.Contains(m.View(), "PAUSED") {
		t.Error("p does not pause")
	}
	key(" ")
	if m.paused {
		t.Error("space does not resume")
	}
	key("s")
	if m.sort != SortName || !strings.Contains(m.View(), "sort: name") {
		t.Error("s does not switch the sort")
	}
	// A stale tick (older chain) does nothing; ticks while paused only re-arm.
	if _, cmd := m.Update(tickMsg{gen: m.gen - 1}); cmd != nil {
		t.Error("stale tick re-armed")
	}
	if _, cmd := m.Update(tea.KeyMsg{Type: tea.KeyRunes, Runes: []rune("q")}); cmd == nil {
		t.Error("q does not quit")
	}
	m.Update(sampleMsg{err: context.DeadlineExceeded})
	if !strings.Contains(m.View(), "error: context deadline exceeded") {
		t.Errorf("sample error not shown:\n%s", m.View())
	}
}

func TestFormatters(t *testing.T) {
	for v, want := range map[float64]string{0: "0 B", 1023: "1023 B", 1536: "1.5 KiB", 30 << 20: "30.0 MiB"} {
		if got := bytesHuman(v); got != want {
			t.Errorf("bytesHuman(%v) = %q, want %q", v, got, want)
		}
	}
	for d, want := range map[time.Duration]string{850 * time.Millisecond: "850 ms", 12300 * time.Millisecond: "12.3 s",
		245 * time.Second: "4m05s", 7380 * time.Second: "2h03m"} {
		if got := durHuman(d); got != want {
			t.Errorf("durHuman(%v) = %q, want %q", d, got, want)
		}
	}
	if got := sparkline([]int{0, 1, 2, 4}); got != "▁▂▄█" {
		t.Errorf("sparkline %q", got)
	}
}

// TestPrintWaitSampling is `erplab top --once` on a database with
// pg_wait_sampling: the wait table shows its profile (mean sessions at
// 10 ms sampling) and the header says so.
func TestPrintWaitSampling(t *testing.T) {
	srv.NeedWaitSampling(t)
	dsn := srv.NewDatabase(t)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	if _, err := connect(t, dsn).Exec(ctx, "CREATE EXTENSION pg_wait_sampling"); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		c := connect(t, dsn)
		wg.Add(1)
		go func() { defer wg.Done(); _, _ = c.Exec(ctx, "SELECT pg_sleep(60)") }()
	}
	s, err := sampler.Connect(ctx, dsn, sampler.Options{Queries: DefaultQueries})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(context.Background())
	if !s.Info().WaitSampling {
		t.Fatalf("pg_wait_sampling not detected: %+v", s.Info())
	}
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		x, err := s.Sample(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if x.Waits["Timeout:PgSleep"] == 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("activity did not start: %v", x.Waits)
		}
	}
	var out bytes.Buffer
	if err := Print(ctx, &out, s, Options{Interval: 500 * time.Millisecond, Width: 120}, 1); err != nil {
		t.Fatal(err)
	}
	text := out.String()
	for _, re := range []string{
		`(?m)^waits: pg_wait_sampling every 10 ms in the server, mean sessions over \d+\.\d s; CPU from pg_stat_activity \(instant\)$`,
		`(?m)^ACTIVE SESSIONS BY WAIT EVENT +MEAN  TREND$`,
		// Two sessions slept through the interval: a mean of about 2 (less
		// when a loaded machine delays the collector's ticks).
		`(?m)^Timeout:PgSleep +(1\.\d|2\.[0-4])  [▁-█]{1,2}$`,
	} {
		if !regexp.MustCompile(re).MatchString(text) {
			t.Errorf("output lacks %s:\n%s", re, text)
		}
	}
}

// TestPrintOtherCatalogs: top connected to one database shows another
// database's catalog figures, read on a connection of its own.
func TestPrintOtherCatalogs(t *testing.T) {
	dsnA, dsnB := srv.NewDatabase(t), srv.NewDatabase(t)
	cfgB, err := pgx.ParseConfig(dsnB)
	if err != nil {
		t.Fatal(err)
	}
	s, err := sampler.Connect(context.Background(), dsnA, sampler.Options{Queries: 5, Catalogs: sampler.OtherCatalogs{Names: []string{cfgB.Database}, Every: time.Millisecond}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(context.Background())
	var out bytes.Buffer
	if err := Print(context.Background(), &out, s, Options{Interval: 200 * time.Millisecond, Width: 160}, 1); err != nil {
		t.Fatal(err)
	}
	text := out.String()
	for _, re := range []string{
		`(?m)^other databases' catalogs \(own connection each, read at \d\d:\d\d:\d\d\): ` + cfgB.Database + `$`,
		`(?m)^  ` + cfgB.Database + `: catalog \d+\.\d MiB \([+-]\d+(\.\d)? (B|KiB|MiB)/s\), rel files \d+\.\d/s$`,
	} {
		if !regexp.MustCompile(re).MatchString(text) {
			t.Errorf("output lacks %s:\n%s", re, text)
		}
	}
}

// TestOtherCatalogLines orders the other databases by churn, then size,
// errors last, and cuts the list after maxOtherRows.
func TestOtherCatalogLines(t *testing.T) {
	db := func(name string, bytes int64, ins float64) sampler.DatabaseCatalog {
		return sampler.DatabaseCatalog{Database: name, Catalog: []sampler.CatalogRel{{Name: "pg_class", Bytes: bytes, InsPerS: ins}}}
	}
	ds := []sampler.DatabaseCatalog{db("a", 1<<20, 0), {Database: "bad", Error: "connect: refused"}, db("b", 2<<20, 0), db("erp", 9<<20, 350), db("c", 3<<20, 0), db("d", 1<<10, 0), db("e", 1<<10, 1)}
	got := otherCatalogLines(ds, time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC))
	want := []string{
		"other databases' catalogs (own connection each, read at 12:00:00): a, bad, b, erp, c, d, e",
		"  erp: catalog 9.0 MiB (+0 B/s), rel files 350.0/s",
		"  e: catalog 1.0 KiB (+0 B/s), rel files 1.0/s",
		"  c: catalog 3.0 MiB (+0 B/s), rel files 0.0/s",
		"  b: catalog 2.0 MiB (+0 B/s), rel files 0.0/s",
		"  a: catalog 1.0 MiB (+0 B/s), rel files 0.0/s",
		"  ... and 2 more",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if otherCatalogLines(nil, time.Time{}) != nil {
		t.Error("lines without a reading")
	}
}

// TestSaturatedStorm: on a saturated 2-CPU host (CPU 98 %) the rise rule
// stays silent; with the host's CPU count (as Print and Run pass from
// Sampler.HostCPUs) the crowd rule flags the LockManager queue top showed
// during a storm run and doctor reported (issue #33: 80 active, 60 on
// LWLock:LockManager). Without the CPU count nothing fires.
func TestSaturatedStorm(t *testing.T) {
	series := func(cpus int) (*state, []storm.Event) {
		var fired []storm.Event
		st, err := newState(sampler.Info{Local: true, HostSampled: true}, storm.Rule{}, cpus,
			func(e storm.Event) { fired = append(fired, e) })
		if err != nil {
			t.Fatal(err)
		}
		for i := 0; i < 4; i++ {
			s := fakeSample(st.start.Add(time.Duration(i+1)*time.Second), 80, map[string]int{"LWLock:LockManager": 60, "CPU": 20})
			s.Host.CPU = sampler.CPU{User: 70, System: 28, Idle: 2, Busy: 98}
			st.add(s)
		}
		return st, fired
	}
	if _, fired := series(0); len(fired) != 0 {
		t.Fatalf("without the CPU count: storms %+v", fired)
	}
	st, fired := series(2)
	if len(fired) != 1 || fired[0].WaitEvent != "LWLock:LockManager" {
		t.Fatalf("2 CPUs, CPU 98 %%: storms %+v, want one on LWLock:LockManager", fired)
	}
	if out := render(st, viewOpts{width: 100, interval: time.Second}); !strings.Contains(out, "STORM LWLock:LockManager") {
		t.Errorf("view lacks the storm line:\n%s", out)
	}
}

// TestPrintStormLocalServer is `erplab top --count` on a local server
// while 4 sessions per CPU plus 2 wait on one advisory lock: Print passes
// the host's CPU count to the storm rule, so the crowd rule prints the
// storm line whatever the host CPU use (the rise rule alone needs a rise
// and spare CPU).
func TestPrintStormLocalServer(t *testing.T) {
	dsn := srv.NewDatabase(t)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	s, err := sampler.Connect(ctx, dsn, sampler.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(context.Background())
	cpus := s.HostCPUs()
	if cpus < 1 {
		t.Fatalf("local server: HostCPUs %d", cpus)
	}
	holder := connect(t, dsn)
	if _, err := holder.Exec(ctx, "SELECT pg_advisory_lock(7)"); err != nil {
		t.Fatal(err)
	}
	n := 4*cpus + 2
	for i := 0; i < n; i++ {
		c := connect(t, dsn)
		wg.Add(1)
		go func() { defer wg.Done(); _, _ = c.Exec(ctx, "SELECT pg_advisory_lock(7)") }()
	}
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		x, err := s.Sample(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if x.Waits["Lock:advisory"] >= n {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("waiters never seen: %v", x.Waits)
		}
	}
	var out bytes.Buffer
	if err := Print(ctx, &out, s, Options{Interval: 200 * time.Millisecond}, 4); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "STORM Lock:advisory storm") {
		t.Errorf("no storm line with %d waiters on %d CPUs:\n%s", n, cpus, out.String())
	}
}

// TestPrintRelativeStormLocalServer is `erplab top --count` on a local
// server while max(6, CPUs)+1 sessions (fewer than the crowd rule's 4 per
// CPU) start waiting on one advisory lock after 8 quiet samples: the
// server's CPU stays flat, so the relative rule prints the storm line
// with the server's CPU, on any number of cores and whatever else keeps
// the host busy.
func TestPrintRelativeStormLocalServer(t *testing.T) {
	dsn := srv.NewDatabase(t)
	wctx, cancelWaiters := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancelWaiters()
	s, err := sampler.Connect(wctx, dsn, sampler.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(context.Background())
	cpus := s.HostCPUs()
	if cpus < 1 {
		t.Fatalf("local server: HostCPUs %d", cpus)
	}
	holder := connect(t, dsn)
	if _, err := holder.Exec(wctx, "SELECT pg_advisory_lock(8)"); err != nil {
		t.Fatal(err)
	}
	n := max(storm.DefaultRule().RelMinActive, cpus) + 1
	conns := make([]*pgx.Conn, n)
	for i := range conns {
		conns[i] = connect(t, dsn)
	}
	pctx, stop := context.WithCancel(wctx)
	defer stop()
	samples := 0
	var storms []storm.Event
	opts := Options{Interval: 250 * time.Millisecond,
		OnSample: func(*sampler.Sample) {
			if samples++; samples == 8 {
				for _, c := range conns {
					wg.Add(1)
					go func() { defer wg.Done(); _, _ = c.Exec(wctx, "SELECT pg_advisory_lock(8)") }()
				}
			}
		},
		OnStorm: func(e storm.Event) { storms = append(storms, e); stop() }}
	var out bytes.Buffer
	if err := Print(pctx, &out, s, opts, 80); err != nil && pctx.Err() == nil {
		t.Fatal(err)
	}
	if len(storms) != 1 || storms[0].Rule != "relative" {
		t.Fatalf("storms %+v, want one of the relative rule (%d waiters, %d CPUs)\n%s", storms, n, cpus, out.String())
	}
	if !regexp.MustCompile(`STORM Lock:advisory storm: active \d+ -> \d+ in [0-9.]+ s, server CPU [0-9.]+ -> [0-9.]+ cores`).MatchString(out.String()) {
		t.Errorf("no relative storm line:\n%s", out.String())
	}
}

// TestPrintInvalidation: the caller's invalidation line is shown under
// the temp-relation churn, taken at each sample.
func TestPrintInvalidation(t *testing.T) {
	dsn := srv.NewDatabase(t)
	ctx := context.Background()
	s, err := sampler.Connect(ctx, dsn, sampler.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(ctx)
	calls := 0
	line := func() string {
		calls++
		return fmt.Sprintf("invalidation: resets %d.0/s (perf uprobes)", calls)
	}
	var out bytes.Buffer
	if err := Print(ctx, &out, s, Options{Interval: 200 * time.Millisecond, Width: 120, Invalidation: line}, 2); err != nil {
		t.Fatal(err)
	}
	text := out.String()
	if !regexp.MustCompile(`(?m)^temp-relation churn: .*\ninvalidation: resets 2\.0/s \(perf uprobes\)$`).MatchString(text) ||
		!strings.Contains(text, "invalidation: resets 3.0/s") || calls != 3 {
		t.Errorf("%d calls, output:\n%s", calls, text)
	}
}
