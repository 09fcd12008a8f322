package sampler

import (
	"context"
	"sync/atomic"
	"testing"
	"time"
)

// TestSessionThinning: a session sampling a real server every 100 ms
// with a 1 s horizon and 500 ms windows keeps the samples before the
// horizon folded (each marked with its span and count), while OnSample
// (the results stream) sees every sample; the weights add up to them.
func TestSessionThinning(t *testing.T) {
	dsn := srv.NewDatabase(t)
	var seen atomic.Int64
	ss, err := Start(context.Background(), dsn, time.Now(), SessionOptions{Interval: 100 * time.Millisecond,
		Thinning: &Thinning{Horizon: time.Second, Coarse: 500 * time.Millisecond},
		OnSample: func(*Sample) { seen.Add(1) }})
	if err != nil {
		t.Fatal(err)
	}
	defer ss.Stop()
	coarse := func() int {
		n := 0
		for _, s := range ss.Snapshot().Series {
			if s.Samples > 0 {
				n++
			}
		}
		return n
	}
	waitFor(t, "three coarse samples", func() bool { return coarse() >= 3 })
	ss.Stop()
	o := ss.Snapshot()
	w := 0.0
	for _, s := range o.Series {
		w += s.Weight()
		if s.Samples > 0 && (s.SpanS <= 0 || s.SpanS > 1) {
			t.Errorf("coarse sample at %g: span_s %g, want about a 500 ms window", s.T, s.SpanS)
		}
	}
	if int64(w) != seen.Load() || int64(w) != o.Cost.Samples || len(o.Series) >= int(w) {
		t.Fatalf("%d samples kept standing for %g, %d sampled (OnSample %d)", len(o.Series), w, o.Cost.Samples, seen.Load())
	}
}
