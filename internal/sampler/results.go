package sampler

import (
	"errors"

	"github.com/erplab/erplab/internal/results"
)

// ErrNoObservations is ObservationsOf's error for results without an
// "observations" section (a run with --observe=false, or a killed run's
// stream, which keeps the load's intervals only).
var ErrNoObservations = errors.New("the run's results hold no observations")

// ObservationsOf is the "observations" section of a run's results: what
// the run's sampler recorded, per sample (Series, T seconds since the
// run's start), and the storms it detected. top --play and doctor
// --results read a run's timeline through it.
func ObservationsOf(doc *results.Document) (*Observations, error) {
	raw, ok := doc.Extra["observations"]
	if !ok || len(raw) == 0 || string(raw) == "null" {
		return nil, ErrNoObservations
	}
	return ReadObservations(raw)
}
