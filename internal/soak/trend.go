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
	// mean of 0).
	PctPer10Min float64 `json:"pct_per_10min"`
	// Real: the rule finds the trend real and in the metric's bad
	// direction (Rule.Real).
	Real bool `json:"real"`
	// NowMin is the last midpoint, minutes since the start.
	NowMin float64 `json:"now_min"`
}

// Fit is the trend of metric over ws (the windows that hold it), at the
// confidence conf (e.g. 0.999); ok is false with fewer than 3 windows.
func Fit(metric string, ws []Window, conf float64) (Trend, bool) {
	var xs, ys []float64
	for _, w := range ws {
		if v, ok := w.Values[metric]; ok {
			xs = append(xs, (w.FromS+w.ToS)/2/60)
			ys = append(ys, v)
		}
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
		Mean: my, Now: alpha + beta*last, SpanMin: last - xs[0], NowMin: last}
	if my != 0 {
		tr.PctPer10Min = beta * 10 / math.Abs(my) * 100
	}
	return tr, true
}

// Change is the line's change over the fitted span, in the metric's unit.
func (t Trend) Change() float64 { return t.SlopePerMin * t.SpanMin }
