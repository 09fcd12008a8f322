package disk

import (
	"fmt"
	"sort"
	"strconv"
)

// Format names the JSON document of erplab disk (docs/disk-format.md).
const Format = "erplab-disk/1"

// Comparison is the outcome of erplab disk: the measurements, the
// per-figure rankings and the overall macro ranking. It is the JSON
// document erplab-disk/1.
type Comparison struct {
	Format  string `json:"format"`
	Repeats int    `json:"repeats"`
	Rule    Rule   `json:"rule"`
	// WALOnPath is true when each path's macro server had its WAL on
	// that path (PutWALOn).
	WALOnPath bool          `json:"wal_on_path"`
	Micro     []PathResult  `json:"micro,omitempty"`
	Macro     []MacroResult `json:"macro,omitempty"`
	// MicroRanking has one Ranking per pattern (Patterns order), of
	// ops/s; MacroRanking one per operation (MacroOps order), of time.
	MicroRanking []Ranking `json:"micro_ranking,omitempty"`
	MacroRanking []Ranking `json:"macro_ranking,omitempty"`
	// MacroOverall orders the paths by the sum of their ranks over the
	// key operations (the data load not counted).
	MacroOverall []Overall `json:"macro_overall,omitempty"`
}

// Overall is one path's place by the sum of its macro ranks.
type Overall struct {
	Path string `json:"path"`
	// Score is the sum of the path's ranks over the key operations.
	Score int `json:"score"`
	// Rank is 1 + the number of paths with a smaller score.
	Rank int  `json:"rank"`
	Tied bool `json:"tied"`
}

// NewComparison ranks micro and macro results of the same paths under
// rule. Like Rank it does not depend on the order of the paths. Errors
// come from Rank (duplicate paths, too many repeats, a bad rule).
func NewComparison(micro []PathResult, macro []MacroResult, repeats int, rule Rule, walOnPath bool) (Comparison, error) {
	c := Comparison{Format: Format, Repeats: repeats, Rule: rule, WALOnPath: walOnPath, Micro: micro, Macro: macro}
	if len(micro) > 0 {
		for _, p := range Patterns() {
			r, err := RankMicro(micro, p, rule)
			if err != nil {
				return Comparison{}, err
			}
			if len(r.Places) > 0 {
				c.MicroRanking = append(c.MicroRanking, r)
			}
		}
	}
	if len(macro) == 0 {
		return c, nil
	}
	score := map[string]int{}
	for _, op := range MacroOps() {
		r, err := RankMacro(macro, op, rule)
		if err != nil {
			return Comparison{}, err
		}
		if len(r.Places) == 0 {
			continue
		}
		c.MacroRanking = append(c.MacroRanking, r)
		if op == MacroInit {
			continue
		}
		for _, pl := range r.Places {
			score[pl.Path] += pl.Rank
		}
	}
	for _, m := range macro {
		c.MacroOverall = append(c.MacroOverall, Overall{Path: m.Path, Score: score[m.Path]})
	}
	for i := range c.MacroOverall {
		o := &c.MacroOverall[i]
		o.Rank = 1
		for _, x := range c.MacroOverall {
			if x.Score < o.Score {
				o.Rank++
			}
			if x.Path != o.Path && x.Score == o.Score {
				o.Tied = true
			}
		}
	}
	sort.Slice(c.MacroOverall, func(i, j int) bool {
		a, b := c.MacroOverall[i], c.MacroOverall[j]
		if a.Score != b.Score {
			return a.Score < b.Score
		}
		return a.Path < b.Path
	})
	return c, nil
}

// MicroRankingOf returns the ranking of pattern, false when absent.
func (c Comparison) MicroRankingOf(pattern string) (Ranking, bool) {
	return find(c.MicroRanking, pattern)
}

// MacroRankingOf returns the ranking of op, false when absent.
func (c Comparison) MacroRankingOf(op string) (Ranking, bool) { return find(c.MacroRanking, op) }

func find(rs []Ranking, m string) (Ranking, bool) {
	for _, r := range rs {
		if r.Measure == m {
			return r, true
		}
	}
	return Ranking{}, false
}

// PathResultOf returns the micro result of path, false when absent.
func (c Comparison) PathResultOf(path string) (PathResult, bool) {
	for _, p := range c.Micro {
		if p.Path == path {
			return p, true
		}
	}
	return PathResult{}, false
}

