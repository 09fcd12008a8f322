package workload_test

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/spf13/pflag"

	"github.com/erplab/erplab/internal/engine"
	"github.com/erplab/erplab/internal/erp"
	"github.com/erplab/erplab/internal/loadtest"
	"github.com/erplab/erplab/internal/pgtest"
	"github.com/erplab/erplab/internal/workload"
	_ "github.com/erplab/erplab/internal/workload/all"
)

var srv *pgtest.Server

func TestMain(m *testing.M) { os.Exit(pgtest.Run(m, &srv)) }

// tiny is the test's own workload: a table of --rows rows; "count" reads
// their number (always within its T of 10 s: satisfied), "nap" sleeps
// 20 ms against a T of 1 ms (above 4T: frustrated). Every execution
// appends a row to tiny_log, so the database counts them too.
type tiny struct{ rows int }

func (*tiny) Name() string { return "tiny" }

func (w *tiny) Setup(ctx context.Context, pool *pgxpool.Pool, _ workload.SetupOptions) error {
	_, err := pool.Exec(ctx, fmt.Sprintf(`DROP TABLE IF EXISTS tiny_items, tiny_log;
CREATE TABLE tiny_items AS SELECT g AS id FROM generate_series(1, %d) g;
CREATE TABLE tiny_log (op text NOT NULL, rows int NOT NULL)`, w.rows))
	return err
}

func (*tiny) Operations() []workload.Operation {
	return []workload.Operation{
		{Name: "count", Target: 10 * time.Second, Priority: 1, Description: "count the items"},
		{Name: "nap", Target: time.Millisecond, Priority: 1, Description: "sleep 20 ms"},
	}
}

func (*tiny) Roles() []workload.Role {
	return []workload.Role{{Name: "user", Share: 1, Mix: map[string]float64{"count": 1, "nap": 1}}}
}

func (*tiny) Execute(ctx context.Context, conn *pgx.Conn, _ *workload.VU, op int) error {
	sql := `INSERT INTO tiny_log SELECT 'count', count(*) FROM tiny_items`
	if op == 1 {
		sql = `INSERT INTO tiny_log SELECT 'nap', 0 FROM pg_sleep(0.02)`
	}
	_, err := conn.Exec(ctx, sql)
	return err
}

func init() {
	workload.Register(workload.Meta{
		Name: "tiny", Description: "the registry test's workload", DefaultScale: 1,
		Flags: func(fs *pflag.FlagSet) { fs.Int("rows", 3, "tiny: rows of tiny_items") },
		New: func(fs *pflag.FlagSet) (workload.Workload, error) {
			n, err := fs.GetInt("rows")
			if err != nil {
				return nil, err
			}
			if n < 1 {
				return nil, fmt.Errorf("--rows must be >= 1, got %d", n)
			}
			return &tiny{rows: n}, nil
		},
	})
}

