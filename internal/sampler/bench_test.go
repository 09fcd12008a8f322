package sampler

import (
	"context"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/prometheus/procfs"
	"golang.org/x/sync/errgroup"

	"github.com/erplab/erplab/internal/pgcluster"
)

// BenchmarkSampleTick measures one sampling tick against a server with 300
// open client sessions (250 idle, 20 in pg_sleep, 20 idle in transaction,
// 10 waiting on an advisory lock), on a cluster of its own
// (max_connections 350; the shared test cluster has 200). It reports,
// per tick: round trips (writes to the server), the sampler backend's CPU
// time in ms (/proc/<pid>/stat, user+system, 10 ms resolution averaged
// over b.N ticks), and the client's allocations.
//
//	go test -run '^$' -bench SampleTick -benchtime 200x ./internal/sampler
func BenchmarkSampleTick(b *testing.B) {
	ctx := context.Background()
	c, err := pgcluster.Start(ctx, pgcluster.Options{MaxConnections: 350, SharedBuffers: "128MB", StopWithParent: true})
	if err != nil {
		b.Fatal(err)
	}
	defer c.Stop()
	dsn := c.DSN("postgres")

	const idle, sleeping, inTx, blocked = 250, 20, 20, 10
	holder := connect(b, dsn)
	if _, err := holder.Exec(ctx, "SELECT pg_advisory_lock(1)"); err != nil {
		b.Fatal(err)
	}
	conns := make([]*pgx.Conn, idle+sleeping+inTx+blocked-1) // the holder is one of the idle
	var mu sync.Mutex
	var g errgroup.Group
	g.SetLimit(8)
	for i := range conns {
		g.Go(func() error {
			cn, err := pgx.Connect(ctx, dsn)
			if err != nil {
				return err
			}
			mu.Lock()
			conns[i] = cn
			mu.Unlock()
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		b.Fatal(err)
	}
	wctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer func() {
		cancel()
		wg.Wait()
		for _, cn := range conns {
			cn.Close(ctx)
		}
		holder.Close(ctx)
	}()
	k := 0
	for range sleeping {
		cn := conns[k]
		k++
		wg.Add(1)
		go func() { defer wg.Done(); _, _ = cn.Exec(wctx, "SELECT pg_sleep(600)") }()
	}
	for range blocked {
		cn := conns[k]
		k++
		wg.Add(1)
		go func() { defer wg.Done(); _, _ = cn.Exec(wctx, "SELECT pg_advisory_xact_lock(1)") }()
	}
	for range inTx {
		if _, err := conns[k].Exec(ctx, "BEGIN; SELECT 1"); err != nil {
			b.Fatal(err)
		}
		k++
	}
	waitFor(b, "300 sessions", func() bool {
		var n int
		err := holder.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'client backend'
			AND (state = 'idle in transaction' OR wait_event IN ('PgSleep', 'advisory'))`).Scan(&n)
		return err == nil && n == sleeping+inTx+blocked
	})

	for _, bc := range []struct {
		name    string
		queries int
		host    HostMode
	}{{"run", 0, HostAuto}, {"top", 20, HostAuto}, {"run-no-host", 0, HostOff}} {
		b.Run(bc.name, func(b *testing.B) {
			conn, writes := connectCounting(b, dsn)
			s, err := New(ctx, conn, Options{Queries: bc.queries, Host: bc.host})
			if err != nil {
				b.Fatal(err)
			}
			first, err := s.Sample(ctx)
			if err != nil {
				b.Fatal(err)
			}
			if tot := first.Sessions.Total(); tot != 300 {
				b.Fatalf("%d sessions seen, want 300 (%+v)", tot, first.Sessions)
			}
			proc, err := procfs.NewProc(s.Info().BackendPID)
			if err != nil {
				b.Fatal(err)
			}
			st0, err := proc.Stat()
			if err != nil {
				b.Fatal(err)
			}
			w0 := writes.Load()
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				if _, err := s.Sample(ctx); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			st1, err := proc.Stat()
			if err != nil {
				b.Fatal(err)
			}
			b.ReportMetric(float64(writes.Load()-w0)/float64(b.N), "roundtrips/op")
			cpu := st1.CPUTime() - st0.CPUTime()
			b.ReportMetric(cpu*1000/float64(b.N), "server-cpu-ms/op")
		})
	}
}
