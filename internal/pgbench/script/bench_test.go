package script

import (
	"context"
	"fmt"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/erplab/erplab/internal/pgbench/expr"
	"github.com/jackc/pgx/v5/pgconn"
)

func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkTransaction runs builtin transactions in the prepared mode on
// pgbench -i -s 1 tables, with 1 client and with 8 concurrent clients (one
// goroutine and connection each); an op is one transaction. Besides ns/op
// and allocs/op it reports the benchmark process's CPU time per transaction
// (cpu-ns/op) and, for comparison, pgbench's own CPU per transaction for the
// same script, mode and number of clients on one thread (pgbench -j 1), from
// a run of the same number of transactions (pgbench-cpu-ns/op, connection
// start-up included).
func BenchmarkTransaction(b *testing.B) {
	pgbenchPath(b)
	dsn := srv.NewDatabase(b)
	if _, stderr, code := runPgbench(b, dsn, "-i", "-s", "1", "-q"); code != 0 {
		b.Fatalf("pgbench -i: exit %d\n%s", code, stderr)
	}
	for _, name := range []string{"select-only", "tpcb-like"} {
		for _, nc := range []int{1, 8} {
			b.Run(fmt.Sprintf("%s/clients=%d", name, nc), func(b *testing.B) {
				benchClients(b, dsn, name, nc)
			})
		}
	}
}

func benchClients(b *testing.B, dsn, name string, nc int) {
	s, err := Builtin(name)
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	plan := expr.NewSeeds(1).Plan(nc, 1, true)
	clients := make([]*Client, nc)
	conns := make([]*pgconn.PgConn, nc)
	for i := range clients {
		c, err := NewClient([]*Script{s}, Options{Mode: Prepared, ClientID: i, Rand: plan.Clients[i],
			DefaultSeed: plan.DefaultSeed, RandomSeed: plan.RandomSeed})
		if err != nil {
			b.Fatal(err)
		}
		defer c.Close()
		clients[i], conns[i] = c, connect(b, dsn)
		if res := c.Run(ctx, conns[i], 0); res.Err != nil { // prepare outside the timing
			b.Fatal(res.Err)
		}
	}
	b.ReportAllocs()
	b.ResetTimer()
	cpu0 := cpuTime()
	var next atomic.Int64
	var failed atomic.Pointer[Result]
	var wg sync.WaitGroup
	for i := range clients {
		wg.Add(1)
		go func(c *Client, conn *pgconn.PgConn) {
			defer wg.Done()
			for next.Add(1) <= int64(b.N) {
				if res := c.Run(ctx, conn, 0); res.Err != nil {
					r := res
					failed.Store(&r)
					return
				}
			}
		}(clients[i], conns[i])
	}
	wg.Wait()
	b.StopTimer()
	if r := failed.Load(); r != nil {
		b.Fatal(r.Err)
	}
	b.ReportMetric(float64(cpuTime()-cpu0)/float64(b.N), "cpu-ns/op")
	if b.N >= 1000 {
		b.ReportMetric(pgbenchCPU(b, dsn, name, nc, b.N), "pgbench-cpu-ns/op")
	}
}

// pgbenchCPU runs pgbench -n -M prepared -b name -c clients -j 1 for about
// n transactions in all and returns its CPU time (user + system) per
// transaction in ns.
func pgbenchCPU(b *testing.B, dsn, name string, clients, n int) float64 {
	per := max(n/clients, 1)
	cmd := exec.Command(pgbenchPath(b), "-n", "-M", "prepared", "-b", name, "-c", fmt.Sprint(clients), "-j", "1",
		"-t", fmt.Sprint(per), dsn)
	if out, err := cmd.CombinedOutput(); err != nil {
		b.Fatalf("pgbench: %v\n%s", err, out)
	}
	st := cmd.ProcessState
	return float64(st.UserTime()+st.SystemTime()) / float64(per*clients)
}

// BenchmarkInterpreter measures the interpreter alone: the four \set
// commands of tpcb-like (random() of :scale expressions), one transaction
// per op, no SQL.
func BenchmarkInterpreter(b *testing.B) {
	conn := connect(b, srv.DSN(b, "postgres"))
	text, _, err := BuiltinText("tpcb-like")
	if err != nil {
		b.Fatal(err)
	}
	s, err := Parse("meta.sql", text[:strings.Index(text, "BEGIN;")])
	if err != nil {
		b.Fatal(err)
	}
	c, err := NewClient([]*Script{s}, Options{Mode: Prepared, Rand: expr.NewPRNG(1)})
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if res := c.Run(ctx, conn, 0); res.Err != nil {
			b.Fatal(res.Err)
		}
	}
}
