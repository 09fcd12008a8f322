package experiment

import (
	"math"
	"strings"
	"testing"
	"time"

	"github.com/erplab/erplab/internal/compare"
	"github.com/erplab/erplab/internal/engine"
	"github.com/erplab/erplab/internal/erp"
	"github.com/erplab/erplab/internal/loadtest"
	_ "github.com/erplab/erplab/internal/remedy/all"
	"github.com/erplab/erplab/internal/workload/smoke"
)

func near(a, b float64) bool { return math.Abs(a-b) <= 1e-4*math.Max(1, math.Abs(b)) }

// The smallest p-value a row reaches over n rounds a side, by hand:
// 2/C(2n, n) for a row constant within each side, 1 with one round, no
// floor (0) for Welch's t.
func TestPlanMinP(t *testing.T) {
	for _, c := range []struct {
		n        int
		constant bool
		want     float64
	}{
		{1, true, 1}, {1, false, 1}, {2, true, 2.0 / 6}, {3, true, 2.0 / 20}, {4, true, 2.0 / 70},
		{5, true, 2.0 / 252}, {6, true, 2.0 / 924}, {2, false, 0}, {3, false, 0},
	} {
		if got := MinP(c.n, c.constant); !near(got, c.want) {
			t.Errorf("MinP(%d, %v) = %g, want %g", c.n, c.constant, got, c.want)
		}
	}
}

// VU-seconds and executions a run from the load profile, by hand.
func TestPlanExecutions(t *testing.T) {
	ramp := []engine.Stage{{Duration: 10 * time.Second, Target: 10}, {Duration: 60 * time.Second, Target: 10}}
	for _, c := range []struct {
		stages []engine.Stage
		from   time.Duration
		want   float64
	}{
		{ramp, 0, 50 + 600},            // the ramp 0 -> 10 over 10 s, then 10 VUs for 60 s
		{ramp, 5 * time.Second, 637.5}, // 5 -> 10 VUs over the ramp's last 5 s: 7.5 · 5, then 600
		{ramp, 30 * time.Second, 400},  // 10 VUs for the last 40 s
		{[]engine.Stage{{Duration: 0, Target: 4}, {Duration: 20 * time.Second, Target: 4}}, 0, 80}, // --users 4 --duration 20s
		{[]engine.Stage{{Duration: 10 * time.Second, Target: 10}, {Duration: 10 * time.Second, Target: 0}}, 0, 100},
	} {
		if got := VUSeconds(c.stages, c.from); !near(got, c.want) {
			t.Errorf("VUSeconds(%v, %s) = %g, want %g", c.stages, c.from, got, c.want)
		}
	}
	think, _ := engine.ParseThinkTime("500ms-1500ms") // mean 1 s
	load := loadtest.Options{Workload: erp.New(erp.WorkloadOptions{}), Stages: []engine.Stage{{Duration: 0, Target: 10}, {Duration: time.Minute, Target: 10}},
		Warmup: 10 * time.Second, Think: think}
	if got := ScoredExecutions(load); !near(got, 500) { // 10 VUs · 50 s / 1 s
		t.Errorf("ScoredExecutions = %g, want 500", got)
	}
	// the ERP roles (shares 4, 3, 2, 2, 1, 0.5 of 12.5; each mix sums to
	// 100): or_subquery_report is 4 % of sales_manager's, 15 % of the
	// accountant's and 25 % of the planner's operations:
	// 0.32·0.04 + 0.16·0.15 + 0.08·0.25 = 0.0568
	share, err := opShares(load)
	if err != nil || !near(share["or_subquery_report"], 0.0568) || !near(share["temp_table_storm"], 0.0648) || share["repost_day"] != 0.5/12.5*0.5 {
		t.Errorf("shares %v, %v", share, err)
	}
	load.Mix = "or_subquery_report=1,temp_table_storm=3"
	if share, err = opShares(load); err != nil || share["or_subquery_report"] != 0.25 || share["temp_table_storm"] != 0.75 || share["document_list"] != 0 {
		t.Errorf("--mix shares %v, %v", share, err)
	}
	load.Think = engine.ThinkTime{Kind: "fixed"}
	if got := ScoredExecutions(load); !math.IsInf(got, 1) {
		t.Errorf("without think time: %g, want +Inf", got)
	}
}

// The smallest APDEX change a run's sampling lets Welch's t resolve, by
// hand: Student's t for 2 degrees of freedom is (2p-1)/√(2p(1-p)).
func TestPlanApdexResolution(t *testing.T) {
	t2 := func(p float64) float64 { return (2*p - 1) / math.Sqrt(2*p*(1-p)) }
	for _, c := range []struct {
		ex       float64
		n, k     int
		want     float64
		wantDesc string
	}{
		{600, 2, 2, t2(1-0.05/4) * math.Sqrt(0.5/1200), "6.205 · 0.0204 = 0.127"},
		{4, 2, 1, t2(0.975) * math.Sqrt(0.5/8), "4.303 · 0.25 = 1.08"},
		{0.5, 50, 1, 1, "granularity 1/(2·0.5) above t·se"},
	} {
		if got := ApdexResolution(c.ex, c.n, 0.05, c.k); !near(got, c.want) {
			t.Errorf("ApdexResolution(%g, %d, k %d) = %g, want %g (%s)", c.ex, c.n, c.k, got, c.want, c.wantDesc)
		}
	}
	if !math.IsNaN(ApdexResolution(600, 1, 0.05, 1)) || !math.IsNaN(ApdexResolution(0, 3, 0.05, 1)) {
		t.Error("one round or no executions: want NaN")
	}
}

