package loadtest_test

import (
	"bytes"
	"context"
	"encoding/json"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/erplab/erplab/internal/engine"
	"github.com/erplab/erplab/internal/loadtest"
	"github.com/erplab/erplab/internal/pgtest"
	"github.com/erplab/erplab/internal/profile"
	"github.com/erplab/erplab/internal/results"
	"github.com/erplab/erplab/internal/workload"
)

// twoOps has a CPU-bound key operation (a generate_series count: the
// executor) and a temp-table churn (catalogs and the file system).
type twoOps struct{}

func (twoOps) Name() string { return "twoops" }
func (twoOps) Operations() []workload.Operation {
	return []workload.Operation{
		{Name: "count", Target: time.Second, Priority: 1, Description: "SELECT count(*) FROM generate_series(1, 300000)"},
		{Name: "churn", Target: time.Second, Priority: 1, Description: "CREATE TEMP TABLE, CREATE INDEX, DROP x 5"},
	}
}
func (twoOps) Roles() []workload.Role {
	return []workload.Role{{Name: "mixed", Share: 1, Mix: map[string]float64{"count": 1, "churn": 1}}}
}
func (twoOps) Setup(context.Context, *pgxpool.Pool, workload.SetupOptions) error { return nil }
func (twoOps) Execute(ctx context.Context, c *pgx.Conn, _ *workload.VU, op int) error {
	q := "SELECT count(*) FROM generate_series(1, 300000)"
	if op == 1 {
		q = `DO $$ BEGIN FOR i IN 1..5 LOOP CREATE TEMP TABLE pt (a int); CREATE INDEX ON pt (a); DROP TABLE pt; END LOOP; END $$`
	}
	_, err := c.Exec(ctx, q)
	return err
}

// run --profile attributes the server's samples to the key operation that
// ran on the backend at the sample's time: both operations get samples,
// the count is executor work, the churn catalog and file-system work, and
// extra.profile keeps it (the document validates).
func TestRunProfilePerOperation(t *testing.T) {
	pgtest.NeedPerf(t)
	opts := smokeOptions(t, srv.NewDatabase(t), 4*time.Second)
	opts.Workload, opts.Scale, opts.Observe, opts.Profile = twoOps{}, 0, false, true
	opts.Stages = []engine.Stage{{Duration: 0, Target: 3}, {Duration: 4 * time.Second, Target: 3}}
	opts.Think, opts.Connections = engine.ThinkTime{Kind: "fixed"}, 0
	var out bytes.Buffer
	res, err := loadtest.Run(context.Background(), opts, &out)
	if err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	doc, err := results.Read(res.Path)
	if err != nil {
		t.Fatal(err)
	}
	var sum profile.Summary
	if err := json.Unmarshal(doc.Extra["profile"], &sum); err != nil {
		t.Fatal(err)
	}
	a := sum.OpAttribution
	if a == nil || a.Attributed+a.Unattributed != sum.Samples || a.ClockErrorUs > 1000 {
		t.Fatalf("attribution %+v of %d samples\n%s", a, sum.Samples, out.String())
	}
	ops := map[string]profile.OperationProfile{}
	for _, o := range sum.Operations {
		ops[o.Name] = o
	}
	share := func(op, sub string) float64 {
		for _, x := range ops[op].Subsystems {
			if x.Name == sub {
				return x.SharePct
			}
		}
		return 0
	}
	count, churn := ops["count"], ops["churn"]
	t.Logf("%d samples, %d attributed (clock error %.2f µs); count %d: %v; churn %d: %v", sum.Samples, a.Attributed, a.ClockErrorUs,
		count.Samples, count.Subsystems, churn.Samples, churn.Subsystems)
	if count.Samples < 20 || churn.Samples < 20 || a.Attributed < sum.Samples/2 {
		t.Fatalf("too few samples attributed: count %d, churn %d, %d of %d\n%s", count.Samples, churn.Samples, a.Attributed, sum.Samples, out.String())
	}
	if c, h := share("count", profile.SubExecutor), share("churn", profile.SubExecutor); c < 30 || c <= h {
		t.Errorf("executor: count %.1f %%, churn %.1f %%: the count should be mostly executor", c, h)
	}
	if c, h := share("count", profile.SubCatalog)+share("count", profile.SubFS), share("churn", profile.SubCatalog)+share("churn", profile.SubFS); h < 20 || h <= 2*c {
		t.Errorf("catalog + file system: churn %.1f %%, count %.1f %%", h, c)
	}
	if !strings.Contains(out.String(), "by key operation (") {
		t.Errorf("summary lacks the per-operation profile:\n%s", out.String())
	}
}

// run --profile: the results' duration is the load's own span, not the
// load plus the time perf takes to stop and be read back. The document's
// span (ended_at - started_at) is where the engine's last interval ends,
// the scored seconds are that span less the warm-up, every rate is the
// count over them, and the generator's CPU is measured over the same span.
func TestRunProfileDurationIsTheLoadsSpan(t *testing.T) {
	if _, _, err := profile.Check(context.Background(), profile.Host{}); err != nil {
		t.Skip(err.Error())
	}
	opts := smokeOptions(t, srv.NewDatabase(t), 2*time.Second)
	opts.Observe, opts.Profile, opts.Progress = false, true, 0
	var out bytes.Buffer
	res, err := loadtest.Run(context.Background(), opts, &out)
	if err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	doc, err := results.Read(res.Path)
	if err != nil {
		t.Fatal(err)
	}
	if doc.Extra["profile"] == nil || len(doc.Series) == 0 || doc.Totals.Count == 0 {
		t.Fatalf("no profile, series or operations in the results\n%s", out.String())
	}
	engineSpan := doc.Series[len(doc.Series)-1].T
	span := doc.EndedAt.Sub(doc.StartedAt).Seconds()
	t.Logf("engine span %.3f s, document span %.3f s, scored %.3f s", engineSpan, span, doc.Totals.ScoredSeconds)
	if math.Abs(span-engineSpan) > 0.001 {
		t.Errorf("ended_at - started_at = %.3f s, the load ran %.3f s: perf's stop counted in the run's duration", span, engineSpan)
	}
	if scored := engineSpan - opts.Warmup.Seconds(); math.Abs(doc.Totals.ScoredSeconds-scored) > 0.001 {
		t.Errorf("scored %.3f s, want the load's %.3f s", doc.Totals.ScoredSeconds, scored)
	}
	if want := float64(doc.Totals.Count) / doc.Totals.ScoredSeconds; math.Abs(doc.Totals.PerSecond-want) > 1e-6*want {
		t.Errorf("%.3f operations/s, want count/scored = %.3f", doc.Totals.PerSecond, want)
	}
	if doc.Agent != nil && math.Abs(doc.Agent.WallSeconds-engineSpan) > 0.002 {
		t.Errorf("generator CPU measured over %.3f s, the load ran %.3f s", doc.Agent.WallSeconds, engineSpan)
	}
}
