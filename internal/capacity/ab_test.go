package capacity_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/erplab/erplab/internal/capacity"
	"github.com/erplab/erplab/internal/engine"
	"github.com/erplab/erplab/internal/experiment"
	"github.com/erplab/erplab/internal/loadtest"
	"github.com/erplab/erplab/internal/pgcluster"
	"github.com/erplab/erplab/internal/pgtest"
	"github.com/erplab/erplab/internal/remedy"
	_ "github.com/erplab/erplab/internal/remedy/settings"
	"github.com/erplab/erplab/internal/workload"
)

// jitQueue is the known-answer queue whose service time a server setting
// sets: 4·S with jit on, S with jit off (the stand-in for a per-statement
// cost a settings profile removes), so the remedy settings:FILE with
// "jit = off" moves the knee C·(T+Z)/S computably.
type jitQueue struct {
	service, target time.Duration
}

func (*jitQueue) Name() string { return "jitqueue" }

func (*jitQueue) Setup(context.Context, *pgxpool.Pool, workload.SetupOptions) error { return nil }

func (q *jitQueue) Operations() []workload.Operation {
	return []workload.Operation{{Name: "serve", Target: q.target, Priority: 1, Description: "sleep 4 S with jit on, S with jit off"}}
}

func (*jitQueue) Roles() []workload.Role {
	return []workload.Role{{Name: "user", Share: 1, Mix: map[string]float64{"serve": 1}}}
}

func (q *jitQueue) Execute(ctx context.Context, conn *pgx.Conn, _ *workload.VU, _ int) error {
	_, err := conn.Exec(ctx, `SELECT pg_sleep(CASE WHEN current_setting('jit')::bool THEN 4 * $1::float8 ELSE $1::float8 END)`, q.service.Seconds())
	return err
}

