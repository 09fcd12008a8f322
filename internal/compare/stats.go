package compare

import (
	"math"
	"math/rand/v2"
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
// of samples a and b (welchDiff's p).
func welch(a, b []float64) float64 {
	return welchDiff(a, b, 0.95).P
}

// estimate is one row's statistic: the difference Delta = B - A with its
// two-sided confidence interval [Lo, Hi] at the level asked and the
// two-sided p-value of Delta = 0, all from the same distribution.
type estimate struct {
	Delta, Lo, Hi, P float64
}

// welchDiff is the difference of the means of b and a with Welch's
// t-interval and two-sided p-value, Welch-Satterthwaite degrees of
// freedom. Source: B. L. Welch, "The generalization of 'Student's'
// problem when several different population variances are involved",
// Biometrika 34(1/2), 1947, 28-35; NIST/SEMATECH e-Handbook of
// Statistical Methods, §7.3.1 "Do two processes have the same mean?".
// When both variances are 0 there is no interval (Lo, Hi NaN) and P is
// NaN for equal means (nothing varies) and otherwise the p-value of an
// exact permutation test for completely separated samples, 2/C(na+nb, na)
// (0.1 for 3 against 3: constant per-round values, e.g. the same small
// count every round, are weak evidence). Each sample needs at least 2
// values (else everything is NaN).
func welchDiff(a, b []float64, level float64) estimate {
	if len(a) < 2 || len(b) < 2 {
		return estimate{nan, nan, nan, nan}
	}
	ma, va := stat.MeanVariance(a, nil)
	mb, vb := stat.MeanVariance(b, nil)
	na, nb := float64(len(a)), float64(len(b))
	sa, sb := va/na, vb/nb
	d := mb - ma
	if sa+sb == 0 {
		p := nan
		if d != 0 {
			p = SeparatedP(len(a), len(b))
		}
		return estimate{d, nan, nan, p}
	}
	se := math.Sqrt(sa + sb)
	df := (sa + sb) * (sa + sb) / (sa*sa/(na-1) + sb*sb/(nb-1))
	t := distuv.StudentsT{Mu: 0, Sigma: 1, Nu: df}
	q := t.Quantile(1 - (1-level)/2)
	return estimate{d, d - q*se, d + q*se, 2 * t.Survival(math.Abs(d)/se)}
}

// SeparatedP is the smallest two-sided p-value of an exact permutation
// (rank-sum) test of n against m values: 2/C(n+m, n), the share of the
// splits that put every value of one group above every value of the
// other (0.1 for 3 against 3, 0.029 for 4 against 4); at most 1.
func SeparatedP(n, m int) float64 { return min(1, 2/math.Exp(lchoose(n+m, n))) }

// lchoose is log C(n, k).
func lchoose(n, k int) float64 {
	a, _ := math.Lgamma(float64(n + 1))
	b, _ := math.Lgamma(float64(k + 1))
	c, _ := math.Lgamma(float64(n - k + 1))
	return a - b - c
}

// normalDiff is the estimate for a difference d with standard error se
// under a normal approximation (the bootstrap standard-error interval
// d ± z·se; B. Efron, R. J. Tibshirani, "An Introduction to the
// Bootstrap", 1993, §6 and §12.2). se 0 gives no interval and P NaN (no
// test: the resamples do not vary).
func normalDiff(d, se, level float64) estimate {
	if math.IsNaN(d) || math.IsNaN(se) {
		return estimate{d, nan, nan, nan}
	}
	if se == 0 {
		return estimate{d, nan, nan, nan}
	}
	z := distuv.UnitNormal.Quantile(1 - (1-level)/2)
	return estimate{d, d - z*se, d + z*se, 2 * distuv.UnitNormal.Survival(math.Abs(d)/se)}
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

// acf1Lag returns the first lag k >= 1 at which the sample
// autocorrelation of x falls below the white-noise band 2/√n (Box,
// Jenkins, Reinsel, "Time Series Analysis", §2.1.6), n when it never
// does; 1 for a constant or too short series.
func acfLag(x []float64) int {
	n := len(x)
	if n < 3 {
		return 1
	}
	m := stat.Mean(x, nil)
	var c0 float64
	for _, v := range x {
		c0 += (v - m) * (v - m)
	}
	if c0 == 0 {
		return 1
	}
	band := 2 / math.Sqrt(float64(n))
	for k := 1; k < n; k++ {
		var ck float64
		for i := k; i < n; i++ {
			ck += (x[i] - m) * (x[i-k] - m)
		}
		if ck/c0 < band {
			return k
		}
	}
	return n
}

// blockLength is the moving-block length for a series x of n points:
// max(⌈n^(1/3)⌉, the lag where the autocorrelation first falls inside
// the white-noise band), at most n/3 (at least three blocks) and at least
// 1. n^(1/3) is the order of the optimal block length for variances
// (P. Hall, J. L. Horowitz, B.-Y. Jing, "On blocking rules for the
// bootstrap with dependent data", Biometrika 82(3), 1995, 561-574); the
// autocorrelation term lengthens blocks for slowly drifting series (a
// neighbour's load), which is what makes per-interval samples of one run
// dependent.
func blockLength(x []float64) int {
	n := len(x)
	b := max(int(math.Ceil(math.Cbrt(float64(n)))), acfLag(x))
	return max(1, min(b, n/3))
}

// blockIndices draws one moving-block bootstrap resample of the indices
// 0..n-1: ⌈n/b⌉ blocks of b consecutive indices starting uniformly in
// [0, n-b], concatenated and cut to n (H. R. Künsch, "The jackknife and
// the bootstrap for general stationary observations", Ann. Statist.
// 17(3), 1989, 1217-1241). buf is reused when large enough.
func blockIndices(rng *rand.Rand, n, b int, buf []int) []int {
	out := buf[:0]
	if n == 0 {
		return out
	}
	b = max(1, min(b, n))
	for len(out) < n {
		s := rng.IntN(n - b + 1)
		for i := s; i < s+b && len(out) < n; i++ {
			out = append(out, i)
		}
	}
	return out
}

// MaxExactRankSum is the largest pooled sample ExactRankSum enumerates
// (C(20, 10) = 184756 splits); beyond it the normal approximation of
// the Mann-Whitney U test is used.
const MaxExactRankSum = 20

// ExactRankSum returns the two-sided p-value of the Wilcoxon rank-sum
// (Mann-Whitney) test of samples a and b computed exactly, by
// enumerating every split of the pooled values into groups of len(a)
// and len(b) (the permutation distribution under H0 of exchangeable
// values): p is the share of splits whose rank sum of the first group is
// at least as far from its mean as the observed one. Ties take mid-ranks,
// so the test stays exact with tied values (Hollander, Wolfe,
// "Nonparametric Statistical Methods", 2nd ed., §4.1, "ties"; the exact
// conditional distribution of SciPy's mannwhitneyu(method="exact") for
// untied data). With completely separated samples of n and m values p
// is 2/C(n+m, n): 0.1 for 3 against 3, 0.029 for 4 against 4. For a
// pooled sample above MaxExactRankSum it returns the normal
// approximation (mannWhitney). It returns 1 when a or b is empty or
// every value is tied.
func ExactRankSum(a, b []float64) float64 {
	n1, n := len(a), len(a)+len(b)
	if n1 == 0 || len(b) == 0 {
		return 1
	}
	if n > MaxExactRankSum {
		return mannWhitney(a, b)
	}
	pooled := append(append([]float64(nil), a...), b...)
	idx := make([]int, n)
	for i := range idx {
		idx[i] = i
	}
	sort.Slice(idx, func(i, j int) bool { return pooled[idx[i]] < pooled[idx[j]] })
	rank := make([]float64, n) // mid-ranks, by position in pooled
	for i := 0; i < n; {
		j := i
		for j < n && pooled[idx[j]] == pooled[idx[i]] {
			j++
		}
		for k := i; k < j; k++ {
			rank[idx[k]] = float64(i+j+1) / 2
		}
		i = j
	}
	var obs float64
	for i := 0; i < n1; i++ {
		obs += rank[i]
	}
	mean := float64(n1) * float64(n+1) / 2
	dev := math.Abs(obs-mean) - 1e-9
	var hits, total int
	// every n1-subset of the n positions
	var walk func(start, left int, sum float64)
	walk = func(start, left int, sum float64) {
		if left == 0 {
			total++
			if math.Abs(sum-mean) >= dev {
				hits++
			}
			return
		}
		for i := start; i <= n-left; i++ {
			walk(i+1, left-1, sum+rank[i])
		}
	}
	walk(0, n1, 0)
	if dev < 0 { // the observed sum is at the mean: every split is as extreme
		return 1
	}
	return float64(hits) / float64(total)
}

// MedianCI returns the median of x (the mean of the middle two for an
// even count) and the distribution-free confidence interval for the
// population median from the order statistics: [x(k), x(n+1-k)] with the
// largest k whose two-sided coverage 1 - 2·P(Bin(n, 1/2) < k) is at least
// level (the sign-test interval; Hollander, Wolfe, "Nonparametric
// Statistical Methods", 2nd ed., §3.6; Conover, "Practical Nonparametric
// Statistics", 3rd ed., §3.2). It needs only independent rounds, not a
// distribution: the right interval for a ratio of paired benchmark runs.
// coverage is the interval's exact coverage (0.979 for 10 values at
// level 0.95: [x(2), x(9)]). With fewer values than any interval at
// level needs (5 at 0.95: 1 - 2/32 = 0.9375), lo and hi are NaN and
// coverage 0. x is not modified; an empty x gives NaN everywhere.
func MedianCI(x []float64, level float64) (median, lo, hi, coverage float64) {
	n := len(x)
	if n == 0 {
		return math.NaN(), math.NaN(), math.NaN(), 0
	}
	v := append([]float64(nil), x...)
	sort.Float64s(v)
	if n%2 == 1 {
		median = v[n/2]
	} else {
		median = (v[n/2-1] + v[n/2]) / 2
	}
	lo, hi = math.NaN(), math.NaN()
	// tail = P(Bin(n, 1/2) <= k-1), grown one term at a time
	tail := 0.0
	for k := 1; k <= (n+1)/2; k++ {
		tail += math.Exp(lchoose(n, k-1) - float64(n)*math.Ln2)
		c := 1 - 2*tail
		if c < level-1e-12 {
			break
		}
		lo, hi, coverage = v[k-1], v[n-k], c
	}
	return median, lo, hi, coverage
}
