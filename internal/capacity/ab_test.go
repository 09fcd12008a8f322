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
type jitQueue struct{ queue }

func (*jitQueue) Name() string { return "jitqueue" }

func (q *jitQueue) Execute(ctx context.Context, conn *pgx.Conn, _ *workload.VU, _ int) error {
	_, err := conn.Exec(ctx, `SELECT pg_sleep(CASE WHEN current_setting('jit')::bool THEN 4 * $1::float8 ELSE $1::float8 END)`, q.service.Seconds())
	return err
}

// TestABMovesTheKnee runs an A/B of capacity on its own server: the
// baseline (jit on: S = 40 ms) and a variant settings:jit=off (S = 10 ms)
// on C = 2 connections with Z = 170 ms and T = 80 ms have the known
// capacities C·(T+Z)/S = 12.5 and 50 users (knees C·(S+Z)/S = 10.5 and
// 36). Searched from 8 users by x2 up to 16 at a resolution of 50 %: the
// baseline runs 8 (good, below its knee), 16 (bad: R = 150 ms, APDEX
// about 0.5) and the midpoint 12 (good or bad: 2 ms from the capacity,
// not asserted), the variant 8 and 16 (good, far below its knee: at
// least 16).
// It checks the document's structure, both sides' judged steps and the
// files each search left, the loads they share, the remedy's record (jit
// off during the variant's search, reset after it) and the verdict of one
// round each; the capacities themselves with ERPLAB_CAPACITY_ACCEPT=1.
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
		z     = 170 * time.Millisecond
		T     = 80 * time.Millisecond
	)
	if a, b := capacity.KnownCapacity(conns, 4*s, z, T), capacity.KnownCapacity(conns, s, z, T); a != 12.5 || b != 50 {
		t.Fatalf("formula: %g, %g", a, b)
	}
	w := &jitQueue{queue{service: s, target: T}}
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
	for _, sd := range back.Sides {
		if len(sd.Searches) != 1 || sd.Searches[0].Doc == nil || len(sd.Searches[0].Doc.Steps) == 0 || sd.Searches[0].Doc.Steps[0].Load != 8 {
			t.Fatalf("side %s: searches %+v", sd.Name, sd.Searches)
		}
		for k, st := range sd.Searches[0].Doc.Steps {
			if st.Run != nil || st.Path == "" || st.Outcome != capacity.OutcomeGood && st.Outcome != capacity.OutcomeBad {
				t.Fatalf("side %s step %d: run kept %v, path %q, outcome %q", sd.Name, k+1, st.Run != nil, st.Path, st.Outcome)
			}
			if _, err := os.Stat(st.Path); err != nil {
				t.Fatalf("side %s step %d: %v", sd.Name, k+1, err)
			}
		}
		if _, err := capacity.Read(sd.Searches[0].Path); err != nil {
			t.Fatalf("side %s: its search document: %v", sd.Name, err)
		}
		if ok := sd.Searches[0].Doc.Status == "completed"; !ok || sd.Capacity == nil {
			t.Fatalf("side %s: status %q, capacity %+v", sd.Name, sd.Searches[0].Doc.Status, sd.Capacity)
		}
	}
	bc, vc := back.Sides[0].Capacity, back.Sides[1].Capacity
	t.Logf("capacity %g -> %g users (known answers 12.5 and 50, searched up to 16)", bc.Median, vc.Median)
	if len(back.Common) == 0 || back.Common[0].Load != 8 || len(back.Common[0].Sides) != 2 {
		t.Fatalf("common loads %+v", back.Common)
	}
	recs := back.Sides[1].Searches[0].Remedies
	if len(recs) != 1 || recs[0].Kind != "settings" || len(back.Sides[0].Searches[0].Remedies) != 0 {
		t.Fatalf("remedies %+v / %+v", recs, back.Sides[0].Searches[0].Remedies)
	}
	if ch := recordText(recs[0]); !strings.Contains(ch, `"during":"off"`) || !strings.Contains(ch, `"after_reset":"on"`) {
		t.Fatalf("settings record %s", ch)
	}
	if len(doc.Verdicts) != 1 || doc.Verdicts[0].Verdict != capacity.ABInconclusive || !strings.HasPrefix(doc.Verdicts[0].Line, "capacity ") ||
		!strings.HasSuffix(doc.Verdicts[0].Line, "; inconclusive: one round each") {
		t.Fatalf("verdicts %+v", doc.Verdicts)
	}
	if !strings.Contains(log.String(), "VERDICT nojit: "+doc.Verdicts[0].Line) {
		t.Fatalf("no verdict line in the output")
	}
	// The knee itself depends on the machine keeping an operation's
	// overhead small against S (on a 2-core host at load average 30 the
	// baseline's 8 users fell to APDEX 0.78): asserted in the acceptance
	// run only.
	if os.Getenv("ERPLAB_CAPACITY_ACCEPT") != "" {
		if bc.Median != 8 && bc.Median != 12 || vc.Median != 16 || !vc.AtLeast {
			t.Fatalf("capacities %+v, %+v: want 8 or 12, and at least 16", bc, vc)
		}
	}
}

func recordText(r remedy.Record) string {
	b, _ := json.Marshal(r.Changed)
	return string(b)
}
