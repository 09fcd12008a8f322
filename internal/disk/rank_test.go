package disk

import (
	"encoding/json"
	"math"
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"
)

func TestMannWhitneyExact(t *testing.T) {
	for _, c := range []struct {
		name string
		x, y []float64
		want float64
	}{
		// complete separation: 2 of C(6,3) = 20 splits are as extreme
		{"3v3 separated", []float64{1, 2, 3}, []float64{4, 5, 6}, 2.0 / 20},
		{"3v3 separated, other side", []float64{40, 50, 60}, []float64{1, 2, 3}, 2.0 / 20},
		// U = 1 or 8 of 9: 4 splits of 20
		{"3v3 one swap", []float64{1, 2, 4}, []float64{3, 5, 6}, 4.0 / 20},
		{"4v4 separated", []float64{1, 2, 3, 4}, []float64{5, 6, 7, 8}, 2.0 / 70},
		{"4v4 one swap", []float64{1, 2, 3, 5}, []float64{4, 6, 7, 8}, 4.0 / 70},
		{"5v5 separated", []float64{1, 2, 3, 4, 5}, []float64{6, 7, 8, 9, 10}, 2.0 / 252},
		{"2v3 separated", []float64{1, 2}, []float64{3, 4, 5}, 2.0 / 10},
		{"all equal", []float64{7, 7, 7}, []float64{7, 7, 7}, 1},
		{"interleaved", []float64{1, 4, 5}, []float64{2, 3, 6}, 1},
		{"empty", nil, []float64{1}, 1},
	} {
		if got := MannWhitneyP(c.x, c.y); math.Abs(got-c.want) > 1e-12 {
			t.Errorf("%s: p = %g, want %g", c.name, got, c.want)
		}
		if got, back := MannWhitneyP(c.x, c.y), MannWhitneyP(c.y, c.x); got != back {
			t.Errorf("%s: p(x,y) %g != p(y,x) %g", c.name, got, back)
		}
	}
}

func TestSpreadAndOrder(t *testing.T) {
	s := NewSpread([]float64{15174, 4928, 9000})
	if s.Median != 9000 || s.Min != 4928 || s.Max != 15174 || !slices.Equal(s.Values, []float64{15174, 4928, 9000}) {
		t.Errorf("spread %+v", s)
	}
	if m := NewSpread([]float64{1, 4, 2, 3}).Median; m != 2.5 {
		t.Errorf("even median %g, want 2.5", m)
	}
	// two paths alternate; three paths take every position once in 3 rounds
	if !slices.Equal(Order(2, 0), []int{0, 1}) || !slices.Equal(Order(2, 1), []int{1, 0}) || !slices.Equal(Order(2, 2), []int{0, 1}) {
		t.Errorf("order of 2: %v %v %v", Order(2, 0), Order(2, 1), Order(2, 2))
	}
	pos := map[[2]int]bool{}
	for r := range 3 {
		for p, i := range Order(3, r) {
			pos[[2]int{i, p}] = true
		}
	}
	if len(pos) != 9 {
		t.Errorf("3 paths over 3 rounds cover %d of 9 path/position pairs", len(pos))
	}
}