// Which primary rows can be decided, and with how many rounds.
func TestPlanRow(t *testing.T) {
	key := func(s string) compare.Key { k, _ := compare.ParseKey(s); return k }
	for _, c := range []struct {
		row             string
		ex              float64
		n, k            int
		alpha           float64
		constant, decid bool
		rounds          int
	}{
		{"or_subquery_report:apdex", 600, 2, 2, 0.05, true, false, 5}, // 0.33 > 0.025; 2/70 = 0.029 > 0.025; 2/252 <= 0.025
		{"or_subquery_report:apdex", 600, 4, 1, 0.05, true, true, 4},  // 2/70 <= 0.05
		{"temp_table_storm:apdex", 39, 4, 3, 0.05, true, false, 5},    // 0.029 > 0.0167
		{"or_subquery_report:apdex", 600, 5, 2, 0.01, true, false, 6}, // 2/252 > 0.005; 2/924 <= 0.005
		{"or_subquery_report:p95_ms", 600, 2, 2, 0.05, false, true, 2},
		{"or_subquery_report:p95_ms", 600, 1, 2, 0.05, false, false, 2}, // one round decides nothing
		{"integral:apdex", 600, 3, 1, 0.05, false, true, 2},
		{"integral:apdex", 10, 3, 1, 0.05, true, false, 4},          // few executions: constant; 0.1 > 0.05
		{"or_subquery_report:apdex", 0, 5, 1, 0.05, true, false, 4}, // the mix never runs it
		{"wait IO:DataFileRead:share_pct", math.NaN(), 2, 1, 0.05, false, true, 2},
		{"document_list:error_pct", 5, 3, 1, 0.05, true, false, 4}, // a count over few executions
		// fewer executions than the quantile needs: compare does not test it
		{"hour_report:p95_ms", 19, 4, 1, 0.05, false, false, 0},
		{"hour_report:p95_ms", 20, 4, 1, 0.05, false, true, 2},
		{"hour_report:p99_ms", 99, 4, 1, 0.05, false, false, 0},
	} {
		r := PlanRow(key(c.row), c.ex, c.n, c.alpha, c.k)
		if r.Constant != c.constant || r.Decidable != c.decid || r.Rounds != c.rounds || !near(r.MinP, MinP(c.n, c.constant)) {
			t.Errorf("PlanRow(%s, %g executions, %d rounds, k %d, alpha %g) = %+v, want constant %v, decidable %v, rounds %d",
				c.row, c.ex, c.n, c.k, c.alpha, r, c.constant, c.decid, c.rounds)
		}
	}
}

// The motivating experiment (#31): rewrite-proxy's primary rows over 2
// rounds a side with the report alone in the mix; its APDEX cannot be
// decided (0.33 > 0.05/2), its p95 can.
func TestPlanLines(t *testing.T) {
	think, _ := engine.ParseThinkTime("500ms-1500ms")
	load := loadtest.Options{Workload: erp.New(erp.WorkloadOptions{}), Mix: "or_subquery_report=1", Think: think,
		Stages: []engine.Stage{{Duration: 0, Target: 10}, {Duration: time.Minute, Target: 10}}}
	v, err := ParseVariant("proxy=rewrite-proxy")
	if err != nil {
		t.Fatal(err)
	}
	p, err := NewPlan(Config{Load: load, Variants: []Variant{v}, Rounds: 2, Balanced: true}, 0)
	if err != nil {
		t.Fatal(err)
	}
	if p.Runs != 4 || p.Order != "baseline proxy proxy baseline" || len(p.Variants) != 1 || p.Variants[0].K != 2 || p.RunLength != 65*time.Second {
		t.Fatalf("plan %+v", p)
	}
	rows := p.Variants[0].Rows
	if rows[0].Key.String() != "or_subquery_report:p95_ms" || !rows[0].Decidable || rows[1].Key.String() != "or_subquery_report:apdex" || rows[1].Decidable ||
		!near(rows[1].Executions, 600) || rows[1].Rounds != 5 {
		t.Fatalf("rows %+v", rows)
	}
	lines := p.Lines()
	want := "plan: proxy: or_subquery_report:apdex cannot be decided: ~600 executions a run, 2 rounds a side (smallest p 0.33 > 0.05/2 when each side's executions stay in one APDEX zone); use --rounds 5 (or_subquery_report:p95_ms, also primary, can decide the verdict)"
	if len(lines) != 3 || lines[2] != want {
		t.Fatalf("lines:\n%s\nwant last:\n%s", strings.Join(lines, "\n"), want)
	}
	// rewrite-proxy's rows on a workload without the report
	load.Workload, load.Mix = smoke.New(), ""
	if p, err = NewPlan(Config{Load: load, Variants: []Variant{v}, Rounds: 2}, 0); err != nil {
		t.Fatal(err)
	}
	// one line for both rows: the variant's verdict can only be n/a
	if l := p.Lines(); len(l) != 3 || !p.Variants[0].Rows[1].Missing || p.Order != "baseline baseline proxy proxy" ||
		l[2] != "plan: proxy: or_subquery_report:p95_ms, or_subquery_report:apdex: workload smoke has no operation or_subquery_report, so the rows will be missing and the primary verdict can only be n/a; use --primary proxy=SUBJECT[:METRIC]" {
		t.Fatalf("smoke plan: %q", l)
	}
	load.Workload = erp.New(erp.WorkloadOptions{})
	// --aa 5 of 3 rounds: 30 runs, the integral APDEX decidable.
	p, err = NewPlan(Config{Load: load, Rounds: 3, Balanced: true}, 5)
	if err != nil {
		t.Fatal(err)
	}
	if p.Runs != 30 || p.Comparisons != 5 || len(p.Variants) != 1 || !p.Variants[0].AA || !p.Variants[0].Rows[0].Decidable || len(p.Lines()) != 2 {
		t.Fatalf("A/A plan %+v: %q", p, p.Lines())
	}
}
