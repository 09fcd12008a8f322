package sampler

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/erplab/erplab/internal/results"
	"github.com/erplab/erplab/internal/storm"
)

// ErrNoObservations is ObservationsOf's error for results without an
// "observations" section (a run with --observe=false, or a killed run's
// stream written before erplab streamed the samples).
var ErrNoObservations = errors.New("the run's results hold no observations")

// ObservationsOf is the "observations" section of a run's results: what
// the run's sampler recorded, per sample (Series, T seconds since the
// run's start), and the storms it detected. A killed run's stream, read
// by results.Read, holds the section its interval lines carried
// (StreamHead, SamplePart, StormsPart): the samples up to the last whole
// line, without cost, statements or locks. top --play and doctor
// --results read a run's timeline through it.
func ObservationsOf(doc *results.Document) (*Observations, error) {
	raw, ok := doc.Extra["observations"]
	if !ok || len(raw) == 0 || string(raw) == "null" {
		return nil, ErrNoObservations
	}
	return ReadObservations(raw)
}

// StreamSection is the name of the observations' section in a results
// stream's parts (results.Part) and in a document's extra.
const StreamSection = "observations"

// StreamHead is the part that opens the observations in a results
// stream: the section's fields, with the storms so far, but the series,
// the failed samples, the cost, the statements and the locks (the last
// three are only in the final document). The samples (SamplePart) and
// the storms (StormsPart) follow as they come, so that ObservationsOf
// reads a killed run's stream as it reads a document.
func (ss *Session) StreamHead() (results.Part, error) {
	o := ss.Snapshot()
	p := results.Part{Section: StreamSection, Set: map[string]json.RawMessage{}}
	for k, v := range map[string]any{"format": o.Format, "interval_s": o.IntervalS, "server": o.Server, "storm_rule": o.StormRule, "xmin_horizon": o.Horizon, "storms": o.Storms} {
		b, err := json.Marshal(v)
		if err != nil {
			return results.Part{}, fmt.Errorf("observations head: %s: %w", k, err)
		}
		p.Set[k] = b
	}
	return p, nil
}

// SamplePart is the part that adds smp to the observations' series, as
// the final document's series holds it.
func SamplePart(smp *Sample) (results.Part, error) {
	b, err := json.Marshal(smp)
	if err != nil {
		return results.Part{}, fmt.Errorf("observations sample at t=%g: %w", smp.T, err)
	}
	return results.Part{Section: StreamSection, Append: map[string][]json.RawMessage{"series": {b}}}, nil
}

// StormsPart is the part that sets the observations' storms to events,
// the storms so far (the last one perhaps going on).
func StormsPart(events []storm.Event) (results.Part, error) {
	if events == nil {
		events = []storm.Event{}
	}
	b, err := json.Marshal(events)
	if err != nil {
		return results.Part{}, fmt.Errorf("observations storms: %w", err)
	}
	return results.Part{Section: StreamSection, Set: map[string]json.RawMessage{"storms": b}}, nil
}
