package loadtest_test

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/erplab/erplab/internal/engine"
	"github.com/erplab/erplab/internal/leftover"
	"github.com/erplab/erplab/internal/loadtest"
	"github.com/erplab/erplab/internal/profile"
	"github.com/erplab/erplab/internal/results"
	"github.com/erplab/erplab/internal/workload"
)

// churnWorkload's one key operation creates and drops a temp table with
// a primary key 20 times, each in its own transaction: shared
// invalidation messages at every commit.
type churnWorkload struct{}

// churnLoops are the temp tables one churn execution creates.
const churnLoops = 20

func (churnWorkload) Name() string { return "churn" }
func (churnWorkload) Operations() []workload.Operation {
	return []workload.Operation{{Name: "churn", Target: time.Second, Priority: 1, Description: "CREATE/DROP TEMP TABLE x20"}}
}
func (churnWorkload) Roles() []workload.Role {
	return []workload.Role{{Name: "churner", Share: 1, Mix: map[string]float64{"churn": 1}}}
}
func (churnWorkload) Setup(context.Context, *pgxpool.Pool, workload.SetupOptions) error { return nil }
func (churnWorkload) Execute(ctx context.Context, c *pgx.Conn, _ *workload.VU, _ int) error {
	for range churnLoops {
		if _, err := c.Exec(ctx, "CREATE TEMP TABLE erplab_churn(a int PRIMARY KEY)"); err != nil {
			return err
		}
		if _, err := c.Exec(ctx, "DROP TABLE erplab_churn"); err != nil {
			return err
		}
	}
	return nil
}

// A run with the probes counts the messages its temp-table churn
// inserts, attributes them to the key operation, keeps them in
// extra.invalidation and prints them; the probes are gone afterwards.
func TestRunInvalidationObserved(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("not root: adding uprobes needs root")
	}
	if _, _, err := profile.Check(context.Background(), profile.Host{}); err != nil {
		t.Skipf("no perf: %v", err)
	}
	state := t.TempDir()
	if err := os.Chmod(state, 0o700); err != nil {
		t.Fatal(err)
	}
	t.Setenv(leftover.EnvStateDir, state)
	opts := smokeOptions(t, srv.NewDatabase(t), 3*time.Second)
	opts.Workload, opts.Scale, opts.Probes = churnWorkload{}, 0, true
	opts.Stages = []engine.Stage{{Duration: 0, Target: 2}, {Duration: 3 * time.Second, Target: 2}}
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
	r, err := profile.ReadInval(doc.Extra["invalidation"])
	if err != nil || r.Observed == nil {
		t.Fatalf("extra.invalidation %s: %v", doc.Extra["invalidation"], err)
	}
	s := r.Observed
	execs := doc.Operations[0].Count + doc.Operations[0].WarmupCount
	// each CREATE and each DROP commits messages (pg_class, pg_type,
	// pg_attribute rows, relcache): at least 2 per statement
	if execs == 0 || s.Total.Inserted < 4*churnLoops*execs {
		t.Errorf("inserted %d for %d executions of %d temp tables", s.Total.Inserted, execs, churnLoops)
	}
	if len(s.Operations) == 0 || s.Operations[0].Name != "churn" || s.Operations[0].Inserted < s.Total.Inserted/2 {
		t.Errorf("operations %+v, total %+v", s.Operations, s.Total)
	}
	if !strings.Contains(out.String(), "invalidation observed (perf uprobes") {
		t.Errorf("summary without the observed line:\n%s", out.String())
	}
	if b, _ := exec.Command("perf", "probe", "-l").CombinedOutput(); strings.Contains(string(b), "erplab_") {
		t.Errorf("probes left after the run: %s", b)
	}
}
