package loadtest_test

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/erplab/erplab/internal/compare"
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

// Every key operation that ran has its statements in the results, each
// attributed by the texts the engine saw it send (not by the 1 s samples
// of pg_stat_activity, which see a short statement by chance), so a
// comparison has plan_ms and exec_ms rows for each (issue 31 item 4).
func TestRunStatementsEveryOperation(t *testing.T) {
	dsn := srv.NewDatabase(t)
	admin := srv.Pool(t, dsn)
	pgtest.NeedExtension(t, dsn, "pg_stat_statements")
	if _, err := admin.Exec(context.Background(), "CREATE EXTENSION IF NOT EXISTS pg_stat_statements"); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	res, err := loadtest.Run(context.Background(), smokeOptions(t, dsn, 4*time.Second), &out)
	if err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	doc, err := results.Read(res.Path)
	if err != nil {
		t.Fatal(err)
	}
	o, err := sampler.ReadObservations(doc.Extra["observations"])
	if err != nil {
		t.Fatal(err)
	}
	if o.Statements == nil || !o.Statements.TrackPlanning {
		t.Fatalf("statements %+v, want them with planning tracked", o.Statements)
	}
	got := map[string]sampler.OpStatements{}
	for _, x := range o.Statements.Operations {
		got[x.Operation] = x
	}
	ran := 0
	for _, op := range doc.Operations {
		execs := op.Count + op.WarmupCount
		if execs == 0 {
			continue
		}
		ran++
		if x, ok := got[op.Name]; !ok || 2*int64(x.Calls) < execs || x.ExecMs <= 0 {
			t.Errorf("%s ran %d times; its statements: %+v (ok %v), want about a call per execution", op.Name, execs, x, ok)
		}
	}
	if ran < 4 {
		t.Fatalf("%d operations ran, want most of smoke's 5", ran)
	}
	engine := 0
	for _, s := range o.Statements.Top {
		if s.AttributedBy == "engine" {
			engine++
		}
	}
	if engine == 0 || !strings.Contains(o.Statements.Attribution, "by the texts the engine saw") {
		t.Errorf("no statement attributed by the engine's texts (%d); attribution %q", engine, o.Statements.Attribution)
	}
	c, err := compare.Compare("a", doc, "b", doc, compare.Options{})
	if err != nil {
		t.Fatal(err)
	}
	rows := map[string]int{}
	for _, r := range c.Rows {
		if r.Section == "statements" {
			rows[r.Subject]++
		}
	}
	if len(rows) != ran {
		t.Errorf("statements rows for %d operations (%v), want all %d that ran", len(rows), rows, ran)
	}
	for name, n := range rows {
		if n != 2 {
			t.Errorf("%s has %d statements rows, want plan_ms and exec_ms", name, n)
		}
	}
	t.Logf("%s; operations %v", o.Statements.Attribution, rows)
}

// The stream of a run carries its observations as they are sampled: the
// stream without its summary line (the run killed at its end) reads as
// the same samples, server, storm rule and storms as the finished
// document's observations, up to the last interval line.
func TestStreamedObservationsMatchDocument(t *testing.T) {
	opts := smokeOptions(t, srv.NewDatabase(t), 3*time.Second)
	opts.Interval, opts.Progress = 500*time.Millisecond, 0
	var out bytes.Buffer
	res, err := loadtest.Run(context.Background(), opts, &out)
	if err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	done, err := sampler.ObservationsOf(res.Doc)
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(res.StreamPath)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.SplitAfter(strings.TrimSuffix(string(b), "\n"), "\n")
	killed := filepath.Join(t.TempDir(), "killed.jsonl")
	if err := os.WriteFile(killed, []byte(strings.Join(lines[:len(lines)-1], "")), 0o600); err != nil {
		t.Fatal(err)
	}
	doc, err := results.Read(killed)
	if err != nil {
		t.Fatal(err)
	}
	streamed, err := sampler.ObservationsOf(doc)
	if err != nil {
		t.Fatal(err)
	}
	n := len(streamed.Series)
	if n < 6 || n > len(done.Series) || len(done.Series)-n > 3 {
		t.Fatalf("%d samples streamed, %d in the document", n, len(done.Series))
	}
	for _, c := range []struct {
		what      string
		got, want any
	}{
		{"series", streamed.Series, done.Series[:n]},
		{"server", streamed.Server, done.Server},
		{"storm rule", streamed.StormRule, done.StormRule},
		{"storms", streamed.Storms, done.Storms},
		{"head", []any{streamed.Format, streamed.IntervalS, streamed.Horizon}, []any{done.Format, done.IntervalS, done.Horizon}},
	} {
		got, _ := json.Marshal(c.got)
		want, _ := json.Marshal(c.want)
		if string(got) != string(want) {
			t.Errorf("%s streamed:\n%s\nin the document:\n%s", c.what, got, want)
		}
	}
}
