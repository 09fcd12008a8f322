package results

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"sort"
	"strings"
	"time"

	"github.com/erplab/erplab/internal/apdex"
)

// Read reads the results at path: a document (X.json) or a stream
// (X.jsonl, recognised by its suffix or by its first line). A stream with
// a summary line gives the summary with the stream's intervals as Series;
// a stream without one (a killed run) gives the document rebuilt from its
// header and intervals, with the extra sections its intervals carried
// (see the package doc). The result passes Validate;
// errors name the file and, for a malformed document, the field.
func Read(path string) (*Document, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("results: %w", err)
	}
	var d *Document
	if strings.HasSuffix(path, ".jsonl") || bytes.HasPrefix(b, []byte(`{"type":`)) {
		c, err := ReadStreamContents(path)
		if err != nil {
			return nil, err
		}
		if c.Summary != nil {
			d = c.Summary
			d.Series = c.Series
		} else if d, err = Rebuild(c.Header, c.Series); err != nil {
			return nil, fmt.Errorf("results: %s: %w", path, err)
		} else {
			d.Extra = withSections(d.Extra, c.Extra)
		}
	} else {
		d = new(Document)
		if err := json.Unmarshal(b, d); err != nil {
			return nil, fmt.Errorf("results: %s: %w", path, err)
		}
	}
	if err := Validate(d); err != nil {
		return nil, fmt.Errorf("results: %s: %w", path, err)
	}
	return d, nil
}

// withSections is extra with the stream's sections added (replacing
// those of the same name).
func withSections(extra, sections map[string]json.RawMessage) map[string]json.RawMessage {
	if len(sections) == 0 {
		return extra
	}
	out := make(map[string]json.RawMessage, len(extra)+len(sections))
	for k, v := range extra {
		out[k] = v
	}
	for k, v := range sections {
		out[k] = v
	}
	return out
}

// headerParams is the part of a header's parameters a rebuild needs.
type headerParams struct {
	WarmupS    float64 `json:"warmup_s"`
	Operations []struct {
		Name     string  `json:"name"`
		TargetMs float64 `json:"target_ms"`
		Priority int     `json:"priority"`
	} `json:"operations"`
}

// Rebuild makes the document of a run that left a stream without a summary
// from the stream's header and intervals (the rules are in the package
// doc). Operations are those of header.Parameters.operations, in order,
// followed by any operation that appears only in the intervals. It fails
// when a histogram in the stream does not decode.
func Rebuild(header *Document, series []Interval) (*Document, error) {
	if header == nil {
		return nil, fmt.Errorf("rebuild: no header")
	}
	d := *header
	d.Series = series
	var p headerParams
	if len(d.Parameters) > 0 {
		if err := json.Unmarshal(d.Parameters, &p); err != nil {
			return nil, fmt.Errorf("rebuild: parameters: %w", err)
		}
	}
	type acc struct {
		res   OpResult
		hist  histMerger
		exact bool // every interval of the op had zones and a histogram
	}
	var order []string
	accs := map[string]*acc{}
	get := func(name string) *acc {
		a := accs[name]
		if a == nil {
			a = &acc{res: OpResult{Name: name}, exact: true}
			accs[name] = a
			order = append(order, name)
		}
		return a
	}
	for _, op := range p.Operations {
		a := get(op.Name)
		a.res.TargetMs, a.res.Priority = op.TargetMs, op.Priority
	}
	var end float64
	for i, iv := range series {
		end = max(end, iv.T)
		names := make([]string, 0, len(iv.Ops))
		for name := range iv.Ops {
			names = append(names, name)
		}
		sort.Strings(names) // new operations in a stable order
		for _, name := range names {
			oi := iv.Ops[name]
			a := get(name)
			a.res.addInterval(oi)
			if oi.Zones.Total() != oi.Count+oi.Skipped+oi.CutShort {
				a.exact = false
			}
			if oi.Histogram == "" {
				if oi.Count > oi.Errors {
					a.exact = false
				}
				continue
			}
			if err := a.hist.add(oi.Histogram, fmt.Sprintf("rebuild: series[%d].ops[%q].histogram_us", i, name)); err != nil {
				return nil, err
			}
		}
	}
	scored := max(end-p.WarmupS, 0)
	d.EndedAt = d.StartedAt.Add(time.Duration(end * float64(time.Second)))
	d.Status = StatusKilled.Because(fmt.Sprintf("stream ended at t=%gs without a summary", end))
	d.Totals = Totals{ScoredSeconds: scored}
	d.Operations = make([]OpResult, 0, len(order))
	allExact := true
	for _, name := range order {
		a := accs[name]
		r := a.res
		target := time.Duration(r.TargetMs * float64(time.Millisecond))
		if a.exact {
			r.Apdex = r.Zones.Score(target)
		} else {
			allExact = false
			r.Zones = apdex.Counts{}
			r.Apdex = apdex.Counts{}.Score(target)
		}
		if a.hist.h != nil && a.exact {
			r.Response, r.Histogram = a.hist.summary(), a.hist.encoded()
		}
		if scored > 0 {
			r.PerSecond = float64(r.Count) / scored
		}
		d.Operations = append(d.Operations, r)
		d.Totals.AddOp(r)
	}
	if scored > 0 {
		d.Totals.PerSecond = float64(d.Totals.Count) / scored
	}
	if !allExact {
		d.Status += " (intervals of schema 1: no APDEX or latencies)"
	}
	v, ok := Integral(d.Operations)
	d.Integral = NewIntegralScore(v, ok)
	stages, err := StageFigures(&d)
	if err != nil {
		return nil, fmt.Errorf("rebuild: %w", err)
	}
	d.Stages = stages
	return &d, nil
}

// addInterval adds an interval's counts, zones and errors by SQLSTATE of
// the operation to r.
func (r *OpResult) addInterval(oi OpInterval) {
	r.Count += oi.Count
	r.Errors += oi.Errors
	r.Skipped += oi.Skipped
	r.Late += oi.Late
	r.Retries += oi.Retries
	r.Retried += oi.Retried
	r.Zones.Merge(oi.Zones)
	if oi.CutShort > 0 {
		if r.CutShort == nil {
			r.CutShort = &CutShort{}
		}
		r.CutShort.Frustrated += oi.CutShort
	}
	r.ErrorsBySQLState = addCounts(r.ErrorsBySQLState, oi.ErrorsBySQLState)
}
