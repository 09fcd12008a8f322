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

// TestProxyColdStart measures what the first statement through a fresh
// 'erplab proxy' process adds to its latency: the proxy warms the parser
// when it starts and logs in its side connection at once, so a first
// statement that the pre-filter passes pays only its decision (a catalog
// round trip for the compared column and one pipelined round trip for the
// Describes, the temporary-relation check and the column's type, on the
// side connection). Two first statements are measured, each through its
// own fresh proxy: one the proxy rewrites, compared with its rewritten
// text as the first statement of a fresh direct connection, and one it
// decides not to rewrite (no index on the compared column), compared with
// the same text direct; the order of direct and proxy alternates by round.
// It logs the figures (no timing threshold: the machine is shared);
// ERPLAB_COLDSTART_ROUNDS sets how many rounds run (default 5).
func TestProxyColdStart(t *testing.T) {
	dsn := srv.NewDatabase(t)
	pool := srv.Pool(t, dsn)
	ctx := context.Background()
	if _, err := pool.Exec(ctx, `CREATE TABLE t (a int, b int); CREATE INDEX ON t (a); CREATE TABLE u (x int);
INSERT INTO t SELECT g, g FROM generate_series(1, 2000) g; INSERT INTO u VALUES (5), (7), (NULL); ANALYZE t; ANALYZE u`); err != nil {
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
	// have the same plan, and the difference is what the proxy adds. kept
	// is vetoed (t.b leads no index) after the same decision steps up to
	// the column lookup.
	const q = "SELECT count(*) FROM t WHERE t.a = 1 OR t.a IN (SELECT u.x FROM u)"
	const rewritten = "SELECT count(*) FROM t WHERE t.a = 1 OR CASE WHEN false THEN t.a IN (SELECT u.x FROM u) ELSE t.a = ANY (ARRAY (SELECT u.x FROM u)) END"
	const kept = "SELECT count(*) FROM t WHERE t.b = 1 OR t.b IN (SELECT u.x FROM u)"
	// first runs q (with a distinct comment, so no cache helps) as the
	// first statement of a fresh connection and returns its latency.
	first := func(conninfo, q, comment, want string) time.Duration {
		c, err := pgconn.Connect(ctx, conninfo)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close(ctx)
		t0 := time.Now()
		res, err := c.Exec(ctx, q+" -- "+comment).ReadAll()
		d := time.Since(t0)
		if err != nil || len(res) != 1 || string(res[0].Rows[0][0]) != want {
			t.Fatalf("%s: %+v, %v", comment, res, err)
		}
		return d
	}
	// fresh starts an erplab proxy and returns its DSN and a stop function
	// returning its exit summary.
	fresh := func() (string, func() string) {
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
		return dsn + " host=" + host + " port=" + port + " sslmode=disable", func() string {
			_ = cmd.Process.Signal(syscall.SIGINT)
			if err := cmd.Wait(); err != nil {
				t.Fatalf("proxy exit: %v", err)
			}
			return stdout.String()
		}
	}
	// measure runs viaText through a fresh proxy and directText direct,
	// in the order of the round, and returns proxy minus direct.
	measure := func(r int, viaText, directText, want, summary string) (added, via, direct time.Duration) {
		dsnVia, stop := fresh()
		tag := string(rune('a' + r%26))
		if r%2 == 0 {
			direct = first(dsn, directText, "direct "+tag, want)
			via = first(dsnVia, viaText, "proxy "+tag, want)
		} else {
			via = first(dsnVia, viaText, "proxy "+tag, want)
			direct = first(dsn, directText, "direct "+tag, want)
		}
		c, err := pgconn.Connect(ctx, dsnVia)
		if err != nil {
			t.Fatal(err)
		}
		t0 := time.Now()
		if _, err := c.Exec(ctx, "SELECT 1").ReadAll(); err != nil {
			t.Fatal(err)
		}
		plain := time.Since(t0)
		c.Close(ctx)
		out := stop()
		if !strings.Contains(out, summary) {
			t.Fatalf("round %d: want %q in the summary: %s", r, summary, out)
		}
		t.Logf("round %d: %.2f ms through the proxy vs %.2f ms direct (added %.2f ms), SELECT 1 next %.2f ms; %s",
			r, float64(via)/1e6, float64(direct)/1e6, float64(via-direct)/1e6, float64(plain)/1e6, strings.ReplaceAll(out, "\n", "; "))
		return via - direct, via, direct
	}
	var addedRW, addedKept []time.Duration
	for r := 0; r < rounds; r++ {
		a, _, _ := measure(r, q, rewritten, "3", "rewritten 1,")
		addedRW = append(addedRW, a)
		a, _, _ = measure(r, kept, kept, "3", "rewritten 0, shadow 0 (statements sent), decisions left unchanged by a veto 1,")
		addedKept = append(addedKept, a)
	}
	for _, m := range []struct {
		name  string
		added []time.Duration
	}{{"rewritten", addedRW}, {"not rewritten (vetoed)", addedKept}} {
		slices.Sort(m.added)
		t.Logf("first statement through a fresh proxy, %s: added latency median %.2f ms (min %.2f, max %.2f) over %d fresh proxies",
			m.name, float64(m.added[len(m.added)/2])/1e6, float64(m.added[0])/1e6, float64(m.added[len(m.added)-1])/1e6, len(m.added))
	}
}
