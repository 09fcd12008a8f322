package compare_test

import (
	"bytes"
	"encoding/json"
	"math"
	"regexp"
	"strings"
	"testing"

	"github.com/erplab/erplab/internal/compare"
)

// aaSingle is round 1 of each side of aaRounds: one run per side.
var aaSingle = [2][]string{{aaRounds[0][0]}, {aaRounds[1][0]}}

// A primary row that cannot be tested: the verdict line says that no
// primary row could be tested and why (never "Holm over 0 tested primary
// rows", which reads like a finding), and the row's own line gives A and
// B without an empty interval. Recorded A/A runs of erp: one run per
// side, stock_balance_report's APDEX is 1 on both sides (nothing to
// test) and repost_day never ran (no samples); with 3 rounds per side
// repost_day has too few rounds with a value.
func TestPrimaryNotTestedSaysWhy(t *testing.T) {
	for _, c := range []struct {
		files   [2][]string
		row     compare.Key
		verdict compare.Verdict
		why     string
		brief   string
	}{
		{aaSingle, compare.Key{Subject: "stock_balance_report", Metric: "apdex"}, compare.OneRoundEach,
			"nothing varies: the same value on both sides",
			"stock_balance_report apdex: A 1.00 -> B 1.00, delta 0.00, not tested (nothing varies: the same value on both sides): no significant difference"},
		{aaSingle, compare.Key{Subject: "repost_day", Metric: "apdex"}, compare.NotApplicable, "no samples on either side",
			"repost_day apdex: A - -> B -, not tested (no samples on either side): n/a"},
		{aaRounds, compare.Key{Subject: "repost_day", Metric: "apdex"}, compare.NotApplicable, "too few rounds with a value (0, 0; need 2)",
			"repost_day apdex: A - -> B -, not tested (too few rounds with a value (0, 0; need 2)): n/a"},
	} {
		cp := compareFiles(t, compare.Options{Primary: []compare.Key{c.row}, PrimarySource: "test"}, c.files[0], c.files[1])
		p := cp.Primary
		if p.Family != 0 || p.Verdict != c.verdict || len(p.Untested) != 1 || p.Untested[0].Key != c.row || p.Untested[0].Reason != c.why {
			t.Errorf("%s: %+v", c.row, p)
		}
		want := "primary verdict: " + string(c.verdict) + " (no primary row could be tested: " + c.row.String() + " (" + c.why + "); declared by test; exploratory: "
		if l := p.Line(); !strings.HasPrefix(l, want) || strings.Contains(l, "Holm over 0") {
			t.Errorf("%s: line\n%s\nwant prefix\n%s", c.row, l, want)
		}
		if !strings.Contains(cp.MethodNote(), "decide the verdict: 0 of 1 tested;") {
			t.Errorf("%s: method note %s", c.row, cp.MethodNote())
		}
		r := cp.Find(c.row.Subject, c.row.Metric)
		if got := r.Brief(); got != c.brief {
			t.Errorf("%s: brief\n%s\nwant\n%s", c.row, got, c.brief)
		}
	}
}

// The exploratory count says how many rows are listed and how many of
// them were tested: of the 78 exploratory rows of the recorded single
// A/A runs (integral APDEX primary), 32 have a p-value; the other 46 are
// n/a (among them the percentiles of operations with fewer than 20 or
// 100 executions a run: their maxima) or equal on both sides.
func TestExploratoryCountsListedAndTested(t *testing.T) {
	c := compareFiles(t, compare.Options{Primary: []compare.Key{compare.IntegralApdex}, PrimarySource: "test"}, aaSingle[0], aaSingle[1])
	listed, tested := 0, 0
	for _, r := range c.Rows {
		if r.Role == compare.RoleExploratory {
			listed++
			if !math.IsNaN(r.P) {
				tested++
			}
		}
	}
	p := c.Primary
	if listed != 78 || tested != 32 || p.ExploratoryRows != listed || p.Exploratory != tested || p.Family != 1 || len(p.Untested) != 0 {
		t.Fatalf("listed %d, tested %d: %+v", listed, tested, p)
	}
	if l := p.Line(); !strings.HasPrefix(l, "primary verdict: inconclusive: one round each (Holm over 1 tested primary row declared by test; exploratory: 78 rows, 32 tested, in a Holm family of their own") {
		t.Fatalf("line %s", l)
	}
	if m := c.MethodNote(); !strings.Contains(m, "decide the verdict: 1 of 1 tested; the exploratory rows form a family of their own: 78 rows, 32 tested)") {
		t.Fatalf("method note %s", m)
	}
	// Without primary rows the method note says tested of listed too.
	all := compareFiles(t, compare.Options{}, aaSingle[0], aaSingle[1])
	if m := all.MethodNote(); !strings.Contains(m, "over all 33 tested rows (of 79 listed)") {
		t.Fatalf("method note %s", m)
	}
}

var cellSep = regexp.MustCompile(`\s{2,}`)

// textCells returns the table rows of compare's text output, cell by
// cell (tabwriter puts two spaces or more between cells, one at most
// inside a cell).
func textCells(s string) [][]string {
	var out [][]string
	for _, l := range strings.Split(s, "\n") {
		f := cellSep.Split(strings.TrimSpace(l), -1)
		if len(f) == 9 && f[0] != "SUBJECT" {
			out = append(out, f)
		}
	}
	return out
}

// markdownCells returns the table rows of compare's Markdown output, cell
// by cell, bold verdicts unmarked.
func markdownCells(s string) [][]string {
	var out [][]string
	for _, l := range strings.Split(s, "\n") {
		if !strings.HasPrefix(l, "| ") || strings.HasPrefix(l, "| subject ") {
			continue
		}
		f := strings.Split(strings.TrimSuffix(strings.TrimPrefix(l, "| "), " |"), " | ")
		f[8] = strings.Trim(f[8], "*")
		out = append(out, f)
	}
	return out
}

