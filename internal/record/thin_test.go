package record

import (
	"testing"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"

	"github.com/erplab/erplab/internal/apdex"
	"github.com/erplab/erplab/internal/results"
)

// feed runs the one-second intervals from..to (seconds since t0)
// through r: per second a few samples of both operations whose times
// vary with the second, a retried error every 7th second.
func feed(r *Recorder, from, to int) {
	for s := from; s < to; s++ {
		at := t0.Add(time.Duration(s)*time.Second + 100*time.Millisecond)
		for k := range 3 {
			r.Record(Sample{Op: 0, Start: at, DB: time.Duration(1+(s*7+k*13)%400) * time.Millisecond})
		}
		r.Record(Sample{Op: 1, Start: at, DB: time.Duration(10+(s*31)%3000) * time.Millisecond})
		if s%7 == 0 {
			r.Record(Sample{Op: 1, Start: at, SQLState: "40001", Retries: 1})
		}
		r.SetGauges(4, s%3, 2)
		r.Tick(t0.Add(time.Duration(s+1) * time.Second))
	}
}

// sums is what thinning must keep exact over a span: counts, errors,
// zones, errors by SQLSTATE and the merged response-time histogram.
type sums struct {
	count, errors, retries, waitersMax int64
	zones                              map[string]apdex.Counts
	states                             map[string]int64
	hists                              map[string]*hdrhistogram.Histogram
}

func sumSeries(t *testing.T, ivs []results.Interval, fromT, toT float64) sums {
	t.Helper()
	s := sums{zones: map[string]apdex.Counts{}, states: map[string]int64{}, hists: map[string]*hdrhistogram.Histogram{}}
	for _, iv := range ivs {
		if iv.T <= fromT || iv.T > toT {
			continue
		}
		s.count += iv.Count
		s.errors += iv.Errors
		s.waitersMax = max(s.waitersMax, iv.PoolWaitersMax)
		for name, oi := range iv.Ops {
			z := s.zones[name]
			z.Merge(oi.Zones)
			s.zones[name] = z
			s.retries += oi.Retries
			for k, v := range oi.ErrorsBySQLState {
				s.states[k] += v
			}
			if oi.Histogram == "" {
				continue
			}
			h, err := hdrhistogram.Decode([]byte(oi.Histogram))
			if err != nil {
				t.Fatal(err)
			}
			if s.hists[name] == nil {
				s.hists[name] = h
			} else {
				s.hists[name].Merge(h)
			}
		}
	}
	return s
}

func TestThinningKeepsTotalsExact(t *testing.T) {
	full := New(testOps(), t0, 0, time.Second)
	thin := New(testOps(), t0, 0, time.Second)
	thin.SetThinning(2*time.Minute, time.Minute)
	thin.KeepFull(300, 330) // a warning's minutes: seconds 301..330 stay
	feed(full, 0, 600)
	feed(thin, 0, 600)
	a, b := full.Series(), thin.Series()
	if len(a) != 600 {
		t.Fatalf("unthinned series has %d points, want 600", len(a))
	}
	// 8 minutes before the horizon: 8 coarse points, except minute 5
	// (300-360 s), whose seconds 301..330 are kept and the rest folded;
	// then 120 full points.
	coarse, fine := 0, 0
	prev := 0.0
	for _, iv := range b {
		switch {
		case iv.SpanS > 0:
			coarse++
			if d := iv.T - prev; d != iv.SpanS {
				t.Fatalf("point at %g s: span_s %g, but %g s since the previous point", iv.T, iv.SpanS, d)
			}
		case iv.T-prev != 1:
			t.Fatalf("full point at %g s after %g", iv.T, prev)
		default:
			fine++
		}
		prev = iv.T
	}
	if coarse != 8 || fine != 30+120 {
		t.Fatalf("thinned series: %d coarse, %d full points; want 8, 150", coarse, fine)
	}
	for _, w := range [][2]float64{{0, 600}, {0, 60}, {240, 300}, {300, 360}, {120, 480}} {
		x, y := sumSeries(t, a, w[0], w[1]), sumSeries(t, b, w[0], w[1])
		if x.count != y.count || x.errors != y.errors || x.retries != y.retries || x.waitersMax != y.waitersMax || x.count == 0 {
			t.Fatalf("%v: count/errors/retries/waiters max %d/%d/%d/%d thinned %d/%d/%d/%d", w, x.count, x.errors, x.retries, x.waitersMax, y.count, y.errors, y.retries, y.waitersMax)
		}
		if x.states["40001"] != y.states["40001"] {
			t.Fatalf("%v: 40001 %d, thinned %d", w, x.states["40001"], y.states["40001"])
		}
		for _, op := range []string{"a", "b"} {
			if x.zones[op] != y.zones[op] {
				t.Fatalf("%v %s: zones %+v, thinned %+v", w, op, x.zones[op], y.zones[op])
			}
			for _, q := range []float64{50, 95, 99, 100} {
				if p, r := x.hists[op].ValueAtQuantile(q), y.hists[op].ValueAtQuantile(q); p != r {
					t.Fatalf("%v %s: p%g %d µs, thinned %d µs", w, op, q, p, r)
				}
			}
		}
	}
	// a coarse point's own percentiles are those of its span
	for _, iv := range b {
		if iv.SpanS == 0 {
			continue
		}
		s := sumSeries(t, a, iv.T-iv.SpanS, iv.T)
		if want := float64(s.hists["a"].ValueAtQuantile(95)) / 1000; iv.Ops["a"].P95 != want {
			t.Fatalf("coarse point at %g s: a p95 %g ms, want %g", iv.T, iv.Ops["a"].P95, want)
		}
	}
}

// TestThinningBoundsTheSeries: a run of three 10-minute periods fed
// to a recorder with a 2-minute horizon and 1-minute windows keeps 120
// full points and 10 coarse points a period (a soak's hour, scaled
// down), not 600 points a period.
func TestThinningBoundsTheSeries(t *testing.T) {
	r := New(testOps(), t0, 0, time.Second)
	r.SetThinning(2*time.Minute, time.Minute)
	var n []int
	for p := range 3 {
		feed(r, p*600, (p+1)*600)
		n = append(n, len(r.Series()))
	}
	// after the first period: 8 minutes folded into 8 points + 120 full
	if n[0] != 128 || n[1] != 138 || n[2] != 148 {
		t.Fatalf("points after each period: %v, want [128 138 148]", n)
	}
	if iv := r.Series()[0]; iv.SpanS != 60 || iv.Count != 60*4+9 {
		t.Fatalf("first point: span_s %g, %d executions; want 60 s, %d", iv.SpanS, iv.Count, 60*4+9)
	}
}
