package main

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
)

// compare of rounds: comma-separated files per side (the recorded runs of
// internal/compare/testdata), one comparison over the rounds with the
// noise line; one file against three is a usage error.
func TestCompareRounds(t *testing.T) {
	td, err := filepath.Abs("../../internal/compare/testdata")
	if err != nil {
		t.Fatal(err)
	}
	side := func(name string) string {
		var fs []string
		for _, r := range []string{"1", "2", "3"} {
			fs = append(fs, filepath.Join(td, "r-"+name+"-"+r+".json"))
		}
		return strings.Join(fs, ",")
	}
	out, err := erplab(t, t.TempDir(), "compare", "--format", "json", side("base"), side("slow")).Output()
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	var cs []struct {
		RoundsA int `json:"rounds_a"`
		RoundsB int `json:"rounds_b"`
		Rows    []struct {
			Subject, Metric, Method string
			Lo                      *float64 `json:"ci95_low"`
		} `json:"rows"`
		Noise struct {
			Recorded bool `json:"recorded"`
		} `json:"noise"`
	}
	if err := json.Unmarshal(out, &cs); err != nil || len(cs) != 1 || cs[0].RoundsA != 3 || cs[0].RoundsB != 3 || !cs[0].Noise.Recorded {
		t.Fatalf("%v: %s", err, out)
	}
	tested := 0
	for _, r := range cs[0].Rows {
		if r.Method == "welch-t over rounds" && r.Lo != nil {
			tested++
		}
	}
	if tested < 20 {
		t.Fatalf("%d rows tested over rounds:\n%s", tested, out)
	}
	text, err := erplab(t, t.TempDir(), "compare", side("base"), side("slow")).Output()
	if err != nil || !strings.Contains(string(text), "noise: no schedstat figures in every run") || !strings.Contains(string(text), "3 and 3 rounds") {
		t.Fatalf("%v\n%s", err, text)
	}
	checkUsageError(t, []string{"compare", filepath.Join(td, "base.json"), side("slow")})
}

// compare --primary with a row the comparison lacks: a one-line usage
// error that lists what there is: the subject's metrics (p95 is p95_ms),
// or for an unknown subject the operations, their metrics and the
// integral's.
func TestComparePrimaryMissingRowListsChoices(t *testing.T) {
	td, err := filepath.Abs("../../internal/compare/testdata")
	if err != nil {
		t.Fatal(err)
	}
	a, b := filepath.Join(td, "base.json"), filepath.Join(td, "base-slow.json")
	for _, c := range []struct{ key, want string }{
		{"post_order:p95", "post_order has no metric p95; its metrics: apdex, p50_ms, p95_ms, p99_ms, per_second, error_pct"},
		{"op:p95", "no subject op; operations: item_lookup, order_list, post_order, temp_churn, hour_report; their metrics: apdex, p50_ms, p95_ms, p99_ms, per_second, error_pct; integral: apdex, per_second, error_pct"},
		// runs without --profile have no cpu rows: said so
		{"cpu executor:share_pct:lower", "no subject cpu executor: the rows 'cpu <subsystem>' exist only when every run of both sides was made with --profile (erplab run --profile, erplab ab --profile), and a run here has no CPU profile"},
	} {
		args := []string{"compare", "--primary", c.key, a, b}
		checkUsageError(t, args)
		cmd := erplab(t, t.TempDir(), args...)
		var stderr strings.Builder
		cmd.Stderr = &stderr
		cmd.Run() //nolint:errcheck // the exit code is checkUsageError's
		if !strings.Contains(stderr.String(), "--primary "+c.key+": no such row in ") || !strings.HasSuffix(strings.TrimSpace(stderr.String()), c.want) {
			t.Errorf("--primary %s: %q\n want it to end with %q", c.key, stderr.String(), c.want)
		}
	}
}
