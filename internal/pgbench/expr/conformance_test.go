package expr

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// Conformance tests: the same expressions evaluated by the real pgbench 15
// (debug() lines on stderr) and by this package must agree exactly.

// pgbenchPath returns a pgbench 15 binary (next to the server binaries or
// on PATH), or skips the test.
func pgbenchPath(t *testing.T) string {
	t.Helper()
	candidates := []string{}
	if srv != nil {
		candidates = append(candidates, filepath.Join(srv.BinDir(t), "pgbench"))
	}
	if p, err := exec.LookPath("pgbench"); err == nil {
		candidates = append(candidates, p)
	}
	for _, p := range candidates {
		out, err := exec.Command(p, "--version").Output()
		if err != nil {
			continue
		}
		// "pgbench (PostgreSQL) 15.18 (Debian ...)"
		f := strings.Fields(string(out))
		if len(f) >= 3 && strings.HasPrefix(f[2], "15.") {
			return p
		}
		t.Logf("%s is %s, not pgbench 15", p, strings.TrimSpace(string(out)))
	}
	t.Skip("no pgbench 15 binary (looked next to the server binaries and on PATH): conformance not checked")
	return ""
}

type pgbenchRun struct {
	stderr string
	exit   int
	dir    string
}

// runPgbench writes files into a temporary directory and runs pgbench there
// with args (file names are relative to that directory) against the
// postgres database of the test cluster.
func runPgbench(t *testing.T, bin string, files map[string]string, args ...string) pgbenchRun {
	t.Helper()
	return runPgbenchOn(t, bin, srv.DSN(t, "postgres"), files, args...)
}

func runPgbenchOn(t *testing.T, bin, dsn string, files map[string]string, args ...string) pgbenchRun {
	t.Helper()
	// may run in other goroutines: report with Errorf, never FailNow
	dir := t.TempDir()
	for name, text := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Errorf("write %s: %v", name, err)
			return pgbenchRun{exit: -1, dir: dir}
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, append(append([]string(nil), args...), dsn)...)
	cmd.Dir = dir
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	err := cmd.Run()
	exit := 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		exit = ee.ExitCode()
	} else if err != nil {
		t.Errorf("pgbench: %v", err)
		exit = -1
	}
	return pgbenchRun{stderr: stderr.String(), exit: exit, dir: dir}
}

func defineArgs(texts map[string]string) []string {
	names := make([]string, 0, len(texts))
	for k := range texts {
		names = append(names, k)
	}
	sort.Strings(names)
	var args []string
	for _, k := range names {
		args = append(args, "-D", k+"="+texts[k])
	}
	return args
}

func debugLines(stderr string) []string {
	var out []string
	for _, l := range strings.Split(stderr, "\n") {
		if strings.HasPrefix(l, "debug(") {
			out = append(out, l)
		}
	}
	return out
}

// firstError is the first "pgbench: error:" message that is not the
// generic abort report.
func firstError(stderr string) string {
	for _, l := range strings.Split(stderr, "\n") {
		m, ok := strings.CutPrefix(l, "pgbench: error: ")
		if !ok || strings.HasPrefix(m, "client ") || strings.HasPrefix(m, "Run was aborted") {
			continue
		}
		return m
	}
	return ""
}

func truncate(s string) string {
	if len(s) > 70 {
		return s[:70] + "..."
	}
	return s
}

// emulate evaluates "\set vN debug(src)" lines like pgbench's client 0 and
// returns the debug lines, or the first error.
func emulate(ctx *Context, srcs []string) ([]string, error) {
	var buf bytes.Buffer
	ctx.Debug = &buf
	vars := ctx.Vars.(*textVars)
	for i, src := range srcs {
		e, err := Parse(" debug(" + src + ")")
		if err != nil {
			return nil, fmt.Errorf("line %d %q: %w", i+1, truncate(src), err)
		}
		ctx.Command = i + 1
		v, err := e.Eval(ctx)
		if err != nil {
			return debugLines(buf.String()), err
		}
		vars.vals["v"+strconv.Itoa(i)] = v
	}
	return debugLines(buf.String()), nil
}

func setScript(srcs []string) string {
	var b strings.Builder
	for i, s := range srcs {
		fmt.Fprintf(&b, "\\set v%d debug(%s)\n", i, s)
	}
	b.WriteString("SELECT 1;\n")
	return b.String()
}

