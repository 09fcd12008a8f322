package sampler

import "sort"

// OpWaitTotals sums the series' OpWaits: operation name -> wait event key
// -> backend samples (one active backend seen in that wait at one tick),
// a coarse sample of a thinned series counted Weight times. Nil when no
// point has any (observations without an op map, or older results).
func (o *Observations) OpWaitTotals() map[string]map[string]int {
	var out map[string]map[string]int
	for _, p := range o.Series {
		for op, waits := range p.OpWaits {
			if out == nil {
				out = map[string]map[string]int{}
			}
			if out[op] == nil {
				out[op] = map[string]int{}
			}
			for w, n := range waits {
				out[op][w] += n * int(p.Weight())
			}
		}
	}
	return out
}

// WaitShare is one wait event's share of an operation's backend samples.
type WaitShare struct {
	Wait    string
	Samples int
	Pct     float64
}

// TopWaits returns the n waits with the most samples in waits (all when n
// <= 0), by count descending then name, with their share of the total in
// %, and the total.
func TopWaits(waits map[string]int, n int) ([]WaitShare, int) {
	total := 0
	for _, c := range waits {
		total += c
	}
	keys := WaitKeys(waits)
	if n > 0 && len(keys) > n {
		keys = keys[:n]
	}
	out := make([]WaitShare, 0, len(keys))
	for _, k := range keys {
		out = append(out, WaitShare{Wait: k, Samples: waits[k], Pct: round2(100 * float64(waits[k]) / float64(max(total, 1)))})
	}
	return out, total
}

// OpNames returns the operations of totals by backend samples, most
// first, then name.
func OpNames(totals map[string]map[string]int) []string {
	sum := map[string]int{}
	names := make([]string, 0, len(totals))
	for op, w := range totals {
		names = append(names, op)
		for _, n := range w {
			sum[op] += n
		}
	}
	sort.Slice(names, func(i, j int) bool {
		if sum[names[i]] != sum[names[j]] {
			return sum[names[i]] > sum[names[j]]
		}
		return names[i] < names[j]
	})
	return names
}

// ChurnSummary is the mean and largest churn over a series' points that
// have churn figures (Points of them), after fromT seconds.
type ChurnSummary struct {
	Points                           int
	RelFilesMean, RelFilesMax        float64
	SInvalMean, SInvalMax            float64
	SInvalQueuesMean, SInvalQueueMax float64
	SInvalWaitPctMean                float64
}

// Churn summarises the series' churn from fromT seconds on; ok is false
// when no point has churn figures.
func (o *Observations) Churn(fromT float64) (c ChurnSummary, ok bool) {
	n := 0.0 // the points' weights (Sample.Weight)
	for _, p := range o.Series {
		if p.Churn == nil || p.T < fromT {
			continue
		}
		x, w := p.Churn, p.Weight()
		c.Points++
		n += w
		c.RelFilesMean += w * x.RelFilesPerS
		c.SInvalMean += w * x.SInvalPerS
		c.SInvalQueuesMean += w * x.SInvalQueuesPerS
		c.SInvalWaitPctMean += w * x.SInvalWaitPct
		c.RelFilesMax = max(c.RelFilesMax, x.RelFilesPerS)
		c.SInvalMax = max(c.SInvalMax, x.SInvalPerS)
		c.SInvalQueueMax = max(c.SInvalQueueMax, x.SInvalQueuesPerS)
	}
	if c.Points == 0 {
		return c, false
	}
	c.RelFilesMean, c.SInvalMean = round2(c.RelFilesMean/n), round2(c.SInvalMean/n)
	c.SInvalQueuesMean, c.SInvalWaitPctMean = round3(c.SInvalQueuesMean/n), round2(c.SInvalWaitPctMean/n)
	return c, true
}
