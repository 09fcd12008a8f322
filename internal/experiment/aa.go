package experiment

import (
	"context"
	"fmt"
	"io"
	"path/filepath"
	"time"

	"github.com/erplab/erplab/internal/compare"
)

// AAName names the second configuration of an A/A comparison: the
// baseline again, without remedies.
const AAName = "same"

// AAOutcome is what RunAA returns: N comparisons of the baseline against
// itself and how many of them called any row better, worse, higher or
// lower (false verdicts: nothing differs but chance and the machine).
type AAOutcome struct {
	Rounds      int
	Comparisons []*compare.Comparison
	// FalseComparisons counts the comparisons with at least one decided
	// row; FalseRows the decided rows and TestedRows the rows with a
	// p-value, over all comparisons; Inconclusive the comparisons whose
	// noise guard fired.
	FalseComparisons int
	FalseRows        int
	TestedRows       int
	Inconclusive     int
}

// Rate is the false-verdict rate: FalseComparisons / comparisons.
func (a *AAOutcome) Rate() float64 {
	if len(a.Comparisons) == 0 {
		return 0
	}
	return float64(a.FalseComparisons) / float64(len(a.Comparisons))
}

// Line is the one-line account, e.g. "A/A: 1 of 20 comparisons (5.0 %)
// showed a better/worse row; 1 of 700 tested rows; 3 inconclusive
// (foreign load differed); 3 rounds each".
func (a *AAOutcome) Line() string {
	return fmt.Sprintf("A/A: %d of %d comparisons (%.1f %%) showed a better/worse row; %d of %d tested rows; %d with foreign load differing; %d rounds per side",
		a.FalseComparisons, len(a.Comparisons), 100*a.Rate(), a.FalseRows, a.TestedRows, a.Inconclusive, a.Rounds)
}

// RunAA runs n A/A comparisons: each is an experiment of the baseline
// (cfg.Flags, no remedies) against the same configuration (AAName) with
// cfg's rounds, order and budget (cfg.Budget is shared out over the n
// comparisons), in OutDir/aa-NN. cfg.Variants is ignored. It stops at the
// first failing experiment and returns what ran so far.
func RunAA(ctx context.Context, cfg Config, n int, out io.Writer) (*AAOutcome, error) {
	if n < 1 {
		return nil, fmt.Errorf("experiment: A/A needs at least one comparison, got %d", n)
	}
	if cfg.Rounds <= 0 && cfg.Budget > 0 {
		cfg.Rounds = RoundsFor(cfg.Budget/time.Duration(n), 2, cfg.Load)
	}
	aa := &AAOutcome{}
	dir := cfg.OutDir
	for i := 1; i <= n; i++ {
		c := cfg
		c.Variants = []Variant{{Name: AAName}}
		c.OutDir = filepath.Join(dir, fmt.Sprintf("aa-%02d", i))
		fmt.Fprintf(out, "\n##### A/A comparison %d of %d (%s)\n", i, n, c.OutDir)
		oc, err := Run(ctx, c, out)
		if err != nil {
			return aa, fmt.Errorf("A/A %d: %w", i, err)
		}
		aa.Rounds = oc.Rounds
		cp := oc.Comparisons[0]
		aa.Comparisons = append(aa.Comparisons, cp)
		if d := cp.Decided(); d > 0 {
			aa.FalseComparisons++
			aa.FalseRows += d
		}
		if cp.Noise.Differed {
			aa.Inconclusive++
		}
		for _, r := range cp.Rows {
			if r.Method != "" {
				aa.TestedRows++
			}
		}
		fmt.Fprintf(out, "A/A %d: %s; %s\n", i, cp.Summary(), cp.Noise.Line())
	}
	return aa, nil
}