// Three paths: A beats C, B is tied with both; 6.2 vs 6.4 ms is a tie
// however consistent (minimum effect).
func TestRankTiesAndMinEffect(t *testing.T) {
	ss := []Sample{
		{"C", []float64{20, 21, 22}},
		{"A", []float64{10, 11, 12}},
		{"B", []float64{9, 15, 30}},
	}
	r, err := Rank("op", false, ss, DefaultRule())
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]Place{}
	for _, p := range r.Places {
		got[p.Path] = p
	}
	if got["A"].Rank != 1 || !got["A"].Tied || got["B"].Rank != 1 || got["C"].Rank != 2 || got["C"].Tied {
		t.Errorf("places %+v", r.Places)
	}
	if r.Places[0].Path != "A" || r.Places[2].Path != "C" {
		t.Errorf("order %v", r.Places)
	}
	if p, _ := r.Pair("C", "A"); p.Winner != "A" || p.P != 0.1 || math.Abs(p.Ratio-21.0/11) > 1e-9 {
		t.Errorf("A-C pair %+v", p)
	}
	close := []Sample{{"x", []float64{6.2, 6.21, 6.22}}, {"y", []float64{6.4, 6.41, 6.42}}}
	r, _ = Rank("op", false, close, DefaultRule())
	if r.Places[0].Rank != 1 || r.Places[1].Rank != 1 {
		t.Errorf("6.2 vs 6.4 ms ranked apart: %+v", r.Places)
	}
	if _, err := Rank("op", true, []Sample{{"x", []float64{1}}, {"x", []float64{2}}}, DefaultRule()); err == nil {
		t.Error("duplicate path accepted")
	}
}

// samplesOf extracts the recorded repeats of measure from c.
func samplesOf(c Comparison, measure string) (ss []Sample, higher bool) {
	for _, p := range c.Micro {
		if r, ok := p.Result(measure); ok {
			ss, higher = append(ss, Sample{p.Path, r.OpsPerS.Values}), true
		}
	}
	for _, m := range c.Macro {
		if o, ok := m.Op(measure); ok {
			ss = append(ss, Sample{m.Path, o.Ms.Values})
		}
	}
	return ss, higher
}

func loadComparison(t *testing.T, name string) Comparison {
	t.Helper()
	b, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	var c Comparison
	if err := json.Unmarshal(b, &c); err != nil {
		t.Fatal(err)
	}
	if c.Format != Format || c.Repeats < 3 {
		t.Fatalf("%s: format %q, %d repeats", name, c.Format, c.Repeats)
	}
	return c
}

// permutations of 0..n-1 (n <= 4).
func permutations(n int) [][]int {
	if n == 1 {
		return [][]int{{0}}
	}
	var out [][]int
	for _, p := range permutations(n - 1) {
		for i := 0; i <= len(p); i++ {
			q := append(append(append([]int{}, p[:i]...), n-1), p[i:]...)
			out = append(out, q)
		}
	}
	return out
}

// The recorded repeats of two directories on the same disk (erplab disk
// --quick /var/tmp/dA /var/tmp/dB on a loaded 2-core machine) rank the
// same in every order of the paths, and the verdicts are the recorded
// ones: everything tied except temp_churn_fsync, where all 3 repeats of
// dA (269-297 files/s) beat all 3 of dB (243-260), x1.12 at p = 0.10.
func TestRankOrderInvariantRecorded(t *testing.T) {
	c := loadComparison(t, "testdata/same-disk-quick.json")
	measures := append(Patterns(), MacroOps()...)
	for _, m := range measures {
		ss, higher := samplesOf(c, m)
		if len(ss) != 2 {
			t.Fatalf("%s: %d samples", m, len(ss))
		}
		var first Ranking
		for k, perm := range permutations(len(ss)) {
			in := make([]Sample, len(ss))
			for i, j := range perm {
				in[i] = ss[j]
			}
			r, err := Rank(m, higher, in, c.Rule)
			if err != nil {
				t.Fatal(err)
			}
			if k == 0 {
				first = r
			} else if !reflect.DeepEqual(r, first) {
				t.Errorf("%s: order %v ranks\n%+v\nnot as\n%+v", m, perm, r, first)
			}
		}
		pr := first.Pairs[0]
		want := ""
		if m == TempChurnSync {
			want = "/var/tmp/dA"
		}
		if pr.Winner != want {
			t.Errorf("%s: winner %q (x%.2f p %.2f), want %q", m, pr.Winner, pr.Ratio, pr.P, want)
		}
	}
	// The whole comparison, paths reversed, gives the same verdicts.
	rev := func(c Comparison) Comparison {
		c.Micro, c.Macro = slices.Clone(c.Micro), slices.Clone(c.Macro)
		slices.Reverse(c.Micro)
		slices.Reverse(c.Macro)
		return c
	}
	a, err := NewComparison(c.Micro, c.Macro, c.Repeats, c.Rule, c.WALOnPath)
	if err != nil {
		t.Fatal(err)
	}
	r := rev(c)
	b, err := NewComparison(r.Micro, r.Macro, r.Repeats, r.Rule, r.WALOnPath)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(a.MicroRanking, b.MicroRanking) || !reflect.DeepEqual(a.MacroRanking, b.MacroRanking) || !reflect.DeepEqual(a.MacroOverall, b.MacroOverall) {
		t.Error("reversed paths change the comparison's verdicts")
	}
	if !reflect.DeepEqual(a.MicroRanking, c.MicroRanking) {
		t.Error("recomputed micro ranking differs from the recorded one")
	}
}