func compareLines(t *testing.T, what string, got, want []string) {
	t.Helper()
	n := len(got)
	if len(want) > n {
		n = len(want)
	}
	bad := 0
	for i := 0; i < n; i++ {
		var g, w string
		if i < len(got) {
			g = got[i]
		}
		if i < len(want) {
			w = want[i]
		}
		if g != w {
			t.Errorf("%s line %d: ours %q, pgbench %q", what, i+1, truncate(g), truncate(w))
			if bad++; bad > 20 {
				t.Fatalf("%s: too many differences", what)
			}
		}
	}
}

// parallel runs f for each index with at most 4 pgbench processes at once.
func parallel(n int, f func(i int)) {
	sem := make(chan struct{}, 4)
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		wg.Add(1)
		sem <- struct{}{}
		go func(i int) {
			defer wg.Done()
			defer func() { <-sem }()
			f(i)
		}(i)
	}
	wg.Wait()
}

func TestConformanceEval(t *testing.T) {
	bin := pgbenchPath(t)
	const seed = 5432
	var ok, bad []evalCase
	for _, c := range append(append([]evalCase(nil), evalCases...), deepValid...) {
		if strings.HasPrefix(c.want, "error: ") {
			bad = append(bad, c)
		} else {
			ok = append(ok, c)
		}
	}
	srcs := make([]string, len(ok))
	for i, c := range ok {
		srcs[i] = c.src
	}
	args := append([]string{"-n", "-t", "1", "-c", "1", "--random-seed=" + strconv.Itoa(seed), "-f", "eval.sql"}, defineArgs(testVarTexts)...)
	run := runPgbench(t, bin, map[string]string{"eval.sql": setScript(srcs)}, args...)
	if run.exit != 0 {
		t.Fatalf("pgbench exit %d:\n%s", run.exit, truncate(run.stderr))
	}
	want := debugLines(run.stderr)
	got, err := emulate(newTestContext(seed, nil), srcs)
	if err != nil {
		t.Fatal(err)
	}
	compareLines(t, "eval", got, want)
	t.Logf("%d expressions evaluated identically in one pgbench run", len(srcs))

	// run-time errors: one pgbench run each (the client aborts)
	type result struct {
		exit int
		msg  string
	}
	results := make([]result, len(bad))
	parallel(len(bad), func(i int) {
		script := "\\set v " + bad[i].src + "\nSELECT 1;\n"
		r := runPgbench(t, bin, map[string]string{"eval.sql": script}, args...)
		results[i] = result{r.exit, firstError(r.stderr)}
	})
	for i, c := range bad {
		ctx := newTestContext(seed, nil)
		_, err := MustParse(c.src).Eval(ctx)
		if err == nil {
			t.Errorf("%s: no error", c.src)
			continue
		}
		if results[i].exit != 2 || results[i].msg != err.Error() {
			t.Errorf("%s: pgbench exit %d %q, ours %q", c.src, results[i].exit, results[i].msg, err.Error())
		}
	}
	t.Logf("%d run-time errors reported identically", len(bad))
}

var caretLine = regexp.MustCompile(`^( *)\^ error found here$`)

func TestConformanceSyntaxErrors(t *testing.T) {
	bin := pgbenchPath(t)
	type result struct {
		exit int
		msg  string
		col  int
	}
	results := make([]result, len(syntaxCases))
	parallel(len(syntaxCases), func(i int) {
		r := runPgbench(t, bin, map[string]string{"s.sql": "\\set x " + syntaxCases[i].src + "\nSELECT 1;\n"},
			"-n", "-t", "1", "-f", "s.sql")
		res := result{exit: r.exit, col: -1}
		m := firstError(r.stderr)
		m = strings.TrimPrefix(m, "s.sql:1: ")
		res.msg = strings.TrimSuffix(m, ` in command "set"`)
		for _, l := range strings.Split(r.stderr, "\n") {
			if g := caretLine.FindStringSubmatch(l); g != nil {
				res.col = len(g[1])
			}
		}
		results[i] = res
	})
	const prefix = len(`\set x`)
	for i, c := range syntaxCases {
		_, err := Parse(" " + c.src) // the text after "\set x"
		var se *SyntaxError
		if !errors.As(err, &se) {
			t.Errorf("%q: no syntax error", truncate(c.src))
			continue
		}
		r := results[i]
		if r.exit != 1 || r.msg != se.Msg || r.col != prefix+se.Column {
			t.Errorf("%q: pgbench exit %d %q caret %d; ours %q caret %d",
				truncate(c.src), r.exit, r.msg, r.col, se.Msg, prefix+se.Column)
		}
	}
	t.Logf("%d syntax errors reported identically (message and caret column)", len(syntaxCases))
}

