package proxy

import (
	"context"
	"runtime"
	"testing"

	"github.com/jackc/pgx/v5/pgproto3"
)

// countFrames are statements that call a function (count), so that each
// decision asks for its database's list of functions that may change
// the schema (mutatorsFor), and that the pre-filter then skips.
var countFrames = []struct {
	name, sql string
	simple    bool
}{
	{"count-simple", "SELECT count(*) FROM t WHERE t.b = 4", true},
	{"count-parse", "SELECT count(*) FROM t WHERE t.b = $1", false},
}

// BenchmarkStatementDecisionParallel is BenchmarkStatementDecision for
// countFrames from 8 goroutines at once (4 per GOMAXPROCS on the 2-core
// machine it was written on: b.SetParallelism), each with its own
// session of one proxy and database: what the proxy-wide state costs
// when many sessions' statements are decided at the same time.
func BenchmarkStatementDecisionParallel(b *testing.B) {
	ctx := context.Background()
	s, _ := decisionSession(b)
	for _, f := range countFrames {
		var frame []byte
		var err error
		if f.simple {
			frame, err = (&pgproto3.Query{String: f.sql}).Encode(nil)
		} else {
			frame, err = (&pgproto3.Parse{Name: "s", Query: f.sql, ParameterOIDs: []uint32{23}}).Encode(nil)
		}
		if err != nil {
			b.Fatal(err)
		}
		if out, pd := s.onStatement(ctx, frame, f.simple, true, true); &out[0] != &frame[0] || pd != nil {
			b.Fatalf("%s: changed", f.name)
		}
		b.Run(f.name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetParallelism(max(1, 8/runtime.GOMAXPROCS(0)))
			b.RunParallel(func(pb *testing.PB) {
				ps := &session{p: s.p, db: s.db, user: s.user, path: s.path, closed: make(chan struct{})}
				for pb.Next() {
					out, _ := ps.onStatement(ctx, frame, f.simple, true, true)
					if len(out) == 0 {
						b.Error("no frame")
						return
					}
				}
			})
		})
	}
}
