package results

import (
	"reflect"
	"testing"

	"github.com/HdrHistogram/hdrhistogram-go"

	"github.com/erplab/erplab/internal/apdex"
)

// A recorded run of `--stage 0s:2 --stage 4s:2 --stage 4s:8`: the two
// lasting steps get figures that add up exactly to the whole run, and
// computing them again from the series gives what the run wrote.
func TestStageFiguresOfRecordedRun(t *testing.T) {
	doc, err := Read("testdata/stages.json")
	if err != nil {
		t.Fatal(err)
	}
	got, err := StageFigures(doc)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, doc.Stages) {
		t.Fatalf("recomputed stages differ from the file's:\n%+v\n%+v", got, doc.Stages)
	}
	if len(got) != 2 || got[0].Stage != 2 || got[0].StartS != 0 || got[0].EndS != 4 || got[0].FromVUs != 2 || got[0].TargetVUs != 2 ||
		got[1].Stage != 3 || got[1].StartS != 4 || got[1].FromVUs != 2 || got[1].TargetVUs != 8 {
		t.Fatalf("steps %+v", got)
	}
	// The last step holds the intervals of the graceful stop.
	if last := doc.Series[len(doc.Series)-1].T; got[1].EndS != last || last <= 8 {
		t.Fatalf("last step ends at %v, last interval at %v", got[1].EndS, last)
	}
	if s := got[0].ScoredSeconds + got[1].ScoredSeconds; s != doc.Series[len(doc.Series)-1].T {
		t.Fatalf("scored seconds %v", s)
	}
	for i, op := range doc.Operations {
		var n, e int64
		var z apdex.Counts
		for _, st := range got {
			so := st.Operations[i]
			if so.Name != op.Name {
				t.Fatalf("step %d operation %d is %s, want %s", st.Stage, i, so.Name, op.Name)
			}
			n, e = n+so.Count, e+so.Errors
			z.Merge(so.Zones)
			if so.Apdex != so.Zones.Score(op.Apdex.Target) {
				t.Fatalf("%s step %d: APDEX %+v from zones %+v", op.Name, st.Stage, so.Apdex, so.Zones)
			}
		}
		if n != op.Count || e != op.Errors || z != op.Zones {
			t.Fatalf("%s: steps sum to %d/%d/%+v, the run has %d/%d/%+v", op.Name, n, e, z, op.Count, op.Errors, op.Zones)
		}
	}
	// order_list ran only in the second step: NS in the first, and the
	// step's integral leaves it out.
	if !got[0].Operations[1].Apdex.NS() || got[1].Operations[1].Count != doc.Operations[1].Count {
		t.Fatalf("order_list per step: %+v / %+v", got[0].Operations[1], got[1].Operations[1])
	}
	// A step's percentiles are those of the merged interval histograms:
	// the second step's hour_report is all of the run's.
	h, err := hdrhistogram.Decode([]byte(doc.Operations[4].Histogram))
	if err != nil {
		t.Fatal(err)
	}
	if r := got[1].Operations[4].Response; r != Summarize(h) {
		t.Fatalf("hour_report step 3 %+v, run %+v", r, Summarize(h))
	}
	// The stream of the run killed before its summary rebuilds the same
	// steps.
	k, err := Read("testdata/stages-killed.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(k.Stages, doc.Stages) {
		t.Fatalf("rebuilt steps differ:\n%+v\n%+v", k.Stages, doc.Stages)
	}
	// A one-step run has none.
	if st, err := Read("testdata/complete.jsonl"); err != nil || st.Stages != nil {
		t.Fatalf("a one-step run has steps %+v (%v)", st.Stages, err)
	}
}

// TestSpanFigures: the figures of any span are those of the intervals
// ending in it: the run's two steps give its stages' figures again.
func TestSpanFigures(t *testing.T) {
	doc, err := Read("testdata/stages.json")
	if err != nil {
		t.Fatal(err)
	}
	for _, st := range doc.Stages {
		from := st.StartS
		if from == 0 {
			from = -1 // the first step holds the intervals from the start
		}
		got, err := SpanFigures(doc, from, st.EndS)
		if err != nil {
			t.Fatal(err)
		}
		if got.Count != st.Count || !reflect.DeepEqual(got.Operations, st.Operations) || got.Integral != st.Integral {
			t.Errorf("span %g-%g: %+v, want stage %+v", from, st.EndS, got, st)
		}
	}
}
