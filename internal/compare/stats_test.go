package compare_test

import (
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"testing"

	"github.com/HdrHistogram/hdrhistogram-go"

	"github.com/erplab/erplab/internal/compare"
	"github.com/erplab/erplab/internal/results"
)

// The documents in testdata were recorded by testdata/record.sh (smoke
// workload, 6 s runs on a shared 2-core machine).
func readDocs(t *testing.T, names ...string) []*results.Document {
	t.Helper()
	out := make([]*results.Document, len(names))
	for i, n := range names {
		d, err := results.Read(filepath.Join("testdata", n))
		if err != nil {
			t.Fatal(err)
		}
		out[i] = d
	}
	return out
}

func compareFiles(t *testing.T, opts compare.Options, a, b []string) *compare.Comparison {
	t.Helper()
	c, err := compare.CompareRounds(a, readDocs(t, a...), b, readDocs(t, b...), opts)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// checkOneStatistic asserts that every tested row's direction, interval
// and p-value come from one statistic: the interval holds Delta, it
// excludes 0 exactly when p < 0.05, and a decided verdict has the sign of
// Delta and an interval beyond the minimum effect.
func checkOneStatistic(t *testing.T, c *compare.Comparison) (tested int) {
	t.Helper()
	for _, r := range c.Rows {
		if math.IsNaN(r.P) {
			continue
		}
		tested++
		if math.IsNaN(r.Lo) {
			if r.Verdict.Decided() || r.Note == "" {
				t.Errorf("%s %s: no interval but verdict %s, note %q", r.Subject, r.Metric, r.Verdict, r.Note)
			}
			continue
		}
		if !(r.Lo <= r.Delta+1e-9 && r.Delta <= r.Hi+1e-9) {
			t.Errorf("%s %s: delta %g outside [%g, %g]", r.Subject, r.Metric, r.Delta, r.Lo, r.Hi)
		}
		if excl := r.Lo > 0 || r.Hi < 0; excl != (r.P < 0.05) && math.Abs(r.P-0.05) > 1e-6 {
			t.Errorf("%s %s: p %g but interval [%g, %g]", r.Subject, r.Metric, r.P, r.Lo, r.Hi)
		}
		up := r.Verdict == compare.Worse && r.Direction == compare.LowerBetter || r.Verdict == compare.Better && r.Direction == compare.HigherBetter ||
			r.Verdict == compare.Higher
		down := r.Verdict == compare.Better && r.Direction == compare.LowerBetter || r.Verdict == compare.Worse && r.Direction == compare.HigherBetter ||
			r.Verdict == compare.Lower
		if up && !(r.Delta > 0 && r.Lo > r.MinDelta) || down && !(r.Delta < 0 && r.Hi < -r.MinDelta) {
			t.Errorf("%s %s: verdict %s with delta %g [%g, %g], min %g", r.Subject, r.Metric, r.Verdict, r.Delta, r.Lo, r.Hi, r.MinDelta)
		}
	}
	return tested
}

// One run each, a known injected difference: the variant's database has
// commit_delay = 40 ms, so every committing write waits 40 ms. One run
// per side decides nothing (replication is the unit of proof, #31): the
// row shows post_order's effect, about +40 ms with an interval clear of
// 0, reads "inconclusive: one round each", and the rounds hint says how
// many rounds a side would decide a row; swapped, the exact opposite
// effect.
func TestInjectedDelayOneRoundEach(t *testing.T) {
	c := compareFiles(t, compare.Options{}, []string{"base.json"}, []string{"base-slow.json"})
	if n := checkOneStatistic(t, c); n < 20 {
		t.Fatalf("only %d tested rows", n)
	}
	r := c.Find("post_order", "p50_ms")
	if r == nil || r.Verdict != compare.OneRoundEach || r.Method != compare.MethodBlockBootstrap || r.Lo < 20 {
		t.Fatalf("post_order p50: %+v, want an effect of at least 20 ms, undecided", r)
	}
	if d := c.Decided(); d != 0 {
		t.Fatalf("%d decided rows from one run per side:\n%s", d, c.Summary())
	}
	h := c.RoundsHint
	if h == nil || h.Rounds < 2 || h.Rounds > compare.MaxRoundsHint || h.Subject == "" ||
		!strings.Contains(h.Line, fmt.Sprintf("at least %d rounds a side would decide %s", h.Rounds, h.Subject)) {
		t.Fatalf("rounds hint: %+v", h)
	}
	var text strings.Builder
	if err := c.WriteText(&text); err != nil || !strings.Contains(text.String(), h.Line) {
		t.Fatalf("text output lacks the rounds hint %q:\n%s", h.Line, text.String())
	}
	if !strings.Contains(c.MethodNote(), "moving-block") || c.RoundsA != 1 {
		t.Fatalf("method note: %s", c.MethodNote())
	}
	back := compareFiles(t, compare.Options{}, []string{"base-slow.json"}, []string{"base.json"})
	rb := back.Find("post_order", "p50_ms")
	if rb == nil || rb.Verdict != compare.OneRoundEach || math.Abs(rb.Delta+r.Delta) > 1e-9 {
		t.Fatalf("swapped post_order p50: %+v, want %g undecided", rb, -r.Delta)
	}
	// Rounds carry no hint: they decide (or not) themselves.
	rounds := compareFiles(t, compare.Options{}, []string{"r-base-1.json", "r-base-2.json"}, []string{"r-slow-1.json", "r-slow-2.json"})
	if rounds.RoundsHint != nil {
		t.Fatalf("rounds hint with rounds: %+v", rounds.RoundsHint)
	}
}

// testdata/starved (record-starved.sh): three rounds of the smoke
// workload on a quiet host (already saturated by others) and three with
// `erplab stress --cpu 4` beside, an A/A whose one side starved. The hog
// cut throughput by a third; the foreign CPU barely moved (84.6 against
// 90.1 % of all CPUs: a saturated host has no more to give), so a
// share-based guard let 7 rows read better or worse. Starvation (run
// delay per ms run, 4.4 against 11.4) explains them, and the guard
// withholds every one; turned off, the same rows are decided.
func TestStarvationGuardAA(t *testing.T) {
	quiet := []string{"starved/quiet-1.json", "starved/quiet-2.json", "starved/quiet-3.json"}
	hog := []string{"starved/hog-1.json", "starved/hog-2.json", "starved/hog-3.json"}
	c := compareFiles(t, compare.Options{}, quiet, hog)
	if !c.Noise.Recorded || !c.Noise.Starvation || !(c.Noise.B.Contention > 1.5*c.Noise.A.Contention) {
		t.Fatalf("noise: %+v", c.Noise)
	}
	if n := c.Count(compare.Better) + c.Count(compare.Worse); n != 0 {
		t.Fatalf("%d better/worse rows in an A/A comparison with one side starved:\n%s", n, c.Summary())
	}
	if c.Count(compare.Starved) == 0 || !c.Noise.Differed || c.Noise.Withheld != c.Count(compare.Starved) {
		t.Fatalf("no verdict withheld: %s", c.Summary())
	}
	if l := c.Noise.Line(); !strings.Contains(l, "starvation (run delay per ms run) A 4.") || !strings.Contains(l, string(compare.Starved)) {
		t.Fatalf("noise line: %s", l)
	}
	off := compareFiles(t, compare.Options{NoiseGuardOff: true}, quiet, hog)
	if off.Decided() != c.Count(compare.Starved) || off.Noise.Differed || !strings.HasSuffix(off.Noise.Line(), "guard off") {
		t.Fatalf("guard off: %d decided rows, guard on: %d withheld", off.Decided(), c.Count(compare.Starved))
	}
	// Calibration: every latency effect the hog caused, decided or not
	// (more rounds would decide them), is one the guard explains: item_lookup's
	// p50 grew 8 times (0.3 -> 2.6 ms), beyond the ratio's square, but by
	// less than the hog side's extra run delay per operation.
	for _, r := range c.Rows {
		if r.Unit == "ms" && !c.Noise.Explains(&r) {
			t.Errorf("%s %s: %g -> %g not explained (limit %g, extra delay %g ms)", r.Subject, r.Metric, r.A, r.B, c.Noise.Limit, c.Noise.ExtraDelayMs)
		}
	}
	if r := c.Find("item_lookup", "p50_ms"); r == nil || r.B/r.A <= c.Noise.Limit || r.B-r.A > c.Noise.ExtraDelayMs {
		t.Fatalf("item_lookup p50 %+v: want beyond the limit %g, within the extra delay %g ms", r, c.Noise.Limit, c.Noise.ExtraDelayMs)
	}
}

// testdata/starved: a real effect with unequal starvation, as in #31
// (p50 2,130 -> 12 ms with the foreign CPU 76 against 96 %, withheld by
// the share-based guard). The baseline's database has commit_delay 40 ms
// and ran beside the CPU hog (contention 13.2), the variant is the quiet
// host's (4.4). post_order's and temp_churn's p50 fell 17 and 7 times,
// more than the contention ratio could do: better. Rows that moved less
// (throughput, which the hog alone cuts) are withheld.
// The foreign CPU of every sample is then set to the figures (76
// % on the baseline's side, 96 % on the variant's): the verdicts stay.
func TestStarvationGuardRealEffect(t *testing.T) {
	as := []string{"starved/slow-1.json", "starved/slow-2.json", "starved/slow-3.json"}
	bs := []string{"starved/quiet-1.json", "starved/quiet-2.json", "starved/quiet-3.json"}
	c := compareFiles(t, compare.Options{}, as, bs)
	checkRealEffect(t, c)
	da, db := readDocs(t, as...), readDocs(t, bs...)
	setForeign(t, da, 76)
	setForeign(t, db, 96)
	shares, err := compare.CompareRounds(as, da, bs, db, compare.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if shares.Noise.A.ForeignPct != 76 || shares.Noise.B.ForeignPct != 96 {
		t.Fatalf("foreign CPU not set: %+v", shares.Noise)
	}
	checkRealEffect(t, shares)
}

// setForeign sets the foreign CPU of every observation sample of ds.
func setForeign(t *testing.T, ds []*results.Document, pct float64) {
	t.Helper()
	for _, d := range ds {
		o, err := compare.Observations(d)
		if err != nil || o == nil {
			t.Fatalf("observations: %v", err)
		}
		for i := range o.Series {
			if o.Series[i].Noise != nil {
				o.Series[i].Noise.Foreign = pct
			}
		}
		if d.Extra["observations"], err = json.Marshal(o); err != nil {
			t.Fatal(err)
		}
	}
}

func checkRealEffect(t *testing.T, c *compare.Comparison) {
	t.Helper()
	if !c.Noise.Starvation || !(c.Noise.ContentionRatio < 0.5) {
		t.Fatalf("noise: %+v", c.Noise)
	}
	for _, op := range []string{"post_order", "temp_churn"} {
		if r := c.Find(op, "p50_ms"); r == nil || r.Verdict != compare.Better || r.A/r.B <= c.Noise.Limit || r.A-r.B <= c.Noise.ExtraDelayMs {
			t.Fatalf("%s p50: %+v, want better beyond the limit %g and the extra delay %g ms", op, r, c.Noise.Limit, c.Noise.ExtraDelayMs)
		}
	}
	for _, r := range c.Rows {
		if r.Verdict.Decided() && c.Noise.Explains(&r) || r.Verdict == compare.Starved && !c.Noise.Explains(&r) {
			t.Errorf("%s %s: %s with B/A %g, limit %g, extra delay %g ms", r.Subject, r.Metric, r.Verdict, r.B/r.A, c.Noise.Limit, c.Noise.ExtraDelayMs)
		}
	}
	if c.Count(compare.Starved) == 0 {
		t.Fatalf("nothing withheld: %s", c.Summary())
	}
}

// A run against itself: every effect is exactly 0 and nothing is decided.
func TestSameRunNothingDecided(t *testing.T) {
	c := compareFiles(t, compare.Options{}, []string{"aa-quiet.json"}, []string{"aa-quiet.json"})
	for _, r := range c.Rows {
		if r.Verdict.Decided() || !math.IsNaN(r.Delta) && r.Delta != 0 {
			t.Errorf("%s %s: %s, delta %g", r.Subject, r.Metric, r.Verdict, r.Delta)
		}
	}
	if c.Noise.Differed || c.Noise.ForeignCPU.Delta != 0 || c.Noise.ContentionRatio != 0 && c.Noise.ContentionRatio != 1 {
		t.Fatalf("noise of a run against itself: %+v", c.Noise)
	}
}

// Rounds: each row's A and B are the means of per-round values and the
// test is Welch's t over them. The per-round p50 of post_order is
// recomputed here from the rounds' interval histograms (HdrHistogram
// merge of the scored intervals), and the row's p-value from those values.
func TestRoundsAreTheUnit(t *testing.T) {
	as := []string{"r-base-1.json", "r-base-2.json", "r-base-3.json"}
	bs := []string{"r-slow-1.json", "r-slow-2.json", "r-slow-3.json"}
	c := compareFiles(t, compare.Options{}, as, bs)
	if c.RoundsA != 3 || c.RoundsB != 3 || !strings.Contains(c.MethodNote(), "3 and 3 rounds") {
		t.Fatalf("rounds %d %d: %s", c.RoundsA, c.RoundsB, c.MethodNote())
	}
	if n := checkOneStatistic(t, c); n < 20 {
		t.Fatalf("only %d tested rows", n)
	}
	perRound := func(names []string) []float64 {
		var out []float64
		for _, d := range readDocs(t, names...) {
			var h *hdrhistogram.Histogram
			for i, iv := range d.Series {
				if iv.Warmup || i == len(d.Series)-1 && iv.T-d.Series[i-1].T < 0.9 {
					continue
				}
				o, ok := iv.Ops["post_order"]
				if !ok || o.Histogram == "" {
					continue
				}
				x, err := hdrhistogram.Decode([]byte(o.Histogram))
				if err != nil {
					t.Fatal(err)
				}
				if h == nil {
					h = x
				} else {
					h.Merge(x)
				}
			}
			out = append(out, float64(h.ValueAtQuantile(50))/1000)
		}
		return out
	}
	xa, xb := perRound(as), perRound(bs)
	r := c.Find("post_order", "p50_ms")
	want := compare.WelchDiff(xa, xb, 0.95)
	mean := func(x []float64) float64 { return (x[0] + x[1] + x[2]) / 3 }
	if r == nil || r.Method != compare.MethodRounds || math.Abs(r.A-mean(xa)) > 1e-9 || math.Abs(r.B-mean(xb)) > 1e-9 ||
		math.Abs(r.P-want.P) > 1e-12 || math.Abs(r.Lo-want.Lo) > 1e-9 {
		t.Fatalf("post_order p50 %+v; per round %v %v, welch %+v", r, xa, xb, want)
	}
	// The slow rounds are all slower (+75 ms on average), but three noisy
	// rounds a side cannot pass Holm over all rows: no verdict, where a
	// test over per-interval samples would have been sure.
	if r.Delta < 20 || r.Verdict != compare.NoDifference {
		t.Fatalf("post_order p50: %+v", r)
	}
}

// Near-zero figures: iowait 0.00 -> 0.14 % with a tight interval is not
// "worse", because the interval does not clear the metric's floor.
func TestMinimumEffectFloor(t *testing.T) {
	c := &compare.Comparison{RoundsA: 3, RoundsB: 3, Rows: []compare.Row{
		{Subject: "host CPU", Metric: "system_pct", A: 0, B: 0.14, Lo: 0.1, Hi: 0.18, P: 1e-6, MinDelta: 1, Direction: compare.LowerBetter},
		{Subject: "x", Metric: "p50_ms", A: 10, B: 20, Lo: 8, Hi: 12, P: 1e-6, MinDelta: 1, Direction: compare.LowerBetter},
		{Subject: "y", Metric: "p50_ms", A: 100, B: 104, Lo: 2, Hi: 6, P: 1e-6, MinDelta: 1, Direction: compare.LowerBetter},
	}}
	compare.Decide(c, compare.Options{})
	if v := c.Rows[0].Verdict; v != compare.NoDifference {
		t.Errorf("0.00 -> 0.14 %%: %s", v)
	}
	if v := c.Rows[1].Verdict; v != compare.Worse {
		t.Errorf("10 -> 20 ms: %s", v)
	}
	// 4 % with an interval [2, 6] ms does not clear 5 % of 100 ms.
	if v, m := c.Rows[2].Verdict, c.Rows[2].MinDelta; v != compare.NoDifference || m != 5 {
		t.Errorf("100 -> 104 ms: %s (min delta %g)", v, m)
	}
}

// Warnings name a different workload, scale or duration.
func TestWarnings(t *testing.T) {
	d := readDocs(t, "base.json", "base-slow.json")
	other := *d[1]
	other.Workload = "erp"
	other.Parameters = []byte(strings.Replace(string(d[1].Parameters), `"scale":`, `"scale":7,"old_scale":`, 1))
	c, err := compare.Compare("a", d[0], "b", &other, compare.Options{})
	if err != nil {
		t.Fatal(err)
	}
	got := strings.Join(c.Warnings, "; ")
	if !strings.Contains(got, "workloads differ: smoke and erp") || !strings.Contains(got, "scales differ") {
		t.Fatalf("warnings: %q", got)
	}
	if c2, _ := compare.Compare("a", d[0], "b", d[1], compare.Options{}); len(c2.Warnings) != 0 {
		t.Fatalf("warnings for like runs: %v", c2.Warnings)
	}
}

// Two erp runs on the same installed data set (scale 0.02) compare
// without a scale warning though the second asked for --scale 0.01: the
// data's scale (workload_details.data_scale) is what counts; a run on
// another data set (scale 0.2) is still warned about, with the data's
// scales.
func TestWarningsUseTheDataScale(t *testing.T) {
	d := readDocs(t, "scale-erp/data02.json", "scale-erp/asked01.json", "aa-erp/baseline-1.json")
	c, err := compare.Compare("data02", d[0], "asked01", d[1], compare.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Warnings) != 0 {
		t.Errorf("same data set: warnings %q", c.Warnings)
	}
	c, err = compare.Compare("asked01", d[1], "aa", d[2], compare.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(c.Warnings, "; "); !strings.Contains(got, "scales differ: 0.02 and 0.2") {
		t.Errorf("other data set: warnings %q, want scales differ: 0.02 and 0.2", got)
	}
}

// Welch's interval and p-value are one statistic: at level 1-p the
// interval just touches 0 (Wikipedia's first example, p = 0.021).
func TestWelchIntervalMatchesP(t *testing.T) {
	a1 := []float64{27.5, 21.0, 19.0, 23.6, 17.0, 17.9, 16.9, 20.1, 21.9, 22.6, 23.1, 19.6, 19.0, 21.7, 21.4}
	a2 := []float64{27.1, 22.0, 20.8, 23.4, 23.4, 23.5, 25.8, 22.0, 24.8, 20.2, 21.9, 22.1, 22.9, 20.5, 24.4}
	e := compare.WelchDiff(a1, a2, 0.95)
	if math.Abs(e.P-0.021) > 0.001 || !(e.Lo > 0) {
		t.Fatalf("%+v", e)
	}
	if at := compare.WelchDiff(a1, a2, 1-e.P); math.Abs(at.Lo) > 1e-9 {
		t.Fatalf("at level 1-p the interval is [%g, %g], want its low end at 0", at.Lo, at.Hi)
	}
}

// Block length: white noise needs short blocks (n^(1/3)), a slowly
// drifting series (AR(1), φ = 0.95) long ones.
func TestBlockLength(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	white := make([]float64, 216)
	ar := make([]float64, 216)
	for i := range white {
		white[i] = rng.NormFloat64()
		if i > 0 {
			ar[i] = 0.95*ar[i-1] + rng.NormFloat64()
		}
	}
	if b := compare.BlockLength(white); b != 6 {
		t.Errorf("white noise of 216: block %d, want 6 (216^(1/3))", b)
	}
	if b := compare.BlockLength(ar); b < 12 || b > 72 {
		t.Errorf("AR(1) 0.95: block %d, want 12..72", b)
	}
}

// Constant per-round values (the same small count every round) are weak
// evidence: no interval, the permutation p-value of complete separation
// (2/C(6,3) = 0.1 for 3 against 3), never a verdict.
func TestConstantRounds(t *testing.T) {
	e := compare.WelchDiff([]float64{0.625, 0.625, 0.625}, []float64{0.5, 0.5, 0.5}, 0.95)
	if math.Abs(e.P-0.1) > 1e-12 || !math.IsNaN(e.Lo) || e.Delta != -0.125 {
		t.Fatalf("%+v", e)
	}
	if e := compare.WelchDiff([]float64{1, 1}, []float64{1, 1}, 0.95); !math.IsNaN(e.P) {
		t.Fatalf("equal constants: %+v", e)
	}
}

// TestExactRankSum checks the exact rank-sum p-values against counts by
// hand: completely separated samples give 2/C(n+m, n); one swap of 4
// against 4 (rank sum 11 of the mean 18) is 4 of the 70 splits
// (SciPy mannwhitneyu(method="exact") gives 0.0571 for U = 1); ties
// keep mid-ranks; all tied or one side empty is 1.
func TestExactRankSum(t *testing.T) {
	for _, c := range []struct {
		a, b []float64
		want float64
	}{
		{[]float64{1, 2, 3}, []float64{4, 5, 6}, 0.1},
		{[]float64{23, 23, 24, 22}, []float64{31, 30, 31, 29}, 2.0 / 70},
		{[]float64{1, 2, 3, 5}, []float64{4, 6, 7, 8}, 4.0 / 70},
		{[]float64{5}, []float64{9}, 1},
		{[]float64{7, 7, 7}, []float64{7, 7, 7}, 1},
		{nil, []float64{1}, 1},
		// ties across the groups: mid-ranks 1, 2.5, 2.5, 4; 4 of the 6 splits as far from 5
		{[]float64{1, 2}, []float64{2, 3}, 4.0 / 6},
	} {
		if got := compare.ExactRankSum(c.a, c.b); math.Abs(got-c.want) > 1e-12 {
			t.Errorf("ExactRankSum(%v, %v) = %g, want %g", c.a, c.b, got, c.want)
		}
	}
}

// MedianCI's order statistics and coverages, computed by hand from the
// binomial distribution: 10 values at 0.95 -> [x(2), x(9)], coverage
// 1 - 2·11/1024 = 0.97852; 6 values -> [x(1), x(6)], 1 - 2/64 = 0.96875;
// 5 values have none (1 - 2/32 = 0.9375 < 0.95); 20 values ->
// [x(6), x(15)], 1 - 2·P(Bin(20, 1/2) <= 5) = 1 - 2·21700/1048576 = 0.95861.
func TestMedianCI(t *testing.T) {
	seq := func(n int) []float64 {
		v := make([]float64, n)
		for i := range v {
			v[i] = float64(n - i) // descending: MedianCI sorts a copy
		}
		return v
	}
	for _, c := range []struct {
		n              int
		med, lo, hi, c float64
	}{
		{10, 5.5, 2, 9, 1 - 2*11.0/1024},
		{6, 3.5, 1, 6, 1 - 2/64.0},
		{20, 10.5, 6, 15, 1 - 2*21700.0/1048576},
	} {
		x := seq(c.n)
		med, lo, hi, cov := compare.MedianCI(x, 0.95)
		if med != c.med || lo != c.lo || hi != c.hi || math.Abs(cov-c.c) > 1e-12 {
			t.Errorf("n %d: median %v [%v, %v] coverage %v; want %v [%v, %v] %v", c.n, med, lo, hi, cov, c.med, c.lo, c.hi, c.c)
		}
		if x[0] != float64(c.n) {
			t.Errorf("n %d: x was sorted in place", c.n)
		}
	}
	if med, lo, hi, cov := compare.MedianCI(seq(5), 0.95); med != 3 || !math.IsNaN(lo) || !math.IsNaN(hi) || cov != 0 {
		t.Errorf("n 5: %v [%v, %v] %v; want 3 and no interval", med, lo, hi, cov)
	}
	if med, _, _, _ := compare.MedianCI(nil, 0.95); !math.IsNaN(med) {
		t.Errorf("empty: median %v", med)
	}
}
