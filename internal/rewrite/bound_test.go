package rewrite

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	pg_query "github.com/pganalyze/pg_query_go/v6"
)

// deepShapes build statements whose parse tree nests n levels deep.
var deepShapes = map[string]func(n int) string{
	"plus": func(n int) string {
		return "select 1 where 1=0 or 1 in (select 1) or 0=(" + strings.Repeat("1+", n) + "1)"
	},
	"typecast": func(n int) string { return "select 1" + strings.Repeat("::int", n) },
	"collate":  func(n int) string { return "select 'a'" + strings.Repeat(` collate "C"`, n) },
	"join": func(n int) string {
		var b strings.Builder
		b.WriteString("select 1 from t0")
		for i := 0; i < n; i++ {
			b.WriteString(" join t on a = 1 and b = 2")
		}
		return b.String()
	},
	"union": func(n int) string { return "select 1" + strings.Repeat(" union select 1, 2 where a and b", n) },
	"parens": func(n int) string {
		return "select " + strings.Repeat("(", n) + "1" + strings.Repeat(")", n)
	},
	"subquery": func(n int) string { return strings.Repeat("select (", n) + "1" + strings.Repeat(")", n) },
	"case": func(n int) string {
		return "select " + strings.Repeat("1+1+1+case when a and b then 1 else 2 end+", n) + "1"
	},
}

func TestCheckLimitsRefusesDeepStatements(t *testing.T) {
	// The statement: 30,000 terms crashed the process.
	err := CheckLimits(deepShapes["plus"](30000))
	var le *LimitError
	if !errors.As(err, &le) || le.TooLarge || !errors.Is(err, ErrLimit) {
		t.Fatalf("30,000 terms: got %v, want a nesting *LimitError", err)
	}
	if le.Offset < 40 || le.Offset > 100000 || le.Limit != depthLimit() {
		t.Errorf("limit error %+v: offset or limit off", le)
	}
	res, err := Rewrite(context.Background(), deepShapes["plus"](30000), Options{})
	if !errors.As(err, &le) || res.Changed {
		t.Errorf("Rewrite: got %v changed=%v, want the limit error", err, res.Changed)
	}
	if _, err := Parse(deepShapes["parens"](100000)); !errors.As(err, &le) {
		t.Errorf("100,000 parentheses: got %v, want a limit error", err)
	}
	big := "select 1 where a in (" + strings.Repeat("1, ", MaxBytes/3) + "1)"
	if err := CheckLimits(big); !errors.As(err, &le) || !le.TooLarge {
		t.Errorf("%d bytes: got %v, want a size limit error", len(big), err)
	}
}

func TestCheckLimitsKeepsOrdinaryStatements(t *testing.T) {
	ok := []string{
		"select 1 where a in (" + strings.Repeat("1, ", 20000) + "1)",
		"select 1 from t where " + strings.Repeat("t.a = 1 or t.a in (select u.x from u) or ", 2000) + "true",
		"select 1 from t where " + strings.Repeat("t.a = $1 and t.b like 'x%' and ", 1000) + "true",
		"insert into t values " + strings.Repeat("(1, 'a', 2.5, null), ", 5000) + "(1, 'a', 2.5, null)",
		"select " + strings.Repeat("coalesce(a, b, 0) + 1 as c, ", 500) + "1 from t join u on u.x = t.a join e on e.x = u.x",
	}
	for _, sql := range ok {
		if err := CheckLimits(sql); err != nil {
			t.Errorf("%.60s...: %v", sql, err)
		}
	}
	// Every statement of the rule's golden corpus.
	files, _ := filepath.Glob("testdata/cases/*/input.sql")
	if len(files) == 0 {
		t.Fatal("no golden statements in testdata")
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if err := CheckLimits(string(b)); err != nil {
			t.Errorf("%s: %v", f, err)
		}
	}
}

// TestCheckLimitsIsSafe parses, for every deep shape, the largest
// statement CheckLimits accepts: the parser must return (a tree or an
// error) instead of crashing the test binary. A child process repeats
// it with a 1 MiB stack, where the limit is lower.
func TestCheckLimitsIsSafe(t *testing.T) {
	for name, build := range deepShapes {
		lo, hi := 1, 2*depthLimit()+10 // CheckLimits accepts lo, refuses hi (every level adds one at least)
		if CheckLimits(build(hi)) == nil {
			t.Fatalf("%s: %d levels accepted", name, hi)
		}
		for hi-lo > 1 {
			if m := (lo + hi) / 2; CheckLimits(build(m)) == nil {
				lo = m
			} else {
				hi = m
			}
		}
		_, err := pg_query.Parse(build(lo))
		t.Logf("%s: largest accepted %d levels, parser: %v", name, lo, err)
	}
	if os.Getenv("ERPLAB_BOUND_CHILD") != "" {
		return
	}
	if _, err := exec.LookPath("sh"); err != nil {
		t.Skip("no sh to lower the stack limit")
	}
	cmd := exec.Command("sh", "-c", `ulimit -s 1024 && exec "$0" -test.short -test.run='^TestCheckLimitsIsSafe$' -test.v`, os.Args[0])
	cmd.Env = append(os.Environ(), "ERPLAB_BOUND_CHILD=1")
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "largest accepted") {
		t.Fatalf("child with a 1 MiB stack: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "plus: largest accepted 10") { // 1024 KiB: about 1,000 levels
		t.Errorf("child with a 1 MiB stack: limit not lowered:\n%s", out)
	}
}

