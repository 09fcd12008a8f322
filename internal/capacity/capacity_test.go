package capacity_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/erplab/erplab/internal/capacity"
	"github.com/erplab/erplab/internal/engine"
	"github.com/erplab/erplab/internal/loadtest"
	"github.com/erplab/erplab/internal/pgcluster"
	"github.com/erplab/erplab/internal/pgtest"
	"github.com/erplab/erplab/internal/workload"
)

var srv *pgtest.Server

func TestMain(m *testing.M) { os.Exit(pgtest.Run(m, &srv)) }

// queue is the known-answer workload: one key operation "serve" that
// holds its pool connection for a fixed service time S (pg_sleep) against
// a target T; with C pool connections and a fixed think time Z its
// capacity is C·(T+Z)/S users (doc.go, "A known answer").
type queue struct {
	service, target time.Duration
}

func (*queue) Name() string { return "queue" }

func (*queue) Setup(context.Context, *pgxpool.Pool, workload.SetupOptions) error { return nil }

func (q *queue) Operations() []workload.Operation {
	return []workload.Operation{{Name: "serve", Target: q.target, Priority: 1, Description: "sleep the service time"}}
}

func (*queue) Roles() []workload.Role {
	return []workload.Role{{Name: "user", Share: 1, Mix: map[string]float64{"serve": 1}}}
}

func (q *queue) Execute(ctx context.Context, conn *pgx.Conn, _ *workload.VU, _ int) error {
	_, err := conn.Exec(ctx, `SELECT pg_sleep($1)`, q.service.Seconds())
	return err
}

// baseOptions are a step's run options on the test server.
func baseOptions(t *testing.T, w workload.Workload, think time.Duration) loadtest.Options {
	return loadtest.Options{
		DSN: srv.NewDatabase(t), Force: true, Workload: w, Scale: 1, Seed: 1,
		Think: engine.ThinkTime{Kind: "fixed", Min: think}, Interval: time.Second, GracefulStop: 2 * time.Second,
		Observe: true, Version: "test",
	}
}