// TestABMovesTheKnee runs an A/B of capacity on its own server: the
// baseline (jit on: S = 40 ms) and a variant settings:jit=off (S = 10 ms)
// on C = 2 connections with Z = 120 ms and T = 80 ms have the known
// capacities C·(T+Z)/S = 10 and 40 users. Searched from 8 users by x2 up
// to 16 at a resolution of 50 %: the baseline runs 8 (good), 16 and 12
// (bad, APDEX about 0.5), the variant 8 and 16 (good: at least 16).
// It checks the document's structure, both sides' steps, the loads they
// share, the remedy's record (jit off during, reset after), the verdict
// of one round each, and the files each search left.
func TestABMovesTheKnee(t *testing.T) {
	pgtest.SkipShort(t)
	ctx := context.Background()
	c, err := pgcluster.Start(ctx, pgcluster.Options{BinDir: srv.BinDir(t), StopWithParent: true, Settings: map[string]string{"jit": "on"}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Stop()
	const (
		conns = 2
		s     = 10 * time.Millisecond
		z     = 120 * time.Millisecond
		T     = 80 * time.Millisecond
	)
	if a, b := capacity.KnownCapacity(conns, 4*s, z, T), capacity.KnownCapacity(conns, s, z, T); a != 10 || b != 40 {
		t.Fatalf("formula: %g, %g", a, b)
	}
	w := &jitQueue{service: s, target: T}
	if err := experiment.BuildTemplate(ctx, c, experiment.DefaultTemplate, w, 1, 1, os.Stderr); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	conf := filepath.Join(dir, "jit-off.conf")
	if err := os.WriteFile(conf, []byte("jit = off  # the per-statement cost\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	v, err := experiment.ParseVariant("nojit=settings:" + conf)
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "ab.json")
	if d := os.Getenv("ERPLAB_CAPACITY_KEEP"); d != "" {
		out = filepath.Join(d, "ab.json")
	}
	cfg := capacity.ABConfig{
		Search: capacity.Config{
			Base: loadtest.Options{Scale: 1, Seed: 1, Think: engine.ThinkTime{Kind: "fixed", Min: z}, Interval: time.Second,
				GracefulStop: 2 * time.Second, Observe: true, Version: "test"},
			Plan:   capacity.Plan{Start: 8, Max: 16, Step: capacity.Growth{Factor: 2}, Resolution: 0.5, Integer: true},
			Target: capacity.Target{Apdex: 0.85, ErrorRate: 0.01},
			Hold:   3 * time.Second, Ramp: time.Second, Connections: conns,
		},
		Experiment: experiment.Config{Cluster: c, NewWorkload: func(map[string]string) (workload.Workload, error) { return w, nil },
			Variants: []experiment.Variant{v}, Rounds: 1, Balanced: true},
		Out: out,
	}
	var log strings.Builder
	doc, err := capacity.RunAB(ctx, cfg, &log)
	t.Log(log.String())
	if err != nil {
		t.Fatal(err)
	}
	back, err := capacity.ReadAB(out)
	if err != nil {
		t.Fatal(err)
	}
	if back.Status != "completed" || len(back.Sides) != 2 || back.Sides[0].Name != "baseline" || back.Sides[1].Name != "nojit" || back.Unit != "users" {
		t.Fatalf("status %q, sides %+v, unit %q", back.Status, back.Sides, back.Unit)
	}
	loads := func(side int) []float64 {
		var l []float64
		for _, st := range back.Sides[side].Searches[0].Doc.Steps {
			l = append(l, st.Load)
		}
		return l
	}
	for i, want := range [][]float64{{8, 16, 12}, {8, 16}} {
		s := back.Sides[i]
		if len(s.Searches) != 1 || s.Searches[0].Doc == nil || len(s.Searches[0].Doc.Steps) != len(want) {
			t.Fatalf("side %s: searches %+v", s.Name, s.Searches)
		}
		for k, st := range s.Searches[0].Doc.Steps {
			if st.Load != want[k] || st.Run != nil || st.Path == "" {
				t.Fatalf("side %s: loads %v, want %v (step %d: run kept %v, path %q)", s.Name, loads(i), want, k+1, st.Run != nil, st.Path)
			}
			if _, err := os.Stat(st.Path); err != nil {
				t.Fatalf("side %s step %d: %v", s.Name, k+1, err)
			}
		}
		if _, err := capacity.Read(s.Searches[0].Path); err != nil {
			t.Fatalf("side %s: its search document: %v", s.Name, err)
		}
	}
	if back.Sides[0].Capacity == nil || back.Sides[0].Capacity.Median != 8 || back.Sides[1].Capacity == nil || back.Sides[1].Capacity.Median != 16 || !back.Sides[1].Capacity.AtLeast {
		t.Fatalf("capacities %+v, %+v: want 8 and at least 16", back.Sides[0].Capacity, back.Sides[1].Capacity)
	}
	if len(back.Common) != 2 || back.Common[0].Load != 8 || back.Common[1].Load != 16 || len(back.Common[1].Sides) != 2 ||
		!(back.Common[1].Sides[1].Median > back.Common[1].Sides[0].Median) {
		t.Fatalf("common loads %+v", back.Common)
	}
	recs := back.Sides[1].Searches[0].Remedies
	if len(recs) != 1 || recs[0].Kind != "settings" || len(back.Sides[0].Searches[0].Remedies) != 0 {
		t.Fatalf("remedies %+v / %+v", recs, back.Sides[0].Searches[0].Remedies)
	}
	if ch := recordText(recs[0]); !strings.Contains(ch, `"during":"off"`) || !strings.Contains(ch, `"after_reset":"on"`) {
		t.Fatalf("settings record %s", ch)
	}
	if len(doc.Verdicts) != 1 || doc.Verdicts[0].Verdict != capacity.ABInconclusive ||
		doc.Verdicts[0].Line != "capacity 8 users -> at least 16 users (+100 %); inconclusive: one round each" {
		t.Fatalf("verdicts %+v", doc.Verdicts)
	}
	if !strings.Contains(log.String(), "VERDICT nojit: capacity 8 users -> at least 16 users") {
		t.Fatalf("no verdict line in the output")
	}
}

func recordText(r remedy.Record) string {
	b, _ := json.Marshal(r.Changed)
	return string(b)
}
