package sampler

import (
	"math"
	"testing"
	"time"
)

// synthSample is the sample at second t of a synthetic run: sessions and
// waits that move with t (deterministic), one operation's waits.
func synthSample(t int) Sample {
	a := 3 + t%7
	return Sample{T: float64(t), Elapsed: 1, Sessions: Sessions{Active: a, Idle: 5 - t%3, IdleInTransaction: t % 2},
		Waits:   map[string]int{"CPU": a - t%3, "Lock:transactionid": t % 3, "IO:DataFileRead": (t / 60) % 2},
		OpWaits: map[string]map[string]int{"post_invoice": {"CPU": t % 4, "Lock:transactionid": t % 3}},
		XminAge: t % 500}
}

// TestThinnedObservationsKeepMeans: a 3-hour run sampled every second,
// thinned as run --soak thins it (horizon 1h, window 5m, the 10 minutes
// before a warning at 2h kept), holds at most the last hour, the kept
// span and one sample per window before; and the readers' weighted
// figures (OpWaitTotals, the mean active sessions and waits, the largest
// xmin age) are those of every sample, within the rounding of a coarse
// sample's means (half a session per key).
func TestThinnedObservationsKeepMeans(t *testing.T) {
	const run = 3 * 3600
	th := &Thinning{Horizon: time.Hour, Coarse: 5 * time.Minute, Kept: func(prevT, t float64) bool { return prevT < 7200 && t > 6600 }}
	var full, series []Sample
	done := 0
	for s := 1; s <= run; s++ {
		full = append(full, synthSample(s))
		series = append(series, synthSample(s))
		series, done = thinSamples(th, series, done)
	}
	// 2h before the horizon: 24 windows of 5 min, 2 of them (6600-7200) kept whole.
	if want := 22 + 600 + 3600; len(series) > want+5 || len(series) < want {
		t.Fatalf("%d samples kept of %d, want about %d", len(series), run, want)
	}
	if s := series[0]; s.SpanS != 300 || s.Samples != 300 || s.T != 300 {
		t.Fatalf("first sample: t %g span_s %g samples %d, want t 300 over 300 s and 300 samples", s.T, s.SpanS, s.Samples)
	}
	for _, s := range series {
		if s.T > 6600 && s.T <= 7200 && s.Samples != 0 {
			t.Fatalf("sample at %g in the kept span is coarse (%d samples)", s.T, s.Samples)
		}
	}
	coarse := 0
	n, active, lock, xmin := 0.0, 0.0, 0.0, 0
	for _, s := range series {
		if s.Samples > 0 {
			coarse++
		}
		n += s.Weight()
		active += s.Weight() * float64(s.Sessions.Active)
		lock += s.Weight() * float64(s.Waits["Lock:transactionid"])
		xmin = max(xmin, s.XminAge)
	}
	if n != run {
		t.Fatalf("weights sum to %g, want %d samples", n, run)
	}
	fa, fl := 0.0, 0.0
	for _, s := range full {
		fa += float64(s.Sessions.Active)
		fl += float64(s.Waits["Lock:transactionid"])
	}
	if math.Abs(active-fa)/run > 0.5 || math.Abs(lock-fl)/run > 0.5 || xmin != 499 {
		t.Fatalf("weighted means: active %.3f lock %.3f xmin %d; every sample: %.3f %.3f 499", active/run, lock/run, xmin, fa/run, fl/run)
	}
	got, want := (&Observations{Series: series}).OpWaitTotals(), (&Observations{Series: full}).OpWaitTotals()
	for k, w := range want["post_invoice"] {
		if g := got["post_invoice"][k]; math.Abs(float64(g-w)) > 150*float64(coarse) {
			t.Errorf("OpWaitTotals post_invoice %s: %d, want %d within %d", k, g, w, 150*coarse)
		}
		if g := got["post_invoice"][k]; float64(g) < 0.9*float64(w) {
			t.Errorf("OpWaitTotals post_invoice %s: %d, unweighted? want about %d", k, g, w)
		}
	}
}

// TestLockFiguresBounded: a soak's hours of backend-samples keep one
// count per number of locks held, not one entry per backend-sample, with
// the same percentiles.
func TestLockFiguresBounded(t *testing.T) {
	a := &lockAgg{}
	for i := range 100000 {
		a.add(BackendLocks{FastPath: 1 + i%5, Outside: i % 2})
	}
	l := a.summary("post_invoice")
	if len(a.held)+len(a.outside) > 8 || l.Samples != 100000 || l.HeldP50 != 3 || l.HeldP95 != 6 || l.OutsideP50 != 0 || l.OutsideP95 != 1 {
		t.Fatalf("%d held and %d outside entries kept; figures %+v", len(a.held), len(a.outside), l)
	}
}

// TestThinnedObservationsLateTicks: samples taken a few milliseconds
// after their tick fold whole windows, no sample left alone at a
// window's start.
func TestThinnedObservationsLateTicks(t *testing.T) {
	th := &Thinning{Horizon: 10 * time.Minute, Coarse: time.Minute}
	var series []Sample
	done := 0
	for s := 0; s < 3600; s++ {
		smp := synthSample(s)
		smp.T = float64(s) + 0.001*float64(1+s%7)
		series = append(series, smp)
		series, done = thinSamples(th, series, done)
	}
	for _, s := range series {
		if s.T < 2400 && s.Samples != 60 {
			t.Fatalf("sample at %g stands for %d samples, want a whole minute's 60", s.T, s.Samples)
		}
	}
}