// CheckWork refuses a text of more tokens than its bound, after the
// size and nesting checks (a deep text stays "too deep"), and Rewrite
// with Options.MaxTokens does the same.
func TestCheckWorkBoundsTokens(t *testing.T) {
	q := "select 1 from t where " + strings.Repeat("t.a = 1 or t.a in (select u.x from u) or ", 100) + "true" // 1,906 tokens
	var le *LimitError
	if err := CheckWork(q, 1905); !errors.As(err, &le) || !le.TooManyTokens || le.Value != 1906 || le.Limit != 1905 || !errors.Is(err, ErrLimit) {
		t.Fatalf("1,906 tokens, bound 1,905: got %v (%+v)", err, le)
	}
	if !strings.Contains(le.Error(), "too much work (1906 tokens, limit 1905)") {
		t.Errorf("message %q", le.Error())
	}
	if err := CheckWork(q, 1906); err != nil {
		t.Errorf("1,906 tokens, bound 1,906: %v", err)
	}
	if err := CheckWork(q, 0); err != nil {
		t.Errorf("no bound: %v", err)
	}
	if err := CheckWork(deepShapes["plus"](30000), 100); !errors.As(err, &le) || le.TooManyTokens || le.TooLarge {
		t.Errorf("deep text: got %v, want the nesting error", err)
	}
	res, err := Rewrite(context.Background(), q, Options{MaxTokens: 1000})
	if !errors.As(err, &le) || !le.TooManyTokens || res.Changed || res.SQL != q {
		t.Errorf("Rewrite with MaxTokens 1000: %v, changed %v", err, res.Changed)
	}
}

// TestCheckedStandsForTheScan: Rewrite given Check's result answers as
// Rewrite alone, uses the scan only for its own text and token bound,
// and Check refuses what CheckWork refuses.
func TestCheckedStandsForTheScan(t *testing.T) {
	ctx := context.Background()
	for _, sql := range []string{
		"SELECT t.a FROM t WHERE t.a = 1 OR t.a IN (SELECT u.x FROM u)",
		"SELECT t.a FROM t WHERE t.a = $1 OR t.a IN (SELECT u.x FROM u WHERE u.y = 'w'); SELECT 1",
		"SELECT 1 WHERE 1 = 2 OR 3 IN (SELECT 4)",
		"SELECT * FROM",
	} {
		want, werr := Rewrite(ctx, sql, Options{})
		c, err := Check(sql, 1000)
		if err != nil {
			t.Fatalf("%q: %v", sql, err)
		}
		got, gerr := Rewrite(ctx, sql, Options{Checked: c, MaxTokens: 1000})
		if got.SQL != want.SQL || got.Explain() != want.Explain() || (gerr == nil) != (werr == nil) {
			t.Errorf("%q: with Checked %q / %s / %v, alone %q / %s / %v", sql, got.SQL, got.Explain(), gerr, want.SQL, want.Explain(), werr)
		}
	}
	// Another text's scan is not used: the statement is rewritten from
	// its own tokens (a wrong scan would splice at wrong offsets).
	other, err := Check("SELECT 1", 0)
	if err != nil {
		t.Fatal(err)
	}
	sql := "SELECT t.a FROM t WHERE t.a = 1 OR t.a IN (SELECT u.x FROM u)"
	got, err := Rewrite(ctx, sql, Options{Checked: other})
	want, _ := Rewrite(ctx, sql, Options{})
	if err != nil || got.SQL != want.SQL {
		t.Errorf("another text's Checked: %q, %v; want %q", got.SQL, err, want.SQL)
	}
	// A different token bound is checked again.
	c, err := Check(sql, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Rewrite(ctx, sql, Options{Checked: c, MaxTokens: 5}); err == nil {
		t.Error("MaxTokens 5 with a Checked of no bound: want the token limit's error")
	}
	if _, err := Check(sql, 5); err == nil {
		t.Error("Check with 5 tokens: want an error")
	}
}
