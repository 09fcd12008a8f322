package loadtest_test

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
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
	// its own group only: other packages' tests may hold probes now
	if b, _ := exec.Command("perf", "probe", "-l").CombinedOutput(); s.Group == "" || strings.Contains(string(b), s.Group+":") {
		t.Errorf("probes of group %q left after the run: %s", s.Group, b)
	}
}

// crowdChurn is churnWorkload holding idle sessions beside its load
// (workload.Crowd); each execution counts the idle sessions it sees.
type crowdChurn struct {
	churnWorkload
	n    int
	seen *atomic.Int64
}

func (w crowdChurn) IdleSessions() int { return w.n }
func (w crowdChurn) Execute(ctx context.Context, c *pgx.Conn, vu *workload.VU, op int) error {
	var n int64
	if err := c.QueryRow(ctx, "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'erplab idle session' AND state = 'idle' AND backend_xid IS NULL").Scan(&n); err != nil {
		return err
	}
	if n > w.seen.Load() {
		w.seen.Store(n)
	}
	return w.churnWorkload.Execute(ctx, c, vu, op)
}

// A workload's idle crowd (erp --idle-sessions) is held beside the
// load: every session idle, not in a transaction, during it; with the
// probes, the crowd's backends catch up when the churn overruns the
// queue. More sessions than the server allows end the run in one line.
func TestRunIdleSessions(t *testing.T) {
	var seen atomic.Int64
	opts := smokeOptions(t, srv.NewDatabase(t), 3*time.Second)
	opts.Workload, opts.Scale = crowdChurn{n: 20, seen: &seen}, 0
	opts.Stages = []engine.Stage{{Duration: 0, Target: 2}, {Duration: 3 * time.Second, Target: 2}}
	opts.Think, opts.Connections = engine.ThinkTime{Kind: "fixed"}, 0
	probes := os.Geteuid() == 0
	if _, _, err := profile.Check(context.Background(), profile.Host{}); err != nil {
		probes = false
	}
	if probes {
		state := t.TempDir()
		if err := os.Chmod(state, 0o700); err != nil {
			t.Fatal(err)
		}
		t.Setenv(leftover.EnvStateDir, state)
		opts.Probes = true
	}
	var out bytes.Buffer
	res, err := loadtest.Run(context.Background(), opts, &out)
	if err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	if seen.Load() != 20 || !strings.Contains(out.String(), "holding 20 idle sessions beside the load") {
		t.Errorf("idle sessions seen %d, want 20:\n%s", seen.Load(), out.String())
	}
	if probes {
		doc, err := results.Read(res.Path)
		if err != nil {
			t.Fatal(err)
		}
		r, err := profile.ReadInval(doc.Extra["invalidation"])
		if err != nil || r.Observed == nil {
			t.Fatalf("extra.invalidation %s: %v", doc.Extra["invalidation"], err)
		}
		s := r.Observed
		t.Log(s.Line())
		// each overrun of the queue signals the backend furthest behind
		if s.Total.Inserted > 2*4096 && (s.Total.Catchups+s.Total.Resets == 0 || s.BackendsCaughtUp+s.BackendsReset == 0) {
			t.Errorf("%d messages past 20 idle sessions, no catch-up or reset: %+v", s.Total.Inserted, s.Total)
		}
	}
	// more than the server's max_connections
	opts.Workload, opts.Probes = crowdChurn{n: 500, seen: &seen}, false
	opts.Out = filepath.Join(t.TempDir(), "r2.json")
	out.Reset()
	_, err = loadtest.Run(context.Background(), opts, &out)
	if err == nil || !strings.Contains(err.Error(), "idle sessions: opened ") || !strings.Contains(err.Error(), "of 500") || strings.Contains(err.Error(), "\n") {
		t.Errorf("500 idle sessions: %v", err)
	}
}