// compare's text, Markdown and JSON outputs of a comparison with primary
// rows agree: the same rows in the same order with the same cells (so
// the same rounding and verdicts), the same primary verdict line and
// exploratory counts, and JSON's primary section has the counts and the
// untested row the line names. ab's VERDICT lines (Row.Brief) round A
// and B as the tables do.
func TestPrimaryOutputsAgree(t *testing.T) {
	untested := compare.Key{Subject: "repost_day", Metric: "p95_ms"}
	for _, files := range [][2][]string{aaSingle, aaRounds} {
		c := compareFiles(t, compare.Options{Primary: []compare.Key{compare.IntegralApdex, untested}, PrimarySource: "test"}, files[0], files[1])
		var text, md, js bytes.Buffer
		if err := c.WriteText(&text); err != nil {
			t.Fatal(err)
		}
		if err := c.WriteMarkdown(&md); err != nil {
			t.Fatal(err)
		}
		if err := compare.WriteJSON(&js, []*compare.Comparison{c}); err != nil {
			t.Fatal(err)
		}
		tc, mc := textCells(text.String()), markdownCells(md.String())
		if len(tc) != len(c.Rows) || len(mc) != len(c.Rows) {
			t.Fatalf("%d rows: %d in the text, %d in the markdown", len(c.Rows), len(tc), len(mc))
		}
		var decoded []struct {
			Rows []struct {
				Subject, Metric, Verdict, Note, Role string
			}
			Primary struct {
				Verdict         string
				Family          int
				Exploratory     int `json:"exploratory_family"`
				ExploratoryRows int `json:"exploratory_rows"`
				Untested        []struct{ Subject, Metric, Reason string }
				Line            string
			}
		}
		if err := json.Unmarshal(js.Bytes(), &decoded); err != nil {
			t.Fatal(err)
		}
		verdict := map[string]string{}
		for _, r := range decoded[0].Rows {
			v := r.Verdict
			if v == string(compare.NotApplicable) && r.Note != "" {
				v += ": " + r.Note
			}
			verdict[r.Subject+"\x00"+r.Metric] = v
		}
		primaries := c.PrimaryRows()
		for i := range tc {
			if strings.Join(tc[i], "|") != strings.Join(mc[i], "|") {
				t.Errorf("row %d: text %q, markdown %q", i, tc[i], mc[i])
			}
			var metric string
			for _, r := range c.Rows {
				if r.Subject == tc[i][0] && strings.HasPrefix(tc[i][1], r.Metric) {
					metric = r.Metric
				}
			}
			if v := verdict[tc[i][0]+"\x00"+metric]; v != tc[i][8] {
				t.Errorf("row %d %s %s: JSON verdict %q, text %q", i, tc[i][0], metric, v, tc[i][8])
			}
			if i < len(primaries) && !strings.HasPrefix(primaries[i].Brief(), tc[i][0]+" "+tc[i][1]+": A "+tc[i][2]+" -> B "+tc[i][3]+", ") {
				t.Errorf("primary row %d: brief %q, table %q", i, primaries[i].Brief(), tc[i])
			}
		}
		line := c.Primary.Line()
		if !strings.Contains(text.String(), "\n"+line+"\n") || !strings.Contains(md.String(), "**"+line+"**") {
			t.Errorf("the primary line %q is not in both outputs", line)
		}
		if !strings.Contains(line, "; not tested: repost_day:p95_ms (") {
			t.Errorf("line %q does not name the untested primary row", line)
		}
		jp := decoded[0].Primary
		if jp.Verdict != string(c.Primary.Verdict) || jp.Line != line || jp.Family != 1 || jp.Exploratory != c.Primary.Exploratory ||
			jp.ExploratoryRows != len(c.Rows)-2 || len(jp.Untested) != 1 || jp.Untested[0].Subject != "repost_day" ||
			jp.Untested[0].Reason != c.Primary.Untested[0].Reason || !strings.Contains(line, jp.Untested[0].Reason) {
			t.Errorf("JSON primary %+v, line %s", jp, line)
		}
		if !strings.Contains(text.String(), "\nexploratory rows: ") || !strings.Contains(md.String(), "\nExploratory rows: ") {
			t.Errorf("exploratory summary missing")
		}
	}
}

// A row with a p-value but no interval (constant per-round values: the
// permutation p-value) says why it has no interval instead of printing
// empty brackets; a row with both prints them.
func TestBriefWithoutInterval(t *testing.T) {
	r := compare.Row{Subject: "database", Metric: "temp_files_per_s", A: 0.625, B: 0.5, Delta: -0.125, Lo: math.NaN(), Hi: math.NaN(), P: 0.1,
		Note: "no variation within either side: permutation p-value only", Verdict: compare.NoDifference}
	if got, want := r.Brief(), "database temp_files_per_s: A 0.625 -> B 0.500, delta -0.125, p 0.1000, no interval (no variation within either side: permutation p-value only): no significant difference"; got != want {
		t.Errorf("brief\n%s\nwant\n%s", got, want)
	}
	r = compare.Row{Subject: "integral", Metric: "apdex", A: 0.959, B: 0.591, Delta: -0.368, Lo: -0.6, Hi: -0.13, P: 0.00002, Verdict: compare.Worse}
	if got, want := r.Brief(), "integral apdex: A 0.95 -> B 0.59, delta -0.368 [-0.600, -0.130], p <0.0001: worse"; got != want {
		t.Errorf("brief\n%s\nwant\n%s", got, want)
	}
}
