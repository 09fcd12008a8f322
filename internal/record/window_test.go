package record

import (
	"testing"
	"time"

	"github.com/erplab/erplab/internal/apdex"
)

// The progress line's window starts afresh at every TakeWindow, while the
// snapshot stays cumulative: a slow first window does not hold the next
// window's p95 or APDEX down.
func TestTakeWindowStartsAfresh(t *testing.T) {
	r := New(testOps(), t0, 0, time.Second)
	// Window 1: a is slow (1 s against T = 100 ms: frustrated) twice.
	r.Record(Sample{Op: 0, Start: t0, DB: time.Second})
	r.Record(Sample{Op: 0, Start: t0, DB: time.Second})
	w1 := r.TakeWindow()
	if w1.Count != 2 || w1.WorstOp != "a" || w1.WorstP95 < 999*time.Millisecond || !w1.ApdexOK || w1.Apdex != 0 {
		t.Fatalf("window 1 %+v", w1)
	}
	// Window 2: a fast twice, b tolerating once (2 s against T = 1 s),
	// one error of b.
	r.Record(Sample{Op: 0, Start: t0, DB: 10 * time.Millisecond})
	r.Record(Sample{Op: 0, Start: t0, DB: 10 * time.Millisecond})
	r.Record(Sample{Op: 1, Start: t0, DB: 2 * time.Second})
	r.Record(Sample{Op: 1, Start: t0, SQLState: "40P01"})
	w2 := r.TakeWindow()
	// a: 1.0 (weight 1), b: 0.25 (weight 0.5): (1 + 0.125) / 1.5 = 0.75.
	if w2.Count != 4 || w2.Errors != 1 || w2.WorstOp != "b" || w2.WorstTarget != time.Second || !w2.ApdexOK || w2.Apdex != 0.75 {
		t.Fatalf("window 2 %+v", w2)
	}
	// Since the start: a 2 satisfied of 4 = 0.5, b 0.25: (0.5 + 0.125) / 1.5.
	if s := r.Snapshot(); s.Count != 6 || s.Apdex != 0.625/1.5 || s.WorstOp != "a" {
		t.Fatalf("snapshot %+v", s)
	}
	// An empty window has no APDEX; a cut-short execution past 4T is in
	// the window's APDEX as frustrated.
	if w3 := r.TakeWindow(); w3.ApdexOK || w3.Count != 0 || w3.WorstOp != "" {
		t.Fatalf("empty window %+v", w3)
	}
	r.RecordCutShort(0, t0, time.Time{}, t0.Add(500*time.Millisecond))
	r.RecordCutShort(1, t0, time.Time{}, t0.Add(500*time.Millisecond))
	if w4 := r.TakeWindow(); !w4.ApdexOK || w4.Apdex != 0 || w4.Count != 0 {
		t.Fatalf("window of one cut-short execution %+v", w4)
	}
	res := r.Results(time.Second)
	if c := res[0].CutShort; c == nil || c.Frustrated != 1 || c.NotScored != 0 || c.FrustratedMaxMs != 500 || res[0].Zones != (apdex.Counts{Satisfied: 2, Frustrated: 3}) {
		t.Fatalf("a: cut short %+v zones %+v", c, res[0].Zones)
	}
	if c := res[1].CutShort; c == nil || c.Frustrated != 0 || c.NotScored != 1 || c.NotScoredMaxMs != 500 || res[1].Zones.Total() != 2 {
		t.Fatalf("b: cut short %+v zones %+v", c, res[1].Zones)
	}
}

// A cut-short execution is scored from its scheduled start in the open
// model, and not at all when it began in the warm-up.
func TestCutShortScheduledAndWarmup(t *testing.T) {
	r := New(testOps(), t0, time.Second, time.Second)
	end := t0.Add(3 * time.Second)
	r.Tick(end.Add(-time.Millisecond)) // the run's intervals up to the end
	// Started at 2.8 s (200 ms before the end, within 4T = 400 ms) but
	// scheduled at 2 s: 1 s late, frustrated.
	r.RecordCutShort(0, t0.Add(2800*time.Millisecond), t0.Add(2*time.Second), end)
	// Began in the warm-up: never scored, however long.
	r.RecordCutShort(0, t0.Add(500*time.Millisecond), time.Time{}, end)
	ivs := r.Finish(end)
	c := r.Results(2 * time.Second)[0].CutShort
	if c == nil || c.Frustrated != 1 || c.FrustratedMaxMs != 1000 || c.NotScored != 1 || c.NotScoredMaxMs != 2500 {
		t.Fatalf("cut short %+v", c)
	}
	if last := ivs[len(ivs)-1].Ops["a"]; last.CutShort != 1 || last.Zones.Frustrated != 1 || last.Count != 0 {
		t.Fatalf("last interval %+v", last)
	}
}
