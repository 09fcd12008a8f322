package main

import (
	"bytes"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/erplab/erplab/internal/compare"
	"github.com/erplab/erplab/internal/results"
)

// roundFiles returns the paths of internal/compare/testdata/NAME-1..n.json.
func roundFiles(t *testing.T, name string, n int) []string {
	t.Helper()
	td, err := filepath.Abs("../../internal/compare/testdata")
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for r := 1; r <= n; r++ {
		out = append(out, filepath.Join(td, name+"-"+string(rune('0'+r))+".json"))
	}
	return out
}

// ab's verdict line from a recorded comparison: the VERDICT label with
// the variant's name, the primary verdict and its family, then one
// "primary" line per primary row with A -> B, the delta, its interval
// and p. Two primary rows: temp_churn's p 0.029 is over Holm's 0.025, so
// no verdict (as the single primary row of TestComparePrimary it is
// "worse").
func TestABVerdictLines(t *testing.T) {
	as, bs := roundFiles(t, "r-base", 3), roundFiles(t, "r-slow", 3)
	read := func(ps []string) []*results.Document {
		var ds []*results.Document
		for _, p := range ps {
			d, err := results.Read(p)
			if err != nil {
				t.Fatal(err)
			}
			ds = append(ds, d)
		}
		return ds
	}
	c, err := compare.CompareRounds(as, read(as), bs, read(bs), compare.Options{
		Primary: []compare.Key{compare.IntegralApdex, {Subject: "temp_churn", Metric: "apdex"}}, PrimarySource: "settings"})
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	writeVerdict(&b, "slow", c)
	s := b.String()
	lines := strings.Split(strings.TrimSpace(s), "\n")
	if len(lines) != 3 || !strings.HasPrefix(lines[0], "VERDICT slow: primary verdict: no significant difference (Holm over 2 tested primary rows declared by settings;") {
		t.Fatalf("verdict lines:\n%s", s)
	}
	row := regexp.MustCompile(`^  primary (temp_churn|integral) apdex: A 0\.\d+ -> B 0\.\d+, delta -0\.\d+ \[-?[\d.]+, -?[\d.]+\], p 0\.0\d+: no significant difference$`)
	for _, l := range lines[1:] {
		if !row.MatchString(l) {
			t.Errorf("primary line %q", l)
		}
	}
	b.Reset()
	writeVerdict(&b, "x", &compare.Comparison{})
	if b.Len() != 0 {
		t.Fatalf("a comparison without primary rows printed %q", b.String())
	}
}

// ab's verdict lines when no primary row could be tested (recorded A/A
// runs of erp, one run per side: stock_balance_report's APDEX is 1 on
// both sides): the VERDICT line says so and why, and the primary row
// gives what is known (A, B, delta) and why it has no interval, without
// empty brackets.
func TestABVerdictLineUntested(t *testing.T) {
	as, bs := roundFiles(t, "aa-erp/baseline", 1), roundFiles(t, "aa-erp/same", 1)
	var docs [2][]*results.Document
	for i, ps := range [][]string{as, bs} {
		d, err := results.Read(ps[0])
		if err != nil {
			t.Fatal(err)
		}
		docs[i] = []*results.Document{d}
	}
	c, err := compare.CompareRounds(as, docs[0], bs, docs[1], compare.Options{
		Primary: []compare.Key{{Subject: "stock_balance_report", Metric: "apdex"}}, PrimarySource: "settings"})
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	writeVerdict(&b, "same", c)
	want := "VERDICT same: primary verdict: inconclusive: one round each (no primary row could be tested: stock_balance_report:apdex " +
		"(nothing varies: the same value on both sides); declared by settings; exploratory: 78 rows, 33 tested, in a Holm family of their own that does not decide it)\n" +
		"  primary stock_balance_report apdex: A 1.00 -> B 1.00, delta 0.00, not tested (nothing varies: the same value on both sides): no significant difference\n"
	if b.String() != want {
		t.Fatalf("verdict lines:\n%s\nwant\n%s", b.String(), want)
	}
}

// compare --primary: the labelled sections and the verdict line; a row
// no comparison has is a usage error.
func TestComparePrimary(t *testing.T) {
	as, bs := strings.Join(roundFiles(t, "r-base", 3), ","), strings.Join(roundFiles(t, "r-slow", 3), ",")
	out, err := erplab(t, t.TempDir(), "compare", "--primary", "temp_churn", as, bs).Output()
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	s := string(out)
	for _, want := range []string{compare.PrimaryHeading, compare.ExploratoryHeading, "primary verdict: worse (Holm over 1 tested primary row declared by --primary;"} {
		if !strings.Contains(s, want) {
			t.Fatalf("output lacks %q:\n%s", want, s)
		}
	}
	checkUsageError(t, []string{"compare", "--primary", "temp_table_storm", as, bs})
	checkUsageError(t, []string{"compare", "--primary", "integral:", as, bs})
}
