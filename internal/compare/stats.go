package compare

import (
	"math"
	"sort"

	"gonum.org/v1/gonum/stat"
	"gonum.org/v1/gonum/stat/distuv"
)

// mannWhitney returns the two-sided p-value of the Mann-Whitney U test
// (Wilcoxon rank-sum) of samples a and b, with the normal approximation,
// the tie correction of the variance and a continuity correction of 0.5.
// Source: H. B. Mann, D. R. Whitney, "On a test of whether one of two
// random variables is stochastically larger than the other", Ann. Math.
// Statist. 18(1), 1947, 50-60; the tie-corrected variance
// n1·n2/12·((n+1) - Σ(t³-t)/(n(n-1))) is the one of SciPy's
// scipy.stats.mannwhitneyu (method="asymptotic") and of M. Hollander,
// D. A. Wolfe, "Nonparametric Statistical Methods", 2nd ed., §4.1.
// It returns p = 1 when every value is tied.
func mannWhitney(a, b []float64) float64 {
	n1, n2 := float64(len(a)), float64(len(b))
	type v struct {
		x     float64
		first bool
	}
	all := make([]v, 0, len(a)+len(b))
	for _, x := range a {
		all = append(all, v{x, true})
	}
	for _, x := range b {
		all = append(all, v{x, false})
	}
	sort.Slice(all, func(i, j int) bool { return all[i].x < all[j].x })
	var r1, tieSum float64
	for i := 0; i < len(all); {
		j := i
		for j < len(all) && all[j].x == all[i].x {
			j++
		}
		rank := float64(i+j+1) / 2 // mean of ranks i+1..j
		t := float64(j - i)
		tieSum += t*t*t - t
		for k := i; k < j; k++ {
			if all[k].first {
				r1 += rank
			}
		}
		i = j
	}
	n := n1 + n2
	u1 := r1 - n1*(n1+1)/2
	mu := n1 * n2 / 2
	sigma2 := n1 * n2 / 12 * ((n + 1) - tieSum/(n*(n-1)))
	if sigma2 <= 0 {
		return 1
	}
	z := (math.Abs(u1-mu) - 0.5) / math.Sqrt(sigma2)
	if z < 0 {
		z = 0
	}
	return 2 * distuv.UnitNormal.Survival(z)
}

// welch returns the two-sided p-value of Welch's unequal-variances t-test
// of samples a and b, with the Welch-Satterthwaite degrees of freedom.
// Source: B. L. Welch, "The generalization of 'Student's' problem when
// several different population variances are involved", Biometrika
// 34(1/2), 1947, 28-35; NIST/SEMATECH e-Handbook of Statistical Methods,
// §7.3.1 "Do two processes have the same mean?". When both variances are
// 0 it returns NaN (no test: nothing varies) for equal means and 0
// otherwise.
func welch(a, b []float64) float64 {
	ma, va := stat.MeanVariance(a, nil)
	mb, vb := stat.MeanVariance(b, nil)
	na, nb := float64(len(a)), float64(len(b))
	sa, sb := va/na, vb/nb
	if sa+sb == 0 {
		if ma == mb {
			return math.NaN()
		}
		return 0
	}
	t := (ma - mb) / math.Sqrt(sa+sb)
	df := (sa + sb) * (sa + sb) / (sa*sa/(na-1) + sb*sb/(nb-1))
	d := distuv.StudentsT{Mu: 0, Sigma: 1, Nu: df}
	return 2 * d.Survival(math.Abs(t))
}

// zTest returns the two-sided p-value of a large-sample (Wald) z-test
// of two means given their variances of the mean (σ²/n each): the
// unpooled two-proportion z-test when the means are proportions (NIST/
// SEMATECH e-Handbook §7.3.3 "How can we determine whether two processes
// produce the same proportion of defectives?"; A. Agresti, "Categorical
// Data Analysis", 3rd ed., §1.4). When both variances are 0 it returns 1
// NaN (no test) for equal means and 0 otherwise.
func zTest(ma, vma, mb, vmb float64) float64 {
	if vma+vmb == 0 {
		if ma == mb {
			return math.NaN()
		}
		return 0
	}
	z := (ma - mb) / math.Sqrt(vma+vmb)
	return 2 * distuv.UnitNormal.Survival(math.Abs(z))
}

// holm marks which of the p-values are significant at family-wise error
// rate alpha with Holm's step-down procedure: sort ascending, reject
// p_(j) while p_(j) <= alpha/(m-j) (j from 0), stop at the first that is
// not. Source: S. Holm, "A simple sequentially rejective multiple test
// procedure", Scand. J. Statist. 6(2), 1979, 65-70. NaN p-values are not
// tests and are never significant.
func holm(ps []float64, alpha float64) []bool {
	idx := make([]int, 0, len(ps))
	for i, p := range ps {
		if !math.IsNaN(p) {
			idx = append(idx, i)
		}
	}
	sort.SliceStable(idx, func(i, j int) bool { return ps[idx[i]] < ps[idx[j]] })
	sig := make([]bool, len(ps))
	m := len(idx)
	for j, i := range idx {
		if ps[i] > alpha/float64(m-j) {
			break
		}
		sig[i] = true
	}
	return sig
}
