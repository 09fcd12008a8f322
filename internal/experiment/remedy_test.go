package experiment

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/erplab/erplab/internal/remedy"
	"github.com/erplab/erplab/internal/remedy/tmpfs"
	"github.com/erplab/erplab/internal/results"
	"github.com/erplab/erplab/internal/workload"
)

// This file's remedies and workload: experiment runs a remedy it does not
// know (test-guc sets a custom GUC on the run's database with ALTER
// DATABASE and resets it on undo), a workload's connections see it, and
// undo happens after a good run, a failed run, a failed Apply and an
// interrupted run.

const markGUC = "erplab_test.mark"

// undoLog lists "database:value" of every test-guc undo, in order.
var (
	undoMu  sync.Mutex
	undoLog []string
)

func init() {
	remedy.Register(remedy.Kind{
		Name:   "test-guc",
		Syntax: "test-guc:VALUE",
		Doc:    "sets " + markGUC + " on the run's database (test only)",
		Parse: func(arg string) error {
			if arg == "" {
				return errors.New("test-guc needs a value")
			}
			return nil
		},
		Apply: func(ctx context.Context, t *remedy.Target, arg string) (*remedy.Effect, error) {
			if err := adminExec(ctx, t, "ALTER DATABASE "+pgx.Identifier{t.Database}.Sanitize()+" SET "+markGUC+" = "+quoteLiteral(arg)); err != nil {
				return nil, err
			}
			during, err := readMark(ctx, t.DSN)
			if err != nil {
				return nil, err
			}
			return &remedy.Effect{Changed: map[string]any{"database": t.Database, "mark": arg, "during": during}, State: arg}, nil
		},
		Undo: func(ctx context.Context, t *remedy.Target, e *remedy.Effect) error {
			if err := adminExec(ctx, t, "ALTER DATABASE "+pgx.Identifier{t.Database}.Sanitize()+" RESET "+markGUC); err != nil {
				return err
			}
			after, err := readMark(ctx, t.Cluster.DSN(t.Database))
			if err != nil {
				return err
			}
			e.Changed["after_reset"] = after
			undoMu.Lock()
			undoLog = append(undoLog, t.Database+":"+e.State.(string))
			undoMu.Unlock()
			return nil
		},
	})
	remedy.Register(remedy.Kind{
		Name: "test-fail-apply",
		Doc:  "fails to apply (test only)",
		Apply: func(context.Context, *remedy.Target, string) (*remedy.Effect, error) {
			return nil, errors.New("test-fail-apply: refused")
		},
	})
}

func adminExec(ctx context.Context, t *remedy.Target, q string) error {
	conn, err := pgx.Connect(ctx, t.Cluster.DSN("postgres"))
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	_, err = conn.Exec(ctx, q)
	return err
}

// readMark is the mark a new session on dsn sees ("" when unset).
func readMark(ctx context.Context, dsn string) (string, error) {
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return "", err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	var v string
	err = conn.QueryRow(ctx, `SELECT coalesce(current_setting('`+markGUC+`', true), '')`).Scan(&v)
	return v, err
}

// gucWorkload's one operation reads the mark: it counts what each
// database's sessions saw, fails when the mark is "fail" and cancels the
// run's context when it is "cancel".
type gucWorkload struct {
	mu     sync.Mutex
	seen   map[string]int // "database:mark" -> operations
	cancel context.CancelFunc
}

