package report

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"sort"

	"github.com/erplab/erplab/internal/compare"
	"github.com/erplab/erplab/internal/results"
)

// abVerdict is one variant's primary verdict against the baseline of an
// erplab ab experiment, as ab printed it.
type abVerdict struct {
	// Variant names the variant (with its directory when the runs come
	// from several experiments); Rounds is "3 and 3 rounds".
	Variant, Rounds string
	// Line is the primary verdict line and Rows the primary rows' lines
	// (compare.Comparison.VerdictLines, which ab prints); Note says why
	// there is none.
	Line string
	Rows []string
	Note string
}

// abVerdicts repeats the comparisons of erplab ab for the runs that carry
// extra.experiment with a recorded compare.Recipe: per directory, the
// baseline's rounds against each variant's, with the variant's recorded
// primary rows and verdict options, so the lines are those ab ended with
// for the same files (the computation is deterministic). Runs without a
// recipe (erplab run, an ab older than the recipe) give none. A variant
// whose comparison cannot be computed gets a Note.
func abVerdicts(runs []Run) []abVerdict {
	type round struct {
		n    int
		path string
		doc  *results.Document
	}
	type side struct {
		rounds []round
		recipe *compare.Recipe
	}
	// paths and docs are a side's files by round.
	files := func(s *side) (paths []string, docs []*results.Document) {
		sort.SliceStable(s.rounds, func(i, j int) bool { return s.rounds[i].n < s.rounds[j].n })
		for _, r := range s.rounds {
			paths, docs = append(paths, r.path), append(docs, r.doc)
		}
		return paths, docs
	}
	type group struct {
		order []string
		sides map[string]*side
	}
	groups := map[string]*group{}
	var dirs []string
	for _, r := range runs {
		var e struct {
			Variant string          `json:"variant"`
			Round   int             `json:"round"`
			Compare *compare.Recipe `json:"compare"`
		}
		raw, ok := r.Doc.Extra["experiment"]
		if !ok || json.Unmarshal(raw, &e) != nil || e.Variant == "" || e.Compare == nil {
			continue
		}
		dir := filepath.Dir(r.Path)
		g := groups[dir]
		if g == nil {
			g = &group{sides: map[string]*side{}}
			groups[dir] = g
			dirs = append(dirs, dir)
		}
		s := g.sides[e.Variant]
		if s == nil {
			s = &side{recipe: e.Compare}
			g.sides[e.Variant] = s
			g.order = append(g.order, e.Variant)
		}
		s.rounds = append(s.rounds, round{e.Round, r.Path, r.Doc})
	}
	var out []abVerdict
	for _, dir := range dirs {
		g := groups[dir]
		base := g.sides[baselineName]
		for _, name := range g.order {
			if name == baselineName {
				continue
			}
			v := abVerdict{Variant: name}
			if len(dirs) > 1 {
				v.Variant = dir + ": " + name
			}
			s := g.sides[name]
			if base == nil {
				v.Note = "no baseline run of this experiment among the files given"
				out = append(out, v)
				continue
			}
			pa, da := files(base)
			pb, db := files(s)
			v.Rounds = fmt.Sprintf("%d and %d rounds", len(da), len(db))
			opts, err := s.recipe.Options()
			var c *compare.Comparison
			if err == nil {
				c, err = compare.CompareRounds(pa, da, pb, db, opts)
			}
			switch {
			case err != nil:
				v.Note = err.Error()
			case c.Primary == nil:
				v.Note = "no primary rows recorded"
			default:
				lines := c.VerdictLines()
				v.Line, v.Rows = lines[0], lines[1:]
			}
			out = append(out, v)
		}
	}
	return out
}

// baselineName is the baseline's variant name in extra.experiment
// (experiment.BaselineName; report does not import the runner).
const baselineName = "baseline"