// The real order swap, recorded: erplab disk /var/tmp/dA /dev/shm
// --wal-on-path and then /dev/shm /var/tmp/dA (default settings, 3
// repeats, a loaded 2-core machine). Recomputed from the repeats, both
// runs give the same places in every figure: /dev/shm first and not tied
// everywhere except the turnover report, which is a tie (x0.95 p 0.70 in
// one run, x1.29 p 0.40 in the other), as in the field (CONTEXT.md
// section 2: the RAM disk did not speed up the report).
func TestRankRecordedOrderSwap(t *testing.T) {
	one := loadComparison(t, "testdata/shm-disk-walonpath-order1.json")
	two := loadComparison(t, "testdata/shm-disk-walonpath-order2.json")
	if one.Micro[0].Path != "/var/tmp/dA" || two.Micro[0].Path != "/dev/shm" || !one.WALOnPath || !two.WALOnPath {
		t.Fatalf("recorded runs: %s first, %s first", one.Micro[0].Path, two.Micro[0].Path)
	}
	a, err := NewComparison(one.Micro, one.Macro, one.Repeats, one.Rule, true)
	if err != nil {
		t.Fatal(err)
	}
	b, err := NewComparison(two.Micro, two.Macro, two.Repeats, two.Rule, true)
	if err != nil {
		t.Fatal(err)
	}
	type place struct {
		path string
		rank int
		tied bool
	}
	// places by path: within a tie the display order follows the medians
	strip := func(r Ranking) (out []place) {
		for _, p := range r.Places {
			out = append(out, place{p.Path, p.Rank, p.Tied})
		}
		slices.SortFunc(out, func(a, b place) int { return strings.Compare(a.path, b.path) })
		return out
	}
	rankings := func(c Comparison) []Ranking { return append(slices.Clone(c.MicroRanking), c.MacroRanking...) }
	ra, rb := rankings(a), rankings(b)
	if len(ra) != len(Patterns())+len(MacroOps()) || len(rb) != len(ra) {
		t.Fatalf("%d and %d rankings", len(ra), len(rb))
	}
	for i := range ra {
		x, y := strip(ra[i]), strip(rb[i])
		if !reflect.DeepEqual(x, y) {
			t.Errorf("%s: %v in one order, %v in the other", ra[i].Measure, x, y)
		}
		want := []place{{"/dev/shm", 1, false}, {"/var/tmp/dA", 2, false}} // by path
		if ra[i].Measure == MacroTurnover {
			if !x[0].tied || !x[1].tied || x[0].rank != 1 || x[1].rank != 1 {
				t.Errorf("%s: %v, want a tie", ra[i].Measure, x)
			}
			continue
		}
		if !reflect.DeepEqual(x, want) {
			t.Errorf("%s: %v, want %v", ra[i].Measure, x, want)
		}
	}
	if !reflect.DeepEqual(a.MacroOverall, b.MacroOverall) || a.MacroOverall[0].Path != "/dev/shm" {
		t.Errorf("overall %v vs %v", a.MacroOverall, b.MacroOverall)
	}
}
