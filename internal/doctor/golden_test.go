package doctor

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/erplab/erplab/internal/sampler"
)

var update = flag.Bool("update", false, "rewrite testdata/doctor/*/expected.json from the checks' findings")

// The golden cases live in testdata/doctor/<case>/:
//
//	server.json    ServerInfo (version, database, local, privileges)
//	settings.json  pg_settings rows: name -> {setting, unit, source, show};
//	               merged over testdata/doctor/settings.json (a stock
//	               PostgreSQL 15), so a case lists only what it changes
//	proc/, sys/    the host's proc and sys trees (absent: host unreadable)
//	facts.json     optional: recorded query results (type recorded) and
//	               the recordedChecks to run on them ("checks")
//	expected.json  the findings of the offlineChecks (and those recorded)
const goldenDir = "testdata/doctor"

// envFromFixture builds the doctor's env from a case directory, without a
// server: what readServer and readHost would have read.
func envFromFixture(dir string) (*env, error) {
	e := &env{opts: Options{Host: sampler.HostOn, ProcRoot: filepath.Join(dir, "proc"), SysRoot: filepath.Join(dir, "sys")}}
	if err := readJSON(filepath.Join(dir, "server.json"), &e.srv); err != nil {
		return nil, err
	}
	e.set = map[string]setting{}
	if err := readJSON(filepath.Join(goldenDir, "settings.json"), &e.set); err != nil {
		return nil, err
	}
	var over map[string]setting
	switch err := readJSON(filepath.Join(dir, "settings.json"), &over); {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		return nil, err
	}
	maps.Copy(e.set, over)
	e.readHost()
	e.smpWhy = "a sample (--sample > 0)"
	var rec recorded
	switch err := readJSON(filepath.Join(dir, "facts.json"), &rec); {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		return nil, err
	default:
		e.rec = &rec
		if rec.Windows != nil {
			e.smp = &sampleData{windows: rec.Windows, elapsed: sumWindows(rec.Windows).Seconds, profilePeriodMs: rec.ProfilePeriodMs}
		}
	}
	return e, nil
}

func readJSON(path string, v any) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(b, v); err != nil {
		return &fs.PathError{Op: "parse", Path: path, Err: err}
	}
	return nil
}

// goldenReport is what expected.json holds: the report's host note,
// worst severity and findings, each without its Why and Sources (the
// check's own text, not what it saw).
type goldenReport struct {
	HostChecked bool      `json:"host_checked"`
	HostNote    string    `json:"host_note"`
	Worst       Severity  `json:"worst"`
	Findings    []Finding `json:"findings"`
}

// offlineChecks are the checks TestGolden runs on every case: they read
// only the server's identity, its settings and the host facts (no query,
// no sample).
var offlineChecks = []string{"thp-enabled", "thp-defrag", "huge-pages", "overcommit", "swap", "memory-budget"}

// recordedChecks are the checks whose queries go through fact loaders of
// env that a case's facts.json can record (sample windows,
// pg_stat_statements rows, catalog counts, xmin horizon holders,
// join-column statistics, temp tablespaces); a case names in "checks"
// which of them it runs.
var recordedChecks = []string{"catalog-size", "xmin-horizon", "catalog-churn", "temp-tablespace", "lwlock-waits", "planning-time", "statistics-targets"}

// TestGolden runs the offline checks on every case directory and compares
// the findings with expected.json; -update rewrites them.
func TestGolden(t *testing.T) {
	for _, id := range append(slices.Clone(offlineChecks), recordedChecks...) {
		if !slices.Contains(IDs(), id) {
			t.Fatalf("golden_test.go names %q, which is no registered check", id)
		}
	}
	var offline []Check
	for _, c := range everyCheck() {
		if slices.Contains(offlineChecks, c.ID) {
			offline = append(offline, c)
		}
	}
	if len(offline) < 6 {
		t.Fatalf("%d offline checks", len(offline))
	}
	cases, err := os.ReadDir(goldenDir)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, c := range cases {
		if !c.IsDir() {
			continue
		}
		n++
		dir := filepath.Join(goldenDir, c.Name())
		t.Run(c.Name(), func(t *testing.T) {
			e, err := envFromFixture(dir)
			if err != nil {
				t.Fatal(err)
			}
			checks := offline
			if e.rec != nil {
				for _, id := range e.rec.Checks {
					all := everyCheck()
					i := slices.IndexFunc(all, func(c Check) bool { return c.ID == id })
					if i < 0 || !slices.Contains(recordedChecks, id) {
						t.Fatalf("facts.json: %q is not a recorded check", id)
					}
					checks = append(checks, all[i])
				}
			}
			rep, err := e.report(context.Background(), checks)
			if err != nil {
				t.Fatal(err)
			}
			got := goldenReport{HostChecked: rep.HostChecked, HostNote: rep.HostNote, Worst: rep.Worst}
			for _, f := range rep.Findings {
				f.Why, f.Sources = "", nil
				got.Findings = append(got.Findings, f)
			}
			checkGolden(t, filepath.Join(dir, "expected.json"), got)
		})
	}
	if n < 5 {
		t.Errorf("%d golden cases in %s, want at least 5", n, goldenDir)
	}
}

// checkGolden compares got with the expectation at path, or with -update
// writes it there.
func checkGolden(t *testing.T, path string, got goldenReport) {
	t.Helper()
	if *update {
		var b bytes.Buffer
		enc := json.NewEncoder(&b)
		enc.SetEscapeHTML(false) // keep "echo madvise > ..." readable
		enc.SetIndent("", "  ")
		if err := enc.Encode(got); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	var want goldenReport
	if err := readJSON(path, &want); err != nil {
		t.Fatalf("%v (run go test ./internal/doctor -run Golden -update)", err)
	}
	compareGolden(t, got, want)
}

func compareGolden(t *testing.T, got, want goldenReport) {
	t.Helper()
	if got.HostChecked != want.HostChecked || got.HostNote != want.HostNote || got.Worst != want.Worst {
		t.Errorf("host checked %v (%q), worst %s; want %v (%q), %s", got.HostChecked, got.HostNote, got.Worst, want.HostChecked, want.HostNote, want.Worst)
	}
	byID := map[string]Finding{}
	for _, f := range want.Findings {
		byID[f.ID] = f
	}
	for _, g := range got.Findings {
		w, ok := byID[g.ID]
		delete(byID, g.ID)
		switch {
		case !ok:
			t.Errorf("[%s] unexpected finding %s: %s", g.ID, g.Severity, g.Summary)
			continue
		case g.Title != w.Title || g.Severity != w.Severity || g.Summary != w.Summary || g.Needs != w.Needs:
			t.Errorf("[%s] %s %q (needs %q)\nwant %s %q (needs %q)", g.ID, g.Severity, g.Summary, g.Needs, w.Severity, w.Summary, w.Needs)
		}
		if !maps.Equal(g.Metrics, w.Metrics) {
			t.Errorf("[%s] metrics %v, want %v", g.ID, g.Metrics, w.Metrics)
		}
		if !slices.Equal(g.Evidence, w.Evidence) {
			t.Errorf("[%s] evidence %v, want %v", g.ID, g.Evidence, w.Evidence)
		}
		if !slices.Equal(g.Fix, w.Fix) {
			t.Errorf("[%s] fix %q, want %q", g.ID, g.Fix, w.Fix)
		}
	}
	for id := range byID {
		t.Errorf("[%s] expected finding missing", id)
	}
}
