package loadtest_test

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/erplab/erplab/internal/engine"
	"github.com/erplab/erplab/internal/loadtest"
	"github.com/erplab/erplab/internal/pgtest"
	"github.com/erplab/erplab/internal/results"
	"github.com/erplab/erplab/internal/sampler"
	"github.com/erplab/erplab/internal/workload"
)

// napWorkload has one key operation that sleeps in the server.
type napWorkload struct{}

func (napWorkload) Name() string { return "nap" }
func (napWorkload) Operations() []workload.Operation {
	return []workload.Operation{{Name: "nap", Target: time.Second, Priority: 1, Description: "SELECT pg_sleep(0.3)"}}
}
func (napWorkload) Roles() []workload.Role {
	return []workload.Role{{Name: "napper", Share: 1, Mix: map[string]float64{"nap": 1}}}
}
func (napWorkload) Setup(context.Context, *pgxpool.Pool, workload.SetupOptions) error { return nil }
func (napWorkload) Execute(ctx context.Context, c *pgx.Conn, _ *workload.VU, _ int) error {
	_, err := c.Exec(ctx, "SELECT pg_sleep(0.3)")
	return err
}

// A run attributes its sessions' waits and statements to its key
// operation: the results keep them (and still validate), the summary
// prints them.
func TestRunWaitsAndStatementsPerOperation(t *testing.T) {
	dsn := srv.NewDatabase(t)
	admin := srv.Pool(t, dsn)
	pgtest.NeedExtension(t, dsn, "pg_stat_statements")
	if _, err := admin.Exec(context.Background(), "CREATE EXTENSION IF NOT EXISTS pg_stat_statements"); err != nil {
		t.Fatal(err)
	}
	opts := smokeOptions(t, dsn, 3*time.Second)
	opts.Workload, opts.Scale = napWorkload{}, 0
	opts.Stages = []engine.Stage{{Duration: 0, Target: 4}, {Duration: 3 * time.Second, Target: 4}}
	opts.Think, opts.Connections, opts.Interval = engine.ThinkTime{Kind: "fixed"}, 0, 500*time.Millisecond
	var out bytes.Buffer
	res, err := loadtest.Run(context.Background(), opts, &out)
	if err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	doc, err := results.Read(res.Path) // validates
	if err != nil {
		t.Fatal(err)
	}
	o, err := sampler.ReadObservations(doc.Extra["observations"])
	if err != nil {
		t.Fatal(err)
	}
	w := o.OpWaitTotals()
	if len(w) != 1 || w["nap"]["Timeout:PgSleep"] < 4 {
		t.Fatalf("op waits %v, want the 4 VUs' sleeps under nap", w)
	}
	var nap *sampler.OpStatements
	for i, x := range o.Statements.Operations {
		if x.Operation == "nap" {
			nap = &o.Statements.Operations[i]
		}
	}
	execs := doc.Operations[0].Count + doc.Operations[0].WarmupCount
	if nap == nil || int64(nap.Calls) < execs-4 || nap.ExecMs < 290*float64(execs-4) {
		t.Fatalf("statements of nap %+v, want about %d calls of 300 ms", nap, execs)
	}
	s := out.String()
	if !strings.Contains(s, "per key operation (waits") || !strings.Contains(s, "Timeout:PgSleep") || !strings.Contains(s, "temp-relation file churn:") {
		t.Fatalf("summary lacks the per-operation table or churn:\n%s", s)
	}
	t.Logf("%s", s[strings.Index(s, "per key operation"):])
}