// MacroResultOf returns the macro result of path, false when absent.
func (c Comparison) MacroResultOf(path string) (MacroResult, bool) {
	for _, m := range c.Macro {
		if m.Path == path {
			return m, true
		}
	}
	return MacroResult{}, false
}

// RankLabel is a place's rank as the tables print it: "2", or "1=" when
// another path shares the rank (tied).
func RankLabel(rank int, tied bool) string {
	s := strconv.Itoa(rank)
	if tied {
		s += "="
	}
	return s
}

// VersusNext describes how Places[i] compares with Places[i+1], as the
// tables print it: "x2.41 better, p 0.10" or "x1.03 tied, p 0.70" (the
// ratio of the medians, better over worse, and the test's p-value); ""
// for the last place.
func (r Ranking) VersusNext(i int) string {
	if i < 0 || i+1 >= len(r.Places) {
		return ""
	}
	a, b := r.Places[i].Path, r.Places[i+1].Path
	pr, ok := r.Pair(a, b)
	if !ok {
		return ""
	}
	x := pr.Ratio
	if pr.A != a {
		x = 1 / x
	}
	verdict := "tied"
	if pr.Winner != "" {
		verdict = "better"
	}
	return fmt.Sprintf("x%.2f %s, p %.2f", x, verdict, pr.P)
}

// RuleNote states rule and what n repeats per path can resolve under it,
// in one line, e.g. for 3 repeats: "tied unless ... p <= 0.10 ...; with
// 3 repeats only complete separation of the repeats can differ (p =
// 0.100) ...".
func RuleNote(rule Rule, n int) string {
	head := fmt.Sprintf("tied unless the exact Mann-Whitney test over the repeats gives p <= %.2f and the medians differ by >= %.0f %%; ",
		rule.Alpha, 100*rule.MinEffect)
	pmin := MannWhitneyP(steps(0, n), steps(n, n))
	// one repeat of each path on the wrong side of the other's
	p1 := MannWhitneyP(steps(0, n), append(steps(n-1, 1), steps(n+1, n-1)...))
	switch {
	case pmin > rule.Alpha:
		return head + fmt.Sprintf("with %d repeat(s) per path no difference can be shown (smallest p %.2f): use --repeat 3 or more", n, pmin)
	case n < 2 || p1 > rule.Alpha:
		return head + fmt.Sprintf("with %d repeats per path only complete separation of the repeats can differ (p = %.3f); overlapping ranges are ties (--repeat 5 resolves more)", n, pmin)
	}
	return head + fmt.Sprintf("with %d repeats per path the smallest p is %.3f, one overlapping repeat gives p = %.3f", n, pmin, p1)
}

// steps is n values from start up by 1.
func steps(start, n int) []float64 {
	out := make([]float64, n)
	for i := range out {
		out[i] = float64(start + i)
	}
	return out
}

// FormatSpread prints s as "median [min-max]", each value with verb (e.g.
// "%.1f"); the median alone for fewer than 2 repeats.
func FormatSpread(verb string, s Spread) string {
	if len(s.Values) < 2 {
		return fmt.Sprintf(verb, s.Median)
	}
	return fmt.Sprintf(verb+" ["+verb+"-"+verb+"]", s.Median, s.Min, s.Max)
}

// MacroCell is the table cell of op on path: "median [min-max] (rank)"
// in ms with 0.1 ms, "-" when op did not run there.
func (c Comparison) MacroCell(path, op string) string {
	m, ok := c.MacroResultOf(path)
	if !ok {
		return "-"
	}
	t, ok := m.Op(op)
	if !ok {
		return "-"
	}
	cell := FormatSpread("%.1f", t.Ms)
	if rk, ok := c.MacroRankingOf(op); ok {
		if pl, ok := rk.Place(path); ok {
			cell += " (" + RankLabel(pl.Rank, pl.Tied) + ")"
		}
	}
	return cell
}

// WALNote says where the macro servers' WAL was.
func (c Comparison) WALNote() string {
	if c.WALOnPath {
		return "WAL on each path (one throwaway server per path, pg_wal linked there)"
	}
	return "WAL stayed in the server's data directory, not on the paths (--wal-on-path puts it there)"
}
