package soak

import (
	"math"

	"gonum.org/v1/gonum/stat"
	"gonum.org/v1/gonum/stat/distuv"
)

// Trend is one metric's straight line over a run of windows: ordinary
// least squares of the windows' values on their midpoints in minutes,
// with the slope's confidence interval from Student's t (n-2 degrees of
// freedom).
type Trend struct {
	Metric string `json:"metric"`
	N      int    `json:"n"`
	// SlopePerMin is the slope in the metric's unit per minute; Lo and Hi
	// bound it at the rule's confidence.
	SlopePerMin float64 `json:"slope_per_min"`
	LoPerMin    float64 `json:"lo_per_min"`
	HiPerMin    float64 `json:"hi_per_min"`
	// Mean is the values' mean; Now the line's value at the last window's
	// midpoint (the projections start from it); SpanMin the minutes
	// between the first and last midpoints.
	Mean    float64 `json:"mean"`
	Now     float64 `json:"now"`
	SpanMin float64 `json:"span_min"`
	// PctPer10Min is the slope as % of the mean per 10 minutes (0 for a
	// mean of 0); of a log fit, the instantaneous rate (Pct).
	PctPer10Min float64 `json:"pct_per_10min"`
	// Real: the rule finds the trend real and in the metric's bad
	// direction (Rule.Real).
	Real bool `json:"real"`
	// NowMin is the last midpoint, minutes since the start.
	NowMin float64 `json:"now_min"`
	// Log: the line was fitted to the values' logarithms (latencies,
	// whose noise is a factor): SlopePerMin, LoPerMin and HiPerMin are
	// then in ln units per minute (0.1 = +10 %/min instantaneous, +10.5 %
	// over the minute); Mean and Now stay
	// in the metric's unit.
	Log bool `json:"log,omitempty"`
}

// Fit is the trend of metric over ws (the windows that hold it), at the
// confidence conf (e.g. 0.999), of the values' logarithms with log (the
// windows without a positive value left out); ok is false with fewer
// than 3 windows.
func Fit(metric string, ws []Window, conf float64, log bool) (Trend, bool) {
	var xs, ys []float64
	for _, w := range ws {
		v, ok := w.Values[metric]
		if !ok || log && v <= 0 {
			continue
		}
		if log {
			v = math.Log(v)
		}
		xs = append(xs, (w.FromS+w.ToS)/2/60)
		ys = append(ys, v)
	}
	n := len(xs)
	if n < 3 {
		return Trend{}, false
	}
	alpha, beta := stat.LinearRegression(xs, ys, nil, false)
	mx, my := stat.Mean(xs, nil), stat.Mean(ys, nil)
	var sxx, sse float64
	for i := range xs {
		sxx += (xs[i] - mx) * (xs[i] - mx)
		r := ys[i] - (alpha + beta*xs[i])
		sse += r * r
	}
	if sxx == 0 {
		return Trend{}, false
	}
	se := math.Sqrt(sse / float64(n-2) / sxx)
	t := distuv.StudentsT{Mu: 0, Sigma: 1, Nu: float64(n - 2)}.Quantile(1 - (1-conf)/2)
	last := xs[n-1]
	tr := Trend{Metric: metric, N: n, SlopePerMin: beta, LoPerMin: beta - t*se, HiPerMin: beta + t*se,
		Mean: my, Now: alpha + beta*last, SpanMin: last - xs[0], NowMin: last, Log: log}
	switch {
	case log:
		tr.Mean, tr.Now = 0, math.Exp(tr.Now)
		for _, y := range ys {
			tr.Mean += math.Exp(y) / float64(n)
		}
		tr.PctPer10Min = beta * 10 * 100
	case my != 0:
		tr.PctPer10Min = beta * 10 / math.Abs(my) * 100
	}
	return tr, true
}

// Change is the line's change over the fitted span, in the metric's unit.
func (t Trend) Change() float64 {
	if t.Log {
		return t.Now - t.Now*math.Exp(-t.SlopePerMin*t.SpanMin)
	}
	return t.SlopePerMin * t.SpanMin
}

// Pct is a slope of the trend (its SlopePerMin, LoPerMin or HiPerMin)
// as % of the mean over per minutes; of a log fit, the instantaneous
// rate (100 times the log slope: +30 %/min grows 35 % in a minute).
func (t Trend) Pct(slope, per float64) float64 {
	if t.Log {
		return slope * per * 100
	}
	if t.Mean == 0 {
		return 0
	}
	return slope * per / math.Abs(t.Mean) * 100
}

// MinutesTo is when the line reaches v from Now at its slope (negative
// or infinite when it moves away).
func (t Trend) MinutesTo(v float64) float64 {
	if t.Log {
		return math.Log(v/t.Now) / t.SlopePerMin
	}
	return (v - t.Now) / t.SlopePerMin
}
