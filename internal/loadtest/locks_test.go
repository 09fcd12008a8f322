package loadtest_test

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/erplab/erplab/internal/loadtest"
	"github.com/erplab/erplab/internal/results"
	"github.com/erplab/erplab/internal/sampler"
)

// The run's summary prints the relation locks each key operation held,
// one line each, most first, after the observations (pure: a document
// built here).
func TestPrintObservationsLocks(t *testing.T) {
	o := sampler.Observations{Format: sampler.ObservationsFormat, Series: []sampler.Sample{}, Locks: &sampler.Locks{FastPathSlots: 16, Operations: []sampler.OpLocks{
		{Operation: "document_form", Samples: 120, HeldMax: 51, HeldMaxOutside: 35, HeldP50: 40, HeldP95: 51, OutsideMax: 35, OutsideP50: 24, OutsideP95: 35},
		{Operation: "item_lookup", Samples: 7, HeldMax: 3, HeldP50: 3, HeldP95: 3},
	}}}
	raw, err := json.Marshal(o)
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	loadtest.PrintObservations(&out, &results.Document{Extra: map[string]json.RawMessage{"observations": raw}})
	const want = `relation locks per key operation (pg_locks, each backend running it at a sample):
  document_form holds up to 51 relation locks, 35 outside the 16 fast-path slots (median 40, 24 outside; p95 51, 35 outside; 120 backend-samples)
  item_lookup holds up to 3 relation locks, 0 outside the 16 fast-path slots (median 3, 0 outside; p95 3, 0 outside; 7 backend-samples)
`
	if out.String() != want {
		t.Errorf("got\n%s\nwant\n%s", out.String(), want)
	}
}
