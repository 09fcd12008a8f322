package main

import (
	"github.com/erplab/erplab/internal/pgtest"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/erplab/erplab/internal/compare"
	"github.com/erplab/erplab/internal/pgcluster"
	"github.com/erplab/erplab/internal/remedy"
	"github.com/erplab/erplab/internal/results"
)

func TestABUsageErrors(t *testing.T) {
	for _, args := range [][]string{
		{"ab"},
		{"ab", "--variant", "x"},
		{"ab", "--variant", "x=nope"},
		{"ab", "--variant", "baseline=rewrite-proxy"},
		{"ab", "--variant", "x=temp-style:oracle"},
		{"ab", "--variant", "x=settings:/no/such.conf"},
		{"ab", "--variant", "x=rewrite-proxy", "--rounds", "0"},
		{"ab", "--variant", "x=rewrite-proxy", "--age", "-1m"},
		{"ab", "--variant", "x=rewrite-proxy", "--workload", "nope"},
		{"ab", "--variant", "x=rewrite-proxy", "--primary", "y=integral"},
		{"ab", "--variant", "x=rewrite-proxy", "--primary", "integral:"},
		// an APDEX row of no key operation: refused before the first run
		{"ab", "--workload", "smoke", "--aa", "1", "--primary", "nosuch_op"},
		{"ab", "--workload", "smoke", "--variant", "x=temp-style:1c", "--primary", "x=nosuch_op:apdex"},
		// any row no comparison of the workload's runs can have
		// any row no comparison of the workload's runs can have (--dry-run:
		// refused before the plan too)
		{"ab", "--dry-run", "--workload", "smoke", "--variant", "x=rewrite-proxy", "--primary", "x=nosuchop:p95_ms"},
		{"ab", "--dry-run", "--workload", "smoke", "--variant", "x=rewrite-proxy", "--primary", "integral:nosuchmetric"},
		{"ab", "--dry-run", "--workload", "smoke", "--aa", "1", "--primary", "integral:p95_ms"},
		{"ab", "--dry-run", "--workload", "smoke", "--variant", "x=rewrite-proxy", "--primary", "item_lookup:share_pct"},
		{"ab", "--dry-run", "--workload", "smoke", "--variant", "x=rewrite-proxy", "--primary", "wait IO:DataFileRead:nosuch"},
		// a profile row without --profile: no run would have it
		{"ab", "--dry-run", "--workload", "smoke", "--variant", "x=rewrite-proxy", "--primary", "x=cpu executor:share_pct:lower"},
		// a remedy parameter the remedy cannot take: refused before the server starts
		{"ab", "--workload", "erp", "--variant", "x=tmpfs-temp-tablespace", "--tmpfs-size", "banana"},
	} {
		checkUsageError(t, args)
	}
}

