package pgbench_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/erplab/erplab/internal/engine"
	"github.com/erplab/erplab/internal/loadtest"
	wpgbench "github.com/erplab/erplab/internal/pgbench"
	"github.com/erplab/erplab/internal/pgbench/script"
	"github.com/erplab/erplab/internal/pgbench/tables"
	"github.com/erplab/erplab/internal/pgtest"
	"github.com/erplab/erplab/internal/versus/pgbenchinit"
	"github.com/erplab/erplab/internal/workload"
)

var srv *pgtest.Server

func TestMain(m *testing.M) { os.Exit(pgtest.Run(m, &srv)) }

func builtin(t *testing.T, name string) *script.Script {
	t.Helper()
	s, err := script.Builtin(name)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// run runs the workload through loadtest.Run (the whole `erplab run`
// path) and returns the printed output and the results.
func run(t *testing.T, dsn string, w *wpgbench.Workload, stages []engine.Stage, txPerVU int) (string, *loadtest.Result) {
	t.Helper()
	var out bytes.Buffer
	res, err := loadtest.Run(context.Background(), loadtest.Options{
		DSN: dsn, Force: true, Workload: w, Stages: stages, TxPerVU: txPerVU, Connections: 0, Seed: 1,
		Interval: time.Second, Out: filepath.Join(t.TempDir(), "r.json"),
	}, &out)
	if err != nil {
		t.Fatalf("run: %v\n%s", err, out.String())
	}
	return out.String(), res
}

// runFailing is run for a script whose every attempt fails: the run is
// failed (loadtest.ErrRunFailed) and its results are still there.
func runFailing(t *testing.T, dsn string, w *wpgbench.Workload, stages []engine.Stage, txPerVU int) (string, *loadtest.Result) {
	t.Helper()
	var out bytes.Buffer
	res, err := loadtest.Run(context.Background(), loadtest.Options{
		DSN: dsn, Force: true, Workload: w, Stages: stages, TxPerVU: txPerVU, Connections: 0, Seed: 1,
		Interval: time.Second, Out: filepath.Join(t.TempDir(), "r.json"),
	}, &out)
	if !errors.Is(err, loadtest.ErrRunFailed) || res == nil || res.Doc == nil {
		t.Fatalf("run: %v, want the run failed with its results\n%s", err, out.String())
	}
	return out.String(), res
}

func TestBuiltinTransactionsPerClient(t *testing.T) {
	dsn := srv.NewDatabase(t)
	w, err := wpgbench.New(wpgbench.Options{
		Scripts: []*script.Script{builtin(t, "tpcb-like")}, Mode: script.Prepared, RandomSeed: 7,
		Clients: 3, TxPerClient: 5, PerCommand: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	stages, _ := engine.SimpleStages(3, 0, time.Hour)
	out, res := run(t, dsn, w, stages, 5)
	if got := res.Doc.Operations[0].Count; got != 15 {
		t.Fatalf("tpcb-like count = %d, want 3 clients x 5 = 15\n%s", got, out)
	}
	if res.Doc.Operations[0].Name != "tpcb-like" {
		t.Fatalf("operation name %q", res.Doc.Operations[0].Name)
	}
	// The database saw exactly 15 history rows (pgbench's vacuum
	// truncated it first).
	pool := srv.Pool(t, dsn)
	var n int
	if err := pool.QueryRow(context.Background(), "select count(*) from pgbench_history").Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 15 {
		t.Fatalf("pgbench_history has %d rows, want 15", n)
	}
	for _, want := range []string{
		"transaction type: <builtin: TPC-B (sort of)>",
		"scaling factor: 1",
		"query mode: prepared",
		"number of clients: 3",
		"number of transactions per client: 5",
		"number of transactions actually processed: 15/15",
		"number of failed transactions: 0 (0.000%)",
		"statement latencies in milliseconds and failures:",
		"UPDATE pgbench_accounts SET abalance = abalance + :delta WHERE aid = :aid;",
		"target time T 50ms, key operation tpcb-like",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("summary lacks %q:\n%s", want, out)
		}
	}
}

func TestCustomScriptWithDefines(t *testing.T) {
	dsn := srv.NewDatabase(t)
	pool := srv.Pool(t, dsn)
	if _, err := pool.Exec(context.Background(), "create table seen (client int, v int)"); err != nil {
		t.Fatal(err)
	}
	src := "\\set v :base + :client_id\ninsert into seen values (:client_id, :v);\n"
	sc, err := script.Parse("ins.sql", src)
	if err != nil {
		t.Fatal(err)
	}
	w, err := wpgbench.New(wpgbench.Options{
		Scripts: []*script.Script{sc}, Mode: script.Extended, Defines: map[string]string{"base": "100"},
		Clients: 2, TxPerClient: 4, NoVacuum: true,
		Targets: map[string]time.Duration{"ins": 10 * time.Millisecond},
	})
	if err != nil {
		t.Fatal(err)
	}
	stages, _ := engine.SimpleStages(2, 0, time.Hour)
	out, res := run(t, dsn, w, stages, 4)
	if res.Doc.Operations[0].Name != "ins" || res.Doc.Operations[0].TargetMs != 10 {
		t.Fatalf("operation %q T %g ms, want ins with T 10 ms", res.Doc.Operations[0].Name, res.Doc.Operations[0].TargetMs)
	}
	var sum, n int
	if err := pool.QueryRow(context.Background(), "select coalesce(sum(v),0), count(*) from seen").Scan(&sum, &n); err != nil {
		t.Fatal(err)
	}
	// 4 rows of client 0 (v = 100) and 4 of client 1 (v = 101).
	if n != 8 || sum != 4*100+4*101 {
		t.Fatalf("seen: %d rows summing to %d, want 8 rows summing to 804\n%s", n, sum, out)
	}
}

func TestNewRejects(t *testing.T) {
	if _, err := wpgbench.New(wpgbench.Options{}); err == nil {
		t.Fatal("no scripts accepted")
	}
	_, err := wpgbench.New(wpgbench.Options{
		Scripts: []*script.Script{builtin(t, "select-only")}, Targets: map[string]time.Duration{"nope": time.Second},
	})
	if err == nil || !strings.Contains(err.Error(), "select-only") {
		t.Fatalf("unknown --target name: err = %v, want one naming the scripts", err)
	}
}

// In a user's database (no --force) Setup never creates tables; it says
// how to.
func TestSetupRefusesToCreateTablesUnasked(t *testing.T) {
	dsn := srv.NewDatabase(t)
	w, err := wpgbench.New(wpgbench.Options{Scripts: []*script.Script{builtin(t, "select-only")}, Clients: 1, TxPerClient: 1})
	if err != nil {
		t.Fatal(err)
	}
	stages, _ := engine.SimpleStages(1, 0, time.Hour)
	var out bytes.Buffer
	_, err = loadtest.Run(context.Background(), loadtest.Options{
		DSN: dsn, Workload: w, Stages: stages, TxPerVU: 1, Interval: time.Second, Out: filepath.Join(t.TempDir(), "r.json"),
	}, &out)
	if err == nil || !strings.Contains(err.Error(), "erplab init --workload pgbench") {
		t.Fatalf("err = %v, want a refusal naming erplab init", err)
	}
	var n int
	if err := srv.Pool(t, dsn).QueryRow(context.Background(), "select count(*) from pg_class where relname like 'pgbench_%'").Scan(&n); err != nil || n != 0 {
		t.Fatalf("%d pgbench relations created (err %v)", n, err)
	}
}

// A failing script's error messages are kept, counted and printed; a
// client stops after its first error as pgbench aborts it, unless
// ContinueOnError.
func TestErrorMessagesKept(t *testing.T) {
	for _, c := range []struct {
		cont          bool
		errors, abort int64
	}{{false, 2, 2}, {true, 6, 0}} {
		dsn := srv.NewDatabase(t)
		sc, err := script.Parse("div.sql", "select 1/0;\n")
		if err != nil {
			t.Fatal(err)
		}
		var debug bytes.Buffer
		w, err := wpgbench.New(wpgbench.Options{Scripts: []*script.Script{sc}, Clients: 2, TxPerClient: 3, NoVacuum: true, Debug: &debug, ContinueOnError: c.cont})
		if err != nil {
			t.Fatal(err)
		}
		stages, _ := engine.SimpleStages(2, 0, time.Hour)
		out, res := runFailing(t, dsn, w, stages, 3)
		msgs, counts := w.Errors(0)
		if len(msgs) != 1 || counts[0] != c.errors || !strings.Contains(msgs[0], "division by zero") {
			t.Fatalf("continue %v: errors %q %v, want one division-by-zero message seen %d times", c.cont, msgs, counts, c.errors)
		}
		if res.Doc.Operations[0].Errors != c.errors || int64(res.Doc.Totals.AbortedVUs) != c.abort || !strings.Contains(out, fmt.Sprintf("%d x div.sql:1:", c.errors)) {
			t.Fatalf("continue %v: errors %d aborted %d; summary:\n%s", c.cont, res.Doc.Operations[0].Errors, res.Doc.Totals.AbortedVUs, out)
		}
		if strings.Count(debug.String(), "division by zero") != 1 {
			t.Fatalf("distinct message printed %d times, want once:\n%s", strings.Count(debug.String(), "division by zero"), debug.String())
		}
	}
}

// erplab init --workload pgbench --drop leaves the tables of the real
// pgbench -i alone without --force, and a run refuses a database holding
// a view of someone else next to the pgbench tables.
func TestDropAndRunGuardOverRealPgbenchTables(t *testing.T) {
	pgbench, err := pgbenchinit.FindPgbench(srv.BinDir(t))
	if err != nil {
		t.Skipf("no pgbench binary: %v", err)
	}
	ctx := context.Background()
	dsn := srv.NewDatabase(t)
	pool := srv.Pool(t, dsn)
	if _, err := tables.RunPgbench(ctx, pgbench, dsn, tables.Options{Scale: 1}); err != nil {
		t.Fatal(err)
	}
	w, err := wpgbench.New(wpgbench.Options{Scripts: []*script.Script{builtin(t, "select-only")}, Clients: 1, TxPerClient: 1})
	if err != nil {
		t.Fatal(err)
	}
	_, err = w.DropData(ctx, pool, false)
	if !errors.Is(err, workload.ErrForeignDatabase) {
		t.Fatalf("DropData over pgbench -i's tables: %v; want ErrForeignDatabase", err)
	}
	count := func() int {
		var n int
		if err := pool.QueryRow(ctx, "select count(*) from pg_class where relname like 'pgbench_%' and relkind = 'r'").Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	if n := count(); n != 4 {
		t.Fatalf("%d pgbench tables after the refused drop, want 4", n)
	}
	// A run over pgbench -i's tables is fine; next to a view it is not.
	if err := w.Setup(ctx, pool, workload.SetupOptions{}); err != nil {
		t.Fatalf("Setup over pgbench -i's tables: %v", err)
	}
	if _, err := pool.Exec(ctx, "create view rich as select * from pgbench_accounts where abalance > 0"); err != nil {
		t.Fatal(err)
	}
	if err := w.Setup(ctx, pool, workload.SetupOptions{}); !errors.Is(err, workload.ErrForeignDatabase) || !strings.Contains(err.Error(), "public.rich (view)") {
		t.Fatalf("Setup next to a view: %v; want ErrForeignDatabase naming public.rich (view)", err)
	}
	if _, err := pool.Exec(ctx, "drop view rich"); err != nil {
		t.Fatal(err)
	}
	line, err := w.DropData(ctx, pool, true)
	if err != nil || count() != 0 {
		t.Fatalf("DropData with force: %q, %v, %d tables left", line, err, count())
	}
}
