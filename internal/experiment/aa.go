package experiment

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/erplab/erplab/internal/compare"
	"github.com/erplab/erplab/internal/loadtest"
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
	// FalsePrimary counts the comparisons whose primary verdict
	// (compare.Comparison.Primary) was better, worse, higher, lower or
	// mixed: the false-verdict rate the nominal alpha bounds.
	FalsePrimary int
}

// PrimaryRate is the false primary-verdict rate FalsePrimary /
// comparisons with its 95 % Clopper-Pearson interval.
func (a *AAOutcome) PrimaryRate() (rate, lo, hi float64) {
	n := len(a.Comparisons)
	lo, hi = compare.BinomialCI(a.FalsePrimary, n, 0.95)
	if n == 0 {
		return 0, lo, hi
	}
	return float64(a.FalsePrimary) / float64(n), lo, hi
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
// (starvation differed); 3 rounds each".
func (a *AAOutcome) Line() string {
	r, lo, hi := a.PrimaryRate()
	return fmt.Sprintf("A/A: primary verdict false in %d of %d comparisons (%.1f %%, 95 %% CI [%.1f, %.1f] %%; nominal %g %%); "+
		"any row of either family: %d of %d comparisons (%.1f %%), %d of %d tested rows; %d with rows withheld (starvation differed); %d rounds per side",
		a.FalsePrimary, len(a.Comparisons), 100*r, 100*lo, 100*hi, 100*a.alpha(),
		a.FalseComparisons, len(a.Comparisons), 100*a.Rate(), a.FalseRows, a.TestedRows, a.Inconclusive, a.Rounds)
}

func (a *AAOutcome) alpha() float64 {
	if len(a.Comparisons) == 0 {
		return compare.DefaultAlpha
	}
	return a.Comparisons[0].Alpha
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
		cfg.Rounds = RoundsFor(cfg.Budget/time.Duration(n), 2, cfg.Load, cfg.Age)
	}
	aa := &AAOutcome{}
	parent := cfg.OutRoot
	if parent == nil {
		d, err := loadtest.ResultsDir(cfg.OutDir)
		if err != nil {
			return aa, fmt.Errorf("experiment: %w", err)
		}
		defer d.Close()
		parent = d
	}
	for i := 1; i <= n; i++ {
		c := cfg
		c.Variants = []Variant{{Name: AAName, Primary: cfg.AAPrimary}}
		// made here through the directory held open, a directory of this
		// user and no link: Run writes through it
		sub, err := parent.Dir(fmt.Sprintf("aa-%02d", i), 0o755)
		if err != nil {
			return aa, fmt.Errorf("experiment: results directory: %w", err)
		}
		c.OutRoot, c.OutDir = sub, sub.Path()
		fmt.Fprintf(out, "\n##### A/A comparison %d of %d (%s)\n", i, n, c.OutDir)
		oc, err := Run(ctx, c, out)
		sub.Close()
		if err != nil {
			return aa, fmt.Errorf("A/A %d: %w", i, err)
		}
		aa.Rounds = oc.Rounds
		cp := oc.Comparisons[0]
		aa.add(cp)
		fmt.Fprintf(out, "A/A %d: %s; %s\n", i, cp.Summary(), cp.Noise.Line())
	}
	return aa, nil
}

// add counts A/A comparison cp: its decided rows, the noise guard, a
// false primary verdict and its tested rows (compare.Row.Tested, the rows
// Holm counts).
func (a *AAOutcome) add(cp *compare.Comparison) {
	a.Comparisons = append(a.Comparisons, cp)
	if d := cp.Decided(); d > 0 {
		a.FalseComparisons++
		a.FalseRows += d
	}
	if cp.Noise.Differed {
		a.Inconclusive++
	}
	if cp.Primary != nil && (cp.Primary.Verdict.Decided() || cp.Primary.Verdict == compare.Mixed) {
		a.FalsePrimary++
	}
	for _, r := range cp.Rows {
		if r.Tested() {
			a.TestedRows++
		}
	}
}