func (w *gucWorkload) Name() string { return "guc" }
func (w *gucWorkload) Setup(ctx context.Context, pool *pgxpool.Pool, _ workload.SetupOptions) error {
	_, err := pool.Exec(ctx, `CREATE TABLE IF NOT EXISTS erplab_guc_probe (id int)`)
	return err
}
func (w *gucWorkload) Operations() []workload.Operation {
	return []workload.Operation{{Name: "read_mark", Target: time.Second, Priority: 1, Description: "reads " + markGUC}}
}
func (w *gucWorkload) Roles() []workload.Role {
	return []workload.Role{{Name: "reader", Share: 1, Mix: map[string]float64{"read_mark": 1}}}
}
func (w *gucWorkload) Execute(ctx context.Context, conn *pgx.Conn, _ *workload.VU, _ int) error {
	var db, mark string
	if err := conn.QueryRow(ctx, `SELECT current_database(), coalesce(current_setting('`+markGUC+`', true), '')`).Scan(&db, &mark); err != nil {
		return err
	}
	w.mu.Lock()
	w.seen[db+":"+mark]++
	cancel := w.cancel
	w.mu.Unlock()
	switch mark {
	case "fail":
		return errors.New("mark says fail")
	case "cancel":
		if cancel != nil {
			cancel()
		}
	}
	return nil
}

func (w *gucWorkload) saw(key string) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.seen[key]
}

const gucTemplate = "erplab_template_guc"