// A real, short ab run on the embedded default: two variants, the files,
// and a comparison per variant on stdout.
func TestABSmoke(t *testing.T) {
	pgtest.SkipShort(t) // builds the binary and starts an embedded server
	dir := t.TempDir()
	conf := filepath.Join(dir, "p.conf")
	if err := os.WriteFile(conf, []byte("work_mem = '32MB'\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := erplab(t, dir, "ab", "--workload", "smoke", "--users", "3", "--duration", "3s", "--think", "20ms",
		"--interval", "500ms", "--progress", "0", "--observe=false", "--graceful-stop", "2s",
		"--variant", "tuned=settings:"+conf, "--variant", "proxy=rewrite-proxy", "--rounds", "1", "--out-dir", "res").CombinedOutput()
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	for _, f := range []string{"baseline-1.json", "tuned-1.json", "proxy-1.json"} {
		if _, err := os.Stat(filepath.Join(dir, "res", f)); err != nil {
			t.Fatalf("%v\n%s", err, out)
		}
	}
	s := string(out)
	for _, want := range []string{"variant  B: res/tuned-1.json", "variant  B: res/proxy-1.json"} {
		if !strings.Contains(s, want) {
			t.Fatalf("output lacks %q:\n%s", want, s)
		}
	}
	if n := len(regexp.MustCompile(`(?m)^integral +apdex `).FindAllString(s, -1)); n != 2 {
		t.Fatalf("want 2 integral APDEX comparison rows, got %d:\n%s", n, s)
	}
}

// ab --help lists every registered remedy (syntax, what it does, why it
// needs root) and their parameters as flags.
func TestABHelpListsRemedies(t *testing.T) {
	out, err := erplab(t, t.TempDir(), "ab", "--help").CombinedOutput()
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	s := string(out)
	for _, k := range remedy.Kinds() {
		syntax := k.Syntax
		if syntax == "" {
			syntax = k.Name
		}
		first, _, _ := strings.Cut(k.Doc, "\n")
		if !regexp.MustCompile(`(?m)^  ` + regexp.QuoteMeta(syntax) + ` +` + regexp.QuoteMeta(first) + `$`).MatchString(s) {
			t.Errorf("help lacks the line of %s (%q):\n%s", k.Name, first, s)
		}
		if k.NeedsRoot != "" && !strings.Contains(s, "root only: "+k.NeedsRoot) {
			t.Errorf("help does not say why %s needs root", k.Name)
		}
		if k.NeedsCold != "" && !strings.Contains(s, "with --cold only: "+k.NeedsCold) {
			t.Errorf("help does not say why %s needs --cold", k.Name)
		}
		for _, p := range k.Params {
			if !strings.Contains(s, "--"+p.Name+" string") || !strings.Contains(s, k.Name+": "+p.Usage) {
				t.Errorf("help lacks the flag --%s of %s", p.Name, k.Name)
			}
		}
	}
	for _, want := range []string{"  temp-style:1c|lsfusion   how the ERP workload treats temp tables in this run",
		"root only: it mounts a tmpfs", `--tmpfs-size string`, `(default "1G")`} {
		if !strings.Contains(s, want) {
			t.Errorf("help lacks %q", want)
		}
	}
	if !strings.Contains(s, "tmpfs-temp-tablespace: integral:apdex and temp_table_storm:p95_ms and temp_table_storm:apdex and cpu file system:share_pct:lower") ||
		!strings.Contains(s, "rewrite-proxy: or_subquery_report:p95_ms and or_subquery_report:apdex") {
		t.Errorf("help lacks the remedies' primary rows")
	}
	if n := len(remedy.Kinds()); n != 5 {
		t.Errorf("%d remedies registered, want 5", n)
	}
}

// Rounds by default order: three rounds of baseline and variant in the
// balanced order A B B A A B, one comparison over the rounds (Welch over
// per-round values), the noise line, and the hook run before every run.
func TestABRounds(t *testing.T) {
	pgtest.SkipShort(t) // starts an embedded server
	dir := t.TempDir()
	out, err := erplab(t, dir, "ab", "--workload", "smoke", "--users", "3", "--duration", "2s", "--think", "20ms",
		"--interval", "500ms", "--progress", "0", "--graceful-stop", "1s", "--rounds", "3",
		"--run-hook", `echo "hook $ERPLAB_AB_RUN $ERPLAB_AB_VARIANT $ERPLAB_AB_ROUND" >> hook.log`,
		"--variant", "same=settings:"+writeConf(t, dir), "--out-dir", "res").CombinedOutput()
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	log, err := os.ReadFile(filepath.Join(dir, "hook.log"))
	if err != nil {
		t.Fatal(err)
	}
	want := "hook 1 baseline 1\nhook 2 same 1\nhook 3 same 2\nhook 4 baseline 2\nhook 5 baseline 3\nhook 6 same 3\n"
	if string(log) != want {
		t.Fatalf("hook log:\n%s\nwant:\n%s", log, want)
	}
	s := string(out)
	for _, want := range []string{"variant  B: res/same-1.json,res/same-2.json,res/same-3.json", "3 and 3 rounds", "noise: starvation (run delay per ms run) A ",
		"6 runs (3 rounds per configuration, balanced order)", compare.PrimaryHeading, compare.ExploratoryHeading,
		"VERDICT same: primary verdict: ", "declared by settings;", "  primary integral apdex: A "} {
		if !strings.Contains(s, want) {
			t.Fatalf("output lacks %q:\n%s", want, s)
		}
	}
	if n := len(regexp.MustCompile(`(?m)^integral +apdex `).FindAllString(s, -1)); n != 1 {
		t.Fatalf("want 1 integral APDEX comparison row, got %d:\n%s", n, s)
	}
}

func writeConf(t *testing.T, dir string) string {
	t.Helper()
	p := filepath.Join(dir, "same.conf")
	if err := os.WriteFile(p, []byte("work_mem = '4MB'\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// Every run database of ab has pg_stat_statements (with planning
// tracked): each run's observations carry per-operation planning and
// execution times, and the comparison over rounds has a plan_ms and an
// exec_ms row for the key operations they were attributed to, with a
// settings variant that changes the planner.
func TestABStatements(t *testing.T) {
	pgtest.SkipShort(t) // starts an embedded server
	dir := t.TempDir()
	conf := filepath.Join(dir, "planner.conf")
	if err := os.WriteFile(conf, []byte("join_collapse_limit = 1\nplan_cache_mode = force_custom_plan\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	// Statements are attributed to the operations they were seen running
	// in by the sampler: sample often, an operation slow enough to be seen
	// (temp_churn) beside one that plans a join.
	out, err := erplab(t, dir, "ab", "--workload", "smoke", "--users", "3", "--duration", "3s", "--think", "20ms",
		"--mix", "temp_churn=2,order_list=1", "--interval", "100ms", "--progress", "0", "--graceful-stop", "1s", "--rounds", "2",
		"--variant", "planner=settings:"+conf, "--out-dir", "res").CombinedOutput()
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	s := string(out)
	if strings.Contains(s, "CREATE EXTENSION pg_stat_statements") {
		t.Fatalf("a run database lacks pg_stat_statements:\n%s", s)
	}
	bin, err := pgcluster.FindBinDir()
	if err != nil {
		t.Fatal(err)
	}
	_, werr := os.Stat(filepath.Join(bin, "..", "lib", "pg_wait_sampling.so"))
	var ops []string // attributed in every run
	for i, f := range []string{"baseline-1.json", "baseline-2.json", "planner-1.json", "planner-2.json"} {
		doc, err := results.Read(filepath.Join(dir, "res", f))
		if err != nil {
			t.Fatal(err)
		}
		obs, err := compare.Observations(doc)
		if err != nil || obs == nil || obs.Statements == nil {
			t.Fatalf("%s: no statements in the observations (%v)\n%s", f, err, s)
		}
		if obs.Server.WaitSampling != (werr == nil) {
			t.Fatalf("%s: pg_wait_sampling in the run database %v, its library installed %v", f, obs.Server.WaitSampling, werr == nil)
		}
		st := obs.Statements
		if st.Note != "" || !st.TrackPlanning || st.Total.Calls == 0 || st.Total.PlanMs <= 0 || st.Total.ExecMs <= 0 {
			t.Fatalf("%s: statements note %q, track_planning %v, total %+v", f, st.Note, st.TrackPlanning, st.Total)
		}
		here := map[string]bool{}
		for _, o := range st.Operations {
			if o.Operation != "" && o.Calls > 0 && o.ExecMs > 0 {
				here[o.Operation] = true
			}
		}
		if len(here) == 0 {
			t.Fatalf("%s: no key operation with statements attributed: %+v", f, st.Operations)
		}
		if i == 0 {
			for op := range here {
				ops = append(ops, op)
			}
			continue
		}
		ops = slices.DeleteFunc(ops, func(op string) bool { return !here[op] })
	}
	if len(ops) == 0 {
		t.Fatalf("no key operation has statements in every run:\n%s", s)
	}
	for _, op := range ops {
		for _, metric := range []string{"plan_ms", "exec_ms"} {
			if !regexp.MustCompile(`(?m)^` + op + ` +` + metric + ` +[0-9.]+ +[0-9.]+ `).MatchString(s) {
				t.Fatalf("no %s %s row with values in the comparison:\n%s", op, metric, s)
			}
		}
	}
}
