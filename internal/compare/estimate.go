package compare

import (
	"math"
	"math/rand/v2"

	"gonum.org/v1/gonum/stat/distuv"

	"github.com/erplab/erplab/internal/results"
)

// Interval is one figure of a single run with its two-sided confidence
// interval [Lo, Hi] at Level: Lo and Hi are NaN when the run has too few
// scored intervals (MinPoints) or the resamples do not vary.
type Interval struct {
	Value, Lo, Hi float64
}

// Straddles reports whether x lies strictly inside the interval (false
// when there is no interval).
func (i Interval) Straddles(x float64) bool {
	return !math.IsNaN(i.Lo) && i.Lo < x && x < i.Hi
}

// Estimates are a single run's scores with their intervals, from the same
// moving-block bootstrap of the scored intervals that Compare uses for a
// pair of single runs (the bootstrap standard error, value ± z·se; see the
// package doc). APDEX intervals are clipped to [0, 1].
type Estimates struct {
	// Integral is the integral APDEX (priority-weighted).
	Integral Interval
	// Apdex and P95 are per operation by name; P95 in ms, NaN for an
	// operation without a successful execution.
	Apdex map[string]Interval
	P95   map[string]Interval
	// Points is the number of scored intervals resampled.
	Points int
}

// Estimate computes d's Estimates with opts' Replicates and Seed (the
// zero Options use the defaults). Errors: an observation or profile
// section that does not decode, an interval histogram that does not
// decode, invalid opts.
func Estimate(d *results.Document, opts Options) (*Estimates, error) {
	opts, err := opts.norm()
	if err != nil {
		return nil, err
	}
	rd, err := prepare(d)
	if err != nil {
		return nil, err
	}
	type stat struct {
		f        func(s *sel) float64
		set      func(Interval)
		clip     bool
		sum, ss  float64
		n        int
		whole    float64
		testable bool
	}
	out := &Estimates{Apdex: map[string]Interval{}, P95: map[string]Interval{}, Points: len(rd.ivs)}
	stats := []*stat{{f: func(s *sel) float64 { return integralScore(rd, s) }, set: func(i Interval) { out.Integral = i }, clip: true}}
	for _, op := range d.Operations {
		name := op.Name
		stats = append(stats,
			&stat{f: func(s *sel) float64 { return opScore(rd, s, name) }, set: func(i Interval) { out.Apdex[name] = i }, clip: true},
			&stat{f: func(s *sel) float64 { return rd.percentile(s, name, 1) }, set: func(i Interval) { out.P95[name] = i }})
	}
	for _, st := range stats {
		st.whole = st.f(rd.all())
		st.testable = !math.IsNaN(st.whole) && len(rd.ivs) >= MinPoints
	}
	rng := rand.New(rand.NewPCG(opts.Seed, 0x6572706c6162))
	var s sel
	for k := 0; k < opts.Replicates; k++ {
		rd.resample(rng, &s, k+1)
		for _, st := range stats {
			if !st.testable {
				continue
			}
			if v := st.f(&s); !math.IsNaN(v) {
				st.sum += v
				st.ss += v * v
				st.n++
			}
		}
	}
	z := distuv.UnitNormal.Quantile(1 - (1-Level)/2)
	for _, st := range stats {
		iv := Interval{st.whole, nan, nan}
		if st.testable && st.n >= opts.Replicates/2 {
			m := st.sum / float64(st.n)
			se := math.Sqrt(max(st.ss/float64(st.n)-m*m, 0) * float64(st.n) / float64(st.n-1))
			if se > 0 {
				iv.Lo, iv.Hi = st.whole-z*se, st.whole+z*se
				if st.clip {
					iv.Lo, iv.Hi = max(iv.Lo, 0), min(iv.Hi, 1)
				} else {
					// a response time is never negative: the normal
					// interval of a skewed p95 can reach below 0
					iv.Lo = max(iv.Lo, 0)
				}
			}
		}
		st.set(iv)
	}
	return out, nil
}
