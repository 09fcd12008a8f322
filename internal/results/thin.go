package results

import (
	"fmt"
)

// Fold merges consecutive intervals of a series, the one before them
// ending at fromT (seconds since the start; 0 for the first), into one
// coarse point: a thinned series (docs/results-format.md, "Thinned
// series"). Its T is the last interval's, SpanS the seconds it covers
// (T - fromT), the mark of a coarse point. Counts, errors by SQLSTATE,
// skipped, late, retries, cut-short and APDEX zones are summed and the
// per-operation histograms merged (HdrHistogram merges exactly), so the
// point's percentiles are those of its span; P50..Max are recomputed from
// the merged histogram. The gauges (VUs, pool waiters, in flight,
// backlog) are the last interval's, their maxima the span's maxima;
// Warmup is set only when every interval is in the warm-up. An
// undecodable histogram is an error naming the interval; ivs must not be
// empty.
func Fold(fromT float64, ivs []Interval) (Interval, error) {
	if len(ivs) == 0 {
		return Interval{}, fmt.Errorf("fold: no interval")
	}
	last := ivs[len(ivs)-1]
	out := Interval{
		T: last.T, SpanS: last.T - fromT, Warmup: true,
		VUs: last.VUs, PoolWaiters: last.PoolWaiters, InFlight: last.InFlight, Backlog: last.Backlog,
		Ops: map[string]OpInterval{},
	}
	hists := map[string]*histMerger{}
	for _, iv := range ivs {
		out.Warmup = out.Warmup && iv.Warmup
		out.PoolWaitersMax = max(out.PoolWaitersMax, iv.PoolWaitersMax)
		out.BacklogMax = max(out.BacklogMax, iv.BacklogMax)
		out.Count += iv.Count
		out.Errors += iv.Errors
		out.Skipped += iv.Skipped
		out.Late += iv.Late
		for name, oi := range iv.Ops {
			acc := out.Ops[name]
			addOpInterval(&acc, oi)
			out.Ops[name] = acc
			if hists[name] == nil {
				hists[name] = &histMerger{}
			}
			if err := hists[name].add(oi.Histogram, fmt.Sprintf("fold: interval t=%g: ops[%q].histogram_us", iv.T, name)); err != nil {
				return Interval{}, err
			}
		}
	}
	for name, m := range hists {
		acc := out.Ops[name]
		l := m.summary()
		acc.P50, acc.P95, acc.P99, acc.Max = l.P50, l.P95, l.P99, l.Max
		acc.Histogram = m.encoded()
		out.Ops[name] = acc
	}
	return out, nil
}

// addOpInterval adds o's counts into acc (not its percentiles or
// histogram: Fold and the segments' merge recompute those).
func addOpInterval(acc *OpInterval, o OpInterval) {
	acc.Count += o.Count
	acc.Errors += o.Errors
	acc.Skipped += o.Skipped
	acc.Late += o.Late
	acc.Retries += o.Retries
	acc.Retried += o.Retried
	acc.CutShort += o.CutShort
	acc.Zones.Merge(o.Zones)
	acc.ErrorsBySQLState = addCounts(acc.ErrorsBySQLState, o.ErrorsBySQLState)
}

// Duration is the seconds the point covers, its T minus the previous
// point's prevT: SpanS on a coarse point of a thinned series, else
// T - prevT.
func (iv Interval) Duration(prevT float64) float64 {
	if iv.SpanS > 0 {
		return iv.SpanS
	}
	return iv.T - prevT
}
