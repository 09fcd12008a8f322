package capacity

import (
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/erplab/erplab/internal/compare"
	"github.com/erplab/erplab/internal/results"
)

// The recorded steps are two steps of the known-answer search
// (TestKnownCapacity: S = 200 ms on 4 connections, Z = 600 ms, T =
// 400 ms, capacity 20 users by the formula): 18 users (good, APDEX 0.99)
// and 19 users (bad, APDEX 0.77, pool wait 45 % of response time).
func recorded(t *testing.T, name string) (*results.Document, *compare.Estimates, Resources) {
	t.Helper()
	d, err := results.Read(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	est, err := compare.Estimate(d, compare.Options{})
	if err != nil {
		t.Fatal(err)
	}
	res, err := ResourcesOf(d)
	if err != nil {
		t.Fatal(err)
	}
	return d, est, res
}

var target = Target{Apdex: 0.85, ErrorRate: 0.01}

func idle() Generator { return Generator{CPU: 0.05, Cores: 2} }

func TestJudgeRecordedSteps(t *testing.T) {
	d, est, res := recorded(t, "good-18.json")
	j := Judge(d, est, res, target, idle())
	if j.Outcome != OutcomeGood || len(j.Reasons) != 0 || j.Straddles {
		t.Fatalf("18 users: %+v", j)
	}
	if !(j.Apdex.Value > 0.95) {
		t.Fatalf("18 users APDEX %v", j.Apdex)
	}

	d, est, res = recorded(t, "bad-19.json")
	j = Judge(d, est, res, target, idle())
	if j.Outcome != OutcomeBad || len(j.Reasons) != 1 || !strings.HasPrefix(j.Reasons[0], "APDEX 0.7") || !strings.HasSuffix(j.Reasons[0], "< 0.85") {
		t.Fatalf("19 users: %+v", j)
	}
	if !j.softOnly || j.Straddles {
		t.Fatalf("19 users: softOnly %v straddles %v (interval %v)", j.softOnly, j.Straddles, j.Apdex)
	}
	// The same step against a target inside its interval straddles.
	mid := Target{Apdex: (j.Apdex.Lo + j.Apdex.Hi) / 2, ErrorRate: 0.01}
	if js := Judge(d, est, res, mid, idle()); !js.Straddles {
		t.Fatalf("target %.3f inside [%.3f, %.3f] does not straddle", mid.Apdex, j.Apdex.Lo, j.Apdex.Hi)
	}
}

func TestJudgeOtherCriteria(t *testing.T) {
	d, est, res := recorded(t, "good-18.json")
	// A p95 limit below the step's p95 (about 200-400 ms).
	p95 := Target{Apdex: 0.85, ErrorRate: 0.01, P95: map[string]time.Duration{"serve": 100 * time.Millisecond}}
	j := Judge(d, est, res, p95, idle())
	if j.Outcome != OutcomeBad || len(j.Reasons) != 1 || !strings.HasPrefix(j.Reasons[0], "p95 serve ") || !strings.HasSuffix(j.Reasons[0], "> 100ms") {
		t.Fatalf("p95: %+v", j)
	}
	if j.Straddles {
		t.Fatal("a p95 breach must not be repeated as a straddling step")
	}
	// Errors and refused connections, on a copy of the document.
	e := *d
	e.Operations = append([]results.OpResult(nil), d.Operations...)
	e.Operations[0].ErrorsBySQLState = map[string]int64{"53300": 7}
	e.Totals.Count, e.Totals.Errors = 1000, 50
	j = Judge(&e, est, res, target, idle())
	if j.Outcome != OutcomeBad || len(j.Reasons) != 2 || j.Reasons[0] != "connections refused (53300: 7)" || j.Reasons[1] != "errors 5.0 % > 1 %" {
		t.Fatalf("errors: %+v", j.Reasons)
	}
	// The generator saturated: a hard stop, never the server's verdict.
	j = Judge(d, est, res, target, Generator{CPU: 1.9, Cores: 2})
	if j.Outcome != OutcomeGenerator || !strings.Contains(j.Detail, "1.90 of its 2 cores") {
		t.Fatalf("generator: %+v", j)
	}
	busy, erp, srv := 99.0, 40.0, 30.0
	r2 := res
	r2.HostBusy, r2.ErplabCPU, r2.ServerCPU = &busy, &erp, &srv
	if j = Judge(d, est, r2, target, idle()); j.Outcome != OutcomeGenerator {
		t.Fatalf("busy host, erplab above the server: %+v", j)
	}
	erp = 3 // a neighbour's load on a busy host is not erplab's
	if j = Judge(d, est, r2, target, idle()); j.Outcome != OutcomeGood {
		t.Fatalf("busy host, erplab small: %+v", j)
	}
	// A run that did not complete: the server failed.
	e = *d
	e.Status = "aborted: server gone for 30s"
	if j = Judge(&e, est, res, target, idle()); j.Outcome != OutcomeServer || j.Detail != string(e.Status) {
		t.Fatalf("aborted: %+v", j)
	}
}

func TestResourcesAndVerdict(t *testing.T) {
	gd, gest, gres := recorded(t, "good-18.json")
	bd, best, bres := recorded(t, "bad-19.json")
	if bres.Samples < 5 || bres.PoolSize != 4 || !(bres.PoolWaitShare > 33) || !(bres.PoolWaitShare > gres.PoolWaitShare) {
		t.Fatalf("resources of 19 users: %+v", bres)
	}
	if w, ok := bres.TopWait(); !ok || w.Event != "Timeout:PgSleep" || !(w.Pct > 90) {
		t.Fatalf("top wait %+v", w)
	}
	doc := &Document{Format: Format, Schema: SchemaVersion, Unit: "users", Target: TargetJSON{Apdex: 0.85}, Search: SearchJSON{Max: 80}}
	doc.Steps = append(doc.Steps,
		NewStep(1, 18, 1, gd, "", gest, gres, Judge(gd, gest, gres, target, idle())),
		NewStep(2, 19, 1, bd, "", best, bres, Judge(bd, best, bres, target, idle())))
	doc.Conclude(18, 19, Stop{Kind: StopConverged})
	re := regexp.MustCompile(`^capacity 18 users at APDEX 0\.9\d \[0\.9\d-1\.00\]; at 19 users APDEX 0\.7\d < 0\.85; limited by the pool of 4 connections \(pool wait 4\d % of response time\), server CPU \d+ %$`)
	if !re.MatchString(doc.Result.Line) {
		t.Fatalf("line %q", doc.Result.Line)
	}
	if doc.Result.Capacity != 18 || doc.Result.Apdex == nil || doc.Result.FirstBadApdex == nil || len(doc.Result.Reasons) != 1 {
		t.Fatalf("result %+v", doc.Result)
	}
	// Written and read back (NaN-free JSON, the step runs validated).
	path := filepath.Join(t.TempDir(), "cap.json")
	if err := doc.Write(path, results.DefaultPerm); err != nil {
		t.Fatal(err)
	}
	if !IsDocument(path) {
		t.Fatal("IsDocument")
	}
	back, err := Read(path)
	if err != nil || back.Result.Line != doc.Result.Line || len(back.Steps) != 2 || back.Steps[1].Run == nil {
		t.Fatalf("read back: %v", err)
	}
	if IsDocument(filepath.Join("testdata", "good-18.json")) {
		t.Fatal("a results document taken for a capacity document")
	}
}

func TestLimitingWaitAndCPU(t *testing.T) {
	cpu := 97.0
	good := Step{Load: 32, Resources: Resources{Samples: 10, Waits: []WaitShare{{"CPU", 80}, {"LWLock:LockManager", 9}}}}
	bad := Step{Load: 64, Resources: Resources{Samples: 10, Waits: []WaitShare{{"LWLock:LockManager", 38}, {"CPU", 50}}, ServerCPU: &cpu}}
	if got, want := Limiting(&good, bad, "users"), "limited by LWLock:LockManager (38 % of active time, 9 % at 32 users), server CPU 97 %"; got != want {
		t.Fatalf("got  %q\nwant %q", got, want)
	}
	bad.Resources.Waits = []WaitShare{{"CPU", 90}, {"IO:DataFileRead", 5}}
	if got, want := Limiting(nil, bad, "users"), "limited by server CPU 97 %"; got != want {
		t.Fatalf("got %q, want %q", got, want)
	}
	low := 20.0
	bad.Resources.ServerCPU = &low
	if got := Limiting(nil, bad, "users"); got != "no saturated resource seen (top wait IO:DataFileRead 5 %, server CPU 20 %)" {
		t.Fatalf("got %q", got)
	}
	busy, other := 100.0, 85.0
	bad.Resources.HostBusy, bad.Resources.ForeignCPU = &busy, &other
	if got, want := Limiting(nil, bad, "users"), "limited by host CPU busy 100 % (other processes 85 %), server CPU 20 %"; got != want {
		t.Fatalf("got %q, want %q", got, want)
	}
	// With schedstat figures the busy host's line says how starved the
	// server and erplab were (#31).
	starved := 4.4
	bad.Resources.Starvation = &starved
	if got, want := Limiting(nil, bad, "users"), "limited by host CPU busy 100 % (other processes 85 %, starvation 4.4 ms waited per ms run), server CPU 20 %"; got != want {
		t.Fatalf("got %q, want %q", got, want)
	}
	bad.Resources.Starvation = nil
	if got := Limiting(nil, Step{}, "users"); got != "no saturated resource seen (no observations)" {
		t.Fatalf("got %q", got)
	}
	// Refused connections name the server's connection limit, with the
	// max_connections the step's run recorded, before any resource.
	refused := Step{Reasons: []string{"APDEX 0.40 < 0.85", "connections refused (53300: 12)"},
		Run: &results.Document{Environment: []byte(`{"server":{"settings":{"max_connections":"14"}}}`)}}
	refused.Resources.ServerCPU = &low
	if got, want := Limiting(nil, refused, "users"), "limited by the server's connection limit: connections refused (53300: 12), max_connections 14, server CPU 20 %"; got != want {
		t.Fatalf("got  %q\nwant %q", got, want)
	}
}

// ResourcesOf reads the starvation of a run's observations (schedstat run
// delay per ms run of the server and erplab): the recorded runs of
// internal/compare/testdata/starved, quiet (a host saturated by others)
// and with a CPU hog beside; older documents have none.
func TestResourcesStarvation(t *testing.T) {
	read := func(name string) Resources {
		d, err := results.Read(filepath.Join("..", "compare", "testdata", name))
		if err != nil {
			t.Fatal(err)
		}
		r, err := ResourcesOf(d)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	quiet, hog := read("starved/quiet-1.json"), read("starved/hog-1.json")
	if quiet.Starvation == nil || hog.Starvation == nil || !(*hog.Starvation > 1.5**quiet.Starvation) || !(*quiet.Starvation > 0) {
		t.Fatalf("starvation quiet %v, hog %v", quiet.Starvation, hog.Starvation)
	}
	if old := read("aa-quiet.json"); old.Starvation != nil || old.ForeignCPU == nil {
		t.Fatalf("a document without schedstat figures: starvation %v, foreign CPU %v", old.Starvation, old.ForeignCPU)
	}
}
