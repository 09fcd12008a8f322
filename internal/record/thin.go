package record

import (
	"math"
	"time"

	"github.com/erplab/erplab/internal/results"
)

// thinning is the recorder's bound on its series for runs of hours
// (SetThinning): full resolution for the last horizon and the spans kept
// with KeepFull, one point per coarse window (results.Fold) before.
type thinning struct {
	horizon, coarse float64 // seconds; coarse 0 = off
	done            int     // series[:done] are settled (folded or kept)
	keep            []span  // guarded by Recorder.keepMu
}

type span struct{ from, to float64 }

// SetThinning bounds the series kept in memory (and in the final
// document): intervals older than horizon are folded into one point per
// coarse window of the run (windows [k*coarse, (k+1)*coarse) from the
// start; results.Fold: counts and zones summed, histograms merged, the
// point marked with span_s), except those in a span kept with KeepFull.
// The stream (results.Stream) still gets every interval from Tick. 0 for
// either turns thinning off (the default). Call before the first Tick.
func (r *Recorder) SetThinning(horizon, coarse time.Duration) {
	if horizon <= 0 || coarse <= 0 {
		r.thin.coarse = 0
		return
	}
	r.thin.horizon, r.thin.coarse = horizon.Seconds(), coarse.Seconds()
}

// KeepFull keeps the intervals ending in (fromS, toS] (seconds since the
// start) at full resolution when thinning reaches them (the minutes
// before a soak warning). Intervals already folded stay folded. Safe
// beside Tick.
func (r *Recorder) KeepFull(fromS, toS float64) {
	r.keepMu.Lock()
	defer r.keepMu.Unlock()
	r.thin.keep = append(r.thin.keep, span{fromS, toS})
}

// Kept reports whether the interval (prevT, t] overlaps a span kept
// with KeepFull (the samplers' thinning keeps the same spans: one rule).
// Safe beside Tick.
func (r *Recorder) Kept(prevT, t float64) bool {
	r.keepMu.Lock()
	defer r.keepMu.Unlock()
	for _, s := range r.thin.keep {
		if prevT < s.to && t > s.from {
			return true
		}
	}
	return false
}

// thinSeries folds every coarse window of the series that ended before
// the horizon (see SetThinning). Called by Tick.
func (r *Recorder) thinSeries() {
	th := &r.thin
	if th.coarse == 0 || len(r.series) == 0 {
		return
	}
	cut := r.series[len(r.series)-1].T - th.horizon
	for th.done < len(r.series) {
		i := th.done
		prevT := 0.0
		if i > 0 {
			prevT = r.series[i-1].T
		}
		end := (math.Floor(prevT/th.coarse+1e-9) + 1) * th.coarse
		if end > cut {
			return
		}
		k := i
		for k < len(r.series) && r.series[k].T <= end+1e-9 {
			k++
		}
		if k == i { // an interval longer than the window: settle it as is
			k = i + 1
		}
		folded := r.foldRuns(prevT, r.series[i:k])
		r.series = append(r.series[:i], append(folded, r.series[k:]...)...)
		th.done = i + len(folded)
	}
}

// foldRuns folds the runs of ivs (the one before them ending at prevT)
// that are neither kept nor split by the end of the warm-up; a run of
// one interval stays as it is.
func (r *Recorder) foldRuns(prevT float64, ivs []results.Interval) []results.Interval {
	var out []results.Interval
	from, runStart := prevT, 0
	flush := func(j int) {
		run := ivs[runStart:j]
		if len(run) > 1 {
			if f, err := results.Fold(from, run); err == nil {
				out = append(out, f)
				return
			}
		}
		out = append(out, run...)
	}
	prev := prevT
	for j, iv := range ivs {
		if r.Kept(prev, iv.T) {
			flush(j)
			out = append(out, iv)
			runStart, from = j+1, iv.T
		} else if j > runStart && iv.Warmup != ivs[runStart].Warmup {
			flush(j)
			runStart, from = j, prev
		}
		prev = iv.T
	}
	flush(len(ivs))
	return out
}