// TestRunKeepsEveryStep runs a short search on a real server and reads
// the document back: every step with its own results, the verdict line,
// the steps' files on disk.
func TestRunKeepsEveryStep(t *testing.T) {
	pgtest.SkipShort(t)
	out := filepath.Join(t.TempDir(), "cap.json")
	cfg := capacity.Config{
		Base: baseOptions(t, &queue{service: time.Millisecond, target: time.Second}, 100*time.Millisecond),
		Plan: capacity.Plan{Start: 1, Max: 2, Step: capacity.Growth{Factor: 2}, Resolution: 0.05, Integer: true},
		// A target of 1 s for 1 ms operations: every step is good.
		Target: capacity.Target{Apdex: 0.5, ErrorRate: 0.01},
		Hold:   6 * time.Second, Ramp: time.Second, Connections: -1, Out: out,
	}
	doc, err := capacity.Run(context.Background(), cfg, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	back, err := capacity.Read(out)
	if err != nil {
		t.Fatal(err)
	}
	if back.Status != "completed" || len(back.Steps) != 2 || doc.Result.Capacity != 2 || back.Result.Stop.Kind != capacity.StopMaxReached {
		t.Fatalf("status %q, %d steps, capacity %g, stop %+v", back.Status, len(back.Steps), back.Result.Capacity, back.Result.Stop)
	}
	if host, _ := os.Hostname(); back.PID != os.Getpid() || back.Host != host {
		t.Fatalf("writer %+v, want pid %d on %s", back.Writer, os.Getpid(), host)
	}
	for i, s := range back.Steps {
		if s.Run == nil || len(s.Run.Operations) != 1 || s.Run.Operations[0].Count == 0 || s.Outcome != capacity.OutcomeGood {
			t.Fatalf("step %d: %+v", i+1, s)
		}
		if _, err := os.Stat(s.Path); err != nil {
			t.Fatalf("step %d results: %v", i+1, err)
		}
		if s.Resources.Samples == 0 {
			t.Fatalf("step %d: no observation samples after the warm-up", i+1)
		}
	}
	if !strings.HasPrefix(back.Result.Line, "capacity 2 users at APDEX ") {
		t.Fatalf("line %q", back.Result.Line)
	}
}

// TestInterruptKeepsFinishedSteps cancels the search after its first
// step: that step stays in the document, the error says interrupted.
func TestInterruptKeepsFinishedSteps(t *testing.T) {
	pgtest.SkipShort(t)
	out := filepath.Join(t.TempDir(), "cap.json")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cfg := capacity.Config{
		Base:   baseOptions(t, &queue{service: time.Millisecond, target: time.Second}, 100*time.Millisecond),
		Plan:   capacity.Plan{Start: 1, Max: 64, Step: capacity.Growth{Factor: 2}, Resolution: 0.05, Integer: true},
		Target: capacity.Target{Apdex: 0.5, ErrorRate: 0.01},
		Hold:   4 * time.Second, Ramp: 0, Connections: -1, Out: out,
	}
	w := &cancelAfter{lines: 1, cancel: cancel}
	_, err := capacity.Run(ctx, cfg, w)
	if err == nil || !strings.Contains(err.Error(), "interrupted") {
		t.Fatalf("err %v", err)
	}
	back, rerr := capacity.Read(out)
	if rerr != nil {
		t.Fatal(rerr)
	}
	if back.Status != "interrupted" || len(back.Steps) < 1 || back.Steps[0].Run == nil || back.Result.Capacity < 1 {
		t.Fatalf("status %q, %d steps, capacity %g", back.Status, len(back.Steps), back.Result.Capacity)
	}
}

// cancelAfter cancels once it has seen that many step lines.
type cancelAfter struct {
	lines  int
	cancel func()
}

func (c *cancelAfter) Write(p []byte) (int, error) {
	if strings.HasPrefix(string(p), "step ") && strings.Contains(string(p), "APDEX") {
		c.lines--
		if c.lines == 0 {
			c.cancel()
		}
	}
	return len(p), nil
}

// TestKnownCapacity is the acceptance test of issue #19: a fixed service
// time S = 200 ms on C = 4 pool connections with a fixed think time Z =
// 600 ms and a target T = 400 ms carries C·(T+Z)/S = 20 users; the search
// must find it within 15 %. It takes about four minutes and depends on
// the machine keeping the overhead of an operation (round trip, pool
// hand-over, scheduling on a loaded host) small against S, so it runs
// only with ERPLAB_CAPACITY_ACCEPT=1.
func TestKnownCapacity(t *testing.T) {
	pgtest.SkipShort(t)
	if os.Getenv("ERPLAB_CAPACITY_ACCEPT") == "" {
		t.Skip("set ERPLAB_CAPACITY_ACCEPT=1 to run the known-answer acceptance test (about 3 minutes)")
	}
	const (
		c = 4
		s = 200 * time.Millisecond
		z = 600 * time.Millisecond
		T = 400 * time.Millisecond
	)
	want := capacity.KnownCapacity(c, s, z, T)
	if want != 20 {
		t.Fatalf("formula: %g", want)
	}
	out := filepath.Join(t.TempDir(), "cap.json")
	if d := os.Getenv("ERPLAB_CAPACITY_KEEP"); d != "" {
		out = filepath.Join(d, "known.json")
	}
	cfg := capacity.Config{
		Base:   baseOptions(t, &queue{service: s, target: T}, z),
		Plan:   capacity.Plan{Start: 5, Max: 80, Step: capacity.Growth{Factor: 2}, Resolution: 0.05, Integer: true},
		Target: capacity.Target{Apdex: 0.85, ErrorRate: 0.01},
		Hold:   15 * time.Second, Ramp: 2 * time.Second, Warmup: 3 * time.Second, Connections: c, Out: out,
	}
	var log strings.Builder
	doc, err := capacity.Run(context.Background(), cfg, &log)
	t.Log(log.String())
	if err != nil {
		t.Fatal(err)
	}
	got := doc.Result.Capacity
	t.Logf("capacity %g users (formula %g): %+.1f %%; %s", got, want, 100*(got-want)/want, doc.Result.Line)
	if math.Abs(got-want) > 0.15*want {
		t.Fatalf("capacity %g users, want %g within 15 %%", got, want)
	}
	if !strings.Contains(doc.Result.Limit, "pool") {
		t.Errorf("limit %q: want the pool named", doc.Result.Limit)
	}
}

// TestRunOpenModel: with Open the load is an arrival rate; each step's
// run is the open model at that rate (its parameters say so) and the
// steps grow as arrivals per second.
func TestRunOpenModel(t *testing.T) {
	pgtest.SkipShort(t)
	out := filepath.Join(t.TempDir(), "cap.json")
	cfg := capacity.Config{
		Base:   baseOptions(t, &queue{service: time.Millisecond, target: time.Second}, 0),
		Plan:   capacity.Plan{Start: 5, Max: 10, Step: capacity.Growth{Factor: 2}, Resolution: 0.05},
		Target: capacity.Target{Apdex: 0.5, ErrorRate: 0.01},
		Open:   true, Workers: 4, Hold: 5 * time.Second, Ramp: time.Second, Connections: -1, Out: out,
	}
	doc, err := capacity.Run(context.Background(), cfg, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if doc.Model != "open" || doc.Unit != "arrivals/s" || len(doc.Steps) != 2 || doc.Steps[1].Load != 10 || doc.Result.Capacity != 10 {
		t.Fatalf("model %q unit %q, %d steps, capacity %g", doc.Model, doc.Unit, len(doc.Steps), doc.Result.Capacity)
	}
	var p struct {
		MaxVUs     int `json:"max_vus"`
		RateStages []struct {
			Rate float64 `json:"rate_per_s"`
		} `json:"rate_stages"`
	}
	if err := json.Unmarshal(doc.Steps[1].Run.Parameters, &p); err != nil {
		t.Fatal(err)
	}
	if p.MaxVUs != 4 || len(p.RateStages) != 1 || p.RateStages[0].Rate != 10 {
		t.Fatalf("step 2 parameters %+v", p)
	}
	// 10 arrivals/s of 1 ms operations: the scored throughput is about
	// the rate (Poisson arrivals over a 5 s hold).
	if tp := doc.Steps[1].Throughput; tp < 5 || tp > 15 {
		t.Fatalf("throughput %.1f/s at 10 arrivals/s", tp)
	}
}

// TestServerFailsDuringSearch stops the server of its own after the
// first step: the search ends with that step kept, the capacity known so
// far in the document and the error.
func TestServerFailsDuringSearch(t *testing.T) {
	pgtest.SkipShort(t)
	ctx := context.Background()
	c, err := pgcluster.Start(ctx, pgcluster.Options{BinDir: srv.BinDir(t), StopWithParent: true})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Stop()
	if err := c.CreateDatabase(ctx, "cap"); err != nil {
		t.Fatal(err)
	}
	base := baseOptions(t, &queue{service: time.Millisecond, target: time.Second}, 100*time.Millisecond)
	base.DSN, base.ServerGoneAfter = c.DSN("cap"), 2*time.Second
	out := filepath.Join(t.TempDir(), "cap.json")
	cfg := capacity.Config{
		Base:   base,
		Plan:   capacity.Plan{Start: 1, Max: 64, Step: capacity.Growth{Factor: 2}, Resolution: 0.05, Integer: true},
		Target: capacity.Target{Apdex: 0.5, ErrorRate: 0.01},
		Hold:   3 * time.Second, Connections: -1, Out: out,
	}
	var log strings.Builder
	w := &onFirstStep{w: &log, do: func() { c.Stop() }}
	doc, err := capacity.Run(ctx, cfg, w)
	if !errors.Is(err, capacity.ErrServerFailed) {
		t.Fatalf("err %v; output:\n%s", err, log.String())
	}
	back, rerr := capacity.Read(out)
	if rerr != nil {
		t.Fatal(rerr)
	}
	if !strings.HasPrefix(back.Status, "failed: ") || back.Steps[0].Outcome != capacity.OutcomeGood || back.Result.Capacity != 1 ||
		back.Result.Stop.Kind != capacity.StopServer || doc.Result.Capacity != 1 {
		t.Fatalf("status %q, steps %d, capacity %g, stop %+v", back.Status, len(back.Steps), back.Result.Capacity, back.Result.Stop)
	}
	if !strings.Contains(log.String(), "capacity 1 user at APDEX") {
		t.Fatalf("the capacity known so far is not printed:\n%s", log.String())
	}
}

// onFirstStep runs do once, after the first step's line.
type onFirstStep struct {
	w    io.Writer
	do   func()
	done bool
}

func (o *onFirstStep) Write(p []byte) (int, error) {
	n, err := o.w.Write(p)
	if !o.done && strings.HasPrefix(string(p), "step 1: ") {
		o.done = true
		o.do()
	}
	return n, err
}
