package proxy

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgproto3"

	"github.com/erplab/erplab/internal/pgtest"
)

// decisionFrames are the statements of BenchmarkStatementDecision: what
// pgbench -S sends and ORs of constants (the pre-filter skips them),
// statements that the pre-filter passes but no rule rewrites (t.b leads
// no index: decided once, then cached), and a statement the proxy
// rewrites (cached and verified).
var decisionFrames = []struct {
	name, sql string
	simple    bool
	changed   bool
}{
	{"pgbench-simple", "SELECT abalance FROM pgbench_accounts WHERE aid = 4242;", true, false},
	{"pgbench-parse", "SELECT abalance FROM pgbench_accounts WHERE aid = $1;", false, false},
	{"constants-simple", "SELECT t.c FROM t WHERE t.a IN (1, 2, 3) OR t.b = 4", true, false},
	{"constants-parse", "SELECT t.c FROM t WHERE t.a IN ($1, $2) OR t.b = $3", false, false},
	{"kept-simple", "SELECT t.c FROM t WHERE t.b = 4 OR t.b IN (SELECT u.x FROM u)", true, false},
	{"kept-parse", "SELECT t.c FROM t WHERE t.b = $1 OR t.b IN (SELECT u.x FROM u)", false, false},
	{"rewritten-simple", "SELECT t.c FROM t WHERE t.a = 1 OR t.a IN (SELECT u.x FROM u)", true, true},
	{"rewritten-parse", "SELECT t.c FROM t WHERE t.a = $1 OR t.a IN (SELECT u.x FROM u)", false, true},
}

// decisionSession is a session of a proxy in front of a fresh database
// holding schema, with every decisionFrames statement decided once (and
// a rewrite verified, as a session's first use would), and the frames.
func decisionSession(tb testing.TB) (*session, [][]byte) {
	ctx := context.Background()
	dsn := srv.NewDatabase(tb)
	pool := srv.Pool(tb, dsn)
	if _, err := pool.Exec(ctx, schema); err != nil {
		tb.Fatal(err)
	}
	cfg, err := pgconn.ParseConfig(dsn)
	if err != nil {
		tb.Fatal(err)
	}
	p, err := New(Config{Upstream: dsn})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(p.closeSides)
	s := &session{p: p, db: cfg.Database, user: cfg.User, closed: make(chan struct{})}
	var frames [][]byte
	for _, f := range decisionFrames {
		var frame []byte
		if f.simple {
			frame, err = (&pgproto3.Query{String: f.sql}).Encode(nil)
		} else {
			frame, err = (&pgproto3.Parse{Name: "s", Query: f.sql, ParameterOIDs: []uint32{23}}).Encode(nil)
		}
		if err != nil {
			tb.Fatal(err)
		}
		out, pd := s.onStatement(ctx, frame, f.simple, true, true)
		if changed := string(out) != string(frame); changed != f.changed {
			tb.Fatalf("%s: changed %v, want %v", f.name, changed, f.changed)
		}
		if pd != nil {
			p.cache.markVerified(pd.key)
		}
		frames = append(frames, frame)
	}
	return s, frames
}

// A statement that is not rewritten costs no allocation once decided
// (pre-filtered, or a cached decision found by a lookup keyed by the
// message's bytes), and is counted as a cache hit.
func TestStatementDecisionAllocations(t *testing.T) {
	pgtest.SkipShort(t)
	ctx := context.Background()
	s, frames := decisionSession(t)
	for i, f := range decisionFrames {
		if f.changed {
			continue
		}
		hits := s.p.Stats().CacheHits
		allocs := testing.AllocsPerRun(200, func() {
			if out, pd := s.onStatement(ctx, frames[i], f.simple, true, true); &out[0] != &frames[i][0] || pd != nil {
				t.Fatalf("%s: changed", f.name)
			}
		})
		if allocs != 0 {
			t.Errorf("%s: %.1f allocations per message, want 0", f.name, allocs)
		}
		if got := s.p.Stats().CacheHits - hits; f.name[:4] == "kept" && got < 200 {
			t.Errorf("%s: %d cache hits in 200+ messages", f.name, got)
		}
	}
}

// BenchmarkStatementDecision measures what the proxy does with one Query
// or Parse message once its decision is cached (the steady state of an
// application that repeats its statements): the pre-filter, the cache
// lookup and, for a rewritten text, the new frame. It reports
// allocations per message; no network I/O is involved.
func BenchmarkStatementDecision(b *testing.B) {
	ctx := context.Background()
	s, frames := decisionSession(b)
	for i, f := range decisionFrames {
		b.Run(f.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				out, _ := s.onStatement(ctx, frames[i], f.simple, true, true)
				if len(out) == 0 {
					b.Fatal("no frame")
				}
			}
		})
	}
}