func TestConformanceValues(t *testing.T) {
	bin := pgbenchPath(t)
	var ok, bad []valueCase
	for _, c := range valueCases {
		if strings.HasPrefix(c.want, "error: ") {
			bad = append(bad, c)
		} else {
			ok = append(ok, c)
		}
	}
	texts := map[string]string{}
	var script strings.Builder
	for i, c := range ok {
		texts["x"+strconv.Itoa(i)] = c.text
		fmt.Fprintf(&script, "\\set r%d debug(:x%d)\n", i, i)
	}
	script.WriteString("SELECT 1;\n")
	r := runPgbench(t, bin, map[string]string{"v.sql": script.String()},
		append([]string{"-n", "-t", "1", "-f", "v.sql"}, defineArgs(texts)...)...)
	if r.exit != 0 {
		t.Fatalf("pgbench exit %d: %s", r.exit, truncate(r.stderr))
	}
	lines := debugLines(r.stderr)
	var want []string
	for i, c := range ok {
		v, err := ParseVariable("x"+strconv.Itoa(i), c.text)
		if err != nil {
			t.Fatalf("%q: %v", c.text, err)
		}
		want = append(want, fmt.Sprintf("debug(script=0,command=%d): %s", i+1, v.DebugString()))
	}
	compareLines(t, "values", want, lines)
	msgs := make([]string, len(bad))
	exits := make([]int, len(bad))
	parallel(len(bad), func(i int) {
		r := runPgbench(t, bin, map[string]string{"v.sql": "\\set r debug(:x)\nSELECT 1;\n"},
			"-n", "-t", "1", "-f", "v.sql", "-D", "x="+bad[i].text)
		msgs[i], exits[i] = firstError(r.stderr), r.exit
	})
	for i, c := range bad {
		_, err := ParseVariable("x", c.text)
		if err == nil || exits[i] != 2 || msgs[i] != err.Error() {
			t.Errorf("%q: pgbench exit %d %q, ours %v", c.text, exits[i], msgs[i], err)
		}
	}
	t.Logf("%d variable texts parsed identically", len(valueCases))
}

// randomLines are the draws compared with pgbench: 20 rounds of each.
var randomLines = []string{
	"random(1, 1000000)",
	"random(-4611686018427387903, 4611686018427387903)",
	"random(0, 1)",
	"random_gaussian(1, 1000, 2.5)",
	"random_gaussian(-100, 100, 10)",
	"random_exponential(1, 1000, 3.0)",
	"random_exponential(0, 9, 0.5)",
	"random_zipfian(1, 1000, 1.5)",
	"random_zipfian(1, 1000000, 1.07)",
	"random_zipfian(1, 10, 3)",
	"permute(random(0, 999), 1000)",
	"hash(random(1, 100))",
	"hash_fnv1a(random(1, 100))",
	"hash_murmur2(random(1, 100), :random_seed)",
	"permute(:v0 + random(0, 9), 1000000007, :default_seed)",
}

func TestConformanceRandomSequences(t *testing.T) {
	bin := pgbenchPath(t)
	var srcs []string
	for round := 0; round < 20; round++ {
		srcs = append(srcs, randomLines...)
	}
	seeds := []uint64{0, 1, 5432, 18446744073709551615}
	runs := make([]pgbenchRun, len(seeds))
	parallel(len(seeds), func(i int) {
		runs[i] = runPgbench(t, bin, map[string]string{"r.sql": setScript(srcs)},
			"-n", "-t", "1", "-c", "1", "--random-seed="+strconv.FormatUint(seeds[i], 10), "-f", "r.sql")
	})
	for i, seed := range seeds {
		if runs[i].exit != 0 {
			t.Fatalf("seed %d: pgbench exit %d: %s", seed, runs[i].exit, truncate(runs[i].stderr))
		}
		got, err := emulate(newTestContext(seed, nil), srcs)
		if err != nil {
			t.Fatal(err)
		}
		compareLines(t, "seed "+strconv.FormatUint(seed, 10), got, debugLines(runs[i].stderr))
	}
	t.Logf("%d draws x %d seeds identical", len(srcs), len(seeds))
}

