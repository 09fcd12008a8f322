package sampler

import (
	"math"
	"time"
)

// Thinning bounds a Session's series for runs of hours (run --soak), by
// the rule of the load's series (record.Recorder.SetThinning;
// docs/results-format.md, "Thinned series"): samples older than Horizon
// are folded into one per Coarse window of the run (windows [k*Coarse,
// (k+1)*Coarse) from the start; FoldSamples), except those Kept says
// stay at full resolution (the minutes before a soak warning: pass the
// recorder's Kept, one rule for both series). The results stream still
// gets every sample (OnSample).
type Thinning struct {
	Horizon, Coarse time.Duration
	Kept            func(prevT, t float64) bool
}

// Weight is the number of samples s stands for: Samples on a coarse
// sample of a thinned series, else 1. Every reader that averages or sums
// over samples weights each by it.
func (s *Sample) Weight() float64 { return float64(max(s.Samples, 1)) }

// FoldSamples folds consecutive samples, the one before them at prevT
// seconds, into one coarse sample: T is the last one's, SpanS T - prevT,
// Samples the number folded (their weights summed). The session counts,
// waits, waits per operation and unattributed backends are the weighted
// means over the samples (rounded to whole sessions: a total read back as
// mean times Samples is within half a sample per key of the sum), the
// xmin age and oldest transaction their largest; everything else
// (catalogs, rates, host, CPU split) is the last sample's. ss must not
// be empty.
func FoldSamples(prevT float64, ss []Sample) Sample {
	out := ss[len(ss)-1]
	out.SpanS = round3(out.T - prevT)
	var n float64
	var sess [5]float64
	waits, unatt := map[string]float64{}, 0.0
	opw := map[string]map[string]float64{}
	out.XminAge, out.OldestXactS = 0, 0
	for i := range ss {
		s := &ss[i]
		w := s.Weight()
		n += w
		sess[0] += w * float64(s.Sessions.Active)
		sess[1] += w * float64(s.Sessions.Idle)
		sess[2] += w * float64(s.Sessions.IdleInTransaction)
		sess[3] += w * float64(s.Sessions.IdleInTransactionAborted)
		sess[4] += w * float64(s.Sessions.Other)
		for k, c := range s.Waits {
			waits[k] += w * float64(c)
		}
		for op, m := range s.OpWaits {
			if opw[op] == nil {
				opw[op] = map[string]float64{}
			}
			for k, c := range m {
				opw[op][k] += w * float64(c)
			}
		}
		unatt += w * float64(s.OpUnattributed)
		out.XminAge, out.OldestXactS = max(out.XminAge, s.XminAge), max(out.OldestXactS, s.OldestXactS)
	}
	mean := func(x float64) int { return int(math.Round(x / n)) }
	out.Samples = int(n)
	out.Sessions = Sessions{Active: mean(sess[0]), Idle: mean(sess[1]), IdleInTransaction: mean(sess[2]),
		IdleInTransactionAborted: mean(sess[3]), Other: mean(sess[4])}
	out.Waits = meanCounts(waits, n)
	out.OpWaits = nil
	for op, m := range opw {
		if out.OpWaits == nil {
			out.OpWaits = map[string]map[string]int{}
		}
		out.OpWaits[op] = meanCounts(m, n)
	}
	out.OpUnattributed = mean(unatt)
	return out
}

// meanCounts is sums divided by n, rounded; nil when sums is empty.
func meanCounts(sums map[string]float64, n float64) map[string]int {
	if len(sums) == 0 {
		return nil
	}
	out := make(map[string]int, len(sums))
	for k, v := range sums {
		out[k] = int(math.Round(v / n))
	}
	return out
}

// thinSamples folds every coarse window of series that ended before the
// horizon and is not yet settled (series[:done]), as the recorder thins
// the load's series; it returns the new series (a new array when
// anything was folded: snapshots may hold the old one) and done.
func thinSamples(th *Thinning, series []Sample, done int) ([]Sample, int) {
	if th == nil || th.Coarse <= 0 || th.Horizon <= 0 || len(series) == 0 {
		return series, done
	}
	coarse := th.Coarse.Seconds()
	cut := series[len(series)-1].T - th.Horizon.Seconds()
	for done < len(series) {
		i := done
		prevT := 0.0
		if i > 0 {
			prevT = series[i-1].T
		}
		// The window the first unsettled sample falls in (a sample's t
		// comes a little after its tick, so a sample just past a window's
		// end starts the next window rather than standing alone).
		end := math.Ceil(series[i].T/coarse-1e-9) * coarse
		if end > cut {
			break
		}
		k := i
		for k < len(series) && series[k].T <= end+1e-9 {
			k++
		}
		k = max(k, i+1) // a sample after a gap longer than the window: settled as is
		folded := foldRuns(th, prevT, series[i:k])
		ns := make([]Sample, 0, len(series)-(k-i)+len(folded)+64)
		ns = append(append(append(ns, series[:i]...), folded...), series[k:]...)
		series, done = ns, i+len(folded)
	}
	return series, done
}

// foldRuns folds the runs of ss (the one before them at prevT) that are
// not kept (Thinning.Kept); a run of one sample stays as it is.
func foldRuns(th *Thinning, prevT float64, ss []Sample) []Sample {
	var out []Sample
	from, runStart := prevT, 0
	flush := func(j int) {
		switch run := ss[runStart:j]; {
		case len(run) > 1:
			out = append(out, FoldSamples(from, run))
		default:
			out = append(out, run...)
		}
	}
	prev := prevT
	for j := range ss {
		if th.Kept != nil && th.Kept(prev, ss[j].T) {
			flush(j)
			out = append(out, ss[j])
			runStart, from = j+1, ss[j].T
		}
		prev = ss[j].T
	}
	flush(len(ss))
	return out
}
