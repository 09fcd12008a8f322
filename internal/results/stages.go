package results

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/erplab/erplab/internal/apdex"
)

// StageResult holds the figures of one step of the load profile
// (parameters.stages), computed exactly from the intervals (Interval.Ops
// zones, histograms and counts) whose end lies in the step.
type StageResult struct {
	// Stage is the step's index in parameters.stages, from 1.
	Stage int `json:"stage"`
	// StartS and EndS bound the step in seconds since the start; the last
	// step also holds the intervals after its end (executions finishing in
	// the graceful stop), so EndS of the last step is the run's last
	// interval when that lies later.
	StartS float64 `json:"t_start_s"`
	EndS   float64 `json:"t_end_s"`
	// FromVUs is the VU count at the start of the step (the previous
	// step's target, 0 before the first); TargetVUs the count it moves to
	// linearly.
	FromVUs   int `json:"from_vus"`
	TargetVUs int `json:"target_vus"`
	// ScoredSeconds is the step's time outside the warm-up that its
	// intervals cover; PerSecond is Count over it.
	ScoredSeconds float64 `json:"scored_seconds"`
	Count         int64   `json:"count"`
	Errors        int64   `json:"errors"`
	PerSecond     float64 `json:"per_second"`
	// Operations are the key operations in the document's order.
	Operations []StageOp `json:"operations"`
	// Integral is the integral APDEX of the step's operation scores.
	Integral IntegralScore `json:"apdex_integral"`
}

// StageOp is one key operation within one step of the load profile.
type StageOp struct {
	Name   string `json:"name"`
	Count  int64  `json:"count"`
	Errors int64  `json:"errors"`
	// Skipped and CutShort (frustrated cut-short executions) count in the
	// zones, not in Count.
	Skipped   int64        `json:"skipped,omitempty"`
	CutShort  int64        `json:"cut_short,omitempty"`
	PerSecond float64      `json:"per_second"`
	Zones     apdex.Counts `json:"zones"`
	Apdex     apdex.Score  `json:"apdex"`
	// Response summarises the merged histograms of the step's intervals:
	// the same figures the whole run's Response gives for its executions.
	Response Latency `json:"response"`
}

// stageParams is the part of the parameters StageFigures needs.
type stageParams struct {
	WarmupS float64 `json:"warmup_s"`
	Stages  []struct {
		DurationS float64 `json:"duration_s"`
		Target    int     `json:"target_vus"`
	} `json:"stages"`
}

// StageFigures computes the per-step figures of d from its parameters
// (stages, warmup_s), its operations (names, targets, priorities) and its
// series. Steps of zero duration (a jump to a VU count) have no time and
// no figures; when fewer than two steps last, the result is nil (the
// whole run is the step). An interval belongs to the step in which it
// ends (t in (start, end]); those ending after the last step belong to it.
// The figures sum and merge exactly: over the steps, counts, zones and
// histograms equal the operations' whole-run figures. It fails when the
// parameters do not parse or a histogram does not decode; intervals of
// schema 1 (no zones or histograms) give counts only.
func StageFigures(d *Document) ([]StageResult, error) {
	var p stageParams
	if len(d.Parameters) > 0 {
		if err := json.Unmarshal(d.Parameters, &p); err != nil {
			return nil, fmt.Errorf("stages: parameters: %w", err)
		}
	}
	type span struct {
		index      int
		start, end float64
		from, to   int
	}
	var spans []span
	t, prev := 0.0, 0
	for i, s := range p.Stages {
		if s.DurationS > 0 {
			spans = append(spans, span{index: i + 1, start: t, end: t + s.DurationS, from: prev, to: s.Target})
		}
		t += s.DurationS
		prev = s.Target
	}
	if len(spans) < 2 {
		return nil, nil
	}
	out := make([]StageResult, len(spans))
	for k, sp := range spans {
		out[k] = StageResult{Stage: sp.index, StartS: sp.start, EndS: sp.end, FromVUs: sp.from, TargetVUs: sp.to}
	}
	k := 0
	err := figures(d, out, p.WarmupS, func(t float64) int {
		for k < len(spans)-1 && t > spans[k].end {
			k++
		}
		return k
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// SpanFigures are the figures of the intervals of d that end in (from,
// to], seconds since the start, as StageFigures computes a step's
// (Stage 0, StartS from, EndS to; warm-up intervals count, unscored
// time aside). It fails when a histogram does not decode.
func SpanFigures(d *Document, from, to float64) (StageResult, error) {
	var p stageParams
	if len(d.Parameters) > 0 {
		if err := json.Unmarshal(d.Parameters, &p); err != nil {
			return StageResult{}, fmt.Errorf("span: parameters: %w", err)
		}
	}
	out := []StageResult{{StartS: from, EndS: to}}
	err := figures(d, out, p.WarmupS, func(t float64) int {
		if t <= from || t > to {
			return -1
		}
		return 0
	})
	return out[0], err
}

// figures fills out (spans with their bounds set) from d's series: each
// interval goes to the span in(t) names (-1: none), in order of t.
func figures(d *Document, out []StageResult, warmupS float64, in func(t float64) int) error {
	type opAcc struct {
		res  StageOp
		hist histMerger
	}
	accs := make([][]opAcc, len(out))
	index := map[string]int{}
	for i, op := range d.Operations {
		index[op.Name] = i
	}
	for k := range out {
		accs[k] = make([]opAcc, len(d.Operations))
		for i, op := range d.Operations {
			accs[k][i].res.Name = op.Name
		}
	}
	prevT := 0.0
	for n, iv := range d.Series {
		k := in(iv.T)
		if k < 0 {
			prevT = iv.T
			continue
		}
		st := &out[k]
		st.EndS = max(st.EndS, iv.T)
		st.ScoredSeconds += max(iv.T-max(prevT, warmupS), 0)
		prevT = iv.T
		for name, oi := range iv.Ops {
			i, ok := index[name]
			if !ok {
				continue
			}
			a := &accs[k][i]
			a.res.Count += oi.Count
			a.res.Errors += oi.Errors
			a.res.Skipped += oi.Skipped
			a.res.CutShort += oi.CutShort
			a.res.Zones.Merge(oi.Zones)
			st.Count += oi.Count
			st.Errors += oi.Errors
			if oi.Histogram == "" {
				continue
			}
			if err := a.hist.add(oi.Histogram, fmt.Sprintf("stages: series[%d].ops[%q].histogram_us", n, name)); err != nil {
				return err
			}
		}
	}
	for k := range out {
		st := &out[k]
		ws := make([]apdex.Weighted, 0, len(d.Operations))
		for i, op := range d.Operations {
			a := accs[k][i]
			r := a.res
			r.Apdex = r.Zones.Score(time.Duration(op.TargetMs * float64(time.Millisecond)))
			r.Response = a.hist.summary()
			if st.ScoredSeconds > 0 {
				r.PerSecond = float64(r.Count) / st.ScoredSeconds
			}
			st.Operations = append(st.Operations, r)
			ws = append(ws, apdex.Weighted{Score: r.Apdex, Priority: op.Priority})
		}
		if st.ScoredSeconds > 0 {
			st.PerSecond = float64(st.Count) / st.ScoredSeconds
		}
		v, ok := apdex.Integral(ws)
		st.Integral = NewIntegralScore(v, ok)
	}
	return nil
}
