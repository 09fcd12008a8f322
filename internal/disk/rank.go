package disk

import (
	"fmt"
	"math"
	"slices"
	"sort"
)

// Spread summarises the repeats of one figure: the median and the range
// (min-max) of the values, which are kept in round order. The unit is the
// figure's (ops/s, ms).
type Spread struct {
	Median float64   `json:"median"`
	Min    float64   `json:"min"`
	Max    float64   `json:"max"`
	Values []float64 `json:"repeats"`
}

// NewSpread summarises vs (in round order); the zero Spread for none.
// The median of an even count is the mean of the two middle values.
func NewSpread(vs []float64) Spread {
	if len(vs) == 0 {
		return Spread{}
	}
	s := slices.Clone(vs)
	sort.Float64s(s)
	n := len(s)
	med := s[n/2]
	if n%2 == 0 {
		med = (s[n/2-1] + s[n/2]) / 2
	}
	return Spread{Median: med, Min: s[0], Max: s[n-1], Values: slices.Clone(vs)}
}

// Rule decides when two paths differ (package doc, "Ties and ranks").
type Rule struct {
	// Alpha is the largest two-sided p-value of the exact Mann-Whitney
	// test over the repeats that counts as a difference (0 < Alpha < 1).
	Alpha float64 `json:"alpha"`
	// MinEffect is the smallest relative difference of the medians that
	// counts (0.10: the faster median is at least 1.10 times better).
	MinEffect float64 `json:"min_effect"`
}

// DefaultRule is α = 0.10, minimum effect 10 %.
func DefaultRule() Rule { return Rule{Alpha: 0.10, MinEffect: 0.10} }

// Validate checks the bounds; errors are one line.
func (r Rule) Validate() error {
	if !(r.Alpha > 0 && r.Alpha < 1) {
		return fmt.Errorf("disk: alpha %g: want 0 < alpha < 1", r.Alpha)
	}
	if !(r.MinEffect >= 0 && r.MinEffect <= 10) {
		return fmt.Errorf("disk: minimum effect %g: want 0..10", r.MinEffect)
	}
	return nil
}

// Sample is the repeats of one figure on one path, for Rank.
type Sample struct {
	Path   string
	Values []float64
}

// Place is one path's place in a Ranking.
type Place struct {
	Path string `json:"path"`
	// Rank is 1 + the number of paths significantly better than this
	// one, so paths that no other path beats share rank 1.
	Rank int `json:"rank"`
	// Tied is true when another path has the same rank.
	Tied   bool   `json:"tied"`
	Spread Spread `json:"spread"`
}

// Pair is the test of two paths (A before B in path-name order).
type Pair struct {
	A string `json:"a"`
	B string `json:"b"`
	// Ratio is how many times better A's median is than B's (> 1: A is
	// better; for less-is-better figures B's median over A's).
	Ratio float64 `json:"ratio"`
	// P is the exact two-sided Mann-Whitney p-value of the repeats.
	P float64 `json:"p"`
	// Winner is the better path's name, "" when tied.
	Winner string `json:"winner,omitempty"`
}

// Ranking is the verdict on one figure (a pattern's ops/s or an
// operation's time) across the paths.
type Ranking struct {
	Measure string `json:"measure"`
	// HigherIsBetter is true for rates, false for times.
	HigherIsBetter bool `json:"higher_is_better"`
	// Places are ordered by rank, then by median (better first), then
	// by path name.
	Places []Place `json:"places"`
	// Pairs holds every pair of paths, ordered by A then B.
	Pairs []Pair `json:"pairs"`
}

// Place returns path's place, false when it is not ranked.
func (r Ranking) Place(path string) (Place, bool) {
	for _, p := range r.Places {
		if p.Path == path {
			return p, true
		}
	}
	return Place{}, false
}

// Pair returns the test of paths a and b in either order, false when
// there is none.
func (r Ranking) Pair(a, b string) (Pair, bool) {
	if a > b {
		a, b = b, a
	}
	for _, p := range r.Pairs {
		if p.A == a && p.B == b {
			return p, true
		}
	}
	return Pair{}, false
}

// MaxRepeats bounds the repeats per path the exact test enumerates
// (C(20,10) = 184,756 splits per pair).
const MaxRepeats = 10

