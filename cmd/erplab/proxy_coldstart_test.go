package main

import (
	"bufio"
	"context"
	"os"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
)

// TestProxyColdStart measures what the first statements through a fresh
// 'erplab proxy' process add to their latency: the proxy warms the parser
// when it starts and logs in its side connection at once, so the first
// rewritten statement pays only its decision (a few catalog round trips
// and Describes on the side connection). It is compared with the
// rewritten text as the first statement of a fresh direct connection. It logs the figures (no timing
// threshold: the machine is shared); ERPLAB_COLDSTART_ROUNDS sets how
// many fresh proxies are measured (default 5).
func TestProxyColdStart(t *testing.T) {
	dsn := srv.NewDatabase(t)
	pool := srv.Pool(t, dsn)
	ctx := context.Background()
	if _, err := pool.Exec(ctx, `CREATE TABLE t (a int, b int); CREATE INDEX ON t (a); CREATE TABLE u (x int);
INSERT INTO t SELECT g, g FROM generate_series(1, 20000) g; INSERT INTO u VALUES (5), (7), (NULL); ANALYZE t; ANALYZE u`); err != nil {
		t.Fatal(err)
	}
	rounds := 5
	if v := os.Getenv("ERPLAB_COLDSTART_ROUNDS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil {
			t.Fatal(err)
		}
		rounds = max(1, n)
	}
	// The proxy's rewrite of q runs direct for the comparison: both then
	// have the same plan, and the difference is what the proxy adds.
	const q = "SELECT count(*) FROM t WHERE t.a = 1 OR t.a IN (SELECT u.x FROM u)"
	const rewritten = "SELECT count(*) FROM t WHERE t.a = 1 OR t.a = ANY (ARRAY (SELECT u.x FROM u))"
	// first runs q (with a distinct comment, so no cache helps) as the
	// first statement of a fresh connection and returns its latency.
	first := func(conninfo, q, comment string) time.Duration {
		c, err := pgconn.Connect(ctx, conninfo)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close(ctx)
		t0 := time.Now()
		res, err := c.Exec(ctx, q+" -- "+comment).ReadAll()
		d := time.Since(t0)
		if err != nil || len(res) != 1 || string(res[0].Rows[0][0]) != "3" {
			t.Fatalf("%s: %+v, %v", comment, res, err)
		}
		return d
	}
	var added, plain []time.Duration
	for r := 0; r < rounds; r++ {
		cmd := erplab(t, t.TempDir(), "proxy", "--listen", "127.0.0.1:0", "--upstream", dsn)
		stderr, err := cmd.StderrPipe()
		if err != nil {
			t.Fatal(err)
		}
		var stdout strings.Builder
		cmd.Stdout = &stdout
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(stderr)
		addr := ""
		for sc.Scan() {
			if _, rest, ok := strings.Cut(sc.Text(), "listening on "); ok {
				addr, _, _ = strings.Cut(rest, ",")
				break
			}
		}
		go func() {
			for sc.Scan() {
			}
		}()
		if addr == "" {
			_ = cmd.Process.Kill()
			t.Fatal("proxy did not say where it listens")
		}
		host, port, _ := strings.Cut(addr, ":")
		via := dsn + " host=" + host + " port=" + port + " sslmode=disable"
		// The same first statement on a fresh direct connection and on a
		// fresh connection through the fresh proxy; then a statement the
		// pre-filter passes, both ways.
		d := first(dsn, rewritten, "direct "+string(rune('a'+r)))
		p := first(via, q, "proxy "+string(rune('a'+r)))
		added = append(added, p-d)
		c, err := pgconn.Connect(ctx, via)
		if err != nil {
			t.Fatal(err)
		}
		t0 := time.Now()
		if _, err := c.Exec(ctx, "SELECT 1").ReadAll(); err != nil {
			t.Fatal(err)
		}
		plain = append(plain, time.Since(t0))
		c.Close(ctx)
		_ = cmd.Process.Signal(syscall.SIGINT)
		if err := cmd.Wait(); err != nil {
			t.Fatalf("proxy exit: %v", err)
		}
		if !strings.Contains(stdout.String(), "rewritten 1,") {
			t.Fatalf("first statement not rewritten: %s", stdout.String())
		}
		t.Logf("fresh proxy %d: first rewritten statement %.2f ms through the proxy vs %.2f ms direct (added %.2f ms); summary: %s",
			r, float64(p)/1e6, float64(d)/1e6, float64(p-d)/1e6, strings.ReplaceAll(stdout.String(), "\n", "; "))
	}
	slices.Sort(added)
	slices.Sort(plain)
	t.Logf("first rewritten statement through a fresh proxy: added latency median %.2f ms (min %.2f, max %.2f) over %d fresh proxies; SELECT 1 next through it: median %.2f ms",
		float64(added[len(added)/2])/1e6, float64(added[0])/1e6, float64(added[len(added)-1])/1e6, len(added), float64(plain[len(plain)/2])/1e6)
}