// gucExperiment builds the guc template once and returns a Config that
// runs w with variants vs (from ParseVariant) into a new directory.
func gucExperiment(t *testing.T, w *gucWorkload, vs ...string) Config {
	t.Helper()
	ctx := context.Background()
	var n int
	conn, err := pgx.Connect(ctx, srv.DSN(t, "postgres"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if err := conn.QueryRow(ctx, `SELECT count(*) FROM pg_database WHERE datname = $1`, gucTemplate).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n == 0 {
		if err := BuildTemplate(ctx, srv.Cluster(t), gucTemplate, w, 1, 1, io.Discard); err != nil {
			t.Fatal(err)
		}
	}
	var variants []Variant
	for _, s := range vs {
		v, err := ParseVariant(s)
		if err != nil {
			t.Fatal(err)
		}
		variants = append(variants, v)
	}
	load := loadOpts(t, time.Second, 1, "")
	load.MaxErrors = 1
	undoMu.Lock()
	undoLog = nil
	undoMu.Unlock()
	return Config{Cluster: srv.Cluster(t), Template: gucTemplate, Load: load, Variants: variants, OutDir: filepath.Join(t.TempDir(), "ab"),
		NewWorkload: func(map[string]string) (workload.Workload, error) { return w, nil }}
}

func undone() []string {
	undoMu.Lock()
	defer undoMu.Unlock()
	return append([]string(nil), undoLog...)
}

// remediesOf reads extra.remedies of a results file as JSON text.
func remediesOf(t *testing.T, path string) []remedy.Record {
	t.Helper()
	doc, err := results.Read(path)
	if err != nil {
		t.Fatal(err)
	}
	recs, err := Remedies(doc)
	if err != nil {
		t.Fatal(err)
	}
	return recs
}

// wantGUCRecord checks a test-guc record of run database db with value v:
// applied (a new session saw v), undone (a new session after the reset
// sees nothing).
func wantGUCRecord(t *testing.T, recs []remedy.Record, db, v string) {
	t.Helper()
	want := fmt.Sprint(map[string]any{"database": db, "mark": v, "during": v, "after_reset": ""})
	if len(recs) != 1 || recs[0].Remedy != "test-guc:"+v || recs[0].Kind != "test-guc" || fmt.Sprint(recs[0].Changed) != want {
		t.Fatalf("remedies of %s: %+v, want one test-guc:%s with %s", db, recs, v, want)
	}
}

// A remedy experiment does not know: applied before the load (the
// workload's sessions see it), recorded, undone after the run; a failed
// run (--max-errors) is recorded and undone too.
func TestRegisteredRemedyAppliedRecordedUndone(t *testing.T) {
	w := &gucWorkload{seen: map[string]int{}}
	cfg := gucExperiment(t, w, "ok=test-guc:on", "bad=test-guc:fail")
	oc, err := Run(context.Background(), cfg, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "bad round 1") {
		t.Fatalf("want the bad run to fail, got %v", err)
	}
	if len(oc.Runs) != 2 {
		t.Fatalf("want the baseline and ok runs before the failure, got %d", len(oc.Runs))
	}
	if w.saw("run_baseline_1:") == 0 || w.saw("run_baseline_1:on") != 0 || w.saw("run_ok_1:on") == 0 || w.saw("run_ok_1:") != 0 || w.saw("run_bad_1:fail") == 0 {
		t.Fatalf("what the sessions saw: %v", w.seen)
	}
	if got := remediesOf(t, filepath.Join(cfg.OutDir, "baseline-1.json")); got == nil || len(got) != 0 {
		t.Fatalf("baseline remedies: %+v (want an empty list)", got)
	}
	wantGUCRecord(t, remediesOf(t, filepath.Join(cfg.OutDir, "ok-1.json")), "run_ok_1", "on")
	wantGUCRecord(t, remediesOf(t, filepath.Join(cfg.OutDir, "bad-1.json")), "run_bad_1", "fail")
	if oc.Runs[1].Remedies[0].Changed["after_reset"] != "" {
		t.Fatalf("RunResult remedies: %+v", oc.Runs[1].Remedies)
	}
	if got := strings.Join(undone(), " "); got != "run_ok_1:on run_bad_1:fail" {
		t.Fatalf("undone: %s", got)
	}
}

// A remedy that fails to apply undoes those applied before it, and no
// load runs.
func TestRemedyApplyFailureUndoesEarlier(t *testing.T) {
	w := &gucWorkload{seen: map[string]int{}}
	cfg := gucExperiment(t, w, "x=test-guc:early,test-fail-apply")
	_, err := Run(context.Background(), cfg, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "test-fail-apply: refused") {
		t.Fatalf("want the apply failure, got %v", err)
	}
	if got := strings.Join(undone(), " "); got != "run_x_1:early" {
		t.Fatalf("undone: %s", got)
	}
	if n := w.saw("run_x_1:early"); n != 0 {
		t.Fatalf("the load ran %d operations after a failed apply", n)
	}
	if _, err := os.Stat(filepath.Join(cfg.OutDir, "x-1.json")); !os.IsNotExist(err) {
		t.Fatalf("results file of the failed variant: %v", err)
	}
}

// Ctrl-C during a run (its context cancelled): the remedies are undone
// and recorded, and Run reports the interruption.
func TestRemedyUndoneOnInterrupt(t *testing.T) {
	w := &gucWorkload{seen: map[string]int{}}
	cfg := gucExperiment(t, w, "c=test-guc:cancel")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	w.cancel = cancel
	_, err := Run(ctx, cfg, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "interrupted") {
		t.Fatalf("want an interrupted run, got %v", err)
	}
	if got := strings.Join(undone(), " "); got != "run_c_1:cancel" {
		t.Fatalf("undone: %s", got)
	}
	wantGUCRecord(t, remediesOf(t, filepath.Join(cfg.OutDir, "c-1.json")), "run_c_1", "cancel")
}

// The tmpfs remedy through the registry, with its parameter tmpfs-size
// from Config.Params (root only: it mounts a tmpfs).
func TestTmpfsRemedyParam(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("tmpfs-temp-tablespace needs root")
	}
	w := &gucWorkload{seen: map[string]int{}}
	cfg := gucExperiment(t, w, "tmpfs="+tmpfs.Name)
	cfg.Params = map[string]string{tmpfs.SizeParam: "16M"}
	if _, err := Run(context.Background(), cfg, io.Discard); err != nil {
		t.Fatal(err)
	}
	recs := remediesOf(t, filepath.Join(cfg.OutDir, "tmpfs-1.json"))
	if len(recs) != 1 || recs[0].Kind != tmpfs.Name || recs[0].Changed["tmpfs_size"] != "16M" || recs[0].Changed["fs_type"] != "tmpfs" || recs[0].Changed["undone"] != true {
		t.Fatalf("tmpfs remedies: %+v", recs)
	}
	if got := readSetting(t, "temp_tablespaces"); got != "" {
		t.Fatalf("temp_tablespaces after the experiment: %q", got)
	}
}