// Several clients and threads: each client's function random state, the
// default seed, each thread's script-choice and sampling states. (debug()
// lines of concurrent threads can interleave on stderr, so values go
// through a table and pgbench's transaction logs instead.)
func TestConformanceSeeds(t *testing.T) {
	bin := pgbenchPath(t)
	const seed = 987654321
	dsn := srv.NewDatabase(t)
	pool := srv.Pool(t, dsn)
	ctx := context.Background()
	if _, err := pool.Exec(ctx, `CREATE TABLE draws (id bigserial PRIMARY KEY, jobs int, client int, r bigint, g bigint, d bigint)`); err != nil {
		t.Fatal(err)
	}
	script := "\\set r random(1, 1000000000)\n" +
		"\\set g random_gaussian(1, 1000000, 3)\n" +
		"INSERT INTO draws (jobs, client, r, g, d) VALUES (:jobs, :client_id, :r, :g, :default_seed);\n"
	const clients, xacts = 4, 3
	for _, jobs := range []int{1, 2} {
		r := runPgbenchOn(t, bin, dsn, map[string]string{"c.sql": script},
			"-n", "-t", strconv.Itoa(xacts), "-c", strconv.Itoa(clients), "-j", strconv.Itoa(jobs),
			"--random-seed="+strconv.Itoa(seed), "-f", "c.sql", "-D", "jobs="+strconv.Itoa(jobs))
		if r.exit != 0 {
			t.Fatalf("pgbench exit %d: %s", r.exit, truncate(r.stderr))
		}
		plan := NewSeeds(seed).Plan(clients, jobs, true)
		rows, err := pool.Query(ctx, `SELECT client, r, g, d FROM draws WHERE jobs = $1 ORDER BY id`, jobs)
		if err != nil {
			t.Fatal(err)
		}
		perClient := map[int][]string{}
		for rows.Next() {
			var c int
			var rv, gv, dv int64
			if err := rows.Scan(&c, &rv, &gv, &dv); err != nil {
				t.Fatal(err)
			}
			if dv != plan.DefaultSeed {
				t.Errorf("-j %d: default_seed %d, ours %d", jobs, dv, plan.DefaultSeed)
			}
			perClient[c] = append(perClient[c], strconv.FormatInt(rv, 10), strconv.FormatInt(gv, 10))
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
		for c := 0; c < clients; c++ {
			var want []string
			rnd := plan.Clients[c]
			for x := 0; x < xacts; x++ {
				want = append(want, strconv.FormatInt(rnd.Rand(1, 1000000000), 10),
					strconv.FormatInt(rnd.Gaussian(1, 1000000, 3), 10))
			}
			compareLines(t, fmt.Sprintf("-j %d client %d", jobs, c), want, perClient[c])
		}
	}

	// script choice (ts_choose_rs) from a full log, then log sampling
	// (ts_sample_rs); two threads of one client each
	const threads, n = 2, 40
	plan := NewSeeds(seed).Plan(threads, threads, true)
	weights := []int64{1, 3}
	choices := make([][]string, threads)
	for th := range choices {
		for x := 0; x < n; x++ {
			w := plan.Threads[th].Choose.Rand(0, 3)
			i := 0
			for {
				w -= weights[i]
				i++
				if w < 0 {
					break
				}
			}
			choices[th] = append(choices[th], strconv.Itoa(x+1)+"/"+strconv.Itoa(i-1))
		}
	}
	for _, rate := range []string{"", "0.5"} {
		args := []string{"-n", "-t", strconv.Itoa(n), "-c", strconv.Itoa(threads), "-j", strconv.Itoa(threads),
			"--random-seed=" + strconv.Itoa(seed), "-f", "a.sql@1", "-f", "b.sql@3", "-l"}
		if rate != "" {
			args = append(args, "--sampling-rate="+rate)
		}
		r := runPgbench(t, bin, map[string]string{"a.sql": "SELECT 1;\n", "b.sql": "SELECT 2;\n"}, args...)
		if r.exit != 0 {
			t.Fatalf("pgbench exit %d: %s", r.exit, truncate(r.stderr))
		}
		logs, _ := filepath.Glob(filepath.Join(r.dir, "pgbench_log.*"))
		if len(logs) != threads {
			t.Fatalf("log files: %v", logs)
		}
		sort.Strings(logs) // pgbench_log.PID (thread 0) sorts before pgbench_log.PID.1
		for th, path := range logs {
			data, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, l := range strings.Split(strings.TrimSpace(string(data)), "\n") {
				f := strings.Fields(l) // client_id transaction_no time script_no epoch us
				got = append(got, f[1]+"/"+f[3])
			}
			want := choices[th]
			if rate != "" {
				sample := NewSeeds(seed).Plan(threads, threads, true).Threads[th].Sample
				want = nil
				for _, c := range choices[th] {
					if sample.Double() <= 0.5 {
						want = append(want, c)
					}
				}
			}
			compareLines(t, fmt.Sprintf("thread %d transactions (sampling %q)", th, rate), want, got)
		}
	}
}