// Rank ranks the samples of one figure under rule (package doc, "Ties
// and ranks"). The result depends only on the set of samples, never on
// their order: pairs and places are ordered by path name where nothing
// else decides. Samples without values are left out; path names must be
// unique and each sample must hold at most MaxRepeats values (error
// otherwise).
func Rank(measure string, higherIsBetter bool, samples []Sample, rule Rule) (Ranking, error) {
	if err := rule.Validate(); err != nil {
		return Ranking{}, err
	}
	var ss []Sample
	seen := map[string]bool{}
	for _, s := range samples {
		if seen[s.Path] {
			return Ranking{}, fmt.Errorf("disk: rank %s: path %s given twice", measure, s.Path)
		}
		seen[s.Path] = true
		if len(s.Values) > MaxRepeats {
			return Ranking{}, fmt.Errorf("disk: rank %s: %d repeats on %s, at most %d", measure, len(s.Values), s.Path, MaxRepeats)
		}
		if len(s.Values) > 0 {
			ss = append(ss, s)
		}
	}
	sort.Slice(ss, func(i, j int) bool { return ss[i].Path < ss[j].Path })
	out := Ranking{Measure: measure, HigherIsBetter: higherIsBetter}
	spreads := make([]Spread, len(ss))
	for i, s := range ss {
		spreads[i] = NewSpread(s.Values)
	}
	better := make([]int, len(ss)) // paths significantly better than i
	for i := range ss {
		for j := i + 1; j < len(ss); j++ {
			pr := Pair{A: ss[i].Path, B: ss[j].Path, P: MannWhitneyP(ss[i].Values, ss[j].Values)}
			a, b := spreads[i].Median, spreads[j].Median
			if !higherIsBetter {
				a, b = b, a
			}
			pr.Ratio = ratio(a, b)
			if pr.P <= rule.Alpha && math.Max(pr.Ratio, 1/pr.Ratio) >= 1+rule.MinEffect {
				if pr.Ratio > 1 {
					pr.Winner = pr.A
					better[j]++
				} else {
					pr.Winner = pr.B
					better[i]++
				}
			}
			out.Pairs = append(out.Pairs, pr)
		}
	}
	count := map[int]int{}
	for i, s := range ss {
		out.Places = append(out.Places, Place{Path: s.Path, Rank: 1 + better[i], Spread: spreads[i]})
		count[1+better[i]]++
	}
	for i := range out.Places {
		out.Places[i].Tied = count[out.Places[i].Rank] > 1
	}
	sort.SliceStable(out.Places, func(i, j int) bool {
		a, b := out.Places[i], out.Places[j]
		if a.Rank != b.Rank {
			return a.Rank < b.Rank
		}
		if a.Spread.Median != b.Spread.Median {
			return (a.Spread.Median > b.Spread.Median) == higherIsBetter
		}
		return a.Path < b.Path
	})
	return out, nil
}

// ratio is a/b, +Inf for b == 0 < a, 1 when both are 0.
func ratio(a, b float64) float64 {
	switch {
	case b != 0:
		return a / b
	case a == 0:
		return 1
	}
	return math.Inf(1)
}

// MannWhitneyP is the exact two-sided p-value of the Mann-Whitney
// (Wilcoxon rank-sum) test of x against y: the share of all
// C(len(x)+len(y), len(x)) splits of the pooled values into groups of
// those sizes whose U statistic lies at least as far from its mean
// len(x)·len(y)/2 as the observed one (ties count one half). It is 1
// when either group is empty. The enumeration costs
// C(n+m, n)·n·m steps: keep n+m at most 2·MaxRepeats.
func MannWhitneyP(x, y []float64) float64 {
	n, m := len(x), len(y)
	if n == 0 || m == 0 {
		return 1
	}
	pool := append(slices.Clone(x), y...)
	half := float64(n*m) / 2
	obs := math.Abs(uStat(x, y) - half)
	// Enumerate the index sets of size n by a bit mask walk (Gosper's
	// hack); n+m <= 20 fits easily.
	N := n + m
	var total, extreme int
	gx := make([]float64, 0, n)
	gy := make([]float64, 0, m)
	for mask := uint32(1)<<n - 1; mask < 1<<N; {
		gx, gy = gx[:0], gy[:0]
		for k := range N {
			if mask&(1<<k) != 0 {
				gx = append(gx, pool[k])
			} else {
				gy = append(gy, pool[k])
			}
		}
		total++
		if math.Abs(uStat(gx, gy)-half) >= obs-1e-9 {
			extreme++
		}
		c := mask & -mask
		r := mask + c
		mask = (((r ^ mask) >> 2) / c) | r
	}
	return float64(extreme) / float64(total)
}

// uStat is the Mann-Whitney U of x over y: pairs with x > y, ties 1/2.
func uStat(x, y []float64) float64 {
	var u float64
	for _, a := range x {
		for _, b := range y {
			switch {
			case a > b:
				u++
			case a == b:
				u += 0.5
			}
		}
	}
	return u
}

// Distinct returns an error naming a path given twice (after
// filepath.Clean), nil when all differ.
func Distinct(paths []string) error {
	_, err := canonical(paths)
	return err
}

// Order is the order in which round r (0-based) measures n paths given
// in canonical order: the indexes 0..n-1 rotated left by r, so over n
// rounds every path takes every position once and the drift of a shared
// machine falls on every path alike (for two paths: A B, B A, A B, ...).
func Order(n, r int) []int {
	out := make([]int, n)
	for i := range n {
		out[i] = (i + r) % n
	}
	return out
}