func TestRegistry(t *testing.T) {
	if got, want := workload.Names(), []string{"erp", "pgbench", "replay", "smoke", "tiny"}; !slices.Equal(got, want) {
		t.Fatalf("Names() = %v, want %v", got, want)
	}
	m, ok := workload.Lookup("erp")
	if !ok || m.DefaultScale != 0.1 || m.MaxScale != erp.MaxScale {
		t.Fatalf("erp meta %+v", m)
	}
	if _, err := workload.Find("nope"); err == nil || err.Error() != `unknown workload "nope" (known: erp, pgbench, replay, smoke, tiny)` {
		t.Fatalf("Find(nope): %v", err)
	}
	if h := workload.Help("workload to run:"); !strings.Contains(h, "\n  tiny: the registry test's workload") {
		t.Fatalf("Help: %q", h)
	}
	// A remedy's override of one option.
	w, err := workload.Build("erp", map[string]string{"temp-style": erp.TempStyleLsFusion})
	if err != nil {
		t.Fatal(err)
	}
	if got := w.(*erp.Workload).Options().TempStyle; got != erp.TempStyleLsFusion {
		t.Fatalf("temp style %q", got)
	}
	if _, err := workload.Build("erp", map[string]string{"temp-style": "oracle"}); err == nil || err.Error() != `--temp-style must be 1c or lsfusion, got "oracle"` {
		t.Fatalf("bad temp style: %v", err)
	}
	if _, err := workload.Build("smoke", map[string]string{"temp-style": "1c"}); err == nil || !strings.Contains(err.Error(), "workload smoke has no option --temp-style") {
		t.Fatalf("foreign option: %v", err)
	}
	if _, err := workload.Build("tiny", map[string]string{"rows": "x"}); err == nil || !strings.HasPrefix(err.Error(), "--rows: ") {
		t.Fatalf("bad int: %v", err)
	}
	// Optional interfaces.
	for name, want := range map[string][3]bool{"erp": {true, true, true}, "pgbench": {true, true, false}, "smoke": {false, false, false}} {
		w, err := workload.Build(name, nil)
		if err != nil {
			t.Fatal(err)
		}
		_, i := w.(workload.Initializer)
		_, d := w.(workload.Dropper)
		_, c := w.(workload.Checker)
		if got := [3]bool{i, d, c}; got != want {
			t.Errorf("%s: Initializer, Dropper, Checker = %v, want %v", name, got, want)
		}
	}
	// The command line's flags: every workload's own ones on one set, the
	// given ones handed to Build.
	fs := pflag.NewFlagSet("run", pflag.ContinueOnError)
	workload.AddFlags(fs)
	if err := fs.Parse([]string{"--rows", "9", "--temp-style", "lsfusion"}); err != nil {
		t.Fatal(err)
	}
	tm, _ := workload.Lookup("tiny")
	if v := tm.Values(fs); len(v) != 1 || v["rows"] != "9" {
		t.Fatalf("tiny values %v", v)
	}
}

// TestTinyEndToEnd runs the test's own workload through loadtest.Run on
// the test server: 2 VUs, 15 operations each, and checks the counts
// against the database's own and the APDEX zones against the targets.
func TestTinyEndToEnd(t *testing.T) {
	w, err := workload.Build("tiny", map[string]string{"rows": "7"})
	if err != nil {
		t.Fatal(err)
	}
	stages, err := engine.SimpleStages(2, 0, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	dsn := srv.NewDatabase(t)
	out := filepath.Join(t.TempDir(), "tiny.json")
	res, err := loadtest.Run(context.Background(), loadtest.Options{
		DSN: dsn, Workload: w, Scale: 1, Seed: 1, Stages: stages, TxPerVU: 15,
		Connections: 2, GracefulStop: 10 * time.Second, Interval: time.Second, Out: out,
	}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if res.Doc.Status != "completed" {
		t.Fatalf("status %q", res.Doc.Status)
	}
	ops := map[string]int64{}
	var total int64
	for _, op := range res.Doc.Operations {
		if op.Errors != 0 {
			t.Errorf("%s: %d errors", op.Name, op.Errors)
		}
		ops[op.Name] = op.Count
		total += op.Count
		switch op.Name {
		case "count":
			if op.Zones.Satisfied != op.Count || op.Count > 0 && op.Apdex.Value != 1 {
				t.Errorf("count: zones %+v, APDEX %g; want all satisfied", op.Zones, op.Apdex.Value)
			}
		case "nap":
			if op.Zones.Frustrated != op.Count || op.Count > 0 && op.Apdex.Value != 0 {
				t.Errorf("nap: zones %+v, APDEX %g; want all frustrated", op.Zones, op.Apdex.Value)
			}
		default:
			t.Errorf("unexpected operation %q", op.Name)
		}
	}
	if total != 30 {
		t.Fatalf("%d operations recorded (%v), want 2 VUs x 15", total, ops)
	}
	pool := srv.Pool(t, dsn)
	var nCount, nNap, rows int64
	if err := pool.QueryRow(context.Background(),
		`SELECT count(*) FILTER (WHERE op = 'count'), count(*) FILTER (WHERE op = 'nap'), coalesce(max(rows), 0) FROM tiny_log`).
		Scan(&nCount, &nNap, &rows); err != nil {
		t.Fatal(err)
	}
	if nCount != ops["count"] || nNap != ops["nap"] {
		t.Errorf("database logged count %d, nap %d; results say %v", nCount, nNap, ops)
	}
	if ops["count"] > 0 && rows != 7 {
		t.Errorf("count read %d rows, want --rows 7", rows)
	}
	if res.Doc.Workload != "tiny" {
		t.Errorf("results' workload %q", res.Doc.Workload)
	}
}
